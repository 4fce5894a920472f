"""Mean-field variational inference: Bayes by backprop."""

from ._bbb import BBBClassifier, BBBRegressor

__all__ = ["BBBClassifier", "BBBRegressor"]
