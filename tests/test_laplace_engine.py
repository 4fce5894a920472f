"""The Laplace engine against the closed-form linear-Gaussian model."""

import math
import warnings

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar
from scipy.stats import multivariate_normal
from torch import nn

from sklearn_quinn._core.likelihoods import GaussianLikelihood
from sklearn_quinn._core.network import FunctionalModel, build_mlp
from sklearn_quinn._core.pushforward import linear_pushforward
from sklearn_quinn.laplace._engine import LaplaceApproximation

from .exact import BayesianLinearRegression

NOISE, PRIOR_STD = 0.3, 2.0


def _linear_laplace(X, y, structure="full", kind="ggn", noise=NOISE, prior_std=PRIOR_STD):
    """The engine at the exact MAP of the linear model (noise NOISE, prior prior_std)."""
    torch.manual_seed(0)
    model = FunctionalModel(nn.Linear(X.shape[1], 1).double())
    exact = BayesianLinearRegression(X, y, NOISE, prior_std)
    theta = torch.tensor(exact.mean)  # the MAP, in closed form
    laplace = LaplaceApproximation(
        model,
        theta,
        torch.tensor(X),
        torch.tensor(y)[:, None],
        GaussianLikelihood(torch.tensor([noise], dtype=torch.float64)),
        kind=kind,
        structure=structure,
    )
    return laplace, exact


@pytest.mark.parametrize("kind", ["ggn", "hessian"])
def test_posterior_is_exact_for_a_linear_model(linear_data, kind):
    laplace, exact = _linear_laplace(*linear_data, kind=kind)
    posterior = laplace.posterior(PRIOR_STD**-2)
    np.testing.assert_allclose(posterior.covariance.numpy(), exact.covariance, rtol=1e-10)


@pytest.mark.parametrize("prior_std", [0.3, 2.0, 10.0])
def test_evidence_is_exact(linear_data, prior_std):
    laplace, exact = _linear_laplace(*linear_data, prior_std=prior_std)
    value = float(laplace.log_marginal_likelihood(prior_std**-2))
    np.testing.assert_allclose(value, exact.log_evidence(), rtol=1e-10)


@pytest.mark.parametrize("structure", ["full", "diag"])
def test_noise_scale_equals_recomputing_at_the_scaled_noise(linear_data, structure):
    """The curvature scales as noise**-2 (GGN) and noise**-4 (EF): re-scaling must
    give what a fresh curvature at the scaled noise gives, through the Cholesky factor
    ('full') and through the spectrum ('diag') alike."""
    for kind in ("ggn", "ef"):
        laplace, _ = _linear_laplace(*linear_data, structure=structure, kind=kind)
        rescaled, _ = _linear_laplace(*linear_data, structure=structure, kind=kind, noise=NOISE * 1.7)
        np.testing.assert_allclose(
            float(laplace.log_marginal_likelihood(0.4, noise_scale=1.7)),
            float(rescaled.log_marginal_likelihood(0.4)),
            rtol=1e-10,
        )
        torch.testing.assert_close(
            laplace.posterior(0.4, noise_scale=1.7).covariance, rescaled.posterior(0.4).covariance
        )


def test_maximise_evidence_finds_the_maximum(linear_data):
    laplace, _ = _linear_laplace(*linear_data)
    found, scale = laplace.maximise_evidence(1.0)
    assert scale == 1.0
    best = minimize_scalar(
        lambda log_delta: -float(laplace.log_marginal_likelihood(math.exp(log_delta))),
        bounds=(-10, 10),
        method="bounded",
        options={"xatol": 1e-10},
    )
    np.testing.assert_allclose(math.log(found), best.x, atol=1e-4)


def test_maximise_evidence_jointly_over_noise(linear_data):
    laplace, _ = _linear_laplace(*linear_data)
    delta, scale = laplace.maximise_evidence(1.0, tune_noise=True)
    best = float(laplace.log_marginal_likelihood(delta, scale))
    for d_delta, d_scale in [(1.05, 1), (0.95, 1), (1, 1.02), (1, 0.98)]:
        assert float(laplace.log_marginal_likelihood(delta * d_delta, scale * d_scale)) < best


def test_cov_scale_divides_the_covariance(linear_data):
    laplace, _ = _linear_laplace(*linear_data)
    torch.testing.assert_close(
        laplace.posterior(0.25, cov_scale=4.0).covariance, laplace.posterior(0.25).covariance / 4.0
    )


