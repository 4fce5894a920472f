"""Adaptive annealed SMC over a particle matrix, with the log evidence.

The particles are the rows of one ``(N, P)`` matrix. Stage ``t`` targets
``pi_t(theta) ∝ p(theta) p(y | theta)**lambda_t``, from ``lambda_0 = 0`` (the
prior) to 1 (the posterior), as in Del Moral, Doucet & Jasra (2006),
"Sequential Monte Carlo samplers". Each stage

1. picks ``lambda_t`` so that the ESS of the incremental weights is
   ``target_ess * N`` (:func:`next_increment`),
2. reweights by ``p(y | theta)**(lambda_t - lambda_{t-1})`` and adds
   ``log sum_i W_i p(y | theta_i)**(lambda_t - lambda_{t-1})`` to the log
   evidence (log space throughout),
3. resamples (systematically) when the ESS falls below
   ``resample_threshold * N``,
4. moves every particle by ``n_mcmc_steps`` steps of an MCMC kernel that
   leaves ``pi_t`` invariant, with per-particle parameters tuned from the last
   move's jumps (Buchholz, Chopin & Jacob 2021, "Adaptive tuning of
   Hamiltonian Monte Carlo within sequential Monte Carlo"), all shrunk
   together when the last moves' mean acceptance fell too low, and a diagonal
   mass from the particles' spread and the data's curvature at ``lambda_t``
   (:func:`~sklearn_quinn.smc._tuning.inverse_mass`).

Waste-free SMC (Dau & Chopin 2022, "Waste-free sequential Monte Carlo")
replaces steps 3 and 4: every stage resamples ``M = ceil(N / (k + 1))``
ancestors and runs a chain of ``k = n_mcmc_steps`` steps from each, and all
``k + 1`` states of every chain are the next particles. A stage then costs
``k M`` moves of a particle instead of ``k N``, and no state a move reaches is
thrown away; the particles are correlated within a chain, so at a given ``N``
its evidence can vary more. The moves' mass is taken from all ``N`` weighted
particles before resampling (:func:`~sklearn_quinn.smc._tuning.inverse_mass`),
which the ``M`` ancestors alone would estimate poorly.

SMC is a tempering rule, a resampling function and any MCMC kernel: the
kernel is built from the tempered log density by a ``mutation`` function and
stepped through its own ``step(generator, state) -> (state, info)``, unaware
that it runs inside SMC. The default, :func:`hmc_mutation`, is the MCMC
family's HMC; :func:`gibbs_mutation` puts any mutation within Gibbs updates
of hyperparameter columns (the particles then start from the hierarchical
prior, the incremental weights are the tempered likelihood's alone, and the
evidence is the one with the hyperparameters integrated out).
"""

import math
from numbers import Integral, Real
from typing import NamedTuple

import torch
from sklearn.utils import check_scalar

from .._core.log_posterior import LogPosterior
from ..mcmc._gibbs import ConditionalDensity, GibbsState, gibbs_step
from ..mcmc._kernels import hmc
from ._resampling import systematic_resample
from ._tempering import conditional_ess, effective_sample_size, next_increment, reweight, uniform_log_weights
from ._tuning import (
    HMC_MIN_ACCEPTANCE,
    MutationParameters,
    initial_parameters,
    inverse_mass,
    perturb_parameters,
    shrink_step_sizes,
    squared_jumping_distance,
)

#: The relative rounding of an ESS against its target: a stage resamples where the ESS is below the
#: threshold by more.
ESS_ROUNDING = 1e-9

#: A conditional ESS below this: one particle holds the stage's weight (``SMCResult.collapsed_stage``).
COLLAPSED_ESS = 1.5

#: The moves retry a trajectory that diverged on steps this many times smaller
#: (:func:`~sklearn_quinn.mcmc._kernels.retry_diverged`).
RETRY_FACTOR = 2


class SMCResult(NamedTuple):
    particles: torch.Tensor  # (N, P)
    log_weights: torch.Tensor  # (N,), normalised
    log_evidence: float
    lambdas: list  # lambda_0 = 0, ..., lambda_T = 1
    ess: list  # ESS after each stage's reweighting
    acceptance: list  # mean acceptance probability of each stage's moves
    step_size: torch.Tensor  # (N,), the last stage's epsilon per particle
    n_leapfrog: torch.Tensor | None  # (N,), the last stage's L per particle; None without trajectory lengths
    # The first stage whose smallest increment left one particle the weight (a conditional ESS below
    # COLLAPSED_ESS where the target allows more), 1-based; None where none did.
    collapsed_stage: int | None = None


