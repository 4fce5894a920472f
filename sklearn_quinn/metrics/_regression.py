"""Metrics of a Gaussian predictive over y: its mean and standard deviation, or draws of y.

Functions take ``(y_true, y_pred, y_std)`` (or ``(y_true, y_samples)``, the
draws shaped as ``sample_y`` returns them), as scikit-learn's metrics take
``(y_true, y_pred)``, and a ``sample_weight`` per point. With 2-D targets the
proper scores are summed over targets and averaged over points.
"""

from numbers import Real

import numpy as np
from scipy.stats import norm
from sklearn.utils.validation import check_array, check_consistent_length

from .._validation import check_sample_weight


def _values(values, name, allow_nd=False):
    """``values`` as a finite float64 array of at least one row (scikit-learn's messages name ``name``)."""
    return check_array(values, ensure_2d=False, allow_nd=allow_nd, dtype=np.float64, input_name=name)


def _check_targets(y_true, y_pred, *others, sample_weight=None):
    """Validated ``y_true``, ``y_pred`` and ``others`` (named ``y_std``) of one shape, and the points'
    weights. One target as a column ``(n, 1)`` beside 1-D arrays (a DataFrame's column beside what a
    single-target regressor predicts) is read as 1-D, as scikit-learn's regression metrics read it."""
    arrays = [_values(y_true, "y_true"), _values(y_pred, "y_pred"), *(_values(other, "y_std") for other in others)]
    check_consistent_length(*arrays)
    if all(array.ndim == 1 or array.shape[1:] == (1,) for array in arrays):
        arrays = [array.reshape(-1) for array in arrays]
    if any(array.shape != arrays[0].shape for array in arrays):
        shapes = ", ".join(str(array.shape) for array in arrays)
        named = "y_true, y_pred and y_std" if others else "y_true and y_pred"
        raise ValueError(f"{named} must have the same shape; got {shapes}.")
    return (*arrays, check_sample_weight(sample_weight, arrays[0]))


def _check_gaussian(y_true, y_pred, y_std, sample_weight):
    y_true, y_pred, y_std, weights = _check_targets(y_true, y_pred, y_std, sample_weight=sample_weight)
    if not np.all(y_std > 0):
        raise ValueError("y_std must be positive everywhere.")
    return y_true, y_pred, y_std, weights


def _check_level(level):
    if isinstance(level, (bool, str)) or not isinstance(level, Real) or not 0 < level < 1:
        raise ValueError(f"level must be a number in (0, 1), got {level!r}.")


def _per_point(values, weights):
    """Sum over targets (2-D input), then average over points, weighted by ``weights`` (None: equally)."""
    return float(np.average(values.reshape(len(values), -1).sum(axis=1), weights=weights))


def _per_value(values, weights):
    """Average over targets (2-D input) and over points, the points weighted by ``weights`` (None: equally)."""
    return float(np.average(values.reshape(len(values), -1).mean(axis=1), weights=weights))


def gaussian_nll(y_true, y_pred, y_std, *, sample_weight=None):
    """Mean negative log-likelihood of ``y_true`` under ``N(y_pred, y_std**2)``.

    Averaged over points (and summed over targets for 2-D input), in nats;
    ``sample_weight`` weighs the points' average.

    Examples
    --------
    >>> from sklearn_quinn.metrics import gaussian_nll
    >>> round(gaussian_nll([0.0], [0.0], [1.0]), 4)
    0.9189
    """
    y_true, y_pred, y_std, weights = _check_gaussian(y_true, y_pred, y_std, sample_weight)
    z = (y_true - y_pred) / y_std
    return _per_point(0.5 * z**2 + np.log(y_std) + 0.5 * np.log(2 * np.pi), weights)


