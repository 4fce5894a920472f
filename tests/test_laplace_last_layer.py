"""Last-layer Laplace: exact Bayesian linear regression on the network's last hidden features."""

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose
from torch import nn

from sklearn_quinn import LaplaceClassifier, LaplaceRegressor


@pytest.fixture(scope="module")
def wave():
    rng = np.random.RandomState(0)
    X = rng.uniform(-3, 3, size=(80, 2))
    return X, np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.randn(80)


def features(regressor, X):
    """The last hidden layer's output at the MAP, with a column of ones for the bias."""
    phi, rest = regressor._model.features(torch.as_tensor(X))
    return np.column_stack([phi.numpy(), np.ones(len(X))]), rest.numpy()[:, 0]


@pytest.mark.parametrize("linear_skip", [False, True])
def test_last_layer_is_bayesian_linear_regression_on_the_features(wave, linear_skip):
    X, y = wave
    noise_std, prior_precision = 0.2, 1.0  # the prior the MAP trains under
    regressor = LaplaceRegressor(
        hidden_layer_sizes=(16, 8), linear_skip=linear_skip, subset_of_weights="last_layer",
        prior_std=1.0, prior_precision=prior_precision, noise_std=noise_std, normalize_X=False, normalize_y=False,
        max_epochs=200, random_state=0,
    ).fit(X, y)
    Phi, rest = features(regressor, X)
    precision = Phi.T @ Phi / noise_std**2 + prior_precision * np.eye(Phi.shape[1])
    covariance = np.linalg.inv(precision)
    X_test = np.random.RandomState(1).uniform(-4, 4, size=(20, 2))
    Phi_test, rest_test = features(regressor, X_test)
    mean, std = regressor.predict(X_test, return_std=True)
    assert_allclose(mean, Phi_test @ regressor.posterior_.mean.numpy() + rest_test, rtol=1e-10, atol=1e-12)
    expected = np.einsum("nk,kl,nl->n", Phi_test, covariance, Phi_test) + noise_std**2
    assert_allclose(std, np.sqrt(expected), rtol=1e-8)
    # The Laplace evidence of the linear model at the MAP's last layer: log p(y | theta) +
    # log p(theta) + k/2 log 2 pi - 1/2 log det(precision), which is the exact evidence at its mode.
    theta = regressor.posterior_.mean.numpy()
    residual = y - rest - Phi @ theta
    n_rows, k = Phi.shape
    log_likelihood = -0.5 * residual @ residual / noise_std**2 - n_rows * np.log(noise_std * np.sqrt(2 * np.pi))
    log_prior = -0.5 * prior_precision * theta @ theta + 0.5 * k * np.log(prior_precision / (2 * np.pi))
    expected = log_likelihood + log_prior + 0.5 * k * np.log(2 * np.pi) - 0.5 * np.linalg.slogdet(precision)[1]
    assert regressor.log_marginal_likelihood() == pytest.approx(expected, rel=1e-10)


def test_on_a_single_linear_module_last_layer_is_the_full_laplace(wave):
    X, y = wave
    common = dict(module=nn.Linear(2, 1), prior_std=1.0, noise_std=0.3, max_epochs=50, random_state=0)
    full = LaplaceRegressor(**common).fit(X, y)
    last = LaplaceRegressor(subset_of_weights="last_layer", **common).fit(X, y)
    assert_allclose(last.predict(X, return_std=True), full.predict(X, return_std=True), rtol=1e-10)
    assert last.log_marginal_likelihood() == pytest.approx(full.log_marginal_likelihood(), rel=1e-10)
    assert last.prior_precision_ == pytest.approx(full.prior_precision_, rel=1e-10)


def test_last_layer_keeps_only_that_layers_prior_groups(wave):
    regressor = LaplaceRegressor(hidden_layer_sizes=(8,), linear_skip=False, subset_of_weights="last_layer",
                                 max_epochs=100, random_state=0).fit(*wave)
    assert list(regressor.prior_precisions_) == ["2.weight", "2.bias"]
    assert regressor.posterior_.mean.shape == (9,)
    parts = regressor.predict_uncertainty(wave[0][:5])
    assert np.all(parts.epistemic_std > 0) and np.all(np.isfinite(parts.std))


