"""Any kernel within Gibbs: a kernel moves the leading columns of each row given
the trailing ones (hyperparameters), which exact conditional draws then update.

A state row is ``[moved (K) | hyperparameters (H)]``. The kernel (HMC, MALA,
adaptive Metropolis, unchanged) runs on the conditional density of the first
``K`` columns given the last ``H``; it never sees, moves or adapts to the
hyperparameter columns. Each step is

1. one kernel step on the weights, the hyperparameters of each row held fixed;
2. one exact draw of the hyperparameters of each row given its new weights
   (:class:`~sklearn_quinn._core.hyperpriors.HyperparameterGibbs`);
3. the kernel's cached log density and gradient brought to the new
   hyperparameters (exactly, with no gradient evaluation; a sampled noise
   costs one forward pass, for its draw), so that its next proposal starts
   from the current conditional.

Both moves leave the joint distribution invariant, so their cycle does (Neal
1996, "Bayesian Learning for Neural Networks", alternates Gibbs updates of
the hyperparameters with HMC updates of the weights this way). Over a run the
two simply alternate; a step ends with the Gibbs draw, rather than starting
with it, so that what it reports as proposed is the kernel's own proposal
(the hyperparameters unchanged): SMC tunes step sizes from those jumps, which
the Gibbs draws, not depending on the step size, would only blur. The chains
of an MCMC fit start at the MAP's learned hyperparameters, so their first
kernel step already sees sensible ones.

Why the hyperparameters are state columns and not a separate tensor: every
operation on rows (SMC's resampling, joblib's chain groups, the kept draws,
R-hat and ESS) then carries them with their weights for free. Why the kernel
does not move them: its step size and mass matrix stay those of the weights,
and the Gibbs draws are exact where a gradient step on a log precision mixes
slowly.
"""

import copy
from typing import NamedTuple

import torch

from ._kernels import value_and_grad


class GibbsState(NamedTuple):
    """The state of a kernel within Gibbs, one row per chain."""

    position: torch.Tensor  # (C, P): the kernel's K columns, then the hyperparameters
    kernel: NamedTuple  # the kernel's own state over the first K columns


class ConditionalDensity:
    """A log density of whole rows as one of their first ``n_moved`` columns,
    the others held at the values of :meth:`condition_on`.

    Its value is the whole row's (terms of the held columns included), so a
    kernel's cached value is the joint log density at the current row. Where
    the density can hold its hyperparameters itself (a log posterior under
    :class:`~sklearn_quinn._core.hyperpriors.HierarchicalPrior`), its
    gradients and surrogates are evaluated so, the terms of the held columns
    computed once per :meth:`condition_on` rather than at every step of a
    trajectory; its value stays the joint density's own, to the last bit, so
    that HMC's accept steps (on values alone) are those of the joint density.
    """

    def __init__(self, log_density, n_moved):
        self.log_density, self.n_moved, self.held = log_density, n_moved, None
        given = getattr(log_density, "given_hyperparameters", None)
        self.held_density = None if given is None else given()
        self.differentiated = log_density if self.held_density is None else self.held_density

    def condition_on(self, rows):
        """Hold the trailing columns of ``rows (C, P)``."""
        held = rows[:, self.n_moved :]
        if self.held is not None and self.held.shape == held.shape:
            self.held.copy_(held)  # in place: a compiled kernel keeps reading the same tensor
        else:
            self.held = held.clone()
        if self.held_density is not None:
            self.held_density.hold(rows)

    def select(self, index):
        """This density over the rows ``index`` of those held (a kernel's leapfrog steps
        moving the rows whose trajectories have not stopped)."""
        selected = copy.copy(self)
        selected.held = self.held[index]
        if self.held_density is not None:
            selected.held_density = selected.differentiated = self.held_density.select(index)
        return selected

    def _rows(self, moved):
        # Fewer rows than held: the leading ones (a kernel moving only the chains whose
        # trajectories have not ended, sorted first).
        return torch.cat([moved, self.held[: len(moved)]], dim=1)

    def __call__(self, moved):
        return self.log_density(self._rows(moved))

    def value_and_grad(self, moved):
        value, gradient = value_and_grad(self.differentiated, self._rows(moved))
        return value, self._moved_columns(gradient)

    @property
    def surrogate(self):
        """The joint density's ``surrogate`` (a cheaper approximation of it) as a density of the
        moved columns given those held at each call, or None where it has none."""
        joint = getattr(self.differentiated, "surrogate", None)
        return None if joint is None else _HeldSurrogate(self, joint)

    def _moved_columns(self, gradient):
        return gradient[:, : self.n_moved].contiguous()  # a compiled kernel specialises on strides


