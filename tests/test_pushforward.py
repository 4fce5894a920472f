"""Linear and nonlinear pushforward of a weight posterior to the outputs."""

import pytest
import torch

from sklearn_quinn._core.network import FunctionalModel, build_mlp
from sklearn_quinn._core.posterior import GaussianPosterior
from sklearn_quinn._core.pushforward import (
    SampledPredictive,
    linear_pushforward,
    nonlinear_pushforward,
)


@pytest.fixture
def model_and_inputs():
    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(3, 2, (6,), "tanh").double())
    X = torch.randn(5, 3, dtype=torch.float64)
    return model, X


def test_linear_pushforward_is_j_sigma_jt(model_and_inputs):
    model, X = model_and_inputs
    theta = model.flatten()
    std = torch.linspace(0.01, 0.2, model.n_params, dtype=torch.float64)
    predictive = linear_pushforward(model, GaussianPosterior.from_std(theta, std), X)
    jac = model.jacobian(theta, X)
    cov = torch.einsum("nok,k,mpk->opnm", jac, std**2, jac)  # per output pair
    torch.testing.assert_close(predictive.mean, model.single(theta, X))
    torch.testing.assert_close(predictive.covariance(), torch.stack([cov[0, 0], cov[1, 1]]))
    torch.testing.assert_close(predictive.variance, torch.stack([cov[0, 0].diagonal(), cov[1, 1].diagonal()], 1))


def test_gaussian_predictive_samples_have_its_moments(model_and_inputs):
    """100k joint draws: covariance within 3% of the scale."""
    model, X = model_and_inputs
    theta = model.flatten()
    std = torch.full((model.n_params,), 0.05, dtype=torch.float64)
    predictive = linear_pushforward(model, GaussianPosterior.from_std(theta, std), X)
    draws = predictive.sample(100_000, torch.Generator().manual_seed(0))
    assert draws.shape == (100_000, 5, 2)
    empirical = SampledPredictive(draws)
    scale = predictive.variance.sqrt()
    assert ((empirical.mean - predictive.mean).abs() / scale).max() < 0.02
    assert ((empirical.covariance() - predictive.covariance()).abs()).max() < 0.03 * float(scale.max()) ** 2


def test_sampled_predictive_statistics():
    draws = torch.randn(50, 4, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    predictive = SampledPredictive(draws)
    torch.testing.assert_close(predictive.variance, draws.var(0))
    for output in range(2):
        torch.testing.assert_close(predictive.covariance()[output], torch.cov(draws[:, :, output].T))
    single = SampledPredictive(draws[:1])
    assert (single.variance == 0).all() and (single.covariance() == 0).all()


def test_nonlinear_pushforward_runs_every_row(model_and_inputs):
    model, X = model_and_inputs
    theta = model.flatten() + 0.1 * torch.randn(4, model.n_params, dtype=torch.float64)
    predictive = nonlinear_pushforward(model, theta, X)
    torch.testing.assert_close(predictive.samples[2], model.single(theta[2], X))
