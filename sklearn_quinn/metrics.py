"""Metrics of predictive distributions, and scorers for model selection.

Functions take ``(y_true, ...)`` as scikit-learn's metrics do. Regression
metrics take the predictive mean and standard deviation (or draws of ``y``,
shaped as ``sample_y`` returns them); classification metrics take the class
probabilities of ``predict_proba``.

Scorers take ``(estimator, X, y)`` and return a value where greater is
better, so they plug into ``GridSearchCV(scoring=...)`` alone or in a scoring
dict. They call ``predict(X, return_std=True)``, ``sample_y`` or
``predict_proba``, never ``score``.
"""

import numpy as np
from scipy.stats import norm
from sklearn.base import is_classifier
from sklearn.utils.validation import check_consistent_length

# ----------------------------------------------------------------- regression


def _check_gaussian(y_true, y_pred, y_std):
    y_true, y_pred, y_std = (np.asarray(a, dtype=np.float64) for a in (y_true, y_pred, y_std))
    check_consistent_length(y_true, y_pred, y_std)
    if y_true.shape != y_pred.shape or y_true.shape != y_std.shape:
        raise ValueError(
            f"y_true, y_pred and y_std must have the same shape; got {y_true.shape}, "
            f"{y_pred.shape} and {y_std.shape}."
        )
    if not np.all(y_std > 0):
        raise ValueError("y_std must be positive everywhere.")
    return y_true, y_pred, y_std


def _check_level(level):
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}.")


def _per_point(values):
    """Sum over targets (2-D input), then average over points."""
    return float(values.reshape(len(values), -1).sum(axis=1).mean())


def gaussian_nll(y_true, y_pred, y_std):
    """Mean negative log-likelihood of ``y_true`` under ``N(y_pred, y_std**2)``.

    Averaged over points (and summed over targets for 2-D input), in nats.

    Examples
    --------
    >>> from sklearn_quinn.metrics import gaussian_nll
    >>> round(gaussian_nll([0.0], [0.0], [1.0]), 4)
    0.9189
    """
    y_true, y_pred, y_std = _check_gaussian(y_true, y_pred, y_std)
    z = (y_true - y_pred) / y_std
    return _per_point(0.5 * z**2 + np.log(y_std) + 0.5 * np.log(2 * np.pi))


def crps_gaussian(y_true, y_pred, y_std):
    """Continuous ranked probability score of ``N(y_pred, y_std**2)``, closed form.

    ``CRPS = std * (z (2 Phi(z) - 1) + 2 phi(z) - 1 / sqrt(pi))`` with
    ``z = (y - mean) / std`` (Gneiting & Raftery 2007); lower is better, in
    the units of y; averaged over points, summed over targets.

    Examples
    --------
    >>> from sklearn_quinn.metrics import crps_gaussian
    >>> round(crps_gaussian([0.0], [0.0], [1.0]), 4)
    0.2337
    """
    y_true, y_pred, y_std = _check_gaussian(y_true, y_pred, y_std)
    z = (y_true - y_pred) / y_std
    crps = y_std * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / np.sqrt(np.pi))
    return _per_point(crps)


def crps_samples(y_true, y_samples):
    """CRPS of the empirical distribution of draws, ``E|Y - y| - E|Y - Y'| / 2``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_targets)
    y_samples : array-like of shape (n_samples, n_draws) or (n_samples, n_targets, n_draws)
        Draws of y per point, as ``sample_y`` returns them.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_quinn.metrics import crps_samples
    >>> crps_samples([0.0], [[-1.0, 1.0]])
    0.5
    """
    y_true = np.asarray(y_true, dtype=np.float64)
    draws = np.sort(np.asarray(y_samples, dtype=np.float64), axis=-1)
    if draws.shape[:-1] != y_true.shape:
        raise ValueError(
            f"y_samples must have shape y_true.shape + (n_draws,); got {draws.shape} "
            f"for y_true of shape {y_true.shape}."
        )
    n_draws = draws.shape[-1]
    spread_to_truth = np.abs(draws - y_true[..., None]).mean(-1)
    # E|Y - Y'| from sorted draws in O(n log n): sum_i (2i - n - 1) x_(i) * 2 / n^2.
    weights = 2 * np.arange(1, n_draws + 1) - n_draws - 1
    mean_pair_distance = 2 * (draws * weights).sum(-1) / n_draws**2
    return _per_point(spread_to_truth - 0.5 * mean_pair_distance)


