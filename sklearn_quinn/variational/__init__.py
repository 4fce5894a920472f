"""Mean-field variational inference: Bayes by backprop."""

from ._bbb import BBBRegressor

__all__ = ["BBBRegressor"]
