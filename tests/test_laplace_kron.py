"""hessian_structure='kron': Kronecker-factored curvature (KFAC) per nn.Linear, diagonal elsewhere."""

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose
from torch import nn

from sklearn_quinn import LaplaceClassifier, LaplaceRegressor
from sklearn_quinn._core import curvature as curvature_module
from sklearn_quinn._core.curvature import curvature
from sklearn_quinn._core.evidence import ParameterGroups
from sklearn_quinn._core.kronecker import KroneckerEigenbasis, KroneckerLayer, kronecker_factors, kronecker_layers
from sklearn_quinn._core.likelihoods import CategoricalLikelihood, GaussianLikelihood
from sklearn_quinn._core.network import FunctionalModel, build_mlp
from sklearn_quinn._core.posterior import GaussianPosterior

from .exact import BayesianLinearRegression


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    X = rng.randn(60, 3)
    return X, X[:, 0] - X[:, 1] ** 2 + 0.1 * rng.randn(60)


@pytest.mark.parametrize("prior_precision", [2.0, "marglik"])
def test_on_a_single_linear_module_kron_is_the_full_laplace(data, prior_precision):
    # With a Gaussian likelihood the output factor of a single nn.Linear is the
    # constant noise precision: G (x) A is its exact curvature. With 'marglik' the
    # MAP learns one prior precision per tensor, which the input factor's columns carry.
    X, y = data
    common = dict(module=nn.Linear(3, 1), noise_std=0.3, prior_precision=prior_precision,
                  max_epochs=50, random_state=0)
    full = LaplaceRegressor(hessian_structure="full", **common).fit(X, y)
    kron = LaplaceRegressor(hessian_structure="kron", **common).fit(X, y)
    assert_allclose(kron.predict(X, return_std=True), full.predict(X, return_std=True), rtol=1e-10)
    assert kron.log_marginal_likelihood() == pytest.approx(full.log_marginal_likelihood(), rel=1e-10)
    assert kron.prior_precision_ == pytest.approx(full.prior_precision_, rel=1e-8)
    assert_allclose(kron.posterior_.covariance.numpy(), full.posterior_.covariance.numpy(), rtol=1e-8, atol=1e-14)


def test_two_targets_on_a_single_linear_module_kron_is_the_full_laplace(data):
    # Two outputs make G a 2 x 2 factor, so a Kronecker product in the wrong order would differ.
    X, y = data
    Y = np.column_stack([y, X[:, 2] + 0.5 * y])
    common = dict(module=nn.Linear(3, 2), noise_std=0.3, prior_precision=2.0, max_epochs=50, random_state=0)
    full = LaplaceRegressor(hessian_structure="full", **common).fit(X, Y)
    kron = LaplaceRegressor(hessian_structure="kron", **common).fit(X, Y)
    assert_allclose(kron.posterior_.covariance.numpy(), full.posterior_.covariance.numpy(), rtol=1e-8, atol=1e-14)
    assert_allclose(kron.predict(X, return_std=True), full.predict(X, return_std=True), rtol=1e-10)


@pytest.mark.parametrize("likelihood", ["gaussian", "categorical"])
def test_on_one_point_the_kronecker_product_is_the_ggn_block(likelihood):
    # With one point, each layer's GGN block is exactly B B^T (x) a a^T: the order of the
    # factors and the layout of [W b] in theta must match the full curvature entry for entry.
    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(4, 3, (5,)).double())
    theta, X = model.flatten(), torch.randn(1, 4, dtype=torch.float64)
    if likelihood == "gaussian":
        like, Y = GaussianLikelihood(torch.full((3,), 0.5)).double().frozen(3), torch.randn(1, 3, dtype=torch.float64)
    else:
        like, Y = CategoricalLikelihood(), torch.tensor([[2.0]], dtype=torch.float64)
    full = curvature(model, theta, X, Y, like, "ggn", "full")
    layers, factors, _ = kronecker_factors(model, theta, X, Y, like)
    for layer, (G, A) in zip(layers, factors):
        torch.testing.assert_close(torch.kron(G, A), full[layer.index][:, layer.index])


