"""Gamma hyperpriors on the prior precisions and the noise precision, and their Gibbs updates.

With hyperpriors a sampler's state row is

    ``[theta (K) | log noise std (1, when the noise is sampled) | log prior precisions (G)
    | log layer means (L)]``

under the hierarchical model of Neal (1996), "Bayesian Learning for Neural
Networks": one prior precision ``delta_g`` per group of weights (each named
parameter tensor: a layer's weights, a layer's biases; each input column of
a weight matrix that reads the inputs, where the groups keep them apart),
``theta_g | delta_g ~ N(0, I / delta_g)``, ``delta_g ~ Gamma(shape, rate)``,
and for a Gaussian likelihood with a sampled noise ``tau = 1 / noise_std**2
~ Gamma(shape, rate)``. An input column's precision is drawn about its
layer's mean precision ``m_l`` instead, as in Neal's hierarchy for input
relevance: ``delta_c | m_l ~ Gamma(A, rate A / m_l)`` (mean ``m_l``; ``A``
is the evidence's ``COLUMN_SHAPE``), and ``m_l ~ Gamma(shape, rate)``, the
hyperprior a layer's tied precision has: as ``A`` grows the columns tie to
``m_l`` and the prior is the tied one. (A Gamma hyperprior on ``1 / m_l``
would be conjugate, but its heavy tail towards large ``m_l`` gives a mode
where every column's weights and ``1 / m_l`` shrink to zero together and the
noise explains the targets; Gibbs chains that enter it do not leave.)

The conditionals of the precisions and the noise are Gamma (the
hyperpriors are conjugate), so they are drawn exactly given the weights,
batched over rows: at likelihood temperature ``beta`` (SMC's tempering; 1
for MCMC)

    ``delta_g | theta ~ Gamma(shape + K_g / 2, rate + ||theta_g||^2 / 2)``,
    ``delta_c | theta, m_l ~ Gamma(A + K_c / 2, A / m_l + ||theta_c||^2 / 2)``,
    ``tau | theta, y ~ Gamma(shape + beta N O / 2, rate + beta SSE(theta) / 2)``,

and a layer's mean given its columns' precisions, drawn first, is a
generalized inverse Gaussian, density ``m**(shape - C A - 1) exp(-rate m -
A sum_c delta_c / m)`` over the layer's ``C`` columns
(:func:`log_generalized_inverse_gaussian`).

With several outputs ``noise_std`` is the noisiest output's, the others held
in fixed ratios to it, and SSE counts each output's residuals over its ratio
(``GaussianStateLikelihood``'s ``noise_ratio``).

The state keeps logs so that its columns are unconstrained, and the prior
density here is over those columns (with the Jacobians), normalised: SMC's
evidence is then ``p(y | X)`` with the hyperparameters integrated out.

The gradient kernels move ``theta`` given the hyperparameter columns and never
the columns themselves; after a Gibbs draw the kernel's cached log density and
gradient are brought to the new hyperparameters by :meth:`HyperparameterGibbs.rescore`,
exactly and without a gradient evaluation (the prior is closed-form and the
likelihood's gradient scales with ``tau``).
"""

import math
from typing import NamedTuple

import torch

from . import evidence
from .rng import standard_normal, standard_uniform

_LOG_2PI = math.log(2 * math.pi)
# Newton's steps that bring each edge of the generalized inverse Gaussian's flat envelope
# from where its log density has fallen by at least 1 towards where it has fallen by 1.
_EDGE_NEWTON_STEPS = 4


