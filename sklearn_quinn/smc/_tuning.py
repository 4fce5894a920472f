"""Per-particle parameters of SMC's moves, tuned from the particles and the last move's jumps.

After Buchholz, Chopin & Jacob (2021), "Adaptive tuning of Hamiltonian Monte
Carlo within sequential Monte Carlo": the diagonal mass is the inverse of the
particles' weighted variance plus the data's curvature at the stage's
temperature (:func:`inverse_mass`), and each particle's step size ``epsilon``
and trajectory length ``L`` are drawn around those of the particles whose last
move jumped furthest (per leapfrog step). The step sizes are then scaled
together when the moves' mean acceptance falls too low (:func:`shrink_step_sizes`).
"""

import math
from typing import NamedTuple

import torch
from torch.special import ndtr, ndtri

from .._core.rng import choice, standard_uniform

#: Standard deviation of the truncated-normal perturbation of the step size.
STEP_SIZE_PERTURBATION = 0.015

#: HMC's optimal mean acceptance in high dimensions, below which the step sizes shrink
#: (:func:`shrink_step_sizes`).
HMC_MIN_ACCEPTANCE = 0.65


class MutationParameters(NamedTuple):
    """What a stage's move is given, per particle."""

    step_size: torch.Tensor  # (N,)
    n_leapfrog: torch.Tensor | None  # (N,) integer trajectory lengths; None for a kernel without
    inverse_mass: torch.Tensor  # (N, P), the diagonal inverse mass (:func:`inverse_mass`), each row the same


def particle_variance(particles, log_weights):
    """The particles' weighted variance per coordinate, ``(N, P)`` (each row the same).

    Used as the diagonal inverse mass (``M = diag(var)^-1``) and as the scale
    of the jumps; clipped at the dtype's epsilon so that a coordinate on which
    the particles agree still has a positive scale.
    """
    weights = log_weights.exp()
    mean = weights @ particles
    variance = weights @ (particles - mean).square()
    return variance.clamp(min=torch.finfo(particles.dtype).eps).expand_as(particles)


def inverse_mass(log_likelihood, particles, log_weights, temperature, generator=None):
    """The moves' diagonal inverse mass ``(N, P)`` (each row the same) at the stage of ``temperature``:
    ``1 / (temperature * F + 1 / var)``, with ``var`` the particles' weighted variance
    (:func:`particle_variance`) and ``F`` their weighted mean of each coordinate's Fisher
    information, estimated from one draw of targets per particle (``log_likelihood.fisher_draws``;
    the variance alone where the likelihood has none).

    The variance is the spread of the population, and a network's population spans many modes:
    its hidden units are exchangeable, so that unit ``u`` of one particle stands for any unit of
    another, and along the weights the data pin, the population is far wider than any
    particle's posterior about it. A mass of the variance alone then whitens the prior's scale,
    and the leapfrog steps must be as small as the stiffest of the data's directions allows in
    those units (docs/smc.rst, "The moves' mass", measures both masses on UCI concrete). The
    information is the data's curvature of the tempered likelihood, coordinate by coordinate,
    where the variance's inverse stands for the prior's (and for the particles' spread along
    what the data do not pin); at temperature 0 the mass is the variance, as the prior's scale
    asks. It is a function of the population, as the variance is, never of the particle it
    moves.
    """
    variance = particle_variance(particles, log_weights)
    draws = getattr(log_likelihood, "fisher_draws", None)
    if draws is None or temperature == 0:
        return variance
    weights = log_weights.exp()
    with torch.no_grad():
        squares = draws(particles, generator).square()
    # A particle of zero weight has no say, and where its likelihood is not finite (the weight
    # run_smc gives it) its draws need not be either: 0 * inf would make every coordinate's mass NaN.
    information = weights @ torch.where(weights[:, None] > 0, squares, 0.0)
    return (1.0 / (temperature * information + 1.0 / variance[0])).expand_as(particles)


