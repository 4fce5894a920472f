"""Likelihoods as torch modules, the piece of a training loss that depends on the task.

Targets are always a float tensor ``(..., N, O)``: the values for regression,
one column of class indices for classification. Both likelihoods give the log
density of each point, ``(..., N)``, for network outputs ``(..., N, O)`` (or
logits ``(..., N, C)``) with any leading batch axes (members, weight draws).
"""

import math

import torch
from torch import nn

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class GaussianLikelihood(nn.Module):
    """``N(y | f, noise_std**2)`` per output, with a fixed or trained noise.

    Parameters
    ----------
    noise_std : tensor of shape (..., O)
        Fixed noise, or the start of the trained one; leading axes broadcast
        against the outputs' (e.g. ``(J, 1, O)`` for one noise per member).
    learn_noise : bool, default=False
        Train one log noise std per leading index, shared by the outputs.
    """

    def __init__(self, noise_std, learn_noise=False):
        super().__init__()
        log_noise = torch.log(noise_std)
        if learn_noise:
            self.log_noise_std = nn.Parameter(log_noise.mean(-1, keepdim=True))
        else:
            self.register_buffer("log_noise_std", log_noise)

    @property
    def noise_std(self):
        """The current noise std (detached), shaped like ``noise_std`` or with one output."""
        return self.log_noise_std.detach().exp()

    def log_prob(self, outputs, y, perturbation=None):
        """Log density per point of ``y + noise_std * perturbation`` given ``outputs``.

        ``perturbation`` (standard normal, shaped like ``y``) randomises the
        targets by the model's own noise, for randomized MAP sampling.
        """
        if outputs.shape != y.shape and outputs.numel() == y.numel():
            outputs = outputs.reshape(y.shape)  # a custom module's (N,) for one output
        log_noise = self.log_noise_std
        z = (y - outputs) * torch.exp(-log_noise)
        if perturbation is not None:
            z = z + perturbation
        return (-0.5 * z.square() - log_noise - _HALF_LOG_2PI).sum(-1)


class CategoricalLikelihood(nn.Module):
    """``softmax(f)[y]``: logits ``(..., N, C)``, class indices ``(..., N, 1)`` (as floats)."""

    def log_prob(self, logits, y, perturbation=None):
        index = y[..., :1].long().expand(*logits.shape[:-1], 1)
        return torch.log_softmax(logits, dim=-1).gather(-1, index)[..., 0]
