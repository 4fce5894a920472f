"""Posterior objects over the flat weight vector: weighted samples, or a Gaussian.

They know how to ``sample(n, generator)`` and nothing about estimators.
"""

import torch

from .rng import choice, permutation, standard_normal


def pack_lower(matrix):
    """The lower triangle of a square ``matrix`` ``(K, K)``, row by row, as ``K (K + 1) / 2``
    values (all a triangular or symmetric matrix holds, in half the bytes: a pickle's), and
    whether ``matrix`` is stored column by column (LAPACK's order: a Cholesky factor's), which
    :func:`unpack_lower` restores, so that what reads it rounds as before."""
    column_major = matrix.mT.is_contiguous() and not matrix.is_contiguous()
    return matrix[_lower_mask(matrix.shape[0], matrix.device)], column_major


def unpack_lower(packed, size, symmetric=False):
    """The ``(size, size)`` matrix that :func:`pack_lower` packed: lower triangular, or ``symmetric``."""
    values, column_major = packed
    matrix = values.new_zeros(size, size).masked_scatter_(_lower_mask(size, values.device), values)
    if symmetric:
        matrix = matrix + matrix.tril(-1).mT
    return matrix.mT.contiguous().mT if column_major else matrix


def _lower_mask(size, device):
    # A boolean mask, not tril_indices: two int64 indices per value would outweigh the values.
    return torch.ones(size, size, dtype=torch.bool, device=device).tril_()


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
        return self.samples[choice(generator, self.weights, n)]


class GaussianPosterior:
    """A Gaussian ``N(mean, Sigma)`` over the weights.

    ``Sigma`` is held through a factor, never as an explicit inverse:

    - full: the lower Cholesky factor ``L`` of the precision, ``Sigma^-1 = L L^T``;
    - diagonal: the standard deviations, ``Sigma = diag(std**2)``;
    - low rank plus diagonal: ``Sigma = diag(std**2) + U U^T`` with ``U`` of
      shape ``(K, R)`` (SWAG);
    - in a basis: ``Sigma = B diag(std**2) B^T`` with ``B`` an operator
      (``apply``, ``transpose_apply``, ``squared_apply``; each returns a new
      tensor) from as many coordinates as ``std`` has to the ``K`` weights,
      such as the eigenvectors of a Kronecker-factored curvature, or the
      frame of a low-rank one.

    Build one with :meth:`from_precision_cholesky`, :meth:`from_std`,
    :meth:`from_low_rank` or :meth:`from_basis`.
    """

    def __init__(self, mean, precision_cholesky=None, std=None, low_rank=None, basis=None):
        if (precision_cholesky is None) == (std is None):
            raise ValueError("Give exactly one of precision_cholesky and std.")
        if (low_rank is not None or basis is not None) and std is None:
            raise ValueError("A low-rank factor or a basis comes with a std.")
        if low_rank is not None and basis is not None:
            raise ValueError("Give at most one of low_rank and basis.")
        self.mean = mean
        self.precision_cholesky = precision_cholesky
        self.std = std
        self.low_rank = low_rank
        self.basis = basis

    @classmethod
    def from_precision_cholesky(cls, mean, precision_cholesky):
        return cls(mean, precision_cholesky=precision_cholesky)

    @classmethod
    def from_std(cls, mean, std):
        return cls(mean, std=std)

    @classmethod
    def from_low_rank(cls, mean, std, low_rank):
        return cls(mean, std=std, low_rank=low_rank)

    @classmethod
    def from_basis(cls, mean, basis, std):
        return cls(mean, std=std, basis=basis)

    @property
    def n_params(self):
        return self.mean.shape[0]

    def __getstate__(self):
        state = dict(self.__dict__)
        if self.precision_cholesky is not None:  # lower triangular: its upper half is zeros
            state["precision_cholesky"] = pack_lower(self.precision_cholesky)
        return state

    def __setstate__(self, state):
        if isinstance(state["precision_cholesky"], tuple):  # packed (a pickle of an earlier version holds the matrix)
            state["precision_cholesky"] = unpack_lower(state["precision_cholesky"], state["mean"].shape[0])
        self.__dict__.update(state)

    def scaled(self, factor):
        """The Gaussian with the same mean and the covariance times ``factor > 0``."""
        if self.std is None:
            return type(self).from_precision_cholesky(self.mean, self.precision_cholesky / factor**0.5)
        low_rank = None if self.low_rank is None else self.low_rank * factor**0.5
        return type(self)(self.mean, std=self.std * factor**0.5, low_rank=low_rank, basis=self.basis)

    def sample(self, n, generator=None):
        """Draw ``n`` weight vectors, shape ``(n, K)``."""
        z = standard_normal(generator, self.mean, (self.n_params if self.std is None else self.std.shape[0], n))
        if self.std is None:
            deviation = torch.linalg.solve_triangular(self.precision_cholesky.mT, z, upper=True)
        elif self.basis is not None:
            return self.mean + self.basis.apply(self.std * z.T)
        else:
            deviation = self.std.unsqueeze(-1) * z
            if self.low_rank is not None:
                low_rank_z = standard_normal(generator, self.mean, (self.low_rank.shape[1], n))
                deviation = deviation + self.low_rank @ low_rank_z
        return self.mean + deviation.T

    def project(self, jacobian):
        """A factor ``B`` with ``J Sigma J^T = B B^T`` for ``J`` of shape ``(M, K)``.

        This is the linear pushforward of the posterior through ``J``, kept in
        factored form so variances, covariances and joint samples all follow
        from it without forming ``Sigma``.
        """
        if self.std is None:
            return torch.linalg.solve_triangular(self.precision_cholesky, jacobian.T, upper=False).T
        if self.basis is not None:
            return self.basis.transpose_apply(jacobian).mul_(self.std)
        factor = jacobian * self.std
        if self.low_rank is not None:
            factor = torch.cat([factor, jacobian @ self.low_rank], dim=1)
        return factor

    @property
    def variance(self):
        """Marginal variances of the weights, shape ``(K,)``."""
        if self.std is None:
            return self.covariance.diagonal()
        if self.basis is not None:
            return self.basis.squared_apply(self.std.square())
        if self.low_rank is None:
            return self.std.square()
        return self.std.square() + self.low_rank.square().sum(1)

    @property
    def covariance(self):
        """The ``(K, K)`` covariance (formed on request; the factor is what is stored)."""
        if self.std is None:
            return torch.cholesky_inverse(self.precision_cholesky)
        if self.basis is not None:
            factor = self.basis.apply(torch.diag(self.std))  # rows std_k e_k, mapped: (B diag(std))^T
            return factor.T @ factor
        covariance = torch.diag(self.std.square())
        if self.low_rank is not None:
            covariance = covariance + self.low_rank @ self.low_rank.T
        return covariance


