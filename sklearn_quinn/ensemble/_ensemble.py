"""DeepEnsembleRegressor and RMSRegressor: members trained together as rows of one weight matrix."""

import math
from numbers import Integral, Real

import numpy as np
import torch
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.utils._param_validation import Interval

from .._core.evidence import ParameterGroups
from .._core.network import FunctionalModel
from .._core.priors import GaussianPrior
from .._core.row_subsets import random_rows, random_subset
from .._draws import DrawsMixin
from .._local_posterior import LocalPosteriorMixin
from .._regressor_base import BaseBayesianRegressor
from ..base import MAP_TRAINING_CONSTRAINTS, MEMBERS_CONSTRAINTS, PREDICT_BLOCK_ROWS, PRIOR_SCALE_CONSTRAINTS
from ._engine import finish_members, train_members

#: ``n_estimators='auto'`` of randomized MAP sampling (``_auto_members``): twenty members below
#: the MAP training's step cap, five above it. The members are posterior draws, and the predictive
#: spread is their Monte Carlo estimate, whose variance has a relative standard error of
#: sqrt(2 / (J - 1)): 71% for five draws, 32% for twenty. On a small table the posterior's spread
#: is a large part of the predictive, and twenty members, trained as one batch, cost far less than
#: twenty trainings; above the cap each member is another capped training, and the posterior's
#: spread is a small part of the predictive (docs: ensembles).
RMS_AUTO_MEMBERS = (20, 5)