def crps_gaussian(y_true, y_pred, y_std, *, sample_weight=None):
    """Continuous ranked probability score of ``N(y_pred, y_std**2)``, closed form.

    ``CRPS = std * (z (2 Phi(z) - 1) + 2 phi(z) - 1 / sqrt(pi))`` with
    ``z = (y - mean) / std``; lower is better, in the units of y; averaged
    over points, summed over targets.

    References
    ----------
    T. Gneiting and A. E. Raftery, "Strictly proper scoring rules, prediction,
    and estimation", Journal of the American Statistical Association 102(477), 2007.

    Examples
    --------
    >>> from sklearn_quinn.metrics import crps_gaussian
    >>> round(crps_gaussian([0.0], [0.0], [1.0]), 4)
    0.2337
    """
    y_true, y_pred, y_std, weights = _check_gaussian(y_true, y_pred, y_std, sample_weight)
    z = (y_true - y_pred) / y_std
    crps = y_std * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / np.sqrt(np.pi))
    return _per_point(crps, weights)


def crps_samples(y_true, y_samples, *, sample_weight=None):
    """CRPS of the empirical distribution of draws, ``E|Y - y| - E|Y - Y'| / 2``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_targets)
    y_samples : array-like of shape (n_samples, n_draws) or (n_samples, n_targets, n_draws)
        Draws of y per point, as ``sample_y`` returns them.
    sample_weight : array-like of shape (n_samples,), default=None
        Weights of the points' average.

    References
    ----------
    T. Gneiting and A. E. Raftery, "Strictly proper scoring rules, prediction,
    and estimation", Journal of the American Statistical Association 102(477), 2007.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_quinn.metrics import crps_samples
    >>> crps_samples([0.0], [[-1.0, 1.0]])
    0.5
    """
    y_true = _values(y_true, "y_true")
    draws = np.sort(_values(y_samples, "y_samples", allow_nd=True), axis=-1)
    if y_true.shape[1:] == (1,) and draws.ndim == 2:  # one target as a column, as _check_targets reads it
        y_true = y_true[:, 0]
    if draws.shape[:-1] != y_true.shape:
        raise ValueError(
            f"y_samples must have shape y_true.shape + (n_draws,); got {draws.shape} "
            f"for y_true of shape {y_true.shape}."
        )
    weights = check_sample_weight(sample_weight, y_true)
    n_draws = draws.shape[-1]
    spread_to_truth = np.abs(draws - y_true[..., None]).mean(-1)
    # E|Y - Y'| from sorted draws in O(n log n): sum_i (2i - n - 1) x_(i) * 2 / n^2.
    ranks = 2 * np.arange(1, n_draws + 1) - n_draws - 1
    mean_pair_distance = 2 * (draws * ranks).sum(-1) / n_draws**2
    return _per_point(spread_to_truth - 0.5 * mean_pair_distance, weights)


def root_mean_squared_error(y_true, y_pred, *, sample_weight=None):
    """Root mean squared error of the predictive mean, over all values (the points weighted by ``sample_weight``).

    With several targets it is the root of the mean over every value, where
    ``sklearn.metrics.root_mean_squared_error`` averages each target's RMSE
    (its ``multioutput='uniform_average'``): the two agree for one target.

    Examples
    --------
    >>> from sklearn_quinn.metrics import root_mean_squared_error
    >>> root_mean_squared_error([0.0, 0.0], [3.0, 4.0])
    3.5355339059327378
    """
    y_true, y_pred, weights = _check_targets(y_true, y_pred, sample_weight=sample_weight)
    return float(np.sqrt(_per_value((y_true - y_pred) ** 2, weights)))


def chi_squared(y_true, y_pred, y_std, *, sample_weight=None):
    """Mean squared standardised residual ``mean(((y - mean) / std)**2)``; 1 when calibrated.

    Examples
    --------
    >>> from sklearn_quinn.metrics import chi_squared
    >>> chi_squared([2.0, 0.0], [0.0, 0.0], [1.0, 1.0])
    2.0
    """
    y_true, y_pred, y_std, weights = _check_gaussian(y_true, y_pred, y_std, sample_weight)
    return _per_value(((y_true - y_pred) / y_std) ** 2, weights)