def standard_gamma(shape, generator=None):
    """``Gamma(shape, 1)`` draws, one per element of the tensor ``shape`` (> 0).

    Marsaglia & Tsang (2000), "A simple method for generating gamma
    variables", batched: every round draws a normal and a uniform for every
    element and keeps the first acceptance of each (above 95% per round), so a
    seeded generator gives the same draws anywhere. A shape below 1 is boosted,
    ``Gamma(a) = Gamma(a + 1) U**(1 / a)``. Draws are at least the dtype's
    smallest normal number, so that their logs are finite.
    """
    boosted = shape < 1
    alpha = torch.where(boosted, shape + 1, shape)
    d = alpha - 1.0 / 3.0
    c = torch.rsqrt(9 * d)
    draws = torch.zeros_like(alpha)
    pending = torch.ones_like(alpha, dtype=torch.bool)
    tiny = torch.finfo(alpha.dtype).tiny
    while bool(pending.any()):
        x = standard_normal(generator, alpha)
        u = standard_uniform(generator, alpha)
        v = (1 + c * x) ** 3
        accept = (v > 0) & (torch.log(u) < 0.5 * x.square() + d - d * v + d * torch.log(v.clamp(min=tiny)))
        take = pending & accept
        draws = torch.where(take, d * v, draws)
        pending = pending & ~take
    if bool(boosted.any()):
        u = standard_uniform(generator, alpha)
        draws = torch.where(boosted, draws * torch.exp(torch.log(u.clamp(min=tiny)) / shape), draws)
    return draws.clamp(min=tiny)


def log_generalized_inverse_gaussian(order, rate, scale, generator=None):
    """Draws of ``log x``, one per element of the tensor ``scale``, where ``x`` has the
    density ``x**(order - 1) exp(-rate x - scale / x)`` up to its normaliser (a generalized
    inverse Gaussian; ``order`` a float or a tensor like ``scale``, ``rate > 0``, ``scale > 0``).

    Exact rejection sampling in ``u = log x``, whose log density ``g(u) = order u - rate e^u -
    scale e^-u`` is concave, from the envelope of a log-concave density (Devroye 1986,
    "Non-Uniform Random Variate Generation", chapter VII): flat at the mode's density between a
    point on each side where ``g`` has fallen by at least 1, and beyond them the exponentials of
    ``g``'s tangents there, which bound it by concavity. Its acceptance does not fall with the
    parameters (about three quarters for a normal density). Each point starts one step of the
    mode's curvature (at most 1) from the mode, doubles its distance until ``g`` has fallen by 1, and
    then takes Newton's steps back towards where it falls by exactly 1 (from outside, on a
    concave function, they stay outside). Every round draws for every element and keeps each
    one's first acceptance, as :func:`standard_gamma`.
    """
    order = torch.as_tensor(order, dtype=scale.dtype, device=scale.device).expand_as(scale)

    def log_density(u):
        return order * u - rate * torch.exp(u) - scale * torch.exp(-u)

    def slope(u):
        return order - rate * torch.exp(u) + scale * torch.exp(-u)

    root = torch.sqrt(order.square() + 4 * rate * scale)
    # The mode x* = (order + root) / (2 rate), written without cancellation for either sign of order.
    mode = torch.where(order < 0, 2 * scale / (root - order), (order + root) / (2 * rate))
    log_mode = torch.log(mode)
    peak = log_density(log_mode)
    # Both edges at once, the right one first along a new leading dimension.
    side = torch.tensor([1.0, -1.0], dtype=scale.dtype, device=scale.device).reshape(2, *[1] * scale.ndim)
    # At most 1: a first step far beyond the edge could reach where exp overflows, and the
    # doubling finds a wider density's edge in a few steps.
    step = side * torch.rsqrt(rate * mode + scale / mode).clamp(max=1.0)
    edge = log_mode + step
    while bool((short := log_density(edge) > peak - 1).any()):
        step = torch.where(short, 2 * step, step)
        edge = log_mode + step
    for _ in range(_EDGE_NEWTON_STEPS):
        edge = edge - (log_density(edge) - peak + 1) / slope(edge)
    (right, left), (right_drop, left_drop), (right_slope, left_slope) = edge, log_density(edge) - peak, slope(edge)
    left_mass, flat_mass = torch.exp(left_drop) / left_slope, right - left
    total = left_mass + flat_mass + torch.exp(right_drop) / -right_slope

    draws = torch.zeros_like(scale)
    pending = torch.ones_like(scale, dtype=torch.bool)
    while bool(pending.any()):
        position = standard_uniform(generator, scale) * total
        exponential = -torch.log(standard_uniform(generator, scale))
        in_left = position < left_mass
        in_flat = ~in_left & (position < left_mass + flat_mass)
        u = torch.where(in_left, left - exponential / left_slope,
                        torch.where(in_flat, left + position - left_mass, right - exponential / right_slope))
        envelope = torch.where(in_flat, torch.zeros_like(u), torch.where(in_left, left_drop, right_drop) - exponential)
        accept = torch.log(standard_uniform(generator, scale)) < log_density(u) - peak - envelope
        take = pending & accept
        draws = torch.where(take, u, draws)
        pending = pending & ~take
    return draws