class GaussianMixturePosterior:
    """The equal-weight mixture of Gaussians over the weights (MultiSWAG's, one per basin).

    Parameters
    ----------
    components : list of GaussianPosterior
        Over the same ``K`` weights.
    """

    def __init__(self, components):
        self.components = list(components)

    @property
    def n_params(self):
        return self.components[0].n_params

    @property
    def mean(self):
        return torch.stack([component.mean for component in self.components]).mean(0)

    @property
    def variance(self):
        """Marginal variances of the weights, ``(K,)``: the components' mean
        variance plus the variance of their means."""
        means = torch.stack([component.mean for component in self.components])
        within = torch.stack([component.variance for component in self.components]).mean(0)
        return within + means.var(0, correction=0)

    def scaled(self, factors):
        """The mixture whose component ``j`` has its covariance times ``factors[j] > 0``."""
        return type(self)(component.scaled(float(factor)) for component, factor in zip(self.components, factors))

    def sample(self, n, generator=None):
        """``n`` weight vectors ``(n, K)`` of the mixture, stratified over the
        components and in a random order: each component gives ``n // J``
        draws and ``n % J`` of them, chosen at random, one more (a multinomial
        choice of the component would add its own noise to every average over
        the draws). Every row is then a draw of the mixture, and every
        component's expected share of the ``n`` is ``1 / J``."""
        n_components = len(self.components)
        like = self.components[0].mean
        counts = [n // n_components] * n_components
        if n % n_components:  # no draw spent where the shares are equal
            for index in permutation(generator, n_components, like)[: n % n_components].tolist():
                counts[index] += 1
        draws = torch.cat([
            component.sample(count, generator) for component, count in zip(self.components, counts) if count
        ])
        return draws[permutation(generator, n, like)]
