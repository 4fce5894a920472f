"""BBBRegressor: the mean-field optimum of a linear model, the prior, the KL and its weighting."""

import math

import numpy as np
import pytest
import torch
from scipy.stats import norm

from sklearn_quinn import BBBRegressor
from sklearn_quinn._core.likelihoods import GaussianLikelihood
from sklearn_quinn._core.network import FunctionalModel, build_mlp
from sklearn_quinn._core.priors import ScaleMixturePrior
from sklearn_quinn.variational._engine import MeanFieldNetwork, kl_divergence, kl_weight, negative_elbo

from .exact import BayesianLinearRegression

NOISE, PRIOR_STD = 0.3, 1.0


def small(**params):
    return BBBRegressor(**{**dict(hidden_layer_sizes=(8,), max_epochs=40, random_state=0), **params})


def test_linear_model_optimum_is_the_mean_field_posterior(linear_data):
    """For a linear model, Gaussian noise and a Gaussian prior the best factored
    Gaussian has the exact posterior mean and variances 1 / diag(precision):
    means within 0.1 of those stds, stds within 10%."""
    X, y = linear_data
    reg = BBBRegressor(hidden_layer_sizes=(), noise_std=NOISE, prior_std=PRIOR_STD,
                       normalize_y=False, n_mc_samples=8, lr=0.02, random_state=0).fit(X, y)
    exact = BayesianLinearRegression(X, y, NOISE, PRIOR_STD)
    mean_field_std = 1 / np.sqrt(np.diag(exact.precision))
    assert (np.abs(reg.posterior_.mean.numpy() - exact.mean) < 0.1 * mean_field_std).all()
    np.testing.assert_allclose(reg.posterior_.std.numpy(), mean_field_std, rtol=0.1)


@pytest.mark.slow
def test_estimated_noise(linear_data):
    X, y = linear_data
    reg = BBBRegressor(hidden_layer_sizes=(), n_mc_samples=8, normalize_y=False,
                       random_state=0).fit(X, y)
    assert reg.noise_std_ == pytest.approx(NOISE, rel=0.25)


def test_prior_std_is_the_one_component_mixture(wave_data):
    """The Gaussian prior of ``prior_std`` is the mixture with ``prior_pi=1`` and
    ``prior_sigma1=prior_std``: the same ELBO, hence the same fit to the bit."""
    X, y = wave_data
    gaussian = small(prior_std=0.7).fit(X, y)
    mixture = small(prior_pi=1.0, prior_sigma1=0.7, prior_sigma2=3.0).fit(X, y)
    torch.testing.assert_close(gaussian.posterior_.mean, mixture.posterior_.mean, rtol=0, atol=0)
    assert not torch.equal(gaussian.posterior_.mean, small(prior_std=1.0).fit(X, y).posterior_.mean)


def test_scale_mixture_log_prob():
    theta = torch.tensor([[0.0, 0.3, -2.0], [0.01, 1.0, 5.0]], dtype=torch.float64)
    prior = ScaleMixturePrior(0.3, 1.5, 0.05)
    density = 0.3 * norm.pdf(theta.numpy(), scale=1.5) + 0.7 * norm.pdf(theta.numpy(), scale=0.05)
    np.testing.assert_allclose(prior.log_prob(theta).numpy(), np.log(density).sum(1))
    np.testing.assert_allclose(
        ScaleMixturePrior(1.0, 2.0, 0.1).log_prob(theta).numpy(), norm.logpdf(theta.numpy(), scale=2.0).sum(1)
    )
    assert ScaleMixturePrior(0.0, 2.0, 0.1).gaussian_std == 0.1


def test_monte_carlo_kl_matches_the_closed_form():
    """A two-component mixture of equal-but-not-identical stds takes the Monte
    Carlo path; with 200k draws it agrees with the closed form within 1%."""
    model = FunctionalModel(build_mlp(2, 1, [3]))
    generator = torch.Generator().manual_seed(0)
    mean = 0.5 * torch.randn(model.n_params, generator=generator, dtype=torch.float64)
    std = 0.1 + torch.rand(model.n_params, generator=generator, dtype=torch.float64)
    closed_form = kl_divergence(mean, std, None, ScaleMixturePrior(1.0, 0.8, 0.8))
    theta = mean + std * torch.randn(200_000, model.n_params, generator=generator, dtype=torch.float64)
    estimate = kl_divergence(mean, std, theta, ScaleMixturePrior(0.5, 0.8, 0.8 * (1 + 1e-12)))
    assert float(estimate) == pytest.approx(float(closed_form), rel=0.01)


