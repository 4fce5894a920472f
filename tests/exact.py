"""The closed-form Bayesian linear regression that the Laplace approximation must
reproduce exactly for a network without hidden layers."""

import numpy as np
from scipy.stats import multivariate_normal


class BayesianLinearRegression:
    """Exact posterior of ``y = [X, 1] w + noise`` with ``w ~ N(0, prior_std^2 I)``.

    The weight order is that of ``nn.Linear``: the coefficients, then the bias.
    """

    def __init__(self, X, y, noise_std, prior_std):
        self.noise_std, self.prior_std = noise_std, prior_std
        self.X, self.y = X, y
        design = self.design(X)
        self.precision = design.T @ design / noise_std**2 + np.eye(design.shape[1]) / prior_std**2
        self.covariance = np.linalg.inv(self.precision)
        self.mean = self.covariance @ design.T @ y / noise_std**2

    @staticmethod
    def design(X):
        return np.hstack([X, np.ones((len(X), 1))])

    def predictive_std(self, X):
        design = self.design(X)
        weight_var = np.einsum("ij,jk,ik->i", design, self.covariance, design)
        return np.sqrt(weight_var + self.noise_std**2)

    def log_evidence(self):
        design = self.design(self.X)
        cov = self.noise_std**2 * np.eye(len(self.y)) + self.prior_std**2 * design @ design.T
        return multivariate_normal(np.zeros(len(self.y)), cov).logpdf(self.y)
