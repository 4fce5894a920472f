"""SWAG: moments of the SGD trajectory, and the Gaussian they define."""

import math
from collections import deque

import torch
from skorch.callbacks import Callback

from .._core.posterior import GaussianPosterior


class SWAGMoments:
    """Running first and second moments of weight snapshots, and the last ``max_rank`` snapshots.

    ``update(w)`` applies the notes' updates
    ``mean <- (n mean + w) / (n + 1)``, ``sq_mean <- (n sq_mean + w * w) / (n + 1)``.
    """

    def __init__(self, max_rank):
        self.max_rank = max_rank
        self.n_snapshots = 0
        self.mean = self.sq_mean = None
        self.snapshots = deque(maxlen=max_rank)

    def update(self, theta):
        theta = theta.detach().clone()
        n = self.n_snapshots
        if n == 0:
            self.mean, self.sq_mean = theta.clone(), theta.square()
        else:
            self.mean = (n * self.mean + theta) / (n + 1)
            self.sq_mean = (n * self.sq_mean + theta.square()) / (n + 1)
        self.snapshots.append(theta)
        self.n_snapshots = n + 1

    def posterior(self, cov_type):
        """The SWAG Gaussian of the notes.

        A draw is ``mean + diag(sqrt(var)) z1 / sqrt(2) + D z2 / sqrt(2 (k - 1))``
        with ``var = sq_mean - mean**2`` (clipped at 0), ``D`` the last ``k``
        deviations ``w_i - mean`` from the final mean as columns, and the
        second term only for ``cov_type='lowrank'``.
        """
        variance = (self.sq_mean - self.mean.square()).clamp(min=0)
        std = (variance / 2).sqrt()
        if cov_type == "diag":
            return GaussianPosterior.from_std(self.mean, std)
        n_columns = len(self.snapshots)
        deviations = torch.stack(list(self.snapshots), dim=1) - self.mean[:, None]
        return GaussianPosterior.from_low_rank(self.mean, std, deviations / math.sqrt(2 * (n_columns - 1)))


class CollectSnapshots(Callback):
    """Feed the flat weights of ``net.module_`` to ``moments`` every ``every`` epochs."""

    def __init__(self, moments, flatten, every):
        self.moments = moments
        self.flatten = flatten
        self.every = every

    def on_epoch_end(self, net, **kwargs):
        if len(net.history) % self.every == 0:
            self.moments.update(self.flatten())
