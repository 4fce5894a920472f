"""Shared estimator machinery: validation, model building, MAP training, the regressors' predict plumbing.

Every estimator is a family core (a mixin whose ``_fit(X, Y)``, called by the
shared ``fit`` once the data are validated, builds the model, runs the
family's engine and keeps ``posterior_``) on top of a task base,
:class:`BaseBayesianRegressor` or :class:`~sklearn_quinn._classification.BaseBayesianClassifier`.
The task bases differ only in small hooks that the family cores call:

- ``_validate_training_data(X, y)``: validated ``X`` and the 2-D targets in
  the network's units; ``_n_outputs(Y)``;
- ``_likelihood(Y, leading_shape=(), noise_std=None)``: the likelihood of a fit (Gaussian,
  with a fixed or learned noise, or categorical);
- ``_keep_noise(noise_std)``: keep the fitted noise (regressors; a no-op
  for classifiers, which have none);
- ``_log_y_scale_total(n_rows)``: the log Jacobian between the network's
  units and the user's, for evidences (zero for classifiers);
- ``_outputs(X, posterior)``: the distribution of the network outputs at
  ``X``, which the regressors turn into ``predict`` / ``sample_y`` and the
  classifiers into ``predict_proba``.
"""

import contextlib
import copy
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.preprocessing._data import _handle_zeros_in_scale
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data
from torch import nn

from ._core.evidence import ParameterGroups
from ._core.network import ACTIVATIONS, FunctionalModel, build_mlp
from ._core.priors import GaussianPrior
from ._core.pushforward import nonlinear_pushforward
from ._map import EvidenceMaximisation, evidence_epochs, fit_map, gaussian_likelihood

_DTYPES = {"float64": torch.float64, "float32": torch.float32}
_MAX_SEED = np.iinfo(np.int32).max

#: Constraints of the MAP-training parameters, for the families that train a network.
MAP_TRAINING_CONSTRAINTS: dict = {
    "lr": [Interval(Real, 0, None, closed="neither")],
    "lr_schedule": [StrOptions({"cosine", "constant"})],
    "max_epochs": [Interval(Integral, 1, None, closed="left")],
    "batch_size": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
    "optimizer": [callable],
    "callbacks": [None, list],
}