def hmc_mutation(log_density, particles, parameters):
    """SMC's default move: the MCMC family's HMC kernel, started at the particles.

    Particle ``i`` integrates ``parameters.n_leapfrog[i]`` leapfrog steps of
    size ``parameters.step_size[i]`` with the diagonal inverse mass
    ``parameters.inverse_mass``. No step jitter: the tuning already spreads
    the step sizes over the particles. A trajectory that diverged is retried
    on steps ``RETRY_FACTOR`` times smaller (delayed rejection,
    :func:`~sklearn_quinn.mcmc._kernels.retry_diverged`): under a
    hierarchical prior the particles' stability limits differ with their
    precisions and noise, and a step size drawn from the others' can lie
    beyond a particle's own, where every move it tries would otherwise
    diverge and leave it in place. The tuning reads the first trajectory's
    acceptance and jump, what the step size itself did.

    Parameters
    ----------
    log_density : callable ``(N, P) -> (N,)``
        The stage's tempered log density.
    particles : tensor of shape (N, P)
    parameters : MutationParameters

    Returns
    -------
    state : HMCState
    step : callable ``(generator, state) -> (HMCState, Info)``
    """
    init, step = hmc(log_density, parameters.n_leapfrog, step_jitter=0.0, retry_factor=RETRY_FACTOR)
    return init(particles, parameters.step_size, parameters.inverse_mass), step


def gibbs_mutation(gibbs, mutation=hmc_mutation):
    """``mutation`` of the weights within exact Gibbs updates of the hyperparameter columns.

    Each step moves the first ``gibbs.n_params`` columns of every particle by
    ``mutation``'s kernel on the stage's target given the particle's
    hyperparameters, then draws the hyperparameters from their conditionals
    at the stage's temperature (see :mod:`sklearn_quinn.mcmc._gibbs`). The
    kernel gets the weights' columns of the stage's inverse mass (:func:`run_smc`),
    and its own proposal is what the jumps that tune it are measured on.

    Parameters
    ----------
    gibbs : HyperparameterGibbs
    mutation : callable ``(log_density, particles, parameters) -> (state, step)``, default=hmc_mutation

    Returns
    -------
    mutation : callable ``(log_density, particles, parameters) -> (GibbsState, step)``
        For :func:`run_smc`; ``log_density`` must be a :class:`LogPosterior`
        (its ``temperature`` is the stage's).
    """

    def within_gibbs(log_density, particles, parameters):
        n_moved = gibbs.n_params
        conditional = ConditionalDensity(log_density, n_moved)
        conditional.condition_on(particles)
        weights_only = parameters._replace(inverse_mass=parameters.inverse_mass[:, :n_moved])
        kernel, step = mutation(conditional, particles[:, :n_moved].contiguous(), weights_only)
        return GibbsState(particles, kernel), gibbs_step(step, conditional, gibbs, log_density.temperature)

    return within_gibbs


