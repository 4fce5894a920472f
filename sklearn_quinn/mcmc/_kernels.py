"""MCMC kernels over a batch of chains, pure torch.

Each sampler is a pair of plain functions, as in blackjax: ``init(position)
-> State`` and ``step(generator, state) -> (State, Info)``. The state holds a
``(C, K)`` matrix of positions, one row per chain; one call of the batched
log density (and its gradient) serves every chain at each step. Tuning
parameters (step size, inverse mass, proposal factor) are part of the state so
that an adaptation loop can change them between steps; they have one row per
chain. A proposal whose log density or energy is not finite is a divergence:
it is rejected, counted in ``Info``, and never propagated. A Hamiltonian
trajectory (HMC, NUTS) whose energy error passes ``DIVERGENCE_THRESHOLD`` is
one too, as NumPyro counts it for HMC and NUTS, and Stan for NUTS.

``log_density`` maps ``(C, K) -> (C,)`` and must treat rows independently
(HMC with per-chain trajectory lengths calls it on a leading block of the
rows, the chains still moving; a density that holds something per row, as
:class:`~sklearn_quinn.mcmc._gibbs.ConditionalDensity` its hyperparameters,
may offer ``select(index)``, itself over those rows, and then the rows whose
trajectories diverged leave the block); it may carry a ``value_and_grad`` attribute
``(C, K) -> ((C,), (C, K))`` that the gradient-based kernels then call
instead of autograd. A density may also carry a ``surrogate`` (a density of the
same rows, or None): a cheaper approximation of it, whose gradient HMC's kicks then
take (:func:`leapfrog`) and on which NUTS builds its trees (:func:`~sklearn_quinn.mcmc.nuts`),
their accept steps still the density's own value.
"""

import math
from typing import NamedTuple

import torch

from .._core.compiling import compiled_or_eager, repeat
from .._core.rng import standard_normal, standard_uniform


def value_and_grad(log_density, position):
    """Log density ``(C,)`` and its gradient ``(C, K)`` at each row of ``position``.

    Uses ``log_density.value_and_grad`` when the density provides one (a
    hand-written gradient), autograd otherwise.
    """
    direct = getattr(log_density, "value_and_grad", None)
    if direct is not None:
        return direct(position)
    with torch.enable_grad():
        position = position.detach().requires_grad_(True)
        value = log_density(position)
        (gradient,) = torch.autograd.grad(value.sum(), position)
    return value.detach(), gradient


def value_and_force(log_density, position):
    """Log density ``(C,)`` and the force ``(C, K)`` that HMC's kicks take: the gradient of the
    density's ``surrogate`` where it has one (see :func:`leapfrog`), else its own."""
    surrogate = getattr(log_density, "surrogate", None)
    if surrogate is None:
        return value_and_grad(log_density, position)
    with torch.no_grad():
        return log_density(position), value_and_grad(surrogate, position)[1]


#: An energy error beyond this many nats is a divergence (Stan's and NumPyro's threshold for NUTS, NumPyro's for HMC).
DIVERGENCE_THRESHOLD = 1000.0


class Info(NamedTuple):
    """What one step did, per chain."""

    acceptance_probability: torch.Tensor  # (C,)
    is_accepted: torch.Tensor  # (C,)
    is_divergent: torch.Tensor  # (C,)
    # (C, K), the position proposed, accepted or not: a Rao-Blackwellised jump
    # (acceptance_probability times the squared proposed jump) needs it.
    proposed_position: torch.Tensor
    # (C,), the leapfrog steps each chain's trajectory took, for a kernel whose
    # trajectories set their own length (NUTS); None for the others.
    n_leapfrog: torch.Tensor | None = None


def metropolis_accept(generator, log_ratio, proposal, state):
    """Accept each chain's proposal with probability ``min(1, exp(log_ratio))``.

    ``proposal`` is ``state`` with some fields replaced; those fields take the
    proposal's rows where accepted. A non-finite ratio is a divergence, rejected.
    """
    return metropolis_select(standard_uniform(generator, log_ratio), log_ratio, proposal, state)


