"""Predictions from a finite set of weight vectors, for the sampling and ensemble families."""

from ._core.posterior import SamplePosterior
from ._core.rng import choice


class DrawsMixin:
    """Predictions from a finite set of weight vectors (chain draws, ensemble
    members, particles), for regressors and classifiers alike.

    The outputs are the network over every kept row, with its weight, each
    optionally spread by a Gaussian of a local variance about it; a
    regressor's predictive variance adds the mean square noise, and
    ``sample_y`` picks rows by weight, each with its own noise std (the draws'
    mixture itself, whose spread ``predict`` estimates without bias: see
    ``BaseBayesianRegressor.predict``).
    """

    def _keep_draws(self, theta, noise_std=None, weights=None, local_variance=None):
        """Keep weight rows ``(S, K)``, their weights ``(S,)`` (None: equal),
        for a regressor with a homoscedastic noise their noise std ``(S, O)``
        (network units; None for a classifier or a heteroscedastic regressor),
        and the variance ``(O,)`` of each row's outputs about the network's
        (network units; None: none)."""
        self.posterior_ = SamplePosterior(theta, weights)
        self._draw_noise = noise_std
        self._draw_local_variance = local_variance
        self._keep_noise(None if noise_std is None else (self.posterior_.weights @ noise_std.square()).sqrt())

    def _prediction_draws(self, posterior=None):
        """Every kept row, with its weight."""
        posterior = self.posterior_ if posterior is None else posterior
        return posterior.samples, posterior.weights

    def _sample_outputs(self, X, n_samples, generator):
        weights = self.posterior_.weights
        index = choice(generator, weights, n_samples)
        noise_std = None if self._draw_noise is None else self._draw_noise[index].unsqueeze(1)
        return self._spread_locally(self._model(self.posterior_.samples[index], X), X, generator), noise_std