class GammaHyperprior(NamedTuple):
    """``Gamma(shape, rate)`` on a precision: density ``rate**shape / Gamma(shape) x**(shape - 1) exp(-rate x)``."""

    shape: float
    rate: float

    def log_prob_of_log(self, log_precision):
        """The log density of ``log x`` (the Gamma density times the Jacobian ``x``)."""
        return (
            self.shape * math.log(self.rate)
            - math.lgamma(self.shape)
            + self.shape * log_precision
            - self.rate * torch.exp(log_precision)
        )

    def sample(self, size, generator=None, dtype=torch.float64, device="cpu"):
        """Draws of ``x`` of shape ``size``."""
        shape = torch.full(size, self.shape, dtype=dtype, device=device)
        return standard_gamma(shape, generator) / self.rate


class HierarchicalPrior:
    """The prior over state rows ``[theta | log noise std | log prior precisions | log layer
    means]`` (see the module docstring), normalised in those coordinates.

    Parameters
    ----------
    groups : ParameterGroups
        The groups of ``theta`` that share a precision; the input columns of a layer that are
        groups apart (:meth:`ParameterGroups.column_layers`) are drawn about their layer's mean.
    hyperprior : GammaHyperprior
        On every prior precision, on every layer's mean precision and on the noise precision.
    noise : bool, default=False
        Whether the rows carry a log noise std (a Gaussian likelihood's sampled noise).
    column_shape : float, default=None
        ``A``, the shape of an input column's precision about its layer's mean: the evidence's
        ``COLUMN_SHAPE`` (:class:`~sklearn_quinn._core.evidence.ColumnHyperprior`) where None.
    """

    def __init__(self, groups, hyperprior, noise=False, column_shape=None):
        self.groups, self.hyperprior, self.noise = groups, hyperprior, bool(noise)
        self.column_shape = evidence.COLUMN_SHAPE if column_shape is None else column_shape
        self.n_params = int(groups.sizes.sum())
        self.n_groups = len(groups)
        layers = groups.column_layers()
        self.n_layers = len(layers)
        #: The input columns' groups ``(Gc,)``, and the layer of each ``(Gc,)``.
        self.column_groups = torch.cat([torch.zeros(0, dtype=torch.long), *layers])
        #: The number of input columns of each layer ``(L,)``.
        self.layer_sizes = torch.tensor([len(columns) for columns in layers], dtype=torch.long)
        self.column_layer = torch.repeat_interleave(torch.arange(self.n_layers), self.layer_sizes)
        #: Columns after the weights: the log noise std (when sampled), the log precisions, the log layer means.
        self.n_hyperparameters = self.noise + self.n_groups + self.n_layers
        self.n_columns = self.n_params + self.n_hyperparameters

    # ---------------------------------------------------------------- layout
    def split(self, rows):
        """``theta (C, K)``, ``log noise std (C,)`` or None, ``log precisions (C, G)``, ``log layer
        means (C, L)``."""
        theta = rows[:, : self.n_params]
        log_noise = rows[:, self.n_params] if self.noise else None
        first = self.n_params + self.noise
        return theta, log_noise, rows[:, first : first + self.n_groups], rows[:, first + self.n_groups :]

    def join(self, theta, log_noise, log_precision, log_mean):
        """State rows from their parts (the inverse of :meth:`split`)."""
        parts = [theta] + ([log_noise[:, None]] if self.noise else []) + [log_precision, log_mean]
        return torch.cat(parts, dim=1)

    def per_weight(self, values):
        """One value per row and group ``(C, G)`` to one per row and weight ``(C, K)``."""
        return values[:, self.groups.index.to(values.device)]

    def squares(self, theta):
        """``||theta_g||^2`` per row and group, ``(C, G)``."""
        index = self.groups.index.to(theta.device)
        return theta.new_zeros(theta.shape[0], self.n_groups).index_add_(1, index, theta.square())

    def group_gammas(self, log_mean):
        """The Gamma prior of each group's precision given the layers' log means ``(C, L)``:
        shapes ``(G,)`` and rates ``(C, G)``."""
        shape, rate = self.hyperprior
        shapes = log_mean.new_full((self.n_groups,), shape)
        rates = log_mean.new_full((log_mean.shape[0], self.n_groups), rate)
        columns = self.column_groups.to(log_mean.device)
        shapes[columns] = self.column_shape
        rates[:, columns] = self.column_shape * torch.exp(-log_mean[:, self.column_layer.to(log_mean.device)])
        return shapes, rates

    def layer_sums(self, values):
        """Sums of per-group ``values (C, G)`` over each layer's columns, ``(C, L)``."""
        columns, layer = self.column_groups.to(values.device), self.column_layer.to(values.device)
        return values.new_zeros(values.shape[0], self.n_layers).index_add_(1, layer, values[:, columns])

    # --------------------------------------------------------------- density
    def __call__(self, rows):
        return self._value(rows)[0]

    def _value(self, rows):
        """The log density of each row ``(C,)``, and the parts its gradient reuses."""
        theta, log_noise, log_precision, log_mean = parts = self.split(rows)
        precision = torch.exp(log_precision)
        sizes = self.groups.sizes.to(device=rows.device, dtype=rows.dtype)
        squares = self.squares(theta)
        shapes, rates = self.group_gammas(log_mean)
        value = (
            -0.5 * (precision * squares).sum(-1)
            + 0.5 * (sizes * log_precision).sum(-1)
            - 0.5 * self.n_params * _LOG_2PI
            + (shapes * (torch.log(rates) + log_precision) - torch.lgamma(shapes) - rates * precision).sum(-1)
            + self.hyperprior.log_prob_of_log(log_mean).sum(-1)
        )
        if self.noise:
            # The noise precision tau = exp(-2 log_noise): its log density, with the Jacobian 2 tau.
            value = value + self.hyperprior.log_prob_of_log(-2 * log_noise) + math.log(2)
        return value, parts, (precision, sizes, squares, shapes, rates)

    def value_and_grad(self, rows):
        """The log density of each row ``(C,)`` and its gradient ``(C, P)``, in closed form."""
        value, parts, (precision, sizes, squares, shapes, rates) = self._value(rows)
        theta, log_noise, log_precision, log_mean = parts
        hyperprior = self.hyperprior
        d_theta = self._weight_gradient(theta, precision)
        d_log_precision = -0.5 * precision * squares + 0.5 * sizes + shapes - rates * precision
        # A column's rate is A / m_l: its term moves with log m_l by -A + rate delta_c.
        d_log_mean = self.layer_sums(rates * precision - shapes) + hyperprior.shape - hyperprior.rate * log_mean.exp()
        d_log_noise = []
        if self.noise:
            d_log_noise = [(-2 * (hyperprior.shape - hyperprior.rate * torch.exp(-2 * log_noise)))[:, None]]
        return value, torch.cat([d_theta, *d_log_noise, d_log_precision, d_log_mean], dim=1)

    def weight_gradient(self, rows):
        """The gradient in ``theta`` alone, ``-delta_g theta_g`` ``(C, K)``."""
        theta, _, log_precision, _ = self.split(rows)
        return self._weight_gradient(theta, torch.exp(log_precision))

    def _weight_gradient(self, theta, precision):
        return -self.per_weight(precision) * theta

    def given_hyperparameters(self):
        """This prior as a density of the weights, the hyperparameter columns held at those of
        :meth:`HeldHyperparameters.hold`."""
        return HeldHyperparameters(self)

    def sample(self, n, generator=None, dtype=torch.float64, device="cpu"):
        """``n`` rows from the prior: layer means, precisions given them, weights given those,
        then the noise; ``(n, P)``."""
        log_mean = torch.log(self.hyperprior.sample((n, self.n_layers), generator, dtype, device))
        shapes, rates = self.group_gammas(log_mean)
        precision = standard_gamma(shapes.expand(n, -1), generator) / rates
        z = torch.randn(n, self.n_params, generator=generator, dtype=dtype, device=device)
        theta = z * torch.rsqrt(self.per_weight(precision))
        log_noise = None
        if self.noise:
            log_noise = -0.5 * torch.log(self.hyperprior.sample((n,), generator, dtype, device))
        return self.join(theta, log_noise, torch.log(precision), log_mean)

    def draw_log_means(self, generator, log_precision):
        """The layers' log means ``(C, L)`` drawn given the columns' log precisions ``(C, G)``."""
        shape, rate = self.hyperprior
        order = shape - self.column_shape * self.layer_sizes.to(log_precision)
        scale = self.column_shape * self.layer_sums(torch.exp(log_precision))
        return log_generalized_inverse_gaussian(order, rate, scale, generator)


