"""Shared machinery of the regressors: standardised targets, the likelihood, predict and sample_y."""

import numpy as np
import torch
from sklearn.base import RegressorMixin
from sklearn.utils import Bunch, check_random_state
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_array, validate_data

from ._core.curvature import AUTO_MAX_FULL_PARAMS
from ._core.evidence import LaplaceEvidence, ParameterGroups
from ._core.likelihoods import LOG_STD_BOUND, GaussianLikelihood, HeteroscedasticGaussianLikelihood
from ._core.pushforward import GaussianPredictive
from ._core.rng import gaussian_draws, prediction_generator
from ._core.row_subsets import random_subset
from ._map import gaussian_likelihood
from ._validation import check_count
from ._warnings import warn
from .base import _MAX_SEED, STD_RANGE, VALIDATION, BaseBayesianNetwork, dense_rows

#: The likelihood of each value of ``likelihood``: its network outputs, and how
#: they become the means and the noise.
LIKELIHOODS = {"gaussian": GaussianLikelihood, "heteroscedastic": HeteroscedasticGaussianLikelihood}


class BaseBayesianRegressor(RegressorMixin, BaseBayesianNetwork):
    """Base class of the regressors: a torch backbone with a weight posterior.

    A subclass fits ``posterior_`` in :meth:`fit` and may override
    the family's :meth:`_outputs` (the distribution of the network outputs at ``X``) and
    :meth:`_sample_outputs`; this class turns them into ``predict`` and
    ``sample_y`` with the observation noise added and the target's units
    restored.
    """

    # Under scikit-learn's metadata routing a Pipeline passes predict's keywords on only to a step that
    # requests them; requested here by default, so that pipe.predict(X, return_std=True), and so the
    # package's scorers, work on a Pipeline whatever the routing.
    __metadata_request__predict = {"return_std": True, "return_cov": True}

    #: Whether networks trained beside the MAP (an ensemble's members, MultiSWAG's, MCMC's chain
    #: starts) end at their modes, as the MAP does
    #: (:func:`~sklearn_quinn.ensemble._engine.finish_members`).
    _members_end_at_modes = True

    _parameter_constraints: dict = {
        **BaseBayesianNetwork._parameter_constraints,
        "noise_std": [None, STD_RANGE],
        "normalize_y": ["boolean"],
        "likelihood": [StrOptions(set(LIKELIHOODS))],
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def _validate_training_data(self, X, y):
        """Validated ``X`` and 2-D ``Y`` in the network's (standardised) units."""
        if self.likelihood == "heteroscedastic" and self.noise_std is not None:  # the parameters, before the fit
            raise ValueError(
                f"noise_std={self.noise_std!r} fixes the noise, which likelihood='heteroscedastic' "
                "predicts from the inputs; set noise_std=None or likelihood='gaussian'."
            )
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True, **VALIDATION)
        X = dense_rows(X)
        if len(y) < 2 and self._learns_from_the_rows:
            raise ValueError(
                f"{type(self).__name__} learns its prior or its noise from the training rows, and one row "
                "(n_samples=1) holds no spread to learn them from; give at least 2 rows, or fix the prior "
                "and the noise (prior_std, noise_std, likelihood='gaussian')."
            )
        Y = np.ascontiguousarray(y.reshape(len(y), -1), dtype=np.float64)  # float16 or float32 targets too
        if not self.normalize_y:  # before the fit's state is set: a warning raised as an error leaves the earlier fit
            self._warn_of_unscaled_targets(Y)
        self._single_output = y.ndim == 1 or Y.shape[1] == 1
        # What the network's outputs mean is the fit's: a set_params(likelihood=...) after it takes
        # effect at the next fit, not in this one's predictions (a mean read as a log noise std).
        self._likelihood_name = self.likelihood
        if self.normalize_y:
            self._y_mean, self._y_scale = target_standardisation(Y)
        else:
            self._y_mean = np.zeros(Y.shape[1])
            self._y_scale = np.ones(Y.shape[1])
        return X, (Y - self._y_mean) / self._y_scale

    def _state_loaded(self, state):
        # A fit pickled before its likelihood's name was kept (2026-12-06) was fitted with its parameter's.
        state.setdefault("_likelihood_name", state["likelihood"])
        return super()._state_loaded(state)

    @property
    def _learns_from_the_rows(self):
        """Whether the fit learns or samples a prior or a noise from the training rows (a
        heteroscedastic noise head needs noise_std=None)."""
        return self.prior_std is None or self.noise_std is None

    @property
    def _fits_in_unit_scale(self):
        """Whether the fit trains a network by minibatch steps, or learns or samples a prior or a
        noise, all set for standardised targets: a sampler from a fixed prior and noise does neither."""
        return True

    def _warn_of_unscaled_targets(self, Y):
        """With ``normalize_y=False`` the network works in y's units. Targets of a std far from 1
        (beyond a factor of ``exp(UNSCALED_TRAINING_LOG_SPREAD)``), or about a mean far from 0 (a root
        mean square beyond it: the outputs must reach it), train slowly, Adam's steps being
        of about ``lr`` whatever the scale, and the evidence's first updates, taken from weights
        still short of it, can lock in a prior that keeps them there (docs: evidence); the priors,
        hyperpriors and the heteroscedastic noise head's clip at ``±LOG_STD_BOUND`` are all for
        standardised targets, and targets whose noise reaches the clip leave it unbounded."""
        spread = Y.std(axis=0)
        log_spread = np.log(spread[spread > 0])
        stds = ", ".join(f"{value:.3g}" for value in spread)
        # What the network's outputs must reach: a mean of 1e4 at a spread of 1 trains as slowly.
        reach = np.sqrt(np.mean(np.square(Y), axis=0))
        log_reach = np.log(reach[reach > 0])
        spread_far = np.any(np.abs(log_spread) > UNSCALED_TRAINING_LOG_SPREAD)
        # Below: the noise lies under the spread, nearer the lower bound; above: only the spread itself
        # can near the upper one.
        if self.likelihood == "heteroscedastic" and (
            np.any(log_spread < -UNSCALED_LOG_SPREAD) or np.any(log_spread > LOG_STD_BOUND - UNSCALED_MARGIN)
        ):
            warn(
                f"normalize_y=False with likelihood='heteroscedastic': the noise head's log std is clipped to "
                f"+-{LOG_STD_BOUND:g} in the units of y, and the targets' std ({stds}) puts their noise near "
                "that bound, where the noise is poorly learned; keep normalize_y=True."
            )
        elif self._fits_in_unit_scale and (spread_far or np.any(log_reach > UNSCALED_TRAINING_LOG_SPREAD)):
            far = (f"the targets' std is {stds}" if spread_far
                   else "the targets' mean is " + ", ".join(f"{value:.3g}" for value in Y.mean(axis=0)))
            warn(
                f"normalize_y=False: the network trains in the units of y, where {far}, far from the unit "
                "scale its training, its priors and its noise are set for: the training may stop short of the "
                "fit and the learned prior hold it there; keep normalize_y=True."
            )

    def _n_outputs(self, Y):
        """A mean per target, and under the heteroscedastic likelihood a log noise std per target."""
        return LIKELIHOODS[self._likelihood_name].n_network_outputs(Y.shape[1])

    def _outputs_meaning(self, n_outputs):
        """What a user's module's output columns must be (for its error message)."""
        if self._likelihood_name == "heteroscedastic":
            return f"a mean and a log noise std per target, the {n_outputs // 2} mean(s) first"
        return f"one mean per target ({n_outputs})"

    def _likelihood(self, Y, leading_shape=(), noise_std=None):
        """The likelihood of a fit. Heteroscedastic: the network's noise head.
        Gaussian: fixed at ``noise_std`` (network units, ``(O,)``; default: the
        ``noise_std`` parameter), or a learned noise of shape
        ``leading_shape + (O,)``, one per output."""
        if self._likelihood_name == "heteroscedastic":
            return HeteroscedasticGaussianLikelihood.for_targets(Y)
        if noise_std is None:
            noise_std = self._fixed_noise()
        elif isinstance(noise_std, torch.Tensor):
            noise_std = noise_std.cpu().numpy()
        return gaussian_likelihood(Y, noise_std, self._dtype, self._device, leading_shape)

    def _log_y_scale_total(self, n_rows):
        """``n_rows * sum(log scale)``: a density of ``y`` is that of the
        standardised target divided by the scale of each of its values."""
        return n_rows * float(np.log(self._y_scale).sum())

    def _fixed_noise(self):
        """The fixed ``noise_std`` in network units, or None when it is estimated."""
        return None if self.noise_std is None else self.noise_std / self._y_scale

    def _keep_noise(self, noise_std):
        """Keep the network-unit noise ``(O,)`` and report ``noise_std_`` in units of y
        (None under the heteroscedastic likelihood, whose noise varies with the inputs)."""
        self._noise_std = noise_std
        self.noise_std_ = self._std_in_y_units(noise_std)

    def _std_in_y_units(self, std):
        """A network-unit std per output ``(O,)`` in the units of y: a float for one target, an
        array ``(n_targets,)`` for several (None stays None)."""
        return None if std is None else self._per_output(self._to_numpy(std) * self._y_scale)

    def _per_output(self, values):
        """An array per output ``(O,)`` as a float for one target, an array ``(n_targets,)`` for several."""
        return float(values[0]) if self._single_output else values

    def _local_std_in_y_units(self):
        """``_draw_local_variance`` as a std in the units of y (None: none)."""
        variance = self._draw_local_variance
        return self._std_in_y_units(None if variance is None else variance.sqrt())

    # -------------------------------------------------------------- predict
    def _sample_outputs(self, X, n_samples, generator):
        """Network outputs ``(n_samples, N, O)`` for fresh weight draws (each spread by the local
        variance, where there is one), and the observation noise std of each draw
        (broadcastable to the outputs)."""
        outputs = self._model(self.posterior_.sample(n_samples, generator), X)
        return self._spread_locally(outputs, X, generator), self._noise_std

    def _mean_local_variance(self, X, Y, noise_std):
        """The mean over the training rows ``X, Y`` (network units) of the Laplace posterior's
        output variance about the network ``_model`` under ``prior_precisions_`` and the noise
        ``noise_std`` (network units), shape ``(O,)``: each output's mean leverage (the hat
        matrix's diagonal) times its noise variance. With one output the leverages sum to
        ``gamma``, the well-determined parameters (MacKay 1992, "A practical Bayesian framework
        for backpropagation networks"), which the evidence's factorisation gives without a pass
        over the rows: ``noise_std**2 gamma / N``; several outputs share ``gamma`` unequally, and
        where the evidence gives no leverages (the diagonal curvature, or Kronecker factors beside
        weights in no layer) they share it equally.
        Where a family's own spread of the outputs collapses (an ensemble's members reaching one
        function, dropout's learned rates falling to zero), this is the spread about each of its
        functions that the evidence's noise leaves out: that noise is the residuals' variance
        over ``N - gamma`` degrees of freedom, not ``N``. On a big table both are read from a
        random subset of its rows (:func:`~sklearn_quinn._core.row_subsets.random_subset`)."""
        theta = self._model.flatten()
        groups = ParameterGroups.of(self._model)
        precision = torch.as_tensor(np.array(list(self.prior_precisions_.values())), dtype=torch.float64)
        likelihood = self._likelihood(Y, noise_std=noise_std).frozen(Y.shape[1])
        n_rows, n_outputs = Y.shape
        X, Y, row_weight = random_subset(X, Y, self._split_seed)
        evidence = LaplaceEvidence(self._model, theta, self._tensor(X), self._tensor(Y), likelihood, groups,
                                   max_full_params=AUTO_MAX_FULL_PARAMS, row_weight=row_weight)
        noise_variance = torch.as_tensor(noise_std, dtype=theta.dtype, device=theta.device).square()
        leverage = evidence.leverage(precision) if n_outputs > 1 else None
        if leverage is not None:
            return noise_variance * leverage.mean(0).to(theta.dtype)
        well_determined = float(evidence.well_determined(precision).sum())
        return noise_variance * well_determined / (n_rows * n_outputs)

    def predict(self, X, return_std=False, return_cov=False):
        """Predictive mean, with the total predictive std or covariance on request.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the standard deviation of the predictive distribution
            of ``y``: weight uncertainty and observation noise together. For
            the families that predict from a finite set of draws (members,
            chains, particles), the draws' spread is the unbiased estimate of
            the posterior's, ``1 / (1 - sum(w**2))`` (``S / (S - 1)``) times
            the spread of the mixture that ``sample_y`` draws from: for five
            members up to 25% more variance where their spread dominates.
        return_cov : bool, default=False
            Also return the covariance of the predictive distribution of ``y``
            across the points of ``X`` (per target).

        Returns
        -------
        y_mean : ndarray of shape (n_samples,) or (n_samples, n_targets)
        y_std : ndarray of the same shape, only when ``return_std``
        y_cov : ndarray of shape (n_samples, n_samples) or (n_samples, n_samples, n_targets),
            only when ``return_cov``
        """
        if return_std and return_cov:
            raise RuntimeError("At most one of return_std or return_cov can be requested.")
        X = self._validated_inputs(X)
        if return_cov:  # the rows' joint distribution: all at once
            with torch.no_grad():
                epistemic, aleatoric = self._moments(self._outputs(X))
                cov = epistemic.covariance() + torch.diag_embed(aleatoric.T)
                cov = self._to_numpy(cov).transpose(1, 2, 0) * self._y_scale**2
                return self._y_units(epistemic.mean), self._squeeze(cov)

        def predict_rows(rows):
            with torch.no_grad():
                epistemic, aleatoric = self._moments(self._outputs(rows))
                mean = self._y_units(epistemic.mean)
                return (mean, self._std(epistemic.variance + aleatoric)) if return_std else mean

        return self._by_row_blocks(predict_rows, X)

    def predict_uncertainty(self, X):
        """The predictive mean and its standard deviation, split by source.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        uncertainty : sklearn.utils.Bunch
            ``mean``, ``std`` (total), ``epistemic_std`` (of the network's
            mean under the weight posterior: shrinks with more data) and
            ``aleatoric_std`` (the root mean square observation noise: does
            not), each an ndarray of shape (n_samples,) or
            (n_samples, n_targets) in the units of y, with
            ``std**2 == epistemic_std**2 + aleatoric_std**2``.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_quinn import LaplaceRegressor
        >>> from sklearn_quinn.datasets import make_heteroscedastic_wave
        >>> X, y = make_heteroscedastic_wave(200, random_state=0)
        >>> model = LaplaceRegressor(likelihood="heteroscedastic", max_epochs=300, random_state=0).fit(X, y)
        >>> parts = model.predict_uncertainty([[0.0], [2.5]])
        >>> bool(parts.aleatoric_std[1] > 2 * parts.aleatoric_std[0])  # the noise grows with |x|
        True
        >>> bool(np.allclose(parts.std**2, parts.epistemic_std**2 + parts.aleatoric_std**2))
        True
        """
        def predict_rows(rows):
            with torch.no_grad():
                epistemic, aleatoric = self._moments(self._outputs(rows))
                variance = epistemic.variance
                return Bunch(mean=self._y_units(epistemic.mean), std=self._std(variance + aleatoric),
                             epistemic_std=self._std(variance), aleatoric_std=self._std(aleatoric))

        return self._by_row_blocks(predict_rows, self._validated_inputs(X))

    def _moments(self, outputs, noise_std=None):
        """The predictive of y in network units, by source.

        Parameters
        ----------
        outputs : GaussianPredictive or SampledPredictive
            The distribution of the network outputs.
        noise_std : tensor of shape (O,), default=None
            A homoscedastic noise std other than the fitted one.

        Returns
        -------
        epistemic : GaussianPredictive or SampledPredictive
            The distribution of the network's mean for y, whose mean is the
            predictive mean.
        aleatoric : tensor of shape (N, O)
            The expected noise variance (``E[sigma(x)**2]`` under the
            heteroscedastic likelihood, see its ``predictive``).
        """
        noise_std = self._noise_std if noise_std is None else noise_std
        return LIKELIHOODS[self._likelihood_name].predictive(outputs, noise_std)

    def _summarise(self, outputs, noise_std=None):
        """``(y_mean, y_std)`` from a distribution of the outputs and a noise std (network units)."""
        epistemic, aleatoric = self._moments(outputs, noise_std)
        return self._y_units(epistemic.mean), self._std(epistemic.variance + aleatoric)

    def _summarise_gaussian(self, mean, covariance, noise_std=None):
        """``(y_mean, y_std)`` from the outputs' mean ``(N, O)`` and covariance ``(N, O, O)``.

        Only each output's marginal enters the summary, so the outputs are
        taken as independent Gaussians."""
        marginal_std = covariance.diagonal(dim1=-2, dim2=-1).clamp_min(0).sqrt()
        return self._summarise(GaussianPredictive(mean, marginal_std.unsqueeze(-1)), noise_std)

    def _y_units(self, mean):
        """A network-unit mean ``(N, O)`` as a float64 array in the units and shape of y."""
        return self._squeeze(self._to_numpy(mean) * self._y_scale + self._y_mean)

    def _std(self, variance):
        """A network-unit variance ``(N, O)`` as a std in the units and shape of y; a variance
        past the floating-point range is an infinite std, with a warning."""
        _warn_if_overflowed(~torch.isfinite(variance).all(-1), "the predictive variance", "std is returned as inf")
        return self._squeeze(self._to_numpy(variance.sqrt()) * self._y_scale)

    def sample_y(self, X, n_samples=1, random_state=0):
        """Draw samples of ``y`` from the predictive distribution at ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features)
        n_samples : int, default=1
            Number of draws per point.
        random_state : int, RandomState instance or None, default=0
            Seeds the draws (weights and noise).

        Returns
        -------
        y_samples : ndarray of shape (n_samples_X, n_samples) or (n_samples_X, n_targets, n_samples)
        """
        check_count(n_samples, "n_samples")
        X = self._validated_inputs(X)
        seed = check_random_state(random_state).randint(_MAX_SEED)
        generator = prediction_generator(seed)
        with torch.no_grad():
            split = LIKELIHOODS[self._likelihood_name].split
            outputs, noise_std = split(*self._sample_outputs(X, n_samples, generator))
            draws = gaussian_draws(generator, outputs, noise_std)
            _warn_if_overflowed(~torch.isfinite(draws).all(-1).all(0), "a draw", "draws are inf")
            draws = self._to_numpy(draws)
        draws = (draws * self._y_scale + self._y_mean).transpose(1, 2, 0)
        return draws[:, 0, :] if self._single_output else draws

    def _draws_log_likelihood(self, outputs, y):
        """``log p(y_n | draw s)`` in the units of y, ``(S, N)``, for draws' outputs ``(S, N, O)``;
        each draw with its own noise where it has one."""
        y = check_array(y, ensure_2d=False, dtype=np.float64)
        Y = y.reshape(len(y), -1)
        if len(Y) != outputs.shape[1] or Y.shape[1] != len(self._y_mean):
            raise ValueError(f"y has shape {y.shape}; expected {outputs.shape[1]} rows, one per row of X, of "
                             f"{len(self._y_mean)} target(s) as in fit.")
        Y = self._tensor((Y - self._y_mean) / self._y_scale)
        noise_std = getattr(self, "_draw_noise", None)
        if noise_std is None and self._noise_std is not None:
            noise_std = self._noise_std.expand(len(outputs), -1)
        likelihood = self._likelihood(Y, leading_shape=(len(outputs), 1),
                                      noise_std=None if noise_std is None else noise_std.unsqueeze(1))
        return likelihood.log_prob(outputs, Y.expand(len(outputs), -1, -1)) - self._log_y_scale_total(1)

    def _squeeze(self, array):
        """Drop the target axis (axis 1 of means, the last of covariances) for one target."""
        if not self._single_output:
            return array
        return array[..., 0] if array.ndim == 3 else array[:, 0]


