"""The Laplace approximation at a MAP, pure torch.

The curvature ``C`` of the negative log-likelihood (Gaussian at a reference
noise level ``noise_std``, or categorical) is computed once and decomposed
at most once (an eigen decomposition for the full structure, taken on first
need, below; the diagonal is its own
spectrum; for the Kronecker-factored one, the eigen decompositions of each
layer's two factors, see :mod:`~sklearn_quinn._core.kronecker`; for the
low-rank one, the top eigenpairs found from curvature products, the rest of
the spectrum zero, see :mod:`~sklearn_quinn._core.low_rank`). For the
Gaussian likelihood the curvature at noise ``c * noise_std`` is ``C / c**p``
with ``p = 2`` for the GGN and the Hessian and ``p = 4`` for the empirical
Fisher, so the posterior precision for any prior precision
``delta``, noise scale ``c`` and ``cov_scale`` ``s``,

    ``Sigma^-1 = s * (C / c**p + delta * I) = s * Q diag(lambda / c**p + delta) Q^T``,

its log determinant and the Laplace evidence all follow from the one
spectrum: tuning ``delta`` and ``c`` by the evidence costs no new curvature
and no new factorisation. The full posterior itself is factored by
Cholesky; the Kronecker and low-rank ones stay in their eigenbases. A fit
that asks for one prior precision and noise scale only (a classifier at its
defaults: its ``cov_scale`` search divides one covariance) needs no spectrum,
and the full structure's eigen decomposition, which costs as much as many
Cholesky factorisations of the same matrix, waits until something asks for
another.

A prior ``N(0, (delta * P)^-1)`` with a per-weight shape ``P = diag(p)`` (the
precisions learned for each group of weights, which ``delta`` then scales)
reduces to the isotropic case in the whitened weights ``P^(1/2) theta``: the
curvature decomposed is ``P^(-1/2) C P^(-1/2)``, the Jacobians are divided by
``p^(1/2)``, and ``Sigma^-1 = P^(1/2) (C' / c**p + delta I) P^(1/2)``; the
evidence keeps its form, the ``log det P`` of the prior and of the posterior
cancelling.
"""

import math
from functools import cached_property

import numpy as np
import torch
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning

from .._core.curvature import curvature, curvature_operator, kronecker_curvature
from .._core.evidence import jittered_cholesky
from .._core.kronecker import KroneckerEigenbasis
from .._core.last_layer import outputs_and_jacobian
from .._core.low_rank import LowRankEigenbasis, top_eigenpairs
from .._core.posterior import GaussianPosterior, pack_lower, unpack_lower
from .._warnings import warn

# Bounds of the evidence search, on log prior precision and log noise scale.
_LOG_PRIOR_PRECISION_BOUNDS = (math.log(1e-8), math.log(1e8))
_LOG_NOISE_SCALE_BOUNDS = (math.log(1e-4), math.log(1e4))


def refuse_factored_hessian(structure, kind):
    """A ValueError where ``structure`` ('kron', 'lowrank') would factor ``kind='hessian'``: both
    decompose a sum of outer products, the GGN's or the empirical Fisher's, which the Hessian is not."""
    if kind == "hessian" and structure in ("kron", "lowrank"):
        raise ValueError(f"hessian_structure={structure!r} factors the GGN or the empirical Fisher, "
                         "not curvature='hessian'.")


