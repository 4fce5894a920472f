"""The Laplace evidence over per-group prior precisions and the noise, and its online maximisation.

A single ``nn.Linear`` with Gaussian noise is a linear-Gaussian model: with a
precision per input column ``delta_w`` (its groups) its evidence is
``N(y | 0, noise**2 I + X diag(delta_w)^-1 X^T + 1 1^T / delta_b)`` in closed
form, the Laplace evidence at the MAP equals it, and the learned prior
precisions and noise must be its maximisers.
"""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy.optimize import brentq, minimize, minimize_scalar
from scipy.special import softmax
from scipy.stats import multivariate_normal, norm
from sklearn.base import is_classifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import log_loss
from torch import nn

import sklearn_quinn
from sklearn_quinn import LaplaceRegressor
from sklearn_quinn._core import evidence as evidence_module
from sklearn_quinn._core.curvature import curvature
from sklearn_quinn._core.evidence import (
    ColumnHyperprior,
    LaplaceEvidence,
    ParameterGroups,
    bias_alone_covariance,
    output_bias_maximiser,
)
from sklearn_quinn._core.kernel_grams import KernelGrams
from sklearn_quinn._core.kronecker import kronecker_factors
from sklearn_quinn._core.likelihoods import (
    CategoricalLikelihood,
    GaussianLikelihood,
    HeteroscedasticGaussianLikelihood,
)
from sklearn_quinn._core.network import FunctionalModel, build_mlp
from sklearn_quinn._map import EvidenceMaximisation

from .exact import column_log_hyperprior

ALL_ESTIMATORS = [getattr(sklearn_quinn, name) for name in sklearn_quinn.__all__
                  if name.endswith(("Regressor", "Classifier"))]


def linear_data(n_rows, n_features=3, noise=0.5, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n_rows, n_features)
    y = X @ rng.randn(n_features) + 0.7 + noise * rng.randn(n_rows)
    return X, y


#: A precision per input column of ``linear_data``'s 3, and the bias's.
DELTA_W, DELTA_B = np.array([2.0, 0.5, 4.0]), 0.3


def exact_log_evidence(X, y, weight_precision, bias_precision, noise_std):
    """``weight_precision``: one for every column, or one per column."""
    covariance = noise_std**2 * np.eye(len(y)) + (X / weight_precision) @ X.T + 1.0 / bias_precision
    return multivariate_normal(np.zeros(len(y)), covariance).logpdf(y)


def exact_map(X, y, weight_precision, bias_precision, noise_std):
    """MAP ``(weights, bias)`` of the linear model, in ``nn.Linear``'s parameter order."""
    design = np.hstack([X, np.ones((len(X), 1))])
    prior = np.append(np.broadcast_to(weight_precision, X.shape[1]), bias_precision)
    precision = design.T @ design / noise_std**2 + np.diag(prior)
    return np.linalg.solve(precision, design.T @ y / noise_std**2)


def linear_evidence(X, y, noise_std, theta=None):
    model = FunctionalModel(nn.Linear(X.shape[1], 1).double())
    theta = model.flatten() if theta is None else torch.as_tensor(theta)
    likelihood = GaussianLikelihood(torch.tensor([noise_std], dtype=torch.float64))
    return LaplaceEvidence(
        model, theta, torch.as_tensor(X), torch.as_tensor(y[:, None]), likelihood, ParameterGroups.of(model)
    )


def test_the_covariance_block_is_the_exact_posterior_covariance_of_a_linear_model():
    """After the evidence's value at a prior, the full structure's factor gives the posterior
    covariance of any weights: for a linear model, the inverse of ``X^T X / s^2 + diag(delta)``'s
    block; the kernel structure gives none."""
    X, y = linear_data(40)
    evidence = linear_evidence(X, y, 0.5)
    assert evidence.structure == "full" and evidence.covariance_block(torch.tensor([3])) is None
    precision = np.append(DELTA_W, DELTA_B)
    evidence.log_evidence(precision)
    design = np.hstack([X, np.ones((len(X), 1))])
    covariance = np.linalg.inv(design.T @ design / 0.25 + np.diag(precision))
    np.testing.assert_allclose(evidence.covariance_block(torch.tensor([3, 0])).numpy(),
                               covariance[np.ix_([3, 0], [3, 0])], rtol=1e-10)
    evidence.well_determined(precision)  # takes the inverse too: the kept factor goes first
    assert evidence.covariance_block(torch.tensor([3])) is None
    X, y = linear_data(3)
    evidence = linear_evidence(X, y, 0.5)
    evidence.log_evidence(precision)
    assert evidence.structure == "kernel" and evidence.covariance_block(torch.tensor([3])) is None


@pytest.mark.parametrize("n_rows, structure", [(3, "kernel"), (40, "full"), (40, "kron")])
def test_laplace_evidence_at_the_map_is_exact_for_a_linear_model(n_rows, structure, monkeypatch):
    """Every exact structure, and the Kronecker factors, which are exact for a
    single layer under a Gaussian likelihood."""
    if structure == "kron":
        force_structure(monkeypatch, structure)
    X, y = linear_data(n_rows)
    noise = 0.6
    evidence = linear_evidence(X, y, noise, exact_map(X, y, DELTA_W, DELTA_B, noise))
    assert evidence.structure == structure
    value = evidence.log_evidence(np.append(DELTA_W, DELTA_B))
    assert value == pytest.approx(exact_log_evidence(X, y, DELTA_W, DELTA_B, noise), abs=1e-8)


@pytest.mark.parametrize("n_rows, structure", [(3, "kernel"), (40, "full"), (40, "kron"), (40, "diag")])
def test_leverages_are_the_hat_matrix_diagonal(n_rows, structure, monkeypatch):
    """``h_n = d_n^T (D^T D / s**2 + Lambda)^-1 d_n / s**2`` for the design rows ``d_n = [x_n, 1]``;
    they sum to the well-determined weights. The Kronecker factors are exact for a single layer
    under a Gaussian likelihood, so theirs are too; the diagonal gives none. At ``noise_scale``
    ``c``, those of the noise ``c s``."""
    if structure in ("kron", "diag"):
        force_structure(monkeypatch, structure)
    X, y = linear_data(n_rows)
    noise = 0.6
    evidence = linear_evidence(X, y, noise, exact_map(X, y, DELTA_W, DELTA_B, noise))
    assert evidence.structure == structure
    for noise_scale in (1.0, 1.7):
        leverage = evidence.leverage(np.append(DELTA_W, DELTA_B), noise_scale)
        if structure == "diag":
            assert leverage is None
            return
        design = np.hstack([X, np.ones((n_rows, 1))])
        scaled = noise_scale * noise
        covariance = np.linalg.inv(design.T @ design / scaled**2 + np.diag(np.append(DELTA_W, DELTA_B)))
        expected = np.einsum("nk,kl,nl->n", design, covariance, design) / scaled**2
        np.testing.assert_allclose(leverage[:, 0].numpy(), expected, rtol=1e-10)
        well_determined = evidence.well_determined(np.append(DELTA_W, DELTA_B), noise_scale)
        assert float(leverage.sum()) == pytest.approx(float(well_determined.sum()), rel=1e-10)


@pytest.mark.parametrize("n_rows, structure", [(5, "kernel"), (40, "full")])
def test_heteroscedastic_leverages_are_the_whitened_outputs_posterior_variances(n_rows, structure):
    """Two targets under the heteroscedastic likelihood, four outputs a row in the network's
    order (the means, then the log stds): ``diag(W Sigma W^T)``, ``Sigma = (W^T W + diag(delta))^-1``."""
    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(3, 4, (6,), "tanh").double())
    groups = ParameterGroups.of(model)
    X, Y = torch.randn(n_rows, 3, dtype=torch.float64), torch.randn(n_rows, 2, dtype=torch.float64)
    theta, likelihood = model.flatten(), HeteroscedasticGaussianLikelihood()
    precision = torch.tensor([0.5, 0.8, 1.2, 2.0, 1.5, 3.0], dtype=torch.float64)  # 3 input columns apart
    evidence = LaplaceEvidence(model, theta, X, Y, likelihood, groups)
    assert evidence.structure == structure
    whitened = likelihood.whitened_jacobian(model.jacobian(theta, X), model.single(theta, X)).reshape(-1, len(theta))
    covariance = torch.linalg.inv(whitened.T @ whitened + torch.diag(groups.expand(precision)))
    expected = torch.einsum("mk,kl,ml->m", whitened, covariance, whitened).reshape(n_rows, 4)
    torch.testing.assert_close(evidence.leverage(precision), expected, rtol=1e-9, atol=1e-12)


def test_kronecker_leverages_are_each_rows_variance_under_the_factored_posterior(monkeypatch):
    """Under the Kronecker factors, not exact for two layers and the heteroscedastic likelihood,
    a row's leverage is still its whitened Jacobian's variance under the factored posterior
    ``B diag(r) B^T``: computed from the layers' two factors per row, it must equal the dense
    ``diag(W B diag(r) B^T W^T)`` over the rows' whole Jacobians."""
    force_structure(monkeypatch, "kron")
    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(3, 4, (6,), "tanh").double())
    groups = ParameterGroups.of(model)
    X, Y = torch.randn(40, 3, dtype=torch.float64), torch.randn(40, 2, dtype=torch.float64)
    theta, likelihood = model.flatten(), HeteroscedasticGaussianLikelihood()
    precision = torch.tensor([0.5, 0.8, 1.2, 2.0, 1.5, 3.0], dtype=torch.float64)  # 3 input columns apart
    evidence = LaplaceEvidence(model, theta, X, Y, likelihood, groups)
    assert evidence.structure == "kron"
    basis = evidence._kronecker.eigenbasis(groups.expand(precision).sqrt())
    ratio = 1.0 / (1.0 + basis.eigenvalues.clamp(min=0.0))
    whitened = likelihood.whitened_jacobian(model.jacobian(theta, X), model.single(theta, X))
    expected = (basis.transpose_apply(whitened).square() * ratio).sum(-1)
    torch.testing.assert_close(evidence.leverage(precision), expected, rtol=1e-9, atol=1e-12)


