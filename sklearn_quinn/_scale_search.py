"""Grid search over one scale of a fitted Gaussian posterior, without refitting.

The core of :func:`sklearn_quinn.calibration.calibrate` and of the Laplace
estimators' ``prior_precision='gridsearch'``: score each value of the prior
precision, ``cov_scale`` or noise scale on held-out data (or, for the prior
precision, by the training evidence) and re-scale the posterior to the best.
It sits below both, so the estimators need nothing from the evaluation layer.

An estimator takes part by implementing two methods:

- ``_calibration_path(X, param)``: a function ``value -> (y_mean, y_std)`` over
  ``X`` (the predictive with ``param`` set to ``value``, in the units of y), or,
  for a classifier, ``value -> class probabilities``;
- ``_set_posterior_scale(param, value)``: re-scale ``posterior_`` (and, for
  ``'noise_scale'``, the noise) in place.

The estimator re-scales its posterior from what it already holds (for Laplace:
the curvature's eigen decomposition), so no grid point computes a new curvature.
"""

import warnings

import numpy as np
from sklearn.base import is_classifier
from sklearn.utils.validation import column_or_1d

from ._warnings import warn
from .metrics import (
    brier_score,
    categorical_nll,
    chi_squared_error,
    crps_gaussian,
    expected_calibration_error,
    gaussian_nll,
    interval_coverage_error,
    quantile_calibration_error,
)

#: Held-out objectives, each ``(y_true, y_mean, y_std) -> float``, lower is better.
HELD_OUT_OBJECTIVES = {
    "nll": gaussian_nll,
    "chi_squared": chi_squared_error,
    "crps": crps_gaussian,
    "ece": quantile_calibration_error,
    "coverage": interval_coverage_error,
}
OBJECTIVES = (*HELD_OUT_OBJECTIVES, "marginal_log_likelihood")
#: Held-out objectives of a classifier, each ``(y_true, y_proba, labels=...) -> float``, lower is better.
CLASSIFICATION_HELD_OUT_OBJECTIVES = {
    "nll": categorical_nll,
    "ece": expected_calibration_error,
    "brier": brier_score,
}
CLASSIFICATION_OBJECTIVES = (*CLASSIFICATION_HELD_OUT_OBJECTIVES, "marginal_log_likelihood")
PARAMS = ("prior_precision", "cov_scale", "noise_scale")

#: Default grids; the scale grids step the predictive std by about 2%, fine
#: enough to place a 95% interval's coverage within 0.01.
DEFAULT_GRIDS = {
    "prior_precision": np.logspace(-4, 4, 41),
    "cov_scale": np.logspace(-2, 2, 201),
    "noise_scale": np.logspace(-1, 1, 201),
}


def search_scale(estimator, X, y, *, param, grid, objective):
    """Re-scale a fitted estimator's posterior to the best value of ``param`` on ``grid``.

    Parameters
    ----------
    estimator : fitted estimator with ``_calibration_path`` and ``_set_posterior_scale``
    X, y : array-like or None
        Held-out data; None for ``objective='marginal_log_likelihood'``.
    param : {'prior_precision', 'cov_scale', 'noise_scale'}
    grid : array-like of positive floats or None
        None uses ``DEFAULT_GRIDS[param]``.
    objective : str or callable
        A key of the objectives of the estimator's kind, or a held-out callable.

    Returns
    -------
    best : float
        The value set on the estimator.
    grid : ndarray of shape (n_values,)
    scores : ndarray of shape (n_values,)
        The objective at each value, lower is better.
    """
    grid = check_request(estimator, param, grid, objective)
    scores = grid_scores(estimator, X, y, param, grid, objective)
    best = best_value(grid, scores, param, current_value(estimator, param))
    estimator._set_posterior_scale(param, best)
    return best, grid, scores


