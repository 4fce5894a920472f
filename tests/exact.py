"""The closed-form Bayesian linear regression that the Laplace approximation must
reproduce exactly for a network without hidden layers."""

import numpy as np
from scipy.stats import multivariate_normal


def column_log_hyperprior(column_precisions, shape=0.5):
    """The log density of a layer's input columns' precisions under Neal's Gamma hyperprior of
    shape 1/2 about their mean, in the log precisions, at the mean that maximises it (the columns'
    arithmetic mean), up to a constant: ``shape * sum_c log(delta_c / mean)``."""
    column_precisions = np.asarray(column_precisions)
    return shape * np.sum(np.log(column_precisions) - np.log(column_precisions.mean()))


class BayesianLinearRegression:
    """Exact posterior of ``y = [X, 1] w + noise`` with ``w ~ N(0, prior_std^2 I)``.

    The weight order is that of ``nn.Linear``: the coefficients, then the bias.
    ``prior_std`` may be an array, a std per weight (not for :meth:`log_evidence`).
    """

    def __init__(self, X, y, noise_std, prior_std):
        self.noise_std, self.prior_std = noise_std, prior_std
        self.X, self.y = X, y
        design = self.design(X)
        self.precision = design.T @ design / noise_std**2 + np.eye(design.shape[1]) / prior_std**2
        self.covariance = np.linalg.inv(self.precision)
        self.mean = self.covariance @ design.T @ y / noise_std**2

    @classmethod
    def at_precisions(cls, X, y, noise_std, prior_precisions):
        """At the precisions a fit learned for an ``nn.Linear`` module with one output
        (``prior_precisions_``: one per input column, ``'weight[:, j]'``, and the bias's)."""
        precisions = [prior_precisions[f"weight[:, {j}]"] for j in range(X.shape[1])] + [prior_precisions["bias"]]
        return cls(X, y, noise_std, np.asarray(precisions) ** -0.5)

    @staticmethod
    def design(X):
        return np.hstack([X, np.ones((len(X), 1))])

    def well_determined(self):
        """MacKay's well-determined parameters ``gamma = tr(H (H + A)^-1)``, with ``H`` the
        data's part of the posterior precision and ``A`` the prior's."""
        design = self.design(self.X)
        return np.trace(design @ self.covariance @ design.T) / self.noise_std**2

    def predictive_std(self, X):
        design = self.design(X)
        weight_var = np.einsum("ij,jk,ik->i", design, self.covariance, design)
        return np.sqrt(weight_var + self.noise_std**2)

    def log_evidence(self):
        design = self.design(self.X)
        cov = self.noise_std**2 * np.eye(len(self.y)) + self.prior_std**2 * design @ design.T
        return multivariate_normal(np.zeros(len(self.y)), cov).logpdf(self.y)


