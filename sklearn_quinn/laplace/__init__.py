"""Laplace approximations: a Gaussian at the MAP with the curvature as precision."""

from ._laplace import LaplaceRegressor

__all__ = ["LaplaceRegressor"]