class EnsembleMixin(DrawsMixin):
    """Training of ``n_estimators`` members as rows of one weight matrix, grouped over joblib workers.

    Its ``_fit`` serves the deep ensembles and randomized MAP sampling, both
    tasks. Members are unanchored and see their targets as given unless the
    estimator overrides :meth:`_randomization`.
    """

    _ensemble_constraints: dict = {
        **MAP_TRAINING_CONSTRAINTS,
        **PRIOR_SCALE_CONSTRAINTS,
        **MEMBERS_CONSTRAINTS,
        "data_fraction": [Interval(Real, 0, 1, closed="right")],
        "n_jobs": [None, Integral],
    }

    #: ``n_estimators='auto'``: the members below the MAP training's step cap, and above it. The deep
    #: ensemble's are five either way (Lakshminarayanan et al. 2017): its members are not posterior
    #: draws, and under the learned prior they reach one function, so more add little.
    _auto_members = (5, 5)

    #: Whether each member's outputs carry the training rows' mean of the MAP network's Laplace
    #: posterior variance (``member_std_``), at every row where that posterior is out of reach
    #: (``LocalPosteriorMixin``): the deep ensemble's regressor, whose members alone reach one function.
    _carries_mean_local_variance = False

    def _fit(self, X, Y):
        """Learn the prior and the noise, then train the members: the family's part of ``fit``."""
        self._prior, self._member_noise, targets = self._hyperparameters(X, Y)
        local_variance = self._local_variance(X, Y)
        theta, likelihoods, perturbations = self._fit_members(X, Y, targets)
        if self.prior_precisions_ is None:
            self.prior_precisions_ = dict.fromkeys(ParameterGroups.of(self._model).names, self.prior_std**-2)
        noise_std = self._members_noise(X, Y, theta, likelihoods, perturbations)
        self._keep_draws(theta, noise_std, local_variance=local_variance)

    def _members_noise(self, X, Y, theta, likelihoods, perturbations):
        """The noise std ``(J, O)`` (network units) each member predicts with: the one it
        trained under, or None (a classifier, a heteroscedastic head). ``perturbations``:
        the members' standard-normal target perturbations ``(J, N, O)``, or None."""
        noise_std = [likelihood.member_noise_std(Y.shape[1]) for likelihood in likelihoods]
        return None if noise_std[0] is None else torch.cat(noise_std)

    def _local_variance(self, X, Y):
        """The mean over the training rows ``(O,)`` (network units) of the Laplace posterior's
        output variance about the MAP network, or None: for the deep ensemble's regressor under
        a Gaussian likelihood whose prior and noise the MAP network learned
        (:meth:`_hyperparameters`;
        :meth:`~sklearn_quinn._regressor_base.BaseBayesianRegressor._mean_local_variance`).

        Under the learned prior the members' objective is nearly convex and they reach one
        function: their spread is not the posterior's (``benchmarks/bench_member_spread.py``),
        and each member carries a local posterior of its own
        (:class:`~sklearn_quinn._local_posterior.LocalPosteriorMixin`), whose training rows'
        mean this is (``member_std_``), and which serves at every row where that posterior is
        past the machine (no full or Kronecker-factored curvature).
        """
        # prior_precisions_ is None where the prior and the noise were both fixed: no MAP was trained.
        if (not self._carries_mean_local_variance or self._likelihood_name != "gaussian"
                or self.prior_precisions_ is None):
            return None
        return self._mean_local_variance(X, Y, self._member_noise)

    def _randomization(self, n_params, target_shape, generator):
        """One member's anchor ``(K,)`` and standard-normal target perturbations
        ``(N, O)`` (None for none): a zero anchor, no perturbation."""
        return torch.zeros(n_params, dtype=self._dtype, device=self._device), None

    def _hyperparameters(self, X, Y):
        """The prior, the noise std (network units) and the targets every member trains under.

        What is not fixed by ``prior_std`` and ``noise_std`` is learned once,
        by the Laplace evidence of one MAP network (:meth:`_fit_map`), and
        shared by the members: they are draws of one posterior, under one
        prior and one likelihood. A noise fitted by each member would shrink
        as the member over-fits its data. The targets are the MAP's (see
        :meth:`_fit_map`): under the heteroscedastic likelihood each member's
        noise head fits its own residuals plus the means' posterior variance
        of that one MAP network, for the same reason. Its own residuals
        include its disagreement with the other members, which the predictive
        counts again as their spread: where the members' misfit, not the
        noise, dominates the residuals (UCI naval), the intervals are too wide.
        (A Gaussian likelihood's learned noise is rescaled to the members'
        mean for the predictive: :meth:`BaseEnsembleRegressor._members_noise`.)
        """
        likelihood = self._likelihood(Y)
        if self.prior_std is not None and not likelihood.learn_noise and not self._fits_mean_variances(likelihood, Y):
            self.prior_precisions_, self.evidence_history_ = None, []  # the layout is known once the members are
            return GaussianPrior(self.prior_std), likelihood.output_noise_std(Y.shape[1]), Y
        _, likelihood, prior, targets = self._fit_map(X, Y, self.prior_std_scale)
        return prior, likelihood.output_noise_std(Y.shape[1]), targets

    def _anchor(self, n_params, generator):
        """A member's anchor, a draw from the prior."""
        return self._prior.std * torch.randn(n_params, generator=generator, dtype=self._dtype, device=self._device)

    def _fit_members(self, X, Y, targets):
        """Train the members on ``targets`` (those of :meth:`_hyperparameters`), for a regressor
        to their modes (``_members_end_at_modes``); returns their weights ``(J, K)``, the
        likelihood of each group and the members' target perturbations ``(J, N, O)`` (None for none)."""
        n_rows = math.floor(self.data_fraction * len(X))
        if n_rows < 1:
            raise ValueError(
                f"data_fraction={self.data_fraction} leaves no training row for a member "
                f"with n_samples = {len(X)} (floor({self.data_fraction} * {len(X)}) = 0)."
            )
        self.n_estimators_ = n_members = self._n_members(n_rows)
        # Four seeds per member, drawn up front: initial weights, data subset,
        # anchor and target perturbations, minibatch order. Results do not
        # depend on how members are grouped over joblib workers.
        seeds = self._seed_table(self._split_seed, (n_members, 4))
        theta, module = self._initial_weights(X.shape[1], self._n_outputs(Y), seeds[:, 0])
        anchors, perturbations = zip(
            *(self._randomization(theta.shape[1], Y.shape, self._generator(seed)) for seed in seeds[:, 2])
        )
        members = dict(
            subsets=torch.as_tensor(np.stack([random_rows(len(X), n_rows, seed) for seed in seeds[:, 1]])),
            anchors=torch.stack(anchors),
            perturbations=None if perturbations[0] is None else torch.stack(perturbations).cpu(),
        )
        X, targets = X.astype(self.dtype), targets.astype(self.dtype)
        groups = np.array_split(np.arange(n_members), min(effective_n_jobs(self.n_jobs), n_members))
        results = Parallel(n_jobs=self.n_jobs)(
            delayed(self._train_group)(
                module, theta[group], X, Y, targets, {name: None if value is None else value[group]
                                                      for name, value in members.items()},
                seeds[group, 3], n_rows, verbose=self.verbose if index == 0 else 0,
            )
            for index, group in enumerate(groups)
        )
        self.net_ = [result.net for result in results]
        self._model = FunctionalModel(self.net_[0].module_.model.module)
        theta = torch.cat([result.theta for result in results])
        if self._members_end_at_modes:
            likelihood = self._likelihood(Y, leading_shape=(n_members, 1), noise_std=self._member_noise)
            theta = finish_members(self._model, theta, X, targets, likelihood=likelihood,
                                   prior_precision=self._prior.precision, **members)
            for group, net in zip(groups, self.net_):
                net.module_.theta.data.copy_(theta[group])
        return theta, [result.likelihood for result in results], members["perturbations"]

    def _train_group(self, module, theta, X, Y, targets, members, seeds, n_rows, verbose):
        """Train one group of members from their initial weights ``theta`` (``members``: their
        rows of the subsets, anchors and perturbations)."""
        self._pin_malloc()  # in a worker process of n_jobs, its first fit
        return train_members(
            FunctionalModel(module),
            theta,
            X,
            targets,
            **members,
            likelihood=self._likelihood(Y, leading_shape=(len(seeds), 1), noise_std=self._member_noise),
            prior_precision=self._prior.precision,
            seeds=seeds,
            batch_size=self._batch_size(n_rows),
            lr=self.lr,
            lr_schedule=self.lr_schedule,
            max_epochs=self._n_epochs(n_rows),
            optimizer=self.optimizer,
            callbacks=self._callbacks(),
            device=self._device,
            verbose=verbose,
        )


