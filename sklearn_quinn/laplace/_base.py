"""The Laplace family's core: ``fit``, the evidence and the calibration hooks, for both tasks."""

import warnings
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._core.curvature import CURVATURES, STRUCTURES, check_full_fits, choose_model_structure
from .._core.evidence import ParameterGroups
from .._core.kronecker import KroneckerUnsupportedError
from .._core.last_layer import LastLayerModel
from .._core.network import FunctionalModel
from .._core.pushforward import linear_pushforward
from .._validation import check_positive
from .._warnings import warn
from ..base import MAP_TRAINING_CONSTRAINTS, PRIOR_SCALE_CONSTRAINTS
from ._engine import LaplaceApproximation, refuse_factored_hessian
from ._gridsearch import GridsearchPriorMixin
from ._loo import site_cavities

# A diagonal evidence that multiplies the MAP noise by more than this gets a warning.
_NOISE_INFLATION_WARNING = 3.0


class LaplaceMixin(GridsearchPriorMixin):
    """A Gaussian at the MAP with the curvature as precision.

    Its ``_fit`` serves :class:`~sklearn_quinn.LaplaceRegressor` and
    :class:`~sklearn_quinn.LaplaceClassifier`: train the MAP, decompose the
    curvature once (:class:`~sklearn_quinn.laplace._engine.LaplaceApproximation`),
    choose the prior precision (and a regressor's noise scale), keep
    ``posterior_``. The task base supplies the likelihood and turns the
    outputs' distribution into predictions.
    """

    _laplace_constraints: dict = {
        **MAP_TRAINING_CONSTRAINTS,
        **PRIOR_SCALE_CONSTRAINTS,
        "hessian_structure": [StrOptions({*STRUCTURES, "kron", "lowrank", "auto"})],
        "memory_budget": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "max_rank": [Interval(Integral, 1, None, closed="left")],
        "subset_of_weights": [StrOptions({"all", "last_layer"})],
        "curvature": [StrOptions(set(CURVATURES))],
        "cov_scale": [Interval(Real, 0, None, closed="neither")],
        "pushforward": [StrOptions({"linear", "nonlinear"})],
        "prior_precision": [None, StrOptions({"marglik", "gridsearch"}), Interval(Real, 0, None, closed="neither")],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "n_samples": [Interval(Integral, 1, None, closed="left")],
    }

    def _check_parameters(self):
        super()._check_parameters()
        refuse_factored_hessian(self.hessian_structure, self.curvature)

    def _check_the_posterior_before_training(self, X, Y):
        """Refuse, on the untrained network the MAP training will start from, a last layer the
        posterior cannot be taken over, and an explicit full matrix past its budget: both were
        refused after the whole training."""
        if self.subset_of_weights != "last_layer" and self.hessian_structure != "full":
            return
        with self._seeded(self._map_seed), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the module's own warnings come with the training's build of it
            model = FunctionalModel(self._build_module(X.shape[1], self._n_outputs(Y)))
        if self.subset_of_weights == "last_layer":
            model = LastLayerModel(model, model.flatten().detach(), self._tensor(X[:8]))
        if self.hessian_structure == "full":
            check_full_fits(model.n_params, self._dtype)

    def _fit(self, X, Y):
        """Train the MAP network, then fit the Laplace posterior around it: the family's part of ``fit``."""
        X, Y, held_out = self._hold_out(X, Y, stratify=self._stratification(Y))
        self._log_y_scale = self._log_y_scale_total(len(X))
        self._check_the_posterior_before_training(X, Y)
        theta, likelihood, prior, _ = self._fit_map(X, Y, self.prior_std_scale)
        # The curvature is taken at the MAP's noise, one per output, held fixed.
        self._map_noise_std = likelihood.output_noise_std(Y.shape[1])
        # A learned prior keeps its shape across groups; prior_precision_ then scales it.
        learned = self.prior_std is None and not isinstance(self.prior_precision, Real)
        prior_shape = prior.precision if learned else None
        if self.subset_of_weights == "last_layer":
            groups = ParameterGroups.of(self._model)
            self._model = LastLayerModel(self._model, theta, self._tensor(X))
            theta = self._model.flatten()
            prior_shape = None if prior_shape is None else prior_shape[self._model.index.to(theta.device)]
            in_head = [groups.tensor_names[tensor] in self._model.names for tensor in groups.tensors.tolist()]
            self.prior_precisions_ = {name: self.prior_precisions_[name]
                                      for name, kept in zip(groups.names, in_head) if kept}
        self._group_precisions = self.prior_precisions_ if learned else dict.fromkeys(self.prior_precisions_, 1.0)
        self._choose_structure(theta)

        def laplace():
            return LaplaceApproximation(
                self._model, theta, self._tensor(X), self._tensor(Y), likelihood.frozen(Y.shape[1]),
                kind=self.curvature, structure=self.hessian_structure_, prior_shape=prior_shape,
                rank=self.max_rank, seed=self._split_seed,
            )

        try:
            self._laplace = laplace()
        except KroneckerUnsupportedError as error:
            if self.hessian_structure != "auto":
                raise
            self.hessian_structure_ = "diag"
            self.hessian_structure_reason_ += f"; but {error} So diag."
            self._laplace = laplace()
        self._noise_scale = 1.0
        self.prior_precision_ = 1.0 if learned else (self.prior_std or 1.0) ** -2
        if isinstance(self.prior_precision, Real):
            self.prior_precision_ = float(self.prior_precision)
        elif self.prior_precision == "marglik":
            self.prior_precision_, self._noise_scale = self._laplace.maximise_evidence(
                self.prior_precision_, tune_noise=likelihood.learn_noise
            )
            self._warn_noise_inflation()
        self.cov_scale_ = self._initial_cov_scale(X, Y)
        self._set_posterior_scale("noise_scale", self._noise_scale)
        if self.prior_precision == "gridsearch":
            self._search_prior_precision(held_out)

    def _choose_structure(self, theta):
        """Set ``hessian_structure_`` and ``hessian_structure_reason_``."""
        if self.hessian_structure != "auto":
            self.hessian_structure_, self.hessian_structure_reason_ = self.hessian_structure, "as asked"
            return
        self.hessian_structure_, self.hessian_structure_reason_ = choose_model_structure(
            self._model, theta, self.memory_budget, self.curvature
        )

    def _warn_noise_inflation(self):
        if self.hessian_structure_ == "diag" and self._noise_scale > _NOISE_INFLATION_WARNING:
            warn(
                f"The diagonal Laplace evidence raised the noise std {self._noise_scale:.1f}-fold "
                "over the MAP's. The diagonal's log-determinant overstates the Occam factor "
                "(Hadamard's inequality), which favours large noise; consider "
                "hessian_structure='full' or a fixed noise_std."
            )

    def log_marginal_likelihood(self, prior_precision=None):
        """Laplace approximation of the log evidence ``log p(y | X)``.

        Evaluated at the fitted noise and MAP, in the units of y (the
        standardisation of ``normalize_y`` is accounted for), with the
        curvature of ``hessian_structure``. Exact for a linear model at the
        fitted prior, whose MAP it is; at another ``prior_precision`` it is the
        Laplace evidence about the fitted MAP, not the MAP of that prior (what
        ``prior_precision='marglik'`` and the grid search compare).

        Parameters
        ----------
        prior_precision : float, default=None
            The prior precision at which to evaluate it, as ``prior_precision_``
            reads: the precision of every weight for a fixed prior, the factor
            on the learned precisions (``prior_precisions_``) for a learned
            one. None uses ``prior_precision_``.

        Returns
        -------
        float
        """
        check_is_fitted(self)
        delta = self.prior_precision_ if prior_precision is None else check_positive(prior_precision, "prior_precision")
        value = self._laplace.log_marginal_likelihood(delta, self._noise_scale)
        # y = mean + scale * y_standardised: the density of y carries 1 / scale per value.
        return float(value) - self._log_y_scale

    def _outputs(self, X, posterior=None):
        if self.pushforward == "linear":
            return linear_pushforward(self._model, self.posterior_ if posterior is None else posterior, X)
        return super()._outputs(X, posterior)

    def _sample_outputs(self, X, n_samples, generator):
        if self.pushforward == "linear":
            return self._outputs(X).sample(n_samples, generator), self._noise_std
        return super()._sample_outputs(X, n_samples, generator)

    # ------------------------------------------------------------ calibration
    def _scales(self, param, value):
        """Prior precision, noise scale and cov_scale, with ``param`` set to ``value``."""
        scales = dict(
            prior_precision=self.prior_precision_, noise_scale=self._noise_scale, cov_scale=self.cov_scale_
        )
        scales[param] = value
        return scales

    def _noise_at(self, noise_scale):
        """The noise std at ``noise_scale`` times the MAP's (None without a noise)."""
        return None if self._map_noise_std is None else self._map_noise_std * noise_scale

    def _calibration_path(self, X, param):
        """``value -> prediction summary`` over ``X`` with ``param`` set to ``value``.

        The summary is the task's (``(y_mean, y_std)`` or class
        probabilities). The linear pushforward projects the Jacobian on the
        curvature's eigenvectors once, so each value costs ``O(N K)`` (times
        the predictive); over ``cov_scale``, which divides one covariance, it
        takes that covariance from the posterior's factor and needs no
        eigenvectors. The nonlinear one factors the posterior at each value
        (once over ``cov_scale``) and samples. A noise scale ``c`` multiplies
        the MAP's noise std and divides the curvature by ``c**p``.
        """
        X = self._validated_inputs(X)
        if self.pushforward == "linear" and param == "cov_scale":
            mean, fitted = self._linearised_at_fit(X)

            def covariance(prior_precision, noise_scale, cov_scale):
                return fitted / cov_scale
        elif self.pushforward == "linear":
            mean, covariance = self._laplace.linearised(self._model, X)

        def path(value):
            scales = self._scales(param, value)
            noise_std = self._noise_at(scales["noise_scale"])
            with torch.no_grad():
                if self.pushforward == "linear":
                    return self._summarise_gaussian(mean, covariance(**scales), noise_std)
                return self._summarise(self._outputs(X, self._laplace.posterior(**scales)), noise_std)

        return path

    def _set_posterior_scale(self, param, value):
        """Re-scale the posterior in place: ``prior_precision_``, ``cov_scale_`` or
        the noise scale (``noise_std_`` = MAP noise x value) becomes ``value``."""
        if param == "noise_scale":
            self._noise_scale = float(value)
            self._keep_noise(self._noise_at(self._noise_scale))
        else:
            setattr(self, f"{param}_", float(value))
        self.prior_precisions_ = {name: shape * self.prior_precision_ for name, shape in self._group_precisions.items()}
        self.posterior_ = self._laplace.posterior(self.prior_precision_, self._noise_scale, self.cov_scale_)

    def _linearised_at_fit(self, X):
        """The linearised network's outputs over ``X`` (a tensor): the mean ``(N, O)`` and the
        covariance ``(N, O, O)`` at the fitted prior precision and noise scale and a ``cov_scale``
        of 1, which a ``cov_scale`` ``s`` divides by ``s``. From the posterior's Cholesky factor:
        where only ``s`` varies, the full curvature's eigen decomposition, which costs about
        twenty factorisations, is not needed."""
        with torch.no_grad():
            posterior = self._laplace.posterior(self.prior_precision_, self._noise_scale)
            outputs = linear_pushforward(self._model, posterior, X)
            return outputs.mean, outputs.output_covariance()

    def _stratification(self, Y):
        """Labels to stratify the held-out rows by (None: no stratification)."""
        return None

    def _initial_cov_scale(self, X, Y):
        """The posterior's ``cov_scale_`` once fitted, before any search: ``cov_scale``."""
        return float(self.cov_scale)


