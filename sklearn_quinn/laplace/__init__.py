"""Laplace approximations: a Gaussian at the MAP with the curvature as precision."""

from ._classifier import LaplaceClassifier
from ._laplace import LaplaceRegressor

__all__ = ["LaplaceClassifier", "LaplaceRegressor"]
