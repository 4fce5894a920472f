"""MC dropout as a distribution over the flat weight vector (pure torch).

Gal and Ghahramani (2016) read dropout on the input of a linear layer as a
variational distribution over its weight matrix: dropping input unit ``j``
zeroes column ``j`` of ``W``, and the kept columns are scaled by
``1 / (1 - p)``. A draw of the posterior is therefore the trained weight
vector with a Bernoulli(1 - p) mask on the input columns of every weight
matrix, and prediction is the package's batched pushforward ``f(Theta, X)``
over such draws. Biases are not dropped.

Here the layers whose inputs are dropped are the ``nn.Linear`` modules of the
backbone (every layer of the default MLP, the first one included, as in the
paper's UCI experiments) except the linear path of a
:class:`~sklearn_quinn._core.network.LinearSkipMLP`; the parameters of any
other kind of layer, and that path, are left as trained. Dropout's spread of a
linear map, ``p / (1 - p) * sum_j w_j^2 x_j^2``, is set by the weights and
does not shrink as data accumulate (I. Osband, "Risk versus uncertainty in
deep learning: Bayes, bootstrap and the dangers of dropout", NeurIPS 2016
Workshop on Bayesian Deep Learning): on the linear path it would dwarf the
posterior's ``O(1 / N)`` variance, and its training would shrink the linear
fit like a ridge penalty that the prior does not ask for.
"""

import torch
import torch.nn.functional as F
from torch import nn

from .._core.network import LinearSkipMLP


def dropped_layers(module):
    """The ``nn.Linear`` layers of ``module`` whose inputs are dropped: all but linear skip paths."""
    kept = {id(layer.linear) for layer in module.modules() if isinstance(layer, LinearSkipMLP)}
    return [layer for layer in module.modules() if isinstance(layer, nn.Linear) and id(layer) not in kept]


def linear_input_blocks(module):
    """Where the weight matrix of each of the :func:`dropped_layers` of ``module`` lies in ``theta``.

    ``theta`` follows ``module.parameters()``, the order of
    :class:`~sklearn_quinn._core.network.FunctionalModel`. A weight shared by
    several layers is listed once.

    Returns
    -------
    blocks : list of (int, int, int)
        ``(start, n_rows, n_columns)`` of each matrix, stored row-major from
        ``theta[start]``; column ``j`` multiplies the layer's input ``j``.
    """
    offsets, start = {}, 0
    for parameter in module.parameters():
        offsets[id(parameter)] = start
        start += parameter.numel()
    blocks = {}
    for layer in dropped_layers(module):
        if id(layer.weight) in offsets:
            blocks[offsets[id(layer.weight)]] = tuple(layer.weight.shape)
    return [(start, *shape) for start, shape in sorted(blocks.items())]


class InputDropout(nn.Module):
    """``module`` with dropout at rate ``rate`` on the input of its :func:`dropped_layers`, in training mode.

    The dropout is applied by forward pre-hooks that exist only during a
    training-mode forward pass, so the wrapped module is left as it was (and
    pickles). In evaluation mode, and at ``rate=0``, this is ``module``.
    Each row of a batch gets its own masks (standard dropout), an unbiased
    minibatch estimate of Gal and Ghahramani's objective.
    """

    def __init__(self, module, rate):
        super().__init__()
        self.module = module
        self.rate = rate
        # A plain list, found once: the layers stay registered under ``module`` only.
        self._linear_layers = dropped_layers(module)

    def _drop_input(self, layer, args):
        return (F.dropout(args[0], self.rate, training=True), *args[1:])

    def forward(self, X):
        if not self.training or self.rate == 0:
            return self.module(X)
        handles = [layer.register_forward_pre_hook(self._drop_input) for layer in self._linear_layers]
        try:
            return self.module(X)
        finally:
            for handle in handles:
                handle.remove()


class DropoutPosterior:
    """The MC-dropout distribution over the weights.

    A draw is ``theta`` with, for each weight matrix in ``blocks``, column
    ``j`` multiplied by ``z_j / (1 - rate)``, ``z_j ~ Bernoulli(1 - rate)``
    independently. Its mean is ``theta``.

    Parameters
    ----------
    theta : tensor of shape (K,)
        The weights trained with dropout.
    blocks : list of (int, int, int)
        The weight matrices to mask, as :func:`linear_input_blocks` gives them.
    rate : float in [0, 1)
        The dropout rate ``p``.
    """

    def __init__(self, theta, blocks, rate):
        if not 0 <= rate < 1:
            raise ValueError(f"rate must be in [0, 1); got {rate!r}.")
        self.theta = theta
        self.blocks = blocks
        self.rate = rate

    @property
    def mean(self):
        return self.theta

    def sample(self, n, generator=None):
        """Draw ``n`` masked weight vectors, shape ``(n, K)``."""
        draws = self.theta.expand(n, -1).clone()
        keep = 1.0 - self.rate
        for start, n_rows, n_columns in self.blocks:
            probability = torch.full((n, 1, n_columns), keep, dtype=draws.dtype, device=draws.device)
            mask = torch.bernoulli(probability, generator=generator) / keep
            draws[:, start : start + n_rows * n_columns].view(n, n_rows, n_columns).mul_(mask)
        return draws
