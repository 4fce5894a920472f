"""Curvature of the negative log-likelihood, and products with it, against autograd and the assembled matrices."""

import math

import pytest
import torch
from torch.func import grad, hessian

from sklearn_quinn._core import curvature as curvature_module
from sklearn_quinn._core import kronecker as kronecker_module
from sklearn_quinn._core.curvature import (
    check_full_fits,
    curvature,
    curvature_matmul,
    curvature_operator,
    largest_ggn_eigenvalue,
)
from sklearn_quinn._core.last_layer import LastLayerModel
from sklearn_quinn._core.likelihoods import CategoricalLikelihood, GaussianLikelihood, HeteroscedasticGaussianLikelihood
from sklearn_quinn._core.network import FunctionalModel, build_mlp


@pytest.fixture
def problem():
    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(2, 2, (5,), "tanh").double())
    X = torch.randn(9, 2, dtype=torch.float64)
    Y = torch.randn(9, 2, dtype=torch.float64)
    noise = torch.tensor([0.5, 2.0], dtype=torch.float64)
    return model, model.flatten(), X, Y, noise


def gaussian(noise):
    return GaussianLikelihood(noise)


def _loss(model, X, Y, noise):
    return lambda theta: 0.5 * ((model.single(theta, X) - Y) / noise).square().sum()


def test_hessian_is_autograd_hessian(problem):
    model, theta, X, Y, noise = problem
    expected = hessian(_loss(model, X, Y, noise))(theta)
    torch.testing.assert_close(curvature(model, theta, X, Y, gaussian(noise), "hessian", "full"), expected)


def test_ggn_is_weighted_jacobian_product(problem):
    model, theta, X, Y, noise = problem
    jac = model.jacobian(theta, X)
    expected = torch.einsum("nok,o,nol->kl", jac, noise**-2, jac)
    torch.testing.assert_close(curvature(model, theta, X, Y, gaussian(noise), "ggn", "full"), expected)


def test_empirical_fisher_is_sum_of_gradient_outer_products(problem):
    model, theta, X, Y, noise = problem
    gradients = torch.stack(
        [grad(_loss(model, X[i : i + 1], Y[i : i + 1], noise))(theta) for i in range(len(X))]
    )
    torch.testing.assert_close(curvature(model, theta, X, Y, gaussian(noise), "ef", "full"), gradients.T @ gradients)


@pytest.mark.parametrize("kind", ["ggn", "hessian", "ef"])
def test_diagonal_is_diagonal_of_full(problem, kind):
    model, theta, X, Y, noise = problem
    full = curvature(model, theta, X, Y, gaussian(noise), kind, "full")
    torch.testing.assert_close(curvature(model, theta, X, Y, gaussian(noise), kind, "diag"), full.diagonal())


@pytest.mark.parametrize("kind", ["ggn", "hessian", "ef"])
def test_chunking_does_not_change_the_result(problem, monkeypatch, kind):
    model, theta, X, Y, noise = problem
    whole = curvature(model, theta, X, Y, gaussian(noise), kind, "full")
    monkeypatch.setattr(curvature_module, "_CHUNK_BYTES", 1)  # one row (or column) at a time
    torch.testing.assert_close(curvature(model, theta, X, Y, gaussian(noise), kind, "full"), whole)


def _jacobian_route(model, theta, X, Y, likelihood, kind):
    """The full curvature from the per-example Jacobians (or gradients), never through the layers."""
    return curvature_module.jacobian_curvature(model, theta, X, Y, likelihood, kind, "full")


@pytest.mark.parametrize("chunk_elements", [None, 7], ids=["whole", "a few elements at a time"])
@pytest.mark.parametrize("kind", ["ggn", "ef"])
@pytest.mark.parametrize("name", ["gaussian", "heteroscedastic", "categorical"])
def test_layered_curvature_is_the_jacobians_for_a_skip_network(monkeypatch, name, kind, chunk_elements):
    # Three outputs (softmax classes), two hidden layers and the linear skip: every cross-layer block is exercised.
    torch.manual_seed(1)
    model = FunctionalModel(build_mlp(3, 3, (4, 5), "relu", linear_skip=True).double())
    theta = model.flatten()
    X, Y = torch.randn(11, 3, dtype=torch.float64), torch.randn(11, 3, dtype=torch.float64)
    likelihood, targets = _likelihood_and_targets(name, torch.tensor([0.5, 2.0, 1.0], dtype=torch.float64), Y)
    if name == "categorical":
        targets = torch.randint(0, 3, (11, 1)).double()
    if name == "heteroscedastic":
        model = FunctionalModel(build_mlp(3, 2, (4, 5), "relu", linear_skip=True).double())
        theta = model.flatten()
    if chunk_elements is not None:
        monkeypatch.setattr(kronecker_module, "_CHUNK_ELEMENTS", chunk_elements)
    expected = _jacobian_route(model, theta, X, targets, likelihood, kind)
    torch.testing.assert_close(kronecker_module.layered_curvature(model, theta, X, targets, likelihood, kind), expected)
    if kind == "ggn":  # the route curvature() takes for several outputs
        torch.testing.assert_close(curvature(model, theta, X, targets, likelihood, kind, "full"), expected)


