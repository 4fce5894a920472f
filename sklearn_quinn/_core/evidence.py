"""The Laplace evidence at one weight vector, as a function of the hyperparameters.

The prior is ``N(0, diag(delta)^-1)`` with one precision ``delta_g`` per group
of weights (``ParameterGroups``: each named parameter tensor, a layer's weights
or biases, and each input column of the layers that read the inputs), the
noise a Gaussian likelihood's std ``c * noise_std`` (``c`` a scale on the
current noise). With the generalised Gauss-Newton ``G = W^T W`` (``W`` the
whitened Jacobian at the current noise, rows per observation) the Laplace
approximation of the log evidence at ``theta`` is

    ``log p(D | theta, c) - 1/2 sum_g delta_g ||theta_g||^2 + 1/2 sum_g K_g log delta_g
    - 1/2 log det(G / c**2 + diag(delta))``

(MacKay 1992, "A practical Bayesian framework for backpropagation networks";
evaluated at the current weights during training, not only at a converged MAP,
as in Immer et al. 2021, "Scalable marginal likelihood estimation for model
selection in deep learning"). Its log determinant is exact when it is cheap:
through the ``M x M`` kernel ``I + W diag(delta)^-1 W^T / c**2`` when the ``M``
observations are fewer than the ``K`` weights (the matrix determinant lemma),
through the ``K x K`` matrix otherwise. For a network too large for either,
each ``nn.Linear`` layer's block of ``G`` is Kronecker-factored (Martens and
Grosse 2015, as Immer et al. 2021 do for the evidence) and the weights in no
layer keep the diagonal of ``G``; a network with no layer to factor, or whose
layers the factors refuse, keeps the diagonal alone. The factors' log
determinant exceeds the exact one the more, the weaker the prior: each
factor averages over the rows what varies from row to row, and the product
of the averages spreads the curvature over directions no row has. It
therefore favours a strong prior (``benchmarks/bench_evidence_end_state.py
--exact``; docs/evidence.rst).

Its maximiser over the hyperparameters is MacKay's fixed point: with
``gamma_g = K_g - delta_g tr_g(Sigma)`` the number of weights of group ``g``
that the data determine (``Sigma`` the posterior covariance),
``delta_g = gamma_g / ||theta_g||^2`` and ``c**2 = SSE / (N O - sum_g
gamma_g)``, with SSE each output's squared residuals over its current noise
variance and ``c`` the common factor of the outputs' noise stds: the
stationarity conditions of the evidence,
iterated (the updates of scikit-learn's ``BayesianRidge``, one precision per
group), each group's step relaxed by its own secant slope
(``_FixedPointRelaxation``). Where a layer's input columns are groups apart,
what is maximised is the evidence times a Gamma hyperprior on their precisions
about their mean (``ColumnHyperprior``), which adds a constant to each
column's ``gamma_g`` and to its ``||theta_g||^2``. One factorisation per iteration, no line search.
The kernel's Gram matrices take a layer's input columns together
(``KernelGrams``).
"""

import math
from typing import NamedTuple

import numpy as np
import torch
from scipy.optimize import brentq
from sklearn.exceptions import ConvergenceWarning

from .._warnings import warn
from .curvature import MAX_FULL_MATRIX_BYTES, curvature, full_fits, kronecker_curvature
from .kernel_grams import KernelGrams
from .kronecker import KroneckerEigenbasis, KroneckerUnsupportedError, kronecker_layers, kronecker_leverage
from .likelihoods import output_whitening
from .posterior import GaussianPosterior

#: Largest number of observations (rows of ``W``) and of weights for the exact
#: log determinant, through the kernel or the full matrix (by default: a
#: caller may allow the full matrix further, ``max_full_params``).
_MAX_KERNEL_ROWS = 2048
_MAX_FULL_PARAMS = 2048
# Most bytes of the kernel's Gram matrices (``KernelGrams``: one per tensor, one per layer of input columns):
# the full structure's budget for its one matrix.
_MAX_GRAM_BYTES = MAX_FULL_MATRIX_BYTES

# Bounds of the prior precisions, and of the noise scale of one update.
_PRECISION_BOUNDS = (1e-6, 1e8)
_NOISE_SCALE_BOUNDS = (1e-3, 1e3)

# The shape of the Gamma hyperprior on each input column's precision about the mean of its layer's
# (ColumnHyperprior).
COLUMN_SHAPE = 0.5
# Newton's steps on the log of a layer's mean precision from its last value (ColumnHyperprior._mean).
_NEWTON_STEPS, _NEWTON_TOLERANCE = 8, 1e-12

# Whitened Jacobian entries (rows x outputs x weights) per block of the full structure's leverages.
_LEVERAGE_BLOCK = 2**22

# MacKay's iteration stops when the log evidence rises by less than this, or after this many steps.
_TOLERANCE = 1e-6
_MAX_ITERATIONS = 100