def metropolis_select(uniform, log_ratio, proposal, state, divergence_threshold=math.inf):
    """:func:`metropolis_accept` given its uniform draws ``(C,)``: no generator, so it compiles.

    A ratio below ``-divergence_threshold`` (an energy error above it, for a
    Hamiltonian proposal) is a divergence too; its acceptance probability,
    under ``exp(-divergence_threshold)``, is set to 0.
    """
    divergent = is_divergent(log_ratio, divergence_threshold)
    log_ratio = torch.where(divergent, torch.full_like(log_ratio, -math.inf), log_ratio)
    probability = log_ratio.clamp(max=0.0).exp()
    accepted = uniform < probability

    def pick(new, old):
        if new is old:
            return old
        return torch.where(accepted.view(-1, *[1] * (new.dim() - 1)), new, old)

    return type(state)(*map(pick, proposal, state)), Info(probability, accepted, divergent, proposal.position)


def is_divergent(log_ratio, threshold=DIVERGENCE_THRESHOLD):
    """Whether a proposal diverged: its log acceptance ratio below ``-threshold``, or not finite (NaN too)."""
    return ~(log_ratio > -threshold) | ~torch.isfinite(log_ratio)


# ----------------------------------------------------------------------- HMC
class HMCState(NamedTuple):
    position: torch.Tensor  # (C, K)
    log_density: torch.Tensor  # (C,)
    gradient: torch.Tensor  # (C, K)
    step_size: torch.Tensor  # (C,)
    inverse_mass: torch.Tensor  # (C, K), the diagonal of M^-1


def hmc(log_density, n_leapfrog, step_jitter=0.2, compile=False, retry_factor=None):
    """Hamiltonian Monte Carlo with a diagonal mass matrix and leapfrog integration.

    ``H(w, p) = -log p(w) + p^T M^-1 p / 2``; ``n_leapfrog`` leapfrog steps of
    size ``step_size`` propose ``(w', p')``, accepted with probability
    ``min(1, exp(H(w, p) - H(w', p')))``. ``n_leapfrog`` is an int, or a
    ``(C,)`` integer tensor of per-chain trajectory lengths sorted longest
    first (the chains' rows in that order: the steps move the leading rows
    still going as views). Each step draws
    its step size uniformly within ``± step_jitter`` of ``step_size`` (Neal
    2011, "MCMC using Hamiltonian dynamics", 5.4.2.2): a fixed trajectory
    length near a period of the target would otherwise return the chain to
    where it started; ``step_jitter=0`` draws nothing and keeps
    ``step_size``. With ``compile=True`` (and one ``n_leapfrog`` for every
    chain) everything but the random draws runs through ``torch.compile``
    (see :func:`~sklearn_quinn._core.compiling.compiled_or_eager`): the
    trajectory, its energies and the accept step become one graph, whose
    leapfrog steps are one ``torch.while_loop`` (:func:`leapfrog`), so that
    it compiles in the time of one step whatever the trajectory's length.

    ``retry_factor=a`` retries the trajectories that diverged from where they
    started, with the same momenta, ``a`` times as many steps of ``1/a`` the
    size (:func:`retry_diverged`); the step's ``Info`` stays the first
    trajectory's, so that a tuning reads what the step size itself did.

    Returns
    -------
    init : callable ``(position, step_size, inverse_mass=None) -> HMCState``
    step : callable ``(generator, state) -> (HMCState, Info)``
    """

    def init(position, step_size, inverse_mass=None):
        return hmc_state(log_density, position, step_size, inverse_mass, value_and_force)

    def jittered(step_size, jitter):
        return step_size if jitter is None else step_size * (1 + step_jitter * (2 * jitter - 1))

    def hmc_transition(state, jitter, momentum_noise, uniform):
        proposal, log_ratio = hmc_proposal(log_density, momentum_noise, state, jittered(state.step_size, jitter),
                                           n_leapfrog)
        return metropolis_select(uniform, log_ratio, proposal, state, DIVERGENCE_THRESHOLD)

    transition = compiled_or_eager(hmc_transition) if compile else hmc_transition

    def step(generator, state):
        jitter = standard_uniform(generator, state.step_size) if step_jitter else None
        momentum_noise = standard_normal(generator, state.position)
        uniform = standard_uniform(generator, state.step_size)  # one per chain, for the accept step
        moved, info = transition(state, jitter, momentum_noise, uniform)
        if retry_factor is not None and bool(info.is_divergent.any()):
            moved = retry_diverged(generator, log_density, state, moved, info.is_divergent, momentum_noise,
                                   jittered(state.step_size, jitter), n_leapfrog, retry_factor)
        return moved, info

    return init, step


