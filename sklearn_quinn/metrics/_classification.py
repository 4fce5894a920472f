"""Metrics of class probabilities, as ``predict_proba`` returns them.

Functions take ``(y_true, y_proba, labels=None)``; ``labels`` gives the class
of each column of ``y_proba`` (an estimator's ``classes_``), and
``sample_weight`` weighs the points.
"""

import numpy as np
from sklearn.utils.validation import check_consistent_length, column_or_1d

from .._validation import check_count, check_sample_weight


def _check_proba(y_true, y_proba, labels, sample_weight):
    """Validated probabilities, the one-hot encoding of ``y_true`` in column order and the points'
    weights (None: equal). A ``y_true`` of one column ``(n, 1)`` (a DataFrame's column) is read as
    1-D, as scikit-learn's ``log_loss`` reads it."""
    y_true = column_or_1d(y_true)
    if len(y_true) == 0:
        raise ValueError("y_true has 0 samples; at least 1 is required.")
    y_proba = np.asarray(y_proba, dtype=np.float64)
    check_consistent_length(y_true, y_proba)
    if y_proba.ndim != 2:
        raise ValueError(f"y_proba must have shape (n_samples, n_classes); got {y_proba.shape}.")
    if np.any(y_proba < 0) or not np.allclose(y_proba.sum(axis=1), 1.0, atol=1e-6):
        raise ValueError("y_proba must hold probabilities: non-negative rows that sum to 1.")
    labels = np.unique(y_true) if labels is None else np.asarray(labels)
    if len(np.unique(labels)) != len(labels):
        raise ValueError(f"labels must be distinct, one per column of y_proba; got {labels.tolist()}.")
    if len(labels) != y_proba.shape[1]:
        raise ValueError(
            f"y_proba has {y_proba.shape[1]} columns but there are {len(labels)} labels; "
            "pass labels= in the column order of y_proba (an estimator's classes_)."
        )
    unseen = np.setdiff1d(np.unique(y_true), labels)
    if unseen.size:
        raise ValueError(f"y_true holds labels {unseen.tolist()} not in labels.")
    onehot = (y_true[:, None] == labels[None, :]).astype(np.float64)
    return onehot, y_proba, check_sample_weight(sample_weight, y_true)


def categorical_nll(y_true, y_proba, labels=None, *, sample_weight=None):
    """Mean negative log-probability of the true class, in nats.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
    y_proba : array-like of shape (n_samples, n_classes)
    labels : array-like of shape (n_classes,), default=None
        Class of each column of ``y_proba``; None uses the sorted labels of ``y_true``.
    sample_weight : array-like of shape (n_samples,), default=None
        Weights of the points' average.

    Examples
    --------
    >>> from sklearn_quinn.metrics import categorical_nll
    >>> round(categorical_nll([0, 1], [[0.5, 0.5], [0.2, 0.8]]), 4)
    0.4581
    """
    onehot, y_proba, weights = _check_proba(y_true, y_proba, labels, sample_weight)
    true_class = np.sum(onehot * y_proba, axis=1)
    return float(-np.average(np.log(np.clip(true_class, np.finfo(np.float64).tiny, None)), weights=weights))


def brier_score(y_true, y_proba, labels=None, *, sample_weight=None):
    """Multi-class Brier score ``mean_i sum_c (p_ic - 1[y_i = c])**2``.

    The sum runs over every class, Brier's (1950) original score: for two
    classes it is twice ``sklearn.metrics.brier_score_loss``, which scores the
    positive class's probability alone.

    Examples
    --------
    >>> from sklearn_quinn.metrics import brier_score
    >>> brier_score([0, 1], [[1.0, 0.0], [0.5, 0.5]])
    0.25
    """
    onehot, y_proba, weights = _check_proba(y_true, y_proba, labels, sample_weight)
    return float(np.average(np.sum((y_proba - onehot) ** 2, axis=1), weights=weights))


def accuracy(y_true, y_proba, labels=None, *, sample_weight=None):
    """Fraction of points whose most probable class is the true one.

    Examples
    --------
    >>> from sklearn_quinn.metrics import accuracy
    >>> accuracy([0, 1], [[0.9, 0.1], [0.6, 0.4]])
    0.5
    """
    onehot, y_proba, weights = _check_proba(y_true, y_proba, labels, sample_weight)
    return float(np.average(onehot[np.arange(len(onehot)), y_proba.argmax(axis=1)], weights=weights))


def reliability_bins(y_true, y_proba, n_bins=15, labels=None, *, sample_weight=None):
    """Confidence and accuracy of the top-class predictions in equal-width bins.

    Parameters
    ----------
    sample_weight : array-like of shape (n_samples,), default=None
        Weights of the points: the bins' means and counts are weighted.

    Returns
    -------
    confidence : ndarray of shape (n_bins,)
        Mean top-class probability in each bin (NaN for an empty bin).
    accuracy : ndarray of shape (n_bins,)
        Fraction correct in each bin (NaN for an empty bin).
    counts : ndarray of shape (n_bins,)
        Number of points in each bin (integers), or their total weight with ``sample_weight``.
    """
    check_count(n_bins, "n_bins")
    onehot, y_proba, weights = _check_proba(y_true, y_proba, labels, sample_weight)
    top = y_proba.max(axis=1)
    correct = onehot[np.arange(len(onehot)), y_proba.argmax(axis=1)]
    # Bin i holds confidences in (i / n_bins, (i + 1) / n_bins]; confidence 0 goes to bin 0.
    index = np.clip(np.ceil(top * n_bins).astype(int) - 1, 0, n_bins - 1)
    counts = np.bincount(index, weights=weights, minlength=n_bins)  # integers without weights
    weight = 1.0 if weights is None else weights
    with np.errstate(invalid="ignore", divide="ignore"):
        confidence = np.bincount(index, weights=weight * top, minlength=n_bins) / counts
        bin_accuracy = np.bincount(index, weights=weight * correct, minlength=n_bins) / counts
    return confidence, bin_accuracy, counts


def expected_calibration_error(y_true, y_proba, n_bins=15, labels=None, *, sample_weight=None):
    """Expected calibration error: bin-size-weighted mean of ``|accuracy - confidence|``.

    Equal-width bins of the top-class probability.

    References
    ----------
    C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On calibration of modern
    neural networks", ICML 2017.

    Examples
    --------
    >>> from sklearn_quinn.metrics import expected_calibration_error
    >>> round(expected_calibration_error([0, 1], [[0.9, 0.1], [0.1, 0.9]]), 4)
    0.1
    """
    confidence, bin_accuracy, counts = reliability_bins(y_true, y_proba, n_bins, labels, sample_weight=sample_weight)
    filled = counts > 0
    gaps = np.abs(bin_accuracy[filled] - confidence[filled])
    return float(np.sum(gaps * counts[filled]) / counts.sum())


def maximum_calibration_error(y_true, y_proba, n_bins=15, labels=None, *, sample_weight=None):
    """Maximum calibration error: the largest ``|accuracy - confidence|`` over non-empty bins
    (a bin whose points all weigh 0 is empty).

    Examples
    --------
    >>> from sklearn_quinn.metrics import maximum_calibration_error
    >>> round(maximum_calibration_error([0, 1], [[0.9, 0.1], [0.6, 0.4]]), 4)
    0.6
    """
    confidence, bin_accuracy, counts = reliability_bins(y_true, y_proba, n_bins, labels, sample_weight=sample_weight)
    filled = counts > 0
    return float(np.max(np.abs(bin_accuracy[filled] - confidence[filled])))
