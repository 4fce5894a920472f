"""The UCI split loader, on the shared benchmark data when present and on a
tiny folder written by the test otherwise; the heteroscedastic toy data."""

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from sklearn_quinn.datasets import (
    load_uci_reference,
    load_uci_split,
    make_heteroscedastic_wave,
    uci_n_splits,
)

from .uci_folders import write_uci_set

SHARED_UCI = Path(__file__).resolve().parents[2] / "shared" / "data" / "uci"


@pytest.fixture
def tiny_uci(tmp_path):
    data = np.arange(20.0).reshape(5, 4)
    write_uci_set(tmp_path / "yacht", data, [([0, 2, 4], [1, 3])])
    return tmp_path, data


def test_split_rows_and_columns(tiny_uci):
    data_dir, data = tiny_uci
    X_train, X_test, y_train, y_test = load_uci_split(data_dir, "yacht", 0)
    np.testing.assert_array_equal(X_train, data[[0, 2, 4], :3])
    np.testing.assert_array_equal(y_test, data[[1, 3], 3])
    assert uci_n_splits(data_dir, "yacht") == 1


def test_bad_requests(tiny_uci):
    data_dir, _ = tiny_uci
    with pytest.raises(ValueError, match="Unknown UCI data set 'titanic'"):
        load_uci_split(data_dir, "titanic", 0)
    for split in (1, 0.5, True, "0"):
        with pytest.raises(ValueError, match="split must be in"):
            load_uci_split(data_dir, "yacht", split)
    with pytest.raises(ValueError, match="data.txt is missing"):
        load_uci_split(data_dir, "concrete", 0)


@pytest.mark.skipif(not SHARED_UCI.is_dir(), reason="shared UCI data not present")
def test_shared_concrete_split():
    X_train, X_test, y_train, y_test = load_uci_split(SHARED_UCI, "concrete", 0)
    assert X_train.shape == (927, 8) and X_test.shape == (103, 8)
    assert uci_n_splits(SHARED_UCI, "concrete") == 20


def test_reference_tables_from_the_readme(tmp_path):
    (tmp_path / "README.md").write_text(
        "Intro\n\n| data set | VI (2015) | MC dropout, 2018 re-run |\n|---|---|---|\n"
        "| yacht | -3.43 ± 0.16 | -1.25 ± 0.01 |\n\nText\n\n"
        "| data set | VI | MC dropout 2018 |\n|---|---|---|\n| yacht | 6.89 ± 0.67 | 0.67 ± 0.05 |\n"
    )
    reference = load_uci_reference(tmp_path)
    assert reference["log_likelihood"]["yacht"] == {"VI": (-3.43, 0.16), "MC dropout 2018": (-1.25, 0.01)}
    assert reference["rmse"]["yacht"]["MC dropout 2018"] == (0.67, 0.05)
    with pytest.raises(ValueError, match="README.md is missing"):
        load_uci_reference(tmp_path / "nowhere")


@pytest.mark.skipif(not SHARED_UCI.is_dir(), reason="shared UCI data not present")
def test_shared_reference_tables_cover_every_data_set():
    reference = load_uci_reference(SHARED_UCI)
    for table in reference.values():
        assert set(table) == {"boston", "concrete", "energy", "kin8nm", "naval", "power", "protein", "wine", "yacht"}
        assert set(table["yacht"]) == {"VI", "PBP", "MC dropout", "MC dropout 2018", "Deep ensembles"}


def test_the_heteroscedastic_wave_is_a_sine_with_noise_growing_with_the_input():
    X, y, noise_std = make_heteroscedastic_wave(20000, random_state=0, return_noise_std=True)
    x = X[:, 0]
    assert X.shape == (20000, 1) and y.shape == noise_std.shape == (20000,)
    assert x.min() >= -3 and x.max() <= 3
    np.testing.assert_allclose(noise_std, 0.1 + 0.4 * np.abs(x), rtol=1e-15)
    # The standardised residuals are standard normal: a Kolmogorov-Smirnov test at a fixed seed, and
    # their mean and variance within 5 standard errors (0.007 and 0.01 over 20,000 rows).
    residual = (y - np.sin(x)) / noise_std
    assert stats.kstest(residual, "norm").pvalue > 0.01
    assert abs(residual.mean()) < 5 * 0.0071 and abs(residual.var() - 1) < 5 * 0.01
    assert stats.kstest((x + 3) / 6, "uniform").pvalue > 0.01


