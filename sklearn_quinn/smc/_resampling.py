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
    # Particle i owns the points in [C_(i-1), C_i): a point on a cumulative weight goes to the
    # particle after it, so one of zero weight owns none (at u = 0 a search from the left gave
    # the first point to a leading particle of weight zero). The sum is divided by its end, which
    # is then 1 exactly, and the points held below 1 (in float32 the last one can round up to
    # it): no rounding carries a point past the last particle of positive weight.
    cumulative = weights.cumsum(0)
    below_one = 1.0 - torch.finfo(weights.dtype).eps / 2
    return torch.searchsorted(cumulative / cumulative[-1], points.clamp(max=below_one), right=True)