def tensor_name(group):
    """The parameter tensor of a group's name (``'0.weight[:, 2]'``: ``'0.weight'``)."""
    return group.partition("[")[0]


def force_structure(monkeypatch, structure):
    """Make ``LaplaceEvidence`` take its log determinant the ``structure`` way
    ('kron' or 'diag': the ways of a network too large for the exact ones)."""
    monkeypatch.setattr(evidence_module, "_MAX_KERNEL_ROWS", 0)
    monkeypatch.setattr(evidence_module, "_MAX_FULL_PARAMS", 0)
    if structure == "diag":
        monkeypatch.setattr(evidence_module, "_kronecker_curvature", lambda *args: None)


class ScaledSkipNetwork(nn.Module):
    """A tanh layer with biases, an output layer, a bias-free linear skip path,
    and per-output scales that are in no ``nn.Linear`` (the Kronecker
    structure's diagonal 'rest'); one layer is never called."""

    def __init__(self):
        super().__init__()
        self.mlp = build_mlp(3, 2, (4,), "tanh", linear_skip=True)
        self.unused = nn.Linear(3, 2)
        self.scale = nn.Parameter(torch.tensor([1.3, 0.7]))

    def forward(self, X):
        return self.mlp(X) * self.scale


def test_kronecker_log_det_and_well_determined_weights_match_the_dense_matrix(monkeypatch):
    """The Kronecker structure's log determinant and gamma_g equal those of the
    dense ``K x K`` matrix assembled from the same factors (each layer's block
    ``G (x) A`` at its weights' positions, the diagonal curvature elsewhere)
    plus ``diag(delta)``, for every kind of group: weights and biases of a
    layer, a layer without biases, weights in no layer, a layer never called."""
    force_structure(monkeypatch, "kron")
    rng = np.random.RandomState(0)
    X = torch.as_tensor(rng.randn(30, 3))
    Y = torch.as_tensor(rng.randn(30, 2))
    torch.manual_seed(0)
    model = FunctionalModel(ScaledSkipNetwork().double())
    theta, groups = model.flatten(), ParameterGroups.of(model)
    likelihood = GaussianLikelihood(torch.tensor([0.8, 1.1], dtype=torch.float64))
    evidence = LaplaceEvidence(model, theta, X, Y, likelihood, groups)
    assert evidence.structure == "kron"
    layers, factors, rest = kronecker_factors(model, theta, X, Y, likelihood)
    curvature_matrix = torch.diag(torch.zeros(model.n_params, dtype=torch.float64).index_put(
        (rest,), curvature(model, theta, X, Y, likelihood, "ggn", "diag")[rest]))
    for layer, (output_factor, input_factor) in zip(layers, factors):
        curvature_matrix[layer.index[:, None], layer.index[None, :]] = torch.kron(output_factor, input_factor)
    noise_scale, offsets = 1.3, []
    for seed in range(3):
        precision = torch.as_tensor(np.exp(np.random.RandomState(seed).randn(len(groups))))
        posterior = curvature_matrix / noise_scale**2 + torch.diag(groups.expand(precision))
        covariance = torch.linalg.inv(posterior)
        expected = groups.sizes - precision * groups.sums(covariance.diagonal())
        np.testing.assert_allclose(evidence.well_determined(precision, noise_scale), expected, rtol=1e-9, atol=1e-12)
        prior_terms = (-0.5 * (precision * groups.sums(theta.square())).sum()
                       + 0.5 * (groups.sizes * precision.log()).sum())
        offsets.append(evidence.log_evidence(precision, noise_scale) - float(prior_terms)
                       + 0.5 * float(torch.linalg.slogdet(posterior)[1]))
    # What remains is the data fit at the noise scale, the same for every precision.
    np.testing.assert_allclose(offsets, offsets[0], rtol=0, atol=1e-9)
    assert float(evidence.well_determined(torch.ones(len(groups)))[groups.names.index("unused.weight")]) == 0.0


def relu_problem(n_rows, likelihood):
    """A ReLU network with a linear skip, 3 inputs and 2 outputs, at its initial weights, on
    ``n_rows`` random rows of Gaussian targets or two classes, and random group precisions:
    ``model, X, Y, likelihood, groups, theta, precision``."""
    rng = np.random.RandomState(0)
    X = torch.as_tensor(rng.randn(n_rows, 3))
    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(3, 2, (5,), "relu", linear_skip=True).double())
    if likelihood == "gaussian":
        Y, likelihood = torch.as_tensor(rng.randn(n_rows, 2)), GaussianLikelihood(torch.tensor([0.8, 1.1]).double())
    else:
        Y, likelihood = torch.as_tensor(rng.randint(2, size=(n_rows, 1)).astype(float)), CategoricalLikelihood()
    groups, theta = ParameterGroups.of(model), model.flatten()
    return model, X, Y, likelihood, groups, theta, torch.as_tensor(np.exp(rng.randn(len(groups))))


@pytest.mark.parametrize("likelihood", ["gaussian", "categorical"])
@pytest.mark.parametrize("n_rows, structure", [(6, "kernel"), (40, "full"), (40, "kron"), (40, "diag")])
def test_evidence_is_invariant_along_the_relu_scale_symmetry(n_rows, structure, likelihood, monkeypatch):
    """A ReLU layer is positively homogeneous: ``(W1, b1, W2) -> (c W1, c b1, W2 / c)`` leaves
    the network's function unchanged, and with the precisions ``(delta_W1 / c**2, delta_b1 / c**2,
    delta_W2 c**2)`` the prior too, so the model is the same. Its Laplace evidence, the
    weights each group has determined (gamma_g) and, where exact, the leverages must then be
    unchanged, whatever the structure: the log determinants of the prior and of the
    posterior precision move by the same ``2 log|det A|``. A group's precision assigned to
    another group's weights, or a log determinant taken over the wrong weights, breaks it."""
    if structure in ("kron", "diag"):
        force_structure(monkeypatch, structure)
    model, X, Y, likelihood, groups, theta, precision = relu_problem(n_rows, likelihood)
    c = 3.0
    weight_scale = {"mlp.0.weight": c, "mlp.0.bias": c, "mlp.2.weight": 1 / c}
    scales = torch.tensor([weight_scale.get(tensor_name(name), 1.0) for name in groups.names], dtype=torch.float64)
    rescaled = theta * groups.expand(scales)
    torch.testing.assert_close(model(rescaled[None], X), model(theta[None], X))
    before, after = (LaplaceEvidence(model, weights, X, Y, likelihood, groups) for weights in (theta, rescaled))
    assert before.structure == after.structure == structure
    moved = precision / scales.square()
    assert after.log_evidence(moved) == pytest.approx(before.log_evidence(precision), abs=1e-9)
    torch.testing.assert_close(torch.as_tensor(after.well_determined(moved)),
                               torch.as_tensor(before.well_determined(precision)), rtol=1e-9, atol=1e-11)
    if structure in ("kernel", "full"):
        torch.testing.assert_close(after.leverage(moved), before.leverage(precision), rtol=1e-9, atol=1e-12)


def test_only_a_layer_that_reads_the_inputs_has_input_columns():
    """A first ``nn.Linear`` behind an activation reads ``tanh(X)``, not the inputs: its weights
    stay one group (the kernel's form of the input columns presumes the inputs)."""
    reads = FunctionalModel(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)))
    behind = FunctionalModel(nn.Sequential(nn.Tanh(), nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)))
    assert reads.input_weights == ["0.weight"] and behind.input_weights == []
    assert len(ParameterGroups.of(reads).input_layers()) == 1 and not ParameterGroups.of(behind).input_layers()