def root_mean_squared_error(y_true, y_pred):
    """Root mean squared error of the predictive mean, over all values.

    Examples
    --------
    >>> from sklearn_quinn.metrics import root_mean_squared_error
    >>> root_mean_squared_error([0.0, 0.0], [3.0, 4.0])
    3.5355339059327378
    """
    y_true, y_pred = np.asarray(y_true, dtype=np.float64), np.asarray(y_pred, dtype=np.float64)
    check_consistent_length(y_true, y_pred)
    return float(np.sqrt(np.mean((y_true - y_pred) ** 2)))


def chi_squared(y_true, y_pred, y_std):
    """Mean squared standardised residual ``mean(((y - mean) / std)**2)``; 1 when calibrated.

    Examples
    --------
    >>> from sklearn_quinn.metrics import chi_squared
    >>> chi_squared([2.0, 0.0], [0.0, 0.0], [1.0, 1.0])
    2.0
    """
    y_true, y_pred, y_std = _check_gaussian(y_true, y_pred, y_std)
    return float(np.mean(((y_true - y_pred) / y_std) ** 2))


def chi_squared_error(y_true, y_pred, y_std):
    """``|chi_squared - 1|``: 0 for a calibrated predictive spread.

    Examples
    --------
    >>> from sklearn_quinn.metrics import chi_squared_error
    >>> chi_squared_error([2.0, 0.0], [0.0, 0.0], [1.0, 1.0])
    1.0
    """
    return abs(chi_squared(y_true, y_pred, y_std) - 1.0)


def interval_coverage(y_true, y_pred, y_std, level=0.95):
    """Fraction of ``y_true`` inside the central ``level`` interval of ``N(y_pred, y_std**2)``.

    Examples
    --------
    >>> from sklearn_quinn.metrics import interval_coverage
    >>> interval_coverage([0.0, 3.0], [0.0, 0.0], [1.0, 1.0])
    0.5
    """
    _check_level(level)
    y_true, y_pred, y_std = _check_gaussian(y_true, y_pred, y_std)
    half_width = norm.ppf(0.5 + level / 2) * y_std
    return float(np.mean(np.abs(y_true - y_pred) <= half_width))


def interval_coverage_error(y_true, y_pred, y_std, level=0.95):
    """``|coverage - level|`` of the central ``level`` intervals: 0 when they cover as stated.

    Examples
    --------
    >>> from sklearn_quinn.metrics import interval_coverage_error
    >>> round(interval_coverage_error([0.0, 3.0], [0.0, 0.0], [1.0, 1.0], level=0.95), 2)
    0.45
    """
    return abs(interval_coverage(y_true, y_pred, y_std, level) - level)


def interval_width(y_true, y_pred, y_std, level=0.95):
    """Mean width of the central ``level`` intervals, in the units of y.

    ``y_true`` is only checked for shape: the width does not depend on it.

    Examples
    --------
    >>> from sklearn_quinn.metrics import interval_width
    >>> round(interval_width([0.0], [0.0], [1.0], level=0.95), 4)
    3.9199
    """
    _check_level(level)
    y_true, y_pred, y_std = _check_gaussian(y_true, y_pred, y_std)
    return float(np.mean(2 * norm.ppf(0.5 + level / 2) * y_std))


def coverage_curve(y_true, y_pred, y_std, levels=None):
    """Observed coverage of central intervals at each expected level.

    Parameters
    ----------
    levels : array-like of float in (0, 1), default=None
        Expected coverage levels; None uses 0.05, 0.10, ..., 0.95.

    Returns
    -------
    levels : ndarray
    observed : ndarray
        Fraction of points inside the central interval of each level.
    """
    levels = np.arange(1, 20) / 20 if levels is None else np.asarray(levels, dtype=np.float64)
    for level in levels:
        _check_level(level)
    y_true, y_pred, y_std = _check_gaussian(y_true, y_pred, y_std)
    standardised = np.abs(y_true - y_pred) / y_std
    observed = np.array([np.mean(standardised <= norm.ppf(0.5 + level / 2)) for level in levels])
    return levels, observed