class BaseEnsembleRegressor(LocalPosteriorMixin, EnsembleMixin, BaseBayesianRegressor):
    """Shared fit of the ensemble regressors; subclasses choose anchors and perturbations. Each
    member carries the MAP network's Laplace posterior at a row beyond the members' spread
    (:class:`~sklearn_quinn._local_posterior.LocalPosteriorMixin`)."""

    _parameter_constraints: dict = {
        **BaseBayesianRegressor._parameter_constraints,
        **EnsembleMixin._ensemble_constraints,
    }

    def _fit(self, X, Y):
        super()._fit(X, Y)
        self.member_std_ = self._local_std_in_y_units()

    def _hyperparameters(self, X, Y):
        """As the mixin's; where the evidence learned the noise of a Gaussian likelihood, also
        keep the degrees of freedom that noise leaves the MAP network's residuals, which
        :meth:`_members_noise` takes for the members' mean's unless it measures them."""
        prior, noise_std, targets = super()._hyperparameters(X, Y)
        self._evidence_dof = None
        if self._likelihood(Y).learn_noise:
            sums, n_rows = self._row_sums(self._model.flatten()[None], X, Y, squared_residuals)
            self._evidence_dof = n_rows - sums / noise_std.double().square()
        return prior, noise_std, targets

    def _members_noise(self, X, Y, theta, likelihoods, perturbations):
        """The noise of the function the ensemble predicts with, its members' mean: each
        output's residual sum of squares over the degrees of freedom the fit leaves.

        MacKay's noise is the residuals' variance over the ``N O - gamma`` degrees of freedom
        that the well-determined weights leave (MacKay 1992, "A practical Bayesian framework
        for backpropagation networks"), and the evidence reads it off the MAP network's
        residuals. The ensemble predicts with its members' mean, whose residuals are its own:
        where the members disagree (a nearly noise-free table, whose residuals are mostly each
        network's approximation error), the mean fits the rows more closely than any member,
        and the members' spread already carries the rest. So the denominator's degrees of
        freedom are the evidence's (those its noise leaves the MAP network's residuals), and
        the residuals the mean's; for members that reach the MAP's function (a linear model's
        deep ensemble) this is the evidence's noise.

        Members trained on their own perturbations ``noise * eps_j`` of the targets measure
        the degrees of freedom of their fit themselves, as the covariance of the fit with the
        targets (Efron 2004, "The estimation of prediction error: covariance penalties and
        cross-validation"; Ye 1998, "On measuring and correcting the effects of data mining and
        model selection", whose generalized degrees of freedom perturb the targets so):
        ``df = sum_i cov(f_i, y_i) / noise^2``, estimated without bias by
        ``sum_j <f_j - f_mean, eps_j> / ((J - 1) noise)``. For a linear model it is the
        evidence's ``gamma = tr(H (H + A)^-1)``; the evidence's Laplace approximation at one
        mode can count fewer, and a deeper network's noise then came out too small.
        """
        noise_std = super()._members_noise(X, Y, theta, likelihoods, perturbations)
        self.degrees_of_freedom_ = None
        if self._evidence_dof is None:
            return noise_std
        sums, n_rows = self._row_sums(theta, X, Y, squared_residuals)
        # One member has no spread about the members' mean to measure with.
        if perturbations is None or len(theta) < 2:
            dof = self._evidence_dof
        else:
            by_row = perturbations.transpose(0, 1).numpy()
            covariance_sums, _ = self._row_sums(theta, X, by_row, perturbation_covariances)
            dof = covariance_sums / ((len(theta) - 1) * noise_std[0].double())
        free = n_rows - dof
        self.degrees_of_freedom_ = self._per_output(self._to_numpy(dof) * len(X) / n_rows)
        # A fit that leaves less than one degree of freedom to measure the noise with (a custom module's
        # exact function, a constant target's) keeps the evidence's noise.
        variance = torch.where(free >= 1, sums / free, noise_std[0].double().square())
        return variance.sqrt().to(noise_std).expand_as(noise_std)

    def _row_sums(self, theta, X, Y, term):
        """Each output's sum ``(O,)`` over the training rows of ``term(outputs, Y)``, of the
        outputs ``(S, n, O)`` (network units) of the networks ``theta`` ``(S, K)`` and the rows
        of ``Y`` ``(N, ...)`` over a block of ``n`` rows; read from a random subset of a big
        table's rows (:func:`~sklearn_quinn._core.row_subsets.random_subset`, the same rows for
        every ``Y``), whose number it returns too."""
        X, Y, _ = random_subset(X, Y, self._split_seed)
        X, Y = self._tensor(X), self._tensor(Y)
        sums = torch.zeros(Y.shape[-1], dtype=torch.float64, device=Y.device)
        with torch.no_grad():
            for rows in torch.split(torch.arange(len(X), device=X.device), PREDICT_BLOCK_ROWS):
                outputs = self._model(theta, X[rows]).reshape(len(theta), len(rows), -1)
                sums += term(outputs, Y[rows]).double().flatten(0, -2).sum(0)
        return sums, len(X)


