"""Likelihoods: everything that depends on the task, one class each.

Targets are always a float tensor ``(..., N, O)``: the values for regression,
one column of class indices for classification. A likelihood gives

- ``log_prob(outputs, y)``: the log density of each point, ``(..., N)``, for
  network outputs ``(..., N, O)`` (logits ``(..., N, C)``) with any leading
  batch axes (members, weight draws): the training loss;
- ``output_gradient`` and ``whitened_jacobian``: the gradient of
  ``-log p(y_n | f_n)`` in the outputs, and a factor ``S_n`` of its output
  Hessian ``Lambda_n = S_n^T S_n``, so that the generalised Gauss-Newton is
  ``sum_n (S_n J_n)^T (S_n J_n)``: the curvature;
- ``evidence_data_fit``: ``log p(D | theta*)`` as a function of a noise scale,
  for the Laplace evidence;
- ``state_log_likelihood``: the log likelihood over rows of a sampler's state
  (the weights, then any likelihood parameter that is sampled), with its
  gradient from the model's vector-Jacobian product, for MCMC and SMC.

A new likelihood is one more class with these methods.
"""

import copy
import math
from typing import NamedTuple

import torch
from torch import nn

from .compiling import compiled_or_eager
from .rng import standard_normal, standard_uniform

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
# The heteroscedastic noise head's log std is clipped to this bound either way (in
# the network's units, where the standardised target has std 1; exp(-10) = 5e-5):
# beyond any noise a table has, it keeps exp(-log_std) finite where an untrained
# network on unscaled inputs (values near 100) outputs log stds in the hundreds, and
# the curvature (which scales as 1 / sigma**2) within float64's reach where the mean
# interpolates a few rows and their noise collapses.
LOG_STD_BOUND = 10.0
# Beyond the bound the clip keeps this slope, as a leaky rectifier keeps one below zero
# (Maas, Hannun & Ng 2013, "Rectifier nonlinearities improve neural network acoustic
# models"). A flat clip is a trap: a row whose log std a training step throws past the
# bound gets no gradient in it, and its mean's gradient (y - mu) / sigma**2 vanishes
# with it, so nothing brings it back; a whole ensemble member was lost that way on UCI
# naval. The slope lets the training return the row, and a log std of 1000 still
# reads as 19.9.
_LOG_STD_LEAK = 0.01
# The variance that a target's noise must cover beside its residual and its mean's
# posterior variance in a MAP training (HeteroscedasticGaussianLikelihood.training_targets):
# the targets are read as known to within exp(-9), 1.2e-4 of the standardised target's
# spread, a noise one unit of log std inside the clip's bound. A target fitted exactly (a
# constant one, or one without noise) otherwise drives its log std down past the bound, on
# the leaky slope, where the noise head's curvature is 1e-4 of its own: the Laplace
# posterior of the head's weights falls back to their prior, whose spread the exponential
# link turns into absurd predictive stds (docs/heteroscedastic.rst, "Targets fitted
# exactly"), and the samplers' chains start from there. At this floor the head stays on the
# unit slope, where the data pin it; a noise above it hardly feels it. A floor under the
# variance is the heteroscedastic networks' usual guard (Lakshminarayanan, Pritzel & Blundell
# 2017, "Simple and scalable predictive uncertainty estimation using deep ensembles", add a
# minimum variance to theirs), as a nugget is a Gaussian process's on deterministic targets
# (Gramacy & Lee 2012, "Cases for the nugget in modeling computer experiments").
_RESOLUTION_VARIANCE = math.exp(-2 * (LOG_STD_BOUND - 1.0))


def _clip_log_std(log_std):
    """The log noise std the heteroscedastic likelihood reads from its head's output:
    the output within ``±LOG_STD_BOUND``, and beyond it at slope ``_LOG_STD_LEAK``."""
    clipped = log_std.clamp(-LOG_STD_BOUND, LOG_STD_BOUND)
    return clipped + _LOG_STD_LEAK * (log_std - clipped)


def _log1mexp(x):
    """``log(1 - exp(x))`` for ``x <= 0``, accurate at both ends: through ``expm1`` near 0 and
    ``log1p`` below ``-log 2`` (Maechler 2012, "Accurately computing log(1 - exp(-|a|))")."""
    near_zero = x > -math.log(2.0)
    return torch.where(near_zero, torch.log(-torch.expm1(x.clamp(min=-math.log(2.0)))),
                       torch.log1p(-torch.exp(x.clamp(max=-math.log(2.0)))))


def _log_normal_mass(lower, upper):
    """``log(Phi(upper) - Phi(lower))`` elementwise, for ``lower <= upper``: in the upper
    tail as ``log(Phi(-lower) - Phi(-upper))``, so that neither tail rounds to ``log(0)``."""
    flip = lower > 0
    low, high = torch.where(flip, -upper, lower), torch.where(flip, -lower, upper)
    log_high, log_low = torch.special.log_ndtr(high), torch.special.log_ndtr(low)
    empty = log_high == -math.inf  # no mass: low and high both at -inf
    return torch.where(empty, log_high, log_high + _log1mexp(torch.where(empty, -1.0, log_low - log_high)))


