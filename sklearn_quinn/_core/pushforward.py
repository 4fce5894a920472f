"""From a weight posterior to a distribution over network outputs.

Two pushforwards, both giving an object with ``mean``, ``variance``,
``covariance()`` and ``sample(n, generator)`` over outputs of shape ``(N, O)``:

- linear (GLM / linearised network): ``N(f(theta*, X), J Sigma J^T)``, kept as
  a factor ``B`` with ``J Sigma J^T = B B^T``;
- nonlinear: ``f(theta_s, X)`` for weight draws ``theta_s``.
"""

from functools import cached_property

import torch


class GaussianPredictive:
    """``N(mean, B B^T)`` over the outputs; ``factor`` ``B`` has shape ``(N, O, R)``.

    ``factor`` may be a zero-argument callable: it is then computed on first
    use, so a caller that needs only the mean never pays for the Jacobian.
    """

    def __init__(self, mean, factor):
        self.mean = mean
        self._factor = factor

    @cached_property
    def factor(self):
        return self._factor() if callable(self._factor) else self._factor

    @property
    def variance(self):
        return self.factor.square().sum(-1)

    def covariance(self):
        """Covariance across points for each output, shape ``(O, N, N)``."""
        per_output = self.factor.transpose(0, 1)
        return per_output @ per_output.mT

    def sample(self, n, generator=None):
        """Joint draws over all points, shape ``(n, N, O)``."""
        z = torch.randn(
            self.factor.shape[-1], n, generator=generator, dtype=self.mean.dtype, device=self.mean.device
        )
        return self.mean + (self.factor @ z).permute(2, 0, 1)


class SampledPredictive:
    """The empirical distribution of output draws ``samples`` of shape ``(S, N, O)``."""

    def __init__(self, samples):
        self.samples = samples

    @property
    def mean(self):
        return self.samples.mean(0)

    @property
    def variance(self):
        if self.samples.shape[0] < 2:
            return torch.zeros_like(self.samples[0])
        return self.samples.var(0, correction=1)

    def covariance(self):
        """Sample covariance across points for each output, shape ``(O, N, N)``."""
        if self.samples.shape[0] < 2:
            n_points, n_outputs = self.samples.shape[1:]
            return self.samples.new_zeros(n_outputs, n_points, n_points)
        centred = (self.samples - self.mean).permute(2, 1, 0)
        return centred @ centred.mT / (self.samples.shape[0] - 1)


def linear_pushforward(model, posterior, X):
    """The linearised network's predictive under a :class:`GaussianPosterior`."""
    mean = model.single(posterior.mean, X)

    def factor():
        jac = model.jacobian(posterior.mean, X)
        n_points, n_outputs, n_params = jac.shape
        return posterior.project(jac.reshape(-1, n_params)).reshape(n_points, n_outputs, -1)

    return GaussianPredictive(mean, factor)


def nonlinear_pushforward(model, theta, X):
    """The network's outputs for weight draws ``theta (S, K)``."""
    return SampledPredictive(model(theta, X))