def hmc_state(log_density, position, step_size, inverse_mass=None, evaluate=value_and_grad):
    """The :class:`HMCState` of chains at ``position (C, K)``, with one step
    size per chain and a diagonal inverse mass (the identity by default); the
    ``init`` of :func:`hmc` (``evaluate=value_and_force``: its gradient is the
    force its kicks take) and of :func:`~sklearn_quinn.mcmc.nuts`."""
    value, gradient = evaluate(log_density, position)
    step_size = torch.as_tensor(step_size, dtype=position.dtype, device=position.device)
    if inverse_mass is None:
        inverse_mass = torch.ones_like(position)
    return HMCState(position, value, gradient, step_size.expand(position.shape[0]).clone(),
                    inverse_mass.expand_as(position).clone())


def hmc_proposal(log_density, momentum_noise, state, epsilon, n_leapfrog):
    """One leapfrog trajectory from each row of an :class:`HMCState`.

    Takes momenta ``p ~ N(0, M)`` from standard normal draws ``momentum_noise``
    ``(C, K)`` and integrates with step sizes ``epsilon`` ``(C,)`` for
    ``n_leapfrog`` steps: an int, or a ``(C,)`` integer tensor of per-row
    trajectory lengths.

    Returns
    -------
    proposal : HMCState
        The trajectories' end points (where a trajectory stopped, for one
        that diverged: see :func:`leapfrog`).
    log_ratio : tensor of shape (C,)
        ``H(w, p) - H(w', p')``, the log acceptance ratio; ``-inf`` for a
        trajectory that diverged.
    """
    proposal, _, log_ratio = _trajectory(log_density, momentum_noise / state.inverse_mass.sqrt(), state, epsilon,
                                         n_leapfrog)
    return proposal, log_ratio


def _trajectory(log_density, momentum, state, epsilon, n_leapfrog):
    """:func:`hmc_proposal` from the momenta themselves; also returns the end's momenta."""
    position, value, gradient, _, inverse_mass = state
    energy = hamiltonian(value, momentum, inverse_mass)
    position, momentum, value, gradient, diverged = leapfrog(
        log_density, position, momentum, gradient, epsilon.unsqueeze(-1), inverse_mass, n_leapfrog
    )
    log_ratio = torch.where(diverged, -math.inf, energy - hamiltonian(value, momentum, inverse_mass))
    return state._replace(position=position, log_density=value, gradient=gradient), momentum, log_ratio


