"""The No-U-Turn sampler over a batch of chains, pure torch.

Hoffman & Gelman (2014), "The No-U-Turn sampler: adaptively setting path
lengths in Hamiltonian Monte Carlo", in the form Stan and NumPyro use
(Betancourt 2017, "A conceptual introduction to Hamiltonian Monte Carlo",
appendix A): each step draws a momentum, then doubles a leapfrog trajectory
forwards or backwards in time, at random, until it makes a U-turn, diverges
or reaches ``2**max_tree_depth`` steps; the next position is drawn from the
trajectory's points in proportion to ``exp(-H)`` (multinomial sampling), with
each new half favoured as a whole (biased progressive sampling), so that the
chain moves away from where it started.

The U-turn criterion is the generalised one, on the momenta summed over a
(sub)trajectory, checked at the whole trajectory and at every sub-trajectory
the doublings built (a new half whose own halves turn is rejected). Within a
half the checks run as its points are made, against saved momenta at the
points where its sub-trajectories start (the iterative scheme of NumPyro's
``iterative_build_tree``, written here for a batch).

Every chain takes its own tree; the batch steps together, one batched
gradient per leapfrog step, and a chain whose tree has ended waits while the
others finish theirs (its rows are evaluated and discarded).
"""

import torch

from ._kernels import HMCState, Info, standard_normal, standard_uniform, value_and_grad

#: An energy error beyond this many nats is a divergence (Stan's and NumPyro's threshold).
DIVERGENCE_THRESHOLD = 1000.0


def nuts(log_density, max_tree_depth=10):
    """The No-U-Turn sampler with a diagonal mass matrix.

    Parameters
    ----------
    log_density : callable ``(C, K) -> (C,)``
    max_tree_depth : int, default=10
        A trajectory has at most ``2**max_tree_depth`` leapfrog steps.

    Returns
    -------
    init : callable ``(position, step_size, inverse_mass=None) -> HMCState``
    step : callable ``(generator, state) -> (HMCState, Info)``
        ``Info.acceptance_probability`` is the mean over the trajectory's new
        points of ``min(1, exp(H_0 - H))``, the statistic a step size is
        tuned on (Hoffman & Gelman 2014, section 3.2.1); ``Info.n_leapfrog``
        the leapfrog steps each chain's trajectory took.

    Examples
    --------
    >>> import torch
    >>> from sklearn_quinn.mcmc import nuts
    >>> init, step = nuts(lambda x: -0.5 * x.square().sum(-1))
    >>> state = init(torch.zeros(4, 3, dtype=torch.float64), step_size=0.5)
    >>> generator = torch.Generator().manual_seed(0)
    >>> for _ in range(10):
    ...     state, info = step(generator, state)
    >>> state.position.shape, info.acceptance_probability.shape
    (torch.Size([4, 3]), torch.Size([4]))
    """

    def init(position, step_size, inverse_mass=None):
        value, gradient = value_and_grad(log_density, position)
        step_size = torch.as_tensor(step_size, dtype=position.dtype, device=position.device)
        if inverse_mass is None:
            inverse_mass = torch.ones_like(position)
        return HMCState(position, value, gradient, step_size.expand(position.shape[0]).clone(),
                        inverse_mass.expand_as(position).clone())

    def step(generator, state):
        momentum = standard_normal(generator, state.position) / state.inverse_mass.sqrt()
        return _trajectory(log_density, generator, state, momentum, max_tree_depth)

    return init, step


class _End:
    """One end of a batch of trajectories: position, momentum, log density, gradient."""

    def __init__(self, position, momentum, value, gradient):
        self.position, self.momentum, self.value, self.gradient = position, momentum, value, gradient

    def copy(self):
        return _End(self.position, self.momentum, self.value, self.gradient)

    def take(self, mask, other):
        """Rows of ``other`` where ``mask``, these rows elsewhere."""
        rows = mask.unsqueeze(-1)
        return _End(torch.where(rows, other.position, self.position), torch.where(rows, other.momentum, self.momentum),
                    torch.where(mask, other.value, self.value), torch.where(rows, other.gradient, self.gradient))


def _energy(end, inverse_mass):
    return -end.value + 0.5 * (end.momentum.square() * inverse_mass).sum(-1)


def _is_turning(inverse_mass, momentum_start, momentum_end, momentum_sum):
    """The generalised U-turn criterion of a (sub)trajectory per chain, from
    its end momenta and the sum of its momenta (Betancourt 2017, A.4.2)."""
    rho = momentum_sum - 0.5 * (momentum_start + momentum_end)
    return ((inverse_mass * momentum_start * rho).sum(-1) <= 0) | ((inverse_mass * momentum_end * rho).sum(-1) <= 0)


