"""Metrics of predictive distributions, and scorers for model selection.

Functions take ``(y_true, ...)`` as scikit-learn's metrics do. Scorers take
``(estimator, X, y)``, call ``predict(X, return_std=True)`` and return a
value where greater is better, so they plug into ``GridSearchCV(scoring=...)``.
"""

import numpy as np
from scipy.stats import norm
from sklearn.utils.validation import check_consistent_length


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
    log_density = norm.logpdf(y_true, loc=y_pred, scale=y_std)
    return float(-log_density.reshape(len(y_true), -1).sum(axis=1).mean())


def interval_coverage(y_true, y_pred, y_std, level=0.95):
    """Fraction of ``y_true`` inside the central ``level`` interval of ``N(y_pred, y_std**2)``.

    Examples
    --------
    >>> from sklearn_quinn.metrics import interval_coverage
    >>> interval_coverage([0.0, 3.0], [0.0, 0.0], [1.0, 1.0])
    0.5
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}.")
    y_true, y_pred, y_std = _check_gaussian(y_true, y_pred, y_std)
    half_width = norm.ppf(0.5 + level / 2) * y_std
    return float(np.mean(np.abs(y_true - y_pred) <= half_width))


def neg_nll_scorer(estimator, X, y):
    """Scorer: minus :func:`gaussian_nll` of ``estimator.predict(X, return_std=True)``."""
    y_pred, y_std = estimator.predict(X, return_std=True)
    return -gaussian_nll(y, y_pred, y_std)
