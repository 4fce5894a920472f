"""Calibrated uncertainty for neural-network predictions, with the scikit-learn API."""

from .ensemble import DeepEnsembleRegressor, RMSRegressor
from .laplace import LaplaceRegressor
from .mcmc import MCMCRegressor
from .swag import SWAGRegressor
from .variational import BBBRegressor

__version__ = "0.1.0"

__all__ = [
    "BBBRegressor",
    "DeepEnsembleRegressor",
    "LaplaceRegressor",
    "MCMCRegressor",
    "RMSRegressor",
    "SWAGRegressor",
]
