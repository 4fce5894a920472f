"""Log densities over rows of a sampler's state, with hand-written gradients.

A sampler's state is a ``(C, P)`` matrix: one row per chain or particle, the
network's ``K`` weights and, for a regression with estimated noise, the log
noise std in a last column. Every density here is a callable ``rows -> (C,)``
with a ``value_and_grad(rows) -> ((C,), (C, P))`` method that computes the
gradient from the model's vector-Jacobian product, without an autograd graph
(the kernels call it when present). Likelihoods and priors are normalised, so
that sums of them are exact log evidences in SMC.
"""

import math

import torch
from torch.nn.functional import softplus

from .distributions import GaussianPrior

#: Prior of the log noise std when it is part of the state (network units,
#: where the standardised target has std 1): N(0, 1).
LOG_NOISE_PRIOR_STD = 1.0
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class LogisticPrior:
    """Independent logistic distributions on every weight, location 0.

    ``scale = std * sqrt(3) / pi`` so that each weight has standard deviation
    ``std``, as under :class:`GaussianPrior` (the SMC talk's prior, with heavier
    tails than the Gaussian).

    Parameters
    ----------
    std : float
        Standard deviation of every weight.
    """

    def __init__(self, std):
        self.std = float(std)
        self.scale = self.std * math.sqrt(3) / math.pi

    def log_prob(self, theta):
        """Log density of each row of ``theta (S, K)``, shape ``(S,)``."""
        z = theta / self.scale
        return (-z - 2 * softplus(-z)).sum(-1) - theta.shape[-1] * math.log(self.scale)

    def value_and_grad(self, theta):
        return self.log_prob(theta), -torch.tanh(0.5 * theta / self.scale) / self.scale

    def sample(self, n, n_params, generator=None, dtype=torch.float64, device="cpu"):
        """Draw ``n`` weight vectors, shape ``(n, K)``, by inverting the CDF."""
        u = torch.rand(n, n_params, generator=generator, dtype=dtype, device=device)
        u = u.clamp(torch.finfo(dtype).tiny, 1 - torch.finfo(dtype).eps)
        return self.scale * torch.logit(u)


class RowPrior:
    """The prior over state rows: ``weight_prior`` on the first ``n_params``
    columns and, with ``log_noise=True``, ``N(0, LOG_NOISE_PRIOR_STD**2)`` on
    the log noise std in the last column.

    Parameters
    ----------
    weight_prior : GaussianPrior or LogisticPrior
    n_params : int
    log_noise : bool, default=False
    """

    def __init__(self, weight_prior, n_params, log_noise=False):
        self.weight_prior = weight_prior
        self.n_params = n_params
        self.noise_prior = GaussianPrior(LOG_NOISE_PRIOR_STD) if log_noise else None

    def _blocks(self, rows):
        yield self.weight_prior, rows[:, : self.n_params]
        if self.noise_prior is not None:
            yield self.noise_prior, rows[:, self.n_params :]

    def __call__(self, rows):
        return sum(prior.log_prob(block) for prior, block in self._blocks(rows))

    def value_and_grad(self, rows):
        values, gradients = zip(*(prior.value_and_grad(block) for prior, block in self._blocks(rows)))
        return sum(values), torch.cat(gradients, dim=1)

    def sample(self, n, generator=None, dtype=torch.float64, device="cpu"):
        """Draw ``n`` rows from the prior, shape ``(n, P)``."""
        blocks = [self.weight_prior.sample(n, self.n_params, generator, dtype, device)]
        if self.noise_prior is not None:
            blocks.append(self.noise_prior.sample(n, 1, generator, dtype, device))
        return torch.cat(blocks, dim=1)


