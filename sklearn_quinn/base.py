"""Shared estimator machinery: validation, model building, MAP training; the task hooks.

Every estimator is a family core (a mixin whose ``_fit(X, Y)``, called by the
shared ``fit`` once the data are validated, builds the model, runs the
family's engine and keeps ``posterior_``) on top of a task base,
:class:`~sklearn_quinn._regressor_base.BaseBayesianRegressor` or
:class:`~sklearn_quinn._classifier_base.BaseBayesianClassifier`.
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
import scipy.sparse as sp
import torch
from sklearn.base import BaseEstimator
from sklearn.preprocessing import StandardScaler
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data
from torch import nn

from ._core.allocator import pin_malloc_thresholds
from ._core.evidence import ParameterGroups
from ._core.network import ACTIVATIONS, FunctionalModel, build_mlp, in_eval_mode
from ._core.priors import GaussianPrior
from ._core.pushforward import nonlinear_pushforward
from ._core.rng import gaussian_draws, prediction_generator
from ._map import EvidenceMaximisation, batch_slices, evidence_epochs, fit_map, mean_variances_available
from ._persistence import DevicePortablePickle, resolve_device
from ._validation import check_callbacks, check_count, is_named_callback
from ._warnings import warn

#: The torch dtypes of the ``dtype`` parameter's values.
DTYPES = {"float64": torch.float64, "float32": torch.float32}
_MAX_SEED = np.iinfo(np.int32).max

#: How every estimator validates its inputs: float64, in rows. ``torch.tensor`` keeps a
#: column-major array's strides (a pandas DataFrame's values are column-major), the rounding of
#: the products then follows the layout, and a sampler's chains carry a rounding difference on:
#: one table would fit two ways. A sparse matrix (``OneHotEncoder``'s output) is taken, and
#: :func:`dense_rows` fills it in.
VALIDATION = {"dtype": np.float64, "order": "C", "accept_sparse": ("csr", "csc", "coo")}


def dense_rows(X):
    """A validated ``X`` (``VALIDATION``) as a row-major array, a sparse matrix filled in:
    ``normalize_X`` centres its columns, which fills it anyway, and the network's first layer
    reads dense rows."""
    return X.toarray(order="C") if sp.issparse(X) else X


#: A fixed ``prior_std`` or ``noise_std``: positive, and within a range whose squares and inverse
#: squares (variances, precisions) are finite in float64 with room for the products they enter.
STD_RANGE = Interval(Real, 1e-100, 1e100, closed="both")

#: ``normalize_X``: a column whose training mean and std are already 0 and 1 to within this is
#: left as it is: ``StandardScaler``'s output, whose means carry the rounding of float32 columns
#: (standardised again, the values would move by as little).
STANDARDISED_TOLERANCE = 1e-5

#: Rows of X predicted at once: the draws' outputs (draws x rows x outputs) and a
#: linearised network's Jacobian (rows x outputs x weights) grow with them; 2000
#: MCMC draws over 100,000 rows otherwise peak at 5 GiB.
PREDICT_BLOCK_ROWS = 8192

#: ``max_epochs='auto'``: this many epochs, or fewer where they would take
#: more than ``AUTO_MAX_STEPS`` minibatch steps. Every table of up to 40,000
#: rows (at the default 200-row batches) gets the full count; a million rows
#: get 40 epochs, minutes of training instead of hours, where each epoch's
#: many steps already move a small network far. SWAG's SGD phase keeps to the
#: same number of steps.
AUTO_EPOCHS = 1000
AUTO_MAX_STEPS = 200_000

#: Constraints of the MAP-training parameters, for the families that train a network.
MAP_TRAINING_CONSTRAINTS: dict = {
    "lr": [Interval(Real, 0, None, closed="neither")],
    "lr_schedule": [StrOptions({"cosine", "constant"})],
    "max_epochs": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
    "batch_size": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
    "optimizer": [callable],
    "callbacks": [None, list],
}


#: Constraint of ``prior_std_scale``, for the families whose posterior rests on the evidence-trained MAP.
PRIOR_SCALE_CONSTRAINTS: dict = {"prior_std_scale": [Interval(Real, 0, None, closed="neither")]}

#: Constraint of ``n_estimators``, for the families of several trained networks: an int, or
#: ``'auto'``, the family's count (:meth:`BaseBayesianNetwork._n_members`).
MEMBERS_CONSTRAINTS: dict = {"n_estimators": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})]}


#: Layers that read their inputs as category codes (indices), which standardising would scramble.
CODE_READING_LAYERS = (nn.Embedding, nn.EmbeddingBag)


def _warn_of_codes_standardised(module):
    """Warn where a user's ``module`` holds a layer that reads category codes while ``normalize_X``
    standardises every input column: the codes would reach it as standardised floats, which round
    to other categories (or to negative indices) without an error."""
    layers = sorted({type(layer).__name__ for layer in module.modules() if isinstance(layer, CODE_READING_LAYERS)})
    if layers:
        warn(f"module holds {' and '.join(f'nn.{name}' for name in layers)}, which reads category codes, but "
             "normalize_X=True standardises every input column, codes included, before the module sees it. "
             "Pass normalize_X=False and standardise the numeric columns yourself (for example with a "
             "ColumnTransformer).")


def input_standardisation(X):
    """Each column's mean and std over the rows of ``X``, ``StandardScaler``'s (ddof=0; 1 for a
    constant column), by which ``normalize_X`` standardises the inputs; (None, None) where every
    column is already standardised.

    The network's initial weights (scaled by the fan-in), the optimiser's step and the
    hierarchical priors' hyperparameters all presume inputs of unit scale: fitted to raw
    columns in the thousands, a network's fit and its intervals fall apart (docs: comparison,
    "Tables with the quirks of real data"). A column already standardised (mean 0 and std 1 to
    within ``STANDARDISED_TOLERANCE``) gets 0 and 1, so that a ``Pipeline`` whose
    ``StandardScaler`` did it fits as before, to the bit.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        scaler = StandardScaler().fit(X)
    # A variance that overflows to inf passes StandardScaler's constant test (its scale_ is then 1).
    overflowing = np.flatnonzero(~(np.isfinite(scaler.mean_) & np.isfinite(scaler.var_)))
    if len(overflowing):
        raise ValueError(
            f"Feature column(s) {overflowing.tolist()} hold values whose squares pass float64's range (up to "
            f"{np.abs(X[:, overflowing]).max():.3g}): their std cannot be taken; rescale them."
        )
    done = (np.abs(scaler.mean_) <= STANDARDISED_TOLERANCE) & (np.abs(scaler.scale_ - 1) <= STANDARDISED_TOLERANCE)
    if done.all():
        return None, None
    return np.where(done, 0.0, scaler.mean_), np.where(done, 1.0, scaler.scale_)


