"""The constant SGD rate of SWAG's collection phase, from the posterior at the MAP, pure torch.

Constant-rate SGD on the per-point loss with minibatches of ``S`` rows is,
near a mode, an Ornstein-Uhlenbeck process whose stationary Gaussian stands
in for the posterior. Mandt, Hoffman and Blei (2017, "Stochastic gradient
descent as approximate Bayesian inference", JMLR 18) show that the rate
closest to the posterior in KL divergence is

    ``eps = 2 S D / (N tr C)``,

``C`` the covariance of the per-point gradients and ``D`` the dimension the
data determine. A network's prior-dominated directions carry no gradient
noise, so ``D`` is MacKay's count ``gamma`` of well-determined weights at the
MAP's prior (the evidence's), not the number of weights.

That stationary law is the continuous-time limit of small rates. The
iteration itself, along a direction of curvature ``lambda`` (of the per-point
loss, the generalised Gauss-Newton's ``G / N``) with per-point gradient noise
of variance ``v`` (a minibatch's ``xi`` has variance ``v / S``), is
``x' = (1 - eps lambda) x - eps xi`` and settles at the
variance ``eps v / (S lambda (2 - eps lambda))``: ``2 / (2 - eps lambda)``
times the limit's, without bound as the rate nears gradient descent's
stability limit ``2 / lambda``. Where Mandt's rate is larger (on every table
measured, it is), the rate is capped at ``STABILITY_FRACTION`` of the limit of the stiffest
direction, ``lambda_max``, found by subspace iteration (the GGN's diagonal or
Kronecker-factored blocks understate it: its direction mixes the layers), so
that no direction's variance exceeds the continuous law's by more than a
quarter. A scalar rate spreads every direction alike, so the
iterates still under-explore the flat directions of the posterior: Mandt et
al.'s remedy is a preconditioner (the inverse gradient noise covariance).
A diagonal one (the MAP's GGN diagonal plus the prior) makes the stationary
covariance that diagonal's, and covered the regression tables worse; the
family mixes several members' Gaussians instead (MultiSWAG, ``_swag.py``).
"""

import math

import torch
from torch.func import grad

from .._core.curvature import curvature, largest_ggn_eigenvalue
from .._core.evidence import LaplaceEvidence

#: The cap on the rate, as a fraction of gradient descent's stability limit ``2 / lambda_max``: at
#: ``eps lambda_max = 0.4`` the discrete iteration's variance is ``2 / (2 - 0.4) = 1.25`` times the
#: continuous law's.
STABILITY_FRACTION = 0.2


def sampling_rate(model, theta, X, Y, likelihood, groups, precision, batch_size, row_weight=1.0):
    """The SGD rate on the per-point negative log likelihood: ``min(2 S gamma / (N tr C), 2 f N / lambda_max(G))``.

    ``f`` is ``STABILITY_FRACTION``. Every term is a mean or a sum over the
    training rows, so a uniform random subset of them estimates it, each of
    its rows standing for ``row_weight`` rows of the table: the GGN of the
    table is ``row_weight`` times the subset's, ``N`` is ``row_weight`` times
    its rows, and ``gamma`` is the evidence's with that weight on its rows.

    Parameters
    ----------
    model : FunctionalModel
    theta : tensor of shape (K,)
        The MAP.
    X, Y : tensor of shape (n, D) and (n, O)
        The training rows, or a uniform random subset of them.
    likelihood : GaussianLikelihood or CategoricalLikelihood
        With the noise held fixed (``likelihood.frozen``).
    groups : ParameterGroups
    precision : tensor of shape (G,) or scalar
        The prior precision of each group, as the MAP was trained under.
    batch_size : int
        Rows ``S`` of an SGD minibatch.
    row_weight : float, default=1.0
        The table's rows per row of ``X``: ``N = row_weight * n``.

    Returns
    -------
    float
        1.0 where no weight moves the outputs (a zero GGN): the rate then only
        scales the prior's shrinkage. The stable rate where the gradients have no
        noise or less than one weight is well determined.
    """
    theta = theta.detach()
    n_rows = X.shape[0]
    evidence = LaplaceEvidence(model, theta, X, Y, likelihood, groups, row_weight=row_weight)
    well_determined = float(evidence.well_determined(precision).sum())
    largest = largest_ggn_eigenvalue(model, theta, X, likelihood)
    _check_finite(largest, theta.dtype)
    if largest <= 0.0:  # no weight moves the outputs: the rate only scales the prior's shrinkage
        return 1.0
    stable = 2 * STABILITY_FRACTION * n_rows / largest  # N / lambda_max(G): the weight cancels
    mean_gradient = grad(lambda weights: -likelihood.log_prob(model.single(weights, X), Y).mean())(theta)
    second_moment = float(curvature(model, theta, X, Y, likelihood, "ef", "diag").sum()) / n_rows
    noise_trace = second_moment - float(mean_gradient.square().sum())
    _check_finite(noise_trace, theta.dtype)
    # An interpolating fit has no gradient noise; a prior that leaves less than one weight well
    # determined (its count then at the round-off's level, or just below zero) no direction whose
    # posterior spread the rate could match.
    if noise_trace <= 0.0 or well_determined < 1.0:
        return stable
    return min(2 * batch_size * well_determined / (row_weight * n_rows * noise_trace), stable)


def _check_finite(value, dtype):
    """Refuse a curvature or gradient spread at the MAP that overflowed: the rate would be nan (or 0),
    and every SGD run at it diverge (or stay put)."""
    if not math.isfinite(value):
        remedies = "standardise the inputs (normalize_X=True)" + (
            "" if dtype == torch.float64 else ", take dtype='float64'")
        raise ValueError(
            "SWAG's SGD rate (lr_swag='auto') reads the curvature and the gradients' spread at the MAP, which "
            f"overflow {str(dtype).removeprefix('torch.')} here: {remedies}, or give lr_swag as a float."
        )
