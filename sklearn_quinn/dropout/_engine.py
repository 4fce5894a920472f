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

The rate of each layer is fixed, or learned with the weights by Gal, Hron and
Kendall's (2017) "Concrete dropout": the variational objective's KL divergence
of the masks from the prior, ``0.5 delta ||theta||^2 / (1 - p) - n_in H(p)``
per layer (``H`` the Bernoulli entropy), is differentiable in ``p``, and so is
the likelihood's expectation once the Bernoulli masks are relaxed to their
Concrete (Gumbel-softmax) counterparts. The data pull a rate down as they
accumulate, and the entropy pulls it towards one half: the spread follows the
data instead of a chosen rate.
"""

from functools import partial

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .._core.network import LinearSkipMLP
from .._core.rng import bernoulli

#: Temperature of the Concrete relaxation of the masks (Gal, Hron and Kendall
#: 2017): low enough that a relaxed mask is nearly 0 or 1, high enough for
#: useful gradients in the rate.
RELAXATION_TEMPERATURE = 0.1

#: Where learned rates start: the fixed default of Gal and Ghahramani's (2016)
#: experiments, and the initial rate of Gal, Hron and Kendall's.
INITIAL_RATE = 0.1


def dropped_layers(module):
    """The ``nn.Linear`` layers of ``module`` whose inputs are dropped: all but linear skip paths."""
    kept = {id(layer.linear) for layer in module.modules() if isinstance(layer, LinearSkipMLP)}
    return [layer for layer in module.modules() if isinstance(layer, nn.Linear) and id(layer) not in kept]


def dropped_matrices(module):
    """The dropped layers of ``module`` and the weight matrices they mask.

    A layer is dropped when it is one of :func:`dropped_layers` and its weight
    is a parameter of ``module``: a weight computed from others (a
    parametrization) or held in a buffer is no block of ``theta`` to mask, and
    its layer is left undropped. A weight shared by several layers is one
    matrix, with one rate. Positions, not tensors, identify the matrices, so
    they hold for a copy of ``module`` too.

    Returns
    -------
    layers : list of nn.Linear
    matrix_of_layer : list of int
        For each layer, the index of its matrix.
    positions : list of int
        For each matrix, its position in ``module.parameters()``.
    """
    position_of = {id(parameter): position for position, parameter in enumerate(module.parameters())}
    layers, matrix_of_layer, positions = [], [], []
    for layer in dropped_layers(module):
        position = position_of.get(id(layer.weight))
        if position is None:
            continue
        if position not in positions:
            positions.append(position)
        layers.append(layer)
        matrix_of_layer.append(positions.index(position))
    return layers, matrix_of_layer, positions


def linear_input_blocks(module):
    """Where each of the weight matrices of :func:`dropped_matrices` lies in ``theta``.

    ``theta`` follows ``module.parameters()``, the order of
    :class:`~sklearn_quinn._core.network.FunctionalModel`.

    Returns
    -------
    blocks : list of (int, int, int)
        ``(start, n_rows, n_columns)`` of each matrix, stored row-major from
        ``theta[start]``; column ``j`` multiplies the layer's input ``j``.
    """
    parameters = list(module.parameters())
    starts = np.cumsum([0] + [parameter.numel() for parameter in parameters])
    return [(int(starts[position]), *parameters[position].shape) for position in dropped_matrices(module)[2]]


def bernoulli_entropy(rate):
    """``H(p) = -p log p - (1 - p) log(1 - p)``, zero at ``p = 0``."""
    return -(torch.xlogy(rate, rate) + torch.xlogy(1 - rate, 1 - rate))


class InputDropout(nn.Module):
    """``module`` with dropout on the input of its :func:`dropped_layers`, in training mode.

    The dropout is applied by forward pre-hooks that exist only during a
    training-mode forward pass, so the wrapped module is left as it was (and
    pickles). In evaluation mode, and at a fixed rate 0, this is ``module``.
    Each row of a batch gets its own masks (standard dropout), an unbiased
    minibatch estimate of the variational objective's expected likelihood.

    Parameters
    ----------
    module : torch.nn.Module
        The backbone, already in its working dtype and on its device.
    rate : float in [0, 1) or None
        The rate of every layer, or None to learn one per weight matrix
        (``rate_logits``, trained with the weights from :data:`INITIAL_RATE`)
        through Concrete masks.
    """

    def __init__(self, module, rate):
        super().__init__()
        self.module = module
        self.rate = rate
        # Plain lists, found once: the layers stay registered under ``module`` only.
        self._linear_layers, self._matrix_of_layer, positions = dropped_matrices(module)
        self._matrix_at = dict(zip(positions, range(len(positions))))
        parameters = list(module.parameters())
        like = parameters[0]
        self.register_buffer("n_inputs", torch.tensor([parameters[position].shape[1] for position in positions],
                                                      dtype=like.dtype, device=like.device), persistent=False)
        initial = torch.full((len(positions),), INITIAL_RATE if rate is None else rate, dtype=like.dtype,
                             device=like.device)
        if rate is None:
            self.rate_logits = nn.Parameter(torch.logit(initial))
        else:
            self.register_buffer("fixed_rates", initial, persistent=False)

    @property
    def rates(self):
        """The rate of each matrix of :func:`dropped_matrices`, shape ``(L,)``."""
        return torch.sigmoid(self.rate_logits) if self.rate is None else self.fixed_rates

    def _kl_divergence(self, penalty):
        """The KL divergence of the masked weights' distribution from the
        Gaussian prior, up to a constant (Gal, Hron and Kendall 2017).

        A column of a dropped weight matrix is ``theta_j z_j / (1 - p)``: its
        quadratic prior term weighs ``theta_j / (1 - p)`` by the probability
        ``1 - p`` of keeping it, ``0.5 delta ||theta_j||^2 / (1 - p)``; the
        masks' entropy ``n_in H(p)`` per matrix is subtracted.

        Parameters
        ----------
        penalty : callable
            ``sum_g delta_g ||theta_g||^2`` of a list of the module's parameter
            tensors (:meth:`~sklearn_quinn._map.NegativeLogPosterior.penalty`).
        """
        rates = self.rates
        kept = 1 - rates
        scaled = [parameter * kept[self._matrix_at[position]].rsqrt() if position in self._matrix_at else parameter
                  for position, parameter in enumerate(self.module.parameters())]
        return 0.5 * penalty(scaled) - (self.n_inputs * bernoulli_entropy(rates)).sum()

    def _drop_input(self, matrix, layer, args):
        X = args[0]
        if self.rate is not None:
            return (F.dropout(X, self.rate, training=True), *args[1:])
        logit = self.rate_logits[matrix]
        uniform = torch.rand_like(X)
        dropped = torch.sigmoid((logit + torch.log(uniform) - torch.log1p(-uniform)) / RELAXATION_TEMPERATURE)
        return (X * (1 - dropped) / (1 - torch.sigmoid(logit)), *args[1:])

    def forward(self, X):
        if not self.training or self.rate == 0:
            return self.module(X)
        handles = [layer.register_forward_pre_hook(partial(self._drop_input, matrix))
                   for layer, matrix in zip(self._linear_layers, self._matrix_of_layer)]
        try:
            return self.module(X)
        finally:
            for handle in handles:
                handle.remove()


class DropoutPosterior:
    """The MC-dropout distribution over the weights.

    A draw is ``theta`` with, for each weight matrix ``l`` in ``blocks``, column
    ``j`` multiplied by ``z_j / (1 - p_l)``, ``z_j ~ Bernoulli(1 - p_l)``
    independently. Its mean is ``theta``.

    Parameters
    ----------
    theta : tensor of shape (K,)
        The weights trained with dropout.
    blocks : list of (int, int, int)
        The weight matrices to mask, as :func:`linear_input_blocks` gives them.
    rate : float in [0, 1), or array-like of them, one per block
        The dropout rate ``p`` of every block, or of each.
    """

    def __init__(self, theta, blocks, rate):
        rates = np.broadcast_to(np.asarray(rate, dtype=np.float64), (len(blocks),))
        if not ((0 <= rates) & (rates < 1)).all():
            raise ValueError(f"rate must be in [0, 1); got {rate!r}.")
        self.theta = theta
        self.blocks = blocks
        self.rates = rates

    @property
    def mean(self):
        return self.theta

    def sample(self, n, generator=None):
        """Draw ``n`` masked weight vectors, shape ``(n, K)``."""
        draws = self.theta.expand(n, -1).clone()
        for (start, n_rows, n_columns), rate in zip(self.blocks, self.rates):
            keep = 1.0 - float(rate)
            mask = bernoulli(generator, draws, (n, 1, n_columns), keep) / keep
            draws[:, start : start + n_rows * n_columns].view(n, n_rows, n_columns).mul_(mask)
        return draws