class ParameterGroups:
    """The groups of the flat weight vector that get a prior precision each.

    One group per named parameter tensor, in the order of ``theta``, except
    the weight matrices that read the network's inputs
    (``FunctionalModel.input_weights``: the first layer's and the linear
    skip's), which get one group per input column: automatic relevance
    determination (MacKay 1994, "Bayesian nonlinear modeling for the
    prediction competition"; Neal 1996, "Bayesian learning for neural
    networks"). With one precision for a whole layer, the evidence must
    give an input the targets ignore the same prior as the others, and the
    predictive spreads along it; a column's own precision lets the evidence
    shrink that input alone. A layer's columns share a hyperprior about their
    mean (:class:`ColumnHyperprior`), so that many columns for few rows do not
    over-fit their precisions.

    Parameters
    ----------
    names : list of str
        One per group: a tensor's name, or ``'name[:, j]'`` for input column ``j``.
    index : tensor of shape (K,)
        The group of each weight.
    tensors : tensor of shape (G,)
        The parameter tensor each group belongs to (its position in ``tensor_names``).
    tensor_names : list of str
    shapes : list of torch.Size
        The parameter tensors' shapes.
    input_tensors : list of int, default=()
        The weight matrices that read the network's inputs (positions in ``tensor_names``), whether
        their columns are groups apart or one group.
    """

    def __init__(self, names, index, tensors, tensor_names, shapes, input_tensors=()):
        self.names = list(names)
        self.index = torch.as_tensor(index)
        self.tensors = torch.as_tensor(tensors)
        self.tensor_names, self.shapes = list(tensor_names), list(shapes)
        self.input_tensors = list(input_tensors)
        self.sizes = torch.bincount(self.index, minlength=len(self.names))

    @classmethod
    def of(cls, model):
        """The groups of a :class:`~sklearn_quinn._core.network.FunctionalModel`."""
        names, index, tensors = [], [], []
        for position, (name, shape) in enumerate(zip(model.names, model.shapes)):
            first = len(names)
            if name in model.input_weights:
                n_out, n_in = shape
                names += [f"{name}[:, {column}]" for column in range(n_in)]
                index.append(first + torch.arange(n_in).repeat(n_out))  # row-major (out, in)
            else:
                names.append(name)
                index.append(torch.full((shape.numel(),), first))
            tensors += [position] * (len(names) - first)
        input_tensors = [position for position, name in enumerate(model.names) if name in model.input_weights]
        return cls(names, torch.cat(index), tensors, model.names, model.shapes, input_tensors)

    def tied(self):
        """The same weights with one group per parameter tensor (no input column apart)."""
        return ParameterGroups(self.tensor_names, self.tensors[self.index], range(len(self.tensor_names)),
                               self.tensor_names, self.shapes, self.input_tensors)

    def tie(self, values):
        """One precision per group ``(G,)`` to one per tensor ``(T,)``: each tensor's whose prior
        variance is the mean of its weights' (the groups' own where a tensor is one group)."""
        sizes = self.sizes.to(values)
        weights = values.new_zeros(len(self.tensor_names)).index_add_(0, self.tensors.to(values.device), sizes)
        variances = values.new_zeros(len(self.tensor_names)).index_add_(
            0, self.tensors.to(values.device), sizes / values)
        return weights / variances

    def untie(self, values):
        """One value per tensor ``(T,)`` to one per group ``(G,)``."""
        return values[self.tensors.to(values.device)]

    def __len__(self):
        return len(self.names)

    def expand(self, values):
        """One value per group ``(G,)`` to one per weight ``(K,)``."""
        return values[self.index.to(values.device)]

    def per_tensor(self, values):
        """One value per group ``(G,)`` to a tensor of each parameter's shape, in order."""
        weights = torch.split(self.expand(values), [shape.numel() for shape in self.shapes])
        return [weight.view(shape) for weight, shape in zip(weights, self.shapes)]

    def sums(self, values):
        """Sums over each group of per-weight ``values (K,)``, shape ``(G,)``."""
        index = self.index.to(values.device)
        return values.new_zeros(len(self)).index_add_(0, index, values)

    def split(self, values, which):
        """The columns of ``values (..., K)`` of each of the groups ``which``: a view of
        ``values`` for a group whose weights are contiguous (a whole tensor), a copy otherwise."""
        index = self.index.to(values.device)
        blocks = []
        for group in which.tolist():
            columns = torch.nonzero(index == group).squeeze(1)
            first, last = int(columns[0]), int(columns[-1])
            contiguous = last - first + 1 == len(columns)
            blocks.append(values[..., first:last + 1] if contiguous else values.index_select(-1, columns))
        return blocks

    def input_layers(self):
        """The weight matrices that read the network's inputs: ``(weights, columns)`` each, the
        slice of the flat weights it takes (row-major ``(out, in)``) and the group of each input
        column (the same for every column where they are tied)."""
        offsets = [0]
        for shape in self.shapes:
            offsets.append(offsets[-1] + shape.numel())
        layers = []
        for tensor in self.input_tensors:
            start, n_columns = offsets[tensor], self.shapes[tensor][1]
            layers.append((slice(start, offsets[tensor + 1]), self.index[start:start + n_columns]))
        return layers

    def column_layers(self):
        """The groups of each weight matrix whose input columns are groups apart, a tensor ``(C,)``
        each (none where the columns are tied, :meth:`tied`, nor for a matrix of one input column)."""
        layers = (torch.unique(columns) for _, columns in self.input_layers())
        return [columns for columns in layers if len(columns) > 1]

    def as_dict(self, values):
        """``{name: float}`` from one value per group."""
        return {name: float(value) for name, value in zip(self.names, values)}


