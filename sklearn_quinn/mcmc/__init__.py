"""Markov chain Monte Carlo over batched chains: kernels, the estimators, diagnostics."""

from ._classifier import MCMCClassifier
from ._diagnostics import effective_sample_size, split_rhat
from ._kernels import adaptive_metropolis, hmc, mala
from ._mcmc import MCMCRegressor
from ._nuts import nuts

__all__ = [
    "MCMCClassifier",
    "MCMCRegressor",
    "adaptive_metropolis",
    "effective_sample_size",
    "hmc",
    "mala",
    "nuts",
    "split_rhat",
]
