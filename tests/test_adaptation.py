"""Burn-in adaptation (dual averaging, Stan's windows, the regularised variance), written out by hand.

Algorithm 5's first steps and a restarted search; the schedule's common cases are in
tests/test_mcmc_kernels.py and tests/test_mcmc.py, and here the edges they leave: windows of one
and two draws.
Then the sampling families' shared hyperprior options (sklearn_quinn/mcmc/_hierarchical.py):
which settings warn of unscaled targets, the Gamma the hierarchical prior is under, SMC's
weighted precisions.
"""

import math
import warnings

import numpy as np
import pytest
import torch

from sklearn_quinn.mcmc._adaptation import DualAveraging, WindowedVariance


def algorithm_5(first_step, acceptances, target=0.8):
    """Hoffman & Gelman (2014), Algorithm 5, from ``first_step`` at ``acceptances``: ``mu = log(10
    eps_0)``, ``H_t = (1 - 1/(t + 10)) H_{t-1} + (target - a_t) / (t + 10)``, ``log eps_t = mu -
    sqrt(t) / 0.05 H_t``, ``log eps_bar_t = t^-0.75 log eps_t + (1 - t^-0.75) log eps_bar_{t-1}``,
    from ``H_0 = log eps_bar_0 = 0``. Returns ``(eps_t, eps_bar_t)`` for each step."""
    mu, error, log_average, steps = math.log(10 * first_step), 0.0, 0.0, []
    for t, acceptance in enumerate(acceptances, start=1):
        error = (1 - 1 / (t + 10)) * error + (target - acceptance) / (t + 10)
        log_step = mu - math.sqrt(t) / 0.05 * error
        log_average = t**-0.75 * log_step + (1 - t**-0.75) * log_average
        steps.append((math.exp(log_step), math.exp(log_average)))
    return steps


def test_dual_averaging_is_hoffman_and_gelmans_algorithm_5():
    """Two updates from a step of 0.1 toward 0.8, at acceptances 0.5 then 0.9."""
    search = DualAveraging(torch.tensor([0.1], dtype=torch.float64), target_acceptance=0.8)
    for acceptance, (step, average) in zip([0.5, 0.9], algorithm_5(0.1, [0.5, 0.9])):
        assert float(search.update(torch.tensor([acceptance], dtype=torch.float64))) == pytest.approx(step, rel=1e-12)
        assert float(search.final_step_size) == pytest.approx(average, rel=1e-12)


def test_a_restarted_search_forgets_its_past_and_searches_afresh_from_the_new_step():
    """Stan restarts the search at each new mass (``t``, ``H`` and ``log eps_bar`` back to 0, ``mu``
    from the new step), so the steps after a restart are Algorithm 5's from the new step, per chain:
    here two chains restarted at 0.5 and 0.05 after three updates far from the target. An error
    average kept over the restart would carry 10/11 of the first search's into the first new step; a
    count kept, a ``sqrt(t)`` of 2 rather than 1."""
    search = DualAveraging(torch.tensor([0.1, 0.2], dtype=torch.float64), target_acceptance=0.8)
    for acceptance in ([0.1, 1.0], [0.2, 0.9], [0.05, 0.99]):
        search.update(torch.tensor(acceptance, dtype=torch.float64))
    search.restart(torch.tensor([0.5, 0.05], dtype=torch.float64))
    acceptances = [(0.3, 0.95), (0.9, 0.6), (0.7, 0.7)]
    by_hand = [algorithm_5(0.5, [a for a, _ in acceptances]), algorithm_5(0.05, [b for _, b in acceptances])]
    for t, acceptance in enumerate(acceptances):
        step = search.update(torch.tensor(acceptance, dtype=torch.float64))
        expected_step, expected_average = np.array([by_hand[0][t], by_hand[1][t]]).T
        np.testing.assert_allclose(step.numpy(), expected_step, rtol=1e-12)
        np.testing.assert_allclose(search.final_step_size.numpy(), expected_average, rtol=1e-12)


def test_a_window_of_one_or_two_draws_is_regularised_toward_1e_3():
    """Stan's ``n / (n + 5) var + 1e-3 * 5 / (n + 5)`` at its smallest windows: one draw has no
    spread (the variance's divisor ``n - 1`` floored at 1), which leaves the regulariser's
    ``1e-3 * 5 / 6``; two draws ``a`` and ``b`` have the unbiased variance ``(a - b)**2 / 2``."""
    a = torch.tensor([[0.3, -2.0, 7.0]], dtype=torch.float64)
    b = torch.tensor([[1.3, -2.5, 7.0]], dtype=torch.float64)
    window = WindowedVariance()
    window.update(a)
    np.testing.assert_allclose(window.inverse_mass().numpy(), np.full((1, 3), 1e-3 * 5 / 6), rtol=1e-12)
    window.update(b)
    expected = 2 / 7 * np.array([[1.0, 0.25, 0.0]]) / 2 + 1e-3 * 5 / 7
    np.testing.assert_allclose(window.inverse_mass().numpy(), expected, rtol=1e-12)