def retry_diverged(generator, log_density, state, moved, diverged, momentum_noise, epsilon, n_leapfrog, factor):
    """Delayed rejection of the HMC trajectories that diverged (Modi, Barnett & Carpenter 2023,
    "Delayed rejection Hamiltonian Monte Carlo for sampling multiscale distributions"), after
    :func:`hmc`'s step moved ``state`` to ``moved``.

    A row whose trajectory diverged (``diverged``, and so rejected) tries a second one from the
    same start with the same momenta: ``factor`` times as many steps of ``1/factor`` the size.
    Its end ``y`` is accepted with probability ``min(1, exp(H(x) - H(y)))`` if the first
    trajectory from ``y`` (with the end's momenta reversed: the ghost) diverges too, and
    never otherwise. Modi et al. retry every rejected trajectory; here only a divergence is
    retried, a second stage tried with a probability that depends on the first, which the
    ratio must then carry at both ends (Green & Mira 2001, "Delayed rejection in reversible
    jump Metropolis-Hastings"): the move back from ``y`` exists only where ``y``'s own first
    trajectory diverges. A divergence is a rejection with certainty, so the ratio's factors
    ``1 - alpha_1`` are 1 at both ends, and the kernel stays reversible with respect to the
    target. A particle whose step size is beyond the stability limit of its own region then
    moves, on smaller steps, instead of staying put; the ghost stops where it diverges
    (:func:`leapfrog`), so that its check costs a few steps.

    Needs a density that can evaluate a subset of its rows (``select(index)``). ``epsilon``
    ``(C,)`` and ``n_leapfrog`` (an int or ``(C,)``) are the first trajectory's. Returns
    ``moved`` with the accepted rows replaced.
    """
    rows = diverged.nonzero().squeeze(-1)
    start, epsilon, lengths = _rows(state, rows), epsilon[rows], _lengths_of(n_leapfrog, rows)
    momentum = momentum_noise[rows] / start.inverse_mass.sqrt()
    proposal, end_momentum, log_ratio = _trajectory(log_density.select(rows), momentum, start, epsilon / factor,
                                                    lengths * factor)
    # The ghosts of the ends the Metropolis test takes alone: where it refuses, the ghost cannot matter.
    passed = standard_uniform(generator, log_ratio) < log_ratio.clamp(max=0.0).exp()
    if not bool(passed.any()):
        return moved
    _, _, ghost_log_ratio = _trajectory(log_density.select(rows[passed]), -end_momentum[passed],
                                        _rows(proposal, passed), epsilon[passed], _lengths_of(lengths, passed))
    taken = passed.nonzero().squeeze(-1)[is_divergent(ghost_log_ratio)]
    return type(moved)(*(torch.index_put(field, (rows[taken],), new[taken]) for field, new in zip(moved, proposal)))


def _rows(state, index):
    """The state of the chains ``index`` picks (indices or a mask)."""
    return type(state)(*(field[index] for field in state))


def _lengths_of(n_leapfrog, index):
    """The trajectory lengths of the chains ``index`` picks: per-row lengths indexed, one int as it is."""
    return n_leapfrog[index] if torch.is_tensor(n_leapfrog) else n_leapfrog


def hamiltonian(log_density, momentum, inverse_mass):
    """``H = -log p(w) + p^T M^-1 p / 2`` per chain, from the log density ``(C,)``."""
    return -log_density + kinetic_energy(momentum, inverse_mass)


def kinetic_energy(momentum, inverse_mass):
    """``p^T M^-1 p / 2`` per chain."""
    return 0.5 * (momentum.square() * inverse_mass).sum(-1)


