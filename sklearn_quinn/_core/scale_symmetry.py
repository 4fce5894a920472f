"""The scale symmetry of positively homogeneous layers, and coordinates that balance it.

Between two linear layers a ReLU (or no activation) is positively homogeneous,
``relu(a z) = a relu(z)`` for ``a > 0``, so ``(W_l, b_l, W_{l+1}) -> (a W_l,
a b_l, W_{l+1} / a)`` leaves the network's function unchanged, and with the
prior precisions moved to ``(delta_W_l / a**2, delta_b_l / a**2, delta_W_{l+1}
a**2)`` its prior too. Per-layer precisions learned by the evidence are only
identified up to this orbit, and the training's updates drift along it (the
layer with more well-determined weights is pushed smaller at each update), to
layers whose scales differ by orders of magnitude.

A quasi-Newton method with a scalar initial Hessian is not invariant to such
a per-layer rescaling: on drifted layers L-BFGS stalls short of the mode. The
balanced coordinates of :func:`balancing_scales` put every layer of a chain at
the same prior precision per input (a prior std of ``1 / sqrt(fan_in)`` times a
common factor, the scale of a standard initialisation), where it converges.
"""

import math

from torch import nn

from .network import LinearSkipMLP

#: Activations ``g`` with ``g(a z) = a g(z)`` for every ``a > 0``.
POSITIVELY_HOMOGENEOUS = (nn.ReLU, nn.Identity)


def homogeneous_chains(module):
    """The runs of two or more ``nn.Linear`` layers joined by positively homogeneous activations.

    Only the package's MLP (an ``nn.Sequential`` of linear layers and
    activations, alone or inside a :class:`~sklearn_quinn._core.network.LinearSkipMLP`)
    is read; any other module has no chain. A run ends at any other
    activation: the layer before it cannot change its output's scale.
    """
    sequential = module.mlp if isinstance(module, LinearSkipMLP) else module
    if not isinstance(sequential, nn.Sequential):
        return []
    chains, chain = [], []
    for layer in sequential:
        if isinstance(layer, nn.Linear):
            chain.append(layer)
        elif not isinstance(layer, POSITIVELY_HOMOGENEOUS):
            chains.append(chain)
            chain = []
    chains.append(chain)
    return [chain for chain in chains if len(chain) > 1]


def balancing_scales(module, precision):
    """Factors, one per parameter tensor of ``module``, that move it along its scale symmetries to the
    coordinates where each chain's layers have the same weight precision per input.

    Along a chain of layers ``l = 1..m`` with fan-ins ``f_l`` and weight
    precisions ``delta_l``, layer ``l``'s weights are multiplied by
    ``a_l = sqrt(delta_l / (f_l kappa))``, ``kappa`` the geometric mean of
    ``delta_l / f_l`` (so that the product of the ``a_l`` is 1 and the last
    layer's output keeps its scale), and its bias by ``a_1 ... a_l``. The
    moved precisions ``delta_l / a_l**2`` are then all ``kappa f_l``.

    Parameters
    ----------
    module : torch.nn.Module
    precision : tensor of shape (G,)
        The prior precision of each parameter tensor, in the order of
        ``module.parameters()``.

    Returns
    -------
    list of float, or None
        None where there is nothing to balance: no chain, or one precision
        shared by every weight (its MAP's layers are balanced already).
    """
    chains = homogeneous_chains(module)
    if not chains or precision.dim() == 0:
        return None
    position = {id(parameter): index for index, parameter in enumerate(module.parameters())}
    precision = precision.tolist()
    scales = [1.0] * len(position)
    for chain in chains:
        per_input = [precision[position[id(layer.weight)]] / layer.in_features for layer in chain]
        log_kappa = sum(map(math.log, per_input)) / len(chain)
        output_scale = 1.0
        for layer, value in zip(chain[:-1], per_input):
            factor = math.exp(0.5 * (math.log(value) - log_kappa))
            output_scale *= factor
            scales[position[id(layer.weight)]] = factor
            if layer.bias is not None:
                scales[position[id(layer.bias)]] = output_scale
        # The last layer undoes the chain's scale exactly, so its output and bias keep theirs.
        scales[position[id(chain[-1].weight)]] = 1.0 / output_scale
    return scales


def rescale(module, precision, scales):
    """Multiply ``module``'s parameter tensors by ``scales`` in place (the function is unchanged
    where they come from :func:`balancing_scales`, or are their inverses) and return the precisions
    that keep the prior: ``precision / scales**2``."""
    for parameter, scale in zip(module.parameters(), scales):
        parameter.data.mul_(scale)
    return precision / precision.new_tensor(scales).square()
