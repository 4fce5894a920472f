"""SWAG: a Gaussian posterior from the moments of the SGD trajectory."""

from ._swag import SWAGClassifier, SWAGRegressor

__all__ = ["SWAGClassifier", "SWAGRegressor"]