# ---------------------------------------------------------------- the hierarchical options (_hierarchical.py)


@pytest.mark.parametrize("fixed", [dict(prior_std=100.0), dict(noise_std=5.0)], ids=["prior", "noise"])
def test_a_sampler_that_samples_the_prior_or_the_noise_warns_of_targets_far_from_unit_scale(fixed):
    """Only a fixed prior *and* a fixed noise leave nothing set for standardised targets
    (tests/test_heteroscedastic.py); with either sampled (the noise's log under N(0, 1), or the
    precisions under the Gamma hyperprior), targets of std 100 with normalize_y=False warn, before any
    sampling (the warning raised as an error stops the fit)."""
    from sklearn_quinn import MCMCRegressor, SMCRegressor

    X = np.random.RandomState(0).randn(30, 2)
    for estimator in (SMCRegressor(hidden_layer_sizes=(), n_particles=16, n_mcmc_steps=1, **fixed),
                      MCMCRegressor(hidden_layer_sizes=(), init="prior", n_samples=5, n_burnin=5, **fixed)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(UserWarning, match="normalize_y=False: the network trains in the units of y"):
                estimator.set_params(normalize_y=False, random_state=0).fit(X, 100 * X[:, 0])


def test_the_sampled_posterior_is_under_the_gamma_of_hyperprior_shape_and_rate(wave_data, monkeypatch):
    """The hierarchical log prior the chains sample is HierarchicalPrior's (its density is checked
    against scipy's in tests/test_hyperpriors.py) under ``Gamma(hyperprior_shape, hyperprior_rate)``:
    equal to it on prior draws, and apart from ``Gamma(rate, shape)``'s there."""
    from sklearn_quinn import MCMCRegressor
    from sklearn_quinn._core.evidence import ParameterGroups
    from sklearn_quinn._core.hyperpriors import GammaHyperprior, HierarchicalPrior

    built, hierarchical_posterior = [], MCMCRegressor._hierarchical_posterior
    monkeypatch.setattr(MCMCRegressor, "_hierarchical_posterior",
                        lambda self, *args: built.append(hierarchical_posterior(self, *args)) or built[-1])
    X, y = wave_data
    reg = MCMCRegressor(hidden_layer_sizes=(2,), hyperprior_shape=2.0, hyperprior_rate=3.0, n_samples=2, n_burnin=2,
                        n_leapfrog=2, n_chains=2, init="prior", compile=False, random_state=0).fit(X[:20], y[:20])
    ((log_posterior, _),) = built
    groups = ParameterGroups.of(reg._model)
    expected = HierarchicalPrior(groups, GammaHyperprior(2.0, 3.0), noise=True)
    swapped = HierarchicalPrior(groups, GammaHyperprior(3.0, 2.0), noise=True)
    rows = expected.sample(5, torch.Generator().manual_seed(0), torch.float64, "cpu")
    np.testing.assert_allclose(log_posterior.log_prior(rows).numpy(), expected(rows).numpy(), rtol=1e-12)
    assert not np.allclose(swapped(rows).numpy(), expected(rows).numpy())


def test_smc_keeps_the_particles_weighted_mean_precision(linear_data):
    """SMC's ``prior_precisions_`` are the mean of ``prior_precision_samples_`` under the particles'
    final weights: here, resampled only below an ESS of 5%, not all equal (an equal-weight mean would
    differ)."""
    from sklearn_quinn import SMCRegressor

    X, y = linear_data
    reg = SMCRegressor(hidden_layer_sizes=(), n_particles=16, n_mcmc_steps=1, resample_threshold=0.05, waste_free=False,
                       random_state=0).fit(X, y)
    weights = reg.posterior_.weights.numpy()
    assert np.ptp(weights) > 1e-3 * weights.mean()
    expected = weights @ reg.prior_precision_samples_
    np.testing.assert_allclose(list(reg.prior_precisions_.values()), expected, rtol=1e-10)
    assert not np.allclose(expected, reg.prior_precision_samples_.mean(0), rtol=1e-6)