def check_request(estimator, param, grid, objective):
    """The grid of a search, or a ValueError naming what is wrong with the request (no fit needed)."""
    if param not in PARAMS:
        raise ValueError(f"param must be one of {PARAMS}, got {param!r}.")
    classifier = is_classifier(estimator)
    objectives = CLASSIFICATION_OBJECTIVES if classifier else OBJECTIVES
    if not callable(objective) and objective not in objectives:
        raise ValueError(f"objective must be one of {objectives} for a "
                         f"{'classifier' if classifier else 'regressor'}, got {objective!r}.")
    # A fitted regressor's likelihood is its fit's (a set_params after it waits for the next fit);
    # an unfitted one's, its parameter's.
    likelihood = getattr(estimator, "_likelihood_name", estimator.get_params().get("likelihood"))
    if param == "noise_scale" and (classifier or likelihood == "heteroscedastic"):
        has = "a classifier has no noise" if classifier else "likelihood='heteroscedastic' predicts its noise per input"
        raise ValueError(f"{has} to scale: calibrate 'prior_precision' or 'cov_scale', not 'noise_scale'.")
    if objective == "marginal_log_likelihood" and param != "prior_precision":
        raise ValueError(
            f"objective='marginal_log_likelihood' calibrates the prior_precision only, not {param}; "
            "for the noise use prior_precision='marglik', which tunes both."
        )
    grid = DEFAULT_GRIDS[param].copy() if grid is None else np.asarray(grid, dtype=np.float64)  # not shared
    if grid.ndim != 1 or grid.size == 0 or not np.all(np.isfinite(grid) & (grid > 0)):
        raise ValueError(f"grid must be a non-empty 1-D array of positive floats, got {grid!r}.")
    return grid


def grid_scores(estimator, X, y, param, grid, objective):
    """The objective of a fitted estimator at each value of a checked grid (lower is better)."""
    if objective == "marginal_log_likelihood":
        scores = np.array([-estimator.log_marginal_likelihood(value) for value in grid])
    else:
        if X is None or y is None:
            raise ValueError(f"objective={objective!r} needs held-out X and y.")
        path = estimator._calibration_path(X, param)
        if is_classifier(estimator):
            metric = objective if callable(objective) else CLASSIFICATION_HELD_OUT_OBJECTIVES[objective]
            scores = np.array([metric(y, path(value), labels=estimator.classes_) for value in grid])
        else:
            y = np.asarray(y, dtype=np.float64)
            y = column_or_1d(y) if y.ndim == 2 and y.shape[1] == 1 else y
            metric = objective if callable(objective) else HELD_OUT_OBJECTIVES[objective]
            scores = np.array([_regression_score(metric, y, path, value) for value in grid])
    if not np.isfinite(scores).any():
        raise ValueError(f"The {objective} objective is not finite anywhere on the grid.")
    return scores


def _regression_score(metric, y, path, value):
    """``metric`` of the predictive at ``value``, or +inf where its std overflows: that value
    loses. A weak prior's weight draws can put a heteroscedastic noise head's variance past the
    floating-point range on the held-out rows, which the metric refuses; the overflow's warning,
    written for rows far from the data, would mislead here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*exceeds the floating-point range")
        mean, std = path(value)
    if not (np.isfinite(mean).all() and np.isfinite(std).all()):
        return np.inf
    return metric(y, mean, std)


def current_value(estimator, param):
    """The value of ``param`` that a fitted estimator's posterior has now."""
    return estimator._noise_scale if param == "noise_scale" else getattr(estimator, f"{param}_")


def best_value(grid, scores, param, current):
    """The grid value of the lowest finite score, of tied ones the nearest to ``current`` (in its
    log): where the held-out rows cannot tell values apart (coverage, a step function, ties over
    wide plateaus) the posterior stays as near as it can to what the fit gave it; with a warning
    when the value is at an edge and better than its neighbour there."""
    scores = np.where(np.isfinite(scores), scores, np.nan)
    tied = np.flatnonzero(scores == np.nanmin(scores))
    best = int(tied[np.argmin(np.abs(np.log(grid[tied]) - np.log(current)))])
    order = np.argsort(grid, kind="stable")
    rank = int(np.flatnonzero(order == best)[0])
    at_edge = grid.size > 1 and rank in (0, grid.size - 1)
    if at_edge and not scores[order[1] if rank == 0 else order[-2]] <= scores[best]:
        warn(
            f"The best {param} ({grid[best]:.4g}) is at the edge of the grid "
            f"[{grid.min():.4g}, {grid.max():.4g}]; the optimum may lie beyond it."
        )
    return float(grid[best])