def test_on_a_single_linear_module_kron_is_bayesian_linear_regression(data, device):
    X, y = data
    noise_std, prior_std = 0.3, 0.7
    regressor = LaplaceRegressor(module=nn.Linear(3, 1), hessian_structure="kron", noise_std=noise_std,
                                 prior_std=prior_std, prior_precision=prior_std**-2, normalize_X=False,
                                 normalize_y=False, max_epochs=300, lr=0.05, random_state=0, device=device).fit(X, y)
    exact = BayesianLinearRegression(X, y, noise_std, prior_std)
    assert_allclose(regressor.posterior_.covariance.cpu().numpy(), exact.covariance, rtol=1e-10)
    X_test = np.random.RandomState(1).randn(10, 3)
    # The predictive std does not depend on where the MAP training stopped.
    assert_allclose(regressor.predict(X_test, return_std=True)[1], exact.predictive_std(X_test), rtol=1e-10)


def test_last_layer_kron_is_last_layer_full(data):
    common = dict(hidden_layer_sizes=(8,), subset_of_weights="last_layer", max_epochs=100, random_state=0)
    full = LaplaceRegressor(hessian_structure="full", **common).fit(*data)
    kron = LaplaceRegressor(hessian_structure="kron", **common).fit(*data)
    assert_allclose(kron.predict(data[0], return_std=True), full.predict(data[0], return_std=True), rtol=1e-9)
    assert kron.log_marginal_likelihood() == pytest.approx(full.log_marginal_likelihood(), rel=1e-9)


def hand_factors(model, theta, X, noise_std):
    """G and A of each layer of a one-hidden-layer ReLU MLP, from its weights and the package's Jacobian."""
    weights = model.unflatten(theta)
    hidden = torch.relu(X @ weights["0.weight"].T + weights["0.bias"])
    jacobian = model.jacobian(theta, X) / noise_std  # (N, 1, K), whitened
    factors = []
    for name, layer_input in (("0", X), ("2", hidden)):
        start, stop, _ = model._slices[f"{name}.bias"]
        output_gradients = jacobian[:, :, start:stop]  # a bias's Jacobian is the layer's output gradient
        augmented = torch.cat([layer_input, torch.ones(len(X), 1, dtype=X.dtype)], dim=1)
        factors.append((torch.einsum("noi,noj->ij", output_gradients, output_gradients) / len(X),
                        augmented.T @ augmented))
    return factors


def test_the_factors_of_an_mlp_are_the_expected_second_moments():
    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(3, 1, (5,)).double())
    theta, X = model.flatten(), torch.randn(40, 3, dtype=torch.float64)
    Y = torch.randn(40, 1, dtype=torch.float64)
    likelihood = GaussianLikelihood(torch.tensor(0.5)).double().frozen(1)
    layers, factors, rest = kronecker_factors(model, theta, X, Y, likelihood)
    assert [layer.name for layer in layers] == ["0", "2"] and len(rest) == 0
    for (G, A), (expected_G, expected_A) in zip(factors, hand_factors(model, theta, X, 0.5)):
        torch.testing.assert_close(G, expected_G)
        torch.testing.assert_close(A, expected_A)
    # Each layer's weights with the bias as a last column, row-major.
    assert layers[0].index.view(5, 4)[:, 3].tolist() == list(range(15, 20))
    assert layers[0].index.view(5, 4)[0, :3].tolist() == [0, 1, 2]