def squared_residuals(outputs, Y):
    """The squared residuals ``(n, O)`` of the networks' mean ``outputs`` ``(S, n, O)`` from the targets ``Y``."""
    return (outputs.mean(0) - Y).square()


def perturbation_covariances(outputs, perturbations):
    """Each network's deviation from the networks' mean ``outputs`` ``(S, n, O)`` times its own
    target perturbation ``(n, S, O)``, ``(S, n, O)``."""
    return (outputs - outputs.mean(0)) * perturbations.transpose(0, 1)


_SHARED_PARAMETERS = """
    Parameters
    ----------
    hidden_layer_sizes : array-like of int, default=(50,)
        Hidden layer widths of the default MLP backbone.
    activation : {'identity', 'logistic', 'tanh', 'relu'}, default='relu'
    linear_skip : bool, default=True
        Add a linear map of the inputs, with its own prior, to the MLP's
        outputs (see :class:`~sklearn_quinn.LaplaceRegressor`).
    module : torch.nn.Module or callable, default=None
        A custom backbone (deep-copied, its layers' weights redrawn for each
        member) or a callable ``(n_features, n_outputs) -> nn.Module``;
        replaces the MLP. Its outputs are as for
        :class:`~sklearn_quinn.LaplaceRegressor`'s ``module``.
    n_estimators : int or 'auto', default='auto'
        Number of members ``J``. 'auto' is the family's: five for the deep
        ensemble; for RMS, whose members are posterior draws, twenty, or five
        where each member's ``max_epochs='auto'`` training is capped (above
        40,000 rows a member at the default batch; ``n_estimators_``).
    data_fraction : float in (0, 1], default=1.0
        Each member trains on its own random ``floor(data_fraction * N)`` rows.
    prior_std : float or None, default=None
        None learns one prior precision per group of weights by the Laplace
        evidence of one MAP network, trained first (see
        :class:`~sklearn_quinn.LaplaceRegressor`); every member then trains
        under it. A float fixes the std of the Gaussian prior on every weight.
    prior_std_scale : float > 0, default=1.0
        As for :class:`~sklearn_quinn.LaplaceRegressor`: the learned prior's
        stds times this, within the MAP training and for every member.
    noise_std : float, default=None
        Observation noise std in the units of y; None learns it with the
        prior, once, and the members train under it (a noise fitted by each
        member would shrink as it over-fits); the predictive adds the noise of
        the members' mean, its residuals over the degrees of freedom the fit
        leaves (``noise_std_``, ``degrees_of_freedom_``).
    likelihood : {'gaussian', 'heteroscedastic'}, default='gaussian'
        As for :class:`~sklearn_quinn.LaplaceRegressor`.
    lr : float, default=0.01
    lr_schedule : {'cosine', 'constant'}, default='cosine'
    max_epochs : int or 'auto', default='auto'
        Epochs over each member's rows; 'auto' is 1000, or fewer where they
        would take more than 200,000 minibatch steps. As for
        :class:`~sklearn_quinn.LaplaceRegressor`, a training too short for
        the network to fit the data learns too strong a prior.
    batch_size : int or 'auto', default='auto'
        Rows per member per step; 'auto' is ``min(200, rows per member)``.
    optimizer : torch optimizer class, default=torch.optim.Adam
    callbacks : list of skorch callbacks, default=None
        Extra callbacks for the skorch nets of the MAP's and the members'
        trainings, copied for each (they hold no rows out: a callback monitors
        ``'train_loss'``; skorch's checkpoints are refused). The members of a
        joblib group (``n_jobs``) train as one net: a callback that stops a
        training (skorch's ``EarlyStopping``) stops a
        group on its members' summed loss, so the fit then depends on
        ``n_jobs``.
    normalize_X : bool, default=True
        Standardise each input column internally (see :class:`~sklearn_quinn.LaplaceRegressor`).
    normalize_y : bool, default=True
        Standardise the target internally (see :class:`~sklearn_quinn.LaplaceRegressor`).
    dtype : {'float64', 'float32'}, default='float64'
    device : str or torch.device, default='cpu'
    n_jobs : int, default=None
        Split the members into this many groups trained by joblib workers
        (each group still batched; a dask or ray joblib backend distributes
        them). The results do not depend on it.
    random_state : int, RandomState instance or None, default=None
    verbose : int, default=0
        1 shows a progress bar over epochs.
"""