def run_smc(log_likelihood, log_prior, particles, *, target_ess=0.5, resample_threshold=0.5, n_mcmc_steps=1,
            step_size=0.5, n_leapfrog=50, mutation=hmc_mutation, min_acceptance=HMC_MIN_ACCEPTANCE,
            waste_free=False, generator=None, progress=None):
    """Anneal ``particles`` drawn from the prior to the posterior; estimate the log evidence.

    Parameters
    ----------
    log_likelihood, log_prior : callable ``(N, P) -> (N,)`` with ``value_and_grad``
        Normalised densities (see :mod:`sklearn_quinn._core.log_posterior`),
        so that the log evidence is ``log p(y)``. A likelihood with
        ``fisher_draws`` (the package's) gives the moves' mass the data's
        curvature besides the particles' spread (:func:`~sklearn_quinn.smc._tuning.inverse_mass`).
    particles : tensor of shape (N, P)
        Draws from the prior.
    target_ess : float in (0, 1)
        ESS fraction each tempering step keeps.
    resample_threshold : float in (0, 1]
        Resample when the ESS falls below this fraction of ``N`` (unused by
        waste-free SMC, which resamples at every stage).
    n_mcmc_steps : int >= 1
        MCMC steps per stage: of every particle, or with ``waste_free`` of
        every chain.
    step_size : float > 0
        Initial ``epsilon ~ U(0, step_size)`` per particle.
    n_leapfrog : int >= 1 or None
        Initial ``L ~ U{1, ..., n_leapfrog}`` per particle; None for a kernel
        without trajectory lengths (then only the step sizes are tuned).
    mutation : callable ``(log_density, particles, parameters) -> (state, step)``, default=hmc_mutation
        Builds an MCMC kernel for a stage's tempered log density with the
        particles' :class:`MutationParameters` and starts it at the
        particles. ``step(generator, state)`` must return a state with a
        ``position`` ``(N, P)`` and an ``Info`` with ``acceptance_probability``
        and ``proposed_position`` (as the kernels of
        :mod:`sklearn_quinn.mcmc._kernels` do).
    min_acceptance : float in (0, 1) or None, default=0.65
        When the last moves' mean acceptance fell below it, every step size
        drawn for the next stage is multiplied by
        ``exp(acceptance - min_acceptance)``: 0.65 is HMC's optimal acceptance
        in high dimensions; 0.574 is MALA's (Roberts & Rosenthal 1998, "Optimal
        scaling of discrete approximations to Langevin diffusions"). None
        leaves the step sizes to the jump-weighted draw.
    waste_free : bool, default=False
        Waste-free SMC (see the module's docstring): the step sizes and
        trajectory lengths are then one per chain.
    generator : torch.Generator, optional
    progress : callable ``(stage, lambda, ess) -> None``, optional
        Called after each stage.

    Returns
    -------
    SMCResult

    Raises
    ------
    ValueError, TypeError
        For particles that are not a matrix of at least two rows, or a
        keyword outside its range above (sklearn's ``check_scalar``).
    """
    _check_arguments(particles, target_ess, resample_threshold, n_mcmc_steps, step_size, n_leapfrog, min_acceptance)
    n = particles.shape[0]
    dtype, device = particles.dtype, particles.device
    log_weights = uniform_log_weights(n, dtype, device)
    log_like = _finite_log_likelihood(log_likelihood, particles)
    n_chains = -(-n // (n_mcmc_steps + 1)) if waste_free else n
    epsilon, length = initial_parameters(n_chains, step_size, n_leapfrog, generator, dtype, device)
    jumps = acceptance = collapsed_stage = None
    lambdas, ess_history, acceptance_history = [0.0], [], []
    log_evidence, lam = 0.0, 0.0
    while lam < 1.0:
        increment = next_increment(log_weights, log_like, 1.0 - lam, target_ess)
        # Below its target only where no increment reaches it: the likelihood finite at one particle, or
        # a prior that puts next to no mass where the data are.
        if collapsed_stage is None and target_ess * n > COLLAPSED_ESS and conditional_ess(
                log_weights, log_like, increment) < COLLAPSED_ESS:
            collapsed_stage = len(lambdas)
        log_weights, log_evidence_increment = reweight(log_weights, log_like, increment)
        log_evidence += log_evidence_increment
        lam = 1.0 if increment == 1.0 - lam else lam + increment
        ess = effective_sample_size(log_weights)
        # The moves' mass: waste-free's from all N weighted particles (its M ancestors would estimate it
        # poorly), the standard moves' from the particles they move, resampled or not.
        if waste_free:
            mass = inverse_mass(log_likelihood, particles, log_weights, lam, generator)[:n_chains]
        # Below the threshold by more than rounding: an increment the ESS chose leaves it at its target, which
        # equals the threshold at the defaults, and which of the two the ESS lands on is an ulp's matter.
        if waste_free or ess < resample_threshold * n * (1 - ESS_ROUNDING):
            particles = particles[systematic_resample(log_weights, generator, n_chains)]
            log_weights = uniform_log_weights(n_chains, dtype, device)
        if not waste_free:
            mass = inverse_mass(log_likelihood, particles, log_weights, lam, generator)
        if jumps is not None:
            epsilon, length = perturb_parameters(epsilon, length, jumps, generator)
            if min_acceptance is not None:
                epsilon = shrink_step_sizes(epsilon, acceptance, min_acceptance)
        if length is not None:
            # Longest trajectories first: the leapfrog steps then move only the rows still going.
            order = torch.argsort(length, descending=True)
            particles, log_weights, epsilon, length = (x[order] for x in (particles, log_weights, epsilon, length))
        target = LogPosterior(log_likelihood, log_prior, temperature=lam)
        parameters = MutationParameters(epsilon, length, mass)
        states, acceptance, jumps = move(mutation, target, particles, parameters, n_mcmc_steps, generator,
                                         keep_states=waste_free)
        if waste_free:  # every state of every chain, chain by chain, the last chain's tail cut to N
            particles = torch.stack(states, dim=1).reshape(-1, particles.shape[1])[:n]
            log_weights = uniform_log_weights(n, dtype, device)
        else:
            particles = states[-1]
        log_like = _finite_log_likelihood(log_likelihood, particles)
        lambdas.append(lam)
        ess_history.append(ess)
        acceptance_history.append(acceptance)
        if progress is not None:
            progress(len(lambdas) - 1, lam, ess)
    if waste_free:  # each chain's parameters for each of its states, as the particles are laid out
        epsilon = epsilon.repeat_interleave(n_mcmc_steps + 1)[:n]
        length = None if length is None else length.repeat_interleave(n_mcmc_steps + 1)[:n]
    return SMCResult(particles, log_weights, log_evidence, lambdas, ess_history, acceptance_history, epsilon, length,
                     collapsed_stage)


def _check_arguments(particles, target_ess, resample_threshold, n_mcmc_steps, step_size, n_leapfrog,
                     min_acceptance):
    """Refuse what :func:`run_smc` cannot run: a ``target_ess`` of 0 or 1 would never
    move the temperature, a step size of 0 never the particles."""
    if particles.ndim != 2 or particles.shape[0] < 2:
        raise ValueError(f"particles must be a matrix of at least 2 rows, got shape {tuple(particles.shape)}.")
    check_scalar(target_ess, "target_ess", Real, min_val=0, max_val=1, include_boundaries="neither")
    check_scalar(resample_threshold, "resample_threshold", Real, min_val=0, max_val=1, include_boundaries="right")
    check_scalar(n_mcmc_steps, "n_mcmc_steps", Integral, min_val=1)
    check_scalar(step_size, "step_size", Real, min_val=0, include_boundaries="neither")
    if n_leapfrog is not None:
        check_scalar(n_leapfrog, "n_leapfrog", Integral, min_val=1)
    if min_acceptance is not None:
        check_scalar(min_acceptance, "min_acceptance", Real, min_val=0, max_val=1, include_boundaries="neither")


def move(mutation, target, particles, parameters, n_steps, generator=None, keep_states=False):
    """``n_steps`` steps of the kernel ``mutation`` builds for ``target``, from the particles.

    Parameters
    ----------
    mutation : callable ``(log_density, particles, parameters) -> (state, step)``
        See :func:`run_smc`.
    target : callable ``(N, P) -> (N,)``
        The log density the kernel leaves invariant.
    particles : tensor of shape (N, P)
    parameters : MutationParameters
    n_steps : int
    generator : torch.Generator, optional
    keep_states : bool, default=False
        Return every state of the chains, not only the last.

    Returns
    -------
    states : list of tensor of shape (N, P)
        The particles before the first step and after each (``keep_states``),
        or after the last step alone.
    acceptance : float
        Mean acceptance probability over particles and steps.
    jumps : tensor of shape (N,)
        Each particle's Rao-Blackwellised squared jumping distance (per
        leapfrog step when the parameters have trajectory lengths), averaged
        over the steps.
    """
    state, step = mutation(target, particles, parameters)
    acceptance, jumps = 0.0, torch.zeros_like(parameters.step_size)
    states = [state.position]
    for _ in range(n_steps):
        start = state.position
        state, info = step(generator, state)
        jumps += squared_jumping_distance(start, info.proposed_position, parameters.inverse_mass,
                                          parameters.n_leapfrog, info.acceptance_probability)
        acceptance += float(info.acceptance_probability.mean())
        states = [*states, state.position] if keep_states else [state.position]
    return states, acceptance / n_steps, jumps / n_steps


def _finite_log_likelihood(log_likelihood, particles):
    """The log likelihood of each particle, ``-inf`` where it is not finite
    (such a particle gets zero weight); an error when no particle has one."""
    with torch.no_grad():
        value = log_likelihood(particles)
    value = torch.where(torch.isfinite(value), value, torch.full_like(value, -math.inf))
    if not bool(torch.isfinite(value).any()):
        raise FloatingPointError("Every particle has a zero or non-finite likelihood; the SMC cannot start.")
    return value