class ScaledLinear(nn.Module):
    """An nn.Linear times a learned scalar: a weight in no linear layer."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 1)
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, X):
        return self.scale * self.linear(X)


def test_a_weight_in_no_linear_layer_keeps_its_diagonal_curvature(data):
    X, y = data
    common = dict(module=ScaledLinear(), noise_std=0.3, prior_precision=1.0, max_epochs=50, random_state=0)
    regressor = LaplaceRegressor(hessian_structure="kron", **common).fit(X, y)
    diagonal = LaplaceRegressor(hessian_structure="diag", **common).fit(X, y)
    layers, rest = kronecker_layers(regressor._model)
    assert rest.tolist() == [0]  # 'scale' comes first in named_parameters()
    assert regressor.posterior_.variance[0] == pytest.approx(float(diagonal.posterior_.variance[0]), rel=1e-10)
    mean, std = regressor.predict(X, return_std=True)
    assert np.all(np.isfinite(std)) and np.all(std > 0)


def test_the_eigenbasis_posterior_is_one_gaussian():
    """Covariance, variances, projections and samples of B diag(std**2) B^T agree."""
    generator = torch.Generator().manual_seed(0)

    def spd(n):
        root = torch.randn(n, n, generator=generator, dtype=torch.float64)
        return root @ root.T + 0.1 * torch.eye(n, dtype=torch.float64)

    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(2, 2, (3,)).double())  # layers (3 x 3) and (2 x 4)
    layers, rest = kronecker_layers(model)
    factors = [(spd(layer.n_out), spd(layer.n_in)) for layer in layers]
    groups = ParameterGroups.of(model)  # one prior precision per parameter tensor
    root = groups.expand(torch.rand(len(groups), generator=generator, dtype=torch.float64) + 0.5)
    basis = KroneckerEigenbasis(layers, factors, rest, root[:0], model.n_params, root)
    # The curvature's eigenvalues are those of the whitened Kronecker product.
    for layer, (G, A) in zip(layers, factors):
        column_root = root[layer.index].view(layer.n_out, layer.n_in)[0]
        whitened = torch.kron(G, A / column_root[:, None] / column_root[None, :])
        torch.testing.assert_close(basis.eigenvalues[layer.index].sort().values, torch.linalg.eigvalsh(whitened))
    std = torch.rand(model.n_params, generator=generator, dtype=torch.float64) + 0.1
    posterior = GaussianPosterior.from_basis(model.flatten(), basis, std)
    covariance = posterior.covariance
    dense = basis.apply(torch.eye(model.n_params, dtype=torch.float64)).T  # B, column by column
    torch.testing.assert_close(covariance, dense @ torch.diag(std**2) @ dense.T)
    torch.testing.assert_close(basis.transpose_apply(torch.eye(model.n_params, dtype=torch.float64)), dense)
    torch.testing.assert_close(posterior.variance, covariance.diagonal())
    jacobian = torch.randn(5, model.n_params, generator=generator, dtype=torch.float64)
    factor = posterior.project(jacobian)
    torch.testing.assert_close(factor @ factor.T, jacobian @ covariance @ jacobian.T)
    draws = posterior.sample(40_000, generator)
    # Sample covariance of 40,000 draws: standard error about sqrt(2 / 40000) of the scale, 5 of them allowed.
    scale = covariance.diagonal().sqrt()
    error = (torch.cov(draws.T) - covariance) / torch.outer(scale, scale)
    assert float(error.abs().max()) < 5 * (2 / 40_000) ** 0.5


def test_the_eigenbasis_with_weights_in_no_layer_diagonalises_the_dense_curvature():
    """A layer ``(2 x 3)`` at positions 0..5 and two weights in no layer, under a prior root constant
    within each input column: ``B = P^(-1/2) Q`` must turn the dense curvature (``G (x) A`` on the
    layer, the diagonal elsewhere) into ``diag(eigenvalues)``, ``B^T C B``, exactly; ``squared_apply``
    is the diagonal of ``B diag(v) B^T``; and ``leverage`` of the whitened Jacobian rows ``W``
    (``b a~^T`` per row, flattened row-major, zero on the rest) is ``diag(W B diag(r) B^T W^T)``."""
    generator = torch.Generator().manual_seed(1)

    def spd(n):
        root = torch.randn(n, n, generator=generator, dtype=torch.float64)
        return root @ root.T + 0.1 * torch.eye(n, dtype=torch.float64)

    layer = KroneckerLayer("", torch.arange(6), 2, 3)
    rest = torch.tensor([6, 7])
    G, A = spd(2), spd(3)
    rest_curvature = torch.tensor([2.5, 0.4], dtype=torch.float64)
    root = torch.tensor([1.5, 0.7, 2.0, 1.5, 0.7, 2.0, 0.5, 3.0], dtype=torch.float64)
    basis = KroneckerEigenbasis([layer], [(G, A)], rest, rest_curvature, 8, root)
    curvature = torch.zeros(8, 8, dtype=torch.float64)
    curvature[:6, :6] = torch.kron(G, A)
    curvature[6, 6], curvature[7, 7] = rest_curvature
    dense = basis.apply(torch.eye(8, dtype=torch.float64)).T  # B, column by column
    torch.testing.assert_close(dense.T @ curvature @ dense, torch.diag(basis.eigenvalues))
    torch.testing.assert_close(dense @ dense.T, torch.diag(root**-2))
    values = torch.rand(8, generator=generator, dtype=torch.float64) + 0.1
    torch.testing.assert_close(basis.squared_apply(values), (dense @ torch.diag(values) @ dense.T).diagonal())
    inputs = torch.randn(4, 3, generator=generator, dtype=torch.float64)
    gradients = torch.randn(2, 4, 2, generator=generator, dtype=torch.float64)
    rows = torch.zeros(2, 4, 8, dtype=torch.float64)
    rows[..., :6] = (gradients[..., :, None] * inputs[:, None, :]).flatten(-2)
    expected = ((rows @ dense).square() * values).sum(-1)
    torch.testing.assert_close(basis.leverage([inputs], [gradients], values), expected)


def test_the_classifier_takes_kron(data):
    X, y = data
    labels = np.digitize(y, [-1.0, 0.0])
    classifier = LaplaceClassifier(hidden_layer_sizes=(8,), hessian_structure="kron", cov_scale=1.0, max_epochs=50,
                                   random_state=0).fit(X, labels)
    proba = classifier.predict_proba(X)
    assert proba.shape == (60, 3) and np.allclose(proba.sum(1), 1)
    assert classifier.hessian_structure_ == "kron"


@pytest.mark.parametrize("structure", ["kron", "lowrank"])
def test_factored_structures_refuse_the_hessian_before_training(data, structure, monkeypatch):
    """Both factor the GGN's or the Fisher's outer products, which the Hessian has not: refused
    at the start of fit (it was after the whole MAP training), before anything of an earlier
    fit goes (its posterior was gone)."""

    def trained(*args, **kwargs):
        raise AssertionError("the MAP trained first")

    fitted = LaplaceRegressor(hidden_layer_sizes=(4,), max_epochs=5).fit(*data)
    std = fitted.predict(data[0], return_std=True)[1]
    monkeypatch.setattr(LaplaceRegressor, "_fit_map", trained)
    with pytest.raises(ValueError, match=f"{structure}.*not curvature='hessian'"):
        fitted.set_params(hessian_structure=structure, curvature="hessian").fit(*data)
    np.testing.assert_array_equal(fitted.predict(data[0], return_std=True)[1], std)  # the earlier fit, whole


class TwiceApplied(nn.Module):
    """One nn.Linear applied twice: no Kronecker factorisation of its block."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 3)
        self.unused = nn.Linear(3, 3)
        self.out = nn.Linear(3, 1)

    def forward(self, X):
        return self.out(torch.tanh(self.linear(torch.tanh(self.linear(X)))))


