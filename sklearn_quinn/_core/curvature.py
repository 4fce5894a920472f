"""Curvature of the negative log-likelihood at one weight vector.

For the loss ``L(theta) = -sum_i log p(y_i | f(x_i; theta))`` (Gaussian, or
categorical over logits):

- ``'ggn'``: generalised Gauss-Newton ``sum_i J_i^T Lambda_i J_i`` with
  ``Lambda_i`` the Hessian of the loss in the outputs (``diag(noise**-2)``;
  ``diag(p) - p p^T`` for the softmax);
- ``'hessian'``: the exact Hessian of ``L`` (the GGN plus the residual term);
- ``'ef'``: empirical Fisher ``sum_i g_i g_i^T`` with ``g_i`` the gradient of
  point ``i``'s loss.

Each comes as a full ``(K, K)`` matrix or as its diagonal ``(K,)``. The GGN
and empirical Fisher come from per-example Jacobians, accumulated over chunks
of rows so memory stays bounded; a full GGN of a network whose every weight
sits in an ``nn.Linear`` layer, from the layers' inputs and output gradients
where that costs less (:func:`~sklearn_quinn._core.kronecker.layered_curvature`:
for a softmax, up to the classes times fewer operations); the Hessian from Hessian-vector products over
blocks of basis vectors (its diagonal never forms the full matrix). Products
``C V`` with a block of vectors (:func:`curvature_matmul`) never form ``C``:
the GGN's come from forward- and reverse-mode products over chunks of rows
(the module must support forward-mode differentiation, as every torch layer
does; a custom ``autograd.Function`` needs its ``jvp``), the empirical
Fisher's from the per-point gradients. An eigensolver's many products at one
point (:func:`curvature_operator`) go through ``C``'s square root, formed once,
where it is small.
"""

import os

import torch
from torch.func import grad, jvp, vjp, vmap

from .._warnings import warn
from .kronecker import (
    KroneckerUnsupportedError,
    kronecker_bytes,
    kronecker_factors,
    kronecker_layers,
    layered_curvature,
    layered_is_cheaper,
)
from .last_layer import outputs_and_jacobian
from .rng import standard_normal

CURVATURES = ("ggn", "hessian", "ef")
STRUCTURES = ("full", "diag")

#: Largest K x K matrix, in bytes, that a full structure may allocate. The
#: full Laplace holds about four of them (curvature, eigenvectors, Cholesky
#: factor, workspace).
MAX_FULL_MATRIX_BYTES = 2 * 1024**3

#: The most weights 'auto' gives the full structure: its eigen decomposition
#: grows as K**3 (about 15 s at 4000 weights, 50 s at 6000, in float64 on two
#: laptop cores), where everything else in a Laplace fit grows as K or K**2.
AUTO_MAX_FULL_PARAMS = 5000

#: Matrices the full structure holds at once (curvature, eigenvectors, Cholesky factor, workspace).
_FULL_MATRICES = 4

# Per-example Jacobian chunks are kept under this many bytes.
_CHUNK_BYTES = 64 * 1024**2

#: Block of vectors of the subspace iteration for the GGN's largest eigenvalue,
#: its relative tolerance and its most iterations.
_EIGEN_BLOCK, _EIGEN_TOLERANCE, _EIGEN_MAX_ITERATIONS = 8, 1e-6, 300

#: Copies of a row's activations that a GGN product keeps per vector: the
#: primal and tangent of the forward-mode pass, the cotangent of the backward
#: one, and the primal the backward pass was built from.
_PRODUCT_ACTIVATIONS = 4


def _full_bytes(n_params, dtype):
    return n_params**2 * torch.empty((), dtype=dtype).element_size()


def full_fits(n_params, dtype):
    """Whether a ``(K, K)`` matrix fits the memory budget."""
    return _full_bytes(n_params, dtype) <= MAX_FULL_MATRIX_BYTES


def check_full_fits(n_params, dtype):
    """Refuse, before allocating, a ``(K, K)`` matrix over the memory budget."""
    if not full_fits(n_params, dtype):
        raise ValueError(
            f"hessian_structure='full' needs a {n_params} x {n_params} matrix "
            f"({_full_bytes(n_params, dtype) / 1024**3:.2f} GiB, about four of them at once), over the budget of "
            f"{MAX_FULL_MATRIX_BYTES / 1024**3:.2f} GiB per matrix. "
            "Use hessian_structure='kron', 'diag' or 'auto', subset_of_weights='last_layer', or a smaller network."
        )


