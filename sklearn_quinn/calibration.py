"""Calibration of a Gaussian posterior's scale without refitting the network.

A grid search over the prior precision, ``cov_scale`` or noise scale of a fitted estimator
with a Gaussian weight posterior, scored on held-out data (or, for the prior
precision, by the training evidence). The estimator re-scales its posterior
from what it already holds (for Laplace: the curvature's eigen decomposition),
so no grid point computes a new curvature.

An estimator takes part by implementing two methods:

- ``_calibration_path(X, param)``: a function ``value -> (y_mean, y_std)`` over
  ``X`` (the predictive with ``param`` set to ``value``, in the units of y), or,
  for a classifier, ``value -> class probabilities``;
- ``_set_posterior_scale(param, value)``: re-scale ``posterior_`` (and, for
  ``'noise_scale'``, the noise) in place.
"""

import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.model_selection import check_cv
from sklearn.utils.validation import check_is_fitted, column_or_1d

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


@dataclass
class CalibrationResult:
    """Outcome of :func:`calibrate`.

    Attributes
    ----------
    param : str
    best_value : float
    grid : ndarray of shape (n_values,)
    scores : ndarray of shape (n_values,)
        The objective at each grid value, lower is better (the negative
        evidence for 'marginal_log_likelihood').
    objective : str or callable
    """

    param: str
    best_value: float
    grid: np.ndarray
    scores: np.ndarray
    objective: str


def calibrate(estimator, X=None, y=None, *, param="prior_precision", grid=None, objective="nll"):
    """Choose the prior precision or ``cov_scale`` of a fitted estimator by grid search.

    The estimator's posterior is re-scaled in place to the best value; the
    network is not refitted and no new curvature is computed.

    Parameters
    ----------
    estimator : fitted estimator with a Gaussian weight posterior
        A :class:`~sklearn_quinn.LaplaceRegressor`, :class:`~sklearn_quinn.SWAGRegressor`,
        :class:`~sklearn_quinn.BBBRegressor` or :class:`~sklearn_quinn.LaplaceClassifier`.
    X, y : array-like
        Held-out data to score the predictive on; not needed for
        ``objective='marginal_log_likelihood'``, which uses the training evidence.
    param : {'prior_precision', 'cov_scale', 'noise_scale'}, default='prior_precision'
        What to choose: the prior precision, the ``cov_scale`` of the weight
        covariance, or a factor on the observation noise std found at fit
        (which also re-scales the likelihood's curvature; regressors only).
    grid : array-like of positive floats, default=None
        Values to try; None uses log-spaced values: 41 from 1e-4 to 1e4 for
        the prior precision, 201 from 1e-2 to 1e2 for ``cov_scale`` and 201
        from 0.1 to 10 for the noise scale (steps of about 2% in the predictive std).
    objective : {'nll', 'chi_squared', 'crps', 'ece', 'coverage', 'brier', \
            'marginal_log_likelihood'} or callable, default='nll'
        For a regressor: Gaussian NLL, ``|chi^2 - 1|``, CRPS, quantile
        calibration error and the 95% interval's coverage error
        ``|coverage - 0.95|`` on ``(X, y)``; for a classifier: categorical NLL,
        expected calibration error (15 bins) and Brier score of
        ``predict_proba``; or the Laplace evidence of the training data. A
        callable ``(y_true, y_mean, y_std) -> float`` (a classifier's:
        ``(y_true, y_proba, labels=...) -> float``), lower is better, is a
        held-out objective of your own, e.g.
        ``functools.partial(interval_coverage_error, level=0.9)``.

    Returns
    -------
    CalibrationResult

    Warns
    -----
    UserWarning
        When the best value is at an edge of the grid: the optimum may lie beyond it.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_quinn import LaplaceRegressor
    >>> from sklearn_quinn.calibration import calibrate
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-2, 2, size=(80, 1))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.randn(80)
    >>> reg = LaplaceRegressor(hidden_layer_sizes=(16,), max_epochs=100, random_state=0)
    >>> reg = reg.fit(X[:60], y[:60])
    >>> result = calibrate(reg, X[60:], y[60:], param="cov_scale", grid=np.logspace(-3, 3, 13))
    >>> result.best_value == reg.cov_scale_
    True
    """
    check_is_fitted(estimator)
    grid = _checked_grid(estimator, param, grid, objective)
    scores = _grid_scores(estimator, X, y, param, grid, objective)
    best = _best_value(grid, scores, param)
    estimator._set_posterior_scale(param, best)
    return CalibrationResult(param, best, grid, scores, objective)


