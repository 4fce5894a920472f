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


# Curvature pieces: the loss of point n is -log p(y_n | f_n); its gradient in
# the outputs, and a factor S_n of its output Hessian Lambda_n = S_n^T S_n (the
# generalised Gauss-Newton is sum_n J_n^T Lambda_n J_n = sum_n (S_n J_n)^T (S_n J_n)).


def output_gradient(likelihood, outputs, y):
    """``d(-log p(y | f)) / df`` per point, shape ``(N, O)``."""
    if isinstance(likelihood, GaussianLikelihood):
        return (outputs - y) / likelihood.noise_std.square()
    probabilities = torch.softmax(outputs, dim=-1)
    return probabilities - torch.nn.functional.one_hot(y[:, 0].long(), outputs.shape[-1]).to(outputs.dtype)


def whitened_jacobian(likelihood, jacobian, outputs):
    """``S_n J_n`` for per-point Jacobians ``(N, O, K)``: rows whose Gram matrix is the GGN.

    Gaussian: ``S = diag(1 / noise_std)``. Categorical with probabilities
    ``p``: ``S = diag(sqrt(p)) - sqrt(p) p^T``, for which ``S^T S = diag(p) - p p^T``.
    """
    if isinstance(likelihood, GaussianLikelihood):
        return jacobian / likelihood.noise_std.reshape(-1)[:, None]
    probabilities = torch.softmax(outputs, dim=-1)
    root = probabilities.sqrt()
    factor = torch.diag_embed(root) - root.unsqueeze(-1) * probabilities.unsqueeze(-2)
    return factor @ jacobian
