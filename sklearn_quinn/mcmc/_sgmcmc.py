"""Stochastic-gradient MCMC over a batch of chains: SGLD and SGHMC with a cyclical step size.

For tables where a full-data gradient per step is too slow. Each step takes
the gradient of ``log prior + (N / B) log likelihood`` of one random
minibatch of ``B`` rows (one minibatch for all chains, so the forward pass
stays batched), an unbiased estimate of the full log posterior's gradient,
and injects Gaussian noise in place of a Metropolis correction:

- SGLD (Welling and Teh 2011, "Bayesian learning via stochastic gradient
  Langevin dynamics"): ``theta += eps**2 / 2 M^-1 g + eps M^(-1/2) z``;
- SGHMC (Chen, Fox and Guestrin 2014, "Stochastic gradient Hamiltonian Monte
  Carlo"), with momentum ``p ~ N(0, M)`` and friction ``alpha``:
  ``p = (1 - alpha) p + eps g + sqrt(2 alpha) M^(1/2) z``, ``theta += eps M^-1 p``.

``M^-1`` is a fixed diagonal preconditioner, the inverse of the diagonal of
the posterior precision at the start (the GGN's diagonal plus the prior
precision): ``eps`` is then in units of each weight's posterior scale, and
a fixed preconditioner keeps the dynamics' stationary distribution the
posterior as ``eps`` goes to zero (an adaptive one, as RMSprop's, needs a
correction term). Neither sampler corrects the discretisation or the
minibatch noise, so both are approximate: the bias grows with
``eps**2 N / B``.

The step size follows Zhang et al. 2020 ("Cyclical stochastic gradient MCMC
for Bayesian deep learning"): the sampling steps are split into
``n_cycles`` cycles, in each of which ``eps**2`` falls from ``step_size**2``
to zero along half a cosine; the draws are every ``thin``-th step of the
second half of each cycle. Large steps move the chains between modes, small
ones sample each finely. Zhang et al. run a cycle's first part as SGD, the
noise off, to find new modes (their exploration stage); here the noise stays
on at every step (their exploration proportion 0). The chains start at the
MAP, and a noiseless half pulled them back to the mode each cycle, from
which the second half, its steps falling to zero, did not spread them again:
their draws were narrower than the posterior (docs/mcmc.rst gives the
figures). Burn-in runs at ``step_size``.
"""

import math
from typing import NamedTuple

import torch

from .._core.log_posterior import LogPosterior
from .._core.rng import standard_normal

#: The stochastic-gradient samplers, by name.
SG_SAMPLERS = ("sgld", "sghmc")

#: SGHMC's friction: the fraction of momentum lost per step (0.1 as SGD's momentum of 0.9).
FRICTION = 0.1


class MinibatchLogPosterior:
    """``log prior + (N / B) log likelihood`` of ``B`` rows drawn at random, per state row.

    Parameters
    ----------
    state_likelihood : callable ``(model, X, Y) -> density``
        Builds the likelihood of some rows (a likelihood's ``state_log_likelihood``).
    model : FunctionalModel
    X, Y : tensor of shape (N, D) and (N, O)
    log_prior : callable ``(C, P) -> (C,)`` with ``value_and_grad``
    batch_size : int
    """

    def __init__(self, state_likelihood, model, X, Y, log_prior, batch_size):
        self.state_likelihood, self.model, self.X, self.Y = state_likelihood, model, X, Y
        self.log_prior, self.batch_size = log_prior, min(batch_size, len(X))

    def value_and_grad(self, rows, generator):
        """The estimate and its gradient ``((C,), (C, P))`` on one minibatch, drawn with replacement."""
        index = torch.randint(len(self.X), (self.batch_size,), generator=generator, device=self.X.device)
        likelihood = self.state_likelihood(self.model, self.X[index], self.Y[index])
        return LogPosterior(likelihood, self.log_prior, len(self.X) / self.batch_size).value_and_grad(rows)


#: ``step_size='auto'`` for SGLD and SGHMC: ``factor * sqrt(B / N)``, at most ``cap``.
#: The minibatch gradient's noise grows as ``sqrt(N / B)`` against the injected
#: noise, which must dominate it for the chain to sample the posterior (Welling
#: and Teh 2011, section 4; Chen et al. 2014, section 3), so the step shrinks as
#: its inverse. Factors and caps: the steps at which the chains of 100,000 rows
#: of a linear model in minibatches of 1000 matched the exact predictive std
#: (tests/test_sgmcmc.py); at 0.01, SGLD kept a quarter to a half of it.
AUTO_STEP = {"sgld": (2.0, 0.2), "sghmc": (0.5, 0.05)}


