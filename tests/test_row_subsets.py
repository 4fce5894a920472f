"""The random row subsets that sums over a big table's rows are read from."""

import numpy as np

from sklearn_quinn._core import row_subsets
from sklearn_quinn._core.row_subsets import random_rows, random_subset


def test_random_rows_are_sorted_distinct_rows_of_the_table():
    """``n_chosen`` of ``n_rows`` rows without replacement, in increasing order, the same for a
    seed; every row, in order, when all are chosen."""
    rows = random_rows(50, 20, seed=7)
    assert len(rows) == 20 and np.all(np.diff(rows) > 0) and rows.min() >= 0 and rows.max() < 50
    np.testing.assert_array_equal(rows, random_rows(50, 20, seed=7))
    np.testing.assert_array_equal(random_rows(12, 12, seed=7), np.arange(12))


def test_a_random_subset_keeps_each_row_s_targets_and_weighs_rows_by_the_table_s_share(monkeypatch):
    """Above ``SUBSET_ROWS`` rows the subset is ``SUBSET_ROWS`` distinct rows of the table, each
    with its own targets (here a function of its inputs), in the table's order, and each stands
    for exactly ``N / SUBSET_ROWS`` rows; at ``SUBSET_ROWS`` rows, the table itself with weight 1."""
    monkeypatch.setattr(row_subsets, "SUBSET_ROWS", 8)
    X = np.arange(30.0)[:, None] * np.array([[1.0, -1.0]])
    Y = 3.0 * X[:, :1] + 1.0
    X_rows, Y_rows, row_weight = random_subset(X, Y, seed=0)
    assert row_weight == 30 / 8
    assert X_rows.shape == (8, 2) and Y_rows.shape == (8, 1)
    np.testing.assert_array_equal(Y_rows, 3.0 * X_rows[:, :1] + 1.0)
    assert np.all(np.diff(X_rows[:, 0]) > 0)
    X_all, Y_all, weight = random_subset(X[:8], Y[:8], seed=0)
    assert weight == 1.0 and np.array_equal(X_all, X[:8]) and np.array_equal(Y_all, Y[:8])