def _leapfrog_step(log_density, end, epsilon, inverse_mass):
    """One leapfrog step of signed size ``epsilon (C, 1)``."""
    momentum = end.momentum + 0.5 * epsilon * end.gradient
    position = end.position + epsilon * inverse_mass * momentum
    value, gradient = value_and_grad(log_density, position)
    return _End(position, momentum + 0.5 * epsilon * gradient, value, gradient)


def _checkpoints(leaf):
    """Where leaf ``leaf`` (0-based) of a half stores or checks momenta:
    the range of checkpoint slots ``(low, high)``. An even leaf starts
    sub-trajectories and is saved at ``high``; an odd leaf ends the
    sub-trajectories that started at the saved leaves ``low..high``."""
    high = bin(leaf >> 1).count("1")
    trailing_ones = len(bin(leaf)) - len(bin(leaf).rstrip("1")) if leaf & 1 else 0
    return high - trailing_ones + 1, high


def _trajectory(log_density, generator, state, momentum, max_tree_depth):
    inverse_mass = state.inverse_mass
    n_chains = len(state.position)
    start = _End(state.position, momentum, state.log_density, state.gradient)
    initial_energy = _energy(start, inverse_mass)
    left, right, proposal = start.copy(), start.copy(), start.copy()
    log_sum_weight = torch.zeros_like(initial_energy)  # the start's weight exp(H_0 - H_0)
    momentum_sum = momentum.clone()
    building = torch.ones(n_chains, dtype=torch.bool, device=momentum.device)
    divergent = torch.zeros_like(building)
    accept_sum = torch.zeros_like(initial_energy)
    n_new = torch.zeros_like(initial_energy)
    for depth in range(max_tree_depth):
        forward = standard_uniform(generator, initial_energy) < 0.5
        epsilon = torch.where(forward, 1.0, -1.0).mul(state.step_size).unsqueeze(-1)
        edge = right.take(~forward, left)
        # The new half: its multinomial candidate, log weight, momentum sum, and checkpoints.
        candidate, half_log_weight = edge.copy(), torch.full_like(initial_energy, -torch.inf)
        half_momentum_sum = torch.zeros_like(momentum)
        saved_momentum = momentum.new_zeros(max_tree_depth, *momentum.shape)
        saved_sum = torch.zeros_like(saved_momentum)
        valid = building.clone()
        for leaf in range(2**depth):
            edge = edge.take(valid, _leapfrog_step(log_density, edge, epsilon, inverse_mass))
            energy_error = _energy(edge, inverse_mass) - initial_energy
            diverged = valid & ~(energy_error < DIVERGENCE_THRESHOLD)  # NaN diverges too
            divergent |= diverged
            valid &= ~diverged
            log_weight = torch.where(valid, -energy_error, -torch.inf)
            accept_sum += torch.where(valid, torch.exp(torch.clamp(-energy_error, max=0.0)), 0.0)
            n_new += (valid | diverged).to(n_new.dtype)  # a divergent point counts, at zero acceptance
            new_half_log_weight = torch.logaddexp(half_log_weight, log_weight)
            pick = valid & (standard_uniform(generator, initial_energy) < torch.exp(log_weight - new_half_log_weight))
            candidate = candidate.take(pick, edge)
            half_log_weight = torch.where(valid, new_half_log_weight, half_log_weight)
            half_momentum_sum = half_momentum_sum + torch.where(valid.unsqueeze(-1), edge.momentum, 0.0)
            low, high = _checkpoints(leaf)
            if leaf % 2 == 0:
                saved_momentum[high], saved_sum[high] = edge.momentum, half_momentum_sum
            else:
                for slot in range(low, high + 1):
                    sub_sum = half_momentum_sum - saved_sum[slot] + saved_momentum[slot]
                    valid &= ~_is_turning(inverse_mass, saved_momentum[slot], edge.momentum, sub_sum)
            if not bool(valid.any()):
                break
        # A half that turned or diverged inside is discarded, and its chain's trajectory ends.
        uniform = standard_uniform(generator, initial_energy)
        accept_half = valid & (uniform < torch.exp(half_log_weight - log_sum_weight))
        proposal = proposal.take(accept_half, candidate)
        log_sum_weight = torch.where(valid, torch.logaddexp(log_sum_weight, half_log_weight), log_sum_weight)
        right, left = right.take(valid & forward, edge), left.take(valid & ~forward, edge)
        momentum_sum = momentum_sum + torch.where(valid.unsqueeze(-1), half_momentum_sum, 0.0)
        building = valid & ~_is_turning(inverse_mass, left.momentum, right.momentum, momentum_sum)
        if not bool(building.any()):
            break
    moved = (proposal.position != state.position).any(-1)
    new_state = state._replace(position=proposal.position, log_density=proposal.value, gradient=proposal.gradient)
    acceptance = accept_sum / n_new.clamp(min=1.0)
    return new_state, Info(acceptance, moved, divergent, proposal.position, n_new)
