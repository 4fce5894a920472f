"""The sampling loop: burn-in with adaptation, then thinned draws, for any kernel."""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch

from ._adaptation import DualAveraging, WindowedVariance, slow_window_ends
from ._gibbs import GibbsState, within_gibbs
from ._kernels import adaptive_metropolis, hmc, mala, value_and_grad
from ._nuts import nuts


class Sampler(NamedTuple):
    """What :func:`run_chains` needs to know about a kernel.

    A sampler's final step size and inverse mass are what its state holds
    (None where it holds none).
    """

    #: ``kernel(log_density, **options) -> (init, step)``, with ``init(position, step_size)``.
    kernel: Callable
    #: The keyword arguments of :func:`run_chains` that ``kernel`` takes.
    options: tuple[str, ...]
    #: Default target acceptance of the dual-averaging step-size search in
    #: burn-in; None for a kernel without a step size to search.
    target_acceptance: float | None
    #: Whether burn-in adapts the diagonal inverse mass in Stan's windows.
    adapt_mass: bool


#: The samplers by name; a new one is one more entry. The target acceptances
#: are Stan's 0.8 for HMC and NUTS and Roberts & Rosenthal's (1998, "Optimal
#: scaling of discrete approximations to Langevin diffusions") optimal 0.574 for MALA;
#: adaptive Metropolis adapts its proposal covariance itself (Haario, Saksman &
#: Tamminen 2001, "An adaptive Metropolis algorithm").
SAMPLERS = {
    "hmc": Sampler(hmc, ("n_leapfrog", "compile"), target_acceptance=0.8, adapt_mass=True),
    "nuts": Sampler(nuts, ("max_tree_depth", "compile"), target_acceptance=0.8, adapt_mass=True),
    "mala": Sampler(mala, (), target_acceptance=0.574, adapt_mass=False),
    "amcmc": Sampler(adaptive_metropolis, ("gamma", "adapt_start", "adapt_every"), target_acceptance=None,
                     adapt_mass=False),
}


class ChainResult(NamedTuple):
    draws: torch.Tensor  # (C, n_samples, P), whole state rows
    acceptance: torch.Tensor  # (C, n_samples * thin), acceptance probability per sampling step
    # (C, n_samples * thin), whether each sampling step diverged: burn-in's, while the step size is
    # searched, say nothing of the draws (Stan reports the sampling phase's alone).
    divergent: torch.Tensor
    step_size: torch.Tensor | None  # (C,), the one used for sampling; None for a kernel without one
    inverse_mass: torch.Tensor | None  # (C, K), the diagonal inverse mass while sampling; None for a kernel without one
    # (C, n_samples * thin), the leapfrog steps of each sampling step's trajectory, for a kernel that
    # reports them (NUTS); None for the others.
    n_leapfrog: torch.Tensor | None = None
    # Whether the steps ran through torch.compile (from the pilot's end on, for a compile decided there).
    compiled: bool = False


#: ``compile`` given as a decision: the steps that run eagerly before it is taken,
#: counting the batched gradient evaluations the rest of the run is projected from.
PILOT_STEPS = 10


class GradientCount:
    """A log density that counts its batched gradient evaluations (``n_calls``), and those of the
    densities it gives: with the hyperparameters held (``given_hyperparameters``, which a kernel
    within Gibbs takes its gradients from) and over some rows of those (``select``)."""

    def __init__(self, log_density, counter=None):
        self.log_density = log_density
        self._counter = [0] if counter is None else counter  # shared with the densities it gives

    @property
    def n_calls(self):
        return self._counter[0]

    @n_calls.setter
    def n_calls(self, value):
        self._counter[0] = value

    def __call__(self, rows):
        return self.log_density(rows)

    def value_and_grad(self, rows):
        self.n_calls += 1
        return value_and_grad(self.log_density, rows)

    @property
    def surrogate(self):
        """The density's ``surrogate``, its gradients counted as the density's are, or None where
        it has none."""
        surrogate = getattr(self.log_density, "surrogate", None)
        return None if surrogate is None else GradientCount(surrogate, self._counter)

    def given_hyperparameters(self):
        """The density's ``given_hyperparameters()``, counted; None where it has none."""
        given = getattr(self.log_density, "given_hyperparameters", None)
        held = None if given is None else given()
        return None if held is None else GradientCount(held, self._counter)

    def hold(self, rows):
        self.log_density.hold(rows)

    @property
    def select(self):
        """The density's ``select(index)``, counted; None where it has none (a kernel then keeps
        every row going to the end of its trajectory)."""
        select = getattr(self.log_density, "select", None)
        if select is None:
            return None
        return lambda index: GradientCount(select(index), self._counter)


