"""From a weight posterior to a distribution over network outputs.

Two pushforwards, both giving an object with ``mean``, ``variance``,
``covariance()``, ``sample(n, generator)``, ``columns(index)`` (the
distribution of some of the outputs) and ``expectation(log_moment)``
(``E[g(f)]`` from the log of its value under a Gaussian) over outputs of shape
``(N, O)``:

- linear (GLM / linearised network): ``N(f(theta*, X), J Sigma J^T)``, kept as
  a factor ``B`` with ``J Sigma J^T = B B^T``;
- nonlinear: ``f(theta_s, X)`` for weight draws ``theta_s``.
"""

from functools import cached_property

import torch

from .kronecker import KroneckerUnsupportedError, layered_output_covariance, layered_output_covariance_is_cheaper
from .last_layer import module_and_inputs
from .rng import standard_normal


class GaussianPredictive:
    """``N(mean, B B^T)`` over the outputs; ``factor`` ``B`` has shape ``(N, O, R)``.

    ``factor`` may be a zero-argument callable: it is then computed on first
    use, so a caller that needs only the mean never pays for the Jacobian.
    ``output_covariance``, a zero-argument callable giving each point's
    ``(N, O, O)`` covariance without the factor, serves
    :meth:`output_covariance` where that costs less (default: from the factor).
    """

    def __init__(self, mean, factor, output_covariance=None):
        self.mean = mean
        self._factor = factor
        self._output_covariance = output_covariance

    @cached_property
    def factor(self):
        return self._factor() if callable(self._factor) else self._factor

    def output_covariance(self):
        """Covariance across outputs at each point, shape ``(N, O, O)``."""
        if self._output_covariance is not None:
            return self._output_covariance()
        return self.factor @ self.factor.mT

    @property
    def variance(self):
        return self.factor.square().sum(-1)

    def covariance(self):
        """Covariance across points for each output, shape ``(O, N, N)``."""
        per_output = self.factor.transpose(0, 1)
        return per_output @ per_output.mT

    def columns(self, index):
        """The distribution of the outputs ``index`` (a slice of the last axis)."""
        output_covariance = None
        if self._output_covariance is not None:
            def output_covariance():
                return self._output_covariance()[:, index, index]
        return GaussianPredictive(self.mean[..., index], lambda: self.factor[:, index], output_covariance)

    def expectation(self, log_moment):
        """``E[g(f)]`` per point and output, shape ``(N, O)``, from ``log_moment(mean, variance)``,
        ``log E[g(f)]`` for ``f ~ N(mean, variance)`` elementwise."""
        return torch.exp(log_moment(self.mean, self.variance))

    def sample(self, n, generator=None):
        """Joint draws over all points, shape ``(n, N, O)``."""
        z = standard_normal(generator, self.mean, (self.factor.shape[-1], n))
        return self.mean + (self.factor @ z).permute(2, 0, 1)


