"""MCMC diagnostics: closed forms, known failures of mixing, ArviZ's numbers, bad input."""

import numpy as np
import pytest
from scipy.signal import lfilter

from sklearn_quinn.mcmc import effective_sample_size, split_rhat
from sklearn_quinn.mcmc._diagnostics import _rank_normalize, _rhat, _split_chains


def autoregressive_chains(rho, n_chains, n_draws, seed):
    """Stationary AR(1) chains ``x_t = rho x_t-1 + e_t`` (first draw from the stationary law)."""
    noise = np.random.default_rng(seed).normal(size=(n_chains, n_draws))
    noise[:, 0] /= np.sqrt(1 - rho**2)
    return lfilter([1.0], [1.0, -rho], noise, axis=1)


def test_independent_chains_have_rhat_one_and_full_ess():
    """4 x 2000 iid draws: R-hat - 1 is O(1/S) ~ 1e-3 and the ESS estimate has a relative
    sd of ~3% (over seeds), so 0.01 and 10% are loose enough for any seed yet fail on a
    wrong variance formula or a lag-0 term counted twice."""
    samples = np.random.default_rng(0).normal(size=(4, 2000, 5))
    np.testing.assert_allclose(split_rhat(samples), 1.0, atol=0.01)
    np.testing.assert_allclose(effective_sample_size(samples), 8000, rtol=0.10)


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_ess_of_autoregressive_chains_matches_the_closed_form(rho):
    """AR(1): the integrated autocorrelation time of the mean is (1 + rho) / (1 - rho).

    With 8 x 5000 draws the estimate's relative sd over 40 seeds is 2.7% (rho=0.5) and 4.1%
    (rho=0.8), so 15% is over 3.5 sd; a missing factor 2 on the autocorrelation sum or
    an untruncated sum would miss by far more.
    """
    chains = autoregressive_chains(rho, n_chains=8, n_draws=5000, seed=1)
    expected = chains.size * (1 - rho) / (1 + rho)
    assert effective_sample_size(chains) == pytest.approx(expected, rel=0.15)


def test_chains_with_shifted_means_have_large_rhat():
    samples = np.random.default_rng(2).normal(size=(4, 1000, 2))
    samples[0] += 2.0
    assert np.all(split_rhat(samples) > 1.1)


def test_a_trend_inside_one_chain_is_caught_by_splitting():
    """A single chain drifting from 0 to 3: its halves disagree."""
    rng = np.random.default_rng(3)
    drifting = rng.normal(size=(1, 1000)) + np.linspace(0, 3, 1000)
    assert split_rhat(drifting) > 1.1


def test_a_chain_with_a_larger_scale_is_caught_by_the_folded_rhat():
    """Same centre, one chain 3 times wider: the bulk R-hat sees nothing, the folded one does."""
    samples = np.random.default_rng(4).normal(size=(4, 1000, 1))
    samples[0] *= 3.0
    bulk = _rhat(_rank_normalize(_split_chains(samples)))
    assert bulk[0] < 1.01
    assert split_rhat(samples)[0] > 1.05


def test_two_dimensional_input_is_one_parameter():
    samples = np.random.default_rng(5).normal(size=(3, 50, 2))
    for diagnostic in (split_rhat, effective_sample_size):
        values = diagnostic(samples)
        assert values.shape == (2,)
        one = diagnostic(samples[:, :, 1])
        assert isinstance(one, float)
        assert one == values[1]


def test_diagnostics_depend_on_ranks_only():
    """Bulk ESS sees ranks only, so any increasing map leaves it unchanged; R-hat also
    folds around the median, so only increasing affine maps leave it unchanged."""
    samples = autoregressive_chains(0.7, n_chains=4, n_draws=300, seed=6)
    assert effective_sample_size(np.exp(samples)) == pytest.approx(
        effective_sample_size(samples), rel=1e-12
    )
    assert split_rhat(3.0 * samples - 1.0) == pytest.approx(split_rhat(samples), rel=1e-12)


def test_constant_draws():
    samples = np.full((4, 100, 1), 2.0)
    assert np.isnan(split_rhat(samples)[0])
    assert effective_sample_size(samples)[0] == 400