#: The fitted attributes that ``_validate_training_data`` sets (scikit-learn's ``validate_data``, a
#: classifier's labels).
_SET_BY_VALIDATION = frozenset({"n_features_in_", "feature_names_in_", "classes_"})


def reset_parameters(module):
    """``module``, its weights drawn afresh from torch's default initialisation, layer by layer (those
    with a ``reset_parameters``), from torch's global generator."""
    for layer in module.modules():
        if hasattr(layer, "reset_parameters"):
            layer.reset_parameters()
    return module


def _first_names(names, shown=3):
    """The first ``shown`` of ``names``, quoted, for a message."""
    return ", ".join(map(repr, names[:shown])) + (", ..." if len(names) > shown else "")


def _warn_of_parameters_not_reset(module):
    """Warn of ``module``'s parameters that :func:`reset_parameters` leaves at the instance's values."""
    reset = {id(parameter) for layer in module.modules() if hasattr(layer, "reset_parameters")
             for parameter in layer.parameters()}
    kept = [name for name, parameter in module.named_parameters() if id(parameter) not in reset]
    if kept:
        warn(
            f"module's parameter(s) {_first_names(kept)} belong to no layer with reset_parameters(), so every member "
            "starts them at the module instance's values; a callable (n_features, n_outputs) -> nn.Module "
            "builds each member afresh."
        )


