"""hessian_structure='auto': the richest curvature that fits the memory budget and a fit's time."""

import numpy as np
import pytest
import torch

from sklearn_quinn import LaplaceClassifier, LaplaceRegressor
from sklearn_quinn._core import curvature as curvature_module
from sklearn_quinn._core.curvature import choose_structure
from sklearn_quinn._core.kronecker import KroneckerLayer


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    X = rng.randn(60, 3)
    return X, X[:, 0] - X[:, 1] ** 2 + 0.1 * rng.randn(60)


def small(**params):
    return LaplaceRegressor(hidden_layer_sizes=(8,), max_epochs=30, random_state=0, **params)


def test_a_small_network_gets_the_full_structure(data):
    regressor = small().fit(*data)
    assert regressor.hessian_structure_ == "full"
    assert "within the memory budget" in regressor.hessian_structure_reason_
    explicit = small(hessian_structure="full").fit(*data)
    np.testing.assert_array_equal(regressor.predict(data[0], return_std=True),
                                  explicit.predict(data[0], return_std=True))
    assert explicit.hessian_structure_reason_ == "as asked"


def test_over_the_memory_budget_auto_takes_the_diagonal(data):
    regressor = small(memory_budget=1000).fit(*data)
    assert regressor.hessian_structure_ == "diag"
    assert "over the memory budget" in regressor.hessian_structure_reason_
    assert regressor.posterior_.std is not None


def test_over_the_size_limit_auto_takes_kron_then_the_diagonal(data, monkeypatch):
    labels = data[1] > 0
    # Layers 3 -> 4 -> 2 and the skip 3 -> 2: 36 weights, the widest factor 5 x 5.
    monkeypatch.setattr(curvature_module, "AUTO_MAX_FULL_PARAMS", 10)
    classifier = LaplaceClassifier(hidden_layer_sizes=(4,), cov_scale=1.0, max_epochs=20,
                                   random_state=0).fit(data[0], labels)
    assert classifier.hessian_structure_ == "kron"
    assert "would take minutes" in classifier.hessian_structure_reason_
    monkeypatch.setattr(curvature_module, "AUTO_MAX_FULL_PARAMS", 4)
    classifier = LaplaceClassifier(hidden_layer_sizes=(4,), cov_scale=1.0, max_epochs=20,
                                   random_state=0).fit(data[0], labels)
    assert classifier.hessian_structure_ == "diag"
    assert "too large to decompose" in classifier.hessian_structure_reason_


def test_the_hessian_over_the_size_limit_takes_the_diagonal_saying_why(data, monkeypatch):
    """The reason said 'no nn.Linear layer to factor' of an MLP: the Hessian has no factors."""
    monkeypatch.setattr(curvature_module, "AUTO_MAX_FULL_PARAMS", 10)
    classifier = LaplaceClassifier(hidden_layer_sizes=(4,), cov_scale=1.0, curvature="hessian", max_epochs=20,
                                   random_state=0).fit(data[0], data[1] > 0)
    assert classifier.hessian_structure_ == "diag"
    assert classifier.hessian_structure_reason_.endswith("the exact Hessian has no Kronecker factors")


def test_over_the_memory_budget_for_full_auto_takes_kron(data):
    # Full: 4 matrices of 44 x 44 doubles (61,952 bytes); kron: factors and eigenvectors of
    # 8 x 8, 4 x 4, 1 x 1, 9 x 9 and (the skip) 1 x 1, 3 x 3: 2,752 bytes.
    regressor = small(memory_budget=10_000).fit(*data)
    assert regressor.hessian_structure_ == "kron"
    assert "over the memory budget" in regressor.hessian_structure_reason_
    assert regressor.posterior_.basis is not None


def test_the_choice_in_figures():
    assert choose_structure(100, torch.float64, 1024**3)[0] == "full"
    # 4 matrices of 1000 x 1000 doubles are 32,000,000 bytes; of floats, half.
    assert choose_structure(1000, torch.float64, 31_999_999)[0] == "diag"
    assert choose_structure(1000, torch.float64, 32_000_000)[0] == "full"
    assert choose_structure(1000, torch.float32, 16_000_000)[0] == "full"
    assert choose_structure(5001, torch.float64, 10 * 1024**3)[0] == "diag"
    # One layer of 1000 outputs and 1000 inputs: two 1000 x 1000 pairs of doubles, 32,000,000 bytes.
    layer = [KroneckerLayer("0", None, 1000, 1000)]
    assert choose_structure(10**6, torch.float64, 32_000_000, layer)[0] == "kron"
    assert choose_structure(10**6, torch.float64, 31_999_999, layer)[0] == "diag"
    wide = [KroneckerLayer("0", None, 1, 5001)]
    assert choose_structure(5001, torch.float64, 10 * 1024**3, wide)[0] == "diag"


@pytest.mark.slow
def test_auto_on_a_network_of_140k_weights_takes_kron_and_predicts_finite_positive_stds():
    rng = np.random.RandomState(0)
    X = rng.randn(200, 20)
    y = np.tanh(X[:, :3].sum(1)) + 0.1 * rng.randn(200)
    regressor = LaplaceRegressor(hidden_layer_sizes=(256, 256, 256), max_epochs=8, random_state=0).fit(X, y)
    n_params = regressor.posterior_.mean.shape[0]
    assert 130_000 < n_params < 150_000
    assert regressor.hessian_structure_ == "kron"
    mean, std = regressor.predict(X[:50], return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(std)) and np.all(std > 0)


@pytest.mark.parametrize("params, message", [
    ({"hessian_structure": "kfac"}, "hessian_structure"),
    ({"memory_budget": 0}, "memory_budget"),
    ({"memory_budget": "lots"}, "memory_budget"),
])
def test_bad_structure_parameters_are_refused(data, params, message):
    with pytest.raises(ValueError, match=message):
        small(**params).fit(*data)