def _log_expected_exp_of_clipped(mean, variance, c):
    """``log E[exp(c h(s))]`` for ``s ~ N(mean, variance)`` elementwise, ``h`` the clip of
    :func:`_clip_log_std`. On each of its three linear pieces ``a + b s`` over ``(l, u)`` the
    expectation is a truncated normal's moment generating function (Johnson, Kotz &
    Balakrishnan 1994, "Continuous univariate distributions", vol. 1, ch. 13),
    ``exp(c a + c b m + (c b)**2 v / 2)`` times the normal mass of ``(l, u)`` about ``m + c b v``.
    Exact for a Gaussian ``s`` (a linearised network's), and finite where ``E[exp(c s)] = exp(c m
    + c**2 v / 2)`` of the unclipped output overflows far from the data: there the clip's slope,
    not the output's, sets the noise. A piece without mass adds nothing, even where its moment
    overflows (an infinite ``v``): the sum is then infinite, never NaN."""
    std = variance.sqrt().clamp_min(torch.finfo(mean.dtype).tiny)
    bound, leak = LOG_STD_BOUND, _LOG_STD_LEAK
    pieces = ((0.0, 1.0, -bound, bound), (bound * (1 - leak), leak, bound, math.inf),
              (-bound * (1 - leak), leak, -math.inf, -bound))
    terms = []
    for offset, slope, lower, upper in pieces:
        shift = c * slope * variance  # the bounds' distances from the mean, less this, keep float32's digits
        log_mass = _log_normal_mass(((lower - mean) - shift) / std, ((upper - mean) - shift) / std)
        moment = c * (offset + slope * mean) + 0.5 * (c * slope) ** 2 * variance
        terms.append(torch.where(log_mass == -math.inf, log_mass, moment + log_mass))
    return torch.where(variance == math.inf, variance, torch.logsumexp(torch.stack(terms), dim=0))


class GaussianLikelihood(nn.Module):
    """``N(y | f, noise_std**2)`` per output, with a fixed or trained noise.

    Parameters
    ----------
    noise_std : tensor of shape (..., O)
        Fixed noise, or the start of the trained one; leading axes broadcast
        against the outputs' (e.g. ``(J, 1, O)`` for one noise per member).
    learn_noise : bool, default=False
        Train the log noise std of every output (and leading index) with the
        network. The samplers then sample one scale of them, the last column
        of their state, keeping the trained ratios between the outputs.
    """

    #: The curvature in the outputs, ``1 / noise_std**2``, does not depend on them.
    curvature_varies_with_outputs = False
    #: Nor does it vanish anywhere: the data misfit is quadratic in the outputs.
    curvature_vanishes_with_confidence = False
    #: MacKay's noise update already counts the weights the means take (``SSE / (N - gamma)``).
    fits_mean_variance = False
    #: The output bias is the targets' mean, near zero on standardised targets.
    output_bias_sets_frequencies = False

    def __init__(self, noise_std, learn_noise=False):
        super().__init__()
        log_noise = torch.log(noise_std)
        self.learn_noise = learn_noise
        if learn_noise:
            self.log_noise_std = nn.Parameter(log_noise)
        else:
            self.register_buffer("log_noise_std", log_noise)

    @property
    def noise_std(self):
        """The current noise std (detached), shaped like ``noise_std``."""
        return self.log_noise_std.detach().exp()

    @staticmethod
    def n_network_outputs(n_targets):
        """The network's outputs for ``n_targets``: one mean each."""
        return n_targets

    @staticmethod
    def split(outputs, noise_std):
        """The means ``(..., N, O)`` and noise stds from outputs ``(..., N, O)`` and the homoscedastic
        ``noise_std``: the outputs and that noise (the interface of
        :meth:`HeteroscedasticGaussianLikelihood.split`)."""
        return outputs, noise_std

    @staticmethod
    def predictive(outputs, noise_std):
        """The distribution of the means (the outputs') and the noise variance ``(N, O)``
        (the interface of :meth:`HeteroscedasticGaussianLikelihood.predictive`)."""
        return outputs, noise_std.square().expand_as(outputs.mean)

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

    def output_noise_std(self, n_outputs):
        """The noise std of each output, ``(O,)``."""
        return self.noise_std.reshape(-1).expand(n_outputs)

    def member_noise_std(self, n_outputs):
        """The noise std ``(J, O)`` of each member, for a noise of shape ``(J, 1, O)``."""
        return self.noise_std[:, 0, :].expand(-1, n_outputs)

    def frozen(self, n_outputs):
        """A likelihood with the current noise, one per output, held fixed."""
        return GaussianLikelihood(self.output_noise_std(n_outputs))

    # ------------------------------------------------------------ curvature
    def output_gradient(self, outputs, y):
        """``d(-log p(y | f)) / df`` per point, shape ``(N, O)``."""
        return (outputs - y) / self.noise_std.square()

    def whitened_jacobian(self, jacobian, outputs):
        """``S_n J_n`` for per-point Jacobians ``(N, O, K)``, with ``S = diag(1 / noise_std)``."""
        return jacobian / self.noise_std.reshape(-1)[:, None]

    def evidence_data_fit(self, outputs, y):
        """``log p(D | theta*)`` at noise ``c * noise_std``, as a function of ``log c``.

        Returns
        -------
        data_fit : callable ``log_c -> (value, d value / d log_c)``
        """
        noise_std = self.noise_std.reshape(-1)
        return GaussianDataFit(
            weighted_sse=float(((outputs - y) / noise_std).square().sum()),
            n_observations=y.numel(),
            log_noise_total=float(torch.log(noise_std).sum()) * y.shape[0],
        )

    # ------------------------------------------------------------- samplers
    @property
    def n_state_columns(self):
        """Columns the likelihood adds to a sampler's state: the log noise std when it is learned."""
        return 1 if self.learn_noise else 0

    def state_log_likelihood(self, model, X, Y):
        """The log likelihood over state rows (see :class:`GaussianStateLikelihood`)."""
        if self.learn_noise:
            return GaussianStateLikelihood(model, X, Y, noise_ratio=self._noise_ratio(Y.shape[1]))
        return GaussianStateLikelihood(model, X, Y, self.output_noise_std(Y.shape[1]))

    def _log_noise_scale(self):
        """The log of the noise's scale, the noisiest output's noise std: a hyperprior on the
        scale then bounds every output's noise, and no near-exact output drags it to zero."""
        return torch.log(self.noise_std).max()

    def _noise_ratio(self, n_outputs):
        """Each output's noise std over the scale ``(O,)`` (at most 1), or None for one output."""
        if n_outputs == 1:
            return None
        return (self.log_noise_std.detach().reshape(-1) - self._log_noise_scale()).exp().expand(n_outputs)

    def initial_state(self, n_rows):
        """The likelihood's columns of ``n_rows`` starting rows: the log of the trained noise's scale."""
        return self._log_noise_scale().expand(n_rows, self.n_state_columns)

    def noise_from_state(self, columns, n_outputs):
        """The noise std ``(S, O)`` of each row, from its likelihood columns ``(S, n_state_columns)``."""
        if self.learn_noise:
            ratio = self._noise_ratio(n_outputs)
            return columns.exp().expand(-1, n_outputs) if ratio is None else columns.exp() * ratio
        return self.output_noise_std(n_outputs).expand(columns.shape[0], -1)


