"""hessian_structure='lowrank': the curvature's top eigenpairs from curvature products, the prior elsewhere."""

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose

from sklearn_quinn import LaplaceClassifier, LaplaceRegressor
from sklearn_quinn._core.curvature import curvature, curvature_matmul, curvature_operator
from sklearn_quinn._core.likelihoods import GaussianLikelihood
from sklearn_quinn._core.low_rank import LowRankEigenbasis, top_eigenpairs
from sklearn_quinn._core.network import FunctionalModel, build_mlp
from sklearn_quinn._core.posterior import GaussianPosterior


def _data(n_rows):
    rng = np.random.RandomState(0)
    X = rng.randn(n_rows, 3)
    return X, X[:, 0] - X[:, 1] ** 2 + 0.1 * rng.randn(n_rows)


@pytest.mark.parametrize("prior_precision", [2.0, "marglik"])
def test_with_the_whole_spectrum_lowrank_is_the_full_laplace(prior_precision):
    # 30 rows x 1 output: the GGN of the 3-16-1 network (81 weights) has rank at most 30, so its
    # top 35 eigenpairs are all of it, found by the randomized sketch (45 columns of 81).
    # 'marglik' learns one prior precision per tensor (whitened).
    X, y = _data(30)
    common = dict(hidden_layer_sizes=(16,), linear_skip=False, prior_precision=prior_precision, max_epochs=100,
                  random_state=0)
    full = LaplaceRegressor(hessian_structure="full", **common).fit(X, y)
    lowrank = LaplaceRegressor(hessian_structure="lowrank", max_rank=35, **common).fit(X, y)
    assert lowrank.hessian_structure_ == "lowrank"
    assert_allclose(lowrank.posterior_.covariance.numpy(), full.posterior_.covariance.numpy(), rtol=1e-6,
                    atol=1e-10)
    assert_allclose(lowrank.posterior_.variance.numpy(), full.posterior_.variance.numpy(), rtol=1e-6)
    assert_allclose(lowrank.predict(X, return_std=True), full.predict(X, return_std=True), rtol=1e-6)
    assert lowrank.log_marginal_likelihood() == pytest.approx(full.log_marginal_likelihood(), rel=1e-8)
    assert lowrank.prior_precision_ == pytest.approx(full.prior_precision_, rel=1e-6)


def test_a_smaller_rank_keeps_the_top_of_the_spectrum_and_the_prior_elsewhere():
    # Rank 5 of a rank-30 curvature: the posterior precision is U diag(lambda) U^T + delta I
    # with (lambda, U) the top 5 eigenpairs of the exact GGN.
    X, y = _data(30)
    regressor = LaplaceRegressor(hidden_layer_sizes=(8,), linear_skip=False, prior_std=1.0, prior_precision=2.0,
                                 hessian_structure="lowrank", max_rank=5, max_epochs=100, random_state=0).fit(X, y)
    laplace = regressor._laplace
    model, theta = regressor._model, laplace.theta
    X_, Y_ = regressor._validated_inputs(X), regressor._tensor(((y - y.mean()) / y.std())[:, None])
    noise = GaussianLikelihood(regressor._map_noise_std).double().frozen(1)
    values, vectors = torch.linalg.eigh(curvature(model, theta, X_, Y_, noise, "ggn", "full"))
    top_values, top_vectors = values[-5:], vectors[:, -5:]
    precision = (top_vectors * top_values) @ top_vectors.T + 2.0 * torch.eye(len(theta), dtype=theta.dtype)
    torch.testing.assert_close(regressor.posterior_.covariance, torch.linalg.inv(precision), rtol=0, atol=1e-6)
    assert laplace.eigenvalues[5:].abs().max() == 0
    torch.testing.assert_close(laplace.eigenvalues[:5].flip(0), top_values, rtol=1e-6, atol=0)


def test_top_eigenpairs_of_a_matrix_with_a_decaying_spectrum():
    generator = torch.Generator().manual_seed(0)
    vectors = torch.linalg.qr(torch.randn(300, 300, generator=generator, dtype=torch.float64))[0]
    spectrum = 0.7 ** torch.arange(300, dtype=torch.float64)
    matrix = (vectors * spectrum) @ vectors.T
    values, found = top_eigenpairs(lambda block: matrix @ block, 300, 20, torch.float64, "cpu")
    torch.testing.assert_close(values, spectrum[:20], rtol=1e-6, atol=1e-12)
    alignment = (found.T @ vectors[:, :20]).diagonal().abs()
    assert float(alignment.min()) > 1 - 1e-6
    torch.testing.assert_close(found.T @ found, torch.eye(20, dtype=torch.float64))


def test_curvature_products_are_the_curvature_times_the_vectors():
    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(4, 2, (6,)).double())
    theta, X = model.flatten(), torch.randn(25, 4, dtype=torch.float64)
    Y = torch.randn(25, 2, dtype=torch.float64)
    likelihood = GaussianLikelihood(torch.full((2,), 0.5)).double().frozen(2)
    vectors = torch.randn(len(theta), 3, dtype=torch.float64)
    for kind in ("ggn", "ef"):
        full = curvature(model, theta, X, Y, likelihood, kind, "full")
        torch.testing.assert_close(curvature_matmul(model, theta, X, Y, likelihood, kind, vectors), full @ vectors)
        torch.testing.assert_close(curvature_operator(model, theta, X, Y, likelihood, kind)(vectors), full @ vectors)