def quantile_calibration_error(y_true, y_pred, y_std, levels=None):
    """Mean absolute gap between expected and observed central-interval coverage.

    The regression analogue of the expected calibration error, over the
    levels of :func:`coverage_curve` (0.05 to 0.95 by default); 0 when calibrated.

    Examples
    --------
    >>> from sklearn_quinn.metrics import quantile_calibration_error
    >>> quantile_calibration_error([0.0, 10.0], [0.0, 0.0], [1.0, 1.0], levels=[0.5])
    0.0
    """
    levels, observed = coverage_curve(y_true, y_pred, y_std, levels)
    return float(np.mean(np.abs(observed - levels)))


# ------------------------------------------------------------- classification


def _check_proba(y_true, y_proba, labels):
    """Validated probabilities and the one-hot encoding of ``y_true`` in column order."""
    y_true = np.asarray(y_true)
    y_proba = np.asarray(y_proba, dtype=np.float64)
    check_consistent_length(y_true, y_proba)
    if y_proba.ndim != 2:
        raise ValueError(f"y_proba must have shape (n_samples, n_classes); got {y_proba.shape}.")
    if np.any(y_proba < 0) or not np.allclose(y_proba.sum(axis=1), 1.0, atol=1e-6):
        raise ValueError("y_proba must hold probabilities: non-negative rows that sum to 1.")
    labels = np.unique(y_true) if labels is None else np.asarray(labels)
    if len(labels) != y_proba.shape[1]:
        raise ValueError(
            f"y_proba has {y_proba.shape[1]} columns but there are {len(labels)} labels; "
            "pass labels= in the column order of y_proba (an estimator's classes_)."
        )
    unseen = np.setdiff1d(np.unique(y_true), labels)
    if unseen.size:
        raise ValueError(f"y_true holds labels {unseen.tolist()} not in labels.")
    onehot = (y_true[:, None] == labels[None, :]).astype(np.float64)
    return onehot, y_proba


def categorical_nll(y_true, y_proba, labels=None):
    """Mean negative log-probability of the true class, in nats.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
    y_proba : array-like of shape (n_samples, n_classes)
    labels : array-like of shape (n_classes,), default=None
        Class of each column of ``y_proba``; None uses the sorted labels of ``y_true``.

    Examples
    --------
    >>> from sklearn_quinn.metrics import categorical_nll
    >>> round(categorical_nll([0, 1], [[0.5, 0.5], [0.2, 0.8]]), 4)
    0.4581
    """
    onehot, y_proba = _check_proba(y_true, y_proba, labels)
    true_class = np.sum(onehot * y_proba, axis=1)
    return float(-np.mean(np.log(np.clip(true_class, np.finfo(np.float64).tiny, None))))


def brier_score(y_true, y_proba, labels=None):
    """Multi-class Brier score ``mean_i sum_c (p_ic - 1[y_i = c])**2``.

    Examples
    --------
    >>> from sklearn_quinn.metrics import brier_score
    >>> brier_score([0, 1], [[1.0, 0.0], [0.5, 0.5]])
    0.25
    """
    onehot, y_proba = _check_proba(y_true, y_proba, labels)
    return float(np.mean(np.sum((y_proba - onehot) ** 2, axis=1)))


def accuracy(y_true, y_proba, labels=None):
    """Fraction of points whose most probable class is the true one.

    Examples
    --------
    >>> from sklearn_quinn.metrics import accuracy
    >>> accuracy([0, 1], [[0.9, 0.1], [0.6, 0.4]])
    0.5
    """
    onehot, y_proba = _check_proba(y_true, y_proba, labels)
    return float(np.mean(onehot[np.arange(len(onehot)), y_proba.argmax(axis=1)]))