def machine_memory_bytes():
    """This machine's physical memory (8 GiB where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 * 1024**3


def choose_structure(n_params, dtype, memory_budget, layers=(), n_rest=0, unfactored="no nn.Linear layer to factor"):
    """The richest structure whose memory fits ``memory_budget`` bytes and whose time is a fit's.

    Full when its matrices fit and its eigen decomposition is quick; else
    Kronecker-factored when the network has linear layers (``layers``, from
    :func:`~sklearn_quinn._core.kronecker.kronecker_layers`, with ``n_rest``
    weights in none) whose factors fit and decompose quickly; else diagonal.
    ``unfactored``: why there are no ``layers``, for the reason.

    Returns
    -------
    structure : {'full', 'kron', 'diag'}
    reason : str
        Why, in figures.
    """
    # Never more than an explicit 'full' may hold (check_full_fits).
    budget = min(memory_budget, _FULL_MATRICES * MAX_FULL_MATRIX_BYTES)
    need = _FULL_MATRICES * _full_bytes(n_params, dtype)
    size = f"{_FULL_MATRICES} matrices of {n_params} x {n_params} ({need / 1024**3:.3g} GiB)"
    gib = f"{budget / 1024**3:.3g} GiB"
    if need <= budget and n_params <= AUTO_MAX_FULL_PARAMS:
        return "full", f"full needs {size}, within the memory budget of {gib}"
    if need > budget:
        why_not_full = f"full needs {size}, over the memory budget of {gib}"
    else:
        why_not_full = (f"full's eigen decomposition of {n_params} weights (over {AUTO_MAX_FULL_PARAMS}) "
                        "would take minutes")
    if layers:
        kron_need = kronecker_bytes(layers, n_rest, dtype)
        largest = max(max(layer.n_out, layer.n_in) for layer in layers)
        kron = (f"kron's factors of {len(layers)} layers (the largest {largest} x {largest}) "
                f"need {kron_need / 1024**2:.3g} MiB")
        if kron_need <= budget and largest <= AUTO_MAX_FULL_PARAMS:
            return "kron", f"{why_not_full}; {kron}"
        return "diag", f"{why_not_full}; {kron}, over the budget or too large to decompose"
    return "diag", f"{why_not_full}; {unfactored}"


def choose_model_structure(model, theta, memory_budget="auto", kind="ggn"):
    """:func:`choose_structure` for ``model`` at ``theta``, under ``memory_budget`` bytes ('auto': a
    quarter of the machine's memory), for the curvature ``kind``: the exact Hessian, and layers
    whose weights are shared or parametrised, have no Kronecker factors."""
    budget = machine_memory_bytes() // 4 if memory_budget == "auto" else memory_budget
    if kind == "hessian":
        return choose_structure(theta.shape[0], theta.dtype, budget,
                                unfactored="the exact Hessian has no Kronecker factors")
    try:
        layers, rest = kronecker_layers(model)
    except KroneckerUnsupportedError as error:
        why = f"no Kronecker factors: {str(error).rstrip('.')}"
        return choose_structure(theta.shape[0], theta.dtype, budget, unfactored=why)
    return choose_structure(theta.shape[0], theta.dtype, budget, layers, len(rest))


def _row_chunks(n_rows, row_bytes):
    size = max(1, _CHUNK_BYTES // max(row_bytes, 1))
    return [slice(start, start + size) for start in range(0, n_rows, size)]


def curvature(model, theta, X, Y, likelihood, kind="ggn", structure="full"):
    """Curvature of the negative log-likelihood at ``theta``.

    Parameters
    ----------
    model : FunctionalModel
    theta : tensor of shape (K,)
    X : tensor of shape (N, D)
    Y : tensor of shape (N, O)
        Targets; one column of class indices for a categorical likelihood.
    likelihood : GaussianLikelihood or CategoricalLikelihood
        A Gaussian one holds the (fixed) observation noise per output.
    kind : {'ggn', 'hessian', 'ef'}
    structure : {'full', 'diag'}

    Returns
    -------
    tensor of shape (K, K) for 'full', (K,) for 'diag'
    """
    if kind not in CURVATURES:
        raise ValueError(f"kind must be one of {CURVATURES}, got {kind!r}.")
    if structure not in STRUCTURES:
        raise ValueError(f"structure must be one of {STRUCTURES}, got {structure!r}.")
    n_params = theta.shape[0]
    if structure == "full":
        check_full_fits(n_params, theta.dtype)
    if kind == "hessian":
        return _hessian(model, theta, X, Y, likelihood, structure)

    # The layers' route sums the output directions before its product; with one direction (one output, or
    # the empirical Fisher's gradient), or wide inputs into narrow layers, the Jacobians cost less.
    if structure == "full" and kind == "ggn":
        try:
            if layered_is_cheaper(model, model.single(theta, X[:1]).shape[-1]):
                return layered_curvature(model, theta, X, Y, likelihood, kind)
        except KroneckerUnsupportedError:
            pass
    return jacobian_curvature(model, theta, X, Y, likelihood, kind, structure)


def jacobian_curvature(model, theta, X, Y, likelihood, kind="ggn", structure="full"):
    """The GGN or empirical Fisher (``kind``), full or its diagonal (``structure``),
    from the per-example Jacobians or gradients of chunks of rows: the route
    :func:`curvature` takes for any network."""
    n_params = theta.shape[0]
    shape = (n_params, n_params) if structure == "full" else (n_params,)
    total = theta.new_zeros(shape)
    for factor in _square_root_chunks(model, theta, X, Y, likelihood, kind):
        total += factor.T @ factor if structure == "full" else factor.square().sum(0)
    return total


def kronecker_curvature(model, theta, X, Y, likelihood, kind="ggn"):
    """The Kronecker factors of each ``nn.Linear`` layer
    (:func:`~sklearn_quinn._core.kronecker.kronecker_factors`) and the diagonal
    curvature of the weights in no layer: what a
    :class:`~sklearn_quinn._core.kronecker.KroneckerEigenbasis` is built from.

    Returns
    -------
    layers, factors, rest
        As :func:`~sklearn_quinn._core.kronecker.kronecker_factors` returns them.
    rest_curvature : tensor of shape (len(rest),)
    """
    layers, factors, rest = kronecker_factors(model, theta, X, Y, likelihood, kind)
    rest_curvature = curvature(model, theta, X, Y, likelihood, kind, "diag")[rest] if len(rest) else theta[:0]
    return layers, factors, rest, rest_curvature


def curvature_matmul(model, theta, X, Y, likelihood, kind, vectors):
    """``C V`` for the GGN or empirical Fisher ``C``, without forming ``C``: the
    GGN's by Jacobian-vector products over blocks of vectors, the empirical
    Fisher's in one pass over chunks of the rows' gradients.

    Parameters
    ----------
    model, theta, X, Y, likelihood
        As for :func:`curvature` (the GGN's products do not read ``Y``).
    kind : {'ggn', 'ef'}
    vectors : tensor of shape (K, m)

    Returns
    -------
    tensor of shape (K, m)
    """
    _check_product_kind(kind)
    if kind == "ggn":
        return _ggn_matmul(model, theta, X, likelihood, vectors)
    total = torch.zeros_like(vectors)
    for factor in _square_root_chunks(model, theta, X, Y, likelihood, kind):
        total += factor.T @ (factor @ vectors)
    return total


def curvature_operator(model, theta, X, Y, likelihood, kind):
    """The map ``V -> C V`` of :func:`curvature_matmul` at one ``theta``, for many
    products there (an iterative eigensolver's): where the square root ``F``
    (``C = F^T F``) of every row fits one chunk of ``_CHUNK_BYTES``, it is formed
    once and each product is two matrix products with it, instead of a pass of
    forward- and reverse-mode products over the rows at each call; otherwise each
    call is :func:`curvature_matmul`'s."""
    _check_product_kind(kind)
    chunks = _square_root_row_chunks(model, theta, X)
    if len(chunks) > 1:
        return lambda vectors: curvature_matmul(model, theta, X, Y, likelihood, kind, vectors)
    (root,) = _square_root_chunks(model, theta, X, Y, likelihood, kind, chunks)
    return lambda vectors: root.T @ (root @ vectors)


def _check_product_kind(kind):
    if kind not in ("ggn", "ef"):
        raise ValueError(f"curvature products are taken of the GGN or the empirical Fisher, not {kind!r}.")


def _square_root_row_chunks(model, theta, X):
    """The chunks of data rows :func:`_square_root_chunks` takes at a time."""
    n_outputs = model.single(theta, X[:1]).shape[-1]
    return _row_chunks(X.shape[0], 2 * n_outputs * theta.shape[0] * theta.element_size())


def _square_root_chunks(model, theta, X, Y, likelihood, kind, chunks=None):
    """The rows of ``F`` with ``C = F^T F`` (the GGN's whitened Jacobians, the
    empirical Fisher's per-point gradients), one chunk of data rows at a time
    (``chunks``, where the caller has them, or :func:`_square_root_row_chunks`')."""
    n_params = theta.shape[0]
    for rows in _square_root_row_chunks(model, theta, X) if chunks is None else chunks:
        outputs, jac = outputs_and_jacobian(model, theta, X[rows])
        if kind == "ggn":
            yield likelihood.whitened_jacobian(jac, outputs).reshape(-1, n_params)
        else:
            yield torch.einsum("no,nok->nk", likelihood.output_gradient(outputs, Y[rows]), jac)


def _hessian(model, theta, X, Y, likelihood, structure):
    """Exact Hessian (or its diagonal) by forward-over-reverse products in blocks."""

    def loss(weights):
        return -likelihood.log_prob(model.single(weights, X), Y).sum()

    def hessian_vector_product(vector):
        return jvp(grad(loss), (theta,), (vector,))[1]

    n_params = theta.shape[0]
    row_bytes = X.shape[0] * n_params * theta.element_size()
    blocks = []
    for rows in _row_chunks(n_params, row_bytes):
        index = torch.arange(n_params, device=theta.device)[rows]
        basis = theta.new_zeros(len(index), n_params)
        basis[torch.arange(len(index)), index] = 1.0
        columns = vmap(hessian_vector_product)(basis)
        blocks.append(columns if structure == "full" else columns[:, index].diagonal())
    result = torch.cat(blocks)
    return 0.5 * (result + result.T) if structure == "full" else result


def _ggn_matmul(model, theta, X, likelihood, vectors):
    """``G V`` for ``V (K, m)`` through :func:`_ggn_products`, in blocks of
    vectors and chunks of rows whose activations stay under ``_CHUNK_BYTES``."""
    n_rows, n_vectors = X.shape[0], vectors.shape[1]
    # Per row and vector, a product keeps each activation a few times (see _PRODUCT_ACTIVATIONS).
    row_bytes = _PRODUCT_ACTIVATIONS * model.total_width * theta.element_size()
    width = max(1, min(n_vectors, _CHUNK_BYTES // (n_rows * row_bytes)))
    total = torch.zeros_like(vectors)
    for rows in _row_chunks(n_rows, width * row_bytes):
        product = _ggn_products(model, theta, X[rows], likelihood)
        total += torch.cat([product(block.T).T for block in vectors.split(width, dim=1)], dim=1)
    return total


def _ggn_products(model, theta, X, likelihood):
    """The map ``V (m, K) -> V G (m, K)`` for the GGN of the rows ``X`` at
    ``theta``, through forward- and reverse-mode products, never a Jacobian:
    ``G v = sum_n J_n^T S_n^T S_n J_n v`` (Schraudolph 2002, "Fast curvature
    matrix-vector products for second-order gradient descent"), ``S_n`` the
    likelihood's whitening of the outputs. One pass over the rows forward and
    one backward for the whole block."""
    theta = theta.detach()

    def single(weights):
        return model.single(weights, X)

    outputs, backward = vjp(single, theta)
    outputs = outputs.detach()
    # The whitening is linear in what it whitens: its transpose is its vjp at any point.
    _, whiten_transpose = vjp(lambda tangent: likelihood.whitened_jacobian(tangent.unsqueeze(-1), outputs),
                              torch.zeros_like(outputs))

    def product(vector):
        whitened = likelihood.whitened_jacobian(jvp(single, (theta,), (vector,))[1].unsqueeze(-1), outputs)
        return backward(whiten_transpose(whitened)[0])[0]

    return vmap(product)


def largest_ggn_eigenvalue(model, theta, X, likelihood):
    """The largest eigenvalue of the GGN at ``theta``, by subspace iteration
    on :func:`curvature_operator` products: the Rayleigh-Ritz value of a block
    of ``_EIGEN_BLOCK`` vectors, once its vector's residual ``||G q - lambda q||``
    is within ``_EIGEN_TOLERANCE`` of ``lambda`` (0 for a zero GGN, every
    unit dead).

    The Ritz value converges from below, in a few dozen passes over the rows.
    The GGN's diagonal, or its Kronecker-factored blocks, do not bound it: the
    largest curvature direction mixes the layers.

    Parameters
    ----------
    model, theta, X, likelihood
        As for :func:`curvature` (no targets: the GGN does not read them).

    Returns
    -------
    float
    """
    n_params = theta.shape[0]
    generator = torch.Generator(device=theta.device).manual_seed(0)
    block = standard_normal(generator, theta, (n_params, min(_EIGEN_BLOCK, n_params)))
    ggn_matmul = curvature_operator(model, theta, X, None, likelihood, "ggn")
    for _ in range(_EIGEN_MAX_ITERATIONS):
        basis = torch.linalg.qr(block).Q
        block = ggn_matmul(basis)
        values, vectors = torch.linalg.eigh(basis.T @ block)
        value, top = float(values[-1]), basis @ vectors[:, -1]
        residual = float(torch.linalg.vector_norm(block @ vectors[:, -1] - value * top))
        if residual <= _EIGEN_TOLERANCE * value or value <= 0.0:
            return max(value, 0.0)
    warn(f"the GGN's largest eigenvalue did not converge in {_EIGEN_MAX_ITERATIONS} iterations "
         f"(residual {residual:.3g} at {value:.6g}); its estimate, a lower bound, is used")
    return value
