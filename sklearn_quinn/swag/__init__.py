"""SWAG: a Gaussian posterior from the moments of the SGD trajectory."""

from ._swag import SWAGRegressor

__all__ = ["SWAGRegressor"]
