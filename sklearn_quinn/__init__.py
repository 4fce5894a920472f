"""Calibrated uncertainty for neural-network predictions, with the scikit-learn API."""

from .laplace import LaplaceRegressor
from .mcmc import MCMCRegressor

__version__ = "0.1.0"

__all__ = ["LaplaceRegressor", "MCMCRegressor"]