def test_split_takes_each_groups_columns_a_whole_tensors_as_a_view():
    """A group's columns of a Jacobian, for the Gram matrices: a whole tensor's (contiguous) as a
    view, an input column's (every ``n_in``-th weight) as a copy, both equal to the mask's."""
    groups = ParameterGroups.of(FunctionalModel(build_mlp(3, 2, [4], linear_skip=True)))  # two outputs
    values = torch.randn(5, len(groups.index), dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    which = torch.arange(len(groups))
    for group, block in zip(which.tolist(), groups.split(values, which)):
        torch.testing.assert_close(block, values[:, groups.index == group], rtol=0, atol=0)
        whole_tensor = "[:, " not in groups.names[group]
        assert (block.untyped_storage().data_ptr() == values.untyped_storage().data_ptr()) == whole_tensor


@pytest.mark.parametrize("likelihood", ["gaussian", "categorical"])
def test_the_kernel_of_the_input_columns_equals_the_full_matrix(likelihood, monkeypatch):
    """The kernel takes a layer's input columns together, ``(U U^T) o (X diag(1 / delta) X^T)``
    (``KernelGrams``): its log evidence, well-determined weights and leverages must equal the
    full ``K x K`` matrix's, with the columns apart and tied, on a network with a linear skip,
    three outputs and a row of zeros."""
    rng = np.random.RandomState(1)
    X = torch.as_tensor(rng.randn(6, 4))
    X[2] = 0.0
    torch.manual_seed(1)
    model = FunctionalModel(build_mlp(4, 3, (5,), "tanh", linear_skip=True).double())
    if likelihood == "gaussian":
        Y, likelihood = torch.as_tensor(rng.randn(6, 3)), GaussianLikelihood(torch.tensor([0.8, 1.1, 0.5]).double())
    else:
        Y, likelihood = torch.as_tensor(rng.randint(3, size=(6, 1)).astype(float)), CategoricalLikelihood()
    for groups in (ParameterGroups.of(model), ParameterGroups.of(model).tied()):
        assert len(groups.input_layers()) == 2
        precision = torch.as_tensor(np.exp(rng.randn(len(groups))))
        kernel = LaplaceEvidence(model, model.flatten(), X, Y, likelihood, groups)
        with monkeypatch.context() as patch:
            patch.setattr(evidence_module, "_MAX_KERNEL_ROWS", 0)
            full = LaplaceEvidence(model, model.flatten(), X, Y, likelihood, groups)
        assert (kernel.structure, full.structure) == ("kernel", "full")
        assert kernel.log_evidence(precision, 1.3) == pytest.approx(full.log_evidence(precision, 1.3), abs=1e-9)
        torch.testing.assert_close(torch.as_tensor(kernel.well_determined(precision, 1.3)),
                                   torch.as_tensor(full.well_determined(precision, 1.3)), rtol=1e-9, atol=1e-11)
        torch.testing.assert_close(kernel.leverage(precision), full.leverage(precision), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n_rows, structure", [(6, "kernel"), (40, "full"), (40, "kron"), (40, "diag")])
def test_a_pruned_layer_keeps_its_precision(n_rows, structure, dtype, monkeypatch):
    """A hidden path whose weights are all zero (``mlp.0`` and ``mlp.2.weight``: the data
    determine none of them, as when training prunes the path) has an evidence flat in
    their precisions; MacKay's update there is 0 / 0, which rounding threw between the
    bounds. The maximiser keeps them where they start, and learns the rest as with any
    start for them."""
    if structure in ("kron", "diag"):
        force_structure(monkeypatch, structure)
    rng = np.random.RandomState(0)
    X = torch.as_tensor(rng.randn(n_rows, 3), dtype=dtype)
    Y = torch.as_tensor(rng.randint(2, size=(n_rows, 1)), dtype=dtype)
    model = FunctionalModel(build_mlp(3, 2, (5,), "relu", linear_skip=True).to(dtype))
    groups = ParameterGroups.of(model)
    pruned_tensors = ("mlp.0.weight", "mlp.0.bias", "mlp.2.weight")
    pruned = torch.tensor([tensor_name(name) in pruned_tensors for name in groups.names])
    theta = torch.as_tensor(rng.randn(model.n_params), dtype=dtype) * ~groups.expand(pruned)
    # Zero at the network's precision, not exactly.
    theta = theta + 10 * torch.finfo(dtype).eps * groups.expand(pruned)
    evidence = LaplaceEvidence(model, theta, X, Y, CategoricalLikelihood(), groups)
    assert evidence.structure == structure
    starts = (np.full(len(groups), 1.0), np.where(pruned.numpy(), 1e3, 1.0), np.where(pruned.numpy(), 1e-3, 1.0))
    learned = [evidence.maximise(start)[0] for start in starts]
    for start, precision in zip(starts, learned):
        np.testing.assert_array_equal(precision[pruned.numpy()], start[pruned.numpy()])
        np.testing.assert_allclose(precision[~pruned.numpy()], learned[0][~pruned.numpy()], rtol=1e-6)
        # Up to the terms of the pruned weights, which are not exactly 0: their prior term
        # delta ||theta||**2 / 2 and an Occam factor of curvature ~ N ||theta||**2 (start 1e-3).
        tolerance = 1e-9 + 1e3 * n_rows * float(theta[groups.expand(pruned)].double().square().sum())
        assert evidence.log_evidence(precision) == pytest.approx(evidence.log_evidence(learned[0]), abs=tolerance)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_determined_group_at_zero_still_learns_its_precision(dtype):
    """Zero weights the data determine are no pruned path: their evidence rises with the
    precision (``-delta ||theta||**2 / 2`` is 0 and the Occam factor grows), and MacKay's
    update sends it to the upper bound from any start, in either float precision."""
    X, y = linear_data(40)
    model = FunctionalModel(nn.Linear(3, 1).to(dtype))
    groups = ParameterGroups.of(model)
    theta = torch.zeros(model.n_params, dtype=dtype)
    theta[-1] = 1.0  # the bias; the weight group is all zero
    likelihood = GaussianLikelihood(torch.tensor([0.8], dtype=dtype))
    evidence = LaplaceEvidence(model, theta, torch.as_tensor(X, dtype=dtype), torch.as_tensor(y[:, None], dtype=dtype),
                               likelihood, groups)
    weight = [tensor_name(name) == "weight" for name in groups.names]
    assert all(evidence.well_determined(np.ones(len(groups)))[weight] > 0.3)
    for start in (1e-3, 1.0, 1e3):
        precision = evidence.maximise(np.full(len(groups), start))[0]
        np.testing.assert_allclose(precision[weight], evidence_module._PRECISION_BOUNDS[1])


def test_the_columns_mean_from_its_last_value_is_the_root_brent_finds_afresh(monkeypatch):
    """A layer's mean precision found by Newton's steps from its last value (the
    precisions moved by up to 5% since) is the root that Brent's method finds
    over the bounds from nothing, to 1e-10; Brent's method is not called."""
    groups = ParameterGroups.of(FunctionalModel(build_mlp(6, 1, [5])))
    generator = torch.Generator().manual_seed(0)
    dof = 5 * torch.rand(len(groups), generator=generator, dtype=torch.float64)
    theta_sq = torch.rand(len(groups), generator=generator, dtype=torch.float64)
    moved = theta_sq * (1 + 0.05 * torch.rand(len(groups), generator=generator, dtype=torch.float64))
    bounds = evidence_module._PRECISION_BOUNDS
    fresh = ColumnHyperprior(groups).fixed_point(dof, moved, bounds)
    warm = ColumnHyperprior(groups)
    warm.fixed_point(dof, theta_sq, bounds)

    def no_brent(*args, **kwargs):
        raise AssertionError("Brent's method was called")

    monkeypatch.setattr(evidence_module, "brentq", no_brent)
    torch.testing.assert_close(warm.fixed_point(dof, moved, bounds), fresh, rtol=1e-10, atol=0)


@pytest.mark.parametrize("likelihood", ["gaussian", "categorical"])
@pytest.mark.parametrize("n_rows, structure", [(6, "kernel"), (40, "full"), (40, "kron"), (40, "diag")])
def test_rows_weighted_give_the_evidence_of_the_rows_repeated(n_rows, structure, likelihood, monkeypatch):
    """The evidence of rows each standing for 3 rows of the table (``row_weight``,
    for a random subset of a big table) is that of the table with every row
    repeated 3 times: its value, the weights each group has determined, the
    maximisers and, where exact, each row's leverage, whatever the structure."""
    if structure in ("kron", "diag"):
        force_structure(monkeypatch, structure)
    model, X, Y, likelihood, groups, theta, precision = relu_problem(n_rows, likelihood)
    weighted = LaplaceEvidence(model, theta, X, Y, likelihood, groups, row_weight=3.0)
    repeated = LaplaceEvidence(model, theta, X.repeat(3, 1), Y.repeat(3, 1), likelihood, groups)
    assert weighted.structure == repeated.structure == structure
    assert weighted.log_evidence(precision, 1.3) == pytest.approx(repeated.log_evidence(precision, 1.3), abs=1e-9)
    assert weighted.log_evidence(precision) != pytest.approx(
        LaplaceEvidence(model, theta, X, Y, likelihood, groups).log_evidence(precision), abs=1e-3)
    torch.testing.assert_close(torch.as_tensor(weighted.well_determined(precision, 1.3)),
                               torch.as_tensor(repeated.well_determined(precision, 1.3)), rtol=1e-9, atol=1e-11)
    start = precision.numpy()
    for found, expected in zip(weighted.maximise(start, learn_noise=likelihood.learn_noise),
                               repeated.maximise(start, learn_noise=likelihood.learn_noise), strict=True):
        np.testing.assert_allclose(found, expected, rtol=1e-7)
    if structure in ("kernel", "full"):
        torch.testing.assert_close(weighted.leverage(precision), repeated.leverage(precision)[:n_rows],
                                   rtol=1e-9, atol=1e-12)


def test_the_training_s_updates_read_a_random_subset_of_a_big_table(monkeypatch):
    """Above ``SUBSET_ROWS`` rows the evidence updates during training read a
    seeded random subset of that many rows, each standing for its share of the
    table, and the update at the polished mode, which sets the noise the fit
    keeps, reads every row. On 300 rows of a linear table with ``SUBSET_ROWS``
    at 150, the learned noise and the output layer's precision stay within 10%
    of those learned from every row at each update (a half of the rows), and the
    predictions differ by at most 5% of a predictive std on average. Eight hidden
    units: four leave the linear effects two paths of near-equal evidence (the
    layer and the skip), and the fit hops between them with the training's
    rounding (7.5% at 100 epochs, from the subset or from the thread count);
    with eight the difference was 0.8-2.6% at 50 to 200 epochs."""
    from sklearn_quinn._core import row_subsets

    X, y = linear_data(300)
    params = dict(hidden_layer_sizes=(8,), max_epochs=50, random_state=0)
    every_row = LaplaceRegressor(**params).fit(X, y)
    seen = []
    original = LaplaceEvidence.__init__

    def spy(self, model, theta, X_rows, *args, **kwargs):
        seen.append((len(X_rows), kwargs.get("row_weight", 1.0)))
        original(self, model, theta, X_rows, *args, **kwargs)

    monkeypatch.setattr(row_subsets, "SUBSET_ROWS", 150)
    monkeypatch.setattr(LaplaceEvidence, "__init__", spy)
    subset = LaplaceRegressor(**params).fit(X, y)
    updates = [update["stage"] for update in subset.evidence_history_]
    assert seen[:updates.count("training")] == [(150, 2.0)] * updates.count("training")
    assert (300, 1.0) in seen[updates.count("training"):]  # the update at the mode, and the posterior's
    for mine, reference in zip(subset.evidence_history_, every_row.evidence_history_, strict=True):
        assert mine["noise_std"] == pytest.approx(reference["noise_std"], rel=0.1)
        assert mine["mlp.2.weight"] == pytest.approx(reference["mlp.2.weight"], rel=0.1)
    mean, std = every_row.predict(X, return_std=True)
    assert np.abs(subset.predict(X) - mean).mean() < 0.05 * std.mean()


@pytest.mark.parametrize("n_rows, structure", [(6, "kernel"), (40, "full"), (40, "kron"), (40, "diag")])
def test_fixed_point_maximises_the_evidence_at_fixed_weights(n_rows, structure, monkeypatch):
    """MacKay's iteration lands where a generic optimiser of the same evidence does
    (one precision per tensor: see the next test for the input columns apart)."""
    if structure in ("kron", "diag"):
        force_structure(monkeypatch, structure)
    X, y = linear_data(n_rows)
    model = FunctionalModel(nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 1)).double())
    theta = torch.as_tensor(np.random.RandomState(0).randn(model.n_params))
    likelihood = GaussianLikelihood(torch.tensor([0.8], dtype=torch.float64))
    evidence = LaplaceEvidence(model, theta, torch.as_tensor(X), torch.as_tensor(y[:, None]), likelihood,
                               ParameterGroups.of(model).tied())
    assert evidence.structure == structure
    n_groups = len(evidence.groups)
    precision, noise_scale, value = evidence.maximise(np.ones(n_groups), learn_prior=True, learn_noise=True)

    def negative(log_hyper):
        return -evidence.log_evidence(np.exp(log_hyper[:n_groups]), np.exp(log_hyper[n_groups]))

    reference = minimize(negative, np.zeros(n_groups + 1), method="Nelder-Mead",
                         options={"xatol": 1e-9, "fatol": 1e-12, "maxiter": 20000, "maxfev": 20000})
    # The iteration stops once a step gains less than 1e-6 nats; along a weakly
    # determined group the evidence is flat and the steps small, so it stops a
    # little short: within 1e-3 nats, and the log hyperparameters within 0.1.
    assert value == pytest.approx(-reference.fun, abs=1e-3)
    assert value <= -reference.fun + 1e-9
    assert value == pytest.approx(evidence.log_evidence(precision, noise_scale), abs=1e-12)
    np.testing.assert_allclose(np.log(np.append(precision, noise_scale)), reference.x, atol=0.1)