def test_chains_each_stuck_at_their_own_value_have_a_huge_rhat_not_nan():
    """Their folded draws are one constant (R-hat NaN), their bulk R-hat unbounded: a threshold check on
    NaN passed them (NaN > 1.01 is False); ArviZ gives about 1e16."""
    samples = np.stack([np.full((100, 1), 0.0), np.full((100, 1), 1.0)])
    assert split_rhat(samples)[0] > 1e10


def reference_cases():
    rng = np.random.default_rng(7)
    odd_length = rng.normal(size=(3, 101, 2))
    shortest = rng.normal(size=(2, 4, 2))
    noise = rng.normal(size=(4, 500, 3))
    rhos = (0.9, -0.3, -0.7)
    autoregressive = np.stack(
        [lfilter([1.0], [1.0, -rho], noise[:, :, j], axis=1) for j, rho in enumerate(rhos)],
        axis=-1,
    )
    heavy_tailed_ties = rng.standard_t(3, size=(4, 300, 3))
    heavy_tailed_ties[0, :, 0] += 1.0
    heavy_tailed_ties[1, :, 1] *= 3.0
    heavy_tailed_ties[:, :, 2] = np.round(heavy_tailed_ties[:, :, 2])
    stuck = rng.normal(size=(4, 200, 2))
    stuck[0, :, 0] = 0.25  # one whole chain stuck at one value
    stuck[1, 100:, 1] = stuck[1, 99, 1]  # one half-chain stuck
    return {
        "odd_length": odd_length,
        "shortest": shortest,
        "autoregressive": autoregressive,
        "heavy_tailed_ties": heavy_tailed_ties,
        "stuck": stuck,
    }


# arviz 0.23.4: rhat(x[:, :, j], method="rank") and ess(x[:, :, j], method="bulk"), one
# parameter at a time. The cases cover an odd number of draws (middle draw dropped), the
# 4-draw minimum (no Geyer pair beyond lag 1), negative autocorrelation (the last even term
# and the S log10 S cap), a shifted and a wider chain, ties, and chains stuck at one value
# while the others move (only a parameter constant over every chain has the ESS of all draws).
ARVIZ = {
    "odd_length": (
        [0.9981149632515938, 1.0120804230591465],
        [281.50607910699034, 336.2908499717726],
    ),
    "shortest": ([1.3355480787217227, 0.9725952374715056], [7.224719895935548, 7.224719895935548]),
    "autoregressive": (
        [1.0332246916059837, 0.9995406035888407, 1.0038008425728397],
        [102.70531134670624, 3114.352617737812, 6602.059991327962],
    ),
    "heavy_tailed_ties": (
        [1.063802312403563, 1.1067398599354628, 0.998881103459195],
        [49.931801644999, 1153.7048448078929, 1291.674519988852],
    ),
    "stuck": ([1.5246548780990965, 1.2533578475002602], [727.3704052183991, 12.029389616991574]),
}


@pytest.mark.parametrize("case", sorted(ARVIZ))
def test_matches_arviz(case):
    """Same algorithm, same floating-point steps: agreement to rounding error."""
    samples = reference_cases()[case]
    rhat, ess = ARVIZ[case]
    np.testing.assert_allclose(split_rhat(samples), rhat, rtol=1e-10)
    np.testing.assert_allclose(effective_sample_size(samples), ess, rtol=1e-10)


@pytest.mark.parametrize("diagnostic", [split_rhat, effective_sample_size])
@pytest.mark.parametrize(
    "samples, message",
    [
        (np.zeros(10), "shape"),
        (np.zeros((2, 3, 4, 5)), "shape"),
        (np.zeros((4, 3, 2)), "at least 4 draws"),
        (np.zeros((0, 10, 2)), "no chains"),
        (np.where(np.eye(10)[:4, :, None], np.nan, 1.0), "NaN"),
        (np.full((2, 10), np.inf), "infinite"),
    ],
)
def test_bad_input(diagnostic, samples, message):
    with pytest.raises(ValueError, match=message):
        diagnostic(samples)