def auto_step_size(sampler, batch_size, n_rows):
    """The step size of ``step_size='auto'`` for ``sampler`` on ``n_rows`` rows in minibatches of ``batch_size``."""
    factor, cap = AUTO_STEP[sampler]
    return min(cap, factor * math.sqrt(batch_size / n_rows))


def cyclical_schedule(n_samples, thin, n_cycles, step_size):
    """The sampling phase: ``eps`` per step, whether each step is in a cycle's sampling half, whether it is kept.

    Each cycle's first half, at the larger steps, is as long as its sampling
    half, which holds ``thin`` steps per draw it keeps, the draws split among
    the cycles as evenly as they go. Returns three tensors of one entry per step.
    """
    sizes, sampling, keep = [], [], []
    for draws in torch.arange(n_samples).tensor_split(n_cycles):
        half = len(draws) * thin
        position = torch.arange(2 * half, dtype=torch.float64) / (2 * half)
        sizes.append(step_size * torch.sqrt(0.5 * (torch.cos(math.pi * position) + 1)))
        sampling.append(torch.arange(2 * half) >= half)
        keep.append(sampling[-1] & ((torch.arange(2 * half) - half + 1) % thin == 0))
    return torch.cat(sizes), torch.cat(sampling), torch.cat(keep)


class SGState(NamedTuple):
    position: torch.Tensor  # (C, P)
    momentum: torch.Tensor  # (C, P), zero for SGLD


def sg_step(sampler, density, state, step_size, inverse_mass, generator):
    """One SGLD or SGHMC step of every chain at step size ``step_size``.

    Returns the new state and whether each chain's gradient was finite (a
    non-finite one is a divergence: the chain stays where it was).
    """
    _, gradient = density.value_and_grad(state.position, generator)
    finite = torch.isfinite(gradient).all(1, keepdim=True)
    z = standard_normal(generator, gradient)
    if sampler == "sgld":
        move = 0.5 * step_size**2 * inverse_mass * gradient + step_size * inverse_mass.sqrt() * z
        new = SGState(state.position + move, state.momentum)
    else:
        noise = math.sqrt(2 * FRICTION) * z / inverse_mass.sqrt()
        momentum = (1 - FRICTION) * state.momentum + step_size * gradient + noise
        new = SGState(state.position + step_size * inverse_mass * momentum, momentum)
    return SGState(*(torch.where(finite, moved, old) for moved, old in zip(new, state))), finite[:, 0]


def check_cycles(n_cycles, n_samples):
    """Refuse more cycles than draws: each cycle's sampling half keeps at least one."""
    if n_cycles > n_samples:
        raise ValueError(f"n_cycles={n_cycles} is more than the n_samples={n_samples} draws it spreads them over.")


def run_sg_chains(density, position, inverse_mass, *, sampler="sghmc", n_samples=500, n_burnin=500, thin=1,
                  step_size=0.1, n_cycles=4, generator=None, progress=None):
    """Run ``C`` chains from ``position (C, P)`` and keep ``n_samples`` draws each.

    ``n_burnin`` steps at ``step_size``, then the cycles of
    :func:`cyclical_schedule`: ``2 n_samples thin`` steps.

    Parameters
    ----------
    density : MinibatchLogPosterior
    inverse_mass : tensor of shape (C, P) or (P,)
        The diagonal preconditioner ``M^-1``.
    sampler : {'sgld', 'sghmc'}

    Returns
    -------
    draws : tensor of shape (C, n_samples, P)
    divergent : tensor of bool, shape (C, n_samples thin)
        The steps of the cycles' second halves, those the draws are kept from, whose gradient was
        not finite (one per step, as the samplers with a step per draw count them; a first half's
        are not counted).
    """
    check_cycles(n_cycles, n_samples)
    schedule, sampling, keep = cyclical_schedule(n_samples, thin, n_cycles, step_size)
    state = SGState(position, torch.zeros_like(position))
    draws, divergent = [], []
    for t in range(n_burnin + len(schedule)):
        index = t - n_burnin
        size = step_size if index < 0 else float(schedule[index])
        state, finite = sg_step(sampler, density, state, size, inverse_mass, generator)
        if index >= 0 and sampling[index]:
            divergent.append(~finite)
        if index >= 0 and keep[index]:
            draws.append(state.position)
        if progress is not None:
            progress(t + 1, float(finite.to(torch.float64).mean()))
    return torch.stack(draws, dim=1), torch.stack(divergent, dim=1)
