"""Kronecker-factored curvature (KFAC) of a network's ``nn.Linear`` layers.

For a linear layer ``s = W a + b``, write ``W~ = [W b]`` (its weights with the
bias as a last column) and ``a~ = [a; 1]``. The GGN (or empirical Fisher)
block of ``W~``, in row-major order, is ``sum_n (B_n B_n^T) (x) (a~_n a~_n^T)``
with ``B_n`` the layer's output Jacobian ``ds / df`` transposed and whitened by
the likelihood (the ``O'`` rows of ``S_n df/ds``, ``S_n^T S_n`` the loss
Hessian in the outputs; for the empirical Fisher, the one row of the loss
gradient). Kronecker-factored approximate curvature takes the expectation of
each factor apart (Martens and Grosse 2015, "Optimizing neural networks with
Kronecker-factored approximate curvature"; for the Laplace approximation,
Ritter, Botev and Barber 2018, "A scalable Laplace approximation for neural
networks"):

    ``C_layer ~ G (x) A``,  ``G = 1/N sum_n B_n B_n^T``,  ``A = sum_n a~_n a~_n^T``,

an ``out x out`` and an ``(in + 1) x (in + 1)`` matrix in place of a square of
``out (in + 1)``. It is exact where ``B_n`` does not depend on the point (the
last layer under a Gaussian likelihood: a single ``nn.Linear`` is a linear
model, and then ``G (x) A`` is its curvature). The eigen decompositions
``G = U_G diag(g) U_G^T`` and ``A = U_A diag(a) U_A^T`` give those of the
product (eigenvalues ``g_i a_j``, eigenvectors ``U_G (x) U_A``), so the
evidence, its prior tuning and every re-scaling follow from the spectrum as
for the full structure, and the posterior never forms a ``K x K`` matrix.
Weights outside any ``nn.Linear`` keep their diagonal curvature.
"""

from typing import NamedTuple

import torch
from torch import nn
from torch.func import functional_call, vjp

from .last_layer import LastLayerModel, module_and_inputs
from .likelihoods import output_whitening
from .rng import standard_normal

# Elements of the layers' output gradients (directions x rows x units) held at once by the curvature pass.
_CHUNK_ELEMENTS = 2**23


class KroneckerUnsupportedError(ValueError):
    """The module's linear layers cannot be Kronecker-factored (or the curvature is not the GGN or Fisher)."""


class KroneckerLayer(NamedTuple):
    """One ``nn.Linear`` of the flat weight vector.

    ``index`` gives, in the row-major order of ``W~ = [W b]`` (shape
    ``(n_out, n_in)``, ``n_in`` counting the bias column), each entry's
    position in ``theta``; ``parts``, the column ranges of ``W~`` that lie
    row-major in one run of ``theta``, as ``(start in theta, columns)``: ``W``'s
    and the bias column's.
    """

    name: str
    index: torch.Tensor
    n_out: int
    n_in: int
    parts: tuple = ()


def kronecker_layers(model):
    """The ``nn.Linear`` layers of a FunctionalModel (or a LastLayerModel), and the
    positions of the weights in no layer (kept diagonal)."""
    functional = model.head if isinstance(model, LastLayerModel) else model
    layers = []
    for name, layer in functional.module.named_modules():
        if not isinstance(layer, nn.Linear):
            continue
        prefix = f"{name}." if name else ""
        named = [prefix + "weight"] + ([prefix + "bias"] if layer.bias is not None else [])
        if any(key not in functional._slices for key in named):
            raise KroneckerUnsupportedError(
                f"the weights of nn.Linear {name!r} are shared with another module or parametrised: "
                "its curvature cannot be taken per layer."
            )
        start, stop, shape = functional._slices[prefix + "weight"]
        columns = [torch.arange(start, stop).view(shape)]
        parts = [(start, slice(0, shape[1]))]
        if layer.bias is not None:
            bias_start, bias_stop, _ = functional._slices[prefix + "bias"]
            columns.append(torch.arange(bias_start, bias_stop).view(-1, 1))
            parts.append((bias_start, slice(shape[1], shape[1] + 1)))
        index = torch.cat(columns, dim=1)
        layers.append(KroneckerLayer(name, index.flatten(), *index.shape, tuple(parts)))
    covered = torch.zeros(functional.n_params, dtype=torch.bool)
    for layer in layers:
        covered[layer.index] = True
    return layers, torch.nonzero(~covered)[:, 0]


