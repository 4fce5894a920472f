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

Where the density has a ``surrogate`` (a cheaper approximation of it, such as
the likelihood evaluated in float32), the trees are built on the surrogate,
every point's energy included, and each step ends with a Metropolis test of
the point they chose against the exact density: the surrogate transition of
Liu (2001, "Monte Carlo Strategies in Scientific Computing", section 9.4.3),
the delayed acceptance of Christen & Fox (2005, "Markov chain Monte Carlo
using an approximation"). A NUTS step satisfies detailed balance with respect
to the density its trees weigh, so accepting its point ``x'`` from ``x`` with
probability ``min(1, exp(d(x') - d(x)))``, ``d = log p - log p_surrogate``,
leaves the exact density invariant; with a float32 surrogate ``d`` moves by
rounding, and nearly every point is accepted. The step pays one evaluation of
the surrogate at its start and one of the exact density at its end, against
the tree's hundreds of leapfrog steps.
"""

from typing import NamedTuple

import torch

from .._core.compiling import compiled_or_eager, repeat, row
from .._core.rng import standard_normal, standard_uniform
from ._kernels import (
    DIVERGENCE_THRESHOLD,
    Info,
    hamiltonian,
    hmc_state,
    metropolis_accept,
    value_and_force,
    value_and_grad,
)


def nuts(log_density, max_tree_depth=10, compile=False):
    """The No-U-Turn sampler with a diagonal mass matrix.

    Parameters
    ----------
    log_density : callable ``(C, K) -> (C,)``
    max_tree_depth : int, default=10
        A trajectory has at most ``2**max_tree_depth`` leapfrog steps.
    compile : bool, default=False
        Run each doubling's new half, its leapfrog steps with the gradient,
        the multinomial and energy bookkeeping of each new point and the
        U-turn checks within the half, through ``torch.compile`` (see
        :func:`~sklearn_quinn._core.compiling.compiled_or_eager`): one graph
        whose steps are one ``torch.while_loop``
        (:func:`~sklearn_quinn._core.compiling.repeat`), for every half
        whatever its length; the doublings' loop stays eager.

    Returns
    -------
    init : callable ``(position, step_size, inverse_mass=None) -> HMCState``
    step : callable ``(generator, state) -> (HMCState, Info)``
        ``Info.acceptance_probability`` is the mean over the trajectory's new
        points of ``min(1, exp(H_0 - H))``, the statistic a step size is
        tuned on (Hoffman & Gelman 2014, section 3.2.1); ``Info.n_leapfrog``
        the leapfrog steps each chain's trajectory took. Where the density
        has a ``surrogate`` (see the module's docstring), the trees weigh the
        surrogate's energies and ``Info.is_accepted`` is the chains that
        moved and passed the exact density's test.

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

    surrogate = getattr(log_density, "surrogate", None)
    tree_density = log_density if surrogate is None else surrogate

    def init(position, step_size, inverse_mass=None):
        return hmc_state(log_density, position, step_size, inverse_mass, value_and_force)

    def grow_half(*args):
        return _grow_half(tree_density, *args)

    grow = compiled_or_eager(grow_half) if compile else grow_half
    masks = {}  # the checkpoint masks by device

    def trajectory(generator, state, momentum):
        device = state.position.device
        if device not in masks:
            masks[device] = _checkpoint_masks(max_tree_depth, device)
        return _trajectory(grow, masks[device], generator, state, momentum, max_tree_depth)

    def step(generator, state):
        momentum = standard_normal(generator, state.position) / state.inverse_mass.sqrt()
        if surrogate is None:
            return trajectory(generator, state, momentum)
        # The surrogate's value and gradient where the tree starts: the state's are the exact
        # density's value and a gradient that Gibbs draws may have rescaled since.
        value, gradient = value_and_grad(surrogate, state.position)
        chosen, info = trajectory(generator, state._replace(log_density=value, gradient=gradient), momentum)
        with torch.no_grad():
            exact = log_density(chosen.position)
        log_ratio = (exact - chosen.log_density) - (state.log_density - value)
        state, test = metropolis_accept(generator, log_ratio, chosen._replace(log_density=exact), state)
        return state, info._replace(is_accepted=info.is_accepted & test.is_accepted,
                                    is_divergent=info.is_divergent | test.is_divergent)

    return init, step


class _End(NamedTuple):
    """One end of a batch of trajectories."""

    position: torch.Tensor  # (C, K)
    momentum: torch.Tensor  # (C, K)
    value: torch.Tensor  # (C,), the log density
    gradient: torch.Tensor  # (C, K)


class _Half(NamedTuple):
    """The half a doubling adds, as its points are made, and the step's running statistics."""

    candidate: _End  # the point multinomial sampling has picked so far
    log_weight: torch.Tensor  # (C,), log sum of exp(H_0 - H) over its points
    momentum_sum: torch.Tensor  # (C, K)
    accept_sum: torch.Tensor  # (C,), sum of min(1, exp(H_0 - H)) over the step's new points
    n_new: torch.Tensor  # (C,), the step's new points
    divergent: torch.Tensor  # (C,) bool


def _take(mask, new, old):
    """Rows of ``new`` where ``mask``, of ``old`` elsewhere."""
    rows = mask.unsqueeze(-1)
    return _End(torch.where(rows, new.position, old.position), torch.where(rows, new.momentum, old.momentum),
                torch.where(mask, new.value, old.value), torch.where(rows, new.gradient, old.gradient))


def _energy(end, inverse_mass):
    return hamiltonian(end.value, end.momentum, inverse_mass)


def _is_turning(inverse_mass, momentum_start, momentum_end, momentum_sum):
    """The generalised U-turn criterion of a (sub)trajectory per chain, from
    its end momenta and the sum of its momenta (Betancourt 2017, A.4.2)."""
    rho = momentum_sum - 0.5 * (momentum_start + momentum_end)
    return ((inverse_mass * momentum_start * rho).sum(-1) <= 0) | ((inverse_mass * momentum_end * rho).sum(-1) <= 0)


class _Checkpoints(NamedTuple):
    """The momenta, and the half's running momentum sums, saved where sub-trajectories of a half
    start, one slot per level of the tree: each slot is written by an even leaf before an odd
    leaf of the same half reads it."""

    momentum: torch.Tensor  # (max_tree_depth, C, K)
    momentum_sum: torch.Tensor  # (max_tree_depth, C, K)


def _add_leaf(log_density, edge, valid, half, checkpoints, epsilon, uniform, inverse_mass, initial_energy, save,
              check):
    """One leapfrog step of signed size ``epsilon (C, 1)`` from the edge of the
    chains still growing their half (``valid``), the half's sums with the new
    point, and its U-turn checks: the new point is saved in the checkpoint
    slots ``save`` and checked against those of ``check`` (both
    ``(max_tree_depth,)`` masks: :func:`_checkpoint_masks`). Masks rather than
    slot numbers, so that every leaf of every half is one compiled graph.

    Returns the new edge, ``valid`` without the chains that diverged or turned,
    the :class:`_Half` and the :class:`_Checkpoints`.
    """
    momentum = edge.momentum + 0.5 * epsilon * edge.gradient
    position = edge.position + epsilon * inverse_mass * momentum
    value, gradient = value_and_grad(log_density, position)
    edge = _take(valid, _End(position, momentum + 0.5 * epsilon * gradient, value, gradient), edge)
    energy_error = _energy(edge, inverse_mass) - initial_energy
    diverged = valid & ~(energy_error < DIVERGENCE_THRESHOLD)  # NaN diverges too
    valid = valid & ~diverged
    log_weight = torch.where(valid, -energy_error, -torch.inf)
    new_log_weight = torch.logaddexp(half.log_weight, log_weight)
    pick = valid & (uniform < torch.exp(log_weight - new_log_weight))
    half = _Half(
        _take(pick, edge, half.candidate),
        torch.where(valid, new_log_weight, half.log_weight),
        half.momentum_sum + torch.where(valid.unsqueeze(-1), edge.momentum, 0.0),
        half.accept_sum + torch.where(valid, torch.exp(torch.clamp(-energy_error, max=0.0)), 0.0),
        half.n_new + (valid | diverged).to(half.n_new.dtype),  # a divergent point counts, at zero acceptance
        half.divergent | diverged,
    )
    slots = save[:, None, None]
    checkpoints = _Checkpoints(torch.where(slots, edge.momentum, checkpoints.momentum),
                               torch.where(slots, half.momentum_sum, checkpoints.momentum_sum))
    # Each checked sub-trajectory runs from its saved leaf to this one: the momenta summed over it.
    sub_sum = half.momentum_sum - checkpoints.momentum_sum + checkpoints.momentum
    turned = _is_turning(inverse_mass, checkpoints.momentum, edge.momentum, sub_sum) & check[:, None]
    return edge, valid & ~turned.any(0), half, checkpoints


def _checkpoints(leaf):
    """Where leaf ``leaf`` (0-based) of a half stores or checks momenta:
    the range of checkpoint slots ``(low, high)``. An even leaf starts
    sub-trajectories and is saved at ``high``; an odd leaf ends the
    sub-trajectories that started at the saved leaves ``low..high``."""
    high = bin(leaf >> 1).count("1")
    trailing_ones = len(bin(leaf)) - len(bin(leaf).rstrip("1")) if leaf & 1 else 0
    return high - trailing_ones + 1, high


def _checkpoint_masks(max_tree_depth, device):
    """For the leaves of the largest half, ``2**(max_tree_depth - 1)`` of them, the
    ``(n_leaves, max_tree_depth)`` masks of the slots each saves its momentum in and of
    those it checks against (:func:`_checkpoints`)."""
    n_leaves = 2 ** (max_tree_depth - 1)
    save = torch.zeros(n_leaves, max_tree_depth, dtype=torch.bool, device=device)
    check = torch.zeros_like(save)
    for leaf in range(n_leaves):
        low, high = _checkpoints(leaf)
        if leaf % 2 == 0:
            save[leaf, high] = True
        else:
            check[leaf, low : high + 1] = True
    return save, check


def _grow_half(log_density, masks, n_leaves, edge, valid, half, checkpoints, epsilon, uniforms, inverse_mass,
               initial_energy):
    """A doubling's new half: up to ``n_leaves`` (a 0-d tensor) leaves of :func:`_add_leaf` from
    ``edge``, leaf ``i`` drawing its multinomial pick from ``uniforms[i]``, until no chain is
    still growing (:func:`~sklearn_quinn._core.compiling.repeat`: one ``torch.while_loop`` under
    ``torch.compile``). Returns what the last leaf returned."""
    save, check = masks

    def leaf(index, edge, valid, half, checkpoints):
        return _add_leaf(log_density, edge, valid, half, checkpoints, epsilon, row(uniforms, index), inverse_mass,
                         initial_energy, row(save, index), row(check, index))

    return repeat(leaf, (edge, valid, half, checkpoints), n_leaves, until=lambda edge, valid, *_: ~valid.any())


def _trajectory(grow_half, masks, generator, state, momentum, max_tree_depth):
    inverse_mass = state.inverse_mass
    n_chains = len(state.position)
    start = _End(state.position, momentum, state.log_density, state.gradient)
    initial_energy = _energy(start, inverse_mass)
    left = right = proposal = start
    log_sum_weight = torch.zeros_like(initial_energy)  # the start's weight exp(H_0 - H_0)
    momentum_sum = momentum
    building = torch.ones(n_chains, dtype=torch.bool, device=momentum.device)
    # Distinct tensors throughout, and a fresh candidate for each half (below): a compiled half
    # specialises on which of its inputs alias one another.
    half = _Half(start, torch.zeros_like(initial_energy), torch.zeros_like(momentum), torch.zeros_like(initial_energy),
                 torch.zeros_like(initial_energy), torch.zeros_like(building))
    checkpoints = _Checkpoints(momentum.new_zeros(max_tree_depth, *momentum.shape),
                               momentum.new_zeros(max_tree_depth, *momentum.shape))
    for depth in range(max_tree_depth):
        forward = standard_uniform(generator, initial_energy) < 0.5
        epsilon = torch.where(forward, 1.0, -1.0).mul(state.step_size).unsqueeze(-1)
        edge = _take(forward, right, left)
        # The new half: its multinomial candidate, log weight and momentum sum.
        half = half._replace(candidate=_End(*(tensor.clone() for tensor in edge)),
                             log_weight=torch.full_like(initial_energy, -torch.inf),
                             momentum_sum=torch.zeros_like(momentum))
        # The uniforms of the largest half's leaves, whatever this one's length: one shape, one graph.
        uniforms = standard_uniform(generator, initial_energy, (len(masks[0]), n_chains))
        n_leaves = torch.tensor(2**depth)  # on the host, with the loop's counter (compiling.repeat)
        edge, valid, half, checkpoints = grow_half(masks, n_leaves, edge, building, half, checkpoints, epsilon,
                                                   uniforms, inverse_mass, initial_energy)
        # A half that turned or diverged inside is discarded, and its chain's trajectory ends.
        uniform = standard_uniform(generator, initial_energy)
        proposal = _take(valid & (uniform < torch.exp(half.log_weight - log_sum_weight)), half.candidate, proposal)
        log_sum_weight = torch.where(valid, torch.logaddexp(log_sum_weight, half.log_weight), log_sum_weight)
        right, left = _take(valid & forward, edge, right), _take(valid & ~forward, edge, left)
        momentum_sum = momentum_sum + torch.where(valid.unsqueeze(-1), half.momentum_sum, 0.0)
        building = valid & ~_is_turning(inverse_mass, left.momentum, right.momentum, momentum_sum)
        if not bool(building.any()):
            break
    moved = (proposal.position != state.position).any(-1)
    new_state = state._replace(position=proposal.position, log_density=proposal.value, gradient=proposal.gradient)
    acceptance = half.accept_sum / half.n_new.clamp(min=1.0)
    return new_state, Info(acceptance, moved, half.divergent, proposal.position, half.n_new)