class LaplaceApproximation:
    """Curvature at a MAP, decomposed at most once, and everything that follows from it.

    Parameters
    ----------
    model : FunctionalModel
    theta : tensor of shape (K,)
        The MAP weights.
    X : tensor of shape (N, D)
    Y : tensor of shape (N, O)
    likelihood : GaussianLikelihood or CategoricalLikelihood
        A Gaussian one holds the reference observation noise per output, the
        one the curvature uses; the noise scale ``c`` applies to it only.
    kind : {'ggn', 'hessian', 'ef'}
    structure : {'full', 'kron', 'lowrank', 'diag'}
    prior_shape : tensor of shape (K,), default=None
        The per-weight shape ``p`` of the prior precision, which the prior
        precision ``delta`` multiplies; None for an isotropic prior.
    rank : int, default=100
        For 'lowrank': the eigenpairs of the curvature kept.
    seed : int, default=0
        For 'lowrank': the seed of the random sketch that finds them.

    Attributes
    ----------
    eigenvalues : tensor of shape (K,)
        Spectrum of the curvature (its diagonal for 'diag'), negative values
        set to zero; for 'full', decomposed on first use.
    eigenvectors : tensor of shape (K, K) or None
        For 'full' (decomposed on first use).
    basis : KroneckerEigenbasis, LowRankEigenbasis or None
        For 'kron' and 'lowrank': the eigenvectors as an operator, the prior's scale included.
    n_negative : int
        Number of Hessian eigenvalues (diagonal entries) that were negative
        beyond round-off and were set to zero (always 0 for the GGN and the
        empirical Fisher, which are positive semi-definite).
    """

    def __init__(self, model, theta, X, Y, likelihood, kind="ggn", structure="full", prior_shape=None, rank=100,
                 seed=0):
        self.theta = theta
        self.structure = structure
        self.noise_power = 4 if kind == "ef" else 2
        self._prior_root = None if prior_shape is None else prior_shape.sqrt()
        self.basis = None
        # The full curvature, kept for the posterior's Cholesky factor (cheaper and more accurate
        # than rebuilding it from the eigenvectors at every call). Its eigen decomposition waits for
        # the first question a Cholesky factor cannot answer (another prior precision or noise
        # scale): a classifier at the defaults asks none, and over a few thousand weights the
        # decomposition costs about twenty factorisations.
        self._matrix = None
        self._cholesky_key = self._cholesky = None
        if structure == "kron":
            layers, factors, rest, rest_curvature = kronecker_curvature(model, theta, X, Y, likelihood, kind)
            self.basis = KroneckerEigenbasis(layers, factors, rest, rest_curvature, len(theta), self._prior_root)
            spectrum = self.basis.eigenvalues
        elif structure == "lowrank":
            refuse_factored_hessian(structure, kind)
            root = 1.0 if self._prior_root is None else self._prior_root[:, None]
            curvature_product = curvature_operator(model, theta, X, Y, likelihood, kind)

            def whitened_matmul(vectors):
                return curvature_product(vectors / root) / root

            values, vectors = top_eigenpairs(whitened_matmul, len(theta), rank, theta.dtype, theta.device, seed)
            self.basis = LowRankEigenbasis(values, vectors, self._prior_root)
            spectrum = self.basis.eigenvalues
        elif structure == "full":
            self._matrix = self._whiten(curvature(model, theta, X, Y, likelihood, kind, structure))
            spectrum = None
        else:
            spectrum = self._whiten(curvature(model, theta, X, Y, likelihood, kind, structure))
        self._spectrum = spectrum  # None for 'full' until decomposed
        # The GGN and the empirical Fisher are positive semi-definite: a negative
        # eigenvalue is round-off. The Hessian can be indefinite away from a minimum.
        self.n_negative = 0
        if kind == "hessian" and len(theta):
            raw = self._full_decomposition[0] if structure == "full" else spectrum
            scale = float(raw.abs().max())
            tolerance = torch.finfo(raw.dtype).eps * raw.numel() * scale
            self.n_negative = int((raw < -tolerance).sum())
        if self.n_negative:
            warn(
                f"The Hessian at the MAP has {self.n_negative} negative "
                f"{'eigenvalues' if structure == 'full' else 'diagonal entries'} "
                f"(smallest {float(raw.min()):.3g}); they were set to zero so the "
                "posterior precision is positive definite. The MAP may not be a minimum: "
                "train longer, or use curvature='ggn'."
            )
            if structure == "full":  # the factorisations' matrix, rebuilt once from the clipped spectrum
                self._matrix = (self.eigenvectors * self.eigenvalues) @ self.eigenvectors.T

        self._data_fit = likelihood.evidence_data_fit(model.single(theta, X), Y)
        whitened_theta = theta if self._prior_root is None else theta * self._prior_root
        self._theta_sq_norm = float(whitened_theta.square().sum())

    def __getstate__(self):
        """A pickle of the curvature without the last Cholesky factor, a cache that a posterior
        asks for again at most once (the fitted estimator's ``posterior_`` holds its own), without
        the full curvature's eigenvectors, another cache (taken again on first need: the evidence,
        a new prior precision or noise), and with the symmetric full curvature's lower triangle
        alone."""
        state = dict(self.__dict__, _cholesky_key=None, _cholesky=None)
        state.pop("_full_decomposition", None)
        if self._matrix is not None:
            state["_matrix"] = pack_lower(self._matrix)
        return state

    def __setstate__(self, state):
        if isinstance(state["_matrix"], tuple):  # packed (a pickle of an earlier version holds the matrix)
            state["_matrix"] = unpack_lower(state["_matrix"], state["theta"].shape[0], symmetric=True)
        self.__dict__.update(state)

    @cached_property
    def _full_decomposition(self):
        """``torch.linalg.eigh`` of the full curvature, on first need."""
        return torch.linalg.eigh(self._matrix)

    @cached_property
    def eigenvalues(self):
        """Spectrum of the curvature (its diagonal for 'diag'), negative values set to zero."""
        spectrum = self._full_decomposition[0] if self.structure == "full" else self._spectrum
        return spectrum.clamp(min=0.0)

    @property
    def eigenvectors(self):
        """For 'full': the curvature's eigenvectors ``(K, K)``; None otherwise."""
        return self._full_decomposition[1] if self.structure == "full" else None

    @cached_property
    def _coordinate_eigenvalues(self):
        """One per coordinate of the posterior's basis: the spectrum itself but for 'lowrank',
        whose frame has R + K coordinates."""
        return self.eigenvalues if self.basis is None else self.basis.coordinate_eigenvalues.clamp(min=0.0)

    @cached_property
    def _spectrum_numpy(self):
        return self.eigenvalues.detach().cpu().numpy().astype(np.float64)

    def _whiten(self, matrix):
        """The curvature in the whitened weights: ``P^(-1/2) C P^(-1/2)``."""
        root = self._prior_root
        if root is None:
            return matrix
        return matrix / root.square() if matrix.ndim == 1 else matrix / root[:, None] / root[None, :]

    @property
    def n_params(self):
        return self.theta.shape[0]

    def _evidence(self, log_prior_precision, log_noise_scale):
        """Laplace log evidence and its gradient in ``(log delta, log c)``, closed form.

        ``log p(D | theta*) + log p(theta*) + K/2 log 2 pi - 1/2 log det Sigma^-1``
        with ``Sigma^-1 = C / c**p + delta I``, exact for a linear-Gaussian model.
        """
        delta, scale = math.exp(log_prior_precision), math.exp(log_noise_scale)
        data = self._spectrum_numpy * scale**-self.noise_power
        precision = data + delta
        n_params = self.n_params
        fit, d_fit = self._data_fit(log_noise_scale)
        value = (
            fit
            - 0.5 * delta * self._theta_sq_norm
            + 0.5 * n_params * log_prior_precision
            - 0.5 * np.log(precision).sum()
        )
        d_log_delta = -0.5 * delta * self._theta_sq_norm + 0.5 * n_params - 0.5 * delta * np.sum(1 / precision)
        d_log_scale = d_fit + 0.5 * self.noise_power * np.sum(data / precision)
        return float(value), np.array([d_log_delta, d_log_scale])

    def log_marginal_likelihood(self, prior_precision, noise_scale=1.0):
        """Laplace log evidence ``log p(D | delta, c)`` at prior precision ``delta``
        and noise ``c * noise_std``: ``log p(D | theta*) + log p(theta*) + K/2 log 2 pi
        - 1/2 log det Sigma^-1``, exact for a linear-Gaussian model."""
        return self._evidence(math.log(prior_precision), math.log(noise_scale))[0]

    def maximise_evidence(self, prior_precision, tune_noise=False):
        """The prior precision (and noise scale) that maximise the evidence.

        L-BFGS-B on the logs, with the closed-form gradient.

        Returns
        -------
        prior_precision : float
        noise_scale : float
            1.0 unless ``tune_noise``.
        """
        start = [math.log(prior_precision)] + ([0.0] if tune_noise else [])

        def objective(x):
            value, gradient = self._evidence(x[0], x[1] if tune_noise else 0.0)
            return -value, -gradient[: len(x)]

        bounds = [_LOG_PRIOR_PRECISION_BOUNDS] + ([_LOG_NOISE_SCALE_BOUNDS] if tune_noise else [])
        result = minimize(objective, np.array(start), jac=True, method="L-BFGS-B", bounds=bounds)
        at_bound = [
            name
            for name, value, (low, high) in zip(("prior precision", "noise scale"), result.x, bounds)
            if np.isclose(value, low) or np.isclose(value, high)
        ]
        if not result.success or at_bound:
            reason = f"stopped at a bound of the {' and '.join(at_bound)}" if at_bound else result.message
            warn(
                f"Maximising the Laplace evidence {reason} (prior precision "
                f"{math.exp(result.x[0]):.3g}); the result may not be the maximum.",
                ConvergenceWarning,
            )
        return math.exp(result.x[0]), math.exp(result.x[1]) if tune_noise else 1.0

    def _precision_spectrum(self, prior_precision, noise_scale, cov_scale):
        return cov_scale * (self._coordinate_eigenvalues / noise_scale**self.noise_power + prior_precision)

    def linearised(self, model, X):
        """The network's outputs at the MAP over ``X`` and, as a function of the
        prior and scales, their covariance ``J Sigma J^T`` per point under the
        linearised posterior.

        The Jacobian ``J`` (shape ``(N, O, K)``) is projected on the
        eigenvectors once (for 'full', decomposing the curvature if nothing
        has yet); each evaluation is then ``O(N O^2 K)``: a grid search over the
        prior precision or the noise costs no new curvature and no
        factorisation. Over ``cov_scale`` alone, the posterior's factor gives
        the one covariance that the scale divides, without the decomposition.

        Returns
        -------
        mean : tensor of shape (N, O)
        covariance : callable ``(prior_precision, noise_scale=1.0, cov_scale=1.0) -> tensor (N, O, O)``
        """
        with torch.no_grad():
            mean, jacobian = outputs_and_jacobian(model, self.theta, X)
            if self.basis is not None:
                projected = self.basis.transpose_apply(jacobian)
            else:
                if self._prior_root is not None:
                    jacobian = jacobian / self._prior_root
                projected = jacobian if self.eigenvectors is None else jacobian @ self.eigenvectors

        def covariance(prior_precision, noise_scale=1.0, cov_scale=1.0):
            inverse = self._precision_spectrum(prior_precision, noise_scale, cov_scale).reciprocal()
            return (projected * inverse) @ projected.mT

        return mean, covariance

    def posterior(self, prior_precision, noise_scale=1.0, cov_scale=1.0):
        """``N(theta*, (cov_scale * (C / c**p + delta P))^-1)``."""
        root = self._prior_root
        if self.structure != "full":
            std = self._precision_spectrum(prior_precision, noise_scale, cov_scale).rsqrt()
            if self.basis is not None:
                return GaussianPosterior.from_basis(self.theta, self.basis, std)
            return GaussianPosterior.from_std(self.theta, std if root is None else std / root)
        cholesky = self._precision_cholesky(prior_precision, noise_scale) * cov_scale**0.5
        if root is not None:
            cholesky = root[:, None] * cholesky  # P^(1/2) L, still lower triangular
        return GaussianPosterior.from_precision_cholesky(self.theta, cholesky)

    def _precision_cholesky(self, prior_precision, noise_scale):
        """The lower Cholesky factor of ``C / c**p + delta I`` (whitened), the last one kept:
        the factor at ``cov_scale`` ``s`` is ``s**0.5`` times it, so a search over ``s``
        factorises once."""
        key = (float(prior_precision), float(noise_scale))
        if self._cholesky_key != key:
            matrix = self._matrix / noise_scale**self.noise_power
            matrix.diagonal().add_(prior_precision)
            # Jittered where round-off breaks it: where the data's curvature dwarfs the prior's by more
            # than the dtype resolves. The engine does not know which of the likely causes is the user's.
            self._cholesky = jittered_cholesky(
                matrix, torch.finfo(matrix.dtype).eps, "The posterior precision",
                ": the data's curvature exceeds the prior's by more than the dtype resolves (a noise_std "
                "fixed far below the residuals, a prior_std far from the weights' scale, an unscaled input "
                "column or dtype='float32' can cause it)",
            )
            self._cholesky_key = key
        return self._cholesky