@pytest.mark.parametrize("structure", ["full", "kron", "diag"])
def test_fixed_point_maximises_the_evidence_over_the_input_columns(structure, monkeypatch):
    """With the first layer's input columns apart (7 hyperparameters), the iteration
    climbs the evidence times the columns' hyperprior at least as high as a generic optimiser
    started from its own end and from the origin; it may stop short only by its tolerance.
    It returns the evidence alone."""
    if structure in ("kron", "diag"):
        force_structure(monkeypatch, structure)
    X, y = linear_data(40)
    model = FunctionalModel(nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 1)).double())
    theta = torch.as_tensor(np.random.RandomState(0).randn(model.n_params))
    likelihood = GaussianLikelihood(torch.tensor([0.8], dtype=torch.float64))
    groups = ParameterGroups.of(model)
    assert groups.names[:4] == ["0.weight[:, 0]", "0.weight[:, 1]", "0.weight[:, 2]", "0.bias"]
    evidence = LaplaceEvidence(model, theta, torch.as_tensor(X), torch.as_tensor(y[:, None]), likelihood, groups)
    assert evidence.structure == structure
    precision, noise_scale, value = evidence.maximise(np.ones(len(groups)), learn_prior=True, learn_noise=True)

    def negative(log_hyper):
        precision = np.exp(log_hyper[:-1])
        return -evidence.log_evidence(precision, np.exp(log_hyper[-1])) - column_log_hyperprior(precision[:3])

    options = {"xatol": 1e-9, "fatol": 1e-12, "maxiter": 20000, "maxfev": 20000}
    best = min(minimize(negative, start, method="Nelder-Mead", options=options).fun
               for start in (np.zeros(len(groups) + 1), np.log(np.append(precision, noise_scale))))
    assert value + column_log_hyperprior(precision[:3]) >= -best - 1e-3
    assert value == pytest.approx(evidence.log_evidence(precision, noise_scale), abs=1e-12)


@pytest.mark.parametrize("n_rows, structure", [(3, "kernel"), (20, "full")])
def test_a_group_the_prior_determines_converges_in_a_few_steps(n_rows, structure):
    """One group of weights whose curvature ``lambda_i`` is small beside its precision: the
    evidence's maximiser solves ``delta ||theta||^2 = sum_i lambda_i / (lambda_i + delta)``,
    where MacKay's plain update has a slope near -1 in ``log delta`` and swings about the root
    for many steps (from 1e3, still 0.005 and 0.07 from it in ``log delta`` after 10). The relaxed
    iteration reaches the root to 1e-8 in 10."""
    rng = np.random.RandomState(0)
    X = torch.as_tensor(0.05 * rng.randn(n_rows, 5))
    model = FunctionalModel(nn.Linear(5, 1, bias=False).double())
    theta = torch.as_tensor(rng.randn(5))
    likelihood = GaussianLikelihood(torch.tensor([0.5], dtype=torch.float64))
    evidence = LaplaceEvidence(model, theta, X, torch.as_tensor(rng.randn(n_rows, 1)), likelihood,
                               ParameterGroups.of(model).tied())
    assert evidence.structure == structure and len(evidence.groups) == 1
    curvature_eigenvalues = np.linalg.eigvalsh(X.numpy().T @ X.numpy()) / 0.5**2
    root = brentq(lambda delta: delta * float(theta.square().sum())
                  - (curvature_eigenvalues / (curvature_eigenvalues + delta)).sum(), 1e-6, 1e3)
    precision = evidence.maximise(np.array([1e3]), max_iterations=10)[0]
    assert np.log(precision[0]) == pytest.approx(np.log(root), abs=1e-8)


def test_an_input_the_targets_ignore_gets_the_strongest_prior():
    """Automatic relevance determination: ``y = sin(2 x0) + x1 / 2 + noise`` with a third,
    irrelevant input. The first layer's precision of the irrelevant column ends at least 5
    times the nonlinear input's and above the linear one's; the columns share their layer's
    precision until the last four updates, then move apart."""
    rng = np.random.RandomState(0)
    X = rng.randn(200, 3)
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.randn(200)
    reg = LaplaceRegressor(max_epochs=300, random_state=0).fit(X, y)
    columns = [f"mlp.0.weight[:, {column}]" for column in range(3)]
    learned = [reg.prior_precisions_[name] for name in columns]
    assert learned[2] > 5 * learned[0] and learned[2] > learned[1]
    training = [update for update in reg.evidence_history_ if update["stage"] == "training"]
    for update in training[:-4]:
        assert update[columns[0]] == update[columns[1]] == update[columns[2]]
    for update in training[-4:]:
        assert len({update[name] for name in columns}) == 3


@pytest.mark.parametrize("shape, calibrated", [(evidence_module.COLUMN_SHAPE, True), (0.0, False)])
def test_the_columns_hyperprior_keeps_many_columns_for_the_rows_calibrated(shape, calibrated, monkeypatch):
    """100 rows of 50 standard-normal columns, 5 of them weighted 2, unit noise: 100 column
    precisions fitted to 100 rows. Under the columns' Gamma hyperprior the 95% intervals cover
    at least 0.92 of 1000 test rows (here 0.938, the noise learned 0.79) and the NLL is below
    ``BayesianRidge``'s (1.541 against 1.730); with its shape at zero, MacKay's plain fixed
    point, chance correlations keep columns open, the noise is learned smaller (0.68) and the
    coverage falls below 0.9 (0.888)."""
    from sklearn.linear_model import BayesianRidge

    monkeypatch.setattr(evidence_module, "COLUMN_SHAPE", shape)
    rng = np.random.RandomState(0)
    X = rng.randn(1100, 50)
    y = 2.0 * X[:, :5].sum(1) + rng.randn(1100)
    mean, std = LaplaceRegressor(random_state=0).fit(X[:100], y[:100]).predict(X[100:], return_std=True)
    coverage = np.mean(np.abs(y[100:] - mean) <= norm.ppf(0.975) * std)
    nll = -norm.logpdf(y[100:], mean, std).mean()
    reference_mean, reference_std = BayesianRidge().fit(X[:100], y[:100]).predict(X[100:], return_std=True)
    reference_nll = -norm.logpdf(y[100:], reference_mean, reference_std).mean()
    if calibrated:
        assert coverage >= 0.92 and nll < reference_nll
    else:
        assert coverage < 0.9


