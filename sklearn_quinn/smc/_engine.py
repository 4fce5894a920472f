"""Adaptive annealed SMC over a particle matrix, with the log evidence (talk, Algorithm 2).

The particles are the rows of one ``(N, P)`` matrix. Stage ``t`` targets
``pi_t(theta) ∝ p(theta) p(y | theta)**lambda_t``, from ``lambda_0 = 0`` (the
prior) to 1 (the posterior). Each stage

1. picks ``lambda_t`` so that the ESS of the incremental weights is
   ``target_ess * N`` (:func:`next_increment`),
2. reweights by ``p(y | theta)**(lambda_t - lambda_{t-1})`` and adds
   ``log sum_i W_i p(y | theta_i)**(lambda_t - lambda_{t-1})`` to the log
   evidence (log space throughout),
3. resamples (systematically) when the ESS falls below
   ``resample_threshold * N``,
4. moves every particle by ``n_mcmc_steps`` HMC steps that leave ``pi_t``
   invariant, with the diagonal mass matrix from the particles' variance and
   per-particle ``(epsilon, L)`` drawn from the last move's jumps.

The move is the MCMC family's HMC proposal and Metropolis step, unaware that
it runs inside SMC.
"""

import math
from typing import NamedTuple

import torch

from .._core.log_posterior import LogPosterior
from ..mcmc._kernels import hmc, hmc_proposal, metropolis_accept, standard_normal
from ._resampling import systematic_resample
from ._tempering import effective_sample_size, next_increment, reweight, uniform_log_weights
from ._tuning import initial_parameters, perturb_parameters, squared_jumping_distance


class SMCResult(NamedTuple):
    particles: torch.Tensor  # (N, P)
    log_weights: torch.Tensor  # (N,), normalised
    log_evidence: float
    lambdas: list  # lambda_0 = 0, ..., lambda_T = 1
    ess: list  # ESS after each stage's reweighting
    acceptance: list  # mean acceptance probability of each stage's moves
    step_size: torch.Tensor  # (N,), the last stage's epsilon per particle
    n_leapfrog: torch.Tensor  # (N,), the last stage's L per particle


def run_smc(log_likelihood, log_prior, particles, *, target_ess=0.5, resample_threshold=0.5, n_mcmc_steps=1,
            step_size=0.1, n_leapfrog=50, generator=None, progress=None):
    """Anneal ``particles`` drawn from the prior to the posterior; estimate the log evidence.

    Parameters
    ----------
    log_likelihood, log_prior : callable ``(N, P) -> (N,)`` with ``value_and_grad``
        Normalised densities (see :mod:`sklearn_quinn._core.log_posterior`),
        so that the log evidence is ``log p(y)``.
    particles : tensor of shape (N, P)
        Draws from the prior.
    target_ess : float in (0, 1)
        ESS fraction each tempering step keeps.
    resample_threshold : float in (0, 1]
        Resample when the ESS falls below this fraction of ``N``.
    n_mcmc_steps : int
        HMC steps per stage.
    step_size, n_leapfrog : float, int
        Initial ``epsilon ~ U(0, step_size)`` and ``L ~ U{1, ..., n_leapfrog}`` per particle.
    generator : torch.Generator, optional
    progress : callable ``(stage, lambda, ess) -> None``, optional
        Called after each stage.

    Returns
    -------
    SMCResult
    """
    n = particles.shape[0]
    dtype, device = particles.dtype, particles.device
    log_weights = uniform_log_weights(n, dtype, device)
    log_like = _finite_log_likelihood(log_likelihood, particles)
    epsilon, length = initial_parameters(n, step_size, n_leapfrog, generator, dtype, device)
    jumps = None
    lambdas, ess_history, acceptance_history = [0.0], [], []
    log_evidence, lam = 0.0, 0.0
    while lam < 1.0:
        increment = next_increment(log_weights, log_like, 1.0 - lam, target_ess)
        log_weights, log_evidence_increment = reweight(log_weights, log_like, increment)
        log_evidence += log_evidence_increment
        lam = 1.0 if increment == 1.0 - lam else lam + increment
        ess = effective_sample_size(log_weights)
        if ess < resample_threshold * n:
            index = systematic_resample(log_weights, generator)
            particles, log_like = particles[index], log_like[index]
            log_weights = uniform_log_weights(n, dtype, device)
        if jumps is not None:
            epsilon, length = perturb_parameters(epsilon, length, jumps, generator)
        target = LogPosterior(log_likelihood, log_prior, temperature=lam)
        particles, acceptance, jumps = hmc_move(target, particles, log_weights, epsilon, length, n_mcmc_steps,
                                                generator)
        log_like = _finite_log_likelihood(log_likelihood, particles)
        lambdas.append(lam)
        ess_history.append(ess)
        acceptance_history.append(acceptance)
        if progress is not None:
            progress(len(lambdas) - 1, lam, ess)
    return SMCResult(particles, log_weights, log_evidence, lambdas, ess_history, acceptance_history, epsilon, length)


def hmc_move(target, particles, log_weights, epsilon, length, n_steps, generator=None):
    """``n_steps`` HMC steps per particle, leaving ``target`` invariant.

    The inverse mass is the particles' weighted variance per coordinate
    (``M = diag(var)^-1``); particle ``i`` integrates ``length[i]`` leapfrog
    steps of size ``epsilon[i]``.

    Returns
    -------
    particles : tensor of shape (N, P)
    acceptance : float
        Mean acceptance probability over particles and steps.
    jumps : tensor of shape (N,)
        Each particle's Rao-Blackwellised squared jumping distance per
        leapfrog step, averaged over the steps.
    """
    weights = log_weights.exp()
    mean = weights @ particles
    variance = weights @ (particles - mean).square()
    inverse_mass = variance.clamp(min=torch.finfo(particles.dtype).eps).expand_as(particles)
    init, _ = hmc(target, n_leapfrog=1)
    state = init(particles, epsilon, inverse_mass)
    acceptance, jumps = 0.0, torch.zeros_like(epsilon)
    for _ in range(n_steps):
        proposal, log_ratio = hmc_proposal(target, standard_normal(generator, state.position), state, epsilon, length)
        start = state.position
        state, info = metropolis_accept(generator, log_ratio, proposal, state)
        jumps += squared_jumping_distance(start, proposal.position, inverse_mass, length, info.acceptance_probability)
        acceptance += float(info.acceptance_probability.mean())
    return state.position, acceptance / n_steps, jumps / n_steps


def _finite_log_likelihood(log_likelihood, particles):
    """The log likelihood of each particle, ``-inf`` where it is not finite
    (such a particle gets zero weight); an error when no particle has one."""
    with torch.no_grad():
        value = log_likelihood(particles)
    value = torch.where(torch.isfinite(value), value, torch.full_like(value, -math.inf))
    if not bool(torch.isfinite(value).any()):
        raise FloatingPointError("Every particle has a zero or non-finite likelihood; the SMC cannot start.")
    return value