def kronecker_bytes(layers, n_rest, dtype):
    """Memory the Kronecker structure holds: each factor and its eigenvectors, the rest's diagonal."""
    size = torch.empty((), dtype=dtype).element_size()
    return size * (2 * sum(layer.n_out**2 + layer.n_in**2 for layer in layers) + 2 * n_rest)


def _directions(likelihood, outputs, Y, kind):
    """Cotangents ``(D, N, O)`` on the outputs: the whitening rows ``S_n`` (GGN), the loss gradient
    (EF), or the outputs themselves (``'jacobian'``, for the outputs' Jacobian)."""
    if kind == "jacobian":
        identity = torch.eye(outputs.shape[-1], dtype=outputs.dtype, device=outputs.device)
        return identity[:, None, :].expand(-1, len(outputs), -1)
    if kind == "ggn":
        return output_whitening(likelihood, outputs).transpose(0, 1)
    return likelihood.output_gradient(outputs, Y).unsqueeze(0)


def _inputs_and_output_gradients(module, theta, X, directions_at, layers):
    """Each layer's input ``(N, in)`` and the gradient of ``directions . f`` in its output, ``(D, N, out)``.

    ``directions_at`` maps the module's outputs ``(N, O)`` (detached) to the
    cotangents ``(D, N, O)``. The gradient in a layer's output is taken
    through a zero added to it by a forward hook, for all directions in one
    batched backward pass, after the one forward pass. A layer
    the forward pass does not call, or whose output does not reach the
    outputs, gets None: its curvature is zero.
    """
    linears = dict(module.module.named_modules())
    inputs, bumps = {}, {}

    def hook(name):
        def capture(layer, args, output):
            if name in inputs or args[0].dim() != 2:
                raise KroneckerUnsupportedError(
                    f"hessian_structure='kron' needs each nn.Linear applied once to a (rows, features) "
                    f"input; {name or 'the module'!r} is not."
                )
            inputs[name] = args[0].detach()
            bumps[name] = torch.zeros_like(output, requires_grad=True)
            return output + bumps[name]

        return capture

    handles = [linears[layer.name].register_forward_hook(hook(layer.name)) for layer in layers]
    try:
        # A caller's torch.inference_mode makes tensors no graph can record (enable_grad cannot undo it,
        # so the weights and rows are copied outside it), and its anomaly mode has no batching rule for
        # the batched backward pass below: neither may reach it.
        with torch.inference_mode(False), torch.enable_grad(), torch.autograd.set_detect_anomaly(False):
            theta, X = theta.detach().clone(), X.clone()
            weights = {**module.unflatten(theta), **dict(module.module.named_buffers())}
            outputs = functional_call(module.module, weights, (X,)).reshape(len(X), -1)
            directions = directions_at(outputs.detach())
            called = [layer for layer in layers if layer.name in inputs]
            gradients = dict(zip((layer.name for layer in called), torch.autograd.grad(
                outputs, [bumps[layer.name] for layer in called], directions, is_grads_batched=True, allow_unused=True
            )))
    finally:
        for handle in handles:
            handle.remove()
    return [inputs.get(layer.name) for layer in layers], [gradients.get(layer.name) for layer in layers]


def _with_bias_column(layer, a):
    """A layer's inputs ``(n, in)`` as ``a~ (n, n_in)``: with a column of ones for its bias, if it has one."""
    return torch.cat([a, a.new_ones(len(a), 1)], dim=1) if layer.n_in > a.shape[1] else a