#: Values of ``cov_scale='loo'``: from the evidence's posterior (1) to nearly the MAP (1000).
LOO_COV_SCALES = np.logspace(0, 3, 13)


class LaplaceClassificationMixin:
    """What the Laplace classifier adds: stratified held-out rows, the
    check that a nonlinear pushforward only averages the softmax, and
    ``cov_scale='loo'``."""

    _gaussian_logits = True

    def _initial_cov_scale(self, X, Y):
        """``cov_scale``, or with 'loo' the value of ``LOO_COV_SCALES`` with the
        least leave-one-out NLL of the training rows.

        Each row's leave-one-out predictive is ``predictive`` over its
        closed-form cavity (:func:`~sklearn_quinn.laplace._loo.site_cavities`),
        whose covariance at ``s`` is that at 1 divided by ``s``. The removal
        is exact where the posterior's precision holds each row's term whole,
        the full GGN or empirical Fisher. The diagonal holds its diagonal alone
        (whose removal moves a row's outputs far more than a refit would),
        Kronecker factors and a low rank approximate the sum, not its terms, and
        the exact Hessian has no term of a row in the outputs (the network's own
        second derivatives): the exact site removed from those left cavities
        that were not positive definite (docs: laplace). There ``cov_scale_`` is
        1, with a warning where the structure or the curvature was asked for;
        where ``hessian_structure='auto'`` chose the structure, its
        ``hessian_structure_reason_`` says so instead (a default classifier on a
        wide table would warn at every fit of something it cannot act on).
        """
        if self.cov_scale != "loo":
            return super()._initial_cov_scale(X, Y)
        if self.curvature == "hessian" or self.hessian_structure_ != "full":
            if self.hessian_structure == "auto" and self.curvature != "hessian":
                self.hessian_structure_reason_ += "; cov_scale='loo' needs the full structure, so cov_scale_ is 1"
            else:
                what = ("curvature='hessian' has no term of a row in the outputs" if self.curvature == "hessian"
                        else f"hessian_structure_={self.hessian_structure_!r} does not hold each row's term whole")
                warn(f"cov_scale='loo' leaves each training row's term out of the posterior, and {what}: "
                     "cov_scale_ is 1, the evidence's posterior. Give a float cov_scale (calibrate can choose "
                     "it on held-out rows), or hessian_structure='full'.")
            return 1.0
        X, Y = self._tensor(X), self._tensor(Y)
        labels = Y[:, 0].long()
        cavity_mean, cavity_covariance = self._unit_cavities(X, Y)
        if not bool(torch.isfinite(cavity_covariance).all()):
            warn("cov_scale='loo': some training rows' leave-one-out cavities are improper in floating point "
                 "(the posterior is too badly conditioned, as at weights far from a mode), so cov_scale_ is 1. "
                 "Give a float cov_scale (calibrate can choose it on held-out rows).")
            return 1.0
        rows = torch.arange(len(labels), device=labels.device)
        scores = []
        with torch.no_grad():
            for scale in LOO_COV_SCALES:
                log_probabilities = self._gaussian_log_probabilities(cavity_mean, cavity_covariance / scale)
                scores.append(float(-log_probabilities[rows, labels].mean()))
        self.loo_scores_ = np.array(scores)
        return float(LOO_COV_SCALES[int(np.argmin(scores))])

    def _unit_cavities(self, X, Y):
        """The training rows' leave-one-out cavities at ``cov_scale`` 1. A row's site in the outputs
        is the likelihood's Hessian for the GGN, its gradient's outer product for the empirical
        Fisher."""
        likelihood = self._likelihood(Y)
        mean, covariance = self._linearised_at_fit(X)
        gradient = likelihood.output_gradient(mean, Y)
        site = (gradient.unsqueeze(-1) * gradient.unsqueeze(-2) if self.curvature == "ef"
                else likelihood.output_hessian(mean))
        with torch.no_grad():
            return site_cavities(mean, covariance, gradient, site)

    def _check_predictive(self):
        """Fail where ``predictive`` needs the Gaussian over the logits that ``pushforward='nonlinear'``
        does not give: at fit, and again at predict, after any ``set_params``."""
        super()._check_predictive()
        if self.pushforward == "nonlinear" and self.predictive != "mc_bridge":
            raise ValueError(
                f"predictive={self.predictive!r} needs the Gaussian over the logits of "
                "pushforward='linear'; pushforward='nonlinear' averages the softmax over weight "
                "draws (predictive='mc_bridge')."
            )

    def _stratification(self, Y):
        codes = Y.ravel().astype(np.intp)  # the class indices (Y is 2-D)
        return codes if np.bincount(codes).min() >= 2 else None