def exact_structure(n_observations, n_params, dtype, max_full_params=None, n_grams=1):
    """How the evidence takes its log determinant exactly: ``'kernel'`` (fewer
    observations than weights, and the ``n_grams`` Gram matrices (``KernelGrams.count``) within
    ``_MAX_GRAM_BYTES``), ``'full'`` (at most ``max_full_params``, default
    ``_MAX_FULL_PARAMS``, weights whose matrix fits the memory budget), or None
    (factored)."""
    grams_fit = n_grams * n_observations**2 * 8 <= _MAX_GRAM_BYTES  # float64
    if n_observations <= min(n_params, _MAX_KERNEL_ROWS) and grams_fit:
        return "kernel"
    if n_params <= (_MAX_FULL_PARAMS if max_full_params is None else max_full_params) and full_fits(n_params, dtype):
        return "full"
    return None


def jittered_cholesky(matrix, eps, what, why=""):
    """Cholesky factor of a symmetric positive-definite matrix, with the smallest
    diagonal jitter (from ``eps`` times its largest entry, the round-off of the
    precision it was computed in) that lets it pass; a jitter taken warns, naming
    the matrix (``what``) and the likely cause (``why``)."""
    jitter, scale = 0.0, float(matrix.diagonal().abs().max())
    for _ in range(8):
        shifted = matrix if jitter == 0.0 else matrix + jitter * torch.eye(len(matrix), dtype=matrix.dtype,
                                                                          device=matrix.device)
        cholesky, info = torch.linalg.cholesky_ex(shifted)
        if not info:
            if jitter:
                warn(ConvergenceWarning(f"{what} (largest diagonal entry {scale:.3g}) needed a diagonal jitter of "
                                        f"{jitter:.3g} to factorise{why}."))
            return cholesky
        jitter = max(10 * jitter, eps * scale)
    raise torch.linalg.LinAlgError(f"{what} is not positive definite, even with jitter{why}.")


class _KroneckerCurvature(NamedTuple):
    """A GGN's Kronecker factors ``(G, A)`` per layer, in float64, and the
    diagonal curvature of the weights in no layer."""

    layers: list
    factors: list
    rest: torch.Tensor
    rest_curvature: torch.Tensor
    n_params: int

    def eigenbasis(self, prior_root=None):
        """Its eigen decomposition in the weights whitened by ``prior_root`` (per weight, ``p^(1/2)``)."""
        return KroneckerEigenbasis(self.layers, self.factors, self.rest, self.rest_curvature, self.n_params,
                                   prior_root)


def _kronecker_curvature(model, theta, X, Y, likelihood):
    """The GGN of ``model``'s ``nn.Linear`` layers Kronecker-factored (Martens and
    Grosse 2015; for the evidence, Immer et al. 2021), or None for a model with
    no layer to factor, or whose layers the factors refuse (a layer applied
    twice, or to inputs of more than two dimensions): the diagonal then serves.
    Its log determinant, unlike the diagonal's, keeps the correlations within a
    layer: the diagonal's exceeds the full one's (Hadamard's inequality), an
    Occam factor that over-penalises a wide layer, whose learned precision then
    grows until the layer is pruned (docs/evidence.rst)."""
    try:
        if not kronecker_layers(model)[0]:
            return None
        layers, factors, rest, rest_curvature = kronecker_curvature(model, theta, X, Y, likelihood, "ggn")
    except KroneckerUnsupportedError:
        return None
    factors = [(output_factor.double(), input_factor.double()) for output_factor, input_factor in factors]
    return _KroneckerCurvature(layers, factors, rest.to(theta.device), rest_curvature.double(), theta.shape[0])


class _FixedPointRelaxation:
    """MacKay's fixed point, relaxed group by group in the log precisions.

    For one group alone, with ``lambda_i`` the eigenvalues of its curvature,
    the update ``u -> log(gamma(e^u) / ||theta_g||^2)`` has the slope
    ``s = -delta sum_i lambda_i / (lambda_i + delta)^2 / gamma``, within
    ``(-1, 0)``: the plain iteration shrinks the error by ``|s|`` a step,
    and a group the prior rather than the data determines (``gamma`` nearly
    ``1 / delta``, ``s`` nearly -1) swings about its optimum for hundreds of
    steps (the columns of a first layer and of the linear skip that reads the
    same input trade it back and forth). The secant step ``u + (F(u) - u) / (1 - s)``,
    ``s`` estimated from the last two iterates and kept within ``[-1, 0]``, is
    Steffensen's acceleration of the iteration (Aitken's delta-squared
    process, 1926), group by group; it always lands between ``u`` and ``F(u)``,
    so the bounds of the precisions hold. The first step is MacKay's.
    """

    def __init__(self):
        self._previous = None

    def step(self, precision, updated):
        """The next precisions from the current ``precision`` and MacKay's ``updated`` ones."""
        position, target = precision.log(), updated.log()
        previous, self._previous = self._previous, (position, target)
        if previous is None:
            return updated
        moved = position - previous[0]
        movable = moved != 0.0
        slope = torch.where(movable, (target - previous[1]) / torch.where(movable, moved, 1.0), 0.0)
        relaxed = (position + (target - position) / (1.0 - slope.clamp(-1.0, 0.0))).exp()
        return torch.where(updated == precision, precision, relaxed)  # a group held still keeps its bits