class BaseBayesianNetwork(DevicePortablePickle, BaseEstimator):
    """What every estimator shares: a torch backbone, its seeds, device and MAP.

    Subclasses (the regressor and classifier bases) set the likelihood and
    turn a weight posterior into predictions. A fitted estimator pickled on
    one device unpickles on a machine without it, on the CPU
    (:class:`~sklearn_quinn._persistence.DevicePortablePickle`).
    """

    _parameter_constraints: dict = {
        "hidden_layer_sizes": ["array-like", Interval(Integral, 1, None, closed="left")],
        "activation": [StrOptions(set(ACTIVATIONS))],
        "linear_skip": ["boolean"],
        "module": [None, nn.Module, callable],
        "prior_std": [None, STD_RANGE],
        "normalize_X": ["boolean"],
        "dtype": [StrOptions(set(DTYPES))],
        "device": [str, torch.device],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    #: The training mean and std of each input column that ``normalize_X`` standardises them by
    #: (:func:`input_standardisation`); None: the inputs as given (and for an estimator pickled
    #: before the inputs were standardised).
    _X_mean = _X_scale = None

    #: The variance ``(O,)`` (network units) of the outputs about each weight draw's network, by
    #: which a family spreads them where its draws leave out part of the posterior (the deep
    #: ensemble's members, MC dropout at its learned rates); None: none (and for an estimator
    #: pickled before it was kept).
    _draw_local_variance = None

    # ------------------------------------------------------------------ fit
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # filled in on validation (dense_rows)
        return tags

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

        Notes
        -----
        A refit that fails, refused or interrupted, leaves the earlier fit as
        it was; so until it succeeds the earlier fit stays in memory beside
        the new one (a model of gigabytes of draws: ``clone`` it and fit the
        clone, or ``del`` the old one first).
        """
        earlier = dict(vars(self))
        try:
            X, Y = self._begin_fit(X, y)
            self._fit(X, Y)
        except BaseException:
            # A refit refused or interrupted at any step leaves the earlier fit whole (an unfitted
            # estimator unfitted): not one that passes check_is_fitted and fails to predict.
            vars(self).clear()
            vars(self).update(earlier)
            raise
        return self

    def _pin_malloc(self):
        """On the CPU, pin glibc's malloc thresholds for this process (once; the fit's and, with
        ``n_jobs``, each worker's): the samplers' steps free and take again blocks of activations of
        a few MiB, which glibc's own thresholds hand back to the system and fault in again at every
        step (:mod:`~sklearn_quinn._core.allocator`, which says how a process keeps its own)."""
        if self._device.type == "cpu":
            pin_malloc_thresholds()

    def _check_parameters(self):
        """Refuse a combination of parameters that no data make valid: called first in ``fit``, before
        anything of an earlier fit goes, and before any training (a family adds its own)."""

    def _callbacks(self):
        """Shallow copies of ``callbacks`` for one training: what skorch sets on a callback (an early
        stop's count of misses and best loss) is set on the copy, so fit leaves the user's objects as
        they were and nothing carries from one training to the next; what a callback holds (a log
        writer, a list it appends to) stays the user's, shared, as a deep copy would not (and could
        not copy a writer's lock)."""
        return [(callback[0], copy.copy(callback[1])) if is_named_callback(callback) else copy.copy(callback)
                for callback in self.callbacks or []]

    def _begin_fit(self, X, y):
        """Check the parameters and the data, set up torch and draw the seeds.

        Returns validated ``X`` and 2-D ``Y`` in the network's units.
        """
        self._validate_params()
        self._check_parameters()
        check_callbacks(self.callbacks)
        # A device this machine lacks ('auto': CUDA where there is one) is refused first; it and the dtype
        # are set once the data are valid, with the fitted attributes they describe.
        device = resolve_device(self.device)
        scale = self.get_params(deep=False).get("prior_std_scale", 1)  # the families with one
        if self.prior_std is not None and scale != 1:
            raise ValueError(
                f"prior_std_scale={scale!r} scales a learned prior, but prior_std={self.prior_std!r} "
                "fixes it; set prior_std=None, or leave prior_std_scale at 1 and scale prior_std itself."
            )
        X, Y = self._validate_training_data(X, y)
        # An earlier fit's attributes go once the data are valid, but for those the validation has just
        # set: this fit need not set all the others again (a failed fit restores them all: fit).
        for name in [name for name in vars(self)
                     if name.endswith("_") and not name.startswith("_") and name not in _SET_BY_VALIDATION]:
            delattr(self, name)
        self._device, self._dtype = device, DTYPES[self.dtype]
        self._pin_malloc()
        self._X_mean, self._X_scale = input_standardisation(X) if self.normalize_X else (None, None)
        X = self._standardised(X)
        rng = check_random_state(self.random_state)
        # MAP training; weight draws at predict time; the family's own draws (a data split, a random sketch).
        self._map_seed, self._sample_seed, self._split_seed = (
            int(seed) for seed in rng.randint(_MAX_SEED, size=3)
        )
        return X, Y

    @staticmethod
    def _seed_table(seed, shape):
        """Seeds of ``shape`` drawn up front from ``seed``: one row per member, chain or worker group,
        so that results do not depend on how they are grouped over joblib workers."""
        return np.random.RandomState(seed).randint(_MAX_SEED, size=shape)

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
        frozen = [name for name, parameter in module.named_parameters() if not parameter.requires_grad]
        if frozen:
            raise ValueError(
                f"module's parameter(s) {_first_names(frozen)} do not require gradients, but every family "
                "puts its posterior on all of a module's parameters (a frozen layer's weights would be drawn, "
                "or moved). Hold a fixed tensor as a buffer (module.register_buffer), which is used as it is."
            )
        if self.module is not None and self.normalize_X:
            _warn_of_codes_standardised(module)
        module = module.to(device=self._device, dtype=self._dtype)
        if self.module is not None:
            self._check_module_outputs(module, n_features, n_outputs)
        return module

    def _check_module_outputs(self, module, n_features, n_outputs):
        """Refuse a user's module whose outputs are not the ``(n_samples, n_outputs)`` tensor that the
        likelihood reads (``(n_samples,)`` for one output), naming what the columns must be: a wider
        output would be trained and read in part, a narrower one fail deep inside the likelihood."""
        probe = copy.deepcopy(module)  # a layer that initialises itself on its first call does so on the data
        try:
            with torch.no_grad(), in_eval_mode(probe):
                outputs = probe(torch.zeros(2, n_features, dtype=self._dtype, device=self._device))
        except Exception as error:  # a user's forward: its own error, named as the module's
            raise ValueError(f"module failed on 2 rows of the data's {n_features} features: {error}") from error
        allowed = [(2, n_outputs), (2,)] if n_outputs == 1 else [(2, n_outputs)]
        if not isinstance(outputs, torch.Tensor) or tuple(outputs.shape) not in allowed:
            got = f"shape {tuple(outputs.shape)}" if isinstance(outputs, torch.Tensor) else type(outputs).__name__
            raise ValueError(
                f"module must return a tensor of shape (n_samples, {n_outputs}), {self._outputs_meaning(n_outputs)}; "
                f"on 2 rows it returned {got}."
            )

    def _initial_weights(self, n_features, n_outputs, seeds):
        """Members' initial weights ``(J, K)``, row ``j`` the backbone built under
        ``seeds[j]``, and the backbone of the last (for its ``FunctionalModel``).
        A ``module`` given as an instance is deep-copied, the same weights
        under every seed: its layers are reset under each member's seed, so
        that the members start apart."""
        theta = []
        for seed in seeds:
            with self._seeded(int(seed)):
                module = self._build_module(n_features, n_outputs)
                if isinstance(self.module, nn.Module):
                    reset_parameters(module)
            theta.append(FunctionalModel(module).flatten())
        if isinstance(self.module, nn.Module):
            _warn_of_parameters_not_reset(module)
        return torch.stack(theta), module

    def _build_model(self, X, Y):
        """Build the backbone at its seeded initial weights, without training it.

        Sets the private ``_model`` (the backbone as ``f(Theta, X)``) and
        ``net_ = None``; returns the initial weights ``(K,)``.
        """
        with self._seeded(self._map_seed):
            self._model = FunctionalModel(self._build_module(X.shape[1], self._n_outputs(Y)))
        self.net_ = None
        return self._model.flatten()

    def _fit_map(self, X, Y, prior_std_scale=1.0, *, wrap=None, prior_precision=None):
        """Build the backbone and train it to the MAP of the task's likelihood through skorch.

        With ``prior_std=None`` the prior precision of each group of weights (``ParameterGroups``),
        and with an estimated noise the noise, are learned during training by
        maximising the Laplace evidence (:class:`~sklearn_quinn._map.EvidenceMaximisation`),
        the precisions' stds times ``prior_std_scale`` (the family's parameter, where it has one);
        under the heteroscedastic likelihood its updates also give the noise head the
        means' posterior variances to fit (whatever the prior), as the targets' last columns.
        Sets ``net_``, the private ``_model`` (the backbone as ``f(Theta, X)``),
        ``prior_precisions_`` and ``evidence_history_``.

        Parameters
        ----------
        wrap : callable, default=None
            ``module -> module`` that training runs instead of the backbone (MC dropout's
            masks). Its loss is random given the weights: the training ends without a
            full-batch polish, and a noise head fits no means' variances (the masks' spread
            of the means is already in its fit).
        prior_precision : tensor of shape (G,), default=None
            The prior precision of each group, held fixed in place of ``prior_std``: one
            that an earlier MAP training's evidence learned (the noise, where estimated,
            is still learned by the evidence at the weights this training reaches).

        Returns
        -------
        theta : tensor of shape (K,)
            The MAP weights.
        likelihood : GaussianLikelihood or CategoricalLikelihood
            The likelihood with its noise as trained or learned.
        prior : GaussianPrior
            The prior the MAP was trained under (learned or fixed).
        targets : ndarray of shape (N, O) or (N, 2 O)
            What the training read as its targets, for the trainings that go
            on from the MAP: ``Y``, and under the heteroscedastic likelihood
            the variances its noise head covered beside the residuals (the
            means' posterior variances of the last evidence update and the
            targets' resolution, ``likelihood.training_targets``).
        """
        likelihood = self._likelihood(Y)
        with self._seeded(self._map_seed):
            module = self._build_module(X.shape[1], self._n_outputs(Y))
            model = FunctionalModel(module)  # reads the module's weights as they train
            groups = ParameterGroups.of(model)
            learn_prior = self.prior_std is None and prior_precision is None
            n_epochs = self._n_epochs(len(X))
            if prior_precision is not None:
                precision = prior_precision.to(self._dtype).clone()
            else:
                precision = torch.ones(len(groups), dtype=self._dtype) if learn_prior else self.prior_std**-2
            mean_variance = wrap is None and self._fits_mean_variances(likelihood, Y, module)
            Y_tensor, evidence = self._tensor(Y), None
            targets = likelihood.training_targets(Y_tensor) if mean_variance else Y_tensor
            if learn_prior or likelihood.learn_noise or mean_variance:
                # The noise is a hyperparameter of the evidence, not a parameter of the loss.
                likelihood.requires_grad_(False)
                evidence = EvidenceMaximisation(
                    model, self._tensor(X), Y_tensor, groups, learn_prior=learn_prior,
                    learn_noise=likelihood.learn_noise, epochs=evidence_epochs(n_epochs), targets=targets,
                    precision_factor=prior_std_scale**-2, seed=self._map_seed,
                )
            self.net_ = fit_map(
                module if wrap is None else wrap(module),
                X.astype(self.dtype),
                targets,
                prior_precision=precision,
                likelihood=likelihood,
                lr=self.lr,
                lr_schedule=self.lr_schedule,
                max_epochs=n_epochs,
                batch_size=self._batch_size(len(X)),
                optimizer=self.optimizer,
                callbacks=self._callbacks(),
                device=self._device,
                seed=self._map_seed,
                verbose=self.verbose,
                groups=groups,
                evidence=evidence,
                finish=wrap is None,
            )
        self._model = model
        precision = self.net_.criterion_.prior_precision
        if self.prior_std is None:
            self.prior_precisions_ = groups.as_dict(precision)
            prior = GaussianPrior(groups.expand(precision.to(self._device)).rsqrt())
        else:
            self.prior_precisions_ = dict.fromkeys(groups.names, float(precision))
            prior = GaussianPrior(self.prior_std)
        self.evidence_history_ = [] if evidence is None else self._evidence_history(evidence.history_, len(X))
        return self._model.flatten(), self.net_.criterion_.likelihood, prior, targets.cpu().numpy()

    def _fits_mean_variances(self, likelihood, Y, module=None):
        """Whether the MAP's noise head fits the means' posterior variances beside the residuals
        (see ``HeteroscedasticGaussianLikelihood``): where its likelihood has one and the
        evidence gives leverages: the exact curvature (at least at the training's end) or
        Kronecker factors covering every weight.
        ``module``: the backbone (default: one built here)."""
        if not likelihood.fits_mean_variance:
            return False
        if module is None:
            with self._seeded(self._map_seed):
                module = self._build_module(self.n_features_in_, self._n_outputs(Y))
        return mean_variances_available(len(Y), self._n_outputs(Y), module)

    def _evidence_history(self, history, n_rows):
        """The evidence updates with the log evidence in the units of y."""
        return [{**update, "log_evidence": update["log_evidence"] - self._log_y_scale_total(n_rows)}
                for update in history]

    def _batch_size(self, n_rows):
        return min(200, n_rows) if self.batch_size == "auto" else min(self.batch_size, n_rows)

    def _n_epochs(self, n_rows, min_steps=0):
        """The training epochs on ``n_rows`` rows: ``max_epochs``, or for 'auto'
        ``AUTO_EPOCHS``, raised to ``min_steps`` minibatch steps where they take fewer,
        capped at ``AUTO_MAX_STEPS`` steps."""
        if self.max_epochs != "auto":
            return self.max_epochs
        steps_per_epoch = len(batch_slices(n_rows, self._batch_size(n_rows)))
        epochs = max(AUTO_EPOCHS, -(-min_steps // steps_per_epoch))
        return max(1, min(epochs, AUTO_MAX_STEPS // steps_per_epoch))

    def _n_members(self, n_rows):
        """``n_estimators``, or for 'auto' the family's ``_auto_members``: its first count, and its
        second where each member's ``max_epochs='auto'`` training on ``n_rows`` rows is capped at
        ``AUTO_MAX_STEPS`` steps (above 40,000 rows at the default batch), each member there
        another capped training."""
        if self.n_estimators != "auto":
            return self.n_estimators
        members, capped_members = self._auto_members
        capped = self.max_epochs == "auto" and self._n_epochs(n_rows) < AUTO_EPOCHS
        return capped_members if capped else members

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
        (default ``posterior_``): the nonlinear pushforward of its draws
        (:meth:`_prediction_draws`), each spread by the local variance at ``X``
        (:meth:`_local_variance_at`) where there is one."""
        theta, weights = self._prediction_draws(posterior)
        return nonlinear_pushforward(self._model, theta, X, weights, self._local_variance_at(X))

    def _draws_variance(self, X):
        """The variance ``(N, O)`` of the weight draws' outputs at ``X`` (:meth:`_prediction_draws`),
        without the local variance each draw carries."""
        theta, weights = self._prediction_draws()
        return nonlinear_pushforward(self._model, theta, X, weights).variance

    def _prediction_draws(self, posterior=None):
        """The weight draws ``(S, K)`` that the predictions average, and their weights ``(S,)``
        (None: equal): ``n_samples`` draws of ``posterior`` (default ``posterior_``), the same
        draws at every call."""
        posterior = self.posterior_ if posterior is None else posterior
        check_count(self.n_samples, "n_samples")  # a set_params after fit is read here, unchecked by fit
        return posterior.sample(self.n_samples, prediction_generator(self._sample_seed)), None

    def _local_variance_at(self, X):
        """The variance by which each weight draw's outputs spread about its own at ``X``:
        ``(O,)``, ``(N, O)`` or None (none); by default ``_draw_local_variance``, one per output."""
        return self._draw_local_variance

    def _spread_locally(self, outputs, X, generator):
        """Weight draws' ``outputs`` ``(S, N, O)`` at ``X``, each spread by a Gaussian of the
        local variance there (:meth:`_local_variance_at`) drawn from ``generator`` where there is one."""
        local_variance = self._local_variance_at(X)
        if local_variance is None:
            return outputs
        return gaussian_draws(generator, outputs, local_variance.sqrt())

    def _validated_inputs(self, X):
        check_is_fitted(self)
        X = dense_rows(validate_data(self, X, reset=False, **VALIDATION))
        return self._tensor(self._standardised(X))

    def _standardised(self, X):
        """``X`` in the network's units: each column less its training mean, over its std (``normalize_X``)."""
        return X if self._X_mean is None else (X - self._X_mean) / self._X_scale

    def _user_inputs(self, X):
        """Inputs in the network's units back in the units the user gave them in (``_standardised``'s inverse)."""
        return X if self._X_mean is None else X * self._X_scale + self._X_mean

    @staticmethod
    def _by_row_blocks(predict_rows, X):
        """``predict_rows(X)`` on blocks of at most :data:`PREDICT_BLOCK_ROWS` rows, joined along
        the rows: an array, or a tuple or Bunch of arrays, with one row per row of ``X``."""
        if len(X) <= PREDICT_BLOCK_ROWS:
            return predict_rows(X)
        parts = [predict_rows(X[start : start + PREDICT_BLOCK_ROWS]) for start in range(0, len(X), PREDICT_BLOCK_ROWS)]
        if isinstance(parts[0], tuple):
            return tuple(np.concatenate(arrays) for arrays in zip(*parts))
        if isinstance(parts[0], dict):
            return type(parts[0])(**{key: np.concatenate([part[key] for part in parts]) for key in parts[0]})
        return np.concatenate(parts)

    def _to_numpy(self, tensor):
        return tensor.detach().cpu().numpy().astype(np.float64)
