"""Posterior objects: Gaussian (full via precision Cholesky, diagonal) and samples."""

import math
import pickle

import pytest
import torch

from sklearn_quinn._core.posterior import GaussianPosterior, SamplePosterior, pack_lower, unpack_lower


def _spd(k, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(k, k, generator=g, dtype=torch.float64)
    return a @ a.T + k * torch.eye(k, dtype=torch.float64)


def test_full_gaussian_covariance_is_inverse_precision():
    precision = _spd(4)
    posterior = GaussianPosterior.from_precision_cholesky(
        torch.zeros(4, dtype=torch.float64), torch.linalg.cholesky(precision)
    )
    torch.testing.assert_close(posterior.covariance, torch.linalg.inv(precision))
    torch.testing.assert_close(posterior.variance, torch.linalg.inv(precision).diagonal())


@pytest.mark.parametrize("structure", ["full", "diag", "lowrank"])
def test_sample_moments_match(structure):
    """200k draws: mean within 5 standard errors, covariance within 2%."""
    k, n = 3, 200_000
    mean = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    std = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
    if structure == "full":
        precision = _spd(k)
        posterior = GaussianPosterior.from_precision_cholesky(mean, torch.linalg.cholesky(precision))
    elif structure == "diag":
        posterior = GaussianPosterior.from_std(mean, std)
    else:  # SWAG's diag(std^2) + U U^T: the low-rank draws carry as much of the variance as the diagonal's
        low_rank = torch.tensor([[1.0, 0.0], [-1.0, 0.5], [0.5, 2.0]], dtype=torch.float64)
        posterior = GaussianPosterior.from_low_rank(mean, std, low_rank)
    draws = posterior.sample(n, torch.Generator().manual_seed(0))
    assert draws.shape == (n, k)
    standard_error = posterior.variance.sqrt() / math.sqrt(n)
    assert ((draws.mean(0) - mean).abs() < 5 * standard_error).all()
    cov = torch.cov(draws.T)
    scale = posterior.covariance.diagonal().sqrt()
    assert ((cov - posterior.covariance).abs() / torch.outer(scale, scale)).max() < 0.02


@pytest.mark.parametrize("structure", ["full", "diag", "lowrank"])
def test_project_factorises_jacobian_covariance(structure):
    """``B B^T = J Sigma J^T``, with ``Sigma`` written out here (the precision's inverse,
    ``diag(std^2)``, ``diag(std^2) + U U^T``), and the marginal variances its diagonal."""
    k = 5
    mean = torch.zeros(k, dtype=torch.float64)
    std = torch.linspace(0.1, 1.0, k, dtype=torch.float64)
    low_rank = torch.randn(k, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    if structure == "full":
        covariance = torch.linalg.inv(_spd(k))
        posterior = GaussianPosterior.from_precision_cholesky(mean, torch.linalg.cholesky(_spd(k)))
    elif structure == "diag":
        covariance = torch.diag(std.square())
        posterior = GaussianPosterior.from_std(mean, std)
    else:
        covariance = torch.diag(std.square()) + low_rank @ low_rank.T
        posterior = GaussianPosterior.from_low_rank(mean, std, low_rank)
    jac = torch.randn(7, k, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    factor = posterior.project(jac)
    torch.testing.assert_close(factor @ factor.T, jac @ covariance @ jac.T)
    torch.testing.assert_close(posterior.variance, covariance.diagonal())


class _OrthonormalBasis:
    """``B``, a ``(K, R)`` matrix of orthonormal columns written out, as the operator a posterior in a
    basis reads (``apply``, ``transpose_apply``, ``squared_apply``), for ``Sigma = B diag(std^2) B^T``."""

    def __init__(self, matrix):
        self.matrix = matrix

    def apply(self, coordinates):  # (n, R) -> (n, K)
        return coordinates @ self.matrix.T

    def transpose_apply(self, jacobian):  # (M, K) -> (M, R)
        return jacobian @ self.matrix

    def squared_apply(self, values):  # (R,) -> (K,)
        return self.matrix.square() @ values


def _basis_posterior(mean, std):
    basis = torch.linalg.qr(torch.randn(len(mean), len(std), generator=torch.Generator().manual_seed(3),
                                        dtype=torch.float64))[0]
    return GaussianPosterior.from_basis(mean, _OrthonormalBasis(basis), std), basis @ torch.diag(std.square()) @ basis.T


def test_a_posterior_in_a_basis_has_the_covariance_written_out():
    """``Sigma = B diag(std^2) B^T`` (a Kronecker or low-rank eigenbasis's): its covariance, variances,
    projection ``J Sigma J^T``, scaling and draws' moments against the dense matrix."""
    mean = torch.tensor([1.0, -2.0, 0.5, 0.0], dtype=torch.float64)
    posterior, covariance = _basis_posterior(mean, torch.tensor([0.5, 1.0, 2.0, 3.0], dtype=torch.float64))
    torch.testing.assert_close(posterior.covariance, covariance)
    torch.testing.assert_close(posterior.variance, covariance.diagonal())
    jac = torch.randn(7, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    factor = posterior.project(jac)
    torch.testing.assert_close(factor @ factor.T, jac @ covariance @ jac.T)
    scaled = posterior.scaled(2.5)  # keeps its basis: the std alone scaled would be a diagonal's
    torch.testing.assert_close(scaled.covariance, 2.5 * covariance)
    torch.testing.assert_close(scaled.variance, 2.5 * covariance.diagonal())
    draws = posterior.sample(200_000, torch.Generator().manual_seed(0))
    scale = covariance.diagonal().sqrt()
    assert ((torch.cov(draws.T) - covariance).abs() / torch.outer(scale, scale)).max() < 0.02


def test_sampling_never_changes_the_mean():
    mean = torch.ones(3, dtype=torch.float64)
    posterior = GaussianPosterior.from_std(mean.clone(), torch.ones(3, dtype=torch.float64))
    posterior.sample(10, torch.Generator().manual_seed(0))
    torch.testing.assert_close(posterior.mean, mean)


def test_gaussian_needs_exactly_one_factor():
    with pytest.raises(ValueError, match="exactly one"):
        GaussianPosterior(torch.zeros(2))


def test_sample_posterior_draws_in_proportion_to_weights():
    samples = torch.tensor([[0.0], [1.0], [2.0]], dtype=torch.float64)
    weights = torch.tensor([0.2, 0.0, 0.8], dtype=torch.float64)
    posterior = SamplePosterior(samples, weights)
    draws = posterior.sample(50_000, torch.Generator().manual_seed(0))[:, 0]
    assert (draws != 1.0).all()
    # Binomial standard error of the frequency is sqrt(0.16 / 50k) = 0.0018.
    assert abs(float((draws == 2.0).double().mean()) - 0.8) < 0.01
    torch.testing.assert_close(posterior.mean, torch.tensor([1.6], dtype=torch.float64))


def test_sample_posterior_normalises_its_weights():
    """Weights of any total (unnormalised importance weights) are divided by their sum: the mean is
    the weighted average, here ``(0 * 1 + 1 * 0 + 2 * 4) / 5 = 1.6``."""
    samples = torch.tensor([[0.0], [1.0], [2.0]], dtype=torch.float64)
    posterior = SamplePosterior(samples, torch.tensor([1.0, 0.0, 4.0], dtype=torch.float64))
    torch.testing.assert_close(posterior.weights, torch.tensor([0.2, 0.0, 0.8], dtype=torch.float64))
    torch.testing.assert_close(posterior.mean, torch.tensor([1.6], dtype=torch.float64))


def test_sample_posterior_rejects_bad_weights():
    with pytest.raises(ValueError, match="non-negative"):
        SamplePosterior(torch.zeros(2, 1), torch.tensor([1.0, -1.0]))


@pytest.mark.parametrize("structure", ["full", "diag", "lowrank"])
def test_scaled_multiplies_the_covariance_and_keeps_the_mean(structure):
    k = 4
    mean = torch.arange(k, dtype=torch.float64)
    std = torch.linspace(0.1, 1.0, k, dtype=torch.float64)
    posterior = {
        "full": lambda: GaussianPosterior.from_precision_cholesky(mean, torch.linalg.cholesky(_spd(k))),
        "diag": lambda: GaussianPosterior.from_std(mean, std),
        "lowrank": lambda: GaussianPosterior.from_low_rank(mean, std, _spd(k)[:, :2]),
    }[structure]()
    scaled = posterior.scaled(2.5)
    torch.testing.assert_close(scaled.covariance, 2.5 * posterior.covariance)
    torch.testing.assert_close(scaled.mean, posterior.mean)


def test_a_full_gaussian_pickles_half_its_factor_and_loads_the_same_bits():
    """The precision's Cholesky factor pickles as its lower triangle and comes back equal to the
    bit, in LAPACK's column-major layout as it was (the solves that read it round alike)."""
    rng = torch.Generator().manual_seed(0)
    root = torch.randn(300, 300, generator=rng, dtype=torch.float64)
    cholesky = torch.linalg.cholesky(root @ root.T + 300 * torch.eye(300, dtype=torch.float64))
    posterior = GaussianPosterior.from_precision_cholesky(torch.randn(300, dtype=torch.float64), cholesky)
    blob = pickle.dumps(posterior)
    assert len(blob) < 0.55 * cholesky.numel() * 8
    loaded = pickle.loads(blob)
    assert torch.equal(loaded.precision_cholesky, cholesky)
    assert loaded.precision_cholesky.stride() == cholesky.stride() == (1, 300)
    jacobian = torch.randn(7, 300, generator=rng, dtype=torch.float64)
    assert torch.equal(loaded.project(jacobian), posterior.project(jacobian))
    # A pickle of an earlier version, which held the whole factor, loads as it was.
    earlier = GaussianPosterior.__new__(GaussianPosterior)
    earlier.__setstate__(dict(vars(posterior)))
    assert earlier.precision_cholesky is cholesky


def test_packing_keeps_a_symmetric_matrix_s_lower_triangle():
    """A symmetric matrix comes back from its lower triangle, the half that the factorisations read."""
    matrix = torch.randn(5, 5, dtype=torch.float64)
    matrix = matrix + matrix.T
    values, column_major = pack_lower(matrix)
    assert values.shape == (15,) and not column_major
    assert torch.equal(unpack_lower((values, column_major), 5, symmetric=True), matrix)
    assert torch.equal(unpack_lower((values, column_major), 5), matrix.tril())
