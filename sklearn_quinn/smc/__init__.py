"""Adaptive annealed sequential Monte Carlo: the engine and the estimators."""

from ._classifier import SMCClassifier
from ._engine import run_smc
from ._smc import SMCRegressor

__all__ = ["SMCClassifier", "SMCRegressor", "run_smc"]