def test_last_layer_classifier(wave):
    X, y = wave
    labels = (y > 0).astype(int)
    classifier = LaplaceClassifier(hidden_layer_sizes=(8,), subset_of_weights="last_layer", max_epochs=100,
                                   random_state=0).fit(X, labels)
    proba = classifier.predict_proba(X)
    assert proba.shape == (80, 2) and np.allclose(proba.sum(1), 1)
    assert classifier.posterior_.mean.shape == (8 * 2 + 2,)  # two logits over 8 features and a bias


class ScaledOutput(nn.Module):
    """Its outputs are twice its last layer's: not a sum of that layer and a fixed term."""

    def __init__(self, n_features, n_outputs):
        super().__init__()
        self.hidden, self.out = nn.Linear(n_features, 4), nn.Linear(4, n_outputs)

    def forward(self, X):
        return 2 * self.out(torch.tanh(self.hidden(X)))


def test_a_module_not_affine_in_its_last_layer_is_refused(wave, monkeypatch):
    """Before the MAP training, which it came after."""
    monkeypatch.setattr(LaplaceRegressor, "_fit_map", lambda *args: pytest.fail("the MAP was trained"))
    regressor = LaplaceRegressor(module=ScaledOutput, subset_of_weights="last_layer", max_epochs=5)
    with pytest.raises(ValueError, match="last nn.Linear's outputs plus a term"):
        regressor.fit(*wave)


class HeadFirst(nn.Module):
    """An MLP whose output layer is registered before its hidden one."""

    def __init__(self, n_features, n_outputs):
        super().__init__()
        self.out, self.hidden = nn.Linear(4, n_outputs), nn.Linear(n_features, 4)

    def forward(self, X):
        return self.out(torch.tanh(self.hidden(X)))


def test_the_last_layer_is_the_one_applied_last(wave):
    """The last nn.Linear registered was taken for the last applied: a head registered first failed
    with a RuntimeError reshaping the hidden layer's outputs."""
    regressor = LaplaceRegressor(module=HeadFirst, subset_of_weights="last_layer", max_epochs=5,
                                 random_state=0).fit(*wave)
    assert list(regressor.prior_precisions_) == ["out.weight", "out.bias"]


def test_a_wide_float32_mlp_is_affine_in_its_last_layer_to_its_rounding():
    """A float32 layer 512 wide rounds its sums near 4e-5, past a fixed tolerance of 1e-6 relative:
    the MLP was refused as not affine in its last layer, at random by the seed."""
    rng = np.random.RandomState(0)
    X = rng.randn(200, 20)
    y = np.sin(X[:, 0]) + 0.1 * rng.randn(200)
    regressor = LaplaceRegressor(hidden_layer_sizes=(512,), max_epochs=3, dtype="float32", random_state=0,
                                 subset_of_weights="last_layer").fit(X, y)
    assert np.isfinite(regressor.predict(X[:5], return_std=True)[1]).all()


def test_an_unknown_subset_is_refused(wave):
    with pytest.raises(ValueError, match="subset_of_weights"):
        LaplaceRegressor(subset_of_weights="first_layer").fit(*wave)


@pytest.mark.parametrize("use", ["predict", "linearised"])
def test_outputs_and_jacobian_run_the_body_once(wave, use):
    """The linearised predictive and the calibrations' linearisation each read the outputs and
    the Jacobian at the same rows, which one forward pass of the body gives (each used to run it
    twice)."""
    X, y = wave
    regressor = LaplaceRegressor(hidden_layer_sizes=(16, 8), subset_of_weights="last_layer", prior_std=1.0,
                                 noise_std=0.2, max_epochs=20, random_state=0).fit(X, y)
    model = regressor._model
    calls = []
    handle = model._body.register_forward_hook(lambda *_: calls.append(1))
    try:
        if use == "predict":
            regressor.predict(X[:10], return_std=True)
        else:
            regressor._laplace.linearised(model, torch.as_tensor(X[:10]))
    finally:
        handle.remove()
    assert len(calls) == 1