_SHARED_ATTRIBUTES = """
    Attributes
    ----------
    prior_precisions_ : dict
        The prior precision of each group of weights, by name (a parameter
        tensor, or an input column of a layer that reads the inputs, as
        ``'mlp.0.weight[:, 2]'``): learned by the evidence (``prior_std=None``)
        or ``1 / prior_std**2``.
    evidence_history_ : list of dict
        One entry per evidence update of the MAP training (``epoch``,
        ``stage``, ``log_evidence``, ``noise_std`` in network units, the
        precision of each group); empty when nothing is learned
        and the noise is not a heteroscedastic head.
    n_estimators_ : int
        The members (``n_estimators``, or the number ``'auto'`` chose).
    posterior_ : SamplePosterior
        The members' weights, ``(n_estimators_, K)``.
    noise_std_ : float, ndarray of shape (n_targets,) or None
        The observation noise std the predictive variance adds, in the units
        of y (``sample_y`` draws it too). Learned (``noise_std=None``, the
        Gaussian likelihood): the noise of the function the ensemble predicts
        with, its members' mean, each output's residual sum of squares over
        the training rows divided by the rows less ``degrees_of_freedom_``;
        the members trained under the evidence's noise of the MAP network
        (``evidence_history_``). Otherwise the root mean square of the
        members' noise std.
        None under ``likelihood='heteroscedastic'``, whose noise is per input (``predict_uncertainty``).
    degrees_of_freedom_ : float, ndarray of shape (n_targets,) or None
        The degrees of freedom of the fit that ``noise_std_`` leaves out of the
        training rows: the evidence's (those its noise leaves the MAP
        network's residuals, MacKay's ``gamma``), or, for RMS's members on
        perturbed targets, the covariance of their fit with their
        perturbations (Efron 2004). None where the noise is fixed
        (``noise_std``) or a heteroscedastic head.
    member_std_ : float, ndarray of shape (n_targets,) or None
        The deep ensemble's: the root mean square over the training rows, in
        the units of y, of the output std of the Laplace posterior about the
        MAP network that learned the prior and the noise. At a prediction row
        each member's Gaussian about its output carries that posterior's
        variance there less the members' spread (none where they spread more),
        so that the predictive's epistemic variance is the larger of the two;
        where neither the full curvature nor its Kronecker factors fit the
        machine, ``member_std_ ** 2`` at every row. None for RMS, whose
        members carry that posterior at a row as the deep ensemble's do but,
        past those structures, nothing, under the heteroscedastic
        likelihood, and where ``prior_std`` and ``noise_std`` are both fixed
        (no MAP network is trained).
    net_ : list of skorch.NeuralNet
        The skorch net of each group of members trained together (one unless
        ``n_jobs`` splits them).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only for pandas input with string column names.
"""