def run_chains(log_density, position, *, sampler="hmc", n_samples=1000, n_burnin=1000, thin=1,
               step_size=0.01, n_leapfrog=10, target_acceptance=None, adapt_step_size=True,
               max_tree_depth=10, gamma=1.0, adapt_start=100, adapt_every=10, compile=False, gibbs=None,
               generator=None, progress=None):
    """Run ``C`` chains from ``position (C, P)`` and keep ``n_samples`` thinned draws each.

    What burn-in adapts is the sampler's entry in :data:`SAMPLERS`: HMC, NUTS
    and MALA adapt their step size by dual averaging (and HMC and NUTS their
    diagonal inverse mass in Stan's windows), then sample with both fixed.
    Adaptive Metropolis adapts its proposal covariance as Haario et al. give it, from
    ``adapt_start`` on, every ``adapt_every`` steps.

    Parameters
    ----------
    log_density : callable ``(C, K) -> (C,)``
    sampler : str
        A key of :data:`SAMPLERS`.
    compile : bool or callable, default=False
        HMC's trajectories, or NUTS's leapfrog steps, through ``torch.compile``
        (see :func:`~sklearn_quinn.mcmc._kernels.hmc`). A callable
        ``pays(n_gradients) -> bool`` decides: the first :data:`PILOT_STEPS`
        steps run eagerly, counting the batched gradient evaluations, and if
        ``pays`` of their count projected over the remaining steps is true,
        those compile (the same state and random draws go on). No effect on
        a kernel that does not compile (MALA, adaptive Metropolis).
    gibbs : HyperparameterGibbs, optional
        The columns after the first ``gibbs.n_params`` are hyperparameters:
        the kernel moves the first columns given them, and each step ends
        with their exact Gibbs draw (see :mod:`~sklearn_quinn.mcmc._gibbs`).
        Burn-in adapts the kernel's step size and mass to the first columns only.
    progress : callable ``(n_steps_done, acceptance_rate) -> None``, optional
        Called once per step, for a progress bar.

    Returns
    -------
    ChainResult
    """
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {tuple(SAMPLERS)}, got {sampler!r}.")
    spec = SAMPLERS[sampler]
    n_steps = n_burnin + n_samples * thin

    compilable = "compile" in spec.options
    options = dict(n_leapfrog=n_leapfrog, max_tree_depth=max_tree_depth, gamma=gamma, adapt_start=adapt_start,
                   adapt_every=adapt_every, compile=False)
    options = {name: options[name] for name in spec.options}

    def kernel(density, through_compiler):
        own = {**options, "compile": through_compiler} if compilable else options
        if gibbs is None:
            return spec.kernel(density, **own)
        return within_gibbs(spec.kernel, density, gibbs, **own)

    deciding = compilable and callable(compile) and n_steps > PILOT_STEPS
    compiled = compilable and not callable(compile) and bool(compile)
    pilot = GradientCount(log_density) if deciding else log_density
    init, step = kernel(pilot, compiled)
    state = init(position, step_size)
    _refuse_a_start_without_a_density(_kernel_state(state).log_density)
    if deciding:
        pilot.n_calls = 0  # the steps' gradients, not the start's
    adapting = spec.target_acceptance is not None and adapt_step_size
    if adapting:
        search = DualAveraging(_kernel_state(state).step_size, target_acceptance or spec.target_acceptance)
    window_ends = slow_window_ends(n_burnin) if adapting and spec.adapt_mass else []
    window = WindowedVariance()
    window_start = int(0.15 * n_burnin)

    draws, acceptance, divergent, leapfrog_steps = [], [], [], []
    accepted_total = 0.0
    for t in range(n_steps):
        state, info = step(generator, state)
        if deciding and t + 1 == PILOT_STEPS:
            if compile(pilot.n_calls / PILOT_STEPS * (n_steps - PILOT_STEPS)):
                compiled = True
                _, step = kernel(log_density, True)
        accepted_total += float(info.acceptance_probability.mean())
        if t < n_burnin:
            if adapting:
                state = _retuned(state, step_size=search.update(info.acceptance_probability))
            if window_ends and t >= window_start:
                window.update(_kernel_state(state).position)
                if t + 1 in window_ends:
                    state = _retuned(state, inverse_mass=window.inverse_mass())
                    window.reset()
                    search.restart(_kernel_state(state).step_size)
            if adapting and t + 1 == n_burnin:
                state = _retuned(state, step_size=search.final_step_size)
        else:
            acceptance.append(info.acceptance_probability)
            divergent.append(info.is_divergent)
            if info.n_leapfrog is not None:
                leapfrog_steps.append(info.n_leapfrog)
            if (t - n_burnin + 1) % thin == 0:
                draws.append(state.position)
        if progress is not None:
            progress(t + 1, accepted_total / (t + 1))
    draws = torch.stack(draws, dim=1)
    final_step_size = getattr(_kernel_state(state), "step_size", None)
    inverse_mass = getattr(_kernel_state(state), "inverse_mass", None)
    return ChainResult(draws, torch.stack(acceptance, dim=1), torch.stack(divergent, dim=1), final_step_size,
                       inverse_mass, torch.stack(leapfrog_steps, dim=1) if leapfrog_steps else None, compiled)


def _refuse_a_start_without_a_density(log_density):
    """A ValueError where a chain starts at a NaN or infinite log density, from which it cannot move
    (its proposals' acceptance is undefined); it would otherwise fail after the whole run, in the
    draws' diagnostics."""
    bad = ~torch.isfinite(log_density)
    if bool(bad.any()):
        raise ValueError(
            f"{int(bad.sum())} of {len(bad)} chains start where the log posterior is not finite: their "
            "weights overflow the network (with init='prior', a hyperprior far below its default shape "
            "or rate draws precisions near 0, and weights too large to evaluate), or the module's "
            "outputs do; start from init='map', or give the hyperprior its defaults."
        )


def _kernel_state(state):
    """The state of the kernel itself, which holds its tuning (step size, mass)."""
    return state.kernel if isinstance(state, GibbsState) else state


def _retuned(state, **tuning):
    """``state`` with the kernel's tuning fields replaced."""
    if isinstance(state, GibbsState):
        return state._replace(kernel=state.kernel._replace(**tuning))
    return state._replace(**tuning)


def acceptance_by_quarter(acceptance):
    """Mean acceptance probability in each quarter of the sampling phase, shape ``(4,)``."""
    return np.array([float(part.mean()) for part in torch.tensor_split(acceptance, 4, dim=1)])