@pytest.mark.parametrize("kind", ["ggn", "ef"])
def test_layered_curvature_of_a_last_layer_beside_a_skip_path(kind):
    # The skip path's outputs are the last-layer model's offset, which a softmax's GGN and the EF read.
    torch.manual_seed(2)
    X = torch.randn(8, 3, dtype=torch.float64)
    targets = torch.randint(0, 3, (8, 1)).double()
    full = FunctionalModel(build_mlp(3, 3, (4,), "tanh", linear_skip=True).double())
    last = LastLayerModel(full, full.flatten(), X)
    likelihood = CategoricalLikelihood()
    torch.testing.assert_close(kronecker_module.layered_curvature(last, last.flatten(), X, targets, likelihood, kind),
                               _jacobian_route(last, last.flatten(), X, targets, likelihood, kind))


def test_layered_curvature_sums_every_sub_chunk_of_a_wide_layer(monkeypatch):
    # 6 inputs: a pair of first-layer blocks holds 36 + 16 elements per row, so 60 elements give one row per sub-chunk.
    torch.manual_seed(3)
    model = FunctionalModel(build_mlp(6, 2, (4,), "tanh").double())
    X, Y = torch.randn(9, 6, dtype=torch.float64), torch.randn(9, 2, dtype=torch.float64)
    likelihood = gaussian(torch.tensor([0.5, 2.0], dtype=torch.float64))
    monkeypatch.setattr(kronecker_module, "_CHUNK_ELEMENTS", 60)
    torch.testing.assert_close(kronecker_module.layered_curvature(model, model.flatten(), X, Y, likelihood),
                               _jacobian_route(model, model.flatten(), X, Y, likelihood, "ggn"))


@pytest.mark.parametrize("n_inputs", [3, 1000])
def test_one_output_direction_never_takes_the_layers_route(n_inputs):
    """The layers' route saves the Jacobians' product over output directions: with one, there is nothing to
    save; with ten classes on a few inputs, most of the product."""
    model = FunctionalModel(build_mlp(n_inputs, 1, (4,), "tanh"))
    assert not kronecker_module.layered_is_cheaper(model, 1)
    assert kronecker_module.layered_is_cheaper(FunctionalModel(build_mlp(n_inputs, 10, (50,), "relu")), 10)


class _TiedDecoder(torch.nn.Module):
    """A decoder that reuses the encoder's weights outside the encoder's call."""

    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Linear(3, 4)

    def forward(self, inputs):
        return torch.nn.functional.linear(torch.tanh(self.encoder(inputs)), self.encoder.weight.T)


class _DoubledLinear(torch.nn.Linear):
    """An nn.Linear whose forward is not ``W a + b``."""

    def forward(self, inputs):
        return torch.nn.functional.linear(inputs, 2 * self.weight, self.bias)


class _SharedLinear(torch.nn.Module):
    """Two nn.Linear modules holding one weight tensor."""

    def __init__(self):
        super().__init__()
        self.first, self.second = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)
        self.second.weight = self.first.weight

    def forward(self, inputs):
        return self.second(torch.tanh(self.first(inputs)))


@pytest.mark.parametrize("module", [_TiedDecoder, lambda: _DoubledLinear(3, 3), _SharedLinear],
                         ids=["tied decoder", "own forward", "shared weight"])
def test_layers_that_do_not_carry_their_weights_gradient_take_the_jacobians(module):
    torch.manual_seed(4)
    model = FunctionalModel(module().double())
    X = torch.randn(8, 3, dtype=torch.float64)
    Y = torch.randn(8, model.single(model.flatten(), X[:1]).shape[-1], dtype=torch.float64)
    likelihood = gaussian(torch.ones(Y.shape[1], dtype=torch.float64))
    with pytest.raises(kronecker_module.KroneckerUnsupportedError):
        kronecker_module.layered_curvature(model, model.flatten(), X, Y, likelihood)
    torch.testing.assert_close(curvature(model, model.flatten(), X, Y, likelihood, "ggn", "full"),
                               _jacobian_route(model, model.flatten(), X, Y, likelihood, "ggn"))


def test_layered_curvature_of_a_weight_outside_any_layer():
    torch.manual_seed(2)
    X, Y = torch.randn(8, 3, dtype=torch.float64), torch.randn(8, 2, dtype=torch.float64)
    likelihood = gaussian(torch.tensor([0.5, 2.0], dtype=torch.float64))

    class Scaled(torch.nn.Module):  # a weight in no nn.Linear: the Jacobians serve
        def __init__(self):
            super().__init__()
            self.layer, self.scale = torch.nn.Linear(3, 2), torch.nn.Parameter(torch.tensor([1.5]))

        def forward(self, inputs):
            return self.scale * torch.tanh(self.layer(inputs))

    scaled = FunctionalModel(Scaled().double())
    with pytest.raises(kronecker_module.KroneckerUnsupportedError, match="every weight"):
        kronecker_module.layered_curvature(scaled, scaled.flatten(), X, Y, likelihood)
    torch.testing.assert_close(curvature(scaled, scaled.flatten(), X, Y, likelihood, "ggn", "full"),
                               _jacobian_route(scaled, scaled.flatten(), X, Y, likelihood, "ggn"))