def test_diagonal_uses_the_diagonal_of_the_exact_precision(linear_data):
    laplace, exact = _linear_laplace(*linear_data, structure="diag")
    posterior = laplace.posterior(PRIOR_STD**-2)
    np.testing.assert_allclose(posterior.variance.numpy(), 1 / np.diag(exact.precision), rtol=1e-10)


def test_indefinite_hessian_is_clipped_with_a_warning():
    """Away from a minimum the Hessian has negative eigenvalues: they must not
    reach the posterior."""
    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(2, 1, (6,), "tanh").double())
    X = torch.randn(20, 2, dtype=torch.float64)
    Y = 3 * torch.randn(20, 1, dtype=torch.float64)
    noise = torch.tensor([0.1], dtype=torch.float64)
    with pytest.warns(UserWarning, match=r"negative eigenvalues .*set to zero"):
        laplace = LaplaceApproximation(model, model.flatten(), X, Y, GaussianLikelihood(noise), "hessian", "full")
    assert laplace.n_negative > 0 and (laplace.eigenvalues >= 0).all()
    posterior = laplace.posterior(1.0)
    assert (torch.linalg.eigvalsh(posterior.covariance) > 0).all()


@pytest.mark.parametrize("structure", ["full", "diag"])
def test_a_per_weight_prior_shape_gives_the_exact_posterior_and_evidence(linear_data, structure):
    """Under ``N(0, (delta P)^-1)`` with ``P = diag(p)`` the engine works in the whitened weights;
    the posterior it returns must be the linear model's exact one at the prior precisions
    ``delta p`` (its diagonal's inverse for 'diag'), and the evidence the exact
    ``log N(y; 0, noise^2 I + A diag(1 / (delta p)) A^T)``, the ``log det P`` cancelling."""
    X, y = linear_data
    delta = 0.5
    shape = np.array([0.2, 1.0, 3.0, 8.0])  # unequal, so a whitening slip cannot cancel
    exact = BayesianLinearRegression(X, y, NOISE, (delta * shape) ** -0.5)
    model = FunctionalModel(nn.Linear(X.shape[1], 1).double())
    laplace = LaplaceApproximation(
        model, torch.tensor(exact.mean), torch.tensor(X), torch.tensor(y)[:, None],
        GaussianLikelihood(torch.tensor([NOISE], dtype=torch.float64)), structure=structure,
        prior_shape=torch.tensor(shape),
    )
    posterior = laplace.posterior(delta)
    if structure == "full":
        np.testing.assert_allclose(posterior.covariance.numpy(), exact.covariance, rtol=1e-10)
    else:
        np.testing.assert_allclose(posterior.variance.numpy(), 1 / np.diag(exact.precision), rtol=1e-10)
    design = exact.design(X)
    marginal = NOISE**2 * np.eye(len(y)) + design @ np.diag(1 / (delta * shape)) @ design.T
    expected = multivariate_normal(np.zeros(len(y)), marginal).logpdf(y)
    if structure == "full":  # the evidence of 'diag' is that of its diagonal curvature, not the exact one
        np.testing.assert_allclose(laplace.log_marginal_likelihood(delta), expected, rtol=1e-10)


def test_a_clipped_hessian_rebuilds_its_precision_from_the_clipped_spectrum():
    """Away from a minimum the Hessian ``H = V diag(lambda) V^T`` is indefinite: the precision the
    posterior factorises must be ``V diag(max(lambda, 0)) V^T + delta I``, with ``H`` here from
    autograd of the Gaussian negative log likelihood ``sum (y - f)^2 / (2 sigma^2)``."""
    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(2, 1, (6,), "tanh").double())
    X = torch.randn(20, 2, dtype=torch.float64)
    Y = 3 * torch.randn(20, 1, dtype=torch.float64)
    noise = 0.1
    theta = model.flatten()
    with pytest.warns(UserWarning, match="negative eigenvalues"):
        laplace = LaplaceApproximation(model, theta, X, Y, GaussianLikelihood(torch.tensor([noise])), "hessian")
    hessian = torch.autograd.functional.hessian(
        lambda weights: (Y - model.single(weights, X)).square().sum() / (2 * noise**2), theta)
    values, vectors = torch.linalg.eigh(hessian)
    assert (values < 0).any()
    delta = 2.0
    expected = (vectors * values.clamp(min=0.0)) @ vectors.T + delta * torch.eye(len(theta), dtype=torch.float64)
    cholesky = laplace.posterior(delta).precision_cholesky
    torch.testing.assert_close(cholesky @ cholesky.T, expected, rtol=1e-9, atol=1e-8 * float(values.abs().max()))