class NoNoiseParameter:
    """What a likelihood without a noise std of its own answers: class labels
    carry none, and a heteroscedastic network predicts its noise from the
    inputs. Nothing beside the weights is learned, held fixed or sampled."""

    learn_noise = False
    n_state_columns = 0
    fits_mean_variance = False

    def output_noise_std(self, n_outputs):
        """None: no noise std the same at every input."""
        return None

    def member_noise_std(self, n_outputs):
        return None

    def frozen(self, n_outputs):
        """The likelihood itself, which has no parameter to hold fixed."""
        return self

    def noise_from_state(self, columns, n_outputs):
        return None


class HeteroscedasticGaussianLikelihood(NoNoiseParameter, nn.Module):
    """``N(y | mu(x), sigma(x)**2)`` per output, the network predicting both.

    The outputs ``(..., N, 2 O)`` hold the means in their first ``O``
    columns and the log noise stds in their last ``O``. The curvature is the
    generalised Gauss-Newton of the heteroscedastic Gaussian in its natural
    parameters ``eta = (mu / sigma**2, -1 / (2 sigma**2))``, whose output
    Hessian is the Fisher information and so never indefinite (Immer et al.
    2023, "Effective Bayesian heteroscedastic regression with deep neural
    networks"). The Fisher information transforms with the link, so that GGN
    is also ``J^T F J`` with ``F = diag(1 / sigma**2, 2)``, the Fisher in the
    network's own ``(mu, log sigma)``: the factor below. The noise is a
    function of the weights, so nothing is learned or sampled beside them.

    Attributes
    ----------
    beta : float, default=0.0
        Training's warm-up weight: while positive, each point's term of
        :meth:`log_prob` is multiplied by ``sigma(x)**(2 beta)``, held
        constant in the gradient (the beta-NLL of Seitzer et al. 2022, "On the
        pitfalls of heteroscedastic uncertainty estimation with probabilistic
        neural networks"). The gradient in the mean, ``(y - mu) / sigma**2``,
        otherwise makes the noisy points' means learn ever slower once their
        noise has grown, and the network settles with the residuals in the
        noise head; at ``beta = 1`` the means learn as under squared error.
        ``sigma(x)`` is capped at ``exp(beta_log_std_cap)`` in the weight.
        :class:`~sklearn_quinn._map.MeanWarmUp` anneals it to 0, the
        likelihood itself, before training ends.
    beta_log_std_cap : float, default=0.0
        The log of the largest noise std the warm-up weight reads (1 by
        default, the standardised target's spread). Uncapped, the weighted
        term's gradient in the log std, ``sigma**(2 beta) (1 - z**2)``, grows
        exponentially with the log std, and a row far outside the data could
        throw its noise head up without bound (docs/heteroscedastic.rst, "Rows
        far out ran away with the noise head"); above the cap a row's weight
        is a constant, ``exp(2 beta cap)``, and its gradient the likelihood's
        own times it, bounded. :meth:`for_targets` sets the log of the
        targets' largest distance from their mean: a noise std beyond it would
        put every target within one std of the mean.
    beta_keeps_total : bool, default=False
        Divide those weights by their mean over the batch, so that the data
        keep their total weight: set where the loss weighs the likelihood
        against a KL divergence (Bayes by backprop's ELBO). Raw, the weights
        of a table whose noise is small in the standardised target's units
        (UCI naval's, about 1e-3) shrink the likelihood a millionfold
        against the KL, which then pulls ``q`` to its prior and ruins the
        fit during the warm-up.

    Notes
    -----
    Fitted jointly with the means at a mode, the noise head learns the
    training residuals, which are smaller than the noise by what the means
    fit of it: at an unregularised linear mean, ``E[r_n**2] = sigma_n**2 (1 -
    h_n)`` with ``h_n`` the row's leverage, and the noise comes out too small by the
    degrees of freedom the means take (on UCI concrete, 95% intervals covered
    0.89 of the test rows). MacKay's (1992) evidence corrects this for one
    noise, ``sigma**2 = SSE / (N - gamma)``; that is the fixed point of
    ``sigma**2 = mean(r_n**2 + v_n)`` with ``v_n`` the posterior variance of
    the mean at row ``n``, and the same condition row by row,
    ``sigma_n**2 = r_n**2 + v_n``, makes the noise head stationary for the
    expected log likelihood over the Laplace posterior of the means, the
    M-step of EM (Dempster, Laird & Rubin 1977, "Maximum likelihood from
    incomplete data via the EM algorithm") and the stationarity condition of
    the means' Laplace evidence in the noise. So an evidence-driven training
    reads targets with a second block of columns, ``v_n``
    (:meth:`training_targets`), which its evidence updates rewrite
    (:meth:`set_mean_variances`); :meth:`log_prob` then adds
    ``-v_n / (2 sigma_n**2)``, a function of the noise head's output alone
    (the means' gradient is unchanged). Those columns also carry a floor, the
    targets' resolution, which keeps the noise head of a target fitted exactly
    within the clip's bound (``_RESOLUTION_VARIANCE``).
    """

    #: The curvature of the mean, ``1 / sigma(x)**2``, moves with the noise head.
    curvature_varies_with_outputs = True
    #: It does not vanish: ``1 / sigma(x)**2`` in the mean, and the log std's Fisher
    #: information is 2 wherever the outputs are.
    curvature_vanishes_with_confidence = False
    #: The noise head is fitted to the residuals and the means' posterior variance (see the Notes).
    fits_mean_variance = True
    #: Its output bias sets the mean's and the noise's levels, whose prior the common scale's climb
    #: leaves weak: climbing its own scale after it, as the classes' frequencies do, changes no UCI
    #: fit (docs/evidence.rst, "The output bias").
    output_bias_sets_frequencies = False

    def __init__(self, beta_log_std_cap=0.0):
        super().__init__()
        self.beta = 0.0
        self.beta_keeps_total = False
        self.beta_log_std_cap = beta_log_std_cap

    @classmethod
    def for_targets(cls, Y):
        """The likelihood of a table's targets ``Y`` ``(N, O)``, its warm-up weight capped at
        the log of their largest distance from their mean. Read here, from the targets alone:
        a training's own targets may carry the means' posterior variances after them
        (:meth:`training_targets`), which are no distance of a target."""
        Y = torch.as_tensor(Y)
        spread = float((Y - Y.mean(0)).abs().max())
        return cls(math.log(spread) if spread > 0 else 0.0)

    @staticmethod
    def heads(outputs):
        """The means and the (clipped) log noise stds ``(..., N, O)`` from outputs ``(..., N, 2 O)``:
        the log std within ``±LOG_STD_BOUND``, and beyond it at slope ``_LOG_STD_LEAK``."""
        mean, log_std = outputs.chunk(2, dim=-1)
        return mean, _clip_log_std(log_std)

    @staticmethod
    def n_network_outputs(n_targets):
        """The network's outputs for ``n_targets``: a mean and a log noise std each."""
        return 2 * n_targets

    @classmethod
    def split(cls, outputs, noise_std=None):
        """The means and noise stds ``(..., N, O)`` from outputs ``(..., N, 2 O)``
        (``noise_std``, the homoscedastic one of :class:`GaussianLikelihood`, is unused):
        the noise of the likelihood's own clipped log std, as :meth:`predictive` takes it."""
        mean, log_std = cls.heads(outputs)
        return mean, log_std.exp()

    @staticmethod
    def _clip_slope(outputs):
        """``d(clipped log std) / d(output)``: 1 within the bound, ``_LOG_STD_LEAK`` beyond it."""
        log_std = outputs.chunk(2, dim=-1)[1]
        inside = (log_std.abs() <= LOG_STD_BOUND).to(outputs.dtype)
        return _LOG_STD_LEAK + (1.0 - _LOG_STD_LEAK) * inside

    @staticmethod
    def training_targets(Y):
        """The targets of an evidence-driven training, ``(N, 2 O)``: ``Y``, then the
        variance each row's noise must cover beside its residual: the targets' resolution
        (``_RESOLUTION_VARIANCE``), to which :meth:`set_mean_variances` adds the posterior
        variance of each mean at its row."""
        return torch.cat([Y, torch.full_like(Y, _RESOLUTION_VARIANCE)], dim=-1)

    @classmethod
    def set_mean_variances(cls, targets, outputs, leverage):
        """Write the means' posterior variances ``v_n = h_n sigma_n**2``, plus the targets'
        resolution (:meth:`training_targets`), into the last columns of ``targets``
        ``(N, 2 O)``, from the leverages ``h`` ``(N, 2 O)`` (the posterior variances of the
        whitened outputs, whose means' are ``v_n / sigma_n**2``) at the network's ``outputs``
        ``(N, 2 O)``.

        An exact leverage is below 1 (``w^T (w w^T + A)^-1 w < 1`` for the row's whitened
        Jacobian ``w`` and the precision ``A`` of every other row and the prior): the data
        determine a mean to within its noise. Factored curvature, whose output factor
        averages ``1 / sigma**2`` over the rows, can overshoot it at a row of small noise;
        there ``v_n`` is cut to ``sigma_n**2``, which the noise head's next fit then raises,
        lowering the row's leverage in turn."""
        n_targets = targets.shape[-1] // 2
        log_std = cls.heads(outputs)[1]
        mean_variance = leverage[:, :n_targets].clamp(0.0, 1.0) * torch.exp(2 * log_std)
        targets[:, n_targets:] = mean_variance + _RESOLUTION_VARIANCE

    def log_prob(self, outputs, y, perturbation=None):
        """Log density per point of ``y + sigma(x) * perturbation`` (see :class:`GaussianLikelihood`).

        With targets ``(..., N, 2 O)`` (:meth:`training_targets`), the
        expected log density over the means' posterior and the targets'
        resolution: each point's term less ``(v_n + exp(-18)) / (2
        sigma_n**2)``. While ``beta`` > 0 each term carries its warm-up weight.
        """
        terms, log_std = self._terms(outputs, y, perturbation)
        if self.beta:
            weights = torch.exp(2 * self.beta * log_std.detach().clamp(max=self.beta_log_std_cap))
            terms = terms * (weights / weights.mean() if self.beta_keeps_total else weights)
        return terms.sum(-1)

    def _terms(self, outputs, y, perturbation=None):
        """The log density's terms per point and output ``(..., N, O)``, unweighted, and the log stds."""
        mean, log_std = self.heads(outputs)
        n_targets = mean.shape[-1]
        y, covered = y[..., :n_targets], y[..., n_targets:]  # covered: v_n and the resolution (Notes)
        z = (y - mean) * torch.exp(-log_std)
        if perturbation is not None:
            z = z + perturbation[..., :n_targets]
        terms = -0.5 * z.square() - log_std - _HALF_LOG_2PI
        if covered.shape[-1]:
            terms = terms - 0.5 * covered * torch.exp(-2 * log_std)
        return terms, log_std

    @staticmethod
    def predictive(outputs, noise_std=None):
        """The distribution of the mean and the expected noise variance, from the outputs' distribution.

        Parameters
        ----------
        outputs : GaussianPredictive or SampledPredictive
            Over outputs ``(N, 2 O)``.
        noise_std : None
            Unused (the homoscedastic noise of :class:`GaussianLikelihood`).

        Returns
        -------
        mean : GaussianPredictive or SampledPredictive
            Over the means ``(N, O)``.
        noise_variance : tensor of shape (N, O)
            ``E[sigma(x)**2] = E[exp(2 h(s))]`` of the head's output ``s``
            and the likelihood's clip ``h`` (the same noise the training's
            density reads), exact for the Gaussian of a linearised network.
            Within the data's noise ``h(s) = s``, and this is ``exp(2 m +
            2 v)``; far from the data, where the noise head's variance ``v``
            grows as the square of the distance, that unclipped moment
            overflows float64 (an input 30 training ranges out) while the
            clip's slope keeps the noise finite.
        """
        n_outputs = outputs.mean.shape[-1] // 2
        noise = outputs.columns(slice(n_outputs, None)).expectation(
            lambda mean, variance: _log_expected_exp_of_clipped(mean, variance, 2.0))
        return outputs.columns(slice(0, n_outputs)), noise

    def output_gradient(self, outputs, y):
        """``d(-log p(y | f)) / df`` per point, shape ``(N, 2 O)``: ``-(y - mu) / sigma**2`` and ``1 - z**2``."""
        mean, log_std = self.heads(outputs)
        inverse_std = torch.exp(-log_std)
        z = (y - mean) * inverse_std
        return torch.cat([-z * inverse_std, (1.0 - z.square()) * self._clip_slope(outputs)], dim=-1)

    def whitened_jacobian(self, jacobian, outputs):
        """``S_n J_n`` for Jacobians ``(N, 2 O, K)``, ``S_n = diag(1 / sigma_n, sqrt(2))``."""
        log_std = self.heads(outputs)[1]
        scale = torch.cat([torch.exp(-log_std), math.sqrt(2.0) * self._clip_slope(outputs)], dim=-1)
        return jacobian * scale.unsqueeze(-1)

    def evidence_data_fit(self, outputs, y):
        """``log p(D | theta*)``, which has no noise scale of its own: a constant. The
        likelihood's own, not the warm-up's weighted terms: an update during the warm-up
        records the evidence."""
        return ConstantDataFit(float(self._terms(outputs, y)[0].sum()))

    def state_log_likelihood(self, model, X, Y):
        """The log likelihood over state rows (see :class:`HeteroscedasticStateLikelihood`)."""
        return HeteroscedasticStateLikelihood(model, X, Y)


