"""Linear and nonlinear pushforward of a weight posterior to the outputs."""

import numpy as np
import pytest
import torch

from sklearn_quinn._core import kronecker as kronecker_module
from sklearn_quinn._core.last_layer import LastLayerModel
from sklearn_quinn._core.network import FunctionalModel, build_mlp
from sklearn_quinn._core.posterior import GaussianPosterior
from sklearn_quinn._core.pushforward import (
    GaussianPredictive,
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


def _random_covariance(n, seed):
    factor = torch.randn(n, n, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    return factor @ factor.T / n + 0.1 * torch.eye(n, dtype=torch.float64)


@pytest.mark.parametrize("chunk_elements", [None, 30], ids=["whole", "a few rows at a time"])
@pytest.mark.parametrize("last_layer", [False, True], ids=["all weights", "last layer"])
def test_layered_output_covariance_is_j_sigma_jt(monkeypatch, chunk_elements, last_layer):
    # Two hidden layers and the linear skip: every pair of layers, a layer with itself folded, is exercised.
    torch.manual_seed(4)
    X = torch.randn(13, 3, dtype=torch.float64)
    model = FunctionalModel(build_mlp(3, 4, (5, 6), "relu", linear_skip=True).double())
    if last_layer:
        model = LastLayerModel(model, model.flatten(), X)
    theta = model.flatten()
    covariance = _random_covariance(model.n_params, 0)
    if chunk_elements is not None:
        monkeypatch.setattr(kronecker_module, "_CHUNK_ELEMENTS", chunk_elements)
    jac = model.jacobian(theta, X)
    expected = torch.einsum("nok,kl,npl->nop", jac, covariance, jac)
    torch.testing.assert_close(kronecker_module.layered_output_covariance(model, theta, covariance, X), expected)


@pytest.mark.parametrize("n_rows, layered", [(40, True), (4, False)])
def test_a_full_posterior_over_many_outputs_takes_the_layers_route_where_it_costs_less(n_rows, layered):
    # 46 weights and 6 outputs: the layers' route costs less from 13 rows on (N (O - 1) > 4/3 K).
    torch.manual_seed(5)
    model = FunctionalModel(build_mlp(3, 6, (4,), "tanh").double())
    X = torch.randn(n_rows, 3, dtype=torch.float64)
    precision = _random_covariance(model.n_params, 1)
    posterior = GaussianPosterior.from_precision_cholesky(model.flatten(), torch.linalg.cholesky(precision))
    predictive = linear_pushforward(model, posterior, X)
    assert (predictive._output_covariance is not None) == layered
    from_factor = predictive.factor @ predictive.factor.mT
    torch.testing.assert_close(predictive.output_covariance(), from_factor)
    torch.testing.assert_close(predictive.columns(slice(1, 4)).output_covariance(), from_factor[:, 1:4, 1:4])


class _TiedDecoder(torch.nn.Module):
    """A decoder that reuses the encoder's weights outside the encoder's call: its layers do not
    carry their weights' gradient, which only the call of the layered route finds out."""

    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Linear(6, 4)

    def forward(self, inputs):
        return torch.nn.functional.linear(torch.tanh(self.encoder(inputs)), self.encoder.weight.T)


def test_a_network_the_layers_route_refuses_takes_the_factor():
    torch.manual_seed(6)
    model = FunctionalModel(_TiedDecoder().double())
    X = torch.randn(40, 6, dtype=torch.float64)
    precision = _random_covariance(model.n_params, 2)
    posterior = GaussianPosterior.from_precision_cholesky(model.flatten(), torch.linalg.cholesky(precision))
    predictive = linear_pushforward(model, posterior, X)
    assert predictive._output_covariance is not None  # chosen by cost, refused when called
    with pytest.raises(kronecker_module.KroneckerUnsupportedError):
        kronecker_module.layered_output_covariance(model, model.flatten(), posterior.covariance, X)
    torch.testing.assert_close(predictive.output_covariance(), predictive.factor @ predictive.factor.mT)


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


def test_sampled_predictive_with_a_local_variance_is_the_gaussian_mixture():
    """Each draw spread by an independent N(0, v_o): the mixture's variance adds v, its
    covariance across points adds v on the diagonal, across outputs diag(v), and
    E[exp(c f)] gains the lognormal factor exp(c**2 v / 2); a column keeps its own v."""
    def lognormal(mean, variance):  # log E[exp(2 f)] for f ~ N(mean, variance)
        return 2.0 * mean + 2.0 * variance

    draws = torch.randn(50, 4, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    local = torch.tensor([0.3, 2.0], dtype=torch.float64)
    bare, spread = SampledPredictive(draws), SampledPredictive(draws, local_variance=local)
    torch.testing.assert_close(spread.mean, bare.mean)
    torch.testing.assert_close(spread.variance, bare.variance + local)
    torch.testing.assert_close(spread.covariance(), bare.covariance() + torch.diag_embed(local[:, None].expand(2, 4)))
    torch.testing.assert_close(spread.output_covariance(), bare.output_covariance() + torch.diag(local))
    torch.testing.assert_close(spread.expectation(lognormal), bare.expectation(lognormal) * torch.exp(2.0 * local))
    torch.testing.assert_close(bare.expectation(lognormal), torch.exp(2.0 * draws).mean(0))
    torch.testing.assert_close(spread.columns(slice(1, 2)).variance, bare.variance[:, 1:] + local[1:])


def test_a_diagonal_posterior_over_many_outputs_keeps_the_factor():
    """The layers' route reads the posterior's ``(K, K)`` covariance, which a full posterior holds in
    its factor; a diagonal one would have to form it (a dense matrix of every pair of weights) for
    what its factor gives in ``O(N O K)``: it keeps the factor where a full one would not."""
    torch.manual_seed(5)
    model = FunctionalModel(build_mlp(3, 6, (4,), "tanh").double())
    X = torch.randn(40, 3, dtype=torch.float64)  # the full posterior's layered case above
    std = torch.linspace(0.1, 0.5, model.n_params, dtype=torch.float64)
    predictive = linear_pushforward(model, GaussianPosterior.from_std(model.flatten(), std), X)
    assert predictive._output_covariance is None
    jac = model.jacobian(model.flatten(), X)
    torch.testing.assert_close(predictive.output_covariance(), torch.einsum("nok,k,npk->nop", jac, std**2, jac))


def test_gaussian_predictive_expectation_takes_the_log_moment_of_its_mean_and_variance():
    """``E[exp(2 f)]`` for ``f ~ N(m, v)`` is ``exp(2 m + 2 v)``: the log moment reads the variance
    ``B B^T``'s diagonal (not the std), per point and output."""
    mean = torch.tensor([[0.1, -0.4], [1.0, 0.3]], dtype=torch.float64)
    factor = torch.tensor([[[0.5, 0.2], [0.0, 1.5]], [[0.3, 0.3], [2.0, 0.1]]], dtype=torch.float64)
    predictive = GaussianPredictive(mean, factor)
    variance = torch.tensor([[0.29, 2.25], [0.18, 4.01]], dtype=torch.float64)  # rows of B squared and summed
    torch.testing.assert_close(predictive.variance, variance)
    expected = torch.exp(2.0 * mean + 2.0 * variance)
    torch.testing.assert_close(predictive.expectation(lambda m, v: 2.0 * m + 2.0 * v), expected)


def test_weighted_sampled_predictive_statistics_are_the_unbiased_weighted_ones():
    """SMC's particles carry unequal weights: the mean is the weighted average, and the variances
    and covariances the reliability-weighted unbiased estimates, numpy's ``cov(aweights=w)``
    (divided by ``1 - sum w^2`` for normalised weights), not the equal-weight ones."""
    rng = torch.Generator().manual_seed(3)
    draws = torch.randn(30, 4, 2, generator=rng, dtype=torch.float64)
    weights = torch.rand(30, generator=rng, dtype=torch.float64) ** 3
    weights = weights / weights.sum()
    predictive = SampledPredictive(draws, weights)
    flat = draws.reshape(30, -1).numpy()
    expected_mean = np.average(flat, axis=0, weights=weights.numpy())
    expected_cov = np.cov(flat.T, aweights=weights.numpy())  # (N O, N O), point-major
    np.testing.assert_allclose(predictive.mean.reshape(-1).numpy(), expected_mean, rtol=1e-12)
    np.testing.assert_allclose(predictive.variance.reshape(-1).numpy(), np.diag(expected_cov), rtol=1e-12)
    blocks = expected_cov.reshape(4, 2, 4, 2)
    np.testing.assert_allclose(predictive.covariance().numpy(), blocks.transpose(1, 3, 0, 2).diagonal(axis1=0, axis2=1)
                               .transpose(2, 0, 1), rtol=1e-12)
    np.testing.assert_allclose(predictive.output_covariance().numpy(), blocks.diagonal(axis1=0, axis2=2)
                               .transpose(2, 0, 1), rtol=1e-12)
    # Each particle's outputs are a log-moment's draw: E[exp(f)] is the weighted average of exp(f).
    np.testing.assert_allclose(predictive.expectation(lambda m, v: m + v / 2).reshape(-1).numpy(),
                               np.average(np.exp(flat), axis=0, weights=weights.numpy()), rtol=1e-12)


def test_a_local_variance_per_point_spreads_each_point_by_its_own():
    """A local variance ``(N, O)`` (one per point and output: a heteroscedastic noise) adds its own
    entry to each point's variance, to each output's covariance across points on the diagonal in
    the points' order, and to each point's covariance across outputs as ``diag(v_n)``."""
    draws = torch.randn(20, 3, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    local = torch.tensor([[0.1, 1.0], [0.2, 2.0], [0.4, 4.0]], dtype=torch.float64)
    bare, spread = SampledPredictive(draws), SampledPredictive(draws, local_variance=local)
    torch.testing.assert_close(spread.variance, bare.variance + local)
    torch.testing.assert_close(spread.covariance(), bare.covariance() + torch.stack([torch.diag(local[:, 0]),
                                                                                     torch.diag(local[:, 1])]))
    torch.testing.assert_close(spread.output_covariance(), bare.output_covariance() + torch.stack([
        torch.diag(row) for row in local]))


def test_nonlinear_pushforward_keeps_the_weights_and_the_local_variance(model_and_inputs):
    """The draws' weights and local variance reach the predictive: its mean is the weighted average
    of the rows' outputs and its variance the weighted one plus the local variance."""
    model, X = model_and_inputs
    theta = model.flatten() + 0.1 * torch.randn(3, model.n_params, generator=torch.Generator().manual_seed(2),
                                                dtype=torch.float64)
    weights = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    local = torch.tensor([0.3, 0.7], dtype=torch.float64)
    predictive = nonlinear_pushforward(model, theta, X, weights, local)
    outputs = torch.stack([model.single(row, X) for row in theta])
    mean = torch.einsum("s,sno->no", weights, outputs)
    scatter = torch.einsum("s,sno->no", weights, (outputs - mean).square()) / (1 - weights.square().sum())
    torch.testing.assert_close(predictive.mean, mean)
    torch.testing.assert_close(predictive.variance, scatter + local)


def test_nonlinear_pushforward_runs_every_row(model_and_inputs):
    model, X = model_and_inputs
    theta = model.flatten() + 0.1 * torch.randn(4, model.n_params, dtype=torch.float64)
    predictive = nonlinear_pushforward(model, theta, X)
    torch.testing.assert_close(predictive.samples[2], model.single(theta[2], X))
