"""The tempering rule: the next exponent from the effective sample size, in log space."""

import math

import torch

#: Bisection steps of the exponent search (the bracket shrinks by 2**-60).
_BISECTION_STEPS = 60


def effective_sample_size(log_weights):
    """``1 / sum(W**2)`` of normalised log weights ``(N,)``, as a float."""
    return float(torch.exp(-torch.logsumexp(2 * log_weights, dim=0)))


def conditional_ess(log_weights, log_likelihood, increment):
    """ESS of the incremental weights ``l**increment`` under the current weights,
    ``N (sum W b)**2 / sum W b**2`` (Zhou, Johansen & Aston 2016).

    With equal current weights this is the usual ESS ``(sum b)**2 / sum b**2``
    of the incremental weights ``b``.
    ``log_weights`` are normalised; the incremental log weight is
    ``increment * log_likelihood``, taken about the largest log likelihood as in
    the weight update (:func:`_centred`).
    """
    incremental = increment * _centred(log_likelihood)
    log_ratio = 2 * torch.logsumexp(log_weights + incremental, 0) - torch.logsumexp(log_weights + 2 * incremental, 0)
    return len(log_weights) * float(torch.exp(log_ratio))


def next_increment(log_weights, log_likelihood, remaining, target_ess):
    """The step ``lambda_t - lambda_{t-1}`` in ``(0, remaining]``.

    The adaptive tempering of Jasra, Stephens, Doucet & Tsagaris (2011),
    "Inference for Lévy-driven stochastic volatility models via adaptive
    sequential Monte Carlo", with the conditional ESS of Zhou et al. (2016).
    It is ``remaining`` (``1 - lambda_{t-1}``) when the conditional ESS after it is at
    least ``target_ess * N``; otherwise the root of ``ESS = target_ess * N``, by
    bisection (the ESS decreases along the step).
    """
    goal = target_ess * len(log_weights)
    if conditional_ess(log_weights, log_likelihood, remaining) >= goal:
        return remaining
    low, high = 0.0, remaining
    for _ in range(_BISECTION_STEPS):
        middle = 0.5 * (low + high)
        if conditional_ess(log_weights, log_likelihood, middle) >= goal:
            low = middle
        else:
            high = middle
    # ``low`` keeps the ESS at or above the goal; ``high`` when ``low`` never moved.
    return low if low > 0 else high


def reweight(log_weights, log_likelihood, increment):
    """New normalised log weights and ``log sum_i W_i l_i**increment``, the log
    evidence increment."""
    unnormalised = log_weights + increment * _centred(log_likelihood)
    log_normaliser = torch.logsumexp(unnormalised, 0)
    return unnormalised - log_normaliser, float(log_normaliser) + increment * float(log_likelihood.max())


def _centred(log_likelihood):
    """``log_likelihood`` less its largest value, which leaves the weights' ratios as they are.
    Far from zero the log likelihoods' sums lose what tells the particles apart: near -1e17 in
    float64 (a prior far wider than the data, before the first stage) a sum's rounding is tens of
    nats, and the conditional ESS of the whole step to the posterior came out as N, one stage."""
    return log_likelihood - log_likelihood.max()


def uniform_log_weights(n, dtype, device):
    return torch.full((n,), -math.log(n), dtype=dtype, device=device)