def test_a_positive_semi_definite_hessian_with_a_zero_eigenvalue_is_not_warned_of(linear_data):
    """A repeated input column gives the Hessian an exact zero eigenvalue, which round-off puts a
    few ulps either side of zero: that is no negative curvature, and must neither warn nor count."""
    X, y = linear_data
    X = np.hstack([X, X[:, :1], X[:, :1], X[:, 1:2]])  # three zero eigenvalues of X^T X
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        laplace, _ = _linear_laplace(X, y, kind="hessian")
    assert laplace.n_negative == 0
    assert (laplace.eigenvalues[:3].abs() < 1e-10 * float(laplace.eigenvalues.max())).all()


@pytest.mark.parametrize("kind", ["ggn", "ef"])
def test_evidence_gradient_matches_finite_differences(linear_data, kind):
    laplace, _ = _linear_laplace(*linear_data, kind=kind)
    x = np.array([math.log(0.7), math.log(1.3)])
    _, gradient = laplace._evidence(*x)
    step = 1e-6
    for axis in range(2):
        shift = np.eye(2)[axis] * step
        numeric = (laplace._evidence(*(x + shift))[0] - laplace._evidence(*(x - shift))[0]) / (2 * step)
        np.testing.assert_allclose(gradient[axis], numeric, rtol=1e-6)


def test_each_posterior_is_that_of_its_own_prior_and_scales(linear_data):
    """The last Cholesky factor is kept and re-scaled for another ``cov_scale``: whatever the
    order of the calls, each posterior's precision is ``s (X^T X / (c sigma)^2 + delta I)``."""
    laplace, exact = _linear_laplace(*linear_data)
    data_precision = exact.precision - PRIOR_STD**-2 * np.eye(len(exact.precision))
    # (0.5, 1.0) after (0.5, 1.3): the same prior precision at another noise scale needs a new factor.
    for delta, noise_scale, cov_scale in [(0.25, 1.0, 4.0), (0.25, 1.0, 1.0), (0.5, 1.3, 1.0), (0.5, 1.0, 1.0),
                                          (0.25, 1.0, 4.0)]:
        expected = cov_scale * (data_precision / noise_scale**2 + delta * np.eye(len(data_precision)))
        covariance = laplace.posterior(delta, noise_scale, cov_scale).covariance.numpy()
        np.testing.assert_allclose(covariance, np.linalg.inv(expected), rtol=1e-10)


@pytest.mark.parametrize("structure", ["full", "kron", "lowrank", "diag"])
def test_linearised_covariance_equals_the_posteriors_pushforward(structure):
    """The calibration path's covariances (from the spectrum) and the predictive's (from the
    posterior's factor) are one covariance, under a per-weight prior shape and any scales."""
    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(3, 2, (5,), "tanh").double())
    X = torch.randn(30, 3, dtype=torch.float64)
    Y = torch.randn(30, 2, dtype=torch.float64)
    theta = model.flatten()
    # One precision per parameter tensor (the Kronecker factors need one per layer's input column).
    shape = torch.cat([torch.full((p.numel(),), 0.5 + i, dtype=torch.float64)
                       for i, p in enumerate(model.module.parameters())])
    noise = torch.tensor([0.5, 0.8], dtype=torch.float64)
    laplace = LaplaceApproximation(model, theta, X, Y, GaussianLikelihood(noise), structure=structure,
                                   prior_shape=shape, rank=10)
    mean, covariance = laplace.linearised(model, X)
    for scales in [(0.7, 1.0, 1.0), (0.7, 1.0, 3.0), (2.0, 1.4, 0.5)]:
        outputs = linear_pushforward(model, laplace.posterior(*scales), X)
        torch.testing.assert_close(outputs.mean, mean)
        torch.testing.assert_close(outputs.factor @ outputs.factor.mT, covariance(*scales), rtol=1e-9, atol=1e-12)
