"""Training through skorch: the generic loop, and the MAP of a backbone.

The MAP loss is the negative log posterior per training point,
``-log p(y_b | f) averaged over the batch + sum_g delta_g ||theta_g||^2 / (2 N)``,
whose minimiser over full-batch or unbiased minibatches is the MAP, with one
prior precision ``delta`` for every weight or one ``delta_g`` per parameter
tensor. When the prior precisions or the observation noise are learned, they
are hyperparameters, not parameters of the loss: every few epochs
:class:`EvidenceMaximisation` sets them to the maximisers of the Laplace
evidence at the current weights (Immer et al. 2021, "Scalable marginal
likelihood estimation for model selection in deep learning"), so that the
noise cannot shrink as the network over-fits. No validation split is held out.
Where a full-batch gradient is cheap the training ends at a mode (:func:`polish`),
and a classifier's prior at the evidence's maximiser along its common scale
and its output bias's (:meth:`EvidenceMaximisation.finish`).
"""

import copy
import math
import signal
import threading

import cloudpickle
import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from skorch import NeuralNet
from skorch.callbacks import Callback, EpochTimer, LRScheduler
from skorch.utils import to_device, to_tensor
from torch import nn

from ._core.curvature import AUTO_MAX_FULL_PARAMS
from ._core.evidence import (
    LaplaceEvidence,
    ParameterGroups,
    bias_alone_covariance,
    exact_structure,
    output_bias_maximiser,
)
from ._core.kernel_grams import KernelGrams
from ._core.kronecker import KroneckerUnsupportedError, kronecker_layers
from ._core.likelihoods import GaussianLikelihood
from ._core.network import FunctionalModel, in_eval_mode
from ._core.row_subsets import random_subset
from ._warnings import warn

#: The evidence is maximised after every twentieth of the epochs from the
#: second to the sixteenth: none in the first tenth (the network first fits the
#: data), none in the last fifth (the weights settle into the MAP of the final
#: hyperparameters). The precisions move with the weights, so their fixed point
#: is reached over many updates: the hidden layers of a network on linear data
#: shrink, and their precisions rise, a step per update. After every tenth
#: instead, they were still moving when the updates stopped (the log evidence
#: rising 15 nats an update), and the hidden layers kept a prior wide enough to
#: let the sampling families (RMS's anchors, SWAG's SGD) fit the noise with them.
EVIDENCE_UPDATE_TWENTIETHS = range(2, 17)

# The updates, counted from the last, that give each input column its own precision
# (ParameterGroups); the earlier ones tie a layer's columns. A column's precision
# learned while the network is still fitting shrinks the inputs whose effects it
# has not learned yet, and the shrunk weights then learn them too slowly to win
# the evidence back; a single update apart at the end leaves the columns'
# precisions at the fixed point of weights that then move on (a linear model's
# then miss the exact maximisers, tests/test_evidence.py). Four alternate with
# the training long enough to meet them (docs/evidence.rst, "Relevance of the
# inputs").
_UPDATES_WITH_COLUMNS_APART = 4

# Fixed-point steps of every update but the last, which runs to convergence: the
# weights move on after an update, so iterating an intermediate update further
# buys nothing (Immer et al. 2021 likewise take a few hyperparameter steps per
# update). One step halves the evidence's factorisations of a kernel-path fit
# against five, at the same or better evidence and test scores.
_STEPS_PER_UPDATE = 1

#: A MAP training ends with a full-batch L-BFGS polish when rows times weights
#: is at most this (one full-batch gradient then costs milliseconds), in at
#: most this many L-BFGS iterations.
_POLISH_MAX_WORK = 5e7
_POLISH_ITERATIONS = 100

# The common scale of the learned precisions climbs the evidence in steps of
# this factor, at most this many steps each way, while a step gains at least
# this many nats (a Bayes factor of 1.1: finer than the Laplace approximation
# resolves; labels without signal otherwise creep towards an ever stronger
# prior by a tenth of a nat a step), then steps to the vertex of a parabola
# where it promises as much (EvidenceMaximisation.finish).
_SCALE_STEP = 2.0
_MAX_SCALE_STEPS = 6
_MIN_SCALE_GAIN = 0.1


class NegativeLogPosterior(nn.Module):
    """Negative log posterior per point for a likelihood and a Gaussian prior.

    Parameters
    ----------
    n_train : int
        Number of training points, to scale the prior term per point.
    prior_precision : float or tensor of shape (G,)
        ``1 / prior_std**2`` for every weight, or one precision per group of
        ``groups``.
    likelihood : GaussianLikelihood or CategoricalLikelihood
        Its trainable parameters (an estimated noise) are trained with the network.
    groups : ParameterGroups, default=None
        The groups of the module's weights (in the order of ``module.parameters()``),
        for a precision per group.
    """

    def __init__(self, n_train, prior_precision, likelihood, groups=None):
        super().__init__()
        self.n_train = n_train
        self.groups = groups
        self.prior_precision = prior_precision
        self.likelihood = likelihood

    @property
    def prior_precision(self):
        return self._prior_precision

    @prior_precision.setter
    def prior_precision(self, value):
        self._prior_precision = value
        self._per_tensor = {}  # the precisions shaped as the parameters, per device, made when first used

    def forward(self, y_pred, y_true, module):
        return self.misfit(y_pred, y_true) + self.divergence(module) / self.n_train

    def misfit(self, y_pred, y_true):
        """The data's part of the loss: the negative log likelihood per point."""
        return -self.likelihood.log_prob(y_pred, y_true).mean()

    def flat_loss(self, module, X, Y):
        """The loss of ``module`` on ``X, Y`` as a :class:`FlatPosteriorLoss` of its weights in one
        row, or None where that does not apply: a subclass's loss, a module's own divergence, a
        frozen weight, or a module off :class:`FunctionalModel`'s fast path."""
        if (type(self) is not NegativeLogPosterior or getattr(module, "_kl_divergence", None) is not None
                or not all(p.requires_grad for p in module.parameters())):
            return None
        model = FunctionalModel(module)
        if not model.fast_path:
            return None
        parameters = list(module.parameters())

        def write_back(theta):
            with torch.no_grad():
                for parameter, block in zip(parameters, model.unflatten(theta[0]).values()):
                    parameter.copy_(block)

        return FlatPosteriorLoss(model, model.flatten().unsqueeze(0), X, lambda outputs: self.misfit(outputs[0], Y),
                                 self.weight_precisions(parameters), self, write_back=write_back)

    def divergence(self, module):
        """The weights' negative log prior ``0.5 sum_g delta_g ||theta_g||^2``, the
        KL divergence of a point estimate from the prior up to a constant; a
        training module of the package that trains a distribution over its
        weights gives its own, as ``module._kl_divergence(penalty)`` (MC
        dropout's :class:`~sklearn_quinn.dropout._engine.InputDropout`)."""
        own = getattr(module, "_kl_divergence", None)
        return own(self.penalty) if own is not None else 0.5 * self.penalty(module.parameters())

    def penalty(self, parameters):
        """``sum_g delta_g ||theta_g||^2`` over the module's parameter tensors, in order."""
        if not isinstance(self.prior_precision, torch.Tensor):
            return self.prior_precision * sum(p.square().sum() for p in parameters)
        parameters = list(parameters)
        return sum((delta * p.square()).sum() for delta, p in zip(self.tensor_precisions(parameters), parameters))

    def weight_precisions(self, parameters):
        """The prior precision of every weight of ``parameters`` (a list, in order), flat: ``(K,)``."""
        return torch.cat([
            torch.as_tensor(delta, dtype=p.dtype, device=p.device).expand(p.shape).reshape(-1)
            for delta, p in zip(self.tensor_precisions(parameters), parameters)
        ])

    def tensor_precisions(self, parameters):
        """The prior precision of each of the module's ``parameters`` (a list, in order): the float
        for every one under one precision, else the precisions of its weights in its shape."""
        if not isinstance(self.prior_precision, torch.Tensor):
            return [self.prior_precision] * len(parameters)
        device = parameters[0].device
        if device not in self._per_tensor:
            self._per_tensor[device] = self.groups.per_tensor(self.prior_precision.to(device))
        return self._per_tensor[device]


