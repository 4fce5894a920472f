"""Checks of arguments that are not estimator parameters (scikit-learn's ``_parameter_constraints`` check those)."""

from numbers import Integral, Real

import numpy as np
from sklearn.utils.validation import _check_sample_weight


def check_count(value, name):
    """Refuse ``value`` unless it is a positive integer; ``True`` is refused too, a flag passed for a count."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")


def check_positive(value, name):
    """``value`` as a float, unless it is not a finite positive real number (a ValueError naming it)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not (np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite positive number, got {value!r}.")
    return float(value)


def check_callbacks(callbacks):
    """Refuse a skorch callback (or a ``(name, callback)`` pair) that monitors a validation score:
    the package's trainings hold no rows out (skorch's ``train_split=None``), so their history
    records ``train_loss`` alone, and skorch's ``EarlyStopping()`` and ``Checkpoint()`` at their
    defaults ended the fit deep in skorch with a KeyError."""
    for callback in callbacks or []:
        callback = callback[1] if isinstance(callback, tuple) else callback
        monitor = getattr(callback, "monitor", None)
        if isinstance(monitor, str) and monitor.startswith("valid"):
            raise ValueError(
                f"callbacks: {type(callback).__name__} monitors {monitor!r}, but the trainings hold no rows out "
                "for validation (skorch's train_split=None) and record 'train_loss' alone; set "
                "monitor='train_loss'."
            )


def check_sample_weight(sample_weight, y_true):
    """``sample_weight`` as float64 weights of the points of ``y_true``, or None for equal weights."""
    if sample_weight is None:
        return None
    weights = _check_sample_weight(sample_weight, y_true, dtype=np.float64)
    if np.any(weights < 0) or not weights.sum() > 0:
        raise ValueError("sample_weight must be non-negative, with a positive sum.")
    return weights