def leapfrog(log_density, position, momentum, gradient, epsilon, inverse_mass, n_steps):
    """``n_steps`` leapfrog steps of size ``epsilon`` from ``(position, momentum)``.

    ``n_steps`` is an int, or a ``(C,)`` integer tensor of per-row lengths
    sorted longest first: each step then moves only the leading rows whose
    trajectories have not ended, so that the batch costs the sum of the
    lengths rather than ``C`` times the longest (``log_density`` is called on
    those leading rows alone). With an int, the steps run as a Python loop
    eagerly and as one ``torch.while_loop`` under ``torch.compile``
    (:func:`~sklearn_quinn._core.compiling.repeat`).

    Where the density has a ``surrogate``, the kicks take its gradient, the
    force, instead (``gradient`` is then the force at the start), and the density's
    value is evaluated once, at the end points. Each kick is a shear, so the
    steps stay a volume-preserving, reversible map for any force that is a
    function of the position alone (the argument of Neal 2011, "MCMC using
    Hamiltonian dynamics", never uses that the force is the gradient), and
    the Metropolis step on the exact energy keeps the target invariant: a
    force that approximates the gradient costs acceptance only, as
    Rasmussen's (2003, "Gaussian processes to speed up hybrid Monte Carlo for
    expensive Bayesian integrals") surrogate does. A float32 gradient's
    relative error is about 1e-6, the energy error it adds far below the
    integration's.

    A trajectory diverges where its energy, estimated along the way, rises
    more than ``DIVERGENCE_THRESHOLD`` above the lower of its two ends': a
    step size beyond the stability limit of the integration in some
    direction, along which position and momentum then grow geometrically.
    :func:`hmc_proposal` rejects it. The estimate at each point is the kinetic
    energy plus the potential's change by the trapezoidal rule on the kicks'
    own gradients, ``-sum_j (g_j + g_{j+1}) . (x_{j+1} - x_j) / 2`` (exact on a
    Gaussian, and needing no value of the density, which the surrogate's path
    does not evaluate): a fall into a region of higher density raises the
    kinetic energy but not the estimate. Run backwards from its end, a
    trajectory passes through the same points with the same estimates less
    the end's, so the condition is the same both ways, the proposal stays
    reversible and the kernel exact. It is met as soon as the estimate has
    risen that far above the start's, so with per-row lengths and a density
    that can evaluate a subset of its rows (``select(index)``) such a row
    stops there: the rows whose steps were too large for their own region of
    a posterior (SMC's particles, each with its own step size and
    hyperparameters) then cost a few steps each rather than their whole
    trajectories.

    Returns
    -------
    position, momentum, log_density, gradient : tensors at the end points
        ``gradient`` is the force where the density has a surrogate; a row that
        stopped is left where it stopped.
    diverged : tensor of shape (C,), bool
    """
    surrogate = getattr(log_density, "surrogate", None)
    # The energy estimates: the kinetic energy plus the potential's change from the start.
    start_energy = kinetic_energy(momentum, inverse_mass)
    momentum = momentum + 0.5 * epsilon * gradient
    if torch.is_tensor(n_steps):
        position, momentum, value, gradient, potential, peak, stopped = _leapfrog_per_row(
            log_density, position, momentum, gradient, epsilon, inverse_mass, n_steps, start_energy
        )
    else:
        position, momentum, value, gradient, potential, peak = _fixed_length(
            surrogate or log_density, position, momentum, gradient, epsilon, inverse_mass, n_steps, start_energy)
        stopped = torch.zeros_like(start_energy, dtype=torch.bool)
    if surrogate is not None:
        with torch.no_grad():
            value = log_density(position)
    end_energy = kinetic_energy(momentum, inverse_mass) + potential
    diverged = stopped | ~(peak <= torch.minimum(start_energy, end_energy) + DIVERGENCE_THRESHOLD)  # NaN too
    return position, momentum, value, gradient, diverged


def _fixed_length(kicked, position, momentum, gradient, epsilon, inverse_mass, n_steps, start_energy):
    """:func:`leapfrog`'s ``n_steps`` (an int) steps of :func:`_leapfrog_step`, its kicks by the
    gradient of ``kicked``, the last kick a half step (:func:`~sklearn_quinn._core.compiling.repeat`:
    one ``torch.while_loop`` under ``torch.compile``); returns the position, momentum,
    ``kicked``'s value and gradient at the end, and the energy estimates."""

    def step(index, position, momentum, value, gradient, potential, peak):
        kick = epsilon * (1.0 - 0.5 * (index == n_steps - 1))  # ``index`` an int eagerly, a tensor compiled
        position, momentum, value, gradient, potential, peak = _leapfrog_step(
            kicked, position, momentum, gradient, potential, peak, epsilon, kick, inverse_mass)
        return position, momentum, value.to(start_energy.dtype), gradient, potential, peak

    zeros = torch.zeros_like(start_energy)
    return repeat(step, (position, momentum, zeros, gradient, zeros.clone(), start_energy), n_steps)


def _leapfrog_step(kicked, position, momentum, gradient, potential, peak, epsilon, kick, inverse_mass):
    """A drift of ``epsilon (C, 1)`` and a kick of ``kick (C, 1)`` by the gradient of the density
    ``kicked`` at the new position, after the drift's energy estimates (:func:`_estimates`).
    Returns the position, momentum, ``kicked``'s value and gradient there, and the estimates."""
    move = epsilon * inverse_mass * momentum
    position = position + move
    value, new_gradient = value_and_grad(kicked, position)
    potential, peak = _estimates(potential, peak, gradient, new_gradient, move, momentum, epsilon * new_gradient,
                                 inverse_mass)
    return position, momentum + kick * new_gradient, value, new_gradient, potential, peak