class CategoricalLikelihood(NoNoiseParameter, nn.Module):
    """``softmax(f)[y]``: logits ``(..., N, C)``, class indices ``(..., N, 1)`` (as floats)."""

    #: The curvature in the logits, ``diag(p) - p p^T``, vanishes as the probabilities saturate.
    curvature_varies_with_outputs = True
    curvature_vanishes_with_confidence = True
    #: The output bias carries the classes' frequencies, which the evidence may keep where it prunes
    #: every weight: its precision climbs its own scale after the common one (``EvidenceMaximisation``).
    output_bias_sets_frequencies = True

    def log_prob(self, logits, y, perturbation=None):
        index = y[..., :1].long().expand(*logits.shape[:-1], 1)
        return torch.log_softmax(logits, dim=-1).gather(-1, index)[..., 0]

    def output_gradient(self, logits, y):
        """``softmax(f) - onehot(y)`` per point, shape ``(N, C)``."""
        probabilities = torch.softmax(logits, dim=-1)
        return probabilities - torch.nn.functional.one_hot(y[:, 0].long(), logits.shape[-1]).to(logits.dtype)

    def output_hessian(self, logits):
        """``d^2(-log p(y | f)) / df^2 = diag(p) - p p^T`` per point, shape ``(N, C, C)``."""
        probabilities = torch.softmax(logits, dim=-1)
        return torch.diag_embed(probabilities) - probabilities.unsqueeze(-1) * probabilities.unsqueeze(-2)

    def whitened_jacobian(self, jacobian, logits):
        """``S_n J_n`` with ``S_n^T S_n = diag(p) - p p^T``, ``S_n`` of ``C - 1`` rows, shape ``(N, C - 1, K)``.

        The softmax Hessian ``Lambda`` annihilates the all-ones vector (adding
        a constant to every logit changes nothing), so with ``Q`` an
        orthonormal basis of its complement, ``Lambda = Q (Q^T Lambda Q) Q^T``
        and ``S = diag(sqrt(e)) V^T Q^T`` from the eigen decomposition
        ``V diag(e) V^T`` of the ``(C - 1) x (C - 1)`` middle: one row fewer per
        point than a square factor, which matters for two classes.
        """
        n_classes = logits.shape[-1]
        basis = torch.linalg.qr(torch.eye(n_classes, dtype=logits.dtype, device=logits.device)
                                - 1.0 / n_classes)[0][:, : n_classes - 1]
        hessian = self.output_hessian(logits)
        eigenvalues, eigenvectors = torch.linalg.eigh(basis.T @ hessian @ basis)
        factor = eigenvalues.clamp(min=0).sqrt().unsqueeze(-1) * (basis @ eigenvectors).mT
        return factor @ jacobian

    def evidence_data_fit(self, logits, y):
        """``log p(D | theta*)``, which has no noise to scale: a constant."""
        return ConstantDataFit(float(self.log_prob(logits, y).sum()))

    def state_log_likelihood(self, model, X, Y):
        """The log likelihood over state rows (see :class:`CategoricalStateLikelihood`)."""
        return CategoricalStateLikelihood(model, X, Y[:, 0])