def test_the_frame_posterior_agrees_with_its_covariance():
    # Sigma = P^-1/2 [U diag(s_R^2) U^T + s_0^2 (I - U U^T)] P^-1/2: variance, projection and samples.
    generator = torch.Generator().manual_seed(0)
    n_params, rank = 12, 4
    vectors = torch.linalg.qr(torch.randn(n_params, rank, generator=generator, dtype=torch.float64))[0]
    root = torch.rand(n_params, generator=generator, dtype=torch.float64) + 0.5
    basis = LowRankEigenbasis(torch.tensor([9.0, 4.0, 2.0, 1.0], dtype=torch.float64), vectors, root)
    std = (basis.coordinate_eigenvalues + 0.5).rsqrt()
    posterior = GaussianPosterior.from_basis(torch.zeros(n_params, dtype=torch.float64), basis, std)
    projector = vectors @ vectors.T
    expected = (vectors * std[:rank].square()) @ vectors.T + 0.5**-1 * (torch.eye(n_params) - projector)
    expected = expected / root[:, None] / root[None, :]
    torch.testing.assert_close(posterior.covariance, expected)
    torch.testing.assert_close(posterior.variance, expected.diagonal())
    jacobian = torch.randn(5, n_params, generator=generator, dtype=torch.float64)
    factor = posterior.project(jacobian)
    torch.testing.assert_close(factor @ factor.T, jacobian @ expected @ jacobian.T)
    samples = posterior.sample(200_000, generator)
    assert samples.shape == (200_000, n_params)
    torch.testing.assert_close(samples.T.cov(), expected, rtol=0, atol=0.03 * float(expected.abs().max()))


def test_the_frame_s_squared_apply_is_the_diagonal_for_any_coordinate_values():
    """``squared_apply(v)`` is the diagonal of ``B diag(v) B^T`` for every ``v`` of ``R + K``
    entries, the frame's ``K`` complement coordinates unequal among themselves too (a posterior
    gives them one value, which hides a term that only matters when they differ): against ``B``
    formed column by column from ``apply``."""
    generator = torch.Generator().manual_seed(3)
    n_params, rank = 9, 3
    vectors = torch.linalg.qr(torch.randn(n_params, rank, generator=generator, dtype=torch.float64))[0]
    root = torch.rand(n_params, generator=generator, dtype=torch.float64) + 0.5
    basis = LowRankEigenbasis(torch.tensor([5.0, 2.0, 1.0], dtype=torch.float64), vectors, root)
    dense = basis.apply(torch.eye(rank + n_params, dtype=torch.float64)).T  # B, (K, R + K)
    values = torch.rand(rank + n_params, generator=generator, dtype=torch.float64) + 0.1
    torch.testing.assert_close(basis.squared_apply(values), ((dense * values) @ dense.T).diagonal())


def test_classifier_with_the_whole_spectrum_is_the_full_laplace():
    # 3 classes on 20 rows: the softmax GGN has rank at most 20 x 2, within max_rank 45 (a sketch of
    # 55 columns of the 3-16-3 network's 115 weights, with its linear skip 124).
    X, y = _data(20)
    labels = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    common = dict(hidden_layer_sizes=(16,), prior_std=1.0, prior_precision=1.0, cov_scale=1.0, max_epochs=50,
                  random_state=0)
    full = LaplaceClassifier(hessian_structure="full", **common).fit(X, labels)
    lowrank = LaplaceClassifier(hessian_structure="lowrank", max_rank=45, **common).fit(X, labels)
    assert lowrank._laplace.basis.vectors.shape[1] == 45 < lowrank._laplace.n_params
    assert_allclose(lowrank.predict_proba(X), full.predict_proba(X), rtol=1e-6, atol=1e-9)


def test_a_zero_curvature_has_zero_eigenvalues():
    values, vectors = top_eigenpairs(torch.zeros_like, 50, 5, torch.float64, "cpu")
    assert torch.equal(values, torch.zeros(5, dtype=torch.float64)) and vectors.shape == (50, 5)


def test_lowrank_with_the_last_layer():
    X, y = _data(30)
    common = dict(hidden_layer_sizes=(8,), subset_of_weights="last_layer", max_epochs=50, random_state=0)
    full = LaplaceRegressor(hessian_structure="full", **common).fit(X, y)
    lowrank = LaplaceRegressor(hessian_structure="lowrank", **common).fit(X, y)
    assert_allclose(lowrank.predict(X, return_std=True), full.predict(X, return_std=True), rtol=1e-6)


def test_max_rank_must_be_positive():
    X, y = _data(30)
    with pytest.raises(ValueError, match="max_rank"):
        LaplaceRegressor(hessian_structure="lowrank", max_rank=0).fit(X, y)


def test_random_state_seeds_the_sketch(monkeypatch):
    """The sketch is drawn from the estimator's seeds: the same random_state
    gives the same sketch, another one another."""
    from sklearn_quinn.laplace import _engine

    seeds = []

    def recording(*args):
        seeds.append(args[-1])
        return top_eigenpairs(*args)

    monkeypatch.setattr(_engine, "top_eigenpairs", recording)
    X, y = _data(30)
    for random_state in (0, 0, 1):
        LaplaceRegressor(hidden_layer_sizes=(8,), hessian_structure="lowrank", max_rank=5, max_epochs=5,
                         random_state=random_state).fit(X, y)
    assert seeds[0] == seeds[1] != seeds[2]