class EvidenceMaximisation(Callback):
    """Set the prior precisions and the noise to the Laplace evidence's maximisers, every few epochs.

    After each epoch of ``epochs``, the evidence at the current weights
    (:class:`~sklearn_quinn._core.evidence.LaplaceEvidence`) is maximised over
    the criterion's per-group prior precisions (``learn_prior``) and its
    likelihood's noise (``learn_noise``); the training then goes on under
    them.

    Parameters
    ----------
    model : FunctionalModel
        The network whose weights the evidence is taken at, as they train
        (the trained module, or the backbone inside it).
    X, Y : tensor of shape (N, D) and (N, O)
        The training data.
    groups : ParameterGroups
        The groups of the criterion's prior precisions.
    learn_prior, learn_noise : bool
    epochs : set of int
        The epochs (1-based) after which to update.
    precision_factor : float, default=1.0
        The learned precisions times this factor: each update sets the
        evidence's maximisers times it, so that the training goes on under a
        prior of the evidence's shape, weaker (< 1) or stronger (> 1) by a
        common scale that cross-validation can choose (the estimators'
        ``prior_std_scale``, which is ``precision_factor**-0.5``).
    targets : tensor of shape (N, O'), default=None
        What the training reads as its targets (default ``Y``). A likelihood
        that fits the means' posterior variance (``fits_mean_variance``, the
        heteroscedastic one) may read them from columns after ``Y``
        (``likelihood.training_targets(Y)``); each update then rewrites them
        under its posterior, in place, so that the training's minibatches
        and its polish read the current ones.
    seed : int, default=0
        Seeds the random subset of rows that the training's updates read on a
        table of more than ``SUBSET_ROWS`` rows
        (:func:`~sklearn_quinn._core.row_subsets.random_subset`).

    Attributes
    ----------
    history_ : list of dict
        One entry per update: ``epoch``, ``stage`` ('training' during the
        epochs, 'final' at the polished MAP of :meth:`finish`),
        ``log_evidence`` (network units; a 'final' one exact up to
        ``AUTO_MAX_FULL_PARAMS`` weights, where 'training' ones may be
        Kronecker-factored, and above ``SUBSET_ROWS`` rows are estimated
        from a random subset of them),
        ``noise_std`` (None without a noise) and the precision of every group
        as set (the maximisers times ``precision_factor``; ``log_evidence`` is
        the maximum).
    """

    def __init__(self, model, X, Y, groups, *, learn_prior, learn_noise, epochs, targets=None,
                 precision_factor=1.0, seed=0):
        self.model, self.X, self.Y, self.groups = model, X, Y, groups
        self.targets = Y if targets is None else targets
        # The training's updates read the evidence from a random subset of a big table's rows: its
        # curvature and data fit are sums over them. The updates at the end, which set what the fit
        # keeps, and the means' posterior variances, one per row, read every row.
        self._subset = (X, Y, 1.0) if self._carries_mean_variances else random_subset(X, Y, seed)
        self.learn_prior, self.learn_noise, self.epochs = learn_prior, learn_noise, epochs
        self.precision_factor = precision_factor
        # MacKay's SSE / (N - gamma) presumes the gamma well-determined directions are fitted; far from
        # a mode (an untrained network has gamma near min(N, K)) it can exceed the targets' own spread and
        # then stall the training under a noise that drowns the data. Each target's spread about its
        # mean, the noise of a constant predictor, bounds its noise (a constant target has none to bound by).
        self._spread = (Y - Y.mean(0)).square().mean(0).sqrt()

    def on_train_begin(self, net, **kwargs):
        self.history_ = []
        self._output_dof = None  # each output's well-determined weights, from the last update (several outputs)

    def on_epoch_end(self, net, **kwargs):
        epoch = len(net.history)
        if epoch in self.epochs:
            # The weights move on after an update: only the last one is worth iterating to convergence.
            last = epoch == max(self.epochs)
            apart = sorted(self.epochs)[-_UPDATES_WITH_COLUMNS_APART:]
            self._maximise(net, self.learn_prior, self.learn_noise, None if last else _STEPS_PER_UPDATE, "training",
                           tied=epoch not in apart, output_dof=last)

    def finish(self, net):
        """End the training at a mode: the MAP polished (:func:`polish`) under
        the last update's hyperparameters, and for a likelihood whose curvature
        varies with the outputs, the common scale of the learned precisions (and
        for a classifier then the output bias's own) set to the evidence's
        maximiser along it.

        MacKay's fixed point holds the curvature fixed while the precisions
        move, which is exact for a linear model with Gaussian noise. A
        classifier's curvature collapses as its probabilities saturate, which a
        weaker prior lets them do, so the fixed point's prior is stronger than
        the evidence's maximiser (on near-separable classes, by a factor of
        several). Iterating the fixed point with the MAP re-converged in between
        does not climb a network's evidence (the hidden layers trade scale, the
        MAP hops between modes), so the ratios of the precisions stay those of
        the training's last update, and their common scale climbs the evidence
        of the re-converged MAP in steps of ``_SCALE_STEP``, first weaker, then
        stronger, while a step gains at least ``_MIN_SCALE_GAIN`` nats, then
        takes one step of parabolic interpolation (:meth:`_parabolic_step`). Under a
        Gaussian likelihood only the network's Jacobian moves with the weights,
        and the fixed point is within a step of the maximum, so the scale is
        not searched.

        Under a likelihood whose output bias carries the classes' frequencies
        (``output_bias_sets_frequencies``), the bias then climbs its own scale
        the same way, the other precisions held: a table whose inputs say
        little about the labels keeps the frequencies while its weights go.
        During the training a ReLU layer's units, never negative, let the
        output weights carry the frequencies instead, and the bias's fixed
        point runs to an ever stronger prior; the common scale then prunes those
        weights, and the frequencies with them, for the sake of the weights'
        evidence: predictions near uniform, worse than the class frequencies
        (docs/evidence.rst, "The output bias"). There the bias is pinned at zero
        and the evidence flat in its precision, so the climb starts from the
        maximiser of the evidence along a weaker prior for the bias, predicted
        from the posterior at the common scale's state
        (:func:`~sklearn_quinn._core.evidence.output_bias_maximiser`; the bias's
        block of the exact posterior's covariance where the curvature is the
        full matrix, else the bias's alone), where that promises at least
        ``_MIN_SCALE_GAIN`` nats and the state there scores higher; where it
        promises less, the bias is left as it is, at no converged state's cost.

        A learned noise is instead updated once more at the polished MAP
        (:meth:`_update_at_the_mode`; twice for several outputs, whose ratios
        read the leverages of the update before). The training's last update sets it by
        the residuals of weights that then train for a fifth of the epochs and
        the polish; where those residuals are the network's approximation
        error rather than noise (a nearly noise-free table), they go on
        shrinking after it, and the noise would stay above them. The
        precisions stay those the weights trained under.

        The evidence of these converged states is exact up to
        ``AUTO_MAX_FULL_PARAMS`` weights (where ``hessian_structure='auto'``
        gives the posterior the full curvature), whatever structure the
        posterior asks for, not Kronecker-factored as the training's updates
        may take it: the factors over-penalise a weak prior, by hundreds of
        nats on a softmax network of a few thousand weights, and the scale is
        what a classifier's calibration turns on. One factorisation per step,
        where an update iterates many.
        """
        if self.learn_prior and net.criterion_.likelihood.curvature_varies_with_outputs:
            best = self._climb_scales(net)
        elif self.learn_noise:
            best = self._update_at_the_mode(net)
        else:
            best = self._converged_state(net)
        self.history_.append(best["record"])

    def _update_at_the_mode(self, net):
        """The state of the polished MAP after one more update of the learned noise there (as
        :meth:`finish` describes), recorded with the evidence at its weights, exact up to
        ``AUTO_MAX_FULL_PARAMS`` weights. The MAP is not polished again under the update: the
        L-BFGS polish of a ReLU network stops on kinks of its loss, and a second one, from a
        polished start under a moved loss, carries the rounding of the standardised targets into
        the predictions (``y`` and ``1000 * y + 7`` no longer give one fit)."""
        polish(net.module_, net.criterion_, self.X, self.targets)
        update = self._maximise(net, False, True, None, "final", output_dof=True)
        if self.Y.shape[1] > 1 and self._output_dof is not None:
            # Several outputs: the ratios read the leverages of the training's last update, at other
            # weights; one more update takes those of this one (the ratios then move by about 1e-3).
            self.history_.pop()
            update = self._maximise(net, False, True, None, "final")
        record = self.history_.pop()
        return {"record": record if update.structure in _EXACT_STRUCTURES else self._exact_record(net)[0]}

    def _climb_scales(self, net):
        """The converged state at the evidence's maximiser along the common scale of the last
        update's precisions, then along the output bias's own scale (as :meth:`finish`
        describes), times ``precision_factor``."""
        precision = self._precision(net) / self.precision_factor
        chosen = self._climb_scale(net, precision, np.ones(len(self.groups), dtype=bool))
        if self._climbs_output_bias(net):
            chosen = self._climb_output_bias_scale(net, chosen)
        if self.precision_factor != 1:
            chosen = self._converged_state(net, self.precision_factor * self._precision(net))
        return chosen

    def _climbs_output_bias(self, net):
        """Whether the output bias climbs its own scale after the common one (:meth:`finish`)."""
        return self.model.output_bias is not None and net.criterion_.likelihood.output_bias_sets_frequencies

    def _climb_output_bias_scale(self, net, chosen):
        """The converged state at the evidence's maximiser along the output bias's scale (as
        :meth:`finish` describes): ``chosen`` where the evidence predicted from its posterior
        (:func:`~sklearn_quinn._core.evidence.output_bias_maximiser`) promises less than
        ``_MIN_SCALE_GAIN`` nats along it, else the climb from the predicted maximiser, where the
        evidence there is the higher."""
        bias = np.arange(len(self.groups)) == self._output_bias_group()
        precision = self._precision(net)
        maximiser, gain = self._output_bias_maximiser(net, float(precision[bias][0]), chosen["bias_covariance"])
        if gain < _MIN_SCALE_GAIN:
            return chosen
        start = self._converged_state(net, np.where(bias, maximiser, precision))
        if _log_evidence(start) <= _log_evidence(chosen):
            self._restore(net, chosen)
            return chosen
        return self._climb_scale(net, self._precision(net), bias, start)

    def _output_bias_maximiser(self, net, precision, covariance):
        """:func:`~sklearn_quinn._core.evidence.output_bias_maximiser` at the current weights, from
        the bias's ``covariance`` in the exact posterior or, where that is None, the bias's alone."""
        module = self.model.module
        with torch.no_grad():
            if covariance is None:
                likelihood = net.criterion_.likelihood.frozen(self.Y.shape[1])
                covariance = bias_alone_covariance(likelihood, module(self.X), precision)
            return output_bias_maximiser(module.get_parameter(self.model.output_bias), precision, covariance)

    def _climb_scale(self, net, base, scaled, start=None):
        """The converged state at the evidence's maximiser along the scale of the precisions
        ``base`` of the groups ``scaled`` (the others held), from ``start`` (the state at
        ``base``; default: converged here)."""
        states = {0: start or self._converged_state(net, base)}  # by their steps from the base

        def converged(step):
            return self._converged_state(net, np.where(scaled, _SCALE_STEP**step * base, base))

        best = 0
        for direction in (-1, 1):
            step = direction
            while abs(step) <= _MAX_SCALE_STEPS:
                states[step] = converged(step)
                if _log_evidence(states[step]) < _log_evidence(states[best]) + _MIN_SCALE_GAIN:
                    break
                best, step = step, step + direction
            self._restore(net, states[best])
            if best != 0:
                break
        return self._parabolic_step(net, converged, states, best)

    def _parabolic_step(self, net, converged, states, best):
        """The better of ``states[best]`` and the converged state at the vertex of the parabola
        through it and its two neighbours, in the log of the scale (``converged(step)``, the state
        that many steps from the base): the climb's steps bracket the maximum, and one step of
        parabolic interpolation (Brent 1973, "Algorithms for Minimization without Derivatives")
        resolves it within the bracket where the parabola promises at least ``_MIN_SCALE_GAIN``
        nats. The net is left at the state returned."""
        if best - 1 not in states or best + 1 not in states:  # the climb ended at the end of its range
            return states[best]
        below, middle, above = (_log_evidence(states[step]) for step in (best - 1, best, best + 1))
        curvature = 2 * middle - below - above
        if curvature <= 0 or (above - below) ** 2 / (8 * curvature) < _MIN_SCALE_GAIN:
            return states[best]
        vertex = best + min(max((above - below) / (2 * curvature), -1.0), 1.0)
        state = converged(vertex)
        if _log_evidence(state) > middle:
            return state
        self._restore(net, states[best])
        return states[best]

    def _converged_state(self, net, precision=None):
        """Polish the MAP under the prior ``precision`` (default: the current
        one), and snapshot it with the record of its evidence. Targets that
        carry the means' posterior variances get those of this prior first
        (under the exact curvature, which the training's updates may have
        lacked), so that every state is polished on its own."""
        if precision is not None:
            net.criterion_.prior_precision = torch.as_tensor(precision, dtype=self.X.dtype)
        if self._carries_mean_variances:
            self._write_mean_variances(net, self._evidence(net, AUTO_MAX_FULL_PARAMS), self._precision(net))
        polish(net.module_, net.criterion_, self.X, self.targets)
        record, evidence = self._exact_record(net)
        return {"record": record, "module": copy.deepcopy(net.module_.state_dict()),
                "criterion": copy.deepcopy(net.criterion_.state_dict()),
                "precision": net.criterion_.prior_precision, "targets": self.targets.clone(),
                "bias_covariance": self._bias_covariance(net, evidence)}

    def _bias_covariance(self, net, evidence):
        """The output bias's posterior covariance from ``evidence``'s last factorisation where the
        output bias climbs its own scale (:meth:`_climb_output_bias_scale`) and the structure is
        the full matrix, else None."""
        if not self._climbs_output_bias(net):
            return None
        return evidence.covariance_block(torch.nonzero(self.groups.index == self._output_bias_group())[:, 0])

    def _output_bias_group(self):
        """The output bias's group (one group: a bias is not an input weight)."""
        return self.groups.names.index(self.model.output_bias)

    def _exact_record(self, net):
        """The record of the evidence at the current weights and hyperparameters, exact up to
        ``AUTO_MAX_FULL_PARAMS`` weights, and the :class:`LaplaceEvidence` it was taken with."""
        evidence = self._maximise(net, False, False, None, "final", max_full_params=AUTO_MAX_FULL_PARAMS)
        return self.history_.pop(), evidence

    def _restore(self, net, state):
        net.module_.load_state_dict(state["module"])
        net.criterion_.load_state_dict(state["criterion"])
        net.criterion_.prior_precision = state["precision"]
        self.targets.copy_(state["targets"])

    def _precision(self, net):
        """The criterion's prior precision, one per group, as an array."""
        precision = torch.as_tensor(net.criterion_.prior_precision).cpu().numpy()
        return np.broadcast_to(precision, len(self.groups)).copy()

    def _maximise(self, net, learn_prior, learn_noise, max_iterations, stage, max_full_params=None, tied=False,
                  output_dof=False):
        """Maximise the evidence at the current weights over the precisions and
        the noise (those learned: ``learn_prior``, ``learn_noise``), set them,
        and record the update (with nothing learned: only the evidence);
        ``max_full_params`` as for ``LaplaceEvidence``; ``tied``: one
        precision per parameter tensor (:meth:`ParameterGroups.tied`), each
        set on every group of its tensor; ``output_dof``: with a learned noise of
        several outputs, keep each output's well-determined weights for the next
        update's noise ratios (a pass of leverages over the rows).
        Returns the :class:`LaplaceEvidence` maximised."""
        criterion = net.criterion_
        likelihood = criterion.likelihood
        if learn_noise and self.Y.shape[1] > 1:
            self._share_noise_by_residuals(likelihood)
        groups = self.groups.tied() if tied else self.groups
        evidence = self._evidence(net, max_full_params, groups, every_row=stage != "training")
        start = self._precision(net)
        found, noise_scale, value = evidence.maximise(
            self.groups.tie(torch.as_tensor(start)).numpy() if tied else start, learn_prior, learn_noise,
            max_iterations=max_iterations,
            max_noise_scale=self._max_noise_scale(likelihood.output_noise_std(self.Y.shape[1])),
        )
        found = found * self.precision_factor if learn_prior else found
        precision = self.groups.untie(torch.as_tensor(found)).numpy() if tied else found
        if learn_prior:
            criterion.prior_precision = torch.as_tensor(precision, dtype=self.X.dtype)
        if learn_noise:
            with torch.no_grad():
                likelihood.log_noise_std.add_(math.log(noise_scale))
            if output_dof and self.Y.shape[1] > 1:
                leverage = evidence.leverage(found, noise_scale)
                self._output_dof = None if leverage is None else leverage.mean(0) * len(self.X)
        if self._carries_mean_variances:
            self._write_mean_variances(net, evidence, found)
        noise_std = likelihood.output_noise_std(self.Y.shape[1])
        self.history_.append({
            "epoch": len(net.history),
            "stage": stage,
            "log_evidence": value,
            "noise_std": None if noise_std is None else noise_std.cpu().numpy().astype(np.float64),
            **self.groups.as_dict(precision),
        })
        return evidence

    @property
    def _carries_mean_variances(self):
        return self.targets.shape[1] > self.Y.shape[1]

    def _evidence(self, net, max_full_params=None, groups=None, every_row=True):
        """The Laplace evidence at the current weights and noise over ``groups`` (default: the
        criterion's; ``max_full_params`` as for ``LaplaceEvidence``), from every row or, without
        ``every_row``, the training's subset of a big table's rows."""
        likelihood = net.criterion_.likelihood.frozen(self.Y.shape[1])
        X, Y, row_weight = (self.X, self.Y, 1.0) if every_row else self._subset
        return LaplaceEvidence(self.model, self.model.flatten(), X, Y, likelihood, groups or self.groups,
                               max_full_params=max_full_params, row_weight=row_weight)

    def _write_mean_variances(self, net, evidence, precision):
        """Write the means' posterior variances at ``precision`` into the targets' last
        columns (left as they are where ``evidence`` is diagonal and gives no leverages)."""
        leverage = evidence.leverage(precision)
        if leverage is not None:
            likelihood = net.criterion_.likelihood
            likelihood.set_mean_variances(self.targets, evidence.outputs, leverage.to(self.targets.dtype))

    def _max_noise_scale(self, noise_std):
        """The most the noise stds ``(O,)`` may grow by, a common factor: to no target's noise above
        its spread (None: no noise, or no target with a spread)."""
        bounded = self._spread > 0
        if noise_std is None or not bool(bounded.any()):
            return None
        return float((self._spread[bounded] / noise_std[bounded]).min())

    def _share_noise_by_residuals(self, likelihood):
        """Set the outputs' noise stds in the ratios of MacKay's noise of each output,
        ``SSE_o / (N - gamma_o)`` (``gamma_o`` the well-determined weights of output ``o``, the
        sum of its rows' leverages, as the training's last update or the mode's first left them;
        before, or where the evidence gives no leverages, ``SSE_o / N``), keeping their geometric
        mean, whose scale the evidence then learns: at the fixed point each output's noise is its
        own evidence maximiser. MacKay's update learns one scale: on its own it would keep the outputs' noise
        in the ratios it started at, equal for standardised targets whatever each output's share
        of noise. The outputs share the hidden layers, and an output of little noise determines
        more of them: ``SSE_o / N`` set its noise below its maximiser."""
        with torch.no_grad():
            residuals = self.Y - self.model(self.model.flatten()[None], self.X)[0]
            n_rows = len(self.X)
            dof = n_rows if self._output_dof is None else (n_rows - self._output_dof.to(residuals)).clamp(min=1.0)
            rms = (residuals.square().sum(0) / dof).sqrt()
            # An output fitted to rounding (a constant target, a custom module's exact one) would
            # set ratios of 1e-77; below the square root of the dtype's precision a ratio is rounding.
            floor = max(float(rms.max()) * torch.finfo(rms.dtype).eps ** 0.5, torch.finfo(rms.dtype).tiny)
            log_rms = torch.log(rms.clamp(min=floor))
            log_noise = likelihood.log_noise_std
            log_noise.copy_(log_rms - log_rms.mean() + log_noise.mean())