def test_a_module_kron_cannot_factor_is_refused_or_falls_back_to_the_diagonal(data, monkeypatch):
    X, y = data
    common = dict(module=TwiceApplied(), max_epochs=5, random_state=0)
    with pytest.raises(ValueError, match="applied once"):
        LaplaceRegressor(hessian_structure="kron", **common).fit(X, y)
    monkeypatch.setattr(curvature_module, "AUTO_MAX_FULL_PARAMS", 10)  # so that 'auto' tries kron
    regressor = LaplaceRegressor(**common).fit(X, y)
    assert regressor.hessian_structure_ == "diag"
    assert "applied once" in regressor.hessian_structure_reason_


def test_a_layer_the_forward_pass_never_calls_has_zero_curvature(data):
    # Without the repeated layer, TwiceApplied's 'unused' layer is the only oddity.
    class WithUnused(TwiceApplied):
        def forward(self, X):
            return self.out(torch.tanh(self.linear(X)))

    regressor = LaplaceRegressor(module=WithUnused(), hessian_structure="kron", prior_precision=4.0,
                                 max_epochs=5, random_state=0).fit(*data)
    unused = kronecker_layers(regressor._model)[0][1]
    assert unused.name == "unused"
    # Its weights keep the prior's variance, 1 / 4.
    assert_allclose(regressor.posterior_.variance[unused.index].numpy(), 0.25, rtol=1e-10)


def test_auto_with_the_exact_hessian_never_takes_kron(data, monkeypatch):
    monkeypatch.setattr(curvature_module, "AUTO_MAX_FULL_PARAMS", 10)
    regressor = LaplaceRegressor(hidden_layer_sizes=(4,), curvature="hessian", max_epochs=5,
                                 random_state=0).fit(*data)
    assert regressor.hessian_structure_ == "diag"
