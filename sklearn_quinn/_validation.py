"""Checks of arguments that are not estimator parameters (scikit-learn's ``_parameter_constraints`` check those)."""

from numbers import Integral


def check_count(value, name):
    """Refuse ``value`` unless it is a positive integer; ``True`` is refused too, a flag passed for a count."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
