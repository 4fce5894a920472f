"""A torch module seen as a function of one flat weight vector.

Every method in the package is a distribution over the flat weight vector
``theta`` of a backbone, and every prediction is a pushforward through one
batched forward ``f(Theta, X)`` with ``Theta`` of shape ``(S, K)``: chains,
ensemble members, particles and posterior samples are rows of ``Theta``.
"""

from collections.abc import Callable
from contextlib import contextmanager
from typing import NamedTuple

import torch
from torch import nn
from torch.func import functional_call, jacrev, vmap

#: The most bytes one activation tensor (weight rows x points x units) of a
#: block of weight rows may hold on a CPU, so that a block's forward and
#: backward passes stay in a core's cache instead of streaming every
#: activation through memory (see :meth:`FunctionalModel.by_row_blocks` and
#: benchmarks/bench_smc_speed.py). Bytes, not elements: a float32 block (the
#: samplers' kicks) then holds twice the rows of a float64 one, half the calls
#: for the same cache.
CPU_BLOCK_BYTES = 2**21

#: The most elements one activation tensor may hold when the outputs are
#: computed without gradients (predictions of many weight rows on many points)
#: on a GPU: 256 MiB of float64. Beyond it the points go in blocks, so that 2000
#: MCMC draws on a test table of 5000 rows need no 7 GiB hidden layer.
INFERENCE_BLOCK_ELEMENTS = 2**25

#: On a CPU the same outputs go in tiles of at most ``CPU_INFERENCE_TILE_POINTS``
#: points and as many weight rows as keep a tile's activations within
#: ``CPU_INFERENCE_TILE_ELEMENTS`` elements (8 MiB of float64, within the last
#: level cache): a tile's layers then pass over memory the cache holds, where a
#: block of every row streams each activation through main memory, and its
#: rows see enough points for an efficient matrix product
#: (benchmarks/bench_predict_tiles.py).
CPU_INFERENCE_TILE_ELEMENTS = 2**20
CPU_INFERENCE_TILE_POINTS = 4096

ACTIVATIONS = {
    "identity": nn.Identity,
    "logistic": nn.Sigmoid,
    "tanh": nn.Tanh,
    "relu": nn.ReLU,
}

class _Activation(NamedTuple):
    """An element-wise activation, the same in place, and its backward pass
    from its output: ``backward(cotangent, output, in_place=False) =
    cotangent * f'(input)``, written over ``cotangent`` with ``in_place``
    (each element is read before it is written)."""

    function: Callable
    in_place: Callable
    backward: Callable


def _identity(h):
    return h


def _identity_backward(cotangent, output, in_place=False):
    return cotangent


def _fused_backward(kernel, cotangent, output, in_place, *extra):
    """``kernel``, torch's fused backward of an activation (the one autograd calls), over
    ``cotangent`` with ``in_place``."""
    output = output.expand_as(cotangent)
    if in_place:
        return kernel.grad_input(cotangent, output, *extra, grad_input=cotangent)
    return kernel.default(cotangent, output, *extra)


def _relu_backward(cotangent, output, in_place=False):
    return _fused_backward(torch.ops.aten.threshold_backward, cotangent, output, in_place, 0)


def _tanh_backward(cotangent, output, in_place=False):
    return _fused_backward(torch.ops.aten.tanh_backward, cotangent, output, in_place)


def _sigmoid_backward(cotangent, output, in_place=False):
    return _fused_backward(torch.ops.aten.sigmoid_backward, cotangent, output, in_place)


# Element-wise activations the batched fast path knows, by module type (named
# functions, not lambdas, so a fitted model pickles).
_ELEMENTWISE = {
    nn.Identity: _Activation(_identity, _identity, _identity_backward),
    nn.Sigmoid: _Activation(torch.sigmoid, torch.sigmoid_, _sigmoid_backward),
    nn.Tanh: _Activation(torch.tanh, torch.tanh_, _tanh_backward),
    nn.ReLU: _Activation(torch.relu, torch.relu_, _relu_backward),
}


def build_mlp(n_features, n_outputs, hidden_layer_sizes=(50,), activation="relu", linear_skip=False):
    """Build the default backbone: ``Linear`` layers with ``activation`` between them.

    An empty ``hidden_layer_sizes`` gives a single ``nn.Linear``: a linear
    model. With ``linear_skip`` (and hidden layers) the MLP is wrapped in a
    :class:`LinearSkipMLP`.
    """
    sizes = [n_features, *hidden_layer_sizes, n_outputs]
    layers = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(fan_in, fan_out), ACTIVATIONS[activation]()]
    mlp = nn.Sequential(*layers[:-1])
    return LinearSkipMLP(mlp, n_features, n_outputs) if linear_skip and hidden_layer_sizes else mlp