class _HeldSurrogate:
    """A :class:`ConditionalDensity`'s surrogate: the joint density's ``surrogate`` of the moved
    columns, given the columns the conditional holds when it is called (a kernel built before
    the first :meth:`~ConditionalDensity.condition_on` reads them as they come)."""

    def __init__(self, conditional, joint):
        self.conditional, self.joint = conditional, joint

    def __call__(self, moved):
        return self.joint(self.conditional._rows(moved))

    def value_and_grad(self, moved):
        value, gradient = value_and_grad(self.joint, self.conditional._rows(moved))
        return value, self.conditional._moved_columns(gradient)


def gibbs_step(kernel_step, conditional, gibbs, temperature=1.0):
    """The step of ``kernel_step`` (on ``conditional``) within Gibbs updates by ``gibbs``.

    Parameters
    ----------
    kernel_step : callable ``(generator, state) -> (state, Info)``
        A kernel built on ``conditional``.
    conditional : ConditionalDensity
    gibbs : HyperparameterGibbs
        Draws the columns after the first ``conditional.n_moved`` of a row given them.
    temperature : float, default=1.0
        The likelihood's exponent in the target (SMC's tempering).

    Returns
    -------
    step : callable ``(generator, GibbsState) -> (GibbsState, Info)``
        ``Info.proposed_position`` is the kernel's proposal with the
        hyperparameters it was made under.
    """

    def step(generator, state):
        hyperparameters = state.position[:, conditional.n_moved :]
        conditional.condition_on(state.position)
        kernel, info = kernel_step(generator, state.kernel)
        rows = torch.cat([kernel.position, hyperparameters], dim=1)
        statistics = gibbs.statistics(kernel.position)
        new_rows = gibbs.draw(generator, rows, statistics, temperature)
        value, gradient = gibbs.rescore(rows, new_rows, statistics, temperature, kernel.log_density,
                                        getattr(kernel, "gradient", None))
        kernel = kernel._replace(log_density=value) if gradient is None else kernel._replace(
            log_density=value, gradient=gradient)
        info = info._replace(proposed_position=torch.cat([info.proposed_position, hyperparameters], dim=1))
        return GibbsState(new_rows, kernel), info

    return step


def within_gibbs(kernel, log_density, gibbs, temperature=1.0, **options):
    """``kernel`` (a factory such as :func:`~sklearn_quinn.mcmc.hmc`) within Gibbs updates.

    Parameters
    ----------
    kernel : callable ``(log_density, **options) -> (init, step)``
    log_density : callable ``(C, P) -> (C,)``
        The joint log density of whole rows.
    gibbs : HyperparameterGibbs
        Draws the columns after the first ``gibbs.n_params`` of a row given them.
    temperature : float, default=1.0
    **options
        Passed to ``kernel``.

    Returns
    -------
    init : callable ``(position (C, P), *args) -> GibbsState``
        ``args`` (a step size, an inverse mass over the first ``K`` columns) go to the kernel's ``init``.
    step : callable ``(generator, GibbsState) -> (GibbsState, Info)``
    """
    conditional = ConditionalDensity(log_density, gibbs.n_params)
    kernel_init, kernel_step = kernel(conditional, **options)

    def init(position, *args, **kwargs):
        conditional.condition_on(position)
        moved = position[:, : conditional.n_moved].contiguous()  # as the kernel's later states are
        return GibbsState(position, kernel_init(moved, *args, **kwargs))

    return init, gibbs_step(kernel_step, conditional, gibbs, temperature)