class GaussianDataFit(NamedTuple):
    """``log p(D | theta*)`` of a Gaussian likelihood at noise ``c * noise_std``, and its
    derivative in ``log c``, from three sums taken once (a plain tuple, so a fitted
    estimator pickles)."""

    weighted_sse: float
    n_observations: int
    log_noise_total: float

    def __call__(self, log_noise_scale):
        scale = math.exp(log_noise_scale)
        value = (
            -0.5 * self.weighted_sse / scale**2
            - self.n_observations * log_noise_scale
            - self.log_noise_total
            - 0.5 * self.n_observations * math.log(2 * math.pi)
        )
        return value, self.weighted_sse / scale**2 - self.n_observations

    def scaled(self, weight):
        """The data fit of a table of which these rows are a uniform random subset, each row
        standing for ``weight`` of its rows: every sum times ``weight``."""
        return GaussianDataFit(weight * self.weighted_sse, weight * self.n_observations, weight * self.log_noise_total)


class ConstantDataFit(NamedTuple):
    """``log p(D | theta*)`` of a likelihood without a noise to scale: a constant."""

    log_likelihood: float

    def __call__(self, log_noise_scale):
        return self.log_likelihood, 0.0

    def scaled(self, weight):
        """As :meth:`GaussianDataFit.scaled`."""
        return ConstantDataFit(weight * self.log_likelihood)