def test_the_gram_matrices_counted_for_the_memory_budget_are_those_the_kernel_holds():
    """``KernelGrams.count``, which sizes the memory budget, counts one ``M x M`` matrix per whole
    tensor and one per layer of input columns, however many columns (groups) the layer has: 3
    tensors (the hidden bias, the output weight and bias) and 2 layers (the hidden and the skip
    weights, 4 columns each) make 5 of the 11 groups; as many as a ``KernelGrams`` keeps."""
    groups = ParameterGroups.of(FunctionalModel(build_mlp(4, 3, (5,), "tanh", linear_skip=True).double()))
    assert len(groups) == 11 and len(groups.input_layers()) == 2
    assert KernelGrams.count(groups) == 5
    factor = torch.randn(6, len(groups.index), dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    grams = KernelGrams(factor, torch.randn(2, 4, dtype=torch.float64), groups)
    assert len(grams._grams) + len(grams._layers) == 5


def test_the_kernel_is_refused_where_its_gram_matrices_exceed_the_memory_budget():
    """300 Gram matrices (one per parameter tensor, one per layer of input columns) on 1,000
    rows would hold 2.4 GB, over the full matrix's budget of 2 GiB."""
    assert evidence_module.exact_structure(1000, 5000, torch.float64) == "kernel"
    assert evidence_module.exact_structure(1000, 5000, torch.float64, n_grams=300) is None
    assert evidence_module.exact_structure(1000, 1500, torch.float64, n_grams=300) == "full"


def test_learned_prior_and_noise_are_the_exact_evidence_maximisers(device):
    """Per input column, per bias and the noise: five hyperparameters of the closed form
    evidence times the columns' hyperprior; the log marginal likelihood is the evidence's."""
    X, y = linear_data(60, noise=0.5, seed=1)

    def negative(log_hyper):
        precision = np.exp(log_hyper)
        return -exact_log_evidence(X, y, precision[:3], *precision[3:]) - column_log_hyperprior(precision[:3])

    exact = np.exp(minimize(negative, np.zeros(5), method="Nelder-Mead",
                            options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 20000, "maxfev": 20000}).x)
    reg = LaplaceRegressor(hidden_layer_sizes=(), normalize_X=False, normalize_y=False, max_epochs=400, random_state=0,
                           device=device).fit(X, y)
    learned = [reg.prior_precisions_[f"0.weight[:, {column}]"] for column in range(3)]
    learned += [reg.prior_precisions_["0.bias"], reg.noise_std_]
    np.testing.assert_allclose(learned, exact, rtol=0.02)
    assert reg.log_marginal_likelihood() == pytest.approx(exact_log_evidence(X, y, exact[:3], *exact[3:]), abs=0.02)


def laplace_log_evidence_at(X, y, theta, weight_precision, bias_precision, noise_std):
    """The Laplace log evidence of the linear model at weights ``theta`` (not necessarily its
    MAP): the log joint there plus the Gaussian normaliser of the curvature."""
    design = np.hstack([X, np.ones((len(X), 1))])
    prior = np.append(weight_precision, bias_precision)
    hessian = design.T @ design / noise_std**2 + np.diag(prior)
    return (norm.logpdf(y - design @ theta, scale=noise_std).sum()
            + 0.5 * np.log(prior / (2 * np.pi)).sum() - 0.5 * (prior * theta**2).sum()
            - 0.5 * np.linalg.slogdet(hessian / (2 * np.pi))[1])


def test_a_network_ends_with_the_evidence_maximising_noise_at_its_own_weights():
    """A network that is still fitting after the training's last update (a smooth function in
    little noise, so the residuals are the network's approximation error and shrink as it
    trains): the noise it ends with maximises the Laplace evidence at the weights and the
    precisions it returns, as a scalar optimiser of the same evidence finds it. Left at the
    last training update's, the noise was 1.3 times the maximiser."""
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(150, 1))
    y = np.sin(3 * X[:, 0]) + 0.01 * rng.randn(150)
    reg = LaplaceRegressor(hidden_layer_sizes=(16,), normalize_X=False, normalize_y=False, max_epochs=300,
                           random_state=0).fit(X, y)
    groups = ParameterGroups.of(reg._model)
    precisions = [reg.prior_precisions_[name] for name in groups.names]
    likelihood = GaussianLikelihood(torch.tensor([reg.noise_std_], dtype=torch.float64))
    evidence = LaplaceEvidence(reg._model, reg._model.flatten().detach(), torch.as_tensor(X),
                               torch.as_tensor(y[:, None]), likelihood, groups)
    best = minimize_scalar(lambda log_scale: -evidence.log_evidence(precisions, np.exp(log_scale)),
                           bounds=(-3.0, 3.0), method="bounded", options={"xatol": 1e-9})
    assert best.x == pytest.approx(0.0, abs=1e-3)  # the learned noise times exp(0)
    assert reg.log_marginal_likelihood() == pytest.approx(-best.fun, abs=1e-6)


@pytest.mark.parametrize("hidden", [(), (8,)])
def test_each_outputs_noise_is_its_own_evidence_maximiser(hidden):
    """Two outputs of one table, noise 0.3 and 1.5: the noise stds a fit ends with maximise the
    Laplace evidence at its weights and precisions, jointly over the two, as a simplex search of
    the same evidence finds them. The outputs share a hidden layer, and the low-noise output
    determines more of its weights: setting the noise ratios by ``SSE_o / N`` alone left its
    noise at 0.953 times the maximiser and the other's at 1.047 (0.24 nats below the maximum)."""
    rng = np.random.RandomState(0)
    X = rng.randn(60, 6)
    Y = X @ rng.randn(6, 2) + rng.randn(60, 2) * np.array([0.3, 1.5])
    reg = LaplaceRegressor(hidden_layer_sizes=hidden, normalize_X=False, normalize_y=False, max_epochs=400,
                           random_state=0).fit(X, Y)
    groups = ParameterGroups.of(reg._model)
    precisions = [reg.prior_precisions_[name] for name in groups.names]
    theta = reg._model.flatten().detach()

    def negative(log_noise_std):
        likelihood = GaussianLikelihood(torch.tensor(np.exp(log_noise_std)))
        evidence = LaplaceEvidence(reg._model, theta, torch.as_tensor(X), torch.as_tensor(Y), likelihood, groups)
        return -evidence.log_evidence(precisions)

    learned = np.log(reg.noise_std_)
    best = minimize(negative, learned + 0.1, method="Nelder-Mead", options={"xatol": 1e-8, "fatol": 1e-10})
    np.testing.assert_allclose(learned, best.x, atol=1e-3)


def test_a_scaled_prior_is_the_evidence_maximiser_scaled_at_its_own_map():
    """``prior_std_scale=2``: every update sets the precisions to the evidence's maximisers
    over 4, so the training settles where the learned precisions are 1/4 of the maximisers
    of the Laplace evidence times the columns' hyperprior at the MAP they give (with the noise
    that maximises it there), five hyperparameters of the closed form; at scale 1 this is the
    exact evidence's maximum
    (test_learned_prior_and_noise_are_the_exact_evidence_maximisers)."""
    X, y = linear_data(60, noise=0.5, seed=1)
    reg = LaplaceRegressor(hidden_layer_sizes=(), normalize_X=False, normalize_y=False, prior_std_scale=2.0,
                           max_epochs=400, random_state=0).fit(X, y)
    learned = np.array([reg.prior_precisions_[f"0.weight[:, {column}]"] for column in range(3)]
                       + [reg.prior_precisions_["0.bias"]])
    theta = exact_map(X, y, learned[:3], learned[3], reg.noise_std_)

    def negative(log_hyper):
        hyper = np.exp(log_hyper)
        return -laplace_log_evidence_at(X, y, theta, hyper[:3], hyper[3], hyper[4]) - column_log_hyperprior(hyper[:3])

    maximisers = np.exp(minimize(negative, np.zeros(5), method="Nelder-Mead",
                                 options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 20000, "maxfev": 20000}).x)
    np.testing.assert_allclose(np.append(learned * 4, reg.noise_std_), maximisers, rtol=0.02)
    # Not the evidence's own maximisers: a quarter of them, each.
    at_scale_one = LaplaceRegressor(hidden_layer_sizes=(), normalize_X=False, normalize_y=False, max_epochs=400,
                                    random_state=0).fit(X, y)
    assert all(learned < 0.5 * np.array(list(at_scale_one.prior_precisions_.values())))


#: The chains of the per-output noise tests' linear MCMC (10 leapfrog steps: neither test reads the length).
LINEAR_CHAINS = dict(n_chains=2, n_burnin=200, n_samples=200, n_leapfrog=10)


@pytest.mark.parametrize(
    "estimator",
    [
        LaplaceRegressor(hidden_layer_sizes=(), max_epochs=300, random_state=0),
        sklearn_quinn.DeepEnsembleRegressor(hidden_layer_sizes=(), n_estimators=3, max_epochs=300, random_state=0),
        sklearn_quinn.MCMCRegressor(hidden_layer_sizes=(), max_epochs=300, **LINEAR_CHAINS, random_state=0),
    ],
    ids=lambda estimator: type(estimator).__name__,
)
def test_each_output_learns_its_own_noise(estimator):
    """Two outputs of one linear signal, one with a tenth of the other's noise. Standardised,
    their spreads are alike, so one noise scale for both (what the evidence's update learns alone)
    would give the quiet output several times its noise and the noisy one too little. Each
    output's learned noise (sampled, for MCMC, as one scale of the MAP's ratios) is its own
    within 10%."""
    rng = np.random.RandomState(1)
    X = rng.randn(400, 3)
    signal = X @ [1.0, -1.0, 0.5]
    Y = np.c_[signal + 0.1 * rng.randn(400), signal + rng.randn(400)]
    fitted = estimator.fit(X, Y)
    np.testing.assert_allclose(fitted.noise_std_, [0.1, 1.0], rtol=0.1)


@pytest.mark.parametrize("estimator", [LaplaceRegressor, sklearn_quinn.MCMCRegressor], ids=lambda cls: cls.__name__)
def test_each_output_noise_is_bounded_by_its_own_spread(estimator):
    """Raw targets: a linear one with noise 0.1 beside pure noise of std 97. The ceiling on the
    noise (a constant predictor's) is each target's own spread; one pooled over the targets held
    the noisy output at 69 and, through the common scale, the quiet one at 0.07."""
    rng = np.random.RandomState(0)
    X = rng.randn(400, 3)
    Y = np.c_[X @ [1.0, -1.0, 0.5] + 0.1 * rng.randn(400), 100 * rng.randn(400)]
    params = LINEAR_CHAINS if estimator is sklearn_quinn.MCMCRegressor else {}
    fitted = estimator(hidden_layer_sizes=(), normalize_X=False, normalize_y=False, max_epochs=300, random_state=0,
                       **params).fit(X, Y)
    np.testing.assert_allclose(fitted.noise_std_, [0.1, Y[:, 1].std()], rtol=0.05)