class ColumnHyperprior:
    """A Gamma hyperprior on each input column's prior precision, about its layer's mean.

    The evidence maximised over one precision per input column over-fits
    where the columns are many for the rows: columns that correlate with the
    noise by chance keep weak precisions and fit part of it, and the noise
    learned with them falls below the data's: type-II maximum likelihood over
    many relevance hyperparameters over-fits (Qi et al. 2004, "Predictive
    automatic relevance determination by expectation propagation"; Cawley &
    Talbot 2010, "On over-fitting in model selection and subsequent selection
    bias in performance evaluation"). Neal's (1996, "Bayesian Learning for Neural Networks")
    hierarchy for input relevance draws each column's precision from a Gamma
    distribution about a common precision of its layer; here that common
    precision is learned with the rest, so the columns move apart where the
    data say so and are held together where they say little. The shape is
    1/2: the hyperprior then weighs as much as one weight of the column
    would, drawn at the layer's mean precision (one more well-determined
    weight, and its expected square, in the fixed point below).

    With shape ``a`` and mean ``m`` the log density of ``delta_c``, in the log
    precisions the evidence is maximised over, is ``a log delta_c - a delta_c / m``
    up to terms in ``a`` and ``m``; its maximiser in ``m`` is the columns' mean
    precision, where the layer's log density is ``a sum_c log(delta_c / m)``:
    zero when the columns are tied, and the lower the farther they spread. The
    fixed point of the evidence times the hyperprior is MacKay's with ``2 a``
    more well-determined weights and ``2 a / m`` more squared norm per column,
    ``delta_c = (gamma_c + 2 a) / (||theta_c||^2 + 2 a / m)``, with ``m`` the mean
    of these new precisions, not of the current ones: the mean is solved for
    (``gamma`` held, as MacKay's step holds it), so that the layer's common
    scale moves as fast as a tied layer's precision would. With the current
    mean instead, a layer whose weights the data pin at zero crept towards its
    strongest prior by a fixed amount a step. BBB's prior learned from the ELBO
    takes the same fixed point with every weight of a column counted
    (:class:`~sklearn_quinn.variational._engine.EmpiricalBayesPrior`).

    Parameters
    ----------
    groups : ParameterGroups
        The layers whose input columns are groups apart get the hyperprior;
        with the columns tied there is none.
    shape : float, default=None
        The module's ``COLUMN_SHAPE`` where None (read when the hyperprior is made, so that a
        benchmark may set it: benchmarks/bench_column_shape.py).
    device : torch.device, default=None
        Where the precisions the hyperprior reads live.
    """

    def __init__(self, groups, shape=None, device=None):
        self.shape = COLUMN_SHAPE if shape is None else shape
        self.layers = [columns.to(device) for columns in groups.column_layers()]
        # Each layer's last log mean, where the next fixed point starts its Newton steps.
        self._log_means = [None] * len(self.layers)

    def log_density(self, precision):
        """``a sum_c log(delta_c / m)`` summed over the layers, at their mean ``m`` (``precision (G,)``)."""
        return sum(float(self.shape * (precision[columns].log() - precision[columns].mean().log()).sum())
                   for columns in self.layers)

    def fixed_point(self, dof, theta_sq, bounds):
        """The precisions' fixed point from the well-determined weights ``gamma_g`` (``dof``) and the
        squared norm ``theta_sq`` of every group, within ``bounds``."""
        updated = dof / theta_sq
        for layer, columns in enumerate(self.layers):
            count, norm = (dof[columns] + 2 * self.shape).cpu().numpy(), theta_sq[columns].cpu().numpy()
            mean = self._mean(layer, count, norm, bounds)
            updated[columns] = torch.as_tensor(count / (norm + 2 * self.shape / mean)).to(updated)
        return updated.clamp(*bounds)

    def _mean(self, layer, count, norm, bounds):
        """The root ``m`` of ``mean_c count_c / (norm_c + 2 a / m) = m`` within ``bounds``: in ``log m``
        the left side's log less ``log m`` falls (its slope is within ``[-1, 0)``) from
        ``log(mean(count) / (2 a)) > 0``, so there is one root, or none below the upper bound
        (every column's weights at zero: the layer goes to its strongest prior), or it lies below
        the lower bound. Newton's steps from the layer's last root find it in two or three
        evaluations where the precisions moved little since (BBB's prior follows ``q`` step by
        step); Brent's method over the bounds where they do not converge."""
        def new_precisions(log_mean):
            """Each column's precision at the mean ``exp(log_mean)``, and the hyperprior's pull ``2 a / m``."""
            pull = 2 * self.shape * math.exp(-log_mean)
            return count / (norm + pull), pull

        def excess(log_mean):
            return math.log(new_precisions(log_mean)[0].mean()) - log_mean

        low, high = np.log(bounds)
        log_mean = self._log_means[layer]
        for _ in range(_NEWTON_STEPS if log_mean is not None else 0):
            precisions, pull = new_precisions(log_mean)
            slope = (precisions * pull / (norm + pull)).sum() / precisions.sum() - 1.0
            if not slope < 0.0:  # every column's weights at zero: no root below the upper bound
                break
            step = (math.log(precisions.mean()) - log_mean) / slope  # the excess over its slope
            log_mean -= step
            if not low < log_mean < high:
                break
            if abs(step) < _NEWTON_TOLERANCE:
                self._log_means[layer] = log_mean
                return np.exp(log_mean)
        self._log_means[layer] = None
        if excess(high) >= 0.0:
            return bounds[1]
        if excess(low) <= 0.0:
            return bounds[0]
        self._log_means[layer] = brentq(excess, low, high, xtol=1e-12)
        return np.exp(self._log_means[layer])