def _estimates(potential, peak, previous, gradient, move, momentum, kick, inverse_mass):
    """The potential's change and the highest energy estimate (see :func:`leapfrog`) after a
    step ``move`` of the positions: ``previous`` and ``gradient`` are the gradients at the step's
    two ends, ``momentum`` the half step's, and ``kick`` the step size times ``gradient``."""
    potential = potential - 0.5 * ((previous + gradient) * move).sum(-1)  # the trapezoidal rule
    return potential, torch.maximum(peak, kinetic_energy(momentum + 0.5 * kick, inverse_mass) + potential)


def _leapfrog_per_row(log_density, position, momentum, gradient, epsilon, inverse_mass, n_steps, start_energy):
    """:func:`leapfrog` with per-row lengths sorted longest first, after the first half kick
    (the values are left empty where the density has a ``surrogate``), with the energy estimates'
    potential changes and highest values, and the rows stopped where they diverged.

    The steps move the leading rows still going, as views, until a row stops; from then on
    the rows still going are gathered (``index``) and the density is its ``select`` of them.
    """
    if bool((n_steps[1:] > n_steps[:-1]).any()):
        raise ValueError("Per-row trajectory lengths must be sorted longest first.")
    select = getattr(log_density, "select", None)
    position, gradient = position.clone(), gradient.clone()
    potential, peak = torch.zeros_like(start_energy), start_energy.clone()
    value = torch.empty(len(position), dtype=position.dtype, device=position.device)
    stopped = torch.zeros_like(start_energy, dtype=torch.bool)
    index, surrogate = None, getattr(log_density, "surrogate", None)  # index None: every row, in order
    steps = torch.arange(int(n_steps[0]), device=n_steps.device)
    n_moving = (n_steps.unsqueeze(0) > steps.unsqueeze(1)).sum(1).tolist()
    for step in range(len(n_moving)):
        k = n_moving[step]  # rewritten below when rows stop
        if k == 0:
            break
        rows = slice(0, k) if index is None else index[:k]
        move = epsilon[rows] * inverse_mass[rows] * momentum[rows]
        moving = position[rows] + move
        if surrogate is None:
            value[rows], new_gradient = value_and_grad(log_density, moving)
        else:
            new_gradient = value_and_grad(surrogate, moving)[1]
        position[rows] = moving
        kick = epsilon[rows] * new_gradient
        potential[rows], peak[rows] = _estimates(potential[rows], peak[rows], gradient[rows], new_gradient, move,
                                                 momentum[rows], kick, inverse_mass[rows])
        gradient[rows] = new_gradient
        last = (n_steps[rows] == step + 1).unsqueeze(-1)
        momentum[rows] += torch.where(last, 0.5, 1.0) * kick
        if select is None:
            continue
        exploded = ~(peak[rows] <= start_energy[rows] + DIVERGENCE_THRESHOLD)
        if bool(exploded.any()):
            going = torch.arange(len(position), device=position.device) if index is None else index
            keep = torch.ones_like(going, dtype=torch.bool)
            keep[:k] = ~exploded
            stopped[going[~keep]] = True
            index = going[keep]
            log_density = select(index)
            surrogate = getattr(log_density, "surrogate", None)
            n_moving[step + 1 :] = (n_steps[index].unsqueeze(0) > steps[step + 1 :].unsqueeze(1)).sum(1).tolist()
    return position, momentum, value, gradient, potential, peak, stopped


# ---------------------------------------------------------------------- MALA
class MALAState(NamedTuple):
    position: torch.Tensor  # (C, K)
    log_density: torch.Tensor  # (C,)
    gradient: torch.Tensor  # (C, K)
    step_size: torch.Tensor  # (C,)