# The structures of LaplaceEvidence whose log determinant is exact.
_EXACT_STRUCTURES = ("kernel", "full")


def _log_evidence(state):
    return state["record"]["log_evidence"]


def mean_variances_available(n_rows, n_outputs, module):
    """Whether an evidence-driven training of ``module`` on ``n_rows`` rows can give the
    means' posterior variances: the exact curvature (at its end or at every update), or
    Kronecker factors covering every weight (:meth:`LaplaceEvidence.leverage`). A layer
    applied twice is found only when the factors are taken, by a forward pass: the evidence
    then falls back to the diagonal, which gives no leverages, and the columns keep the
    targets' resolution alone (``training_targets``)."""
    model = FunctionalModel(module)
    dtype = next(module.parameters()).dtype
    max_full_params = AUTO_MAX_FULL_PARAMS if polishable(n_rows, module) else None
    n_grams = KernelGrams.count(ParameterGroups.of(model))
    if exact_structure(n_rows * n_outputs, model.n_params, dtype, max_full_params, n_grams) is not None:
        return True
    try:
        layers, rest = kronecker_layers(model)
    except KroneckerUnsupportedError:
        return False
    return bool(layers) and not len(rest)


def evidence_epochs(max_epochs):
    """The epochs after which :class:`EvidenceMaximisation` updates, for a training of ``max_epochs``."""
    return {max(1, k * max_epochs // 20) for k in EVIDENCE_UPDATE_TWENTIETHS}


def _acts_within_epochs(callback):
    """Whether a skorch callback defines a batch or gradient hook (skorch's
    LRScheduler defines a batch hook, which does nothing unless it steps every
    batch)."""
    if isinstance(callback, LRScheduler):
        return callback.step_every == "batch"
    return any(getattr(type(callback), hook) is not getattr(Callback, hook)
               for hook in ("on_batch_begin", "on_batch_end", "on_grad_computed"))


class CtrlC:
    """Whether Ctrl-C raised the KeyboardInterrupt that ends a training: a handler calls the SIGINT
    handler before it and records the KeyboardInterrupt that one raises. One raised otherwise came
    from the code, as skorch's ``EarlyStopping`` stops a training, and so does one after a SIGINT
    that a handler of the user's only took note of. Where SIGINT is ignored, or ends the process
    (the default action, or a handler not installed from Python), none raises, and nothing is
    installed; nor outside the main thread, which signals do not reach and which may set none."""

    def __enter__(self):
        self.pressed = False
        previous = signal.getsignal(signal.SIGINT)
        main = threading.current_thread() is threading.main_thread()
        self._previous = previous if main and callable(previous) else None
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._record)
        return self

    def _record(self, signum, frame):
        try:
            self._previous(signum, frame)
        except KeyboardInterrupt:
            self.pressed = True
            raise

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


class PosteriorNet(NeuralNet):
    """A skorch net whose loss sees the module (for prior and variational terms),
    without skorch's per-batch bookkeeping.

    The criterion is called as ``criterion(y_pred, y_true, module)``. skorch
    records every batch's loss and size in the history, averages them into
    the epoch's loss through a scoring callback, scores an absent validation
    set, sets the training mode of every module and notifies every callback
    three times a step: on the small full-batch networks of tabular data that
    bookkeeping rivals the optimizer step
    (``benchmarks/bench_training_overhead.py``). Here an epoch sets the
    training mode once, takes its optimizer steps with nothing around them,
    and records its mean loss (``train_loss``, weighted by the batch rows, as
    skorch's scoring does, and ``train_loss_best``, whether it is the lowest
    so far) and its duration (``dur``); skorch's own step, its
    per-batch history and notifications run only when a callback defines a
    batch or gradient hook, or the fit passes parameters to the module.
    """

    #: The interrupt (Ctrl-C) that ended the training, if one did: skorch's ``partial_fit`` catches it
    #: and returns, for a notebook's user to keep the network trained so far, and an estimator would go
    #: on to its posterior from it; :func:`train_net` raises it again. A callback that stops the
    #: training raises a KeyboardInterrupt too (skorch's ``EarlyStopping``): that one, raised with no
    #: SIGINT behind it (:class:`CtrlC`), is no interruption, and the estimator goes on from where it
    #: stopped.
    interruption = None

    def get_default_callbacks(self):
        return [("epoch_timer", EpochTimer())]

    def fit_loop(self, X, y=None, epochs=None, **fit_params):
        self.interruption = None
        with CtrlC() as ctrl_c:
            try:
                return super().fit_loop(X, y, epochs=epochs, **fit_params)
            except KeyboardInterrupt as interruption:
                if ctrl_c.pressed:
                    self.interruption = interruption
                raise

    def __getstate__(self):
        """skorch's state, its module, criterion and optimizer written by cloudpickle where skorch
        writes them by pickle (what its ``__setstate__`` reads either way): a user's module class
        defined in a script or a notebook then reaches joblib's workers, and loads elsewhere."""
        state = self.__dict__.copy()
        prefixes = tuple(self.cuda_dependent_attributes_)
        devices = {key: state.pop(key) for key in list(state) if isinstance(key, str) and key.startswith(prefixes)}
        state["__cuda_dependent_attributes__"] = cloudpickle.dumps(devices)
        return state

    def on_train_begin(self, net, X=None, y=None, **kwargs):
        super().on_train_begin(net, X=X, y=y, **kwargs)
        self._hooks_within_epochs = any(_acts_within_epochs(callback) for _, callback in self.callbacks_)
        self._lowest_train_loss = math.inf

    def run_single_epoch(self, iterator, training, prefix, step_fn, **fit_params):
        if iterator is None:
            return
        lean = training and not self._hooks_within_epochs and not fit_params
        if lean:
            self._set_training(True)
        total, rows = 0.0, 0
        for batch in iterator:
            if self._hooks_within_epochs:
                self.notify("on_batch_begin", batch=batch, training=training)
            step = self._optimizer_step(batch) if lean else step_fn(batch, **fit_params)
            n_rows = len(batch[0])
            # Summed as a tensor: no synchronisation with an accelerator per step.
            total, rows = total + step["loss"].detach() * n_rows, rows + n_rows
            if self._hooks_within_epochs:
                self.history.record_batch(prefix + "_loss", step["loss"].item())
                self.history.record_batch(prefix + "_batch_size", n_rows)
                self.notify("on_batch_end", batch=batch, training=training, **step)
        loss = float(total) / rows
        self.history.record(prefix + "_loss", loss)
        if training:  # what skorch's scoring of the training loss records beside it, which callbacks may read
            best = loss < self._lowest_train_loss
            self.history.record("train_loss_best", best)
            if best:  # as skorch's: a NaN epoch is no best, and leaves the lowest as it was
                self._lowest_train_loss = loss

    def _optimizer_step(self, batch):
        """skorch's ``train_step`` for tensor batches and one optimizer, in
        the training mode the epoch set: the closure (which an optimizer such
        as L-BFGS calls several times) zeroes the gradients and backpropagates
        the loss, through ``infer`` and ``get_loss`` as skorch's does (a
        subclass's overrides hold); the step's loss is the closure's first, as
        skorch's."""
        X_batch, y_batch = (to_device(part, self.device) for part in batch)
        losses = []

        def closure():
            self.optimizer_.zero_grad()
            loss = self.get_loss(self.infer(X_batch), y_batch, X_batch, training=True)
            loss.backward()
            losses.append(loss)
            return loss

        self.optimizer_.step(closure)
        return {"loss": losses[0]}

    def get_loss(self, y_pred, y_true, X=None, training=False):
        y_true = to_tensor(y_true, device=self.device)
        return self.criterion_(y_pred, y_true, self.module_)


def batch_slices(n_rows, batch_size, max_batches=None):
    """The rows of each batch of an epoch over ``n_rows`` rows, as slices: every row once,
    or with ``max_batches`` the first ``max_batches`` batches' worth. A last batch of one
    row joins the one before it: a batch-norm layer cannot train on one row (a user's
    module with one failed whenever the rows left one over), and one row's step is all
    its own noise (where every batch is one row, as asked, they stay so)."""
    starts = list(range(0, n_rows, batch_size))
    if batch_size > 1 and len(starts) > 1 and n_rows - starts[-1] == 1:
        starts.pop()
    slices = [slice(start, stop) for start, stop in zip(starts, starts[1:] + [n_rows])]
    return slices if max_batches is None else slices[:max_batches]


class TensorBatches:
    """Minibatches of in-memory tensors by bulk indexing, for skorch's ``iterator_train``.

    Indexing whole batches avoids the per-row ``__getitem__`` and collate of a
    ``DataLoader``, which dominate an epoch of a small tabular network. With
    ``max_batches``, an epoch is its first ``max_batches`` batches: with
    ``shuffle``, a random subset of the rows, drawn afresh every epoch.
    """

    def __init__(self, dataset, batch_size, shuffle=False, generator=None, max_batches=None):
        self.X = torch.as_tensor(dataset.X)
        self.y = torch.as_tensor(dataset.y)
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.generator = generator
        self.max_batches = max_batches

    def __len__(self):
        return len(batch_slices(len(self.X), self.batch_size, self.max_batches))

    def __iter__(self):
        n_rows = len(self.X)
        if self.shuffle:
            order = torch.randperm(n_rows, generator=self.generator)
        else:
            order = torch.arange(n_rows)
        for batch in batch_slices(n_rows, self.batch_size, self.max_batches):
            rows = order[batch]
            yield self.X[rows], self.y[rows]


#: The heteroscedastic likelihood's warm-up weight falls linearly from 1 to 0
#: over this fraction of the epochs (:class:`MeanWarmUp`).
WARM_UP_FRACTION = 0.5


class MeanWarmUp(Callback):
    """Anneal a heteroscedastic likelihood's ``beta`` from 1 to 0 over the first
    ``WARM_UP_FRACTION`` of the epochs, so that the means are learned first
    and the training ends on the likelihood itself (see
    :class:`~sklearn_quinn._core.likelihoods.HeteroscedasticGaussianLikelihood`).
    A continuation: the objective moves from a mean-first loss to the
    negative log posterior, whose mode the training and its polish then find.
    The weight's cap is the likelihood's own (``beta_log_std_cap``)."""

    def __init__(self, likelihood, max_epochs):
        self.likelihood, self.max_epochs = likelihood, max_epochs

    def on_epoch_begin(self, net, **kwargs):
        done = (len(net.history) - 1) / max(1.0, WARM_UP_FRACTION * self.max_epochs)
        self.likelihood.beta = max(0.0, 1.0 - done)

    def on_train_end(self, net, **kwargs):
        self.likelihood.beta = 0.0


class EpochProgress(Callback):
    """A tqdm bar over epochs showing the training loss (``verbose=1``)."""

    def __init__(self, desc="MAP"):
        self.desc = desc

    def on_train_begin(self, net, **kwargs):
        from tqdm.auto import tqdm

        self.bar_ = tqdm(total=net.max_epochs, desc=self.desc, unit="epoch", leave=False)

    def on_epoch_end(self, net, **kwargs):
        self.bar_.update(1)
        self.bar_.set_postfix(loss=f"{net.history[-1, 'train_loss']:.4g}")

    def on_train_end(self, net, **kwargs):
        # A closed bar still holds its output stream: kept, it made the fitted net unpicklable (and
        # unusable by joblib's workers, which n_jobs sends the estimator to).
        self.bar_.close()
        del self.bar_


def train_net(module, criterion, X, Y, *, lr, lr_schedule, max_epochs, optimizer, callbacks,
              device, verbose, iterator=TensorBatches, desc="MAP", warm_up=True, **iterator_params):
    """Minimise ``criterion(module(X_batch), Y_batch, module)`` through skorch.

    Parameters
    ----------
    module, criterion : torch.nn.Module
        Trained in place (the criterion may own parameters, e.g. a log noise).
    X, Y : array-like
        Training data, no validation split.
    lr_schedule : {'cosine', 'constant'}
        'cosine' anneals the learning rate from ``lr`` to 0 over the epochs, so
        the last epochs settle into a mode.
    iterator : type, default=TensorBatches
        skorch's ``iterator_train``; ``iterator_params`` (``batch_size``
        among them) are passed to it.
    desc : str
        Label of the progress bar (``verbose=1``).
    warm_up : bool, default=True
        Fit the means first (:class:`MeanWarmUp`) when the criterion's
        likelihood has a warm-up weight; False for a training that starts
        from a mode (SWAG's trajectory).

    Returns
    -------
    net : PosteriorNet
        The fitted skorch net (``net.module_`` is ``module``).
    """
    progress = [("progress", EpochProgress(desc))] if verbose else []
    likelihood = getattr(criterion, "likelihood", None)
    warm = [("mean_warm_up", MeanWarmUp(likelihood, max_epochs))] if warm_up and hasattr(likelihood, "beta") else []
    schedule = []
    if lr_schedule == "cosine":
        annealing = LRScheduler(policy=torch.optim.lr_scheduler.CosineAnnealingLR, T_max=max_epochs)
        schedule = [("lr_schedule", annealing)]
    net = PosteriorNet(
        module=module,
        criterion=criterion,
        optimizer=optimizer,
        lr=lr,
        max_epochs=max_epochs,
        train_split=None,
        iterator_train=iterator,
        **{f"iterator_train__{name}": value for name, value in iterator_params.items() if name != "batch_size"},
        batch_size=iterator_params.get("batch_size", 128),
        callbacks=list(callbacks or []) + warm + schedule + progress,
        device=device,
        verbose=0,
    )
    net.fit(X, Y)
    if net.interruption is not None:  # skorch ends the training there and returns; the estimator must not go on
        raise net.interruption
    return net


def polish(module, criterion, X, Y, max_iterations=_POLISH_ITERATIONS):
    """Finish a training at a stationary point of its full-batch loss with L-BFGS.

    Adam under a cosine schedule stops short of the mode, the further the
    slower the loss flattens (near-separable classes, whose weights grow
    without end under a weak prior); the Laplace approximation and MacKay's
    evidence updates presume the mode. L-BFGS (Liu & Nocedal 1989, "On the
    limited memory BFGS method for large scale optimization") with a strong
    Wolfe line search from the trained weights takes a smooth full-batch loss
    to a stationary point in tens of steps; a ReLU network's, whose mode sits
    on kinks, it lowers slowly to the end of ``max_iterations``, where longer
    runs change the predictions little (docs/evidence.rst, "Ending at a
    mode"). It trains
    what the optimizer trained: the module's and the criterion's parameters
    that require gradients, through :class:`FlatPosteriorLoss` where that
    applies, else the module's autograd pass, with the module in eval mode:
    a user's dropout or batch norm then gives the deterministic loss that the
    curvature, the evidence and the predictions read.

    Parameters
    ----------
    module : torch.nn.Module
        Trained in place.
    criterion : torch.nn.Module
        The training's loss ``criterion(module(X), Y, module)``, deterministic
        given the weights (no dropout, no reparameterised draws).
    X, Y : ndarray or tensor
        The training data, as the module was trained on.
    max_iterations : int
    """
    parameters = [p for p in [*module.parameters(), *criterion.parameters()] if p.requires_grad]
    X, Y = to_tensor(X, device=parameters[0].device), to_tensor(Y, device=parameters[0].device)
    flat = FlatPosteriorLoss.of(module, criterion, X, Y)
    eps = torch.finfo(parameters[0].dtype).eps
    optimizer = torch.optim.LBFGS(flat.variables if flat else parameters, lr=1.0, max_iter=max_iterations,
                                  history_size=20, tolerance_grad=1e-2 * math.sqrt(eps), tolerance_change=eps,
                                  line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        if flat:
            return flat.loss_and_gradients()
        loss = criterion(module(X), Y, module)
        loss.backward()
        return loss

    with in_eval_mode(module):  # the loss the posterior reads: no dropout masks, batch norm's running statistics
        optimizer.step(closure)
    if flat:
        flat.write_back()


class FlatPosteriorLoss:
    """A negative log posterior of rows of weights ``theta (J, K)``, summed over the rows, for
    :func:`polish`: a criterion's data misfit of the outputs ``f(theta_j, X)`` plus the Gaussian
    prior ``0.5 sum_k delta_k (theta_jk - a_jk)**2 / n_train`` of each row about its anchor
    (none: zero), where the module runs :class:`~sklearn_quinn._core.network.FunctionalModel`'s
    fast path. One row is a network's MAP (:meth:`NegativeLogPosterior.flat_loss`); one row per
    member, an ensemble's members (the anchored loss's ``flat_loss``).

    The forward pass and its hand-written backward pass
    (:meth:`~sklearn_quinn._core.network.FunctionalModel.forward_and_vjp`) build no autograd graph
    over the weights, only over the likelihood of the outputs, whose trainable noise trains too: on
    the few hundred rows of a tabular fit, an evaluation of the loss and its gradient then costs
    a fraction of the module's autograd pass, whose overhead per operation dominates there.
    L-BFGS reads the same loss and gradient, in one tensor instead of one per layer.

    Parameters
    ----------
    model : FunctionalModel
    theta : tensor of shape (J, K)
        The weights L-BFGS trains (their ``grad`` is written).
    X : tensor of shape (N, D) or (J, N, D)
    misfit : callable
        The outputs ``(J, N, O)`` to the data misfit, a scalar.
    precision : tensor of shape (K,)
    criterion : nn.Module
        The criterion the loss is taken from: its ``n_train``, and its trainable parameters (the
        likelihood's), which L-BFGS trains beside ``theta``.
    anchors : tensor of shape (J, K) or float, default=0.0
    write_back : callable, default=None
        ``write_back(theta)`` puts the trained weights where they belong (None: ``theta`` is there).
    """

    def __init__(self, model, theta, X, misfit, precision, criterion, anchors=0.0, write_back=None):
        self.model, self.theta, self.X, self.misfit = model, theta, X, misfit
        self.precision, self.anchors, self.n_train = precision, anchors, criterion.n_train
        self._write_back = write_back
        #: What L-BFGS trains: the weights and the likelihood's trainable parameters.
        self.variables = [theta, *(p for p in criterion.parameters() if p.requires_grad)]

    @staticmethod
    def of(module, criterion, X, Y):
        """The flat loss of ``criterion(module(X), Y, module)`` (the criterion's ``flat_loss``), or
        None where the criterion has none or it does not apply."""
        flat_loss = getattr(criterion, "flat_loss", None)
        return None if flat_loss is None else flat_loss(module, X, Y)

    def loss_and_gradients(self):
        """The loss at the current weights, its gradients written to the variables' ``grad``."""
        with torch.no_grad():
            outputs, vjp = self.model.forward_and_vjp(self.theta, self.X)
        outputs = outputs.requires_grad_()
        misfit = self.misfit(outputs)
        misfit.backward()  # the outputs' cotangent, and the likelihood's trainable noise's gradient
        with torch.no_grad():
            offset = self.theta - self.anchors
            decay = self.precision * offset / self.n_train
            self.theta.grad = vjp(outputs.grad) + decay
            return misfit.detach() + 0.5 * (decay * offset).sum()

    def write_back(self):
        """Put the trained weights where they belong (a module's parameters)."""
        if self._write_back is not None:
            self._write_back(self.theta.detach())


def polishable(n_rows, module):
    """Whether a full-batch L-BFGS polish of ``module`` on ``n_rows`` rows is cheap next to its training."""
    return n_rows * sum(p.numel() for p in module.parameters()) <= _POLISH_MAX_WORK


def fit_map(module, X, Y, *, prior_precision, likelihood, lr, lr_schedule, max_epochs, batch_size,
            optimizer, callbacks, device, seed, verbose, groups=None, evidence=None, finish=True, warm_up=True,
            desc="MAP", max_batches=None):
    """Train ``module`` to the MAP of ``likelihood`` under a Gaussian prior.

    Parameters
    ----------
    module : torch.nn.Module
        Already on ``device`` in the working dtype; trained in place.
    X, Y : ndarray or tensor of shape (N, D) and (N, O'), in the working dtype.
        ``Y`` holds one column of class indices for a categorical likelihood,
        and may carry the variances a noise head covers beside the residuals after
        the targets (``EvidenceMaximisation``'s ``targets``).
    prior_precision : float or tensor of shape (G,)
        See :class:`NegativeLogPosterior`.
    likelihood : GaussianLikelihood or CategoricalLikelihood
        Its trainable parameters (an estimated noise) are trained with the network.
    groups : ParameterGroups, default=None
        The groups of a precision per group (see :class:`NegativeLogPosterior`).
    evidence : EvidenceMaximisation, default=None
        Learns the prior precisions and the noise during training; ``Y``
        must then be its ``targets``.
    finish : bool, default=True
        End at a stationary point of the full-batch loss (:func:`polish`)
        when that is cheap (:func:`polishable`), with learned hyperparameters
        through :meth:`EvidenceMaximisation.finish`; False for a loss that is
        random given the weights (dropout) or a trajectory that is not meant
        to reach a mode (SWAG's).
    warm_up : bool, default=True
        As for :func:`train_net`.
    desc : str, default='MAP'
        Label of the training, as for :func:`train_net`.
    max_batches : int, default=None
        Steps an epoch at most (:class:`TensorBatches`); None: every batch.
    seed : int
        Seeds the minibatch shuffling; the caller's global torch state is
        left untouched.
    lr, lr_schedule, max_epochs, optimizer, callbacks, device, verbose
        As for :func:`train_net`.

    Returns
    -------
    net : PosteriorNet
        The fitted skorch net (``net.module_`` is ``module``,
        ``net.criterion_.likelihood`` the trained likelihood,
        ``net.criterion_.prior_precision`` the final prior precisions).
    """
    callbacks = list(callbacks or []) + ([("evidence", evidence)] if evidence is not None else [])
    net = train_net(
        module, NegativeLogPosterior(X.shape[0], prior_precision, likelihood, groups), X, Y, lr=lr,
        lr_schedule=lr_schedule, max_epochs=max_epochs, optimizer=optimizer, callbacks=callbacks,
        device=device, verbose=verbose, batch_size=min(batch_size, X.shape[0]), shuffle=True,
        generator=torch.Generator().manual_seed(seed), max_batches=max_batches, warm_up=warm_up, desc=desc,
    )
    if finish and polishable(X.shape[0], module):
        if evidence is None:
            polish(net.module_, net.criterion_, X, Y)
        else:
            evidence.finish(net)
    warn_unless_below_zero_weights(net, X, Y, lr)
    return net


def warn_unless_below_zero_weights(net, X, Y, lr):
    """Warn where a trained network fits its training rows worse than itself with every weight at zero.

    The prior's penalty is non-negative and zero at zero weights, so at the MAP the negative log
    posterior is at most its value there, and so is the data's misfit alone. A training that ends
    above it has not reached the MAP: it diverged (steps too large for the data's scale), or
    stopped early, and a posterior built about it is confidently wrong. A training that ends near
    a poorer mode passes (every unit dead: the output bias alone fits the targets' mean, which
    standardised targets put at the zero network's 0, a tie within rounding). Not checked: a
    module whose zero weights give no finite misfit (a weight norm's parametrisation divides by
    them), and targets equal on every row, where the zero network is the mode itself, the noise
    has nothing to be learned from and sits at its floor, and a trained network's residuals of
    1e-4 cost more than its exact fit without saying anything of the training.
    """
    from .base import PREDICT_BLOCK_ROWS  # the rows a prediction takes at once: the activations' memory

    module, criterion = net.module_, net.criterion_
    if bool((Y == Y[:1]).all()):
        return
    device = next(module.parameters()).device
    zeros = {name: torch.zeros_like(parameter) for name, parameter in module.named_parameters()}
    trained = at_zero = 0.0
    with torch.no_grad(), in_eval_mode(module):
        for rows in batch_slices(len(X), PREDICT_BLOCK_ROWS):
            X_rows, Y_rows = to_tensor(X[rows], device=device), to_tensor(Y[rows], device=device)
            trained += float(criterion.misfit(module(X_rows), Y_rows)) * len(X_rows)
            at_zero += float(criterion.misfit(torch.func.functional_call(module, zeros, (X_rows,)), Y_rows)) \
                * len(X_rows)
    trained, at_zero = trained / len(X), at_zero / len(X)
    if not math.isfinite(at_zero):
        return
    tolerance = math.sqrt(torch.finfo(X_rows.dtype).eps) * (1.0 + abs(at_zero))
    if not trained <= at_zero + tolerance:  # a NaN misfit of the trained network warns too
        warn(ConvergenceWarning(
            f"The MAP training ended at weights that fit the training rows worse than the same network with "
            f"every weight at zero (negative log likelihood {trained:.4g} a row, against {at_zero:.4g}), where "
            "the prior's penalty is least: it did not reach a mode, and the uncertainty built on it is not to be "
            f"trusted. Lower the learning rate (lr={lr}) or train longer (max_epochs); with normalize_X=False, "
            "scale the inputs."
        ))


def gaussian_likelihood(Y, noise_std, dtype, device, leading_shape=()):
    """The Gaussian likelihood of a fit: fixed ``noise_std`` (per output), or
    None for a trained noise starting at the target's std. Its noise has shape
    ``leading_shape + (O,)`` (e.g. ``(J, 1)`` for one per ensemble member)."""
    start = max(float(Y.std()), 1e-3) if noise_std is None else noise_std
    noise = torch.as_tensor(np.broadcast_to(start, (*leading_shape, Y.shape[1])).copy(), dtype=dtype, device=device)
    return GaussianLikelihood(noise, learn_noise=noise_std is None)
