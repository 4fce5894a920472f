"""The network as a function of its last linear layer alone, the rest fixed at the MAP.

A last-layer Laplace approximation (Snoek et al. 2015, "Scalable Bayesian
optimization using deep neural networks"; Kristiadi et al. 2020, "Being
Bayesian, even just a bit, fixes overconfidence in ReLU networks") puts the
posterior on the weights of the final ``nn.Linear`` only. The network is then
exactly linear in those weights,

    ``f(x) = W phi(x) + b + r(x)``,

with ``phi(x)`` the layer's input and ``r(x)`` whatever reaches the outputs
around it (a linear skip's term; zero for a plain MLP), both fixed by the
other weights. The last layer is the last ``nn.Linear`` of the module (of
its MLP, for a :class:`~sklearn_quinn._core.network.LinearSkipMLP`). Its
Jacobian is ``e_o phi(x)^T`` and ``e_o``, so the curvature, evidence and
predictive cost what a linear model of ``phi`` costs, whatever the size of
the body.
"""

import copy

import torch
from torch import nn

from .network import FunctionalModel, LinearSkipMLP, in_eval_mode


class LastLayerModel:
    """``f(theta_last, X)`` of a trained network, its other weights at ``theta``.

    Offers what the Laplace engine and the pushforwards use of a
    :class:`~sklearn_quinn._core.network.FunctionalModel`: ``__call__``,
    ``single``, ``jacobian``, ``flatten``, ``by_row_blocks`` and the layout
    (``names``, ``shapes``, ``sizes``, ``n_params``, ``max_width``, ``total_width``); and
    ``head``, the last layer as a FunctionalModel of its input ``phi``.

    Parameters
    ----------
    model : FunctionalModel
        The whole network; its module holds the weights ``theta``.
    theta : tensor of shape (K,)
        The whole network's weights (the MAP).
    X : tensor of shape (N, D)
        Inputs on which the network is checked to be affine in the last layer.

    Raises
    ------
    ValueError
        When the module has no ``nn.Linear``, or its outputs are not the last
        one's outputs plus a term that does not depend on its weights.
    """

    def __init__(self, model, theta, X):
        module = model.module
        # A linear skip's map is not a layer of the network's depth: the last layer is its MLP's.
        prefix, body = ("mlp.", module.mlp) if isinstance(module, LinearSkipMLP) else ("", module)
        linears = [(prefix + name, layer) for name, layer in body.named_modules() if isinstance(layer, nn.Linear)]
        if not linears:
            raise ValueError("subset_of_weights='last_layer' needs a module with an nn.Linear layer.")
        name, self._layer = _applied_last(module, linears, X[:8])
        self._body = module
        prefix = f"{name}." if name else ""
        self.head = FunctionalModel(copy.deepcopy(self._layer))
        self.names = [prefix + local for local in self.head.names]
        self.shapes, self.sizes = self.head.shapes, self.head.sizes
        self.n_params, self.max_width, self.total_width = self.head.n_params, self.head.max_width, self.head.total_width
        self.index = torch.cat([torch.arange(*model._slices[full][:2]) for full in self.names])
        self._theta = theta[self.index]
        self._check_affine(model, theta, X[:8])

    def _check_affine(self, model, theta, X):
        """Refuse a module whose outputs pass the last layer's through anything but a sum (to the
        rounding of the network's dtype: a float32 layer 1024 wide rounds its sums near 1e-5)."""
        moved = self._theta + 1.0
        full = theta.clone()
        full[self.index] = moved
        outputs = model.single(full, X)
        try:
            separated = self.single(moved, X)
        except RuntimeError:  # the layer's outputs are not the network's shape: something follows it
            separated = None
        tolerance = torch.finfo(outputs.dtype).eps ** 0.5 * (1.0 + float(outputs.abs().max()))
        if separated is None or not float((outputs - separated).abs().max()) <= tolerance:
            raise ValueError(
                "subset_of_weights='last_layer' needs a network whose outputs are its last nn.Linear's "
                "outputs plus a term free of that layer's weights (an MLP, with or without a linear skip)."
            )

    def features(self, X):
        """The last layer's input ``phi (N, H)`` and the term around it ``r (N, O)``, at the MAP."""
        captured = []
        handle = self._layer.register_forward_hook(lambda _, inputs, outputs: captured.append((inputs[0], outputs)))
        try:
            with torch.no_grad():
                outputs = self._body(X)
        finally:
            handle.remove()
        phi, layer_outputs = captured[-1]
        outputs = outputs.reshape(layer_outputs.shape)  # a custom module's (N,) for one output
        return phi, outputs - layer_outputs

    def flatten(self):
        """The last layer's MAP weights ``(k,)``."""
        return self._theta.clone()

    def __call__(self, theta, X):
        """Outputs ``(S, N, O)`` for last-layer rows ``theta (S, k)`` and inputs ``X (N, D)``."""
        phi, rest = self.features(X)
        return self.head(theta, phi) + rest

    def single(self, theta, X):
        return self(theta.unsqueeze(0), X)[0]

    def jacobian(self, theta, X):
        """``(N, O, k)``: the layer's Jacobian at its input ``phi(X)``."""
        return self.head.jacobian(theta, self.features(X)[0])

    def by_row_blocks(self, function, rows, n_points):
        return self.head.by_row_blocks(function, rows, n_points)


def module_and_inputs(model, X):
    """The FunctionalModel whose weights a posterior is over, its inputs for the rows ``X``, and
    what the model adds to its outputs (None for nothing): a :class:`LastLayerModel`'s head at
    the last layer's inputs, from one forward pass of the body, and the term around it; any
    other model itself at ``X``."""
    if isinstance(model, LastLayerModel):
        return model.head, *model.features(X)
    return model, X, None


def outputs_and_jacobian(model, theta, X):
    """The outputs ``(N, O)`` of ``model`` at weights ``theta`` and their Jacobian ``(N, O, K)``,
    a :class:`LastLayerModel`'s both from one forward pass of its body (:func:`module_and_inputs`)."""
    model, X, offset = module_and_inputs(model, X)
    outputs = model.single(theta, X)
    return (outputs if offset is None else outputs + offset), model.jacobian(theta, X)


def _applied_last(module, linears, X):
    """Of the named ``nn.Linear`` layers ``linears``, the one the module's forward pass on ``X``
    applies last (a module may register its head before its hidden layers)."""
    applied = []
    handles = [layer.register_forward_hook(lambda layer, inputs, outputs: applied.append(layer))
               for _, layer in linears]
    try:
        with torch.no_grad(), in_eval_mode(module):  # a batch norm's running statistics left as they are
            module(X)
    finally:
        for handle in handles:
            handle.remove()
    by_layer = {id(layer): (name, layer) for name, layer in linears}
    return by_layer[id(applied[-1])] if applied else linears[-1]