class BaseBayesianNetwork(BaseEstimator):
    """What every estimator shares: a torch backbone, its seeds, device and MAP.

    Subclasses (the regressor and classifier bases) set the likelihood and
    turn a weight posterior into predictions.
    """

    _parameter_constraints: dict = {
        "hidden_layer_sizes": ["array-like", Interval(Integral, 1, None, closed="left")],
        "activation": [StrOptions(set(ACTIVATIONS))],
        "linear_skip": ["boolean"],
        "module": [None, nn.Module, callable],
        "prior_std": [None, Interval(Real, 0, None, closed="neither")],
        "dtype": [StrOptions(set(_DTYPES))],
        "device": [str, torch.device],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    # ------------------------------------------------------------------ fit
    def fit(self, X, y):
        """Fit the posterior over the network's weights.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets (regression) or class labels (classification).

        Returns
        -------
        self : object
            The fitted estimator.
        """
        X, Y = self._begin_fit(X, y)
        self._fit(X, Y)
        return self

    def _begin_fit(self, X, y):
        """Check the parameters and the data, set up torch and draw the seeds.

        Returns validated ``X`` and 2-D ``Y`` in the network's units.
        """
        self._validate_params()
        X, Y = self._validate_training_data(X, y)
        self._torch_setup()
        rng = check_random_state(self.random_state)
        # MAP training; weight draws at predict time; any data split of the family.
        self._map_seed, self._sample_seed, self._split_seed = (
            int(seed) for seed in rng.randint(_MAX_SEED, size=3)
        )
        return X, Y

    def _torch_setup(self):
        """Check ``device`` and ``dtype``; keep them as torch objects."""
        try:
            device = torch.device(self.device)
        except (RuntimeError, TypeError) as error:
            raise ValueError(f"device={self.device!r} is not a torch device: {error}") from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device={self.device!r} was requested but CUDA is not available.")
        self._device = device
        self._dtype = _DTYPES[self.dtype]

    def _tensor(self, array):
        # A copy: validated input may be a read-only memmap, which torch cannot wrap.
        return torch.tensor(array, dtype=self._dtype, device=self._device)

    def _build_module(self, n_features, n_outputs):
        if self.module is None:
            sizes = np.atleast_1d(np.asarray(self.hidden_layer_sizes))
            if not all(float(size).is_integer() and size >= 1 for size in sizes):
                raise ValueError(
                    "The 'hidden_layer_sizes' parameter must hold positive integers; "
                    f"got {self.hidden_layer_sizes!r}."
                )
            module = build_mlp(
                n_features, n_outputs, [int(size) for size in sizes], self.activation, self.linear_skip
            )
        elif isinstance(self.module, nn.Module):
            module = copy.deepcopy(self.module)
        else:
            module = self.module(n_features, n_outputs)
            if not isinstance(module, nn.Module):
                raise ValueError(
                    "module must be an nn.Module or a callable (n_features, n_outputs) -> "
                    f"nn.Module; the callable returned {type(module).__name__}."
                )
        if not any(True for _ in module.parameters()):
            raise ValueError("module has no parameters to put a posterior on.")
        return module.to(device=self._device, dtype=self._dtype)

    def _build_model(self, X, Y):
        """Build the backbone at its seeded initial weights, without training it.

        Sets the private ``_model`` (the backbone as ``f(Theta, X)``) and
        ``net_ = None``; returns the initial weights ``(K,)``.
        """
        with self._seeded(self._map_seed):
            self._model = FunctionalModel(self._build_module(X.shape[1], self._n_outputs(Y)))
        self.net_ = None
        return self._model.flatten()

    def _fit_map(self, X, Y):
        """Build the backbone and train it to the MAP of the task's likelihood through skorch.

        With ``prior_std=None`` the prior precision of each parameter tensor,
        and with an estimated noise the noise, are learned during training by
        maximising the Laplace evidence (:class:`~sklearn_quinn._map.EvidenceMaximisation`).
        Sets ``net_``, the private ``_model`` (the backbone as ``f(Theta, X)``),
        ``prior_precisions_`` and ``evidence_history_``.

        Returns
        -------
        theta : tensor of shape (K,)
            The MAP weights.
        likelihood : GaussianLikelihood or CategoricalLikelihood
            The likelihood with its noise as trained or learned.
        prior : GaussianPrior
            The prior the MAP was trained under (learned or fixed).
        """
        likelihood = self._likelihood(Y)
        with self._seeded(self._map_seed):
            module = self._build_module(X.shape[1], self._n_outputs(Y))
            model = FunctionalModel(module)  # reads the module's weights as they train
            groups = ParameterGroups.of(model)
            learn_prior = self.prior_std is None
            precision = torch.ones(len(groups), dtype=self._dtype) if learn_prior else self.prior_std**-2
            evidence = None
            if learn_prior or likelihood.learn_noise:
                # The noise is a hyperparameter of the evidence, not a parameter of the loss.
                likelihood.requires_grad_(False)
                evidence = EvidenceMaximisation(
                    model, self._tensor(X), self._tensor(Y), groups, learn_prior=learn_prior,
                    learn_noise=likelihood.learn_noise, epochs=evidence_epochs(self.max_epochs),
                )
            self.net_ = fit_map(
                self._training_module(module),
                X.astype(self.dtype),
                Y.astype(self.dtype),
                prior_precision=precision,
                likelihood=likelihood,
                lr=self.lr,
                lr_schedule=self.lr_schedule,
                max_epochs=self.max_epochs,
                batch_size=self._batch_size(len(X)),
                optimizer=self.optimizer,
                callbacks=self.callbacks,
                device=self._device,
                seed=self._map_seed,
                verbose=self.verbose,
                evidence=evidence,
            )
        self._model = model
        precision = self.net_.criterion_.prior_precision
        if learn_prior:
            self.prior_precisions_ = groups.as_dict(precision)
            prior = GaussianPrior(groups.expand(precision.to(self._device)).rsqrt())
        else:
            self.prior_precisions_ = dict.fromkeys(groups.names, float(precision))
            prior = GaussianPrior(self.prior_std)
        self.evidence_history_ = [] if evidence is None else self._evidence_history(evidence.history_, len(X))
        return self._model.flatten(), self.net_.criterion_.likelihood, prior

    def _evidence_history(self, history, n_rows):
        """The evidence updates with the log evidence in the units of y."""
        return [{**update, "log_evidence": update["log_evidence"] - self._log_y_scale_total(n_rows)}
                for update in history]

    def _training_module(self, module):
        """The module MAP training runs: the backbone itself, unless a family
        wraps it (MC dropout trains it behind dropout layers)."""
        return module

    def _batch_size(self, n_rows):
        return min(200, n_rows) if self.batch_size == "auto" else min(self.batch_size, n_rows)

    @contextlib.contextmanager
    def _seeded(self, seed):
        """Run a block under a seeded torch RNG, leaving the global one untouched."""
        devices = [self._device] if self._device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            yield

    def _generator(self, seed):
        return torch.Generator(device=self._device).manual_seed(int(seed))

    def _outputs(self, X, posterior=None):
        """Distribution of the network outputs at ``X`` under ``posterior``
        (default ``posterior_``): the nonlinear pushforward of ``n_samples``
        weight draws, the same draws at every call."""
        posterior = self.posterior_ if posterior is None else posterior
        theta = posterior.sample(self.n_samples, self._generator(self._sample_seed))
        return nonlinear_pushforward(self._model, theta, X)

    def _validated_inputs(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return self._tensor(X)

    def _to_numpy(self, tensor):
        return tensor.detach().cpu().numpy().astype(np.float64)


class BaseBayesianRegressor(RegressorMixin, BaseBayesianNetwork):
    """Base class of the regressors: a torch backbone with a weight posterior.

    A subclass fits ``posterior_`` in :meth:`fit` and may override
    the family's :meth:`_outputs` (the distribution of the network outputs at ``X``) and
    :meth:`_sample_outputs`; this class turns them into ``predict`` and
    ``sample_y`` with the observation noise added and the target's units
    restored.
    """

    _parameter_constraints: dict = {
        **BaseBayesianNetwork._parameter_constraints,
        "noise_std": [None, Interval(Real, 0, None, closed="neither")],
        "normalize_y": ["boolean"],
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def _validate_training_data(self, X, y):
        """Validated ``X`` and 2-D ``Y`` in the network's (standardised) units."""
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True, dtype=np.float64)
        Y = y.reshape(len(y), -1)
        self._single_output = y.ndim == 1 or Y.shape[1] == 1
        if self.normalize_y:
            self._y_mean = Y.mean(axis=0)
            self._y_scale = _handle_zeros_in_scale(Y.std(axis=0), copy=False)
        else:
            self._y_mean = np.zeros(Y.shape[1])
            self._y_scale = np.ones(Y.shape[1])
        return X, (Y - self._y_mean) / self._y_scale

    def _n_outputs(self, Y):
        return Y.shape[1]

    def _likelihood(self, Y, leading_shape=(), noise_std=None):
        """The Gaussian likelihood: fixed at ``noise_std`` (network units, ``(O,)``;
        default: the ``noise_std`` parameter), or a learned noise of shape
        ``leading_shape + (O,)`` (one shared by the outputs)."""
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
        """Keep the network-unit noise ``(O,)`` and report ``noise_std_`` in units of y."""
        self._noise_std = noise_std
        in_y_units = noise_std.cpu().numpy().astype(np.float64) * self._y_scale
        self.noise_std_ = float(in_y_units[0]) if self._single_output else in_y_units

    # -------------------------------------------------------------- predict
    def _sample_outputs(self, X, n_samples, generator):
        """Network outputs ``(n_samples, N, O)`` for fresh weight draws, and the
        observation noise std of each draw (broadcastable to the outputs)."""
        return self._model(self.posterior_.sample(n_samples, generator), X), self._noise_std

    def predict(self, X, return_std=False, return_cov=False):
        """Predictive mean, with the total predictive std or covariance on request.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the standard deviation of the predictive distribution
            of ``y``: weight uncertainty and observation noise together.
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
        with torch.no_grad():
            predictive = self._outputs(X)
            if return_cov:
                eye = torch.eye(X.shape[0], dtype=X.dtype, device=X.device)
                cov = predictive.covariance() + self._noise_std.square()[:, None, None] * eye
                cov = self._to_numpy(cov).transpose(1, 2, 0) * self._y_scale**2
                return self._in_y_units(predictive.mean)[0], self._squeeze(cov)
            if return_std:
                return self._in_y_units(predictive.mean, predictive.variance)
            return self._in_y_units(predictive.mean)[0]

    def _summarise(self, outputs, noise_std=None):
        """``(y_mean, y_std)`` from a distribution of the outputs and a noise std (network units)."""
        return self._in_y_units(outputs.mean, outputs.variance, noise_std)

    def _summarise_gaussian(self, mean, covariance, noise_std=None):
        """``(y_mean, y_std)`` from the outputs' mean ``(N, O)`` and covariance ``(N, O, O)``."""
        return self._in_y_units(mean, covariance.diagonal(dim1=-2, dim2=-1), noise_std)

    def _in_y_units(self, mean, output_variance=None, noise_std=None):
        """Network-unit mean (and output variance) to the mean and total std of y.

        The std adds the observation noise (``noise_std``, network units,
        default the fitted one) to the output variance; both come back as
        float64 arrays in the units and shape of y.
        """
        y_mean = self._squeeze(self._to_numpy(mean) * self._y_scale + self._y_mean)
        if output_variance is None:
            return y_mean, None
        noise_std = self._noise_std if noise_std is None else noise_std
        std = (output_variance + noise_std.square()).sqrt()
        return y_mean, self._squeeze(self._to_numpy(std) * self._y_scale)

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
        X = self._validated_inputs(X)
        seed = check_random_state(random_state).randint(_MAX_SEED)
        generator = self._generator(seed)
        with torch.no_grad():
            outputs, noise_std = self._sample_outputs(X, n_samples, generator)
            noise = torch.randn(outputs.shape, generator=generator, dtype=outputs.dtype, device=outputs.device)
            draws = self._to_numpy(outputs + noise * noise_std)
        draws = (draws * self._y_scale + self._y_mean).transpose(1, 2, 0)
        return draws[:, 0, :] if self._single_output else draws

    def _squeeze(self, array):
        """Drop the target axis (axis 1 of means, the last of covariances) for one target."""
        if not self._single_output:
            return array
        return array[..., 0] if array.ndim == 3 else array[:, 0]
