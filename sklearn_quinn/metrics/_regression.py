"""Metrics of a Gaussian predictive over y: its mean and standard deviation, or draws of y.

Functions take ``(y_true, y_pred, y_std)`` (or ``(y_true, y_samples)``, the
draws shaped as ``sample_y`` returns them), as scikit-learn's metrics take
``(y_true, y_pred)``. With 2-D targets the proper scores are summed over
targets and averaged over points.
"""

import numpy as np
from scipy.stats import norm
from sklearn.utils.validation import check_array, check_consistent_length


def _values(values, name, allow_nd=False):
    """``values`` as a finite float64 array of at least one row (scikit-learn's messages name ``name``)."""
    return check_array(values, ensure_2d=False, allow_nd=allow_nd, dtype=np.float64, input_name=name)


def _check_targets(y_true, y_pred, *others):
    """Validated ``y_true``, ``y_pred`` and ``others`` (named ``y_std``) of one shape. One target as a
    column ``(n, 1)`` beside 1-D arrays (a DataFrame's column beside what a single-target regressor
    predicts) is read as 1-D, as scikit-learn's regression metrics read it."""
    arrays = [_values(y_true, "y_true"), _values(y_pred, "y_pred"), *(_values(other, "y_std") for other in others)]
    check_consistent_length(*arrays)
    if all(array.ndim == 1 or array.shape[1:] == (1,) for array in arrays):
        arrays = [array.reshape(-1) for array in arrays]
    if any(array.shape != arrays[0].shape for array in arrays):
        shapes = ", ".join(str(array.shape) for array in arrays)
        raise ValueError(f"y_true, y_pred{' and y_std' * bool(others)} must have the same shape; got {shapes}.")
    return tuple(arrays)


def _check_gaussian(y_true, y_pred, y_std):
    y_true, y_pred, y_std = _check_targets(y_true, y_pred, y_std)
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
    y_true, y_pred = _check_targets(y_true, y_pred)
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

    ``y_true`` is only checked (its shape, and that it is finite): the width does not depend on it.

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
    levels : float or array-like of float in (0, 1), default=None
        Expected coverage levels; None uses 0.05, 0.10, ..., 0.95.

    Returns
    -------
    levels : ndarray
    observed : ndarray
        Fraction of points inside the central interval of each level.
    """
    levels = np.arange(1, 20) / 20 if levels is None else np.atleast_1d(np.asarray(levels, dtype=np.float64))
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