def test_full_structure_over_budget_is_refused_before_allocation(monkeypatch):
    monkeypatch.setattr(curvature_module, "MAX_FULL_MATRIX_BYTES", 1024**2)
    with pytest.raises(ValueError, match=r"1000 x 1000 matrix \(0\.01 GiB.*hessian_structure='kron', 'diag'"):
        check_full_fits(1000, torch.float64)
    check_full_fits(300, torch.float64)


def test_unknown_kind_or_structure(problem):
    model, theta, X, Y, noise = problem
    with pytest.raises(ValueError, match="kind"):
        curvature(model, theta, X, Y, gaussian(noise), "fisher", "full")
    with pytest.raises(ValueError, match="structure"):
        curvature(model, theta, X, Y, gaussian(noise), "ggn", "kron")


def _likelihood_and_targets(name, noise, Y):
    """Each likelihood's GGN weighting of the outputs: fixed noise, a noise head, a softmax."""
    if name == "gaussian":
        return gaussian(noise), Y
    if name == "heteroscedastic":
        return HeteroscedasticGaussianLikelihood(), Y[:, :1]
    return CategoricalLikelihood(), (Y[:, :1] > 0).double()


@pytest.mark.parametrize("chunk_bytes", [None, 1], ids=["whole", "a row and a vector at a time"])
@pytest.mark.parametrize("name", ["gaussian", "heteroscedastic", "categorical"])
def test_ggn_products_and_largest_eigenvalue_are_the_assembled_ggn_s(problem, monkeypatch, name, chunk_bytes):
    """Jacobian-free products ``G V`` (the targets unread) equal the assembled
    GGN's, whole or in chunks of rows and blocks of vectors, and so do an
    eigensolver's (through the whitened Jacobian, formed once where it fits one
    chunk, otherwise the same Jacobian-free products), and the subspace
    iteration finds its largest eigenvalue, for every likelihood's weighting of
    the outputs (a two-output network read as two means, as a mean and a log
    std, or as two logits). The heteroscedastic case puts some log stds past
    the clip, where the whitening's slope is 0."""
    model, theta, X, Y, noise = problem
    likelihood, targets = _likelihood_and_targets(name, noise, Y)
    if name == "heteroscedastic":
        log_std_bias = model._slices["2.bias"][0] + 1  # the output layer's second bias: the log std head
        theta = theta.clone()
        theta[log_std_bias] += 10.0 - model.single(theta, X)[:, 1].median()  # half the rows past the clip at 10
        log_std = model.single(theta, X)[:, 1]
        assert (log_std > 10.0).any() and (log_std < 10.0).any()
    full = curvature(model, theta, X, targets, likelihood, "ggn", "full")
    if chunk_bytes is not None:
        monkeypatch.setattr(curvature_module, "_CHUNK_BYTES", chunk_bytes)
    vectors = torch.randn(3, theta.shape[0], dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(curvature_matmul(model, theta, X, None, likelihood, "ggn", vectors.T), full @ vectors.T)
    operator = curvature_operator(model, theta, X, None, likelihood, "ggn")
    torch.testing.assert_close(operator(vectors.T), full @ vectors.T)
    largest = largest_ggn_eigenvalue(model, theta, X, likelihood)
    assert largest == pytest.approx(float(torch.linalg.eigvalsh(full)[-1]), rel=1e-5)


def test_largest_eigenvalue_of_a_zero_ggn_is_zero(problem):
    """Outputs of infinite noise carry no curvature: the GGN is zero, and so is
    its largest eigenvalue (the QR of a zero block gives no NaN)."""
    model, theta, X, Y, _ = problem
    assert largest_ggn_eigenvalue(model, theta, X, gaussian(torch.tensor([math.inf, math.inf]))) == 0.0


def test_the_largest_ggn_eigenvalue_converges_relative_to_its_scale():
    """The subspace iteration's tolerance is relative: a GGN of a large noise (eigenvalues near
    2e-7) converges to its largest eigenvalue as tightly as one of unit noise (an absolute
    tolerance stopped it after one iteration, at a quarter of it)."""
    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(2, 2, (5,), "tanh").double())
    X = torch.randn(9, 2, dtype=torch.float64)
    likelihood = GaussianLikelihood(torch.tensor([1e4, 1e4], dtype=torch.float64))
    theta = model.flatten()
    full = curvature(model, theta, X, None, likelihood, "ggn", "full")
    largest = largest_ggn_eigenvalue(model, theta, X, likelihood)
    assert largest == pytest.approx(float(torch.linalg.eigvalsh(full)[-1]), rel=1e-5)
