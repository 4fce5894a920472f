"""A low-rank curvature: its top eigenpairs, found from products with it, and the posterior they give.

The curvature ``C`` of a big network is never formed: a randomized Nystrom
approximation (Halko, Martinsson and Tropp 2011, "Finding structure with
randomness"; Tropp, Yurtsever, Udell and Cevher 2017, "Fixed-rank
approximation of a positive-semidefinite matrix from streaming data") needs
only the products ``C V`` of a few passes over the data, and keeps the ``R``
largest eigenvalues ``lambda`` with their eigenvectors ``U (K, R)``. The
curvature is then ``U diag(lambda) U^T``: zero across the other ``K - R``
directions, where the posterior is the prior, as in the low-rank Laplace of
Daxberger et al. 2021 ("Laplace redux").

The posterior's eigenbasis is ``[U, I - U U^T]``: ``R`` eigenvector
coordinates and ``K`` more that span their complement, a frame whose product
with its transpose is the identity. ``B diag(s^2) B^T`` with the last ``K``
entries of ``s`` all equal to the prior's is the covariance
``U diag(s_R^2) U^T + s_0^2 (I - U U^T)``, and ``B z`` for a standard normal
``z`` of ``R + K`` entries a draw of it, so the posterior is a
:meth:`~sklearn_quinn._core.posterior.GaussianPosterior.from_basis` like the
Kronecker-factored one, held in ``O(K R)`` memory.
"""

import torch

from .rng import standard_normal

#: Extra columns of the random sketch beyond the rank kept, and the passes
#: that sharpen it (each costs one product with the curvature): with the
#: spectra of network curvatures, which fall fast, 10 and 2 give the top
#: eigenvalues to a few parts in a thousand (Halko et al. 2011, section 4.5).
OVERSAMPLING = 10
POWER_ITERATIONS = 2


def top_eigenpairs(matmul, n_params, rank, dtype, device, seed=0):
    """The ``rank`` largest eigenvalues of a positive semi-definite ``(K, K)`` matrix and their eigenvectors.

    Parameters
    ----------
    matmul : callable
        ``V (K, m) -> C V``.
    n_params : int
        ``K``.
    rank : int
        ``R`` (at most ``K``); the decomposition is exact where ``R + OVERSAMPLING >= K``.
    dtype, device
        Of the sketch.
    seed : int, default=0
        Of the random sketch.

    Returns
    -------
    eigenvalues : tensor of shape (R,)
        Descending, non-negative.
    eigenvectors : tensor of shape (K, R)
        Orthonormal columns.
    """
    # The sketch is drawn on the CPU, so that a fit on a GPU finds the CPU's subspace.
    width = min(n_params, rank + OVERSAMPLING)
    like = torch.empty((), dtype=dtype, device=device)
    basis = torch.linalg.qr(standard_normal(torch.Generator().manual_seed(seed), like, (n_params, width)))[0]
    for _ in range(POWER_ITERATIONS if width < n_params else 0):
        basis = torch.linalg.qr(matmul(basis))[0]
    sketch = matmul(basis)
    # A shift of round-off size keeps the core matrix positive definite (Tropp et al. 2017, algorithm 3).
    # (At least the smallest normal number: a zero curvature, every unit dead, has a zero sketch.)
    shift = max(torch.finfo(dtype).eps * n_params**0.5 * float(torch.linalg.matrix_norm(sketch, ord=2)),
                torch.finfo(dtype).tiny)
    sketch = sketch + shift * basis
    core = basis.T @ sketch
    cholesky = torch.linalg.cholesky(0.5 * (core + core.T))
    factor = torch.linalg.solve_triangular(cholesky, sketch.T, upper=False).T  # sketch L^-T
    vectors, values = torch.linalg.svd(factor, full_matrices=False)[:2]
    rank = min(rank, n_params)
    return (values[:rank].square() - shift).clamp_min(0.0), vectors[:, :rank]


class LowRankEigenbasis:
    """The frame ``B = P^(-1/2) [U, I - U U^T]`` as an operator: ``R + K`` coordinates to ``K`` weights.

    Parameters
    ----------
    eigenvalues : tensor of shape (R,)
        The curvature's top eigenvalues, in the whitened weights.
    eigenvectors : tensor of shape (K, R)
        Theirs, orthonormal.
    prior_root : tensor of shape (K,), default=None
        ``p^(1/2)`` per weight; None for an isotropic prior.

    Attributes
    ----------
    eigenvalues : tensor of shape (K,)
        The spectrum the evidence sums over: the ``R`` eigenvalues, then
        ``K - R`` zeros.
    coordinate_eigenvalues : tensor of shape (R + K,)
        One per coordinate of the frame: the ``R`` eigenvalues, then ``K`` zeros.
    """

    def __init__(self, eigenvalues, eigenvectors, prior_root=None):
        self.vectors, self.prior_root = eigenvectors, prior_root
        n_params, rank = eigenvectors.shape
        self.eigenvalues = torch.cat([eigenvalues, eigenvalues.new_zeros(n_params - rank)])
        self.coordinate_eigenvalues = torch.cat([eigenvalues, eigenvalues.new_zeros(n_params)])

    def transpose_apply(self, jacobian):
        """``J B`` for ``J`` of shape ``(..., K)``: ``(..., R + K)``.

        Written into one new tensor, the complement's block updated in place:
        the only ``(..., K)``-sized memory beside ``J`` is the result (a
        Jacobian of many points and weights is the largest tensor of a
        prediction), where ``J`` flattens to rows without a copy. Not
        differentiable (predictions run without gradients).
        """
        n_params, rank = self.vectors.shape
        rows = jacobian.reshape(-1, n_params)
        result = rows.new_empty(rows.shape[0], rank + n_params)
        across = result[:, rank:]
        if self.prior_root is None:
            across.copy_(rows)
        else:
            torch.div(rows, self.prior_root, out=across)
        along = across @ self.vectors
        result[:, :rank] = along
        across.addmm_(along, self.vectors.T, alpha=-1.0)
        return result.reshape(*jacobian.shape[:-1], rank + n_params)

    def apply(self, coordinates):
        """``B z`` for coordinates ``z`` given as rows ``(..., R + K)``: ``(..., K)``."""
        rank = self.vectors.shape[1]
        along, across = coordinates[..., :rank], coordinates[..., rank:]
        weights = across + (along - across @ self.vectors) @ self.vectors.T
        return weights if self.prior_root is None else weights / self.prior_root

    def squared_apply(self, values):
        """The diagonal of ``B diag(v) B^T`` for ``v (R + K,)``.

        ``U diag(v_R) U^T`` gives ``(U * U) v_R``; the complement's
        ``(I - U U^T) diag(v_K) (I - U U^T)`` gives ``v_K - 2 v_K (U * U) 1 +
        ((U M) * U) 1`` with ``M = U^T diag(v_K) U``, in ``O(K R^2)``.
        """
        rank = self.vectors.shape[1]
        along, across = values[:rank], values[rank:]
        vectors = self.vectors
        leverage = vectors.square().sum(1)
        inner = (vectors.T * across) @ vectors
        result = vectors.square() @ along + across * (1 - 2 * leverage) + ((vectors @ inner) * vectors).sum(1)
        return result if self.prior_root is None else result / self.prior_root.square()