def mala(log_density):
    """Metropolis-adjusted Langevin: ``w' = w + eps^2/2 grad log p(w) + eps xi``.

    The acceptance ratio carries the asymmetric proposal densities,
    ``p(w') q(w | w') / (p(w) q(w' | w))`` with
    ``q(b | a) = N(b; a + eps^2/2 grad log p(a), eps^2 I)``.

    Returns
    -------
    init : callable ``(position, step_size) -> MALAState``
    step : callable ``(generator, state) -> (MALAState, Info)``
    """

    def init(position, step_size):
        value, gradient = value_and_grad(log_density, position)
        step_size = torch.as_tensor(step_size, dtype=position.dtype, device=position.device)
        return MALAState(position, value, gradient, step_size.expand(position.shape[0]).clone())

    def log_proposal(to, start, start_gradient, epsilon):
        drift = start + 0.5 * epsilon.square() * start_gradient
        return -0.5 * ((to - drift) / epsilon).square().sum(-1)

    def step(generator, state):
        position, value, gradient, step_size = state
        epsilon = step_size.unsqueeze(-1)
        noise = standard_normal(generator, position)
        proposed = position + 0.5 * epsilon.square() * gradient + epsilon * noise
        new_value, new_gradient = value_and_grad(log_density, proposed)
        log_ratio = (
            new_value
            - value
            + log_proposal(position, proposed, new_gradient, epsilon)
            - log_proposal(proposed, position, gradient, epsilon)
        )
        proposal = state._replace(position=proposed, log_density=new_value, gradient=new_gradient)
        return metropolis_accept(generator, log_ratio, proposal, state)

    return init, step


# ----------------------------------------------------- adaptive Metropolis
class AdaptiveMetropolisState(NamedTuple):
    position: torch.Tensor  # (C, K)
    log_density: torch.Tensor  # (C,)
    proposal_cholesky: torch.Tensor  # (C, K, K), lower factor of the proposal covariance
    count: torch.Tensor  # (), draws summarised in mean / scatter
    mean: torch.Tensor  # (C, K), running mean of the chain history
    scatter: torch.Tensor  # (C, K, K), running sum of centred outer products


def adaptive_metropolis(log_density, gamma=1.0, adapt_start=100, adapt_every=10, nugget=1e-8):
    """Haario et al. (2001) adaptive random-walk Metropolis.

    The proposal is ``w' = w + xi``, ``xi ~ N(0, Sigma_t)``; from step
    ``adapt_start`` on, every ``adapt_every`` steps,
    ``Sigma_t = gamma * 2.4^2 / K * (C_t + nugget * I)`` with ``C_t`` the
    running sample covariance of the chain's own history ``w(0), ..., w(t)``.
    Before that the initial proposal covariance is used. The acceptance ratio
    is ``p(w') / p(w)`` (the proposal is symmetric).

    Returns
    -------
    init : callable ``(position, proposal_std) -> AdaptiveMetropolisState``
    step : callable ``(generator, state) -> (AdaptiveMetropolisState, Info)``
    """

    def init(position, proposal_std):
        n_chains, n_params = position.shape
        value = log_density(position).detach()
        std = torch.as_tensor(proposal_std, dtype=position.dtype, device=position.device)
        eye = torch.eye(n_params, dtype=position.dtype, device=position.device)
        cholesky = (std * eye).expand(n_chains, n_params, n_params).clone()
        zero = position.new_zeros(())
        scatter = position.new_zeros(n_chains, n_params, n_params)
        return AdaptiveMetropolisState(position, value, cholesky, zero + 1, position.clone(), scatter)

    def step(generator, state):
        position, value, cholesky, count, mean, scatter = state
        noise = standard_normal(generator, position)
        proposed = position + (cholesky @ noise.unsqueeze(-1)).squeeze(-1)
        with torch.no_grad():
            new_value = log_density(proposed)
        proposal = state._replace(position=proposed, log_density=new_value)
        state, info = metropolis_accept(generator, new_value - value, proposal, state)

        # Welford update of the history's mean and scatter with the new draw.
        count = count + 1
        delta = state.position - mean
        mean = mean + delta / count
        scatter = scatter + delta.unsqueeze(-1) * (state.position - mean).unsqueeze(-2)
        t = int(count) - 1  # steps taken
        if t >= adapt_start and (t - adapt_start) % adapt_every == 0:
            n_params = position.shape[1]
            covariance = scatter / (count - 1)
            eye = torch.eye(n_params, dtype=position.dtype, device=position.device)
            scaled = gamma * 2.4**2 / n_params * (covariance + nugget * eye)
            factor, failed = torch.linalg.cholesky_ex(scaled)
            cholesky = torch.where(failed.bool()[:, None, None], state.proposal_cholesky, factor)
        else:
            cholesky = state.proposal_cholesky
        return state._replace(proposal_cholesky=cholesky, count=count, mean=mean, scatter=scatter), info

    return init, step
