"""Per-particle HMC parameters tuned from the last move's jumps (talk, Algorithm 4).

After Buchholz, Chopin & Jacob (2021), "Adaptive tuning of Hamiltonian Monte
Carlo within sequential Monte Carlo".
"""

import torch
from torch.special import ndtr, ndtri

from ..mcmc._kernels import standard_uniform

#: Standard deviation of the truncated-normal perturbation of the step size.
STEP_SIZE_PERTURBATION = 0.015


def initial_parameters(n, step_size, n_leapfrog, generator=None, dtype=torch.float64, device="cpu"):
    """``epsilon ~ U(0, step_size)`` and ``L`` uniform in ``{1, ..., n_leapfrog}``, per particle."""
    epsilon = step_size * torch.rand(n, generator=generator, dtype=dtype, device=device)
    length = torch.randint(1, n_leapfrog + 1, (n,), generator=generator, device=device)
    return epsilon.clamp(min=torch.finfo(dtype).tiny), length


def squared_jumping_distance(start, proposal, inverse_mass, n_leapfrog, acceptance_probability):
    """Rao-Blackwellised ESJD per leapfrog step of each particle's move:
    ``||proposal - start||**2 / L * min(1, exp(-dH))``.

    The distance is Mahalanobis in the particles' own scale, ``sum d**2 / var``
    with ``var`` the inverse mass. (The talk's slide prints ``d^T M^-1 d`` with
    ``M^-1 = var``, which weighs each coordinate by its variance instead of
    normalising it, and would let the widest coordinates alone pick the step.)
    """
    distance = ((proposal - start).square() / inverse_mass).sum(-1)
    jump = distance / n_leapfrog * acceptance_probability
    return torch.where(torch.isfinite(jump), jump, torch.zeros_like(jump))


def perturb_parameters(step_size, n_leapfrog, jumps, generator=None):
    """Draw each particle's ``(epsilon, L)`` from ``sum_j jumps_j R(h; h_j)``.

    A parent ``j`` is picked in proportion to its jump; ``epsilon`` from a
    normal around the parent's, truncated to positive values, and
    ``L = L_j + {-1, 0, +1}`` with equal probabilities (at least 1).
    """
    n = len(step_size)
    weights = jumps if bool((jumps > 0).any()) else torch.ones_like(jumps)
    parent = torch.multinomial(weights, n, replacement=True, generator=generator)
    centre = step_size[parent]
    # Inverse-CDF draw of N(centre, s**2) restricted to (0, inf).
    lower = ndtr(-centre / STEP_SIZE_PERTURBATION)
    uniform = standard_uniform(generator, centre)
    epsilon = centre + STEP_SIZE_PERTURBATION * ndtri(lower + uniform * (1 - lower))
    shift = torch.randint(-1, 2, (n,), generator=generator, device=n_leapfrog.device)
    return epsilon.clamp(min=torch.finfo(centre.dtype).tiny), (n_leapfrog[parent] + shift).clamp(min=1)
