"""Regression metrics against scipy, and the scorer."""

import numpy as np
import pytest
from scipy.stats import norm

from sklearn_quinn.metrics import gaussian_nll, interval_coverage, neg_nll_scorer


def test_gaussian_nll_matches_scipy():
    rng = np.random.RandomState(0)
    y, mean, std = rng.randn(50), rng.randn(50), rng.uniform(0.5, 2, 50)
    assert gaussian_nll(y, mean, std) == pytest.approx(-norm.logpdf(y, mean, std).mean())


def test_gaussian_nll_sums_over_targets():
    y = np.zeros((4, 2))
    assert gaussian_nll(y, y, np.ones((4, 2))) == pytest.approx(2 * 0.5 * np.log(2 * np.pi))


def test_interval_coverage_counts_points_inside():
    # The 95% half-width is 1.96 std: 1.9 is inside, 2.0 outside.
    y = np.array([0.0, 1.9, -1.9, 2.0, -2.0])
    assert interval_coverage(y, np.zeros(5), np.ones(5), level=0.95) == pytest.approx(0.6)


def test_interval_coverage_of_calibrated_gaussian_is_the_level():
    """200k draws: binomial standard error 0.0005, tolerance 0.003."""
    rng = np.random.RandomState(0)
    y = rng.randn(200_000)
    for level in (0.5, 0.9, 0.95):
        assert interval_coverage(y, np.zeros_like(y), np.ones_like(y), level=level) == pytest.approx(level, abs=3e-3)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: gaussian_nll([0.0, 1.0], [0.0], [1.0]), "inconsistent numbers of samples"),
        (lambda: gaussian_nll([0.0], [0.0], [0.0]), "y_std must be positive"),
        (lambda: gaussian_nll([[0.0, 1.0]], [[0.0]], [[1.0]]), "same shape"),
        (lambda: interval_coverage([0.0], [0.0], [1.0], level=1.5), "level must be in"),
    ],
)
def test_bad_metric_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_neg_nll_scorer_calls_predict_with_std():
    class Fixed:
        def predict(self, X, return_std=False):
            assert return_std
            return np.zeros(len(X)), np.ones(len(X))

    X, y = np.zeros((3, 1)), np.zeros(3)
    assert neg_nll_scorer(Fixed(), X, y) == pytest.approx(-0.5 * np.log(2 * np.pi))