def test_evidence_history_records_every_update():
    X, y = linear_data(60)
    reg = LaplaceRegressor(hidden_layer_sizes=(4,), max_epochs=50, random_state=0).fit(X, y)
    history = reg.evidence_history_
    training = [update for update in history if update["stage"] == "training"]
    assert [update["epoch"] for update in training] == [5, 7, 10, 12, 15, 17, 20, 22, 25, 27, 30, 32, 35, 37, 40]
    # Then the polished MAP under the common scale of the precisions that maximises the evidence.
    assert len(history) == len(training) + 1
    assert history[-1]["stage"] == "final" and history[-1]["epoch"] == 50
    assert set(history[-1]) == {"epoch", "stage", "log_evidence", "noise_std", *reg.prior_precisions_}
    assert all(np.isfinite(update["log_evidence"]) for update in history)
    # The last update set the prior the MAP finished training under.
    assert {name: history[-1][name] for name in reg.prior_precisions_} == pytest.approx(reg.prior_precisions_)


def test_fixed_prior_learns_only_the_noise():
    X, y = linear_data(60)
    reg = LaplaceRegressor(hidden_layer_sizes=(4,), prior_std=0.5, max_epochs=50, random_state=0).fit(X, y)
    assert set(reg.prior_precisions_.values()) == {4.0}
    assert [update["stage"] for update in reg.evidence_history_] == ["training"] * 15 + ["final"]
    fixed = LaplaceRegressor(hidden_layer_sizes=(4,), prior_std=0.5, noise_std=0.3, max_epochs=50).fit(X, y)
    assert fixed.evidence_history_ == [] and fixed.noise_std_ == pytest.approx(0.3)


def small_task(estimator):
    """20 rows of ``linear_data``, the targets split at their median for a classifier."""
    X, y = linear_data(20)
    return X, (y > np.median(y)).astype(int) if is_classifier(estimator()) else y


@pytest.mark.parametrize("prior_std", [0, -1.0, "1.0", 1e-200, 1e300])
@pytest.mark.parametrize("estimator", ALL_ESTIMATORS, ids=lambda cls: cls.__name__)
def test_prior_std_neither_none_nor_positive_is_refused(estimator, prior_std):
    """And one whose square or inverse square overflows (an OverflowError, or a Bayes by backprop
    predicting NaN, before): refused with the range."""
    X, y = small_task(estimator)
    with pytest.raises(ValueError, match="prior_std"):
        estimator(prior_std=prior_std).fit(X, y)


@pytest.mark.parametrize("noise_std", [0, -1.0, 1e-300, 1e300])
@pytest.mark.parametrize("estimator", [cls for cls in ALL_ESTIMATORS if "noise_std" in cls().get_params()],
                         ids=lambda cls: cls.__name__)
def test_noise_std_neither_none_nor_in_range_is_refused(estimator, noise_std):
    X, y = small_task(estimator)
    with pytest.raises(ValueError, match=r"noise_std.*1e-100, 1e\+100"):
        estimator(noise_std=noise_std).fit(X, y)


SCALED_PRIOR_ESTIMATORS = [cls for cls in ALL_ESTIMATORS if "prior_std_scale" in cls().get_params()]


def test_the_families_that_train_from_the_evidence_map_scale_its_prior():
    names = {cls.__name__.removesuffix("Regressor").removesuffix("Classifier") for cls in SCALED_PRIOR_ESTIMATORS}
    assert names == {"Laplace", "DeepEnsemble", "RMS", "MCDropout", "SWAG"}
    assert len(SCALED_PRIOR_ESTIMATORS) == 10


@pytest.mark.parametrize("prior_std_scale", [0, -2.0, "2"])
@pytest.mark.parametrize("estimator", SCALED_PRIOR_ESTIMATORS, ids=lambda cls: cls.__name__)
def test_prior_std_scale_not_positive_is_refused(estimator, prior_std_scale):
    X, y = small_task(estimator)
    with pytest.raises((ValueError, TypeError), match="prior_std_scale"):
        estimator(prior_std_scale=prior_std_scale).fit(X, y)


@pytest.mark.parametrize("estimator", SCALED_PRIOR_ESTIMATORS, ids=lambda cls: cls.__name__)
def test_prior_std_scale_with_a_fixed_prior_is_refused(estimator):
    X, y = small_task(estimator)
    with pytest.raises(ValueError, match=r"prior_std_scale=2\.0 scales a learned prior, but prior_std=0\.5 fixes it"):
        estimator(prior_std=0.5, prior_std_scale=2.0).fit(X, y)


@pytest.mark.parametrize("estimator", ALL_ESTIMATORS, ids=lambda cls: cls.__name__)
def test_the_prior_is_learned_by_default(estimator):
    """Every estimator learns its prior by default (MCMC and SMC sample the
    precisions under hyperpriors)."""
    assert estimator().prior_std is None


def evidence_maximisation(X, Y):
    return EvidenceMaximisation(None, torch.as_tensor(X), torch.as_tensor(Y), None, learn_prior=True,
                                learn_noise=True, epochs={1})


def test_the_noise_may_grow_until_the_first_target_reaches_its_own_spread():
    """Each target's noise is bounded by its spread (the std about its mean, a constant predictor's
    noise), and the common factor the noise may grow by is the smallest of spread / noise: here
    the first target's, 2 / 0.5 against 10 / 1 (not the largest, nor a variance's)."""
    rng = np.random.RandomState(0)
    Y = rng.randn(200, 2) * [2.0, 10.0] + [5.0, -3.0]
    spread = Y.std(0)
    search = evidence_maximisation(rng.randn(200, 3), Y)
    expected = min(spread[0] / 0.5, spread[1] / 1.0)
    assert search._max_noise_scale(torch.tensor([0.5, 1.0], dtype=torch.float64)) == pytest.approx(expected, rel=1e-12)


def test_sharing_the_noise_by_residuals_keeps_its_geometric_mean():
    """A network whose outputs are all zero leaves the targets as residuals: the outputs' noise
    stds are set in the ratios of their root mean squares, at the geometric mean they had."""
    rng = np.random.RandomState(1)
    X, Y = rng.randn(50, 2), rng.randn(50, 2) * [0.3, 3.0]
    linear = nn.Linear(2, 2).double()
    nn.init.zeros_(linear.weight)
    nn.init.zeros_(linear.bias)
    search = evidence_maximisation(X, Y)
    search.model, search._output_dof = FunctionalModel(linear), None
    old = np.log([0.5, 8.0])  # geometric mean 2
    likelihood = SimpleNamespace(log_noise_std=torch.tensor(old))
    search._share_noise_by_residuals(likelihood)
    log_rms = np.log(np.sqrt((Y**2).mean(0)))
    np.testing.assert_allclose(likelihood.log_noise_std.numpy(), log_rms - log_rms.mean() + old.mean(), rtol=1e-12)


def test_learned_noise_stays_within_the_targets_spread():
    """Inputs far from standardised (mean 100) and a short training leave the
    network far from a mode at the early updates, where MacKay's SSE / (N -
    gamma) reached 36 target standard deviations (and the SGD phase of SWAG
    then diverged at every rate); the noise of a constant predictor bounds it."""
    rng = np.random.RandomState(0)
    X, y = rng.normal(loc=100, size=(80, 2)), rng.normal(size=80)
    reg = LaplaceRegressor(hidden_layer_sizes=(16,), max_epochs=60, random_state=0).fit(X, y)
    assert all(update["noise_std"][0] <= 1 + 1e-9 for update in reg.evidence_history_)
    assert reg.noise_std_ <= y.std() * (1 + 1e-9)