class LinearSkipMLP(nn.Module):
    """An MLP plus a linear map of its inputs: ``f(x) = mlp(x) + W x``.

    The linear model is then inside the network's function class with its
    own weight tensor, so its own prior precision. A ReLU network alone
    represents a linear function only as a sum of hinges, which a Gaussian
    prior on its layers makes improbable; with the skip path, the evidence
    can explain linear data with ``W`` and shrink the hidden layers away, as
    a Gaussian process with a linear plus a stationary kernel does (the
    "wide and deep" split of Cheng et al. 2016, "Wide & deep learning for
    recommender systems").

    Parameters
    ----------
    mlp : torch.nn.Module
        The network the linear map is added to.
    n_features, n_outputs : int
        The input and output widths of the linear map (it has no bias: the
        MLP's output bias serves both).
    """

    def __init__(self, mlp, n_features, n_outputs):
        super().__init__()
        self.mlp = mlp
        self.linear = nn.Linear(n_features, n_outputs, bias=False)

    def forward(self, X):
        return self.mlp(X) + self.linear(X)


@contextmanager
def in_eval_mode(module):
    """``module`` and its submodules in eval mode for the block, each one's own mode restored after."""
    modes = [(submodule, submodule.training) for submodule in module.modules()]
    module.eval()
    try:
        yield
    finally:
        for submodule, training in modes:
            submodule.training = training


def _check_registered_once(module):
    """Refuse a module that registers one submodule holding parameters under two names (one
    ``nn.Linear`` twice in an ``nn.Sequential``): ``torch.func.functional_call``, which evaluates the
    module at other weights, leaves such a module holding its batched stand-ins (torch 2.13). A
    parameter tied between two submodules is another matter, which functional_call ties."""
    first = {}
    for name, submodule in module.named_modules(remove_duplicate=False):
        if next(submodule.parameters(recurse=False), None) is None:
            continue
        other = first.setdefault(id(submodule), name)
        if other != name:
            raise ValueError(
                f"module registers one layer as both {other!r} and {name!r} (as in nn.Sequential(..., layer, "
                "..., layer)); torch.func, which evaluates the network at other weights, cannot run such a "
                "module. Register the layer once and call it twice in forward."
            )


def _layers(module):
    """``(name, layer)`` of what an ``nn.Linear`` or an ``nn.Sequential`` runs, in order: a layer the
    Sequential runs twice (one activation object reused) appears twice, where ``named_children``
    lists it once."""
    return [("", module)] if type(module) is nn.Linear else list(module._modules.items())


