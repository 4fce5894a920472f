"""Deep ensembles and randomized MAP sampling: members trained together as rows of one weight matrix."""

from ._classifier import DeepEnsembleClassifier, RMSClassifier
from ._ensemble import DeepEnsembleRegressor, RMSRegressor

__all__ = ["DeepEnsembleClassifier", "DeepEnsembleRegressor", "RMSClassifier", "RMSRegressor"]
