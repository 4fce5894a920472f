"""SWAGRegressor and SWAGClassifier: a mixture of Gaussians from the moments of the members' SGD trajectories."""

from functools import partial
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions

from .._classifier_base import SAMPLE_PREDICTIVES, BaseBayesianClassifier
from .._core.network import FunctionalModel
from .._core.row_subsets import random_subset
from .._local_posterior import LocalPosteriorMixin
from .._map import batch_slices
from .._members import MemberTrainingMixin
from .._regressor_base import BaseBayesianRegressor
from .._warnings import warn
from ..base import (
    AUTO_MAX_STEPS,
    MAP_TRAINING_CONSTRAINTS,
    MEMBERS_CONSTRAINTS,
    PRIOR_SCALE_CONSTRAINTS,
    reset_parameters,
)
from ..ensemble._engine import train_members
from ._callbacks import CollectSnapshots
from ._engine import mixture_posterior
from ._proximal_sgd import ProximalSGD
from ._rate import sampling_rate
from ._scale import misfit_scale

_MAX_RATE_CUTS = 3  # tenfold cuts of lr_swag after a diverged SGD phase
_MAX_QUIET_WIDENING = 100.0  # cov_scale='auto' warns beyond this widening of the snapshots' covariance


class SWAGMixin(MemberTrainingMixin):
    """The members, the SGD phase after their MAPs, and the mixture of the SWAG Gaussians of their snapshots.

    Its ``_fit`` serves :class:`SWAGRegressor` and :class:`SWAGClassifier`.
    With ``n_estimators=1`` it is SWAG (Maddox et al. 2019); with more it is
    MultiSWAG (Wilson & Izmailov 2020, "Bayesian deep learning and a
    probabilistic perspective of generalization"): one SWAG Gaussian around
    each of several independently trained networks, and the posterior their
    equal mixture. One SGD trajectory explores one basin of the loss, and a
    constant-rate trajectory spreads in the directions SGD's noise takes, not
    in those the posterior is wide in; networks trained from other
    initialisations land in other basins, and where the data leave the
    function open they disagree, which a single basin's Gaussian cannot show.
    The members train side by side as rows of one weight matrix, as a deep
    ensemble's do, under the prior and the noise the evidence of the first
    one's MAP learned (the MAP is the first member).
    """

    #: ``n_estimators='auto'``: five members below the MAP training's step cap (as the deep
    #: ensemble's), one above it, where on the large UCI sets (power, kin8nm, naval) one member's
    #: intervals already covered 0.93-0.98.
    _auto_members = (5, 1)

    _swag_constraints: dict = {
        **MAP_TRAINING_CONSTRAINTS,
        **PRIOR_SCALE_CONSTRAINTS,
        **MEMBERS_CONSTRAINTS,
        "cov_type": [StrOptions({"lowrank", "diag"})],
        "max_rank": [Interval(Integral, 2, None, closed="left")],
        "cov_scale": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "swag_epochs": [Interval(Integral, 1, None, closed="left")],
        "collect_every": [Interval(Integral, 1, None, closed="left")],
        "lr_swag": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "batch_size_swag": [Interval(Integral, 1, None, closed="left")],
        "n_samples": [Interval(Integral, 1, None, closed="left")],
    }

    def _fit(self, X, Y):
        """Train the members, then collect their SGD trajectories' moments: the family's part of ``fit``."""
        self.n_estimators_ = self._n_members(len(X))
        self._check_counts(self.n_estimators_)
        theta, likelihood, prior, targets = self._fit_map(X, Y, self.prior_std_scale)
        noise_std = likelihood.output_noise_std(Y.shape[1])
        # Seeds per member: initial weights, minibatch order of its MAP training, of its SGD phase.
        seeds = self._seed_table(self._split_seed, (self.n_estimators_, 3))
        others = self._train_members(X, Y, targets, prior, noise_std, seeds[1:], "MultiSWAG members")
        members = torch.cat([theta[None], others])
        # The SGD rate is read in units of the loss's curvature scale: the noise variance.
        rate_unit = 1.0 if noise_std is None else float(noise_std.square().mean())
        frozen = likelihood.frozen(Y.shape[1])
        groups, precision = self.net_.criterion_.groups, self.net_.criterion_.prior_precision
        # The rate and the scales are sums over the rows: a big table's read from a random subset.
        X_rows, Y_rows, row_weight = random_subset(X, Y, self._split_seed)
        X_rows, Y_rows = self._tensor(X_rows), self._tensor(Y_rows)
        lr_swag = self.lr_swag
        if lr_swag == "auto":  # the smallest of the members' rates: one rate must be stable for every member
            lr_swag = min(
                sampling_rate(self._model, member, X_rows, Y_rows, frozen, groups, precision,
                              self._swag_batch_size(len(X)), row_weight)
                for member in members
            ) / rate_unit
        self._collect_trajectories(X, targets, self._n_outputs(Y), members, frozen, prior, lr_swag, rate_unit,
                                   seeds[:, 2])
        if self.cov_scale == "auto":
            widening = np.array([self._misfit_widening(X_rows, Y_rows, frozen, groups, precision, component,
                                                       row_weight) for component in self.posterior_.components])
            if self.lr_swag != "auto":  # 'auto' is already the largest stable rate (see the helper)
                _warn_of_wide_guesses(widening)
            self.cov_scale_ = 1 / widening
        else:
            self.cov_scale_ = np.full(self.n_estimators_, float(self.cov_scale))
        self.posterior_ = self.posterior_.scaled(1 / self.cov_scale_)
        self._keep_noise(noise_std)

    def _misfit_widening(self, X, Y, likelihood, groups, precision, component, row_weight):
        """The factor by which ``cov_scale='auto'`` widens one member's Gaussian, the inverse of its
        ``cov_scale`` (``X``, ``Y``: tensors, each row standing for ``row_weight`` rows of the table):
        ``misfit_scale``.

        1 under a likelihood whose curvature vanishes as its outputs grow
        confident (a classifier's): the misfit is then far from quadratic
        across the draws, and the scale it gives widened SWAGClassifier's
        posterior on wine to twice the MAP network's test NLL. The
        heteroscedastic Gaussian's curvature moves with the noise head but
        does not vanish, and there the scale applies."""
        if likelihood.curvature_vanishes_with_confidence:
            return 1.0
        return misfit_scale(self._model, component, X, Y, likelihood, groups, precision, row_weight)

    def _check_parameters(self):
        """Too few snapshots, and too few draws for a number of members given as an integer ('auto'
        resolves with the rows: :meth:`_check_counts` at fit)."""
        super()._check_parameters()
        if self.swag_epochs // self.collect_every < 2:
            raise ValueError(
                f"swag_epochs={self.swag_epochs} with collect_every={self.collect_every} "
                "collects fewer than the 2 snapshots SWAG needs."
            )
        if self.n_estimators != "auto":
            self._check_counts(self.n_estimators)

    def _prediction_draws(self, posterior=None):
        self._check_counts(self.n_estimators_)  # an n_samples set after fit is read here, unchecked by fit
        return super()._prediction_draws(posterior)

    def _check_counts(self, n_estimators):
        if self.n_samples < n_estimators:  # a member without a draw would drop out of every prediction
            raise ValueError(
                f"n_samples={self.n_samples} draws cannot cover the {n_estimators} members' Gaussians "
                f"(n_estimators={self.n_estimators!r}); give n_samples >= n_estimators."
            )

    def _collect_trajectories(self, X, targets, n_outputs, members, likelihood, prior, lr_swag, rate_unit, seeds):
        """Run SGD at rate ``lr_swag * rate_unit`` from the ``members`` ``(J, K)`` on the MAP's
        ``targets`` (see :meth:`_fit_map`; ``n_outputs``: the network's); set ``posterior_``, ``n_snapshots_`` and
        ``lr_swag_`` from the snapshots (``net_`` stays the MAP).

        A phase in which a member diverges is run again at a tenth of the
        rate, up to ``_MAX_RATE_CUTS`` times, with a ConvergenceWarning. A
        member diverged if its moments leave the finite numbers or if its
        training loss, averaged over the phase's epochs, rises above that of a
        freshly initialised network of the same architecture: SGD has then
        undone the training, even where the weights (e.g. 1e99) stay finite.
        The average, not each epoch's loss: where the data leave a trained
        network little better than an untrained one (diabetes), the epochs of
        five members at any rate fluctuate across that line. A member no
        better than that network (labels without signal, where the evidence
        shrinks the network to a constant) has no training to undo, and only
        finiteness is checked.
        """
        X_tensor, targets_tensor = self._tensor(X), self._tensor(targets)
        untrained_loss = self._untrained_loss(X_tensor, targets_tensor, n_outputs, likelihood)
        trained_loss = self._member_losses(X_tensor, targets_tensor, likelihood, members)
        limit = torch.where(trained_loss >= untrained_loss, torch.inf, untrained_loss)
        first = lr_swag
        for cut in range(_MAX_RATE_CUTS + 1):
            lr_swag = first / 10**cut
            moments, losses = self._run_sgd(X, targets, members, likelihood, prior, lr_swag * rate_unit, seeds)
            finite = torch.isfinite(moments.mean).all() and torch.isfinite(moments.sq_mean).all()
            if finite and bool((torch.stack(losses).mean(0) <= limit).all()):  # a NaN loss fails too
                break
        else:
            raise FloatingPointError(f"the SGD phase diverged at every rate from lr_swag={first:g} "
                                     f"down to {lr_swag:g}; check the data's scale")
        if cut:
            warn(f"the SGD phase diverged at lr_swag={first:g}; the snapshots were collected at "
                 f"lr_swag={lr_swag:g} (lr_swag_)", ConvergenceWarning)
        self.lr_swag_ = lr_swag
        self.posterior_ = mixture_posterior(moments, self.cov_type)
        self.n_snapshots_ = int(moments.n_snapshots)

    def _swag_batch_size(self, n_rows):
        """Rows per SGD step: ``batch_size_swag``, at most the table."""
        return min(self.batch_size_swag, n_rows)

    def _steps_per_period(self, n_rows):
        """The SGD steps of each of the ``swag_epochs`` periods (the unit of
        ``collect_every``): None for a whole epoch, or on a table where
        ``swag_epochs`` epochs would take more than ``AUTO_MAX_STEPS`` steps,
        ``AUTO_MAX_STEPS // swag_epochs`` (each period then a fresh random
        subset of the rows), so that a million rows take minutes, as the MAP's
        ``max_epochs='auto'`` does. Snapshots a period apart are then closer
        together than an epoch's; ``cov_scale='auto'`` sets their spread's
        scale from the data misfit all the same."""
        batches_per_epoch = len(batch_slices(n_rows, self._swag_batch_size(n_rows)))
        cap = max(1, AUTO_MAX_STEPS // self.swag_epochs)
        return cap if batches_per_epoch > cap else None

    def _untrained_loss(self, X, Y, n_outputs, likelihood):
        """The SGD phase's training loss, the negative log likelihood per
        point, of the backbone freshly initialised (a ``module`` given as a
        trained instance is reset too); ``X``, ``Y``: tensors."""
        with self._seeded(self._split_seed):
            module = reset_parameters(self._build_module(X.shape[1], n_outputs))
        theta = FunctionalModel(module).flatten()[None]
        return float(self._member_losses(X, Y, likelihood, theta)[0])

    def _member_losses(self, X, Y, likelihood, theta):
        """The negative log likelihood per point of each row of ``theta`` ``(J, K)`` on the
        training rows (``Y``: the SGD phase's targets), shape ``(J,)``."""
        with torch.no_grad():
            return -likelihood.log_prob(self._model(theta, X), Y.expand(len(theta), *Y.shape)).mean(-1)

    def _run_sgd(self, X, Y, members, likelihood, prior, lr, seeds):
        """The moments of ``swag_epochs`` of constant-rate SGD from the ``members``, each on its own
        minibatches, and each member's training loss over each epoch (the likelihood's part: the
        prior's is taken by :class:`ProximalSGD`)."""
        collect = CollectSnapshots(self.collect_every, self.max_rank)
        with self._seeded(self._split_seed):
            train_members(
                self._model,
                members.clone(),
                X.astype(self.dtype),
                Y.astype(self.dtype),
                subsets=torch.arange(len(X)).repeat(len(members), 1),
                anchors=torch.zeros_like(members),
                perturbations=None,
                likelihood=likelihood,
                prior_precision=0.0,
                seeds=seeds,
                batch_size=self._swag_batch_size(len(X)),
                max_batches=self._steps_per_period(len(X)),
                lr=lr,
                lr_schedule="constant",
                max_epochs=self.swag_epochs,
                optimizer=partial(ProximalSGD, decay=prior.precision / len(X)),
                callbacks=[("swag", collect)],
                device=self._device,
                verbose=self.verbose,
                warm_up=False,  # it starts at the MAP, under the likelihood itself
                desc="SWAG",
            )
        return collect.state_, collect.losses_


class SWAGRegressor(LocalPosteriorMixin, SWAGMixin, BaseBayesianRegressor):
    """Neural-network regressor with a (Multi)SWAG posterior: stochastic weight averaging Gaussians.

    The network is first trained to the MAP (negative log posterior, through
    skorch), learning the prior and the noise from the evidence; the other
    ``n_estimators_ - 1`` members train from their own initial weights under
    them, side by side as a deep ensemble's. SGD then runs ``swag_epochs``
    more epochs from every member at the constant rate ``lr_swag`` with the
    noise fixed, and every ``collect_every`` epochs each member's weights
    update its running first and second moments and join its last
    ``max_rank`` snapshots. Each member's Gaussian is the SWAG Gaussian of
    Maddox et al. (2019): a draw is

        mean + diag(sqrt(var)) z1 / sqrt(2) + D z2 / sqrt(2 (k - 1)),

    ``var`` the snapshots' variance, ``D`` the last ``k`` deviations from the
    mean (the second term only for ``cov_type='lowrank'``), the deviation
    from the mean divided by ``sqrt(cov_scale_)``. The posterior is the equal
    mixture of the members' Gaussians (MultiSWAG, Wilson & Izmailov 2020): one
    SGD trajectory explores one basin, and its Gaussian misses the
    disagreement between networks the data leave open. Predictions average
    the network over ``n_samples`` draws, shared among the members as evenly as
    their count allows,
    each a Gaussian about its outputs carrying the MAP network's Laplace
    posterior variance at the row beyond the draws' own spread (under a
    Gaussian likelihood, full or Kronecker-factored): SGD's snapshots do not move
    in the directions only the prior holds, where a row away from the
    training rows looks. Cost: ``n_estimators_`` MAP trainings plus ``swag_epochs`` epochs, batched
    over the members; memory ``O(n_estimators_ K max_rank)``.

    Parameters
    ----------
    hidden_layer_sizes, activation, linear_skip, module, prior_std, prior_std_scale, noise_std, likelihood, lr, \
lr_schedule, max_epochs, batch_size, optimizer, callbacks, normalize_X, normalize_y, dtype, device, random_state, \
verbose
        As for :class:`~sklearn_quinn.LaplaceRegressor` (they set the MAP
        training, and the members').
    n_estimators : int or 'auto', default='auto'
        Members, each the centre of one SWAG Gaussian; 1 is Maddox et al.'s
        SWAG around the MAP. ``'auto'``: 5, or 1 on a table where the MAP's
        ``max_epochs='auto'`` training is capped at 200,000 steps (above
        40,000 rows at the default batch), where each member would be
        another capped training and one member already covered the large
        UCI sets.
    cov_type : {'lowrank', 'diag'}, default='lowrank'
    max_rank : int, default=20
        Number ``k`` of last deviations kept for the low-rank term.
    swag_epochs : int, default=100
        Epochs of SGD after the MAP; where they would take more than 200,000
        minibatch steps (above 64,000 rows at 32-row batches), periods of
        ``200,000 // swag_epochs`` steps on fresh random rows instead (and
        ``collect_every`` counts periods), as ``max_epochs='auto'`` caps the
        MAP's training.
    collect_every : int, default=1
        Epochs between snapshots (at least two snapshots are needed).
    cov_scale : 'auto' or float, default='auto'
        The ``s`` of ``Sigma = Sigma_SWAG / s`` for every member, as for
        :class:`~sklearn_quinn.LaplaceRegressor`: values above 1 shrink the
        posterior, 1.0 is Maddox et al.'s covariance. ``'auto'`` takes
        ``s = tr(G Sigma_SWAG) / gamma`` at each member's SWA mean (``G`` the
        generalised Gauss-Newton, ``gamma`` MacKay's count of well-determined
        weights), so that the draws raise the training data's misfit as much
        as the Laplace posterior's do: SGD capped by its stability limit
        spreads too little. At a float ``lr_swag`` it warns where that widens
        the snapshots' covariance more than 100-fold (a larger rate would
        spread them further; at ``'auto'`` the rate is the largest the
        stability cap allows). The same under the heteroscedastic
        likelihood, whose curvature moves with the noise head but does not
        vanish.
    lr_swag : 'auto' or float, default='auto'
        Constant SGD learning rate of the collection phase, on the scale of
        half the mean squared error (the per-point negative log posterior
        times ``noise_std**2``, in the units of the standardised target), so
        that a value suits any noise level. ``'auto'`` takes the rate whose
        stationary distribution is closest to the posterior (Mandt, Hoffman
        and Blei 2017: ``2 S gamma / (N tr C)``, ``S`` rows a minibatch,
        ``gamma`` the weights the data determine at the MAP, ``C`` the
        per-point gradients' covariance there), capped at 0.2 of the
        stability limit of gradient descent on the MAP's curvature (where
        the iterates' variance is at most 1.25 times the continuous-time
        stationary law's at that rate); the smallest of the members' rates.
    batch_size_swag : int, default=32
        Minibatch rows of the SGD phase: the gradient noise of small batches
        is what spreads the snapshots (full-batch descent would settle on the
        MAP and collapse the posterior to a point).
    n_samples : int, default=100
        Weight draws averaged by ``predict`` (the same draws at every call),
        shared among the members as evenly as their count allows (the
        remainder to members chosen at random): at least as many as the members.

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
    posterior_ : GaussianMixturePosterior
        The equal mixture of the members' SWAG Gaussians: ``components[j]``
        holds member ``j``'s mean, diagonal std and (low rank) factor
        (``components[0]`` is the MAP's).
    n_snapshots_ : int
        Snapshots collected per member.
    n_estimators_ : int
        The members (``n_estimators``, or the number ``'auto'`` chose).
    cov_scale_ : ndarray, one entry per member
        The ``s`` each member's SWAG covariance was divided by (``cov_scale``,
        or the one ``'auto'`` chose).
    lr_swag_ : float
        The rate the snapshots were collected at: ``lr_swag`` (or the rate
        ``'auto'`` chose), or a tenth of it (up to three times) when SGD
        diverged at the higher rate, with a ConvergenceWarning.
    noise_std_ : float, ndarray of shape (n_targets,) or None
        Observation noise std (the MAP's estimate or the fixed value), units of y.
        None under ``likelihood='heteroscedastic'``, whose noise is per input (``predict_uncertainty``).
    net_ : skorch.NeuralNet
        The MAP net (the SGD phase trains a copy).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string column names.

    References
    ----------
    W. J. Maddox, T. Garipov, P. Izmailov, D. Vetrov and A. G. Wilson, "A simple
    baseline for Bayesian uncertainty in deep learning", NeurIPS 2019.

    A. G. Wilson and P. Izmailov, "Bayesian deep learning and a probabilistic
    perspective of generalization", NeurIPS 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_quinn import SWAGRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-2, 2, size=(60, 1))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.randn(60)
    >>> reg = SWAGRegressor(hidden_layer_sizes=(16,), max_epochs=100, swag_epochs=20,
    ...                     max_rank=5, random_state=0).fit(X, y)
    >>> reg.n_snapshots_, len(reg.posterior_.components), reg.posterior_.components[0].low_rank.shape
    (20, 5, torch.Size([50, 5]))
    >>> mean, std = reg.predict(X[:3], return_std=True)
    >>> mean.shape, bool((std > 0).all())
    ((3,), True)
    """

    _parameter_constraints: dict = {
        **BaseBayesianRegressor._parameter_constraints,
        **SWAGMixin._swag_constraints,
    }

    def __init__(
        self,
        hidden_layer_sizes=(50,),
        activation="relu",
        *,
        linear_skip=True,
        module=None,
        prior_std=None,
        prior_std_scale=1.0,
        noise_std=None,
        likelihood="gaussian",
        n_estimators="auto",
        cov_type="lowrank",
        max_rank=20,
        swag_epochs=100,
        collect_every=1,
        cov_scale="auto",
        lr_swag="auto",
        batch_size_swag=32,
        n_samples=100,
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
        random_state=None,
        verbose=0,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.linear_skip = linear_skip
        self.module = module
        self.prior_std = prior_std
        self.prior_std_scale = prior_std_scale
        self.noise_std = noise_std
        self.likelihood = likelihood
        self.n_estimators = n_estimators
        self.cov_type = cov_type
        self.max_rank = max_rank
        self.swag_epochs = swag_epochs
        self.collect_every = collect_every
        self.cov_scale = cov_scale
        self.lr_swag = lr_swag
        self.batch_size_swag = batch_size_swag
        self.n_samples = n_samples
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
        self.random_state = random_state
        self.verbose = verbose



class SWAGClassifier(SWAGMixin, BaseBayesianClassifier):
    """Neural-network classifier with a SWAG posterior.

    :class:`SWAGRegressor`'s members, SGD phase and mixture of Gaussians with
    a categorical (softmax) likelihood; ``lr_swag`` is the SGD rate on the mean
    cross-entropy. ``cov_scale='auto'`` is 1 here: a softmax's curvature
    vanishes where it saturates, so the misfit is not quadratic across the
    draws, and the regressor's scale over-widens (on wine, twice the MAP
    network's test NLL). Predictions average the softmax over ``n_samples`` weight
    draws, or apply an analytic predictive to the Gaussian fitted to their
    logits (``moment_match=True``).

    Parameters
    ----------
    hidden_layer_sizes, activation, linear_skip, module, prior_std, prior_std_scale, n_estimators, cov_type, max_rank, \
swag_epochs, collect_every, cov_scale, lr_swag, batch_size_swag, n_samples, lr, lr_schedule, max_epochs, batch_size, \
optimizer, callbacks, normalize_X, dtype, device, random_state, verbose
        As for :class:`SWAGRegressor`.
    predictive : {None, 'mc_bridge', 'laplace_bridge', 'mean_field_0', 'mean_field_1', \
'mean_field_2'}, default=None
        None averages the softmax over the draws; the others need ``moment_match=True``.
    moment_match : bool, default=False
        Fit a Gaussian to the draws' logits at each point, for ``predictive`` to apply
        to; needs a ``predictive`` other than None.

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
        precision of each group); empty when nothing is learned.
    classes_ : ndarray of shape (n_classes,)
    posterior_ : GaussianMixturePosterior
    n_snapshots_ : int
    n_estimators_ : int
    cov_scale_ : ndarray, one entry per member
    lr_swag_ : float
    net_ : skorch.NeuralNet
        The MAP net.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string column names.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn_quinn import SWAGClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = SWAGClassifier(hidden_layer_sizes=(16,), max_epochs=100, swag_epochs=10,
    ...                      random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 3)
    """

    _parameter_constraints: dict = {
        **BaseBayesianClassifier._parameter_constraints,
        **SWAGMixin._swag_constraints,
        "predictive": SAMPLE_PREDICTIVES,
        "moment_match": ["boolean"],
    }

    def __init__(
        self,
        hidden_layer_sizes=(50,),
        activation="relu",
        *,
        linear_skip=True,
        module=None,
        prior_std=None,
        prior_std_scale=1.0,
        n_estimators="auto",
        cov_type="lowrank",
        max_rank=20,
        swag_epochs=100,
        collect_every=1,
        cov_scale="auto",
        lr_swag="auto",
        batch_size_swag=32,
        n_samples=100,
        predictive=None,
        moment_match=False,
        lr=0.01,
        lr_schedule="cosine",
        max_epochs="auto",
        batch_size="auto",
        optimizer=torch.optim.Adam,
        callbacks=None,
        normalize_X=True,
        dtype="float64",
        device="cpu",
        random_state=None,
        verbose=0,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.linear_skip = linear_skip
        self.module = module
        self.prior_std = prior_std
        self.prior_std_scale = prior_std_scale
        self.n_estimators = n_estimators
        self.cov_type = cov_type
        self.max_rank = max_rank
        self.swag_epochs = swag_epochs
        self.collect_every = collect_every
        self.cov_scale = cov_scale
        self.lr_swag = lr_swag
        self.batch_size_swag = batch_size_swag
        self.n_samples = n_samples
        self.predictive = predictive
        self.moment_match = moment_match
        self.lr = lr
        self.lr_schedule = lr_schedule
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.optimizer = optimizer
        self.callbacks = callbacks
        self.normalize_X = normalize_X
        self.dtype = dtype
        self.device = device
        self.random_state = random_state
        self.verbose = verbose


def _warn_of_wide_guesses(factors):
    """One warning for the members whose snapshots' covariance ``cov_scale='auto'`` widens by more
    than ``_MAX_QUIET_WIDENING``-fold, ``factors`` one per member: at a user's ``lr_swag``, a
    trajectory that barely moved says little about the posterior's shape, and a larger rate would
    say more. At ``lr_swag='auto'`` the rate is already the largest the stability cap allows, and
    the widening measures that cap, not a fault: on small tables it exceeds 100-fold while the fit
    scores as Laplace does (docs/swag.rst), so no warning is given there."""
    wide = factors[factors > _MAX_QUIET_WIDENING]
    if len(wide):
        spread = f"{wide.min():.3g}" if len(wide) == 1 else f"{wide.min():.3g} to {wide.max():.3g}"
        warn(f"the SGD phase's snapshots spread {spread} times too little for the data misfit the posterior "
             f"should have ({len(wide)} of {len(factors)} members); their covariance is scaled up by that factor, "
             "but its shape is a guess: raise lr_swag or swag_epochs, or choose another family")
