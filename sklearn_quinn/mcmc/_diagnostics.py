"""Convergence diagnostics of MCMC draws: rank-normalised split R-hat and bulk ESS.

Both follow Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021) and compute
what ArviZ's ``rhat(method="rank")`` and ``ess(method="bulk")`` compute, for
every parameter at once. Draws are laid out ``(n_chains, n_draws, n_params)``.
"""

import numpy as np
from scipy.fft import next_fast_len
from scipy.stats import norm, rankdata

# Blom's offset of the normal scores ``(r - 3/8) / (S + 1/4)``.
_BLOM_OFFSET = 3 / 8


def _check_samples(samples):
    """Finite float64 draws (n_chains, n_draws, n_params), and whether the input was 2-D."""
    samples = np.asarray(samples, dtype=np.float64)
    if samples.ndim not in (2, 3):
        raise ValueError(
            "samples must have shape (n_chains, n_draws, n_params), or (n_chains, n_draws) "
            f"for one parameter; got an array of shape {samples.shape}."
        )
    one_parameter = samples.ndim == 2
    if one_parameter:
        samples = samples[:, :, None]
    n_chains, n_draws, n_params = samples.shape
    if n_draws < 4:
        raise ValueError(
            f"samples need at least 4 draws per chain (2 per half-chain); got {n_draws}."
        )
    if n_chains == 0 or n_params == 0:
        raise ValueError(f"samples hold no chains or no parameters: shape {samples.shape}.")
    if not np.all(np.isfinite(samples)):
        raise ValueError("samples contain NaN or infinite values.")
    return samples, one_parameter


def _split_chains(samples):
    """Each chain cut in a first and a last half (the middle draw of an odd chain dropped)."""
    half = samples.shape[1] // 2
    return np.concatenate([samples[:, :half], samples[:, -half:]], axis=0)


def _rank_normalize(samples):
    """Normal scores of the fractional ranks of each parameter's draws over all chains."""
    n_chains, n_draws, n_params = samples.shape
    size = n_chains * n_draws
    ranks = rankdata(samples.reshape(size, n_params), method="average", axis=0)
    scores = norm.ppf((ranks - _BLOM_OFFSET) / (size - 2 * _BLOM_OFFSET + 1))
    return scores.reshape(samples.shape)


def _rhat(chains):
    """Classic potential scale reduction ``sqrt(var+ / W)`` of each parameter."""
    n_draws = chains.shape[1]
    within = chains.var(axis=1, ddof=1).mean(axis=0)
    between = n_draws * chains.mean(axis=1).var(axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):  # constant draws: 0 / 0 -> NaN
        return np.sqrt((between / within + n_draws - 1) / n_draws)


def _autocovariance(chains):
    """Biased autocovariance of every chain at every lag (axis 1), by FFT."""
    n_draws = chains.shape[1]
    n_fft = next_fast_len(2 * n_draws)
    centred = chains - chains.mean(axis=1, keepdims=True)
    power = np.abs(np.fft.rfft(centred, n=n_fft, axis=1)) ** 2
    return np.fft.irfft(power, n=n_fft, axis=1)[:, :n_draws] / n_draws