def initial_parameters(n, step_size, n_leapfrog, generator=None, dtype=torch.float64, device="cpu"):
    """``epsilon ~ U(0, step_size)`` and ``L`` uniform in ``{1, ..., n_leapfrog}``, per particle.

    With ``n_leapfrog=None`` the lengths are None (a kernel without them).
    """
    epsilon = step_size * torch.rand(n, generator=generator, dtype=dtype, device=device)
    length = None
    if n_leapfrog is not None:
        length = torch.randint(1, n_leapfrog + 1, (n,), generator=generator, device=device)
    return epsilon.clamp(min=torch.finfo(dtype).tiny), length


def squared_jumping_distance(start, proposal, inverse_mass, n_leapfrog, acceptance_probability):
    """Rao-Blackwellised ESJD of each particle's move:
    ``||proposal - start||**2 / L * min(1, exp(-dH))``.

    The distance is Mahalanobis in the moves' own scale, ``sum d**2 / m`` with
    ``m`` the inverse mass (:func:`inverse_mass`): dividing by it normalises each
    coordinate, where multiplying by it would let the widest coordinates alone
    pick the step. The division by ``L`` (none when ``n_leapfrog`` is None)
    counts the jump per gradient evaluation, the cost Buchholz et al. (2021)
    normalise by.
    """
    distance = ((proposal - start).square() / inverse_mass).sum(-1)
    if n_leapfrog is not None:
        distance = distance / n_leapfrog
    jump = distance * acceptance_probability
    return torch.where(torch.isfinite(jump), jump, torch.zeros_like(jump))


def perturb_parameters(step_size, n_leapfrog, jumps, generator=None):
    """Draw each particle's ``(epsilon, L)`` from ``sum_j jumps_j R(h; h_j)``.

    A parent ``j`` is picked in proportion to its jump; ``epsilon`` from a
    normal around the parent's, truncated to positive values, and
    ``L = L_j + {-1, 0, +1}`` with equal probabilities (at least 1; None
    stays None).
    """
    n = len(step_size)
    weights = jumps if bool((jumps > 0).any()) else torch.ones_like(jumps)
    parent = choice(generator, weights, n)
    centre = step_size[parent]
    # Inverse-CDF draw of N(centre, s**2) restricted to (0, inf).
    lower = ndtr(-centre / STEP_SIZE_PERTURBATION)
    uniform = standard_uniform(generator, centre)
    epsilon = centre + STEP_SIZE_PERTURBATION * ndtri(lower + uniform * (1 - lower))
    epsilon = epsilon.clamp(min=torch.finfo(centre.dtype).tiny)
    if n_leapfrog is None:
        return epsilon, None
    shift = torch.randint(-1, 2, (n,), generator=generator, device=n_leapfrog.device)
    return epsilon, (n_leapfrog[parent] + shift).clamp(min=1)


def shrink_step_sizes(step_size, acceptance, min_acceptance):
    """Every step size times ``exp(acceptance - min_acceptance)`` when the last
    moves' mean ``acceptance`` fell below ``min_acceptance``; unchanged otherwise.

    The jump-weighted draw of :func:`perturb_parameters` copies the step sizes
    whose last move jumped furthest, and at a low mean acceptance those are the
    few large steps that happened to be accepted; the next stage's target is
    also sharper than the one the jumps were measured on. Both bias the step
    sizes upwards, and on a network's posterior the later stages of a tempering
    then move at a mean acceptance of 0.2-0.5. A rejected move leaves a
    particle where it was, and after a resampling a copy stays a copy. The
    acceptance that maximises HMC's jumps per gradient falls to 0.65 as the
    dimension grows (Beskos, Pillai, Roberts, Sanz-Serna & Stuart 2013,
    "Optimal tuning of the hybrid Monte Carlo algorithm") and is higher in low
    dimensions, so an acceptance below 0.65 is too low in any dimension, and a
    higher one is left to the draw. The factor is the multiplicative update of
    BlackJAX's ``update_scale_from_acceptance_rate``, applied one way to the
    particles' common scale; their spread stays the draw's.
    """
    return step_size * math.exp(min(acceptance - min_acceptance, 0.0))