def logistic_laplace_evidence(X, y, weight_precision, bias_precision):
    """The Laplace log evidence of multinomial logistic regression at its MAP,
    found afresh by L-BFGS, with the exact Hessian (``weight_precision``: one
    per input column)."""
    X, y = torch.as_tensor(X), torch.as_tensor(y)
    n_classes = int(y.max()) + 1
    columns = torch.as_tensor(weight_precision, dtype=torch.float64).expand(X.shape[1])
    precision = torch.cat([columns.repeat(n_classes), torch.full((n_classes,), float(bias_precision))]).double()

    def log_joint(theta):
        weight, bias = theta[:-n_classes].reshape(n_classes, -1), theta[-n_classes:]
        log_likelihood = torch.log_softmax(X @ weight.T + bias, -1).gather(1, y[:, None]).sum()
        return log_likelihood - 0.5 * (precision * theta.square()).sum() + 0.5 * torch.log(precision).sum()

    theta = torch.zeros(len(precision), dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([theta], max_iter=1000, tolerance_grad=1e-12, tolerance_change=0,
                                  line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = -log_joint(theta)
        loss.backward()
        return loss

    optimizer.step(closure)
    hessian = torch.autograd.functional.hessian(lambda t: -log_joint(t), theta.detach())
    return float(log_joint(theta.detach()) - 0.5 * torch.logdet(hessian))


@pytest.mark.parametrize("prior_std_scale", [1.0, 2.0])
def test_classifier_prior_scale_is_the_evidence_maximiser_along_it(prior_std_scale):
    """A classifier's curvature shrinks as a weaker prior lets its probabilities saturate,
    which MacKay's fixed point ignores: its prior is too strong. The common scale of the
    precisions the training ends with is a local maximum of the exact Laplace evidence
    along it (the MAP re-found at each scale) to the search's resolution (a step must
    gain 0.1 nats), below the fixed point's, the weights' ratios kept, and so is the output
    bias's own scale; with ``prior_std_scale``, that maximiser's precisions over its square."""
    rng = np.random.RandomState(0)
    centres = np.array([[0.0, 2.0], [2.0, -1.0], [-2.0, -1.0]])
    y = np.repeat(np.arange(3), 20)
    X = centres[y] + 0.8 * rng.randn(60, 2)
    clf = sklearn_quinn.LaplaceClassifier(hidden_layer_sizes=(), max_epochs=200, normalize_X=False, random_state=0,
                                          prior_std_scale=prior_std_scale).fit(X, y)
    learned = clf.prior_precisions_
    fixed_point = [update for update in clf.evidence_history_ if update["stage"] == "training"][-1]
    scales = np.array([learned[name] / fixed_point[name] for name in learned if name != "0.bias"])
    assert scales[0] < 0.7
    np.testing.assert_allclose(scales, scales[0])
    columns = np.array([learned["0.weight[:, 0]"], learned["0.weight[:, 1]"]])
    factor = prior_std_scale**2
    at = {step: logistic_laplace_evidence(X, y, factor * columns * 2**(step / 2),
                                          factor * learned["0.bias"] * 2**(step / 2))
          for step in (-1, 0, 1)}
    assert at[0] >= max(at[-1], at[1]) - 0.1
    # And along the output bias's own scale (its climb follows the common one).
    at_bias = [logistic_laplace_evidence(X, y, factor * columns, factor * learned["0.bias"] * 2**(step / 2))
               for step in (-1, 1)]
    assert at[0] >= max(at_bias) - 0.1
    # The polished MAP is the MAP of the learned prior: the classifier's evidence is the exact
    # Laplace evidence there.
    assert clf.log_marginal_likelihood() == pytest.approx(
        logistic_laplace_evidence(X, y, columns, learned["0.bias"]), abs=1e-4)


def test_the_classifier_keeps_the_class_frequencies_where_the_inputs_say_little():
    """Twelve classes of unequal frequencies, inputs that barely move them: the evidence prunes
    the weights and would take the output bias with them, to the uniform prediction, by a
    common scale; its own scale keeps the frequencies, and the classifier scores the
    class-frequency predictor's test NLL (within 0.01 nats)."""
    rng = np.random.RandomState(0)
    frequencies, effects = rng.dirichlet(np.full(12, 3.0)), 0.05 * rng.randn(10, 12)

    def draw(n_rows):
        X = rng.randn(n_rows, 10)
        probabilities = softmax(X @ effects + np.log(frequencies), axis=1)
        return X, (probabilities.cumsum(1) > rng.rand(n_rows, 1)).argmax(1)

    (X, y), (X_test, y_test) = draw(400), draw(4000)
    clf = sklearn_quinn.LaplaceClassifier(hidden_layer_sizes=(16,), max_epochs=200, random_state=0).fit(X, y)
    training_frequencies = np.bincount(y, minlength=12) / len(y)
    as_frequencies = log_loss(y_test, np.tile(training_frequencies, (len(y_test), 1)), labels=range(12))
    assert as_frequencies < np.log(12) - 0.05
    assert log_loss(y_test, clf.predict_proba(X_test), labels=range(12)) < as_frequencies + 0.01


def climb_on(log_evidence, base):
    """``_climb_scale`` from ``base`` where a converged state's log evidence is ``log_evidence`` of the
    log2 of its precisions over ``base``: the steps it visits, and the state it chooses."""
    steps = []

    def converged_state(net, precision=None):
        steps.append(math.log2(precision[0] / base[0]))
        return {"record": {"log_evidence": log_evidence(steps[-1])}, "precision": precision}

    search = EvidenceMaximisation.__new__(EvidenceMaximisation)
    search._converged_state, search._restore = converged_state, lambda net, state: None
    return steps, search._climb_scale(None, base, np.ones(2, dtype=bool))


@pytest.mark.parametrize("maximiser, visited", [
    (-2.3, [0, -1, -2, -3, -2.3]),  # weaker: the climb, then the vertex of its last three states
    (1.3, [0, -1, 1, 2, 1.3]),  # stronger, after the weaker step lost
    (-0.02, [0, -1, 1]),  # within the first bracket: the parabola promises under 0.1 nats, no vertex
    # The vertex promises 3 * 0.15**2 = 0.0675 nats, (above - below)**2 / (8 curvature), under 0.1:
    # no vertex (with 4 for 8 it promised 0.135, and was visited).
    (0.15, [0, -1, 1]),
])
def test_the_scale_search_ends_at_the_maximiser_of_a_parabolic_evidence(maximiser, visited):
    """The climb along the common scale in steps of 2 brackets the maximum, and the step of
    parabolic interpolation lands on it where the evidence is a parabola in the log scale."""
    base = np.array([8.0, 2.0])
    steps, chosen = climb_on(lambda step: -3.0 * (step - maximiser) ** 2, base)
    np.testing.assert_allclose(steps, visited, atol=1e-12)
    np.testing.assert_allclose(chosen["precision"], base * 2.0 ** visited[-1] if len(visited) > 3 else base)


def test_the_scale_search_keeps_the_scale_on_a_flat_evidence():
    """A step must gain at least 0.1 nats: on a flat evidence the climb tries one step each way and
    takes neither (accepting any loss under 0.1 nats, it walked to the end of its range)."""
    base = np.array([8.0, 2.0])
    steps, chosen = climb_on(lambda step: 0.0, base)
    np.testing.assert_allclose(steps, [0, -1, 1], atol=1e-12)
    np.testing.assert_allclose(chosen["precision"], base)


def search_of_the_scales(precision, log_evidence, precision_factor, groups, output_bias=None, **state):
    """An ``EvidenceMaximisation`` for ``_climb_scales`` whose last update left ``precision`` and
    whose converged state at a precision has the log evidence ``log_evidence(precision)`` (and the
    further entries ``state``); the current precision is ``current["precision"]``."""
    current = {"precision": precision}

    def converged_state(net, precision=None):
        current["precision"] = precision
        return {"record": {"log_evidence": log_evidence(precision)}, "precision": precision, **state}

    search = EvidenceMaximisation.__new__(EvidenceMaximisation)
    search.precision_factor, search.groups = precision_factor, groups
    search.model = SimpleNamespace(output_bias=output_bias)
    search._precision = lambda net: current["precision"]
    search._converged_state = converged_state
    search._restore = lambda net, state: current.update(precision=state["precision"])
    return search, current


def test_a_scaled_prior_climbs_from_the_evidence_maximiser():
    """``prior_std_scale=16`` (a precision factor of 2**8): the climb starts at the last update's
    precisions over the factor, the evidence's maximisers, finds the evidence's maximum 0.3 steps
    above them (a parabola) and ends at the factor times it. From the scaled precisions it would
    need 8 steps back, more than the climb takes."""
    unscaled, factor = np.array([8.0, 2.0]), 2.0**8
    visited = []

    def log_evidence(precision):
        visited.append(math.log2(precision[0] / unscaled[0]))
        return -3.0 * (visited[-1] - 0.3) ** 2

    search, _ = search_of_the_scales(factor * unscaled, log_evidence, factor, [0, 1])
    chosen = search._climb_scales(None)
    assert visited[0] == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(chosen["precision"], factor * 2**0.3 * unscaled, rtol=1e-9)


@pytest.mark.parametrize("predicted, bias", [
    ((2.0**3, 5.0), 4.0),  # the bias's own evidence promises a gain: the climb from its maximiser
    ((2.0**3, 0.05), 2.0**11),  # it promises under 0.1 nats: the state of the common scale
])
def test_the_output_bias_climbs_its_own_scale_after_the_common_one(predicted, bias):
    """Where the log evidence is a parabola in the log of each of two precisions, the weights'
    and the output bias's, the common scale's climb lands on the weights' maximiser, and the
    output bias's own climb then on the bias's, the weights held. The bias's climb starts
    from the maximiser of its own evidence where that promises a gain: where the bias is
    pinned at zero the evidence is flat in its precision, and a climb from there would not
    move; where it promises none, there is no climb."""
    def log_evidence(precision):
        weights, bias = np.log2(precision)
        return -3.0 * (weights - 4) ** 2 - 3.0 * (min(bias, 5) - 2) ** 2

    groups = ParameterGroups(["0.weight", "0.bias"], [0, 1], [0, 1], ["0.weight", "0.bias"],
                             [torch.Size([1, 1]), torch.Size([1])])
    search, current = search_of_the_scales(np.array([8.0, 2.0**10]), log_evidence, 1.0, groups,
                                           output_bias="0.bias", bias_covariance=None)
    search._output_bias_maximiser = lambda net, precision, covariance: predicted
    chosen = search._climb_scales(SimpleNamespace(criterion_=SimpleNamespace(likelihood=CategoricalLikelihood())))
    # The common scale climbs one step, to the weights' maximiser, the bias's precision to 2^11.
    np.testing.assert_allclose(chosen["precision"], [16.0, bias])
    assert current["precision"] is chosen["precision"]


def test_the_output_bias_evidence_finds_the_class_frequencies():
    """Softmax logits that are a bias alone: the maximiser that the bias's evidence predicts
    from a prior that pins the bias at zero is within 10% of the exact Laplace evidence's
    maximiser (the bias's MAP and curvature re-found at each precision), as is the gain, and
    from that maximiser it promises no gain. Here the bias alone is every weight, so its
    covariance with the others held is the posterior's."""
    rng = np.random.RandomState(0)
    y = rng.choice(6, size=300, p=[0.35, 0.25, 0.15, 0.12, 0.08, 0.05])
    Y = torch.as_tensor(y[:, None], dtype=torch.float64)
    likelihood = CategoricalLikelihood()

    def mode(precision):
        def negative_log_posterior(bias):
            logits = torch.as_tensor(bias).expand(len(y), -1)
            return float(-likelihood.log_prob(logits, Y).sum()) + 0.5 * precision * bias @ bias

        return torch.as_tensor(minimize(negative_log_posterior, np.zeros(6), method="BFGS", tol=1e-10).x)

    def laplace_evidence(log_precision):
        precision = math.exp(log_precision)
        bias = mode(precision)
        logits = bias.expand(len(y), -1)
        hessian = likelihood.output_hessian(logits).sum(0) + precision * torch.eye(6, dtype=torch.float64)
        return float(likelihood.log_prob(logits, Y).sum() - 0.5 * precision * bias @ bias
                     + 3 * math.log(precision) - 0.5 * torch.logdet(hessian))

    def predicted(precision):
        bias = mode(precision)
        covariance = bias_alone_covariance(likelihood, bias.expand(len(y), -1), precision)
        return output_bias_maximiser(bias, precision, covariance)

    log_exact = minimize_scalar(lambda x: -laplace_evidence(x), bounds=(-5, 5), method="bounded").x
    pinned = 1e6
    maximiser, gain = predicted(pinned)
    assert maximiser == pytest.approx(math.exp(log_exact), rel=0.1)
    assert gain == pytest.approx(laplace_evidence(log_exact) - laplace_evidence(math.log(pinned)), rel=0.1)
    assert predicted(math.exp(log_exact))[1] < 0.05


def test_the_classifier_ends_at_the_exact_evidence_where_its_updates_are_kronecker_factored(monkeypatch):
    """The training's updates take the Kronecker-factored evidence (forced here, as for a
    network too large for the exact ones); the converged states of ``finish`` take the
    full GGN's wherever the posterior's curvature is full: the final record is the
    exact Laplace evidence of the fitted posterior, which the factors' is not."""
    force_structure(monkeypatch, "kron")
    rng = np.random.RandomState(1)
    centres = np.array([[0.0, 2.0], [2.0, -1.0], [-2.0, -1.0]])
    y = np.repeat(np.arange(3), 20)
    X = centres[y] + 0.8 * rng.randn(60, 2)
    clf = sklearn_quinn.LaplaceClassifier(hidden_layer_sizes=(6,), max_epochs=200, random_state=0).fit(X, y)
    final = clf.evidence_history_[-1]
    assert final["stage"] == "final"
    exact = clf.log_marginal_likelihood()
    assert final["log_evidence"] == pytest.approx(exact, abs=1e-6)
    model = clf._model
    labels = torch.as_tensor(np.searchsorted(clf.classes_, y)[:, None])
    likelihood = clf.net_.criterion_.likelihood.frozen(1)
    factored = LaplaceEvidence(model, model.flatten().detach(), clf._validated_inputs(X), labels,
                               likelihood, ParameterGroups.of(model))
    assert factored.structure == "kron"
    assert abs(factored.log_evidence(list(clf.prior_precisions_.values())) - exact) > 0.1


def test_residuals_of_less_than_one_degree_of_freedom_leave_the_noise():
    """Three rows, four weights: under a weak prior the well-determined weights take nearly
    every row (gamma above N - 1), the residuals cannot tell the noise from the fit, and
    maximise leaves the noise where it is; under a strong prior they leave the residuals
    their degrees of freedom, and the noise moves to MacKay's SSE / (N - gamma)."""
    X, y = linear_data(3)
    for precision, moves in ((1e-4, False), (10.0, True)):
        theta = exact_map(X, y, precision, precision, 0.5)
        evidence = linear_evidence(X, y, 0.5, theta)
        groups = np.full(len(evidence.groups), precision)
        gamma = float(evidence.well_determined(groups).sum())
        assert (gamma < len(y) - 1) == moves
        _, noise_scale, _ = evidence.maximise(groups, learn_prior=False, learn_noise=True)
        assert (noise_scale != 1.0) == moves


@pytest.mark.slow
def test_the_learned_noise_of_a_few_dozen_rows_does_not_collapse():
    """20 rows of 8 features (``benchmarks/bench_noise_collapse.py``, seed 5): the network can
    fit every row, and with the noise divided by one residual degree of freedom where the
    well-determined weights left fewer, noise and fit drove each other down to 0.0015 against
    the data's 0.3. Now the learned noise stays within a factor of three of the data's."""
    rng = np.random.RandomState(5)
    X = rng.randn(1020, 8)
    y = np.sin(X[:, 0]) + X[:, 1] - 0.5 * X[:, 2] ** 2 + 0.5 * X[:, 3] * X[:, 4] + 0.3 * rng.randn(1020)
    X = (X[:20] - X[:20].mean(0)) / X[:20].std(0)
    assert 0.1 < LaplaceRegressor(random_state=5).fit(X, y[:20]).noise_std_ < 0.9


@pytest.mark.parametrize("scale, entry, jitter", [(1.0, "1", r"2\.22e-16"), (1e12, r"1e\+12", r"0\.000222")])
def test_a_jittered_factor_warns_with_its_jitter_and_a_clean_one_is_silent(scale, entry, jitter):
    """STYLE's rule for a curvature made positive definite: a ConvergenceWarning with the number.
    The jitter starts at ``eps`` times the largest diagonal entry, so a singular matrix of entries
    1e12 factorises as one of entries 1 does (an absolute jitter failed on it)."""
    import warnings

    singular = scale * torch.ones(2, 2, dtype=torch.float64)
    eps = torch.finfo(torch.float64).eps
    with pytest.warns(ConvergenceWarning, match=rf"The test matrix \(largest diagonal entry {entry}\) needed a "
                                                rf"diagonal jitter of {jitter} to factorise: why"):
        factor = evidence_module.jittered_cholesky(singular, eps, "The test matrix", ": why")
    torch.testing.assert_close(factor @ factor.mT, singular, rtol=1e-9, atol=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        evidence_module.jittered_cholesky(torch.eye(2, dtype=torch.float64), eps, "The identity")


def test_categorical_whitening_squares_to_the_softmax_hessian():
    """``S_n^T S_n = diag(p) - p p^T`` for the ``C - 1`` rows of the categorical whitening."""
    torch.manual_seed(3)
    logits = torch.randn(5, 4, dtype=torch.float64)
    factor = CategoricalLikelihood().whitened_jacobian(torch.eye(4, dtype=torch.float64).expand(5, -1, -1), logits)
    assert factor.shape == (5, 3, 4)
    p = torch.softmax(logits, -1)
    torch.testing.assert_close(factor.mT @ factor, torch.diag_embed(p) - p[:, :, None] * p[:, None, :])


def test_the_gaussian_data_fit_and_its_derivative_in_the_noise_scale():
    """``log p(D | theta*)`` at noise ``c * noise_std``: the normal density, and its derivative in
    ``log c`` that of the value (central differences)."""
    torch.manual_seed(0)
    outputs, y = torch.randn(7, 2, dtype=torch.float64), torch.randn(7, 2, dtype=torch.float64)
    noise = torch.tensor([0.5, 2.0], dtype=torch.float64)
    fit = GaussianLikelihood(noise).evidence_data_fit(outputs, y)
    for log_c in (-0.7, 0.0, 0.4):
        value, derivative = fit(log_c)
        expected = norm.logpdf(y.numpy(), outputs.numpy(), math.exp(log_c) * noise.numpy()).sum()
        assert value == pytest.approx(expected, rel=1e-12)
        h = 1e-5
        assert derivative == pytest.approx((fit(log_c + h)[0] - fit(log_c - h)[0]) / (2 * h), rel=1e-6)


def test_the_output_bias_gain_leaves_out_a_direction_the_data_do_not_inform():
    """The docstring's gain by hand over the same grid, with the direction whose posterior variance
    is the prior's (``1 / precision``: 0.25 at a precision of 4) left out as uninformed (compared
    with a variance of 1, it was kept and its gain grew without bound)."""
    precision = 4.0
    bias = torch.tensor([0.3, 1.0], dtype=torch.float64)
    covariance = torch.diag(torch.tensor([1 / precision, 0.1], dtype=torch.float64))
    maximiser, gain = output_bias_maximiser(bias, precision, covariance)
    grid = precision * 2.0 ** np.linspace(-20.0, 0.0, 201)
    moved, variance, start = grid - precision, 0.1, 1.0**2  # the informed direction alone
    widened = 1.0 + moved * variance
    expected = (-moved * start / widened - np.log(widened)) / 2 + np.log(grid / precision) / 2
    assert maximiser == pytest.approx(grid[np.argmax(expected)], rel=1e-9)
    assert gain == pytest.approx(expected.max(), rel=1e-9)


def test_the_column_hyperprior_is_about_the_columns_arithmetic_mean():
    """``a sum_c log(delta_c / m)``, ``m`` the columns' arithmetic mean precision: zero for tied
    columns, below zero for spread ones (with ``m`` their geometric mean it was zero always)."""
    model = FunctionalModel(build_mlp(3, 1, (4,), "tanh").double())
    groups = ParameterGroups.of(model)
    hyperprior = ColumnHyperprior(groups, shape=0.5)
    (columns,) = groups.column_layers()
    assert len(columns) == 3
    precision = torch.ones(len(groups), dtype=torch.float64)
    assert hyperprior.log_density(precision) == 0.0
    precision[columns] = torch.tensor([0.5, 2.0, 8.0], dtype=torch.float64)
    expected = 0.5 * np.log(np.array([0.5, 2.0, 8.0]) / 3.5).sum()
    assert hyperprior.log_density(precision) == pytest.approx(expected, rel=1e-12)

