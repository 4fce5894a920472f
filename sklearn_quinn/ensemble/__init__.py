"""Deep ensembles and randomized MAP sampling: members trained together as rows of one weight matrix."""

from ._ensemble import DeepEnsembleRegressor, RMSRegressor

__all__ = ["DeepEnsembleRegressor", "RMSRegressor"]
