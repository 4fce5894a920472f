"""The scale of SWAG's covariance: the data misfit its draws add, set to the Laplace posterior's (pure torch).

SWAG's covariance (Maddox et al. 2019) is the spread of a constant-rate SGD
trajectory, which is the posterior's only as far as that SGD samples it
(Mandt, Hoffman and Blei 2017); where gradient descent's stability limit caps
the rate (small tables: ``swag/_rate.py``), the trajectory is too tight. A
Gaussian ``N(mu, Sigma)`` under the locally quadratic data misfit
``E(theta) = E(mu) + (theta - mu)^T G (theta - mu) / 2`` (``G`` the generalised
Gauss-Newton of the negative log likelihood) raises the misfit of its draws by
``tr(G Sigma) / 2`` on average. For the Laplace posterior,
``Sigma = (G + diag(delta))^-1``, that is ``gamma / 2``, with
``gamma = tr(G (G + diag(delta))^-1)`` MacKay's (1992, "A practical Bayesian
framework for backpropagation networks") count of the weights the data
determine. The scale ``c = gamma / tr(G Sigma)`` makes SWAG's draws fit the
training data as much worse than its mean as the posterior's would: it is 1
where SWAG's covariance is the Laplace posterior's, and it leaves the shape,
which is SWAG's own, unchanged. Only the directions the data determine enter:
the prior-dominated ones, which SGD does not explore, carry no curvature.

The quadratic misfit holds near the mean only. Where SWAG's covariance lies
along directions that are flat there (on a dozen rows, the weights of units
the mean leaves idle), ``tr(G Sigma)`` is tiny and ``c`` huge, and draws
that far out revive those units: their misfit rises by orders of magnitude
more than ``gamma / 2`` (docs: swag). So the draws' own misfit is checked at
``c``, and where it exceeds the quadratic model's by more than
``QUADRATIC_TRUST`` times, ``c`` is the scale at which it is ``gamma / 2``,
found on the same draws (:func:`draws_scale`).
"""

import math

import torch

from .._core.curvature import curvature, curvature_matmul
from .._core.evidence import LaplaceEvidence
from .._core.rng import prediction_generator


def misfit_scale(model, posterior, X, Y, likelihood, groups, precision, row_weight=1.0):
    """``gamma / tr(G Sigma)`` at the posterior's mean, as far as the draws bear it out
    (:func:`draws_scale`; see the module docstring).

    ``G`` is a sum over the training rows, so a uniform random subset of them
    estimates both terms, each of its rows standing for ``row_weight`` rows of
    the table: ``tr(G Sigma)`` is ``row_weight`` times the subset's, and
    ``gamma`` is the evidence's with that weight on its rows.

    Parameters
    ----------
    model : FunctionalModel
    posterior : GaussianPosterior
        SWAG's: diagonal, or low rank plus diagonal.
    X, Y : tensor of shape (n, D) and (n, O)
        The training rows, or a uniform random subset of them.
    likelihood : GaussianLikelihood or CategoricalLikelihood
        With the noise held fixed (``likelihood.frozen``).
    groups : ParameterGroups
    precision : tensor of shape (G,) or scalar
        The prior precision of each group.
    row_weight : float, default=1.0
        The table's rows per row of ``X``.

    Returns
    -------
    float
        1.0 where the draws add no misfit (a posterior collapsed to a point,
        or data that determine no weight).
    """
    mean = posterior.mean.detach()
    evidence = LaplaceEvidence(model, mean, X, Y, likelihood, groups, row_weight=row_weight)
    well_determined = float(evidence.well_determined(precision).sum())
    spread = float((curvature(model, mean, X, Y, likelihood, "ggn", "diag") * posterior.std.square()).sum())
    if posterior.low_rank is not None:
        low_rank = posterior.low_rank
        spread += float((low_rank * curvature_matmul(model, mean, X, Y, likelihood, "ggn", low_rank)).sum())
    spread *= row_weight
    if spread <= 0.0 or well_determined <= 0.0:
        return 1.0
    return draws_scale(model, posterior, X, Y, likelihood, row_weight, well_determined / spread, well_determined / 2)


#: How far the draws' own misfit may exceed the quadratic model's before the scale is found on the draws.
QUADRATIC_TRUST = 10.0
#: Draws that check the quadratic model, from a generator of their own (no other draw moves).
N_CHECK_DRAWS = 32


def check_deviations(posterior):
    """The check's ``N_CHECK_DRAWS`` draws of ``posterior`` less its mean, ``(S, K)``."""
    return posterior.sample(N_CHECK_DRAWS, prediction_generator(0)) - posterior.mean


def added_misfit(model, mean, deviations, X, Y, likelihood, row_weight, log_scale):
    """The mean misfit that the draws ``mean + exp(log_scale / 2) * deviations`` add to ``mean``'s."""
    theta = torch.cat([mean[None], mean + math.exp(0.5 * log_scale) * deviations])
    with torch.no_grad():
        misfit = -likelihood.log_prob(model(theta, X), Y[None].expand(len(theta), -1, -1)).sum(-1) * row_weight
    return float((misfit[1:] - misfit[0]).mean())


def draws_scale(model, posterior, X, Y, likelihood, row_weight, scale, target):
    """``scale``, unless the mean misfit that the check's draws of the posterior scaled by it
    (:func:`check_deviations`) add to the mean's exceeds ``target`` by more than
    ``QUADRATIC_TRUST`` times; then the scale at which it is ``target``, on the same draws, by
    bisection in its logarithm (the misfit grows with the scale)."""
    deviations = check_deviations(posterior)

    def added(log_scale):
        return added_misfit(model, posterior.mean, deviations, X, Y, likelihood, row_weight, log_scale)

    high = math.log(scale)
    if not added(high) > QUADRATIC_TRUST * target:  # NaN too: the check cannot judge it
        return scale
    low = high - math.log(10.0)
    while added(low) > target:
        low, high = low - math.log(10.0), low
    for _ in range(20):  # the scale to 2**-20 of a decade
        middle = 0.5 * (low + high)
        low, high = (middle, high) if added(middle) <= target else (low, middle)
    return math.exp(low)