def calibrate_cv(estimator, X, y, *, param="prior_precision", grid=None, objective="nll", cv=5):
    """Fit ``estimator`` on all rows with ``param`` chosen by K-fold cross-validation.

    Each fold fits a clone on the other folds and scores the whole grid on its
    own rows as :func:`calibrate` does (one curvature per fold, none per grid
    value); the value with the best mean score over the folds is then set on
    a clone fitted on all of ``(X, y)``. Every row serves once for validation
    and the final network is trained on all of them, where :func:`calibrate`
    spends a held-out part on both counts.

    Parameters
    ----------
    estimator : unfitted estimator with a Gaussian weight posterior
        As for :func:`calibrate`.
    X, y : array-like
        The training rows.
    param, grid : as for :func:`calibrate`
    objective : {'nll', 'chi_squared', 'crps', 'ece', 'coverage', 'brier'} or callable, default='nll'
        A held-out objective of :func:`calibrate`.
    cv : int or cross-validation generator, default=5
        As for scikit-learn's ``cross_validate`` (stratified folds for a classifier).

    Returns
    -------
    fitted : estimator
        A clone fitted on all rows, its posterior re-scaled to the best value.
    result : CalibrationResult
        With the fold-mean scores.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_quinn import LaplaceRegressor
    >>> from sklearn_quinn.calibration import calibrate_cv
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-2, 2, size=(80, 1))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.randn(80)
    >>> reg = LaplaceRegressor(hidden_layer_sizes=(16,), max_epochs=100, random_state=0)
    >>> fitted, result = calibrate_cv(reg, X, y, param="cov_scale", grid=np.logspace(-3, 3, 13), cv=3)
    >>> result.best_value == fitted.cov_scale_
    True
    """
    if objective == "marginal_log_likelihood":
        raise ValueError("calibrate_cv needs a held-out objective; the evidence needs no folds: use calibrate.")
    grid = _checked_grid(estimator, param, grid, objective)  # before any fit
    X, y = np.asarray(X), np.asarray(y)
    folds = check_cv(cv, y, classifier=is_classifier(estimator)).split(X, y)
    scores = np.mean([_grid_scores(clone(estimator).fit(X[train], y[train]), X[test], y[test], param, grid, objective)
                      for train, test in folds], axis=0)
    best = _best_value(grid, scores, param)
    fitted = clone(estimator).fit(X, y)
    fitted._set_posterior_scale(param, best)
    return fitted, CalibrationResult(param, best, grid, scores, objective)


def _checked_grid(estimator, param, grid, objective):
    """The grid of a calibration request, or a ValueError naming what is wrong with it (no fit needed)."""
    if not hasattr(estimator, "_calibration_path"):
        raise ValueError(
            f"{type(estimator).__name__} has no Gaussian weight posterior to re-scale; "
            "calibrate works for Laplace, SWAG and Bayes-by-backprop estimators."
        )
    if param not in PARAMS:
        raise ValueError(f"param must be one of {PARAMS}, got {param!r}.")
    classifier = is_classifier(estimator)
    objectives = CLASSIFICATION_OBJECTIVES if classifier else OBJECTIVES
    if not callable(objective) and objective not in objectives:
        raise ValueError(f"objective must be one of {objectives} for a "
                         f"{'classifier' if classifier else 'regressor'}, got {objective!r}.")
    if objective == "marginal_log_likelihood" and param != "prior_precision":
        raise ValueError(
            f"objective='marginal_log_likelihood' calibrates the prior_precision only, not {param}; "
            "for the noise use prior_precision='marglik', which tunes both."
        )
    grid = DEFAULT_GRIDS[param] if grid is None else np.asarray(grid, dtype=np.float64)
    if grid.ndim != 1 or grid.size == 0 or not np.all(np.isfinite(grid) & (grid > 0)):
        raise ValueError(f"grid must be a non-empty 1-D array of positive floats, got {grid!r}.")
    return grid


def _grid_scores(estimator, X, y, param, grid, objective):
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
            scores = np.array([metric(y, *path(value)) for value in grid])
    if not np.isfinite(scores).any():
        raise ValueError(f"The {objective} objective is not finite anywhere on the grid.")
    return scores


def _best_value(grid, scores, param):
    """The grid value of the lowest finite score (the first of ties), with a
    warning when it is at an edge and better than its neighbour there."""
    scores = np.where(np.isfinite(scores), scores, np.nan)
    best = int(np.nanargmin(scores))
    order = np.argsort(grid, kind="stable")
    rank = int(np.flatnonzero(order == best)[0])
    at_edge = grid.size > 1 and rank in (0, grid.size - 1)
    if at_edge and not scores[order[1] if rank == 0 else order[-2]] <= scores[best]:
        warnings.warn(
            f"The best {param} ({grid[best]:.4g}) is at the edge of the grid "
            f"[{grid.min():.4g}, {grid.max():.4g}]; the optimum may lie beyond it.",
            UserWarning,
            stacklevel=3,
        )
    return float(grid[best])