class HeldHyperparameters:
    """A :class:`HierarchicalPrior` over rows whose hyperparameter columns are those held by
    :meth:`hold`: ``-1/2 sum_k delta_k theta_k^2`` plus the terms they alone set, computed once
    per hold, so that a kernel's evaluations between two Gibbs draws pay for the weights' terms
    alone. Rows may be fewer than held: the leading ones (see
    :class:`~sklearn_quinn.mcmc._gibbs.ConditionalDensity`).
    """

    def __init__(self, prior):
        self.prior = prior
        self.precision = self.terms = None  # (C, K) and (C,)

    def hold(self, rows):
        """Hold the hyperparameter columns of ``rows (C, P)`` (in place where the shapes
        repeat: a compiled kernel keeps reading the same tensors)."""
        value, _, (precision, _, squares, _, _) = self.prior._value(rows)
        terms = value + 0.5 * (precision * squares).sum(-1)  # what the hyperparameters alone contribute
        per_weight = self.prior.per_weight(precision)
        if self.terms is not None and self.terms.shape == terms.shape:
            self.precision.copy_(per_weight)
            self.terms.copy_(terms)
        else:
            self.precision, self.terms = per_weight, terms

    def select(self, index):
        """This prior over the held rows ``index``."""
        selected = HeldHyperparameters(self.prior)
        selected.precision, selected.terms = self.precision[index], self.terms[index]
        return selected

    def __call__(self, rows):
        return self.value_and_grad(rows)[0]

    def value_and_grad(self, rows):
        """The value and the gradient: in the weights, ``-delta_k theta_k``; zero in the held
        columns, which the kernels never move (the Gibbs draws do)."""
        theta = rows[:, : self.prior.n_params]
        precision = self.precision[: len(rows)]
        value = -0.5 * (precision * theta.square()).sum(-1) + self.terms[: len(rows)]
        return value, torch.nn.functional.pad(-precision * theta, (0, self.prior.n_hyperparameters))


