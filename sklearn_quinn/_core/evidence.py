"""The Laplace evidence at one weight vector, as a function of the hyperparameters.

The prior is ``N(0, diag(delta)^-1)`` with one precision ``delta_g`` per group
of weights (each named parameter tensor: a layer's weights, a layer's biases),
the noise a Gaussian likelihood's std ``c * noise_std`` (``c`` a scale on the
current noise). With the generalised Gauss-Newton ``G = W^T W`` (``W`` the
whitened Jacobian at the current noise, rows per observation) the Laplace
approximation of the log evidence at ``theta`` is

    ``log p(D | theta, c) - 1/2 sum_g delta_g ||theta_g||^2 + 1/2 sum_g K_g log delta_g
    - 1/2 log det(G / c**2 + diag(delta))``

(MacKay 1992, "A practical Bayesian framework for backpropagation networks";
evaluated at the current weights during training, not only at a converged MAP,
as in Immer et al. 2021, "Scalable marginal likelihood estimation for model
selection in deep learning"). Its log determinant is exact when it is cheap:
through the ``M x M`` kernel ``I + W diag(delta)^-1 W^T / c**2`` when the ``M``
observations are fewer than the ``K`` weights (the matrix determinant lemma),
through the ``K x K`` matrix otherwise, and from the diagonal of ``G`` for a
network too large for either.
"""

import math

import numpy as np
import torch
from scipy.optimize import minimize

from .curvature import curvature

#: Largest ``M x K`` whitened Jacobian (bytes) and largest ``K`` for the exact log determinant.
_MAX_JACOBIAN_BYTES = 512 * 1024**2
_MAX_FULL_PARAMS = 2048

# Search bounds on the log prior precisions and the log noise scale of one update.
_LOG_PRECISION_BOUNDS = (math.log(1e-6), math.log(1e8))
_LOG_NOISE_SCALE_BOUNDS = (math.log(1e-3), math.log(1e3))


class ParameterGroups:
    """The groups of the flat weight vector that get a prior precision each:
    one per named parameter tensor, in the order of ``theta``.

    Parameters
    ----------
    names : list of str
    sizes : list of int
        Number of weights in each group.
    """

    def __init__(self, names, sizes):
        self.names = list(names)
        self.sizes = torch.as_tensor(sizes)
        self.index = torch.repeat_interleave(torch.arange(len(self.names)), self.sizes)

    @classmethod
    def of(cls, model):
        """The groups of a :class:`~sklearn_quinn._core.network.FunctionalModel`."""
        return cls(model.names, model.sizes)

    def __len__(self):
        return len(self.names)

    def expand(self, values):
        """One value per group ``(G,)`` to one per weight ``(K,)``."""
        return values[self.index.to(values.device)]

    def sums(self, values):
        """Sums over each group of per-weight ``values (K,)``, shape ``(G,)``."""
        index = self.index.to(values.device)
        return values.new_zeros(len(self)).index_add_(0, index, values)

    def as_dict(self, values):
        """``{name: float}`` from one value per group."""
        return {name: float(value) for name, value in zip(self.names, values)}


class LaplaceEvidence:
    """The Laplace log evidence at ``theta`` as a function of the log prior
    precisions and the log noise scale (see the module docstring).

    Parameters
    ----------
    model : FunctionalModel
    theta : tensor of shape (K,)
    X, Y : tensor of shape (N, D) and (N, O)
    likelihood : GaussianLikelihood or CategoricalLikelihood
        With the current noise, held fixed (``likelihood.frozen``).
    groups : ParameterGroups
    """

    def __init__(self, model, theta, X, Y, likelihood, groups):
        theta = theta.detach()
        self.groups = groups
        with torch.no_grad():
            outputs = model.single(theta, X)
            self._data_fit = likelihood.evidence_data_fit(outputs, Y)
            self._theta_sq = groups.sums(theta.square())
            n_rows, n_params = outputs.numel(), theta.shape[0]
            if n_rows <= n_params and n_rows * n_params * theta.element_size() <= _MAX_JACOBIAN_BYTES:
                self.structure = "kernel"
                jacobian = model.jacobian(theta, X)
                self._factor = likelihood.whitened_jacobian(jacobian, outputs).reshape(-1, n_params)
            else:
                self.structure = "full" if n_params <= _MAX_FULL_PARAMS else "diag"
                self._factor = curvature(model, theta, X, Y, likelihood, "ggn", self.structure)

    def _log_det(self, precision, data_weight):
        """``log det(data_weight * G + diag(precision))``."""
        if self.structure == "diag":
            return torch.log(data_weight * self._factor + precision).sum()
        if self.structure == "kernel":
            kernel = data_weight * (self._factor / precision) @ self._factor.T
            kernel.diagonal().add_(1.0)
            return torch.log(precision).sum() + 2 * torch.linalg.cholesky(kernel).diagonal().log().sum()
        matrix = data_weight * self._factor + torch.diag(precision)
        return 2 * torch.linalg.cholesky(matrix).diagonal().log().sum()

    def value_and_grad(self, log_precision, log_noise_scale=0.0):
        """The log evidence and its gradient in ``(log delta (G,), log c)``, as numpy."""
        log_precision = torch.as_tensor(log_precision, dtype=self._theta_sq.dtype, device=self._theta_sq.device)
        log_precision = log_precision.clone().requires_grad_(True)
        log_scale = torch.tensor(float(log_noise_scale), dtype=log_precision.dtype, requires_grad=True)
        delta = log_precision.exp()
        data_weight = torch.exp(-2 * log_scale).to(delta.device)  # the GGN scales as 1 / noise**2
        value = (
            -0.5 * (delta * self._theta_sq).sum()
            + 0.5 * (self.groups.sizes.to(delta.device) * log_precision).sum()
            - 0.5 * self._log_det(self.groups.expand(delta), data_weight)
        )
        value.backward()
        fit, d_fit = self._data_fit(float(log_noise_scale))
        gradient = np.append(log_precision.grad.cpu().numpy(), float(log_scale.grad) + d_fit)
        return value.item() + fit, gradient

    def maximise(self, log_precision, learn_prior=True, learn_noise=False):
        """The log prior precisions and log noise scale that maximise the evidence at ``theta``.

        L-BFGS-B on the logs within wide bounds, from ``log_precision`` and
        the current noise; what is not learned stays where it is.

        Returns
        -------
        log_precision : ndarray of shape (G,)
        log_noise_scale : float
        log_evidence : float
        """
        log_precision = np.asarray(log_precision, dtype=np.float64)
        n_groups = len(log_precision)
        free = np.r_[np.full(n_groups, learn_prior), learn_noise]
        start = np.append(log_precision, 0.0)

        def objective(x):
            point = start.copy()
            point[free] = x
            value, gradient = self.value_and_grad(point[:n_groups], point[n_groups])
            return -value, -gradient[free]

        if free.any():
            bounds = [_LOG_PRECISION_BOUNDS] * n_groups + [_LOG_NOISE_SCALE_BOUNDS]
            result = minimize(objective, start[free], jac=True, method="L-BFGS-B",
                              bounds=[bound for bound, is_free in zip(bounds, free) if is_free])
            start[free] = result.x
        value, _ = self.value_and_grad(start[:n_groups], start[n_groups])
        return start[:n_groups], float(start[n_groups]), value
