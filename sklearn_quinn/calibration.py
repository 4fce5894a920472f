"""Calibration of a Laplace posterior's scale without refitting the network.

:func:`calibrate` chooses the prior precision, ``cov_scale`` or noise scale of
a fitted :class:`~sklearn_quinn.LaplaceRegressor` or
:class:`~sklearn_quinn.LaplaceClassifier` by grid search, scored on held-out
data (or, for the prior precision, by the training evidence);
:func:`calibrate_cv` scores the grid by K-fold cross-validation. The estimator
re-scales its posterior from the curvature's eigen decomposition it already
holds, so no grid point computes a new curvature. The search itself lives in
``sklearn_quinn._scale_search``, which the Laplace estimators'
``prior_precision='gridsearch'`` runs too.
"""

from dataclasses import dataclass

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.model_selection import check_cv
from sklearn.utils import _safe_indexing
from sklearn.utils.validation import check_is_fitted

from ._pipelines import final_inputs, final_step
from ._scale_search import (
    CLASSIFICATION_HELD_OUT_OBJECTIVES,
    CLASSIFICATION_OBJECTIVES,
    DEFAULT_GRIDS,
    HELD_OUT_OBJECTIVES,
    OBJECTIVES,
    PARAMS,
    best_value,
    check_request,
    current_value,
    grid_scores,
    search_scale,
)

__all__ = [
    "CLASSIFICATION_HELD_OUT_OBJECTIVES",
    "CLASSIFICATION_OBJECTIVES",
    "DEFAULT_GRIDS",
    "HELD_OUT_OBJECTIVES",
    "OBJECTIVES",
    "PARAMS",
    "CalibrationResult",
    "calibrate",
    "calibrate_cv",
]

# The estimators whose posterior can be re-scaled without refitting (they implement
# ``_calibration_path`` and ``_set_posterior_scale``, see _scale_search). SWAG and
# Bayes by backprop also fit a Gaussian over the weights but keep no curvature to
# re-scale it from, and the samplers and ensembles have no Gaussian to re-scale.
_SUPPORTED = "LaplaceRegressor and LaplaceClassifier"
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
    """Choose the prior precision, ``cov_scale`` or noise scale of a fitted Laplace estimator by grid search.

    The estimator's posterior is re-scaled in place to the best value; the
    network is not refitted and no new curvature is computed.

    Parameters
    ----------
    estimator : fitted LaplaceRegressor or LaplaceClassifier, or a Pipeline ending in one
        The estimators whose posterior is re-scaled from the curvature they
        hold; any other (SWAG, Bayes by backprop, MCMC, SMC, ensembles) raises
        a ValueError. A Pipeline's last step is calibrated, on ``X``
        transformed by the steps before it.
    X, y : array-like
        Held-out data to score the predictive on; not needed for
        ``objective='marginal_log_likelihood'``, which uses the training evidence.
    param : {'prior_precision', 'cov_scale', 'noise_scale'}, default='prior_precision'
        What to choose: the prior precision, the ``cov_scale`` of the weight
        covariance, or a factor on the observation noise std the MAP network
        learned (which also re-scales the likelihood's curvature; Gaussian
        regressors only). That is ``noise_std_`` at fit, except after
        ``prior_precision='marglik'``, which re-tunes the noise: there a factor
        of 1 returns to the MAP's noise.
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
        ``functools.partial(interval_coverage_error, level=0.9)``. A
        regressor's grid value whose predictive mean or std overflows
        (a weak prior's draws under ``likelihood='heteroscedastic'``) scores
        +inf, whatever the objective, and loses. Of values that tie for the
        best score (coverage is a step function), the one nearest the
        posterior's current value (in its log) is set.

    Returns
    -------
    CalibrationResult

    Raises
    ------
    ValueError
        For an estimator other than the two supported, or a bad ``param``,
        ``grid`` or ``objective``.

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
    final = final_step(estimator)
    _check_supported(final)
    check_is_fitted(final)
    best, grid, scores = search_scale(final, final_inputs(estimator, X), y, param=param, grid=grid,
                                      objective=objective)
    return CalibrationResult(param, best, grid, scores, objective)


def calibrate_cv(estimator, X, y, *, param="prior_precision", grid=None, objective="nll", cv=5, groups=None):
    """Fit ``estimator`` on all rows with ``param`` chosen by K-fold cross-validation.

    Each fold fits a clone on the other folds and scores the whole grid on its
    own rows as :func:`calibrate` does (one curvature per fold, none per grid
    value); the value with the best mean score over the folds is then set on
    a clone fitted on all of ``(X, y)``. Every row serves once for validation
    and the final network is trained on all of them, where :func:`calibrate`
    spends a held-out part on both counts.

    Parameters
    ----------
    estimator : unfitted LaplaceRegressor or LaplaceClassifier, or a Pipeline ending in one
        As for :func:`calibrate`; each fold fits the whole Pipeline.
    X, y : array-like
        The training rows.
    param, grid : as for :func:`calibrate`
    objective : {'nll', 'chi_squared', 'crps', 'ece', 'coverage', 'brier'} or callable, default='nll'
        A held-out objective of :func:`calibrate`.
    cv : int or cross-validation generator, default=5
        As for scikit-learn's ``cross_validate`` (stratified folds for a classifier).
    groups : array-like of shape (n_samples,), default=None
        The rows' groups, for a ``cv`` that splits by them (``GroupKFold``).

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
    final = final_step(estimator)
    _check_supported(final)
    grid = check_request(clone(final), param, grid, objective)  # before any fit; the folds fit clones
    folds = list(check_cv(cv, y, classifier=is_classifier(estimator)).split(X, y, groups))
    if is_classifier(estimator):
        _check_folds_see_their_classes(np.asarray(y), folds)

    def fold_scores(train, test):
        # _safe_indexing keeps a DataFrame's rows a DataFrame, whose column names the fits record.
        fold = clone(estimator).fit(_safe_indexing(X, train), _safe_indexing(y, train))
        return grid_scores(final_step(fold), final_inputs(fold, _safe_indexing(X, test)), _safe_indexing(y, test),
                           param, grid, objective)

    scores = np.mean([fold_scores(train, test) for train, test in folds], axis=0)
    fitted = clone(estimator).fit(X, y)
    best = best_value(grid, scores, param, current_value(final_step(fitted), param))
    final_step(fitted)._set_posterior_scale(param, best)
    return fitted, CalibrationResult(param, best, grid, scores, objective)


def _check_supported(estimator):
    """A ValueError naming the supported estimators, for any other."""
    if not hasattr(estimator, "_calibration_path"):
        raise ValueError(
            f"calibrate and calibrate_cv support {_SUPPORTED} only, whose posterior is re-scaled "
            f"from the curvature they hold; got {type(estimator).__name__}."
        )


def _check_folds_see_their_classes(y, folds):
    """A ValueError, before any fit, where a fold's held-out rows hold a class that its training rows
    lack: that fold's classifier cannot score them."""
    for index, (train, test) in enumerate(folds):
        unseen = np.setdiff1d(np.unique(y[test]), np.unique(y[train]))
        if len(unseen):
            raise ValueError(
                f"The held-out rows of fold {index} hold class(es) {unseen.tolist()} that its training rows "
                "lack: give every class at least as many rows as cv has folds, or fewer folds."
            )
