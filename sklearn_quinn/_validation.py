"""Checks of arguments that are not estimator parameters (scikit-learn's ``_parameter_constraints`` check those)."""

import inspect
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
    """Refuse a skorch callback (an instance or a class, alone or named in a pair) that cannot run in
    the package's trainings, before any of them. They hold no rows out (skorch's
    ``train_split=None``), so a history records ``train_loss`` alone: a callback that monitors a
    validation score fails, and so does ``WandbLogger(save_model=True)``, which saves at the best
    one. They keep no record of each epoch's batches (their epochs take their steps with nothing
    around them), from which skorch's checkpoints name their files, and which ``LoadInitState``
    reads back. Each ended the fit deep in skorch."""
    from skorch.callbacks import Checkpoint, LoadInitState, TrainEndCheckpoint, WandbLogger

    for callback in callbacks or []:
        callback = callback[1] if is_named_callback(callback) else callback
        kind = callback if isinstance(callback, type) else type(callback)
        if issubclass(kind, (Checkpoint, TrainEndCheckpoint, LoadInitState)):
            raise ValueError(
                f"callbacks: skorch's {kind.__name__} reads the record of each epoch's batches, which the "
                "trainings do not keep; save the fitted estimator instead (pickle or joblib: net_ is in it)."
            )
        monitor = _setting(callback, "monitor")
        if isinstance(monitor, str) and monitor.startswith("valid"):
            raise ValueError(
                f"callbacks: {kind.__name__} monitors {monitor!r}, but the trainings hold no rows out for "
                "validation (skorch's train_split=None) and record 'train_loss' alone; monitor that "
                "(e.g. EarlyStopping(monitor='train_loss'))."
            )
        if issubclass(kind, WandbLogger) and _setting(callback, "save_model"):
            raise ValueError(
                "callbacks: WandbLogger(save_model=True) saves the net at its best 'valid_loss', which the "
                "trainings do not record (they hold no rows out); set save_model=False."
            )


def is_named_callback(callback):
    """Whether ``callback`` is skorch's ``(name, callback)`` pair, a tuple or a list."""
    return isinstance(callback, (tuple, list)) and len(callback) == 2 and isinstance(callback[0], str)


def _setting(callback, name):
    """A callback's ``name`` setting: an instance's attribute, or a class's default (skorch makes the
    instance itself, with every default)."""
    if not isinstance(callback, type):
        return getattr(callback, name, None)
    parameter = inspect.signature(callback).parameters.get(name)
    return None if parameter is None or parameter.default is inspect.Parameter.empty else parameter.default


def check_sample_weight(sample_weight, y_true):
    """``sample_weight`` as float64 weights of the points of ``y_true``, or None for equal weights."""
    if sample_weight is None:
        return None
    weights = _check_sample_weight(sample_weight, y_true, dtype=np.float64)
    if np.any(weights < 0) or not weights.sum() > 0:
        raise ValueError("sample_weight must be non-negative, with a positive sum.")
    return weights