def test_negative_elbo_by_hand():
    """A Gaussian prior and likelihood: kl_weight * KL / N minus the mean
    log density of the batch over the draws, with the KL of two diagonal
    Gaussians sum(log(s_p / s) + (s**2 + m**2) / (2 s_p**2) - 1/2) and the
    log densities from scipy (to 1e-12)."""
    generator = torch.Generator().manual_seed(0)
    mean = torch.randn(4, generator=generator, dtype=torch.float64)
    std = 0.1 + torch.rand(4, generator=generator, dtype=torch.float64)
    theta = mean + std * torch.randn(3, 4, generator=generator, dtype=torch.float64)
    outputs = torch.randn(3, 5, 1, generator=generator, dtype=torch.float64)
    y = torch.randn(5, 1, generator=generator, dtype=torch.float64)
    likelihood = GaussianLikelihood(torch.tensor([0.7], dtype=torch.float64))
    value = negative_elbo(outputs, y, theta, mean, std, likelihood=likelihood, prior=ScaleMixturePrior(1.0, 2.0, 0.1),
                          n_train=50, kl_weight=0.25)
    m, s = mean.numpy(), std.numpy()
    kl = np.sum(np.log(2.0 / s) + (s**2 + m**2) / (2 * 2.0**2) - 0.5)
    log_likelihood = norm.logpdf(y.numpy()[None], loc=outputs.numpy(), scale=0.7).mean()
    assert float(value) == pytest.approx(0.25 * kl / 50 - log_likelihood, rel=1e-12)


def test_draws_of_one_step_are_one_batch():
    model = FunctionalModel(build_mlp(3, 2, [5]))
    network = MeanFieldNetwork(model, model.flatten(), torch.full((model.n_params,), 0.1), n_mc_samples=6)
    X = torch.randn(7, 3)
    outputs, theta = network(X)
    assert outputs.shape == (6, 7, 2) and theta.shape == (6, model.n_params)
    assert len(torch.unique(theta, dim=0)) == 6
    torch.testing.assert_close(outputs, torch.stack([model.single(row, X) for row in theta]))


@pytest.mark.parametrize("n_batches", [1, 4, 2000])
def test_kl_weights_of_an_epoch_sum_to_the_number_of_batches(n_batches):
    for scheme in ["uniform", "blundell"]:
        weights = [kl_weight(scheme, index, n_batches) for index in range(1, n_batches + 1)]
        assert math.fsum(weights) == pytest.approx(n_batches)
    blundell = [kl_weight("blundell", index, 4) for index in range(1, 5)]
    np.testing.assert_allclose(blundell, 4 * np.array([8, 4, 2, 1]) / 15)


def test_blundell_weighting_fits(wave_data):
    X, y = wave_data
    reg = small(kl_weighting="blundell", batch_size=20, max_epochs=20).fit(X, y)
    mean, std = reg.predict(X, return_std=True)
    assert np.isfinite(mean).all() and (std > 0).all()


def test_same_random_state_same_predictions(wave_data):
    X, y = wave_data
    a, b = small().fit(X, y), small().fit(X, y)
    np.testing.assert_array_equal(a.predict(X, return_std=True)[1], b.predict(X, return_std=True)[1])
    np.testing.assert_array_equal(a.sample_y(X, 2), b.sample_y(X, 2))


@pytest.mark.parametrize(
    "params, message",
    [
        ({"prior_pi": 1.5}, "prior_pi"),
        ({"prior_pi": -0.1}, "prior_pi"),
        ({"prior_sigma1": 0.0}, "prior_sigma1"),
        ({"prior_std": 0.0}, "prior_std"),
        ({"prior_sigma2": -1.0}, "prior_sigma2"),
        ({"kl_weighting": "graves"}, "kl_weighting"),
        ({"n_mc_samples": 0}, "n_mc_samples"),
    ],
)
def test_bad_parameters(wave_data, params, message):
    X, y = wave_data
    with pytest.raises(ValueError, match=message):
        small(**params).fit(X, y)
