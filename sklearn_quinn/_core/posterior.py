"""Posterior objects over the flat weight vector: weighted samples, or a Gaussian.

They know how to ``sample(n, generator)`` and nothing about estimators.
"""

import torch


class SamplePosterior:
    """A posterior given by (optionally weighted) weight vectors.

    Parameters
    ----------
    samples : tensor of shape (S, K)
        Weight vectors: chain draws, ensemble members or particles.
    weights : tensor of shape (S,), default=None
        Non-negative importance weights; None means equal weights.
    """

    def __init__(self, samples, weights=None):
        self.samples = samples
        if weights is None:
            weights = torch.full(
                (samples.shape[0],), 1.0 / samples.shape[0], dtype=samples.dtype, device=samples.device
            )
        if weights.shape != samples.shape[:1] or not bool((weights >= 0).all()):
            raise ValueError("weights must be non-negative, one per sample.")
        self.weights = weights / weights.sum()

    @property
    def mean(self):
        return self.weights @ self.samples

    def sample(self, n, generator=None):
        """Draw ``n`` rows with replacement, in proportion to the weights: ``(n, K)``."""
        index = torch.multinomial(self.weights, n, replacement=True, generator=generator)
        return self.samples[index]


class GaussianPosterior:
    """A Gaussian ``N(mean, Sigma)`` over the weights.

    ``Sigma`` is held through a factor, never as an explicit inverse:

    - full: the lower Cholesky factor ``L`` of the precision, ``Sigma^-1 = L L^T``;
    - diagonal: the standard deviations, ``Sigma = diag(std**2)``.

    Build one with :meth:`from_precision_cholesky` or :meth:`from_std`.
    """

    def __init__(self, mean, precision_cholesky=None, std=None):
        if (precision_cholesky is None) == (std is None):
            raise ValueError("Give exactly one of precision_cholesky and std.")
        self.mean = mean
        self.precision_cholesky = precision_cholesky
        self.std = std

    @classmethod
    def from_precision_cholesky(cls, mean, precision_cholesky):
        return cls(mean, precision_cholesky=precision_cholesky)

    @classmethod
    def from_std(cls, mean, std):
        return cls(mean, std=std)

    @property
    def n_params(self):
        return self.mean.shape[0]

    def _apply_scale(self, z):
        """``A z`` for a square root ``A`` of ``Sigma`` (``A A^T = Sigma``); z is (K, n)."""
        if self.std is not None:
            return self.std.unsqueeze(-1) * z
        return torch.linalg.solve_triangular(self.precision_cholesky.mT, z, upper=True)

    def sample(self, n, generator=None):
        """Draw ``n`` weight vectors, shape ``(n, K)``."""
        z = torch.randn(
            self.n_params, n, generator=generator, dtype=self.mean.dtype, device=self.mean.device
        )
        return self.mean + self._apply_scale(z).T

    def project(self, jacobian):
        """A factor ``B`` with ``J Sigma J^T = B B^T`` for ``J`` of shape ``(M, K)``.

        This is the linear pushforward of the posterior through ``J``, kept in
        factored form so variances, covariances and joint samples all follow
        from it without forming ``Sigma``.
        """
        if self.std is not None:
            return jacobian * self.std
        return torch.linalg.solve_triangular(self.precision_cholesky, jacobian.T, upper=False).T

    @property
    def variance(self):
        """Marginal variances of the weights, shape ``(K,)``."""
        if self.std is not None:
            return self.std.square()
        return self.covariance.diagonal()

    @property
    def covariance(self):
        """The ``(K, K)`` covariance (formed on request; the factor is what is stored)."""
        if self.std is not None:
            return torch.diag(self.std.square())
        return torch.cholesky_inverse(self.precision_cholesky)