class SampledPredictive:
    """The empirical distribution of output draws ``samples`` of shape ``(S, N, O)``,
    equally weighted or with normalised ``weights`` ``(S,)`` (SMC particles), each
    draw's outputs optionally spread by an independent Gaussian of variance
    ``local_variance`` about them (a mixture of Gaussians): one per output ``(O,)``, or
    one per point and output ``(N, O)``.

    Variances and covariances are the unbiased weighted estimates, divided by
    ``1 - sum(w**2)`` (``(S - 1) / S`` for equal weights); zero when one draw
    carries all the weight; plus the local variance.
    """

    def __init__(self, samples, weights=None, local_variance=None):
        self.samples = samples
        if weights is None:
            weights = torch.full(samples.shape[:1], 1.0 / samples.shape[0], dtype=samples.dtype, device=samples.device)
        self.weights = weights
        self.local_variance = local_variance

    def average(self, values):
        """The weighted average of ``values (S, ...)`` over the draws."""
        return torch.tensordot(self.weights, values, dims=1)

    def log_average(self, log_values):
        """The log of the weighted average of ``exp(log_values)`` ``(S, ...)`` over the draws, taken in
        logs: neither a value that underflows nor one that overflows makes ``0 * inf``."""
        log_weights = self.weights.log().reshape(-1, *[1] * (log_values.dim() - 1))
        return torch.logsumexp(log_weights + log_values, dim=0)

    @property
    def mean(self):
        return self.average(self.samples)

    def columns(self, index):
        """The distribution of the outputs ``index`` (a slice of the last axis)."""
        local = None if self.local_variance is None else self.local_variance[..., index]
        return SampledPredictive(self.samples[..., index], self.weights, local)

    def _local_by_point(self):
        """The local variance at every point, ``(N, O)``."""
        return self.local_variance.expand(self.samples.shape[1:])

    def expectation(self, log_moment):
        """``E[g(f)]`` per point and output, shape ``(N, O)``, from ``log_moment(mean, variance)``,
        ``log E[g(f)]`` for ``f ~ N(mean, variance)`` elementwise: each draw's Gaussian (of the
        local variance; none without one) averaged by weight in logs, so that neither a draw whose
        moment underflows nor one whose local factor overflows makes ``0 * inf``."""
        local = torch.zeros_like(self.samples) if self.local_variance is None else self.local_variance
        return torch.exp(self.log_average(log_moment(self.samples, local.expand(self.samples.shape))))

    def _unbiased(self, scatter):
        effective = 1.0 - self.weights.square().sum()
        return torch.zeros_like(scatter) if effective <= 1e-12 else scatter / effective

    @property
    def variance(self):
        variance = self._unbiased(self.average((self.samples - self.mean).square()))
        return variance if self.local_variance is None else variance + self.local_variance

    def covariance(self):
        """Covariance across points for each output, shape ``(O, N, N)`` (the local
        spreads independent from point to point)."""
        centred = (self.samples - self.mean).permute(2, 1, 0)
        covariance = self._unbiased((centred * self.weights) @ centred.mT)
        if self.local_variance is None:
            return covariance
        return covariance + torch.diag_embed(self._local_by_point().mT)

    def output_covariance(self):
        """Covariance across outputs at each point, shape ``(N, O, O)``."""
        centred = self.samples - self.mean
        covariance = self._unbiased(torch.einsum("s,snc,snd->ncd", self.weights, centred, centred))
        return covariance if self.local_variance is None else covariance + torch.diag_embed(self._local_by_point())


def linear_pushforward(model, posterior, X):
    """The linearised network's predictive under a :class:`GaussianPosterior`.

    Under a full posterior (a Cholesky factor of the precision), each point's
    covariance across many outputs (a softmax's logits) comes from the layers'
    structure (:func:`~sklearn_quinn._core.kronecker.layered_output_covariance`)
    where that costs less than the factor. A last-layer model is its head at the last layer's
    inputs, which one forward pass of the body gives the means and the Jacobian alike.
    """
    model, X, offset = module_and_inputs(model, X)
    mean = model.single(posterior.mean, X)
    if offset is not None:
        mean = mean + offset

    def factor():
        jac = model.jacobian(posterior.mean, X)
        n_points, n_outputs, n_params = jac.shape
        return posterior.project(jac.reshape(-1, n_params)).reshape(n_points, n_outputs, -1)

    def output_covariance():
        try:
            return layered_output_covariance(model, posterior.mean, posterior.covariance, X)
        except KroneckerUnsupportedError:  # layers that do not carry their weights' gradient: the factor serves
            return predictive.factor @ predictive.factor.mT

    layered = posterior.std is None and _layered_is_cheaper(model, *mean.shape)
    predictive = GaussianPredictive(mean, factor, output_covariance if layered else None)
    return predictive


def _layered_is_cheaper(model, n_points, n_outputs):
    try:
        return layered_output_covariance_is_cheaper(model, n_points, n_outputs)
    except KroneckerUnsupportedError:
        return False


def nonlinear_pushforward(model, theta, X, weights=None, local_variance=None):
    """The network's outputs for weight draws ``theta (S, K)``, optionally weighted, each
    optionally spread by ``local_variance`` ``(O,)`` or ``(N, O)`` (see :class:`SampledPredictive`)."""
    return SampledPredictive(model(theta, X), weights, local_variance)