class FunctionalModel:
    """A module as the batched function ``f(Theta, X) -> (S, N, O)``.

    The flat weight vector follows the order of ``module.named_parameters()``.
    A module made only of ``nn.Linear`` layers and element-wise activations
    (the default MLP, or a user's ``nn.Sequential`` of the same parts) runs a
    hand-batched forward (one ``baddbmm`` per layer over the leading ``S``
    axis, the points along the last axis) and a hand-written per-example
    Jacobian, as does such a module inside a :class:`LinearSkipMLP`; any
    other module runs through ``torch.func`` (``vmap`` over
    ``functional_call``, ``jacrev``), in eval mode: a weight row's outputs are
    its function's, without a dropout layer's random masks (which ``vmap``
    refuses) or a batch norm's batch statistics. Such layers act where skorch
    trains the module itself (the MAP), not in the posterior built on it.

    Parameters
    ----------
    module : torch.nn.Module
        The backbone. Its parameters give the layout of ``theta``; its buffers
        are used as they are.
    """

    def __init__(self, module):
        _check_registered_once(module)
        self.module = module
        named = [(name, p) for name, p in module.named_parameters()]
        self.names = [name for name, _ in named]
        self.shapes = [p.shape for _, p in named]
        self.sizes = [p.numel() for _, p in named]
        self.n_params = sum(self.sizes)
        offsets = torch.tensor([0, *self.sizes]).cumsum(0).tolist()
        self._slices = {
            name: (start, stop, shape)
            for name, start, stop, shape in zip(
                self.names, offsets[:-1], offsets[1:], self.shapes
            )
        }
        # The weight block of a LinearSkipMLP's linear map, added to the fast path's outputs.
        self._skip = self._slices["linear.weight"] if isinstance(module, LinearSkipMLP) else None
        self._plan = self._fast_plan(module.mlp, "mlp.") if self._skip else self._fast_plan(module)
        self.input_weights = self._input_weights(module)
        self.output_bias = self._output_bias()
        # What one point of one weight row adds to the largest activation tensor, and to all of them
        # together (what a pass keeps for its backward pass); for a generic module, estimates from its
        # linear layers.
        widths = [m.out_features for m in module.modules() if isinstance(m, nn.Linear)]
        self.max_width, self.total_width = max(widths, default=1), sum(widths) or 1

    @property
    def fast_path(self):
        """Whether the module runs the hand-batched forward pass and its hand-written backward pass
        (:meth:`forward_and_vjp`), not ``torch.func``'s."""
        return self._plan is not None

    def _fast_plan(self, module, prefix=""):
        """The layer plan of the batched fast path, or None for a generic module
        (a subclass of ``nn.Linear`` or ``nn.Sequential`` among them: its
        ``forward`` may be its own). One ``nn.Linear`` run twice never reaches
        it (:func:`_check_registered_once`)."""
        if type(module) not in (nn.Linear, nn.Sequential):
            return None
        plan = []
        for name, layer in _layers(module):
            if type(layer) is nn.Linear:
                name = prefix + (f"{name}." if name else "")
                weight = self._slices[name + "weight"]
                plan.append((weight, self._slices.get(name + "bias")))
            elif type(layer) in _ELEMENTWISE:
                plan.append(_ELEMENTWISE[type(layer)])
            else:
                return None
        return plan

    def _input_weights(self, module):
        """The names of the weight matrices that read the network's inputs, one input column per
        column: the fast path's first ``nn.Linear`` and the skip's (none for a generic module,
        whose layers may read anything)."""
        if self._plan is None:
            return []
        mlp, prefix = (module.mlp, "mlp.") if self._skip else (module, "")
        layers = _layers(mlp)
        # A first nn.Linear after an activation reads the activation's outputs, not the inputs.
        first = layers[0][0] if layers and type(layers[0][1]) is nn.Linear else None
        names = [] if first is None else [prefix + (f"{first}." if first else "") + "weight"]
        return names + (["linear.weight"] if self._skip else [])

    def _output_bias(self):
        """The name of the bias added to the outputs as they leave the network: the fast path's
        last ``nn.Linear``'s, where no activation follows it (None without one, or for a generic
        module)."""
        if not self._plan or isinstance(self._plan[-1], _Activation) or self._plan[-1][1] is None:
            return None
        return next(name for name, where in self._slices.items() if where == self._plan[-1][1])

    def by_row_blocks(self, function, rows, n_points):
        """``function(rows)``, evaluated a block of rows at a time on a CPU and joined.

        ``function`` maps weight rows ``(S, ...)`` to a tensor, or a tuple of
        tensors, with one leading entry per row, through activations of ``S x
        n_points x max_width`` elements of the rows' dtype. On a CPU the blocks keep those
        activations within :data:`CPU_BLOCK_BYTES`: many particles or
        chains on a few hundred points otherwise make every element-wise pass
        read and write tens of megabytes, several times slower per element
        than the same work in cache. Elsewhere (a GPU) the rows go at once.
        """
        size = self.row_block_size(n_points, rows.dtype)
        if rows.device.type != "cpu" or size >= len(rows):
            return function(rows)
        results = [function(rows[start : start + size]) for start in range(0, len(rows), size)]
        if isinstance(results[0], tuple):
            return tuple(torch.cat(parts) for parts in zip(*results))
        return torch.cat(results)

    def row_block_size(self, n_points, dtype):
        """The weight rows of one of :meth:`by_row_blocks`' blocks of ``dtype`` on a CPU, over ``n_points`` points."""
        return max(1, CPU_BLOCK_BYTES // (n_points * self.max_width * dtype.itemsize))

    def flatten(self):
        """The module's current weights as one detached vector of shape ``(K,)``."""
        return torch.cat([p.detach().reshape(-1) for p in self.module.parameters()])

    def unflatten(self, theta):
        """Weights ``(..., K)`` as a ``{name: tensor (..., *shape)}`` dict of parameters
        (views for a ``(K,)`` vector)."""
        return {
            name: theta[..., start:stop].reshape(*theta.shape[:-1], *shape)
            for name, (start, stop, shape) in self._slices.items()
        }

    def __call__(self, theta, X):
        """Outputs ``(S, N, O)`` for weight rows ``theta (S, K)`` and inputs
        ``X``: ``(N, D)`` shared by every row, or ``(S, N, D)``, one set per row.

        Without gradients, the outputs go in tiles of weight rows and points
        (:meth:`inference_tile`), each written into the whole.
        """
        n_rows, n_points = theta.shape[0], X.shape[-2]
        rows, points = self.inference_tile(n_rows, n_points, X.device)
        if torch.is_grad_enabled() or (rows >= n_rows and points >= n_points):
            return self._outputs(theta, X)
        out = None
        for row in range(0, n_rows, rows):
            for point in range(0, n_points, points):
                inputs = X[point : point + points] if X.dim() == 2 else X[row : row + rows, point : point + points]
                tile = self._outputs(theta[row : row + rows], inputs)
                if out is None:
                    out = tile.new_empty(n_rows, n_points, tile.shape[-1])
                out[row : row + rows, point : point + points] = tile
        return out

    def inference_tile(self, n_rows, n_points, device):
        """The weight rows and points of one tile of outputs computed without gradients: on a CPU
        at most :data:`CPU_INFERENCE_TILE_POINTS` points and the rows that keep the tile's
        activations within :data:`CPU_INFERENCE_TILE_ELEMENTS` elements; elsewhere (a GPU) every
        row, and the points that keep them within :data:`INFERENCE_BLOCK_ELEMENTS`."""
        if device.type == "cpu":
            points = min(n_points, CPU_INFERENCE_TILE_POINTS)
            return max(1, CPU_INFERENCE_TILE_ELEMENTS // (points * self.max_width)), points
        return n_rows, max(1, INFERENCE_BLOCK_ELEMENTS // (n_rows * self.max_width))

    def _outputs(self, theta, X):
        if self._plan is not None:
            out = self._batched_mlp(theta, X).transpose(1, 2)
        else:
            buffers = dict(self.module.named_buffers())

            def single(row, inputs):
                return functional_call(self.module, {**self.unflatten(row), **buffers}, (inputs,))

            with in_eval_mode(self.module):
                out = vmap(single, in_dims=(0, 0 if X.dim() == 3 else None))(theta, X)
        return out.unsqueeze(-1) if out.dim() == 2 else out

    def single(self, theta, X):
        """Outputs ``(N, O)`` for one weight vector ``theta (K,)``."""
        return self(theta.unsqueeze(0), X)[0]

    def jacobian(self, theta, X):
        """Per-example Jacobian of the outputs in the weights, shape ``(N, O, K)``.

        The cost grows linearly with ``N`` (never one backward pass per output
        row of the whole batch).
        """
        if self._plan is None:
            with in_eval_mode(self.module):
                jac = vmap(jacrev(self.single), in_dims=(None, 0))(theta, X.unsqueeze(1))
            return jac.squeeze(1)
        return self._mlp_jacobian(theta, X)

    def _mlp_jacobian(self, theta, X):
        """Backpropagate the identity over the outputs through the MLP, per example.

        For a linear layer with input ``a`` and output cotangent ``delta`` (one
        row per output), the weight block of the Jacobian is ``delta a^T`` and
        the bias block is ``delta``.
        """
        inputs, h = [], X
        for step in self._plan:  # forward, keeping each layer's input
            inputs.append(h)
            if isinstance(step, _Activation):
                h = step.function(h)
            else:
                (start, stop, shape), bias = step
                h = h @ theta[start:stop].view(shape).T
                if bias is not None:
                    h = h + theta[bias[0] : bias[1]]
        inputs.append(h)  # the MLP's outputs, which a last activation's backward pass reads, before the skip
        if self._skip:
            start, stop, shape = self._skip
            h = h + X @ theta[start:stop].view(shape).T
        n_points, n_outputs = h.shape
        jac = theta.new_zeros(n_points, n_outputs, self.n_params)
        delta = torch.eye(n_outputs, dtype=theta.dtype, device=theta.device).expand(n_points, -1, -1)
        if self._skip:
            jac[:, :, self._skip[0] : self._skip[1]] = (delta.unsqueeze(-1) * X[:, None, None, :]).flatten(2)
        for index in reversed(range(len(self._plan))):
            step, a = self._plan[index], inputs[index]
            if isinstance(step, _Activation):
                delta = step.backward(delta, inputs[index + 1].unsqueeze(1))
                continue
            (start, stop, shape), bias = step
            jac[:, :, start:stop] = (delta.unsqueeze(-1) * a[:, None, None, :]).flatten(2)
            if bias is not None:
                jac[:, :, bias[0] : bias[1]] = delta
            if index:
                delta = delta @ theta[start:stop].view(shape)
        return jac

    def forward_and_vjp(self, theta, X):
        """Outputs ``(S, N, O)`` and a function mapping an output cotangent
        ``(S, N, O)`` to the gradient ``(S, K)`` of its inner product with the outputs.

        The MLP fast path backpropagates by hand (one batched matrix product
        per layer and direction, no autograd graph); other modules use
        ``torch.func.vjp``.
        """
        if self._plan is None:
            outputs, pullback = torch.func.vjp(lambda rows: self(rows, X), theta)
            return outputs, lambda cotangent: pullback(cotangent)[0]
        inputs, h = self._batched_mlp(theta, X, keep_inputs=True)

        def vjp(cotangent):
            gradient = torch.empty_like(theta)
            n_rows = theta.shape[0]
            cotangent = cotangent.transpose(1, 2)  # feature-major, as h
            own_cotangent = False
            if self._skip:
                start, stop, shape = self._skip
                gradient[:, start:stop] = (cotangent @ inputs[0].transpose(-1, -2)).flatten(1)
            for index in reversed(range(len(self._plan))):
                step = self._plan[index]
                if isinstance(step, _Activation):
                    output = inputs[index + 1]
                    # In place where the cotangent is one this pass made (a layer's product), not the caller's.
                    cotangent = step.backward(cotangent, output, in_place=own_cotangent)
                    continue
                (start, stop, shape), bias = step
                layer_input = inputs[index]
                if layer_input.dim() == 2:
                    # X^T, shared by the rows: (in, N) @ (S, N, out), then transposed, is 2x faster
                    # than the (S, out, N) @ (N, in) below (a long inner dimension and a small output).
                    block = (layer_input @ cotangent.transpose(1, 2)).transpose(1, 2)
                    gradient[:, start:stop].view(n_rows, *shape).copy_(block)
                else:
                    gradient[:, start:stop] = (cotangent @ layer_input.transpose(1, 2)).flatten(1)
                if bias is not None:
                    gradient[:, bias[0] : bias[1]] = cotangent.sum(-1)
                if index:
                    weight = theta[:, start:stop].view(n_rows, *shape).transpose(1, 2)
                    # One output unit makes the product an outer product: a broadcast multiply does it
                    # in one pass, where a batched matrix product with an inner dimension of 1 is slower.
                    cotangent = weight * cotangent if shape[0] == 1 else weight @ cotangent
                    own_cotangent = True
            return gradient

        return h.transpose(1, 2), vjp

    def _batched_mlp(self, theta, X, keep_inputs=False):
        """The fast forward in feature-major layout: each layer maps ``(S, in, N)``
        to ``(S, out, N)``, multiplying by the weight block as it is stored, and
        the pre-activations are contiguous along the points (what a compiled
        graph vectorises best). Returns ``h (S, O, N)`` (transpose for the
        outputs) and, with ``keep_inputs``, each step's input (the first ``X^T``; an
        activation's, where it ran in place, holds its output, which is the next step's input)
        followed by the MLP's outputs before a linear skip adds its own."""
        n_rows = theta.shape[0]
        inputs, h = [], X.transpose(-1, -2)
        fresh = False  # whether h is a layer's product that nothing else holds
        for step in self._plan:
            inputs.append(h)
            if isinstance(step, _Activation):
                # In place on a layer's product (one pass over it, no new tensor); never on the caller's X
                # nor on another activation's output, which its backward pass reads.
                h = step.in_place(h) if fresh else step.function(h)
                fresh = False
                continue
            fresh = True
            (start, stop, shape), bias = step
            weight = theta[:, start:stop].view(n_rows, *shape)
            if bias is None:
                h = torch.matmul(weight, h)
            else:
                h = torch.baddbmm(theta[:, bias[0] : bias[1]].unsqueeze(-1), weight, h.expand(n_rows, -1, -1))
        inputs.append(h)  # the MLP's outputs, before the skip
        if self._skip:
            start, stop, shape = self._skip
            h = torch.baddbmm(h, theta[:, start:stop].view(n_rows, *shape), inputs[0].expand(n_rows, -1, -1))
        return (inputs, h) if keep_inputs else h