class Statistics(NamedTuple):
    """What the conditionals of the hyperparameters depend on, per row."""

    squares: torch.Tensor  # (C, G), ||theta_g||^2
    sum_of_squares: torch.Tensor | None  # (C,), the residual sum of squares; None without a sampled noise


class HyperparameterGibbs:
    """Exact draws of the hyperparameter columns of state rows given their weights.

    Parameters
    ----------
    prior : HierarchicalPrior
    log_likelihood : GaussianStateLikelihood, optional
        Gives the residual sums of squares (and ``Y``); needed when the rows
        carry a sampled noise.
    """

    def __init__(self, prior, log_likelihood=None):
        if prior.noise and log_likelihood is None:
            raise ValueError("A sampled noise needs the Gaussian likelihood, for its residuals.")
        self.prior = prior
        self.log_likelihood = log_likelihood if prior.noise else None
        #: The leading columns of a row (the weights), which the updates condition on.
        self.n_params = prior.n_params

    def statistics(self, theta):
        """:class:`Statistics` of weight rows ``(C, K)``: one forward pass when the noise is sampled."""
        sum_of_squares = None
        if self.log_likelihood is not None:
            sum_of_squares = self.log_likelihood.sum_of_squares(theta)
        return Statistics(self.prior.squares(theta), sum_of_squares)

    def draw(self, generator, rows, statistics, temperature=1.0):
        """The rows with their hyperparameter columns drawn from the conditionals
        (see the module docstring) at likelihood temperature ``temperature``."""
        prior = self.prior
        shape, rate = prior.hyperprior
        theta, log_noise, log_precision, log_mean = prior.split(rows)
        if prior.n_layers:
            log_mean = prior.draw_log_means(generator, log_precision)
        shapes, rates = prior.group_gammas(log_mean)
        sizes = prior.groups.sizes.to(device=rows.device, dtype=rows.dtype)
        precision = standard_gamma((shapes + 0.5 * sizes).expand(len(rows), -1), generator)
        precision = precision / (rates + 0.5 * statistics.squares)
        if prior.noise:
            n_observations = self.log_likelihood.Y.numel()
            tau = standard_gamma(torch.full_like(log_noise, shape + 0.5 * temperature * n_observations), generator)
            tau = tau / (rate + 0.5 * temperature * statistics.sum_of_squares)
            log_noise = -0.5 * torch.log(tau)
        return prior.join(theta, log_noise, torch.log(precision), log_mean)

    def rescore(self, rows, new_rows, statistics, temperature, value, gradient=None):
        """A kernel's cached log density (and gradient in ``theta``) at ``rows``
        brought to ``new_rows``, which differ only in their hyperparameters.

        The cached density is ``log prior(row) + temperature * log p(y | theta,
        noise)``: the prior part is recomputed in closed form, the likelihood
        part changes with the noise only, by ``-N O log(s'/s) - (tau' - tau)
        SSE / 2`` in value and the factor ``tau' / tau`` in gradient.

        Returns
        -------
        value : tensor of shape (C,)
        gradient : tensor of shape (C, K), or None when ``gradient`` is None
        """
        n_params = self.prior.n_params
        old_prior, new_prior = self.prior(rows), self.prior(new_rows)
        likelihood_value = value - old_prior
        if gradient is not None:
            likelihood_gradient = gradient - self.prior.weight_gradient(rows)
        if self.prior.noise:
            old_log_noise, new_log_noise = rows[:, n_params], new_rows[:, n_params]
            old_tau, new_tau = torch.exp(-2 * old_log_noise), torch.exp(-2 * new_log_noise)
            tau_ratio = torch.exp(-2 * (new_log_noise - old_log_noise))
            n_observations = self.log_likelihood.Y.numel()
            change = -n_observations * (new_log_noise - old_log_noise)
            change = change - 0.5 * (new_tau - old_tau) * statistics.sum_of_squares
            likelihood_value = likelihood_value + temperature * change
            if gradient is not None:
                likelihood_gradient = likelihood_gradient * tau_ratio[:, None]
        new_value = new_prior + likelihood_value
        if gradient is None:
            return new_value, None
        return new_value, self.prior.weight_gradient(new_rows) + likelihood_gradient
