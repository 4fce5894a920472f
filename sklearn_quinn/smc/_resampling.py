"""Systematic resampling."""

import torch

from .._core.rng import standard_uniform


def systematic_resample(log_weights, generator=None, n_draws=None):
    """Indices ``(M,)`` of ``M = n_draws`` (default ``N``) particles drawn in proportion to the weights.

    One uniform ``u`` places the ``M`` points ``(u + i) / M`` on the cumulative
    weights: each particle is kept ``floor(M W_i)`` or ``ceil(M W_i)`` times,
    the lowest-variance unbiased scheme of the usual ones (Douc & Cappé 2005).
    """
    n = len(log_weights)
    draws = n if n_draws is None else n_draws
    weights = torch.softmax(log_weights, 0)
    uniform = standard_uniform(generator, weights, ())
    points = (uniform + torch.arange(draws, dtype=weights.dtype, device=weights.device)) / draws
    return torch.searchsorted(weights.cumsum(0), points).clamp(max=n - 1)