def reliability_bins(y_true, y_proba, n_bins=15, labels=None):
    """Confidence and accuracy of the top-class predictions in equal-width bins.

    Returns
    -------
    confidence : ndarray of shape (n_bins,)
        Mean top-class probability in each bin (NaN for an empty bin).
    accuracy : ndarray of shape (n_bins,)
        Fraction correct in each bin (NaN for an empty bin).
    counts : ndarray of shape (n_bins,)
        Number of points in each bin.
    """
    if not (isinstance(n_bins, (int, np.integer)) and n_bins >= 1):
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}.")
    onehot, y_proba = _check_proba(y_true, y_proba, labels)
    top = y_proba.max(axis=1)
    correct = onehot[np.arange(len(onehot)), y_proba.argmax(axis=1)]
    # Bin i holds confidences in (i / n_bins, (i + 1) / n_bins]; confidence 0 goes to bin 0.
    index = np.clip(np.ceil(top * n_bins).astype(int) - 1, 0, n_bins - 1)
    counts = np.bincount(index, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        confidence = np.bincount(index, weights=top, minlength=n_bins) / counts
        bin_accuracy = np.bincount(index, weights=correct, minlength=n_bins) / counts
    return confidence, bin_accuracy, counts


def expected_calibration_error(y_true, y_proba, n_bins=15, labels=None):
    """Expected calibration error: bin-size-weighted mean of ``|accuracy - confidence|``.

    Equal-width bins of the top-class probability (Guo et al. 2017).

    Examples
    --------
    >>> from sklearn_quinn.metrics import expected_calibration_error
    >>> round(expected_calibration_error([0, 1], [[0.9, 0.1], [0.1, 0.9]]), 4)
    0.1
    """
    confidence, bin_accuracy, counts = reliability_bins(y_true, y_proba, n_bins, labels)
    filled = counts > 0
    gaps = np.abs(bin_accuracy[filled] - confidence[filled])
    return float(np.sum(gaps * counts[filled]) / counts.sum())


def maximum_calibration_error(y_true, y_proba, n_bins=15, labels=None):
    """Maximum calibration error: the largest ``|accuracy - confidence|`` over non-empty bins.

    Examples
    --------
    >>> from sklearn_quinn.metrics import maximum_calibration_error
    >>> round(maximum_calibration_error([0, 1], [[0.9, 0.1], [0.6, 0.4]]), 4)
    0.6
    """
    confidence, bin_accuracy, counts = reliability_bins(y_true, y_proba, n_bins, labels)
    filled = counts > 0
    return float(np.max(np.abs(bin_accuracy[filled] - confidence[filled])))


# -------------------------------------------------------------------- scorers


class _PredictiveScorer:
    """A scorer ``(estimator, X, y) -> float``, greater is better.

    ``metric`` is called on what ``needs`` asks of the estimator: ``'std'``
    (``predict(X, return_std=True)``) or ``'proba'`` (``predict_proba``, with
    ``labels=estimator.classes_``).
    """

    def __init__(self, metric, needs, sign, name, **kwargs):
        self.metric, self.needs, self.sign, self.name, self.kwargs = metric, needs, sign, name, kwargs

    def __call__(self, estimator, X, y):
        if self.needs == "proba":
            value = self.metric(y, estimator.predict_proba(X), labels=estimator.classes_, **self.kwargs)
        else:
            y_pred, y_std = estimator.predict(X, return_std=True)
            value = self.metric(y, y_pred, y_std, **self.kwargs)
        return self.sign * value

    def __repr__(self):
        return self.name


class _NegNLLScorer(_PredictiveScorer):
    """Minus the NLL: Gaussian for a regressor, categorical for a classifier."""

    def __init__(self):
        super().__init__(gaussian_nll, "std", -1, "neg_nll_scorer")

    def __call__(self, estimator, X, y):
        if is_classifier(estimator):
            return -categorical_nll(y, estimator.predict_proba(X), labels=estimator.classes_)
        return super().__call__(estimator, X, y)


neg_nll_scorer = _NegNLLScorer()
neg_crps_scorer = _PredictiveScorer(crps_gaussian, "std", -1, "neg_crps_scorer")
neg_chi_squared_error_scorer = _PredictiveScorer(
    chi_squared_error, "std", -1, "neg_chi_squared_error_scorer"
)
neg_quantile_calibration_error_scorer = _PredictiveScorer(
    quantile_calibration_error, "std", -1, "neg_quantile_calibration_error_scorer"
)
neg_brier_scorer = _PredictiveScorer(brier_score, "proba", -1, "neg_brier_scorer")
neg_ece_scorer = _PredictiveScorer(expected_calibration_error, "proba", -1, "neg_ece_scorer")


def coverage_scorer(level=0.95):
    """Scorer: minus the gap ``|coverage - level|`` of the central ``level`` intervals.

    Greater is better, 0 at best; a plain coverage is not a score (wider is
    not better), its distance to the level is.
    """
    _check_level(level)
    return _PredictiveScorer(interval_coverage_error, "std", -1, f"coverage_scorer(level={level})", level=level)


def neg_interval_width_scorer(level=0.95):
    """Scorer: minus the mean width of the central ``level`` intervals."""
    _check_level(level)
    return _PredictiveScorer(interval_width, "std", -1, f"neg_interval_width_scorer({level})", level=level)