def target_standardisation(Y):
    """Each target's mean and std over the rows of ``Y`` (ddof=0; 1 for a constant target), by which
    ``normalize_y`` standardises the targets.

    A constant target's std is rounding of its mean's order, so a std is told from one relative to
    the mean, as ``StandardScaler`` tells a constant column: an absolute threshold (scikit-learn's
    ``_handle_zeros_in_scale``, 2e-15) read a target of 1e-16 and its spread as a constant, and the
    network trained on the raw values. Where the squares pass float64's range (targets of 1e160)
    or fall below it (1e-170), the mean and the std are taken of the targets over their largest
    magnitude, and scaled back."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        mean, std = Y.mean(axis=0), Y.std(axis=0)
    lost = ~(np.isfinite(mean) & np.isfinite(std)) | (std < np.sqrt(np.finfo(Y.dtype).tiny))
    if lost.any():
        peak = np.abs(Y).max(axis=0)
        peak = np.where(peak > 0, peak, 1.0)
        unit = Y / peak
        mean, std = np.where(lost, unit.mean(axis=0) * peak, mean), np.where(lost, unit.std(axis=0) * peak, std)
    constant = std <= 10 * np.finfo(Y.dtype).eps * np.abs(mean)
    return mean, np.where(constant, 1.0, std)


#: With ``normalize_y=False``, targets whose std is below ``exp(-UNSCALED_LOG_SPREAD)`` (0.0067), or
#: within ``UNSCALED_MARGIN`` of the clip's upper bound (above exp(8), 2981), warn under the
#: heteroscedastic likelihood: their noise may reach the noise head's clip.
UNSCALED_LOG_SPREAD = 5.0
UNSCALED_MARGIN = 2.0
#: With ``normalize_y=False``, targets whose std is beyond a factor of ``exp(3)`` (20) from 1, or whose
#: root mean square is above 20 (a mean far from 0), warn under either likelihood: the network's
#: training is set for standardised targets.
UNSCALED_TRAINING_LOG_SPREAD = 3.0


def _warn_if_overflowed(rows, what, consequence):
    """Warn where ``rows`` (a boolean tensor, one per row of X) flags a value past the floating-point range."""
    overflowed = int(rows.sum())
    if overflowed:
        warn(f"{what} exceeds the floating-point range at {overflowed} of {len(rows)} rows, whose {consequence}: "
             "such rows usually lie far outside the training data, where the network's uncertainty (under "
             "likelihood='heteroscedastic', of its noise too) grows without bound")
