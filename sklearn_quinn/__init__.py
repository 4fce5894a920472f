"""Calibrated uncertainty for neural-network predictions, with the scikit-learn API."""

from .dropout import MCDropoutClassifier, MCDropoutRegressor
from .ensemble import DeepEnsembleClassifier, DeepEnsembleRegressor, RMSClassifier, RMSRegressor
from .laplace import LaplaceClassifier, LaplaceRegressor
from .mcmc import MCMCClassifier, MCMCRegressor
from .smc import SMCClassifier, SMCRegressor
from .swag import SWAGClassifier, SWAGRegressor
from .variational import BBBClassifier, BBBRegressor

__version__ = "0.1.0"

__all__ = [
    "BBBClassifier",
    "BBBRegressor",
    "DeepEnsembleClassifier",
    "DeepEnsembleRegressor",
    "LaplaceClassifier",
    "LaplaceRegressor",
    "MCDropoutClassifier",
    "MCDropoutRegressor",
    "MCMCClassifier",
    "MCMCRegressor",
    "RMSClassifier",
    "RMSRegressor",
    "SMCClassifier",
    "SMCRegressor",
    "SWAGClassifier",
    "SWAGRegressor",
]
