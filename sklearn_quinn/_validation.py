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
    """Refuse a skorch callback (or a ``(name, callback)`` pair) that cannot run in the package's
    trainings, before any of them: one that monitors a validation score (they hold no rows out,
    skorch's ``train_split=None``, and record ``train_loss`` alone), and skorch's checkpoints, which
    name their files from each epoch's record of batches, which the trainings do not keep (their
    epochs take their steps with nothing around them). Both ended the fit deep in skorch, with a
    KeyError or an IndexError."""
    from skorch.callbacks import Checkpoint, TrainEndCheckpoint

    for callback in callbacks or []:
        callback = callback[1] if isinstance(callback, tuple) else callback
        name = type(callback).__name__
        if isinstance(callback, (Checkpoint, TrainEndCheckpoint)):
            raise ValueError(
                f"callbacks: skorch's {name} reads the record of each epoch's batches, which the trainings do "
                "not keep; save the fitted estimator instead (pickle or joblib: net_ is in it)."
            )
        monitor = getattr(callback, "monitor", None)
        if isinstance(monitor, str) and monitor.startswith("valid"):
            raise ValueError(
                f"callbacks: {name} monitors {monitor!r}, but the trainings hold no rows out for validation "
                "(skorch's train_split=None) and record 'train_loss' alone; monitor that "
                "(e.g. EarlyStopping(monitor='train_loss'))."
            )


def check_sample_weight(sample_weight, y_true):
    """``sample_weight`` as float64 weights of the points of ``y_true``, or None for equal weights."""
    if sample_weight is None:
        return None
    weights = _check_sample_weight(sample_weight, y_true, dtype=np.float64)
    if np.any(weights < 0) or not weights.sum() > 0:
        raise ValueError("sample_weight must be non-negative, with a positive sum.")
    return weights