class RowBlockLikelihood:
    """What the state likelihoods share: ``__call__`` and ``value_and_grad`` over weight rows,
    evaluated a block of rows at a time (:meth:`FunctionalModel.by_row_blocks`) by the
    subclass's ``_log_likelihood`` and ``_value_and_grad``.

    The gradient's calls are counted (``n_gradient_rows``, ``n_gradient_blocks``), so
    that a sampler can weigh compiling it against its cost, and :meth:`compile_gradient`
    runs the block gradient through ``torch.compile`` from then on.

    :meth:`set_surrogate_dtype` gives it a :attr:`surrogate`: the likelihood evaluated by
    a copy of it (its data, noise and network) in a cheaper dtype, for the kicks of HMC's
    leapfrog steps (:func:`~sklearn_quinn.mcmc._kernels.leapfrog`) and the trees of NUTS
    (:func:`~sklearn_quinn.mcmc.nuts`), whose accept steps still take the log likelihood in
    the rows' own dtype.
    """

    n_gradient_rows = n_gradient_blocks = 0
    _compiled_gradient = None
    _cheaper = None  # the copy in the surrogate's dtype, where it differs from the data's

    def __call__(self, rows):
        return self.model.by_row_blocks(self._log_likelihood, rows, len(self.X))

    def value_and_grad(self, rows):
        self._count_gradient(rows)
        return self._block_gradients(rows)

    def fisher_draws(self, rows, generator=None):
        """Draws ``(S, P)`` whose squares have the diagonal of each row's Fisher information as
        their expectation: the log likelihood's gradient at targets drawn from the likelihood
        itself at the row (its outputs' gradient at those targets, pulled back through the
        network: for a Gaussian, ``J^T z / sigma`` with ``z`` standard normal, whose square's
        mean is the Gauss-Newton matrix's diagonal over the noise variance). One batched
        backward pass; the data's targets do not enter."""
        return self.model.by_row_blocks(lambda block: self._fisher_draws(block, generator), rows, len(self.X))

    def _count_gradient(self, rows):
        """Count the gradients of ``rows`` and the blocks they go in, where they run eagerly: the
        counts serve the decision to compile, and inside a compiled kernel a count (a Python int
        it would guard on) would compile the kernel again at its first change."""
        if torch.compiler.is_compiling():
            return
        self.n_gradient_rows += len(rows)
        self.n_gradient_blocks += -(-len(rows) // self.model.row_block_size(len(self.X), rows.dtype))

    def _block_gradients(self, rows):
        block_gradient = self._value_and_grad if self._compiled_gradient is None else self._compiled_gradient
        return self.model.by_row_blocks(block_gradient, rows, len(self.X))

    def set_surrogate_dtype(self, dtype):
        """Evaluate :attr:`surrogate` in ``dtype`` from now on (None where ``dtype`` is the data's own)."""
        self._cheaper = None if dtype == self.X.dtype else self._cast(dtype)

    @property
    def surrogate(self):
        """This log likelihood over rows ``(S, P)`` evaluated in the dtype of
        :meth:`set_surrogate_dtype` and returned in the rows' (a :class:`CastLikelihood`), or
        None where none was set."""
        return None if self._cheaper is None else CastLikelihood(self._cheaper, counter=self)

    def _cast(self, dtype):
        """A copy of the likelihood with its data, noise and network in ``dtype``."""
        cast = copy.copy(self)
        cast.model = copy.deepcopy(self.model)
        cast.model.module.to(dtype)
        for name, value in vars(self).items():
            if torch.is_tensor(value) and value.is_floating_point():
                setattr(cast, name, value.to(dtype))
        cast._compiled_gradient = cast._cheaper = None
        return cast

    @property
    def gradient_compiled(self):
        """Whether the gradient the kicks take (the :attr:`surrogate`'s, where there is one) is compiled."""
        return self._kicks_likelihood._compiled_gradient is not None

    @property
    def _kicks_likelihood(self):
        return self if self._cheaper is None else self._cheaper

    def compile_gradient(self):
        """Evaluate the gradient's blocks through ``torch.compile`` from now on: one graph
        for any number of rows (eager, with a warning, where it cannot compile). Where there
        is a :attr:`surrogate`, its gradient is the one compiled: the kicks take it."""
        likelihood = self._kicks_likelihood
        compiled = compiled_or_eager(likelihood._value_and_grad, dynamic=True)

        def block_gradient(rows):
            # Fresh tensors: torch.compile guards a view's base and offset, and every new block of a
            # particle matrix would compile again. It specialises a dimension of size 1 too: one row
            # goes as two.
            if len(rows) > 1:
                return compiled(rows.clone())
            value, gradient = compiled(torch.cat([rows, rows]))
            return value[:1], gradient[:1]

        likelihood._compiled_gradient = block_gradient


class CastLikelihood:
    """A :class:`RowBlockLikelihood` evaluated by its copy in another dtype (``cheaper``), over
    rows in their own dtype and returning its values and gradients in it; its gradients are
    counted by the likelihood ``counter`` (what ``compile='auto'`` weighs is the gradients a
    sampler takes)."""

    def __init__(self, cheaper, counter):
        self.cheaper, self.counter = cheaper, counter

    def __call__(self, rows):
        return self.cheaper(rows.to(self.cheaper.X.dtype)).to(rows.dtype)

    def value_and_grad(self, rows):
        cast = rows.to(self.cheaper.X.dtype)
        self.counter._count_gradient(cast)
        value, gradient = self.cheaper._block_gradients(cast)
        return value.to(rows.dtype), gradient.to(rows.dtype)


class GaussianStateLikelihood(RowBlockLikelihood):
    """``log p(Y | X, theta, noise)`` of a Gaussian likelihood, per state row.

    With ``noise_std=None`` the last column of each row is the log of the
    noise's scale ``s``, and output ``k``'s noise std is ``s * noise_ratio[k]``
    (``noise_ratio=None``: 1, one noise shared by the outputs); otherwise the
    noise is fixed (per output).
    """

    def __init__(self, model, X, Y, noise_std=None, noise_ratio=None):
        self.model, self.X, self.Y = model, X, Y
        self.noise_std = None if noise_std is None else torch.as_tensor(noise_std, dtype=Y.dtype, device=Y.device)
        self._inverse_noise = None if noise_std is None else 1.0 / self.noise_std
        self._inverse_ratio = None if noise_ratio is None else 1.0 / noise_ratio
        self._constant = -Y.numel() * _HALF_LOG_2PI
        if noise_std is not None:
            self._constant -= Y.shape[0] * float(torch.log(self.noise_std).expand(Y.shape[1]).sum())
        if noise_ratio is not None:
            self._constant -= Y.shape[0] * float(torch.log(noise_ratio).sum())

    def _split(self, rows):
        """Weights, inverse noise std (broadcastable to the outputs) and log noise (None when fixed).

        The inverse, so that the hot path multiplies: a compiled graph would
        otherwise divide per element."""
        if self.noise_std is not None:
            return rows, self._inverse_noise, None
        log_noise = rows[:, self.model.n_params]
        inverse_noise = (-log_noise).exp()[:, None, None]
        if self._inverse_ratio is not None:
            inverse_noise = inverse_noise * self._inverse_ratio
        return rows[:, : self.model.n_params], inverse_noise, log_noise

    def _value(self, squares, log_noise):
        value = self._constant - 0.5 * squares.sum((-1, -2))
        return value if log_noise is None else value - self.Y.numel() * log_noise

    def sum_of_squares(self, theta):
        """The residual sum of squares ``(S,)`` of weight rows ``theta (S, K)``, in units of the
        noise's scale (each output's residuals over its noise ratio)."""
        return self.model.by_row_blocks(self._sum_of_squares, theta, len(self.X))

    def _sum_of_squares(self, theta):
        with torch.no_grad():
            residuals = self.Y - self.model(theta, self.X)
            if self._inverse_ratio is not None:
                residuals = residuals * self._inverse_ratio
            return residuals.square().sum((-1, -2))

    def _log_likelihood(self, rows):
        theta, inverse_noise, log_noise = self._split(rows)
        return self._value(((self.Y - self.model(theta, self.X)) * inverse_noise).square(), log_noise)

    def _value_and_grad(self, rows):
        with torch.no_grad():
            theta, inverse_noise, log_noise = self._split(rows)
            outputs, vjp = self.model.forward_and_vjp(theta, self.X)
            scaled = (self.Y - outputs) * inverse_noise
            squares = scaled.square()
            value, gradient = self._value(squares, log_noise), vjp(scaled * inverse_noise)
            if log_noise is None:
                return value, gradient
            # d/d log(noise) of the log likelihood: sum(z^2) - N * O.
            d_log_noise = squares.sum((-1, -2)) - self.Y.numel()
            return value, torch.cat([gradient, d_log_noise[:, None]], dim=1)

    def _fisher_draws(self, rows, generator):
        with torch.no_grad():
            theta, inverse_noise, log_noise = self._split(rows)
            outputs, vjp = self.model.forward_and_vjp(theta, self.X)
            z = standard_normal(generator, outputs)  # the drawn targets' standardised residuals
            gradient = vjp(z * inverse_noise)
            if log_noise is None:
                return gradient
            return torch.cat([gradient, (z.square().sum((-1, -2)) - self.Y.numel())[:, None]], dim=1)


class HeteroscedasticStateLikelihood(RowBlockLikelihood):
    """``log p(Y | X, theta)`` of :class:`HeteroscedasticGaussianLikelihood`, per row of weights.

    The gradient is ``J^T g`` with ``g = ((y - mu) / sigma**2, z**2 - 1)``
    in the mean and log-std outputs, ``z = (y - mu) / sigma``.
    """

    def __init__(self, model, X, Y):
        self.model, self.X, self.Y = model, X, Y
        self._constant = -Y.numel() * _HALF_LOG_2PI

    def _terms(self, outputs):
        mean, log_std = HeteroscedasticGaussianLikelihood.heads(outputs)
        inverse_std = torch.exp(-log_std)
        z = (self.Y - mean) * inverse_std
        value = self._constant - (0.5 * z.square() + log_std).sum((-1, -2))
        return value, z, inverse_std

    def _log_likelihood(self, rows):
        return self._terms(self.model(rows, self.X))[0]

    @staticmethod
    def _output_gradient(outputs, z, inverse_std):
        """The log likelihood's gradient in the mean and log-std outputs at standardised residuals
        ``z``: ``z / sigma`` and ``z**2 - 1`` (times the log std's clip slope)."""
        slope = HeteroscedasticGaussianLikelihood._clip_slope(outputs)
        return torch.cat([z * inverse_std, (z.square() - 1.0) * slope], dim=-1)

    def _value_and_grad(self, rows):
        with torch.no_grad():
            outputs, vjp = self.model.forward_and_vjp(rows, self.X)
            value, z, inverse_std = self._terms(outputs)
            return value, vjp(self._output_gradient(outputs, z, inverse_std))

    def _fisher_draws(self, rows, generator):
        with torch.no_grad():
            outputs, vjp = self.model.forward_and_vjp(rows, self.X)
            log_std = HeteroscedasticGaussianLikelihood.heads(outputs)[1]
            z = standard_normal(generator, log_std)  # the drawn targets' standardised residuals
            return vjp(self._output_gradient(outputs, z, torch.exp(-log_std)))


class CategoricalStateLikelihood(RowBlockLikelihood):
    """``log p(y | X, theta)`` of a categorical (softmax) likelihood, per state row.

    ``y`` holds the class indices ``(N,)``; the gradient is
    ``J^T (onehot(y) - softmax(f))``.
    """

    def __init__(self, model, X, y):
        self.model, self.X = model, X
        self.index = y.long()[:, None]
        self._one_hot = None

    def one_hot(self, n_classes):
        """The labels one-hot, ``(N, n_classes)``, built once."""
        if self._one_hot is None:
            self._one_hot = torch.zeros(len(self.index), n_classes, dtype=self.X.dtype, device=self.X.device)
            self._one_hot.scatter_(-1, self.index, 1.0)
        return self._one_hot

    def _log_likelihood(self, rows):
        log_probabilities = log_softmax(self.model(rows, self.X))
        return log_probabilities.gather(-1, self.index.expand(len(rows), -1, 1)).sum((-1, -2))

    def _value_and_grad(self, rows):
        with torch.no_grad():
            logits, vjp = self.model.forward_and_vjp(rows, self.X)
            log_probabilities = log_softmax(logits)
            one_hot = self.one_hot(logits.shape[-1])
            return (log_probabilities * one_hot).sum((-1, -2)), vjp(one_hot - log_probabilities.exp())

    def _fisher_draws(self, rows, generator):
        with torch.no_grad():
            logits, vjp = self.model.forward_and_vjp(rows, self.X)
            log_probabilities = log_softmax(logits)
            # Labels drawn from the softmax by the Gumbel-max trick.
            gumbel = -torch.log(-torch.log(standard_uniform(generator, logits)))
            drawn = nn.functional.one_hot((log_probabilities + gumbel).argmax(-1), logits.shape[-1])
            return vjp(drawn.to(logits.dtype) - log_probabilities.exp())


def log_softmax(logits):
    """``log_softmax`` over the last axis of ``(S, N, C)`` logits.

    Reduced over a transposed contiguous copy: torch's CPU kernel is about 4x
    slower over a short last axis (a few classes) than over a leading one.
    """
    return torch.log_softmax(logits.transpose(-1, -2).contiguous(), dim=-2).transpose(-1, -2)


def output_whitening(likelihood, outputs):
    """The factors ``S_n`` ``(N, R, O)`` of each row's output Hessian ``Lambda_n = S_n^T S_n``:
    ``likelihood``'s whitened Jacobian of the outputs ``(N, O)`` in themselves (the identity)."""
    identity = torch.eye(outputs.shape[-1], dtype=outputs.dtype, device=outputs.device)
    return likelihood.whitened_jacobian(identity.expand(len(outputs), -1, -1), outputs)