def chi_squared_error(y_true, y_pred, y_std, *, sample_weight=None):
    """``|chi_squared - 1|``: 0 for a calibrated predictive spread.

    Examples
    --------
    >>> from sklearn_quinn.metrics import chi_squared_error
    >>> chi_squared_error([2.0, 0.0], [0.0, 0.0], [1.0, 1.0])
    1.0
    """
    return abs(chi_squared(y_true, y_pred, y_std, sample_weight=sample_weight) - 1.0)


def interval_coverage(y_true, y_pred, y_std, level=0.95, *, sample_weight=None):
    """Fraction of ``y_true`` inside the central ``level`` interval of ``N(y_pred, y_std**2)``.

    Examples
    --------
    >>> from sklearn_quinn.metrics import interval_coverage
    >>> interval_coverage([0.0, 3.0], [0.0, 0.0], [1.0, 1.0])
    0.5
    """
    _check_level(level)
    y_true, y_pred, y_std, weights = _check_gaussian(y_true, y_pred, y_std, sample_weight)
    half_width = norm.ppf(0.5 + level / 2) * y_std
    return _per_value(np.abs(y_true - y_pred) <= half_width, weights)


def interval_coverage_error(y_true, y_pred, y_std, level=0.95, *, sample_weight=None):
    """``|coverage - level|`` of the central ``level`` intervals: 0 when they cover as stated.

    Examples
    --------
    >>> from sklearn_quinn.metrics import interval_coverage_error
    >>> round(interval_coverage_error([0.0, 3.0], [0.0, 0.0], [1.0, 1.0], level=0.95), 2)
    0.45
    """
    return abs(interval_coverage(y_true, y_pred, y_std, level, sample_weight=sample_weight) - level)


def interval_width(y_true, y_pred, y_std, level=0.95, *, sample_weight=None):
    """Mean width of the central ``level`` intervals, in the units of y.

    ``y_true`` is only checked (its shape, and that it is finite): the width does not depend on it.

    Examples
    --------
    >>> from sklearn_quinn.metrics import interval_width
    >>> round(interval_width([0.0], [0.0], [1.0], level=0.95), 4)
    3.9199
    """
    _check_level(level)
    y_true, y_pred, y_std, weights = _check_gaussian(y_true, y_pred, y_std, sample_weight)
    return _per_value(2 * norm.ppf(0.5 + level / 2) * y_std, weights)


def coverage_curve(y_true, y_pred, y_std, levels=None, *, sample_weight=None):
    """Observed coverage of central intervals at each expected level.

    Parameters
    ----------
    levels : float or array-like of float in (0, 1), default=None
        Expected coverage levels; None uses 0.05, 0.10, ..., 0.95.
    sample_weight : array-like of shape (n_samples,), default=None
        Weights of the points.

    Returns
    -------
    levels : ndarray
    observed : ndarray
        Fraction of points (of their weight) inside the central interval of each level.
    """
    levels = np.arange(1, 20) / 20 if levels is None else np.atleast_1d(np.asarray(levels, dtype=np.float64))
    if levels.ndim != 1 or not levels.size:
        raise ValueError(f"levels must be a number or a non-empty 1-D array of numbers, got shape {levels.shape}.")
    for level in levels:
        _check_level(level)
    y_true, y_pred, y_std, weights = _check_gaussian(y_true, y_pred, y_std, sample_weight)
    standardised = np.abs(y_true - y_pred) / y_std
    observed = np.array([_per_value(standardised <= norm.ppf(0.5 + level / 2), weights) for level in levels])
    return levels, observed


def quantile_calibration_error(y_true, y_pred, y_std, levels=None, *, sample_weight=None):
    """Mean absolute gap between expected and observed central-interval coverage.

    The regression analogue of the expected calibration error, over the
    levels of :func:`coverage_curve` (0.05 to 0.95 by default); 0 when calibrated.

    Examples
    --------
    >>> from sklearn_quinn.metrics import quantile_calibration_error
    >>> quantile_calibration_error([0.0, 10.0], [0.0, 0.0], [1.0, 1.0], levels=[0.5])
    0.0
    """
    levels, observed = coverage_curve(y_true, y_pred, y_std, levels, sample_weight=sample_weight)
    return float(np.mean(np.abs(observed - levels)))