class RegressionLogLikelihood:
    """``log p(Y | X, theta, noise)`` of a Gaussian likelihood, per row.

    With ``noise_std=None`` the last column of each row is the log noise std
    (one shared by the outputs); otherwise the noise is fixed (per output).
    """

    def __init__(self, model, X, Y, noise_std=None):
        self.model, self.X, self.Y = model, X, Y
        self.noise_std = None if noise_std is None else torch.as_tensor(noise_std, dtype=Y.dtype, device=Y.device)
        self._inverse_noise = None if noise_std is None else 1.0 / self.noise_std
        self._constant = -Y.numel() * _HALF_LOG_2PI
        if noise_std is not None:
            self._constant -= Y.shape[0] * float(torch.log(self.noise_std).expand(Y.shape[1]).sum())

    def _split(self, rows):
        """Weights, inverse noise std (broadcastable to the outputs) and log noise (None when fixed).

        The inverse, so that the hot path multiplies: a compiled graph would
        otherwise divide per element."""
        if self.noise_std is not None:
            return rows, self._inverse_noise, None
        log_noise = rows[:, self.model.n_params]
        return rows[:, : self.model.n_params], (-log_noise).exp()[:, None, None], log_noise

    def _value(self, squares, log_noise):
        value = self._constant - 0.5 * squares.sum((-1, -2))
        return value if log_noise is None else value - self.Y.numel() * log_noise

    def __call__(self, rows):
        theta, inverse_noise, log_noise = self._split(rows)
        return self._value(((self.Y - self.model(theta, self.X)) * inverse_noise).square(), log_noise)

    def value_and_grad(self, rows):
        with torch.no_grad():
            theta, inverse_noise, log_noise = self._split(rows)
            outputs, vjp = self.model.forward_and_vjp(theta, self.X)
            scaled = (self.Y - outputs) * inverse_noise
            squares = scaled.square()
            value, gradient = self._value(squares, log_noise), vjp(scaled * inverse_noise)
            if log_noise is None:
                return value, gradient
            # d/d log(noise) of the log likelihood: sum(z^2) - N * O.
            d_log_noise = squares.sum((-1, -2)) - self.Y.numel()
            return value, torch.cat([gradient, d_log_noise[:, None]], dim=1)


class ClassificationLogLikelihood:
    """``log p(y | X, theta)`` of a categorical (softmax) likelihood, per row.

    ``y`` holds the class indices ``(N,)``; the gradient is
    ``J^T (onehot(y) - softmax(f))``.
    """

    def __init__(self, model, X, y):
        self.model, self.X = model, X
        self.index = y.long()[:, None]
        self._one_hot = None

    def one_hot(self, n_classes):
        """The labels one-hot, ``(N, n_classes)``, built once."""
        if self._one_hot is None:
            self._one_hot = torch.zeros(len(self.index), n_classes, dtype=self.X.dtype, device=self.X.device)
            self._one_hot.scatter_(-1, self.index, 1.0)
        return self._one_hot

    def __call__(self, rows):
        log_probabilities = log_softmax(self.model(rows, self.X))
        return log_probabilities.gather(-1, self.index.expand(len(rows), -1, 1)).sum((-1, -2))

    def value_and_grad(self, rows):
        with torch.no_grad():
            logits, vjp = self.model.forward_and_vjp(rows, self.X)
            log_probabilities = log_softmax(logits)
            one_hot = self.one_hot(logits.shape[-1])
            return (log_probabilities * one_hot).sum((-1, -2)), vjp(one_hot - log_probabilities.exp())


def log_softmax(logits):
    """``log_softmax`` over the last axis of ``(S, N, C)`` logits.

    Reduced over a transposed contiguous copy: torch's CPU kernel is about 4x
    slower over a short last axis (a few classes) than over a leading one.
    """
    return torch.log_softmax(logits.transpose(-1, -2).contiguous(), dim=-2).transpose(-1, -2)


class LogPosterior:
    """``log prior + temperature * log likelihood``: the posterior (temperature 1)
    or one of SMC's tempered targets."""

    def __init__(self, log_likelihood, log_prior, temperature=1.0):
        self.log_likelihood, self.log_prior = log_likelihood, log_prior
        self.temperature = float(temperature)

    def __call__(self, rows):
        return self.log_prior(rows) + self.temperature * self.log_likelihood(rows)

    def value_and_grad(self, rows):
        likelihood, likelihood_gradient = self.log_likelihood.value_and_grad(rows)
        prior, prior_gradient = self.log_prior.value_and_grad(rows)
        return prior + self.temperature * likelihood, prior_gradient + self.temperature * likelihood_gradient


def regression_log_posterior(model, X, Y, prior_std, noise_std=None):
    """The log posterior of a Gaussian-likelihood network under a Gaussian prior
    (with the log noise std in the last column when ``noise_std=None``)."""
    prior = RowPrior(GaussianPrior(prior_std), model.n_params, log_noise=noise_std is None)
    return LogPosterior(RegressionLogLikelihood(model, X, Y, noise_std), prior)


def classification_log_posterior(model, X, y, prior_std):
    """The log posterior of a softmax network under a Gaussian prior."""
    return LogPosterior(ClassificationLogLikelihood(model, X, y), RowPrior(GaussianPrior(prior_std), model.n_params))