class DeepEnsembleRegressor(BaseEnsembleRegressor):
    __doc__ = (
        """Deep ensemble: ``n_estimators`` networks from independent initialisations.

    Predictions average the members; the predictive variance is the spread of
    the members or the MAP network's Laplace posterior variance at the row,
    whichever is larger (each member carries a local posterior: see
    ``member_std_``), plus the observation noise. All members train together as
    the rows of one batched weight matrix (one optimiser step updates all),
    each in its own minibatch order (and with ``data_fraction < 1`` on its own
    random subset of the rows).

    Each member minimises the Gaussian negative log likelihood of its rows
    under the noise the MAP network learned (or the fixed ``noise_std``), plus
    the weight decay of the prior (the squared error of Lakshminarayanan et al.
    is this loss at a fixed noise and a flat prior), and ends at its mode: the
    training's Adam steps, then one full-batch L-BFGS run for all members
    where the full batch is cheap. Cost: about that of one network while
    per-call overhead dominates (small data, minibatches).
"""
        + _SHARED_PARAMETERS
        + _SHARED_ATTRIBUTES
        + """
    See Also
    --------
    RMSRegressor : members anchored to prior draws, a posterior sampler.

    References
    ----------
    B. Lakshminarayanan, A. Pritzel and C. Blundell, "Simple and scalable
    predictive uncertainty estimation using deep ensembles", NeurIPS 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_quinn import DeepEnsembleRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-2, 2, size=(60, 1))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.randn(60)
    >>> reg = DeepEnsembleRegressor(hidden_layer_sizes=(16,), max_epochs=100, random_state=0).fit(X, y)
    >>> reg.posterior_.samples.shape
    torch.Size([5, 50])
    >>> mean, std = reg.predict(X[:3], return_std=True)
    >>> mean.shape, bool((std > 0).all())
    ((3,), True)
    """
    )

    _carries_mean_local_variance = True

    def __init__(
        self,
        hidden_layer_sizes=(50,),
        activation="relu",
        *,
        linear_skip=True,
        module=None,
        n_estimators="auto",
        data_fraction=1.0,
        prior_std=None,
        prior_std_scale=1.0,
        noise_std=None,
        likelihood="gaussian",
        lr=0.01,
        lr_schedule="cosine",
        max_epochs="auto",
        batch_size="auto",
        optimizer=torch.optim.Adam,
        callbacks=None,
        normalize_X=True,
        normalize_y=True,
        dtype="float64",
        device="cpu",
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.linear_skip = linear_skip
        self.module = module
        self.n_estimators = n_estimators
        self.data_fraction = data_fraction
        self.prior_std = prior_std
        self.prior_std_scale = prior_std_scale
        self.noise_std = noise_std
        self.likelihood = likelihood
        self.lr = lr
        self.lr_schedule = lr_schedule
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.optimizer = optimizer
        self.callbacks = callbacks
        self.normalize_X = normalize_X
        self.normalize_y = normalize_y
        self.dtype = dtype
        self.device = device
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose


class RMSRegressor(BaseEnsembleRegressor):
    __doc__ = (
        """Randomized MAP sampling: each member is the MAP of a randomly perturbed posterior.

    Member ``j`` minimises the anchored negative log posterior (Pearce et al., 2020)::

        sum over its rows of ||y_i + noise * eps_ij - f(w_j, x_i)||^2 / (2 noise^2)
            + |D_j| / N * ||w_j - w0_j||^2 / (2 prior_std^2),

    with its own anchor ``w0_j ~ N(0, prior_std^2 I)`` and, with
    ``perturb_targets=True``, its own target perturbations ``eps_ij ~ N(0, 1)``.
    For a linear model with Gaussian noise the members are then exact,
    independent posterior draws (randomize-then-optimize); with
    ``perturb_targets=False`` this is Pearce et al.'s anchored ensemble, whose
    spread is smaller than the posterior's in that case. Members train
    together as rows of one batched weight matrix and end at their minima, as
    the deep ensemble's do (:class:`DeepEnsembleRegressor`). At a prediction
    row each member is a Gaussian about its output carrying the MAP network's
    Laplace posterior variance there beyond the members' spread, as the deep
    ensemble's members are: on tables with few rows a feature the members
    alone spread less than that posterior at rows away from the data.
"""
        + _SHARED_PARAMETERS
        + """    perturb_targets : bool, default=True
        Perturb each member's targets by its own noise draws (see above).
"""
        + _SHARED_ATTRIBUTES
        + """
    See Also
    --------
    DeepEnsembleRegressor : members without anchors or perturbations.

    References
    ----------
    T. Pearce, F. Leibfried, A. Brintrup, M. Zaki and A. Neely, "Uncertainty
    in neural networks: approximately Bayesian ensembling", AISTATS 2020.
    J. M. Bardsley, A. Solonen, H. Haario and M. Laine, "Randomize-then-optimize:
    a method for sampling from posterior distributions in nonlinear inverse
    problems", SIAM J. Sci. Comput. 36(4), 2014.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_quinn import RMSRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-2, 2, size=(60, 1))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.randn(60)
    >>> reg = RMSRegressor(hidden_layer_sizes=(16,), n_estimators=10, max_epochs=100,
    ...                    random_state=0).fit(X, y)
    >>> reg.sample_y(X[:2], n_samples=4).shape
    (2, 4)
    """
    )

    _parameter_constraints: dict = {
        **BaseEnsembleRegressor._parameter_constraints,
        "perturb_targets": ["boolean"],
    }

    _auto_members = RMS_AUTO_MEMBERS

    def __init__(
        self,
        hidden_layer_sizes=(50,),
        activation="relu",
        *,
        linear_skip=True,
        module=None,
        n_estimators="auto",
        data_fraction=1.0,
        prior_std=None,
        prior_std_scale=1.0,
        noise_std=None,
        likelihood="gaussian",
        perturb_targets=True,
        lr=0.01,
        lr_schedule="cosine",
        max_epochs="auto",
        batch_size="auto",
        optimizer=torch.optim.Adam,
        callbacks=None,
        normalize_X=True,
        normalize_y=True,
        dtype="float64",
        device="cpu",
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.linear_skip = linear_skip
        self.module = module
        self.n_estimators = n_estimators
        self.data_fraction = data_fraction
        self.prior_std = prior_std
        self.prior_std_scale = prior_std_scale
        self.noise_std = noise_std
        self.likelihood = likelihood
        self.perturb_targets = perturb_targets
        self.lr = lr
        self.lr_schedule = lr_schedule
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.optimizer = optimizer
        self.callbacks = callbacks
        self.normalize_X = normalize_X
        self.normalize_y = normalize_y
        self.dtype = dtype
        self.device = device
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _randomization(self, n_params, target_shape, generator):
        anchor = self._anchor(n_params, generator)
        perturbation = torch.randn(target_shape, generator=generator, dtype=self._dtype, device=self._device)
        return anchor, perturbation if self.perturb_targets else None