class LaplaceEvidence:
    """The Laplace log evidence at ``theta`` as a function of the per-group
    prior precisions and the noise scale, and its maximiser (see the module docstring).

    Parameters
    ----------
    model : FunctionalModel
    theta : tensor of shape (K,)
    X, Y : tensor of shape (N, D) and (N, O)
    likelihood : GaussianLikelihood or CategoricalLikelihood
        With the current noise, held fixed (``likelihood.frozen``).
    groups : ParameterGroups
    max_full_params : int, default=None
        The most weights for the full ``K x K`` matrix when the kernel is
        larger; None: ``_MAX_FULL_PARAMS``.
    row_weight : float, default=1.0
        The rows of the table each row of ``X`` stands for, when ``X`` is a
        uniform random subset of them (:mod:`~sklearn_quinn._core.row_subsets`):
        the curvature and the data fit are sums over the rows, so the
        table's are ``row_weight`` times the subset's (in every structure
        the curvature enters as ``G / c**2``, and its weight joins ``1 / c**2``).

    Attributes
    ----------
    structure : {'kernel', 'full', 'kron', 'diag'}
        How the log determinant is taken.
    outputs : tensor of shape (N, O)
        The network's outputs at ``theta``.

    Notes
    -----
    The algebra is float64 whatever the network's dtype: ``G / c**2`` of a
    nearly noise-free fit spans many orders of magnitude.
    """

    def __init__(self, model, theta, X, Y, likelihood, groups, max_full_params=None, row_weight=1.0):
        theta = theta.detach()
        self.groups = groups
        self._value_cholesky = None
        self._row_weight = row_weight
        self._hyperprior = ColumnHyperprior(groups, device=theta.device)
        self._sizes = groups.sizes.double().to(theta.device)
        with torch.no_grad():
            self.outputs = outputs = model.single(theta, X)
            self._data_fit = likelihood.evidence_data_fit(outputs, Y).scaled(row_weight)
            self._theta_sq = groups.sums(theta.double().square())
            self._n_points, self._n_outputs = outputs.shape
            n_params = theta.shape[0]
            self._eps = torch.finfo(theta.dtype).eps
            self.structure = exact_structure(outputs.numel(), n_params, theta.dtype, max_full_params,
                                             KernelGrams.count(groups))
            if self.structure == "kernel":
                factor = likelihood.whitened_jacobian(model.jacobian(theta, X), outputs).reshape(-1, n_params)
                self._grams = KernelGrams(factor.double(), X, groups)
            elif self.structure == "full":
                self._gauss_newton = curvature(model, theta, X, Y, likelihood, "ggn", "full").double()
                self._whitened_rows = lambda rows: likelihood.whitened_jacobian(
                    model.jacobian(theta, X[rows]), outputs[rows]).double()
            else:  # factored
                self._kronecker = _kronecker_curvature(model, theta, X, Y, likelihood)
                self.structure = "diag" if self._kronecker is None else "kron"
                if self._kronecker is None:
                    self._gauss_newton = curvature(model, theta, X, Y, likelihood, "ggn", "diag").double()
                else:
                    self._kronecker_leverage = lambda basis, ratio: kronecker_leverage(
                        model, theta, X, Y, likelihood, basis, ratio)

    def _log_det_and_dof(self, precision, noise_scale, dof=True):
        """``log det(G / c**2 + diag(delta))`` and the well-determined weights ``gamma_g`` of each group
        (None without ``dof``: the kernel's and the full matrix's inverse, two thirds of their cost, is
        then not taken)."""
        self._value_cholesky = None  # a kept factor goes before a new one is taken: never two alive
        data_weight = self._row_weight * noise_scale**-2
        if self.structure == "kernel":
            cholesky = self._kernel_cholesky(precision, data_weight)
            log_det = (self._sizes * precision.log()).sum() + 2 * cholesky.diagonal().log().sum()
            if not dof:
                return log_det, None
            inverse = torch.cholesky_inverse(cholesky)
            return log_det, data_weight / precision * self._grams.traces(inverse)
        per_weight = self.groups.expand(precision)
        if self.structure == "kron":
            return self._kronecker_log_det_and_dof(per_weight, data_weight)
        if self.structure == "diag":
            posterior = data_weight * self._gauss_newton + per_weight
            return posterior.log().sum(), self.groups.sums(data_weight * self._gauss_newton / posterior)
        cholesky = self._full_cholesky(per_weight, data_weight)
        if not dof:
            self._value_cholesky = cholesky  # kept for covariance_block
            return 2 * cholesky.diagonal().log().sum(), None
        variances = torch.cholesky_inverse(cholesky).diagonal()
        return 2 * cholesky.diagonal().log().sum(), self._sizes - precision * self.groups.sums(variances)

    def _kernel_cholesky(self, precision, data_weight):
        """Cholesky factor of the kernel ``I + W diag(delta)^-1 W^T / c**2``."""
        kernel = self._grams.kernel(data_weight / precision)
        kernel.diagonal().add_(1.0)
        return jittered_cholesky(kernel, self._eps, "The evidence's kernel")

    def _full_cholesky(self, per_weight, data_weight):
        """Cholesky factor of the posterior precision ``G / c**2 + diag(delta)``."""
        posterior = self._gauss_newton.mul(data_weight)
        posterior.diagonal().add_(per_weight)  # not ``+ torch.diag(...)``: a second K x K matrix to fill and add
        return jittered_cholesky(posterior, self._eps, "The evidence's posterior precision")

    def _kronecker_log_det_and_dof(self, per_weight, data_weight):
        """The Kronecker-factored ``log det`` and ``gamma_g`` (see ``_kronecker_curvature``).

        A layer's prior precision is constant within each input column of
        ``[W b]``, so in the weights whitened by it, ``p^(-1/2) w``, the
        curvature's eigenvalues are those of ``G (x) A'`` with
        ``A' = R^-1 A R^-1`` (``R`` the columns' root precisions; the weights
        in no layer: ``h / p``), and with ``B = P^(-1/2) Q`` the map from eigen
        coordinates to weights (``KroneckerEigenbasis``) the posterior is
        ``Sigma = B diag(r) B^T``, ``r = 1 / (1 + lambda / c**2)``: its log
        determinant is ``sum log p - sum log r``, and
        ``delta_k Sigma_kk = p_k ((B * B) r)_k``.
        """
        basis = self._kronecker.eigenbasis(per_weight.sqrt())
        ratio = 1.0 / (1.0 + data_weight * basis.eigenvalues.clamp(min=0.0))
        log_det = per_weight.log().sum() - ratio.log().sum()
        return log_det, self._sizes - self.groups.sums(per_weight * basis.squared_apply(ratio))

    def _value(self, precision, noise_scale, log_det):
        fit, _ = self._data_fit(math.log(noise_scale))
        value = -0.5 * (precision * self._theta_sq).sum() + 0.5 * (self._sizes * precision.log()).sum() - 0.5 * log_det
        return float(value) + fit

    def _precision(self, precision):
        """One float64 precision per group ``(G,)`` from ``(G,)`` or a scalar for every group."""
        return torch.as_tensor(precision, dtype=torch.float64, device=self._theta_sq.device).expand(len(self.groups))

    def log_evidence(self, precision, noise_scale=1.0):
        """The Laplace log evidence at prior precisions ``precision`` ((G,) or a scalar) and noise ``c * noise_std``."""
        precision = self._precision(precision)
        log_det, _ = self._log_det_and_dof(precision, noise_scale, dof=False)
        return self._value(precision, noise_scale, log_det)

    def well_determined(self, precision, noise_scale=1.0):
        """``gamma_g``, the weights of each group the data determine (MacKay 1992), shape ``(G,)``,
        at ``precision`` ((G,) or a scalar)."""
        return self._log_det_and_dof(self._precision(precision), noise_scale)[1]

    def leverage(self, precision, noise_scale=1.0):
        """The posterior variance of every whitened output at its training row, ``(N, O)``
        (the diagonal of the hat matrix ``W Sigma W^T``, which sums to ``gamma`` where the
        curvature is exact), at
        ``precision`` ((G,) or a scalar) and the noise ``noise_scale`` times the current one
        (the outputs whitened by it); None for the diagonal
        structure, and for Kronecker factors beside weights in no layer.

        Through the kernel ``C = W diag(delta)^-1 W^T``: ``diag(C (I + C)^-1) = 1 -
        diag((I + C)^-1)``; through the full matrix: the posterior's pushforward of each
        row ``w_n`` of ``W`` (:meth:`GaussianPosterior.project`), the Jacobian recomputed
        in blocks of rows; through the Kronecker factors: each row's Jacobian in their
        eigen coordinates, a layer's outer product of two factors
        (:meth:`~sklearn_quinn._core.kronecker.KroneckerEigenbasis.leverage`), with the
        factored posterior's variances (exact where the factors are: a single layer
        under a Gaussian likelihood).
        """
        precision = self._precision(precision)
        self._value_cholesky = None  # as in _log_det_and_dof
        data_weight = self._row_weight * noise_scale**-2
        if self.structure == "kernel":
            inverse = torch.cholesky_inverse(self._kernel_cholesky(precision, data_weight))
            # diag(C (I + C)^-1) with C the weighted rows' kernel is each row's leverage times its weight.
            return ((1.0 - inverse.diagonal()) / self._row_weight).reshape(self._n_points, -1)
        per_weight = self.groups.expand(precision)
        # Below, the rows are whitened by the current noise: at ``noise_scale`` times it, w^T Sigma w / c**2.
        if self.structure == "kron" and not len(self._kronecker.rest):
            basis = self._kronecker.eigenbasis(per_weight.sqrt())
            ratio = 1.0 / (1.0 + data_weight * basis.eigenvalues.clamp(min=0.0))
            return self._kronecker_leverage(basis, ratio) / noise_scale**2
        if self.structure != "full":
            return None
        posterior = GaussianPosterior.from_precision_cholesky(per_weight.new_zeros(len(per_weight)),
                                                             self._full_cholesky(per_weight, data_weight))
        n_params = len(per_weight)
        block = max(1, _LEVERAGE_BLOCK // (n_params * self._n_outputs))
        leverage = []
        for start in range(0, self._n_points, block):
            rows = self._whitened_rows(slice(start, start + block))
            leverage.append(posterior.project(rows.reshape(-1, n_params)).square().sum(-1).reshape(len(rows), -1))
        return torch.cat(leverage) / noise_scale**2

    def covariance_block(self, index):
        """The posterior covariance ``(k, k)`` of the weights ``index`` at the hyperparameters of the
        last evaluation, where it took the evidence's value alone, from its factor ``L``: ``Z^T Z``
        with ``L Z = E``, ``E`` the identity's columns ``index``. None where the structure is not
        the full matrix, or the last evaluation was not such (the factor is kept until the next
        one, so that no two are alive)."""
        if self._value_cholesky is None:
            return None
        columns = torch.zeros(len(self._value_cholesky), len(index), dtype=torch.float64,
                              device=self._value_cholesky.device)
        columns[index, torch.arange(len(index))] = 1.0
        root = torch.linalg.solve_triangular(self._value_cholesky, columns, upper=False)
        return root.mT @ root

    def _fixed_point_precision(self, precision, dof):
        """MacKay's ``delta_g = gamma_g / ||theta_g||^2`` (an input column's with its hyperprior's
        terms, :meth:`ColumnHyperprior.fixed_point`), except for a group whose weights are zero
        at the network's precision and which the data do not determine: its update is 0 / 0 (its
        terms of the evidence cancel for every ``delta_g``), and rounding would throw it between the
        bounds from one update to the next (a path of the network pruned in training). That group
        keeps ``precision``."""
        undetermined = (dof <= math.sqrt(self._eps)) & (self._theta_sq <= self._eps * self._theta_sq.sum())
        updated = self._hyperprior.fixed_point(dof, self._theta_sq, _PRECISION_BOUNDS)
        return torch.where(undetermined, precision, updated)

    def maximise(self, precision, learn_prior=True, learn_noise=False, max_iterations=None, max_noise_scale=None):
        """The prior precisions and noise scale that maximise the evidence at ``theta``.

        MacKay's fixed-point iteration (relaxed: ``_FixedPointRelaxation``)
        from ``precision`` and the current noise, until the log evidence (times the input
        columns' hyperprior, where there are columns apart: ``ColumnHyperprior``)
        rises by less than ``_TOLERANCE`` nats or after ``max_iterations``
        steps (default: up to ``_MAX_ITERATIONS``);
        what is not learned stays where it is, and so does the noise where the
        well-determined weights leave the residuals less than one degree of
        freedom. The noise scale stays at most ``max_noise_scale`` (default
        ``_NOISE_SCALE_BOUNDS[1]``).

        Returns
        -------
        precision : ndarray of shape (G,)
        noise_scale : float
        log_evidence : float
            The evidence's, without the hyperprior.
        """
        precision = torch.tensor(precision, dtype=torch.float64, device=self._theta_sq.device)
        noise_scale = 1.0
        upper = _NOISE_SCALE_BOUNDS[1] if max_noise_scale is None else max_noise_scale
        log_det, dof = self._log_det_and_dof(precision, noise_scale, dof=learn_prior or learn_noise)
        value = self._value(precision, noise_scale, log_det)
        # The iteration climbs the evidence times the columns' hyperprior; it returns the evidence.
        objective = value + self._hyperprior.log_density(precision)
        relaxation = _FixedPointRelaxation()
        # With nothing to learn, the evidence at the given hyperparameters is the answer.
        steps = (max_iterations or _MAX_ITERATIONS) if learn_prior or learn_noise else 0
        for step in range(steps):
            if learn_prior:
                precision = relaxation.step(precision, self._fixed_point_precision(precision, dof))
            # MacKay's noise is the residuals' variance over the degrees of freedom that the
            # well-determined weights leave. Where they leave less than one (a network that fits
            # nearly every one of a few dozen rows), the residuals cannot tell the noise from the
            # fit, and the noise stays where it is: dividing by one there instead let the noise and
            # the fit drive each other down, to a hundredth of the data's noise, at a lower
            # evidence than the data's noise gives (benchmarks/bench_noise_collapse.py).
            if learn_noise:
                residual_dof = self._data_fit.n_observations - float(dof.sum())
                if residual_dof >= 1.0:
                    noise_scale = math.sqrt(self._data_fit.weighted_sse / residual_dof)
                    noise_scale = min(max(noise_scale, _NOISE_SCALE_BOUNDS[0]), upper)
            # The last step allowed needs the evidence's value, not the well-determined weights that
            # a next step would read: their inverse is two thirds of a step's cost.
            log_det, dof = self._log_det_and_dof(precision, noise_scale, dof=step < steps - 1)
            value = self._value(precision, noise_scale, log_det)
            objective, previous = value + self._hyperprior.log_density(precision), objective
            if objective - previous < _TOLERANCE:
                break
        return precision.cpu().numpy(), noise_scale, value


#: The least fraction of a direction's prior variance the data explain for the output bias's
#: predicted evidence to count it (``output_bias_maximiser``).
_UNINFORMED = 1e-6


def output_bias_maximiser(bias, precision, covariance):
    """The weaker prior precision of a network's output bias that maximises the Laplace evidence
    along the bias's own precision, the other precisions held, and what the evidence gains there
    over ``precision``, predicted from the posterior at ``precision``.

    The log posterior is taken to second order around its mode, where the bias is ``b0`` and its
    posterior covariance ``S``. Moving the bias's precision by ``d`` moves the mode, the fit and
    the log determinant in closed form (the rank of the change is the bias's size ``O``; MacKay
    1992, "Bayesian interpolation", for a linear-Gaussian model, where it is exact): with
    ``S = U diag(s) U^T`` and ``c = U^T b0``, the log evidence gains
    ``sum_i [-d c_i^2 / (1 + d s_i) - log(1 + d s_i)] / 2 + O log(1 + d / precision) / 2``.
    Where the prior pins the bias at zero, the exact evidence of re-converged modes is flat in
    its precision; this says from there where a weaker one would lead. Only weaker: towards a
    stronger prior the network's other weights take over the bias's part as its mode
    re-converges, which the expansion at the mode cannot see, and it overstates the gain.

    Parameters
    ----------
    bias : tensor of shape (O,)
        The bias at the mode.
    precision : float
        The bias's prior precision.
    covariance : tensor of shape (O, O)
        The bias's posterior covariance at the mode (with every weight, or the bias alone:
        :func:`bias_alone_covariance`).

    Returns
    -------
    maximiser, gain : float
        The maximising precision (on a grid of ``2**(1/10)`` steps, at most ``2**20`` times
        weaker), and the log evidence there minus at ``precision``.
    """
    variances, rotation = torch.linalg.eigh(covariance.double())
    # A direction the data do not inform (a posterior variance of the prior's, as a softmax's
    # common shift of every logit) has no term: exactly, the bias is zero along it and its log
    # determinant moves with the prior's. Left in, the polish's last rounding along it would
    # read as a gain without bound as the prior there vanishes.
    informed = 1.0 - precision * variances > _UNINFORMED
    variances, start = variances[informed], (rotation.mT @ bias.double())[informed].square()
    log_precisions = math.log(precision) + math.log(2.0) * torch.linspace(-20.0, 0.0, 201, dtype=torch.float64)
    moved = (log_precisions.exp() - precision).to(variances.device).unsqueeze(-1)
    widened = 1.0 + moved * variances  # above 0: a posterior variance is below the prior's, 1 / precision
    gain = (-moved * start / widened - widened.log()).sum(-1) / 2
    gain = gain + len(variances) / 2 * (log_precisions.to(gain.device) - math.log(precision))
    best = int(gain.argmax())
    return float(log_precisions[best].exp()), float(gain[best])


def bias_alone_covariance(likelihood, outputs, precision):
    """The posterior covariance ``(O, O)`` of a network's output bias at the mode, the other
    weights held: ``(H + precision I)^-1``, ``H`` the GGN summed over the rows (the bias's
    Jacobian is the identity).

    Parameters
    ----------
    likelihood : the likelihood (its ``whitened_jacobian``)
    outputs : tensor of shape (N, O)
        The network's outputs on the training rows.
    precision : float
    """
    whitened = output_whitening(likelihood, outputs.double())
    curvature = torch.einsum("nro,nrp->op", whitened, whitened)
    return torch.linalg.inv(curvature + precision * torch.eye(len(curvature), dtype=curvature.dtype,
                                                               device=curvature.device))
