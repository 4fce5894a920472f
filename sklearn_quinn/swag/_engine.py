"""SWAG: moments of the SGD trajectory, and the Gaussian they define, pure torch.

The moments are a transform in the style of the ``posteriors`` library:
``init(theta) -> SWAGState`` from the first snapshot, ``update(state, theta,
max_rank) -> SWAGState`` for each later one, and :func:`gaussian_posterior`
to turn the final state into the posterior. A snapshot is one weight vector
``(K,)`` or the rows ``(J, K)`` of ``J`` trajectories run side by side
(MultiSWAG's members), whose moments are kept row by row;
:func:`mixture_posterior` turns those into the equal mixture of their
Gaussians. Nothing here knows how the snapshots were produced (the skorch
callback that feeds them lives in :mod:`sklearn_quinn.swag._callbacks`).
"""

import math
from typing import NamedTuple

import torch

from .._core.posterior import GaussianMixturePosterior, GaussianPosterior


class SWAGState(NamedTuple):
    """Running moments of the weight snapshots, and the last ones kept for the low-rank term."""

    mean: torch.Tensor  # (..., K), running mean of the snapshots
    sq_mean: torch.Tensor  # (..., K), running mean of their squares
    snapshots: torch.Tensor  # (k, ..., K), the last k <= max_rank snapshots, oldest first
    n_snapshots: torch.Tensor  # (), snapshots averaged so far


def init(theta):
    """The moments of a single snapshot ``theta`` of shape ``(K,)`` or ``(J, K)``.

    Parameters
    ----------
    theta : tensor of shape (K,) or (J, K)
        The flat weights; copied, so later in-place training leaves the state alone.

    Returns
    -------
    SWAGState
    """
    theta = theta.detach().clone()
    n_snapshots = torch.ones((), dtype=torch.long, device=theta.device)
    return SWAGState(theta, theta.square(), theta.unsqueeze(0), n_snapshots)


def update(state, theta, max_rank):
    """Add the snapshot ``theta`` to the moments.

    ``mean <- (n mean + theta) / (n + 1)`` and
    ``sq_mean <- (n sq_mean + theta**2) / (n + 1)``, with ``n`` the snapshots
    averaged so far (Maddox et al. 2019, "A simple baseline for Bayesian
    uncertainty in deep learning", Algorithm 1); ``theta`` joins the kept
    snapshots, of which only the last ``max_rank`` stay.

    Parameters
    ----------
    state : SWAGState
    theta : tensor of shape (K,) or (J, K), as the first snapshot
    max_rank : int
        Number of last snapshots kept for the low-rank term.

    Returns
    -------
    SWAGState
    """
    theta = theta.detach()
    n = state.n_snapshots
    mean = (n * state.mean + theta) / (n + 1)
    sq_mean = (n * state.sq_mean + theta.square()) / (n + 1)
    snapshots = torch.cat([state.snapshots, theta.unsqueeze(0)])[-max_rank:]
    return SWAGState(mean, sq_mean, snapshots, n + 1)


def gaussian_posterior(state, cov_type):
    """The SWAG Gaussian of the moments (Maddox et al. 2019).

    A draw is ``mean + diag(sqrt(var)) z1 / sqrt(2) + D z2 / sqrt(2 (k - 1))``
    with ``var = sq_mean - mean**2`` (clipped at 0: the difference of two
    rounded means can fall below zero), ``D`` the ``k`` kept snapshots' deviations
    ``theta_i - mean`` from the final mean as columns, and the second term only
    for ``cov_type='lowrank'``.

    Parameters
    ----------
    state : SWAGState
        At least two snapshots for ``cov_type='lowrank'``.
    cov_type : {'lowrank', 'diag'}

    Returns
    -------
    GaussianPosterior
    """
    variance = (state.sq_mean - state.mean.square()).clamp(min=0)
    std = (variance / 2).sqrt()
    if cov_type == "diag":
        return GaussianPosterior.from_std(state.mean, std)
    n_columns = len(state.snapshots)
    deviations = state.snapshots.T.contiguous() - state.mean[:, None]
    return GaussianPosterior.from_low_rank(state.mean, std, deviations / math.sqrt(2 * (n_columns - 1)))


def mixture_posterior(state, cov_type):
    """The equal mixture of the SWAG Gaussians of ``J`` trajectories' moments (MultiSWAG).

    Parameters
    ----------
    state : SWAGState
        Of snapshots of shape ``(J, K)``.
    cov_type : {'lowrank', 'diag'}

    Returns
    -------
    GaussianMixturePosterior
        Its ``components[j]`` is :func:`gaussian_posterior` of row ``j``.
    """
    return GaussianMixturePosterior([
        gaussian_posterior(SWAGState(mean, sq_mean, state.snapshots[:, row], state.n_snapshots), cov_type)
        for row, (mean, sq_mean) in enumerate(zip(state.mean, state.sq_mean))
    ])