def test_the_heteroscedastic_wave_draws_the_inputs_then_the_noise_from_its_seed():
    """The inputs first, then the noise, from one RandomState: the order the benchmarks' and the docs'
    figures were measured with (a RandomState instance is read as its seed is)."""
    rng = np.random.RandomState(3)
    x = rng.uniform(-3, 3, 50)
    expected = np.sin(x) + (0.1 + 0.4 * np.abs(x)) * rng.randn(50)
    for random_state in (3, np.random.RandomState(3)):
        X, y = make_heteroscedastic_wave(50, random_state=random_state)
        np.testing.assert_array_equal(X[:, 0], x)
        np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize("n_samples", [0, -1, 2.5, "10"])
def test_the_heteroscedastic_wave_refuses_a_row_count_that_is_not_a_positive_integer(n_samples):
    with pytest.raises(ValueError, match="n_samples"):
        make_heteroscedastic_wave(n_samples)


def test_a_boolean_split_is_refused_where_true_would_be_a_split(tmp_path):
    """True == 1: with two splits, True would silently load split 1."""
    write_uci_set(tmp_path / "yacht", np.arange(20.0).reshape(5, 4), [([0, 2, 4], [1, 3]), ([1, 3], [0, 2, 4])])
    data_dir = tmp_path
    assert load_uci_split(data_dir, "yacht", 1)[1].shape == (3, 3)
    with pytest.raises(ValueError, match=r"split must be in \[0, 1\]"):
        load_uci_split(data_dir, "yacht", True)


def test_a_data_set_folder_without_its_data_is_refused(tiny_uci):
    data_dir, _ = tiny_uci
    (data_dir / "yacht" / "data.txt").unlink()
    with pytest.raises(ValueError, match="No UCI data for 'yacht' under .*yacht: data.txt is missing"):
        uci_n_splits(data_dir, "yacht")


def test_a_reference_cell_that_is_not_a_figure_gives_no_figure(tmp_path):
    """'n/a' for a method the README has no figure of: the other rows are read as before."""
    (tmp_path / "README.md").write_text(
        "| data set | VI | PBP |\n|---|---|---|\n| boston | -2.90 ± 0.07 | n/a |\n"
        "| yacht | -3.43 ± 0.16 | -1.63 ± 0.02 |\n\n"
        "| data set | VI | PBP |\n|---|---|---|\n| yacht | 6.89 ± 0.67 | 1.02 ± 0.05 |\n"
    )
    reference = load_uci_reference(tmp_path)
    assert "PBP" not in reference["log_likelihood"].get("boston", {})
    assert reference["log_likelihood"]["yacht"] == {"VI": (-3.43, 0.16), "PBP": (-1.63, 0.02)}


def test_one_line_index_files_keep_the_arrays_two_dimensional(tiny_uci):
    """A data set of one input (index_features.txt of one line) gives X of shape (n, 1), and a split
    of one test row a target of shape (1,): numpy reads a one-line file as a scalar by default."""
    data_dir, data = tiny_uci
    np.savetxt(data_dir / "yacht" / "index_features.txt", [2], fmt="%d")
    np.savetxt(data_dir / "yacht" / "index_test_0.txt", [1], fmt="%d")
    X_train, X_test, y_train, y_test = load_uci_split(data_dir, "yacht", 0)
    np.testing.assert_array_equal(X_train, data[[0, 2, 4]][:, [2]])
    assert X_test.shape == (1, 1) and y_test.shape == (1,)