class HierarchicalLinearRegression:
    """Exact posterior and evidence of a linear model under Gamma hyperpriors, by quadrature.

    ``y = design w + noise``, ``w_g ~ N(0, I / delta_g)`` per group of
    coefficients, ``noise ~ N(0, I / tau)``, and ``delta_g, tau ~ Gamma(shape,
    rate)``; the precisions of the groups ``columns`` instead about a common
    mean ``m``, ``delta_c ~ Gamma(column_shape, rate column_shape / m)``, with
    ``m ~ Gamma(shape, rate)`` integrated out in closed form (Neal's hierarchy
    for input relevance; ``int m**(nu - 1) exp(-rate m - S / m) dm = 2 (S /
    rate)**(nu / 2) K_nu(2 sqrt(rate S))``, a modified Bessel function). Given
    the hyperparameters the model is Gaussian, so ``p(y | delta, tau)`` and
    the weights' conditional mean and covariance are closed-form; the
    hyperparameters (up to three ``delta_g`` and ``tau``) are integrated out
    on a regular grid of their logs (the trapezoid rule, spectrally accurate
    for a smooth density that has vanished at the grid's edges). A first
    coarse grid finds where the posterior lies; each of two finer grids spans 9
    posterior standard deviations (at least 9 coarse steps, the first) either
    side of the mean the last one found, on each axis.

    Parameters
    ----------
    design : ndarray of shape (N, K)
        The coefficients' inputs, in the order of the model's flat weights.
    y : ndarray of shape (N,)
    groups : ndarray of shape (K,)
        The group (0, 1, ...) of each coefficient.
    shape, rate : float
    n_points : int
        Grid points per axis.
    columns : sequence of int, default=()
        The groups whose precisions share a mean.
    column_shape : float, default=0.5

    Attributes
    ----------
    log_evidence : float
    mean_log_precision, std_log_precision : ndarray of shape (G,)
    mean_log_tau, std_log_tau : float
    mean, std : ndarray of shape (K,)
        The weights' posterior mean and standard deviation.
    """

    def __init__(self, design, y, groups, shape, rate, n_points=61, columns=(), column_shape=0.5):
        self.design, self.y, self.groups = design, y, np.asarray(groups)
        self.shape, self.rate = shape, rate
        self.columns, self.column_shape = list(columns), column_shape
        n_axes = self.groups.max() + 2
        coarse = np.linspace(-15, 15, {2: 121, 3: 41}.get(n_axes, 31))
        moments = self._integrate([coarse] * n_axes)
        # The coarse grid may put a narrow axis's mass on one point, and its std there on the order
        # of that point's neighbours' weights: the first finer grid spans 9 coarse steps at least.
        step = coarse[1] - coarse[0]
        moments = self._integrate([np.linspace(m - 9 * max(s, step), m + 9 * max(s, step), n_points)
                                   for m, s in zip(*moments)])
        self._integrate([np.linspace(m - 9 * s, m + 9 * s, n_points) for m, s in zip(*moments)])

    def _gamma_of_log(self, log_x):
        from scipy.special import gammaln

        return self.shape * np.log(self.rate) - gammaln(self.shape) + self.shape * log_x - self.rate * np.exp(log_x)

    def _log_prior(self, grid):
        """The log density of the grid's log precisions and log tau (one row each)."""
        from scipy.special import gammaln, kve

        log_prior = self._gamma_of_log(grid)
        if not self.columns:
            return log_prior.sum(1)
        others = [axis for axis in range(grid.shape[1]) if axis not in self.columns]
        A, a, b = self.column_shape, self.shape, self.rate
        log_columns = grid[:, self.columns]
        scale = A * np.exp(log_columns).sum(1)
        order = a - len(self.columns) * A
        z = 2 * np.sqrt(b * scale)
        log_integral = np.log(2) + 0.5 * order * np.log(scale / b) + np.log(kve(order, z)) - z
        columns = (A * np.log(A) - gammaln(A) + A * log_columns).sum(1) + a * np.log(b) - gammaln(a) + log_integral
        return log_prior[:, others].sum(1) + columns

    def _integrate(self, axes):
        from scipy.special import logsumexp

        design, y, groups = self.design, self.y, self.groups
        n_rows, n_coefficients = design.shape
        grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, len(axes))
        log_precision, log_tau = grid[:, :-1], grid[:, -1]
        precision, tau = np.exp(log_precision), np.exp(log_tau)
        gram, projection = design.T @ design, design.T @ y
        matrix = tau[:, None, None] * gram + np.eye(n_coefficients) * precision[:, groups][:, None, :]
        cholesky = np.linalg.cholesky(matrix)
        mean = tau[:, None] * np.linalg.solve(matrix, projection[None, :, None])[..., 0]
        sizes = np.bincount(groups)
        log_likelihood = (
            0.5 * n_rows * (log_tau - np.log(2 * np.pi))
            + 0.5 * log_precision @ sizes
            - np.log(np.diagonal(cholesky, axis1=1, axis2=2)).sum(1)
            - 0.5 * tau * (y @ y)
            + 0.5 * tau * (mean @ projection)
        )
        log_joint = log_likelihood + self._log_prior(grid)
        cell = np.prod([axis[1] - axis[0] for axis in axes])
        self.log_evidence = float(logsumexp(log_joint) + np.log(cell))
        weights = np.exp(log_joint - log_joint.max())
        weights /= weights.sum()
        moments = weights @ grid, np.sqrt(weights @ (grid - weights @ grid) ** 2)
        self.mean_log_precision, self.mean_log_tau = moments[0][:-1], moments[0][-1]
        self.std_log_precision, self.std_log_tau = moments[1][:-1], moments[1][-1]
        variance = np.diagonal(np.linalg.inv(matrix), axis1=1, axis2=2)
        self.mean = weights @ mean
        self.std = np.sqrt(weights @ (variance + mean**2) - self.mean**2)
        return moments
