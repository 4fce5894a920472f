"""The regressors' shared machinery (``_regressor_base``, and the shared fit): the targets'
standardisation and the units it leaves the results in, the checks of the targets, and predictions
in blocks of rows."""

import warnings

import numpy as np
import pytest

from sklearn_quinn import LaplaceRegressor
from sklearn_quinn._regressor_base import target_standardisation


def test_the_targets_standardisation_is_each_columns_mean_and_population_std():
    """Each target's mean and std with ddof 0 (``StandardScaler``'s): 1, 3, 5, 7 have mean 4 and std
    sqrt(5); a constant target gets the std 1, and so does one whose only spread is the rounding of
    0.1 + 0.2 (a std of 5e-17 about 0.3), where a spread of 1e-13 about 1 (45 times the bound of ten
    roundings of the mean) is a spread; targets of 1e160, whose squares overflow, keep their std in their own
    scale."""
    mean, std = target_standardisation(np.array([[1.0, 10.0], [3.0, 10.0], [5.0, 10.0], [7.0, 10.0]]))
    np.testing.assert_allclose(mean, [4.0, 10.0], rtol=1e-15)
    np.testing.assert_allclose(std, [np.sqrt(5.0), 1.0], rtol=1e-15)
    spread = 1e-13 * np.array([-1.0, 1.0, -1.0, 1.0])
    mean, std = target_standardisation(1.0 + spread[:, None])
    np.testing.assert_allclose(std, [1e-13], rtol=1e-3)
    _, std = target_standardisation(np.array([[0.1 + 0.2], [0.3], [0.3], [0.3]]))  # a spread of rounding alone
    np.testing.assert_array_equal(std, [1.0])
    mean, std = target_standardisation(1e160 * np.array([[1.0], [2.0], [3.0], [4.0]]))
    np.testing.assert_allclose(mean, [2.5e160], rtol=1e-15)
    np.testing.assert_allclose(std, [np.sqrt(1.25) * 1e160], rtol=1e-15)


@pytest.fixture(scope="module")
def two_fits():
    """The same regressor fitted to targets ``Y`` and to ``1000 Y + (7, -3)`` (two targets): with
    ``normalize_y`` both train on the same standardised targets, one network to rounding."""
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(60, 1))
    Y = np.column_stack([np.sin(X[:, 0]), 0.5 * X[:, 0]]) + 0.1 * rng.randn(60, 2)
    fits = [LaplaceRegressor(hidden_layer_sizes=(8,), max_epochs=30, random_state=0).fit(X, targets)
            for targets in (Y, 1000 * Y + np.array([7.0, -3.0]))]
    return fits


@pytest.mark.parametrize("offset, warns", [(18.0, False), (22.0, True)])
def test_unscaled_targets_warn_where_their_root_mean_square_passes_twenty(offset, warns):
    """With ``normalize_y=False`` the network's outputs must reach the targets: a root mean square
    beyond ``exp(3)`` (20.1) warns, at a std of 1: targets about 22 do, targets about 18 (a mean
    square of 325) do not."""
    rng = np.random.RandomState(0)
    X = rng.randn(30, 1)
    y = offset + rng.randn(30)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        LaplaceRegressor(hidden_layer_sizes=(2,), max_epochs=1, normalize_y=False, random_state=0).fit(X, y)
    assert any("the targets' mean is" in str(warning.message) for warning in caught) == warns


def test_the_evidence_history_is_in_the_units_of_the_targets(two_fits):
    """The density of ``1000 Y + c`` is that of ``Y`` over ``1000`` per value: each recorded log evidence
    of the scaled fit is the unit fit's less ``N O log(1000)`` (60 rows of 2 targets)."""
    unit, scaled = two_fits
    unit_values = [update["log_evidence"] for update in unit.evidence_history_]
    scaled_values = [update["log_evidence"] for update in scaled.evidence_history_]
    assert len(unit_values) > 1
    np.testing.assert_allclose(scaled_values, np.array(unit_values) - 120 * np.log(1000.0), rtol=1e-9)


def test_rows_past_the_last_full_block_are_predicted(two_fits, monkeypatch):
    """Predictions go in blocks of ``PREDICT_BLOCK_ROWS`` rows: 9 rows in blocks of 4 are two blocks
    and a row, each predicted as in one pass."""
    from sklearn_quinn import base

    unit, _ = two_fits
    X_new = np.linspace(-2.5, 2.5, 9)[:, None]
    whole = unit.predict(X_new, return_std=True)
    monkeypatch.setattr(base, "PREDICT_BLOCK_ROWS", 4)
    blocks = []
    by_row_blocks = base.BaseBayesianNetwork._by_row_blocks

    def counted(predict_rows, X):
        return by_row_blocks(lambda rows: blocks.append(len(rows)) or predict_rows(rows), X)

    monkeypatch.setattr(base.BaseBayesianNetwork, "_by_row_blocks", staticmethod(counted))
    blocked = unit.predict(X_new, return_std=True)
    assert blocks == [4, 4, 1]
    for part, expected in zip(blocked, whole):
        assert part.shape == (9, 2)
        np.testing.assert_allclose(part, expected, rtol=1e-12)


def test_one_row_is_refused_where_the_prior_or_the_noise_is_learned():
    """One row holds no spread to learn a prior or a noise from: the fit says so."""
    with pytest.raises(ValueError, match=r"one row \(n_samples=1\)"):
        LaplaceRegressor(max_epochs=1).fit([[0.0]], [1.0])