def _layer_chunks(model, theta, X, Y, likelihood, kind):
    """The layers of ``model`` and, one chunk of rows at a time, each layer's
    input ``a~`` with its bias column ``(n, n_in)`` and its whitened output
    gradients ``B`` ``(D, n, n_out)`` (None for a layer without curvature);
    ``kind='jacobian'``: the outputs' own gradients (``Y`` and ``likelihood``
    unused)."""
    if kind not in ("ggn", "ef", "jacobian"):
        raise KroneckerUnsupportedError(
            f"hessian_structure='kron' factors the GGN or the empirical Fisher, not curvature={kind!r}."
        )
    layers, rest = kronecker_layers(model)
    module, inputs, offset = module_and_inputs(model, X)
    n_outputs = model.single(theta, X[:1]).shape[-1]
    chunk = max(1, _CHUNK_ELEMENTS // (n_outputs * sum(layer.n_out for layer in layers) or 1))

    def chunks():
        for start in range(0, X.shape[0], chunk):
            rows = slice(start, start + chunk)

            def directions_at(outputs):
                targets = None if Y is None else Y[rows]
                return _directions(likelihood, outputs if offset is None else outputs + offset[rows], targets, kind)

            layer_inputs, gradients = _inputs_and_output_gradients(module, theta, inputs[rows], directions_at, layers)
            yield [None if a is None or b is None else _with_bias_column(layer, a)
                   for layer, a, b in zip(layers, layer_inputs, gradients)], gradients

    return layers, rest, chunks()


def kronecker_factors(model, theta, X, Y, likelihood, kind="ggn"):
    """The Kronecker factors ``(G, A)`` of each linear layer, accumulated over chunks of rows.

    Parameters
    ----------
    model : FunctionalModel or LastLayerModel
    theta : tensor of shape (K,)
    X, Y : tensor of shape (N, D) and (N, O)
    likelihood : GaussianLikelihood, HeteroscedasticGaussianLikelihood or CategoricalLikelihood
    kind : {'ggn', 'ef'}

    Returns
    -------
    layers : list of KroneckerLayer
    factors : list of (G, A), tensors of shape (n_out, n_out) and (n_in, n_in)
    rest : tensor of int
        Positions in ``theta`` of the weights in no linear layer.
    """
    layers, rest, chunks = _layer_chunks(model, theta, X, Y, likelihood, kind)
    factors = [
        [theta.new_zeros(layer.n_out, layer.n_out), theta.new_zeros(layer.n_in, layer.n_in)] for layer in layers
    ]
    for layer_inputs, gradients in chunks:
        for (output_factor, input_factor), a, b in zip(factors, layer_inputs, gradients):
            if a is not None:
                input_factor += a.T @ a
                output_factor += torch.einsum("dni,dnj->ij", b, b)
    n_rows = max(X.shape[0], 1)
    return layers, [(output_factor / n_rows, input_factor) for output_factor, input_factor in factors], rest


def kronecker_leverage(model, theta, X, Y, likelihood, basis, ratio):
    """The posterior variance of every whitened output at its training row, ``(N, D)``,
    under the Kronecker-factored posterior ``B diag(ratio) B^T`` of ``basis``
    (:meth:`KroneckerEigenbasis.leverage`), one chunk of rows at a time."""
    _, _, chunks = _layer_chunks(model, theta, X, Y, likelihood, "ggn")
    return torch.cat([basis.leverage(layer_inputs, gradients, ratio).T for layer_inputs, gradients in chunks])


def layered_curvature(model, theta, X, Y, likelihood, kind="ggn"):
    """The full ``(K, K)`` GGN (or empirical Fisher) of a network whose every
    weight sits in an ``nn.Linear`` layer, from the sum that KFAC factors,
    taken exactly.

    The block of layers ``l`` and ``m`` is ``sum_n (B_n^l B_n^m^T) (x)
    (a~_n^l a~_n^m^T)``: the products over the ``D`` output directions are
    summed first, so the block costs ``N`` times its size where the
    per-example Jacobians cost ``N D`` times it (``D`` the classes of a
    softmax), and no Jacobian is formed.

    Raises
    ------
    KroneckerUnsupportedError
        For a weight in no linear layer, or layers the hooks refuse.
    """
    layers, rest, chunks = _layer_chunks(model, theta, X, Y, likelihood, kind)
    if len(rest) or not layers:
        raise KroneckerUnsupportedError("the layered curvature needs every weight in an nn.Linear layer.")
    _check_layers_carry_the_gradient(model, theta, X, layers)
    products = {}
    for layer_inputs, gradients in chunks:
        # The layers with curvature in this chunk, each pair once.
        present = [entry for entry in enumerate(zip(layer_inputs, gradients)) if entry[1][0] is not None]
        for position, (i, (a, b)) in enumerate(present):
            for j, (c, d) in present[position:]:
                product = _layer_pair_product(layers[i], a, b, layers[j], c, d)
                products[i, j] = products[i, j].add_(product) if (i, j) in products else product
    total = theta.new_zeros(theta.shape[0], theta.shape[0])
    for (i, j), product in products.items():
        _place_block(total, layers[i], layers[j], product)
    return total


def _place_block(total, first, second, product):
    """Write the block of layers ``first`` and ``second`` (and its transpose) into ``total`` at their
    weights' positions, from their pair's product ``(first.n_out second.n_out, first.n_in second.n_in)``,
    one run of rows and columns at a time: scattering it entry by entry to positions where the bias
    sits beside each row of ``W`` costs more than the product."""
    block = product.view(first.n_out, second.n_out, first.n_in, second.n_in).permute(0, 2, 1, 3)
    for rows, columns, row_columns, column_columns in _runs(first, second):
        total[rows, columns] = block[:, row_columns, :, column_columns].reshape(
            rows.stop - rows.start, columns.stop - columns.start)
        if first is not second:
            total[columns, rows] = total[rows, columns].T


def _read_block(total, first, second):
    """The block of layers ``first`` and ``second`` of ``total`` ``(K, K)``, as ``(first.n_out,
    first.n_in, second.n_out, second.n_in)`` in the order of ``W~`` (the inverse of :func:`_place_block`)."""
    block = total.new_empty(first.n_out, first.n_in, second.n_out, second.n_in)
    for rows, columns, row_columns, column_columns in _runs(first, second):
        block[:, row_columns, :, column_columns] = total[rows, columns].view(
            first.n_out, row_columns.stop - row_columns.start, second.n_out, column_columns.stop - column_columns.start)
    return block


def _runs(first, second):
    """The runs of the block of layers ``first`` and ``second`` that lie in one run of rows and of
    columns of a ``(K, K)`` matrix: ``(rows, columns, row_columns, column_columns)``, slices of the
    matrix and of the two layers' ``W~`` columns (:attr:`KroneckerLayer.parts`)."""
    for row_start, row_columns in first.parts:
        n_rows = first.n_out * (row_columns.stop - row_columns.start)
        for column_start, column_columns in second.parts:
            n_columns = second.n_out * (column_columns.stop - column_columns.start)
            yield (slice(row_start, row_start + n_rows), slice(column_start, column_start + n_columns),
                   row_columns, column_columns)


def layered_output_covariance(model, theta, covariance, X):
    """The linearised outputs' covariance ``J_n Sigma J_n^T`` at every row, ``(N, O, O)``, for a
    network whose every weight sits in an ``nn.Linear`` layer and a weight covariance ``Sigma``
    ``(K, K)``.

    A layer's Jacobian at row ``n`` is ``B_n (x) a~_n^T`` (``B_n`` its outputs' Jacobian, ``O x
    out``), so the pair of layers ``l, m`` adds ``B_n^l M_n B_n^m^T``, with ``M_n`` their block of
    ``Sigma`` contracted with ``a~_n^l`` and ``a~_n^m``: about ``N K_l K_m`` multiply-adds, where
    projecting the Jacobians through a factor of ``Sigma`` costs ``N O K**2``.

    Raises
    ------
    KroneckerUnsupportedError
        For a weight in no linear layer, or layers the hooks refuse.
    """
    layers, rest, chunks = _layer_chunks(model, theta, X, None, None, "jacobian")
    if len(rest) or not layers:
        raise KroneckerUnsupportedError("the layered output covariance needs every weight in an nn.Linear layer.")
    _check_layers_carry_the_gradient(model, theta, X, layers)
    # Each pair's block with the inputs' axes first, (in_l in_m, out_l out_m): one product with the rows'
    # input products a~_n (x) c~_n, as for the curvature (_layer_pair_product), folded where l = m.
    blocks = {(i, j): _read_block(covariance, first, second).permute(1, 3, 0, 2).reshape(
                  first.n_in * second.n_in, first.n_out * second.n_out)
              for i, first in enumerate(layers) for j, second in enumerate(layers) if i <= j}
    folds = {i: _SymmetricPairs(layer.n_in, theta.device) for i, layer in enumerate(layers)}
    for i, pairs in folds.items():
        # a (x) a counts each pair j != l twice: the folded block sums the two mirrored rows.
        folded = blocks[i, i][pairs.upper] + blocks[i, i][pairs.lower]
        folded[pairs.diagonal] /= 2
        blocks[i, i] = folded
    result = []
    for layer_inputs, gradients in chunks:
        present = [entry for entry in enumerate(zip(layer_inputs, gradients)) if entry[1][0] is not None]
        n_rows, n_outputs = len(present[0][1][0]), present[0][1][1].shape[0]
        part = theta.new_zeros(n_rows, n_outputs, n_outputs)
        for position, (i, (a, b)) in enumerate(present):
            for j, (c, d) in present[position:]:
                pair = _layer_pair_output_covariance(layers[i], a, b, layers[j], c, d, blocks[i, j], folds[i])
                part += pair if i == j else pair + pair.mT
        result.append(part)
    return torch.cat(result)


def _layer_pair_output_covariance(first, a, b, second, c, d, block, pairs):
    """``B_n^l M_n B_n^m^T`` at every row of a chunk, ``(n, O, O)``, from the pair's ``block`` of
    ``Sigma`` as :func:`layered_output_covariance` lays it out (folded by ``pairs`` where ``first``
    is ``second``), in sub-chunks whose input products stay under ``_CHUNK_ELEMENTS``."""
    step = max(1, _CHUNK_ELEMENTS // (first.n_in * second.n_in))
    parts = []
    for start in range(0, a.shape[0], step):
        rows = slice(start, start + step)
        products = torch.einsum("nj,nl->njl", a[rows], c[rows]).flatten(1)
        if first is second:
            products = products[:, pairs.upper]
        inner = (products @ block).view(len(products), first.n_out, second.n_out)
        parts.append(torch.einsum("dni,nik,enk->nde", b[:, rows], inner, d[:, rows]))
    return torch.cat(parts)


def layered_output_covariance_is_cheaper(model, n_rows, n_outputs):
    """Whether :func:`layered_output_covariance` on ``n_rows`` rows costs less than projecting their
    ``n_outputs`` Jacobians through a Cholesky factor of the precision: the triangular solve costs
    ``N O K**2 / 2`` multiply-adds, forming ``Sigma`` from the factor ``2/3 K**3`` and the layered
    contraction about ``N K**2 / 2``, so about when ``N (O - 1) > 4/3 K``.

    Raises
    ------
    KroneckerUnsupportedError
        As :func:`kronecker_layers`.
    """
    layers, rest, n_params = _layers_and_size(model)
    return not len(rest) and bool(layers) and 3 * n_rows * (n_outputs - 1) > 4 * n_params


#: What one row's element of a layer pair's input or output products, materialised, costs in multiply-adds
#: of the pair's product: a product whose output widths are few is bound by memory
#: (``benchmarks/bench_layered_curvature.py``: 7x slower than the Jacobians on 1000 inputs, 4 units, 1 output).
_MATERIALISED_COST = 100


def layered_is_cheaper(model, n_directions):
    """Whether :func:`layered_curvature` costs less than the per-example
    Jacobians' ``N D K**2`` multiply-adds for ``n_directions`` (``D``) output
    directions: its pairs of layers cost ``N in_l in_m out_l out_m`` (a layer
    with itself about half, :func:`_layer_pair_product`), or the materialising
    of ``in_l in_m`` products per row where the output widths are few
    (``_MATERIALISED_COST``).

    Raises
    ------
    KroneckerUnsupportedError
        As :func:`kronecker_layers`.
    """
    layers, rest, n_params = _layers_and_size(model)
    work = sum(first.n_in * second.n_in * max(first.n_out * second.n_out, _MATERIALISED_COST)
               * (_folded_share(max(first.n_out, first.n_in)) if first is second else 1)
               for i, first in enumerate(layers) for second in layers[i:])
    return not len(rest) and work < n_directions * n_params**2


def _layers_and_size(model):
    """:func:`kronecker_layers` and the count of the weights."""
    layers, rest = kronecker_layers(model)
    return layers, rest, sum(layer.n_out * layer.n_in for layer in layers) + len(rest)


#: Rows on which :func:`_check_layers_carry_the_gradient` compares the two gradients.
_CHECK_ROWS = 64


def _check_layers_carry_the_gradient(model, theta, X, layers):
    """Refuse a network whose layers' inputs and output gradients do not give
    its weights' gradient: a weight also used outside its layer's call (a tied
    decoder's ``F.linear(h, encoder.weight.T)``), or an ``nn.Linear`` whose
    ``forward`` is not ``s = W a + b``. One gradient of a random projection of
    the outputs on a few rows, both ways."""
    module, inputs, _ = module_and_inputs(model, X[:_CHECK_ROWS])
    theta = theta.detach()
    outputs, backward = vjp(lambda weights: model.single(weights, X[:_CHECK_ROWS]), theta)
    projection = standard_normal(torch.Generator().manual_seed(0), outputs)
    (expected,) = backward(projection)
    layer_inputs, gradients = _inputs_and_output_gradients(
        module, theta, inputs, lambda _: projection.reshape(len(inputs), -1).unsqueeze(0), layers
    )
    rebuilt = torch.zeros_like(expected)
    for layer, a, b in zip(layers, layer_inputs, gradients):
        if a is not None and b is not None:
            rebuilt[layer.index.to(rebuilt.device)] = (b[0].T @ _with_bias_column(layer, a)).flatten()
    precision = torch.finfo(theta.dtype)
    if float((rebuilt - expected).abs().max()) > 1e3 * precision.eps * float(expected.abs().max()) + precision.tiny:
        raise KroneckerUnsupportedError(
            "the layers' inputs and output gradients do not give the weights' gradient (a weight used outside "
            "its nn.Linear's call, or an nn.Linear whose forward is not W a + b)."
        )


def _layer_pair_product(first, a, b, second, c, d):
    """``sum_n vec(B_n^T D_n) vec(a_n c_n^T)^T``, ``(first.n_out second.n_out, first.n_in second.n_in)``:
    the pair's block ``sum_n (B_n^T D_n) (x) (a_n c_n^T)`` with its axes in the product's order, for
    a chunk of rows, in sub-chunks whose two per-row products stay under ``_CHUNK_ELEMENTS``.

    A layer's product with itself is symmetric in each factor's pair of indices: only the pairs
    ``i <= k`` of its wider factor enter the product (half its multiply-adds), and the others are
    read from them."""
    same = first is second
    per_row = first.n_out * second.n_out + first.n_in * second.n_in
    step = max(1, _CHUNK_ELEMENTS // per_row)
    fold_outputs = same and first.n_out >= first.n_in
    fold_inputs = same and not fold_outputs
    pairs = _SymmetricPairs(max(first.n_out, first.n_in), a.device) if same else None
    product = a.new_zeros(pairs.n_pairs if fold_outputs else first.n_out * second.n_out,
                          pairs.n_pairs if fold_inputs else first.n_in * second.n_in)
    for start in range(0, a.shape[0], step):
        rows = slice(start, start + step)
        outputs = torch.einsum("dni,dnk->nik", b[:, rows], d[:, rows]).flatten(1)
        inputs = torch.einsum("nj,nl->njl", a[rows], c[rows]).flatten(1)
        if fold_outputs:
            outputs = outputs[:, pairs.upper]
        if fold_inputs:
            inputs = inputs[:, pairs.upper]
        product.addmm_(outputs.T, inputs)
    if fold_outputs:
        return product[pairs.of_every]
    return product[:, pairs.of_every] if fold_inputs else product


def _folded_share(n):
    """The share of the ``n**2`` pairs of ``n`` indices with ``i <= k``."""
    return (n + 1) / (2 * n)


class _SymmetricPairs:
    """The pairs ``(i, k)`` of ``n`` indices, as positions in a row-major ``n x n``: ``upper``, those
    with ``i <= k``, and ``of_every``, for each of the ``n**2`` the position in ``upper`` of its
    mirror ``(min, max)``; ``lower``, the mirrors of ``upper``, and ``diagonal``, which of them are ``i = k``."""

    def __init__(self, n, device):
        i, k = torch.triu_indices(n, n, device=device)
        self.upper, self.lower, self.diagonal = i * n + k, k * n + i, i == k
        self.n_pairs = len(self.upper)
        slot = torch.empty(n, n, dtype=torch.long, device=device)
        slot[i, k] = torch.arange(self.n_pairs, device=device)
        slot[k, i] = slot[i, k]
        self.of_every = slot.flatten()


class KroneckerEigenbasis:
    """The eigenvectors of a Kronecker-factored curvature as an operator on ``(..., K)`` weights.

    With the prior's per-weight scale ``P^(1/2)`` (constant within a
    parameter tensor, so within each input column of ``W~``), the curvature in
    the whitened weights ``P^(-1/2) C P^(-1/2)`` is again ``G (x) A'`` per
    layer, with ``A' = R^-1 A R^-1`` and ``R`` the input columns' root
    precisions. The map from eigen coordinates to weights is then
    ``B = P^(-1/2) Q`` with ``Q`` block diagonal: ``U_G (x) U_A'`` on each
    layer, the identity on the rest.

    Parameters
    ----------
    layers : list of KroneckerLayer
    factors : list of (G, A)
    rest : tensor of int
    rest_curvature : tensor of shape (len(rest),)
        The diagonal curvature of the weights in no layer.
    n_params : int
    prior_root : tensor of shape (K,), default=None
        ``p^(1/2)`` per weight; None for an isotropic prior.

    Attributes
    ----------
    eigenvalues : tensor of shape (K,)
        ``g_i a_j`` at each layer's positions (row-major in ``W~``), the
        diagonal curvature elsewhere.
    """

    def __init__(self, layers, factors, rest, rest_curvature, n_params, prior_root=None):
        self.layers, self.rest = layers, rest
        self.prior_root = prior_root
        eigenvalues = rest_curvature.new_zeros(n_params)
        self._vectors = []
        for layer, (output_factor, input_factor) in zip(layers, factors):
            if prior_root is not None:
                column_root = self._columns(prior_root, layer)
                if not torch.equal(column_root, column_root[:1].expand_as(column_root)):
                    raise ValueError(
                        "hessian_structure='kron' needs a prior precision constant within each input column of a layer."
                    )
                input_factor = input_factor / column_root[0][:, None] / column_root[0][None, :]
            output_values, output_vectors = torch.linalg.eigh(output_factor)
            input_values, input_vectors = torch.linalg.eigh(input_factor)
            eigenvalues[layer.index.to(eigenvalues.device)] = torch.outer(output_values, input_values).flatten()
            self._vectors.append((output_vectors, input_vectors))
        whitened_rest = rest_curvature if prior_root is None else rest_curvature / prior_root[rest].square()
        eigenvalues[rest.to(eigenvalues.device)] = whitened_rest
        self.eigenvalues = eigenvalues

    @property
    def coordinate_eigenvalues(self):
        """One eigenvalue per eigen coordinate: ``eigenvalues`` (the basis is square)."""
        return self.eigenvalues

    @staticmethod
    def _columns(weights, layer):
        """A layer's block of ``(..., K)`` weights as ``(..., n_out, n_in)``."""
        return weights[..., layer.index.to(weights.device)].unflatten(-1, (layer.n_out, layer.n_in))

    def _map(self, weights, transpose):
        """``weights B`` (``transpose``) or ``weights B^T``, over the last axis of ``(..., K)``."""
        root = self.prior_root
        if transpose and root is not None:
            weights = weights / root
        result = torch.empty_like(weights)
        for layer, (output_vectors, input_vectors) in zip(self.layers, self._vectors):
            block = self._columns(weights, layer)
            if transpose:  # U_G^T w U_A, per row-major (out, in) block
                block = output_vectors.T @ block @ input_vectors
            else:
                block = output_vectors @ block @ input_vectors.T
            result[..., layer.index.to(weights.device)] = block.flatten(-2)
        result[..., self.rest.to(weights.device)] = weights[..., self.rest.to(weights.device)]
        return result if transpose or root is None else result / root

    def transpose_apply(self, jacobian):
        """``J B`` for ``J`` of shape ``(..., K)``: the rows in eigen coordinates."""
        return self._map(jacobian, transpose=True)

    def apply(self, coordinates):
        """``B z`` for eigen coordinates ``z`` given as rows ``(..., K)``."""
        return self._map(coordinates, transpose=False)

    def leverage(self, layer_inputs, gradients, ratio):
        """``diag(W B diag(ratio) B^T W^T)`` for the whitened Jacobian rows ``W`` of a
        chunk of rows, shape ``(D, n)``, from its layers' inputs ``a~`` ``(n, n_in)`` and
        whitened output gradients ``(D, n, n_out)`` (as ``_layer_chunks`` gives them; a
        layer with None has no curvature and adds nothing).

        A row's Jacobian in a layer is the outer product of its output gradient
        and its input, so in eigen coordinates it is ``(U_G^T b)(U_A'^T R^-1 a~)^T``
        and its square the outer product of the two squares: the leverage costs a
        layer's two factors per row, never the row's ``K`` weights. The weights in
        no layer are not covered (the caller checks that there are none).
        """
        total = 0.0
        for layer, (output_vectors, input_vectors), a, b in zip(self.layers, self._vectors, layer_inputs, gradients):
            if a is None or b is None:
                continue
            a, b = a.to(input_vectors.dtype), b.to(output_vectors.dtype)
            if self.prior_root is not None:
                a = a / self._columns(self.prior_root, layer)[0]
            # The input side against the ratios first, (n, n_out): never a (D, n, n_in) temporary.
            input_part = (a @ input_vectors).square() @ self._columns(ratio, layer).T
            total = total + ((b @ output_vectors).square() * input_part).sum(-1)
        return total

    def squared_apply(self, values):
        """``(B * B) v`` for ``v (K,)``: the diagonal of ``B diag(v) B^T``."""
        result = values.new_empty(values.shape)
        for layer, (output_vectors, input_vectors) in zip(self.layers, self._vectors):
            block = output_vectors.square() @ self._columns(values, layer) @ input_vectors.square().T
            result[layer.index.to(values.device)] = block.flatten()
        result[self.rest.to(values.device)] = values[self.rest.to(values.device)]
        return result if self.prior_root is None else result / self.prior_root.square()