def _ess(chains):
    """Effective sample size of the mean of each parameter, Geyer's initial monotone sequence.

    The autocorrelation at lag t pools the chains as Stan does,
    ``rho_t = 1 - (W - mean_chains(acov_t)) / var+``. Sums of consecutive
    pairs ``P_k = rho_2k + rho_2k+1`` are kept up to the first one that is not
    positive (the last pair looked at is ``k <= (n_draws - 3) / 2``), made
    non-increasing, and ``tau = -1 + 2 sum_k P_k + rho_2L`` with ``L`` the
    first pair left out: its even term counts once, when it is positive.
    """
    n_chains, n_draws, n_params = chains.shape
    size = n_chains * n_draws
    acov = _autocovariance(chains).mean(axis=0)
    within = acov[0] * n_draws / (n_draws - 1)
    var_plus = acov[0] + chains.mean(axis=1).var(axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):  # constant draws, handled below
        rho = 1 - (within - acov) / var_plus
    rho[0] = 1.0

    n_pairs = max(1, (n_draws - 1) // 2)
    pairs = rho[0 : 2 * n_pairs : 2] + rho[1 : 2 * n_pairs : 2]
    not_positive = pairs <= 0
    first_left_out = np.where(not_positive.any(axis=0), not_positive.argmax(axis=0), n_pairs - 1)
    kept = np.arange(n_pairs)[:, None] < first_left_out
    monotone_sum = np.where(kept, np.minimum.accumulate(pairs, axis=0), 0.0).sum(axis=0)
    columns = np.arange(n_params)
    last_even = rho[2 * first_left_out, columns]
    # ArviZ and Stan keep the even term of the last pair looked at when it is positive,
    # and also when that pair was stored (a zero sum, or the lag limit reached).
    last_term = np.where((pairs[first_left_out, columns] >= 0) | (last_even > 0), last_even, 0.0)

    tau = np.maximum(-1 + 2 * monotone_sum + last_term, 1 / np.log10(size))
    constant = np.ptp(chains, axis=(0, 1)) < np.finfo(np.float64).resolution
    return np.where(constant, float(size), size / tau)


def _per_parameter(values, one_parameter):
    return float(values[0]) if one_parameter else values


def split_rhat(samples):
    """Rank-normalised split R-hat of each parameter (Vehtari et al. 2021).

    Every chain is split in halves, so that a trend inside a chain shows up as
    a disagreement between its halves. The bulk R-hat is the classic
    ``sqrt(var+ / W)`` of the rank-normalised draws (fractional ranks over all
    chains, mapped to normal scores ``Phi^-1((r - 3/8) / (S + 1/4))``); the
    folded R-hat is the same on ``|x - median(x)|``, which catches chains with
    the same location but different scales. The result is the larger of the
    two. Values above 1.01 suggest the chains have not mixed.

    Parameters
    ----------
    samples : array-like of shape (n_chains, n_draws, n_params) or (n_chains, n_draws)
        Draws after burn-in; at least 4 per chain. One chain is allowed (its
        halves are compared; ArviZ returns NaN there, the paper's code does not).

    Returns
    -------
    rhat : ndarray of shape (n_params,), or float for 2-D input
        NaN for a parameter whose draws are all equal; huge (up to inf) when
        each chain is stuck at its own value.

    See Also
    --------
    effective_sample_size : Bulk effective sample size.

    References
    ----------
    Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. & Bürkner, P.-C. (2021).
    Rank-normalization, folding, and localization: an improved R-hat for
    assessing convergence of MCMC. Bayesian Analysis 16(2), 667-718.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_quinn.mcmc import split_rhat
    >>> samples = np.random.default_rng(0).normal(size=(4, 1000, 2))
    >>> split_rhat(samples).round(2)
    array([1., 1.])
    >>> samples[0] += 3.0  # one chain elsewhere
    >>> bool(np.all(split_rhat(samples) > 1.1))
    True
    """
    samples, one_parameter = _check_samples(samples)
    split = _split_chains(samples)
    folded = np.abs(split - np.median(split, axis=(0, 1)))
    # fmax: chains each stuck at its own value fold to one constant, whose R-hat is NaN, while the
    # bulk R-hat says they disagree (up to inf); NaN stays only where both are (every draw equal).
    rhat = np.fmax(_rhat(_rank_normalize(split)), _rhat(_rank_normalize(folded)))
    return _per_parameter(rhat, one_parameter)


def effective_sample_size(samples):
    """Bulk effective sample size of each parameter (Vehtari et al. 2021).

    The effective sample size of the rank-normalised split chains: how many
    independent draws would estimate the centre of the distribution as
    precisely. The autocorrelations are computed by FFT and summed with
    Geyer's initial monotone sequence estimator, as Stan and ArviZ do; the
    result is capped at ``S log10(S)`` for ``S`` draws in all.

    Parameters
    ----------
    samples : array-like of shape (n_chains, n_draws, n_params) or (n_chains, n_draws)
        Draws after burn-in; at least 4 per chain.

    Returns
    -------
    ess : ndarray of shape (n_params,), or float for 2-D input
        The number of draws for a parameter whose draws are all equal.

    See Also
    --------
    split_rhat : Rank-normalised split R-hat.

    References
    ----------
    Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. & Bürkner, P.-C. (2021).
    Rank-normalization, folding, and localization: an improved R-hat for
    assessing convergence of MCMC. Bayesian Analysis 16(2), 667-718.

    Geyer, C. J. (1992). Practical Markov chain Monte Carlo. Statistical
    Science 7(4), 473-483.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_quinn.mcmc import effective_sample_size
    >>> rng = np.random.default_rng(0)
    >>> independent = rng.normal(size=(4, 1000))
    >>> 3600 < effective_sample_size(independent) < 4400
    True
    >>> sticky = np.repeat(independent[:, :250], 4, axis=1)  # every draw kept 4 times
    >>> 800 < effective_sample_size(sticky) < 1200
    True
    """
    samples, one_parameter = _check_samples(samples)
    ess = _ess(_rank_normalize(_split_chains(samples)))
    return _per_parameter(ess, one_parameter)
