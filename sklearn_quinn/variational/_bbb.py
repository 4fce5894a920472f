"""BBBRegressor and BBBClassifier: mean-field Gaussian variational inference by Bayes by backprop."""

from numbers import Integral, Real

import torch
from sklearn.utils._param_validation import Interval, StrOptions

from .._classifier_base import SAMPLE_PREDICTIVES, BaseBayesianClassifier
from .._core.evidence import ColumnHyperprior, ParameterGroups
from .._core.network import FunctionalModel, LinearSkipMLP
from .._core.posterior import GaussianPosterior
from .._core.priors import GaussianPrior, ScaleMixturePrior
from .._map import TensorBatches, batch_slices, train_net
from .._regressor_base import BaseBayesianRegressor
from .._warnings import warn
from ..base import MAP_TRAINING_CONSTRAINTS
from ._engine import EmpiricalBayesPrior, MeanFieldNetwork
from ._skorch import KLWeighting, NegativeELBO, PriorWarmup

#: Std of every weight under q at the start of training (the means start at
#: the backbone's initial weights).
INITIAL_STD = 1e-3

#: With ``prior_std=None``, the fraction of ``max_epochs`` trained under the
#: fixed prior ``N(0, WARMUP_PRIOR_STD**2)`` before the prior is learned
#: (:class:`~sklearn_quinn.variational._skorch.PriorWarmup` says why).
PRIOR_WARMUP_FRACTION = 0.25
WARMUP_PRIOR_STD = 1.0

#: ``max_epochs='auto'`` trains a regressor's ELBO for at least this many
#: minibatch steps (more epochs than the MAP's on up to 600 rows at the
#: default batch). The ELBO's own prior, switched on after the warm-up (a
#: quarter of the steps), collapses the groups whose means have not yet moved
#: off their initial values (the hidden biases of 300 rows after 500 steps),
#: a local optimum that more steps after it do not leave; the evidence's
#: prior under the heteroscedastic likelihood gains too
#: (benchmarks/bench_bbb_steps.py). The classifiers' 1000 epochs scored as
#: well as these steps (docs/variational.rst).
AUTO_MIN_STEPS = 4000

#: ``KL(q || learned prior)`` of a parameter tensor (nats, summed over its
#: groups) below which ``q`` is its prior there: the data moved none of its
#: weights, and the tensor is pruned
#: (a bias may be; a weight matrix of a multilayer perceptron cuts the outputs
#: off the inputs).
PRUNED_KL = 1.0


class VariationalMixin:
    """Training of the factored Gaussian ``q`` on the ELBO of the estimator's likelihood."""

    _variational_constraints: dict = {
        **MAP_TRAINING_CONSTRAINTS,
        "prior_pi": [None, Interval(Real, 0, 1, closed="both")],
        "prior_sigma1": [Interval(Real, 0, None, closed="neither")],
        "prior_sigma2": [Interval(Real, 0, None, closed="neither")],
        "n_mc_samples": [Interval(Integral, 1, None, closed="left")],
        "prior_learning": [StrOptions({"auto", "elbo", "evidence", "evidence_then_elbo"})],
        "kl_weighting": [StrOptions({"uniform", "blundell"})],
        "n_samples": [Interval(Integral, 1, None, closed="left")],
    }

    def _fit(self, X, Y):
        """Maximise the ELBO: the family's part of ``fit``."""
        likelihood = self._fit_variational(X, Y, self._likelihood(Y))
        self._keep_noise(likelihood.output_noise_std(Y.shape[1]))

    def _prior_plan(self, groups, X, Y):
        """The prior ``q`` trains under, the prior of its warm-up (None: none), and the weights
        ``q``'s means start at (None: the backbone's initial ones).

        The prior is the scale mixture of ``prior_pi``, else ``N(0, prior_std**2)`` (a mixture of
        one component), else (``prior_std=None``) a Gaussian per group of ``groups``, the
        evidence's (a parameter tensor, or an input column), as ``prior_learning`` says:
        'elbo' learns it with ``q`` (the input columns under the evidence's hyperprior) after a
        warm-up under ``N(0, WARMUP_PRIOR_STD**2)``; 'evidence' learns it by the Laplace evidence of
        a MAP network trained on ``X, Y`` and holds it fixed; 'evidence_then_elbo' starts ``q``'s
        means at that MAP, warms up under its evidence's prior, then learns the prior with ``q``."""
        if self.prior_pi is not None:
            return ScaleMixturePrior(self.prior_pi, self.prior_sigma1, self.prior_sigma2), None, None
        if self.prior_std is not None:
            return ScaleMixturePrior(1.0, self.prior_std, self.prior_std), None, None
        learning = self._prior_learning()
        if learning == "elbo":
            warmup_prior, start = ScaleMixturePrior(1.0, WARMUP_PRIOR_STD, WARMUP_PRIOR_STD), None
        else:
            # The MAP's own seeded RNG is forked from, and given back to, the caller's: under
            # 'evidence' q's means start at the initial weights the MAP started from.
            start, _, warmup_prior, _ = self._fit_map(X, Y)
            if learning == "evidence":
                return warmup_prior, None, None
        learned = EmpiricalBayesPrior(groups.index, hyperprior=ColumnHyperprior(groups, device=self._device))
        return learned, warmup_prior, start

    def _prior_learning(self):
        """``prior_learning`` with 'auto' resolved: 'elbo' under a Gaussian likelihood,
        'evidence_then_elbo' under the heteroscedastic one, 'evidence' for a classifier."""
        if self.prior_learning != "auto":
            return self.prior_learning
        likelihood = getattr(self, "likelihood", None)
        if likelihood is None:
            return "evidence"
        return "elbo" if likelihood == "gaussian" else "evidence_then_elbo"

    def _prior_schedule(self, prior, warmup_prior, n_epochs):
        """The prior that training starts with, and the callbacks that change it."""
        if warmup_prior is None:
            return prior, []
        n_warmup = int(PRIOR_WARMUP_FRACTION * n_epochs)
        return warmup_prior, [("prior_warmup", PriorWarmup(prior, warmup_prior, n_warmup))]

    def _keep_prior_precisions(self, prior, mean, std, groups):
        """``prior_precisions_``: one over the prior variance of a weight, for each of ``groups``
        (the evidence's prior: kept by the MAP's fit)."""
        if isinstance(prior, GaussianPrior):
            return
        if isinstance(prior, EmpiricalBayesPrior):
            precisions = (1 / prior.variances(mean, std)).tolist()
        elif prior.gaussian_std is not None:
            precisions = [prior.gaussian_std**-2] * len(groups)
        else:
            precisions = [1 / (prior.pi * prior.sigma1**2 + (1 - prior.pi) * prior.sigma2**2)] * len(groups)
        self.prior_precisions_ = dict(zip(groups.names, precisions))

    def _warn_if_pruned(self, prior, mean, std, groups):
        """Warn when the learned prior pruned a weight matrix (``q`` is its prior there) on every path
        from the inputs to the outputs: one of the layers', and the linear skip's where there is one.
        A pruned skip beside a hidden path that carries the data is the prior choosing the network, and
        a pruned hidden path beside the skip its choosing the linear model (``groups``: the prior's)."""
        kl = prior.group_kl_divergences(mean, std)
        tensor_kl = kl.new_zeros(len(groups.tensor_names)).index_add_(0, groups.tensors.to(kl.device), kl)
        pruned = [
            name
            for name, shape, kl in zip(groups.tensor_names, groups.shapes, tensor_kl)
            if len(shape) > 1 and kl < PRUNED_KL
        ]
        skip = isinstance(self._model.module, LinearSkipMLP)
        hidden_path_cut = any(name != "linear.weight" for name in pruned) if skip else bool(pruned)
        if hidden_path_cut and (not skip or "linear.weight" in pruned):
            warn(
                f"the learned prior pruned every weight of {', '.join(pruned)} (q is its prior there, to within "
                f"{PRUNED_KL:g} nat), so the network's outputs hardly depend on its inputs. On few rows the ELBO "
                "of a mean-field network can prefer this to fitting the data; set prior_std to a float (e.g. "
                "1.0), train longer, or use a smaller network")

    def _fit_variational(self, X, Y, likelihood):
        """Train ``q`` on the ELBO of ``likelihood``; sets ``posterior_``,
        ``prior_precisions_``, ``evidence_history_``, ``net_`` and ``_model``, and returns
        the trained likelihood."""
        batch_size = self._batch_size(len(X))
        with self._seeded(self._map_seed):
            model = FunctionalModel(self._build_module(X.shape[1], self._n_outputs(Y)))
            groups = ParameterGroups.of(model)
            self.evidence_history_ = []
            # The evidence's MAP sets its _model and history.
            prior, warmup_prior, start = self._prior_plan(groups, X, Y)
            self._model = model
            n_epochs = self._n_epochs(len(X), min_steps=self._auto_min_steps)
            initial_prior, prior_callbacks = self._prior_schedule(prior, warmup_prior, n_epochs)
            mean = self._model.flatten() if start is None else start  # flatten's: a detached copy
            variational = MeanFieldNetwork(self._model, mean, torch.full_like(mean, INITIAL_STD), self.n_mc_samples)
            weighting = []
            if self.kl_weighting != "uniform":  # uniform: the criterion's own weight 1 on every batch
                n_batches = len(batch_slices(len(X), batch_size))
                weighting.append(("kl_weighting", KLWeighting(self.kl_weighting, n_batches)))
            self.net_ = train_net(
                variational,
                NegativeELBO(len(X), initial_prior, likelihood),
                X.astype(self.dtype),
                Y.astype(self.dtype),
                lr=self.lr,
                lr_schedule=self.lr_schedule,
                max_epochs=n_epochs,
                optimizer=self.optimizer,
                callbacks=self._callbacks() + weighting + prior_callbacks,
                device=self._device,
                verbose=self.verbose,
                iterator=TensorBatches,
                desc="ELBO",
                batch_size=batch_size,
                shuffle=True,
                generator=torch.Generator().manual_seed(self._split_seed),
            )
        module = self.net_.module_
        mean, std = module.mean.detach(), module.std.detach()
        self.posterior_ = GaussianPosterior.from_std(mean, std)
        self._keep_prior_precisions(prior, mean, std, groups)
        if isinstance(prior, EmpiricalBayesPrior):
            self._warn_if_pruned(prior, mean, std, groups)
        return self.net_.criterion_.likelihood


class BBBRegressor(VariationalMixin, BaseBayesianRegressor):
    """Neural-network regressor with a factored Gaussian posterior by Bayes by backprop.

    The posterior over the weights is approximated by
    ``q(w) = N(mu, diag(softplus(rho)**2))``, trained through skorch on the
    minibatch evidence lower bound (ELBO). By default the prior is learned
    from the data (empirical Bayes; under the heteroscedastic likelihood
    starting from the MAP network of the Laplace evidence and its prior,
    ``prior_learning``): ``N(0, s_g**2)`` on the weights of each
    group ``g`` of the Laplace evidence (each layer's weight matrix and bias
    apart, and each input column of the matrices that read the inputs apart:
    automatic relevance determination), with ``s_g**2`` at its
    ELBO-maximising value for the current ``q``,
    ``mean over g of (mu**2 + sigma**2)``. Each step evaluates
    ``n_mc_samples`` reparameterised weight draws as one batch. The
    observation noise is fixed (``noise_std``) or a point estimate trained
    with the ELBO. Predictions average the network over ``n_samples`` draws
    from ``q``. Cost: about ``n_mc_samples`` times one MAP training per epoch
    while compute-bound, less for small data.

    The loss of batch ``i`` of ``M`` is ``pi_i KL(q || p) - E_q[log p(D_i | w)]``
    (Blundell et al., eq. 8), whose sum over an epoch is the negative ELBO;
    dividing the KL by ``M`` while scaling the minibatch likelihood to the
    whole data would over-weight the data ``M``-fold. The KL is in closed form
    when the prior is Gaussian (learned, ``prior_std``, or a scale mixture
    with ``prior_pi`` in {0, 1} or ``prior_sigma1 == prior_sigma2``), else
    estimated from the same draws as the likelihood. The learned prior's
    optimum is substituted into the KL, as by Wu et al.; it is held at
    ``N(0, 1)`` for the first quarter of the epochs, since a prior fitted to
    the initial weights pulls every weight to zero (at the evidence's prior,
    ``q`` starting at its MAP, with ``prior_learning='evidence_then_elbo'``). A group of weights that
    the data do not need collapses onto its prior (its learned precision
    grows large: automatic relevance determination). On small data sets,
    most of all for classifiers, the ELBO may prefer that for a whole weight
    matrix, which cuts the outputs off the inputs; ``fit`` then warns, and a
    fixed ``prior_std`` fits better.

    Parameters
    ----------
    hidden_layer_sizes, activation, linear_skip, module, likelihood, lr, lr_schedule, max_epochs, \
batch_size, optimizer, callbacks, normalize_X, normalize_y, dtype, device, random_state, verbose
        As for :class:`~sklearn_quinn.LaplaceRegressor`; here they set the
        ELBO's optimisation, and ``max_epochs='auto'`` trains it for at
        least 4000 minibatch steps (more than 1000 epochs on up to 600 rows
        at the default batch size): the ELBO's learned prior needs the means
        fitted to the data before it starts, and ``q`` has no full-batch
        polish to end on.
    noise_std : float or None, default=None
        The observation noise std in the units of y, fixed; None trains a
        point estimate of it with the ELBO, beside ``q``.
    prior_std : float > 0 or None, default=None
        None learns one prior variance per group (a parameter tensor, or an
        input column; ``prior_precisions_``) as ``prior_learning`` says. A
        float is the standard deviation of a fixed Gaussian prior
        ``N(0, prior_std**2)`` on every weight, as in every family (in the
        network's units, where the standardised target has std 1). Ignored
        when ``prior_pi`` is a float.
    prior_learning : {'auto', 'elbo', 'evidence', 'evidence_then_elbo'}, default='auto'
        How ``prior_std=None`` learns the prior. 'auto': 'elbo' under the
        Gaussian likelihood, 'evidence_then_elbo' under the heteroscedastic
        one (see the variational page of the documentation). 'elbo': with
        ``q``, at the variances that maximise the ELBO (above), ``q`` starting
        at the backbone's initial weights. 'evidence': as every other
        optimisation family learns it, by the Laplace evidence of a MAP
        network trained first (the cost of one more MAP fit), then held fixed
        while ``q`` trains from the same initial weights. 'evidence_then_elbo':
        ``q``'s means start at that MAP network, the warm-up trains under its
        evidence's prior, and the ELBO learns the prior after it, as 'elbo'
        does. The ELBO's optimum over the prior favours priors under which the
        factored ``q`` is a tight bound, and prunes (Turner and Sahani 2011,
        "Two problems with variational expectation maximisation for
        time-series models"); the Laplace evidence, of a Gaussian with the
        curvature's correlations, is not tied to ``q``'s factorisation, but
        a factored ``q`` held under it on a few rows stays near that prior,
        whose spread of the outputs, the noise head's most of all, is wide.
        Ignored with a float ``prior_std`` or ``prior_pi``.
    prior_pi : float in [0, 1] or None, default=None
        None uses the Gaussian prior of ``prior_std``. A float selects
        Blundell et al.'s fixed scale mixture ``prior_pi N(0, prior_sigma1**2)
        + (1 - prior_pi) N(0, prior_sigma2**2)`` instead, whatever
        ``prior_std``, whose KL prunes weights toward the narrow component and
        under-fits small data sets (see the variational page of the
        documentation).
    prior_sigma1, prior_sigma2 : float > 0, default=1.0 and 0.1
        Stds of the two mixture components, used when ``prior_pi`` is a float.
    n_mc_samples : int, default=4
        Weight draws per training step, evaluated as one batch.
    kl_weighting : {'uniform', 'blundell'}, default='uniform'
        KL weight of the minibatches of an epoch: ``1/M`` each, or Blundell et
        al.'s ``2^(M-i) / (2^M - 1)`` (the prior dominates the first batches).
    n_samples : int, default=100
        Weight draws averaged by ``predict`` (the same draws at every call).

    Attributes
    ----------
    posterior_ : GaussianPosterior
        ``q``: its mean and diagonal std.
    prior_precisions_ : dict of str to float
        For each group of the backbone's weights (a parameter tensor by its
        name in ``module.named_parameters()``, or an input column as
        ``'mlp.0.weight[:, 2]'``), one over the prior variance of its
        weights: learned (``prior_std=None``), ``prior_std**-2``, or one over
        the variance of the scale mixture
        ``prior_pi * prior_sigma1**2 + (1 - prior_pi) * prior_sigma2**2``.
    evidence_history_ : list of dict
        With ``prior_learning`` 'evidence' or 'evidence_then_elbo': the MAP's
        evidence updates, as for :class:`~sklearn_quinn.LaplaceRegressor`;
        else empty.
    noise_std_ : float, ndarray of shape (n_targets,) or None
        Observation noise std in the units of y.
        None under ``likelihood='heteroscedastic'``, whose noise is per input (``predict_uncertainty``).
    net_ : skorch.NeuralNet
        The skorch net that trained ``q`` (its history holds the loss).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string column names.

    References
    ----------
    C. Blundell, J. Cornebise, K. Kavukcuoglu and D. Wierstra, "Weight
    uncertainty in neural networks", ICML 2015.
    A. Graves, "Practical variational inference for neural networks", NeurIPS 2011.
    A. Wu, S. Nowozin, E. Meeds, R. E. Turner, J. M. Hernandez-Lobato and
    A. L. Gaunt, "Deterministic variational inference for robust Bayesian
    neural networks", ICLR 2019 (the learned prior variances).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_quinn import BBBRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-2, 2, size=(60, 1))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.randn(60)
    >>> reg = BBBRegressor(hidden_layer_sizes=(16,), max_epochs=300, random_state=0).fit(X, y)
    >>> reg.posterior_.std.shape
    torch.Size([50])
    >>> list(reg.prior_precisions_)
    ['mlp.0.weight[:, 0]', 'mlp.0.bias', 'mlp.2.weight', 'mlp.2.bias', 'linear.weight[:, 0]']
    >>> reg.sample_y(X[:2], n_samples=3).shape
    (2, 3)
    """

    _parameter_constraints: dict = {
        **BaseBayesianRegressor._parameter_constraints,
        **VariationalMixin._variational_constraints,
    }
    _auto_min_steps = AUTO_MIN_STEPS

    def __init__(
        self,
        hidden_layer_sizes=(50,),
        activation="relu",
        *,
        linear_skip=True,
        module=None,
        noise_std=None,
        likelihood="gaussian",
        prior_std=None,
        prior_learning="auto",
        prior_pi=None,
        prior_sigma1=1.0,
        prior_sigma2=0.1,
        n_mc_samples=4,
        kl_weighting="uniform",
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
        self.noise_std = noise_std
        self.likelihood = likelihood
        self.prior_std = prior_std
        self.prior_learning = prior_learning
        self.prior_pi = prior_pi
        self.prior_sigma1 = prior_sigma1
        self.prior_sigma2 = prior_sigma2
        self.n_mc_samples = n_mc_samples
        self.kl_weighting = kl_weighting
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



class BBBClassifier(VariationalMixin, BaseBayesianClassifier):
    """Neural-network classifier with a factored Gaussian posterior by Bayes by backprop.

    :class:`BBBRegressor`'s variational family, prior and minibatch ELBO, with
    a categorical (softmax) likelihood. Predictions average the softmax over
    ``n_samples`` weight draws from ``q``, or apply an analytic predictive to
    the Gaussian fitted to their logits (``moment_match=True``).

    Parameters
    ----------
    hidden_layer_sizes, activation, linear_skip, module, prior_pi, prior_sigma1, prior_sigma2, n_mc_samples, \
kl_weighting, n_samples, lr, lr_schedule, batch_size, optimizer, callbacks, normalize_X, dtype, device, \
random_state, verbose
        As for :class:`BBBRegressor`.
    max_epochs : int or 'auto', default='auto'
        As for :class:`~sklearn_quinn.LaplaceRegressor` ('auto': 1000 epochs,
        at most 200,000 minibatch steps), without the regressor's floor of
        4000 steps: the classifier's 1000 epochs scored as well.
    prior_std : float > 0 or None, default=None
        As for :class:`BBBRegressor`.
    prior_learning : {'auto', 'elbo', 'evidence', 'evidence_then_elbo'}, default='evidence'
        As for :class:`BBBRegressor` ('auto' is 'evidence'), the Laplace evidence by default: on
        a hundred or a few hundred rows the ELBO's own learned prior (``'elbo'``, and
        ``'evidence_then_elbo'`` after the MAP) can prune the hidden layer and under-fit (it
        does on iris and wine; see the variational page of the documentation).
    predictive : {None, 'mc_bridge', 'laplace_bridge', 'mean_field_0', 'mean_field_1', \
'mean_field_2'}, default=None
        None averages the softmax over the draws; the others need ``moment_match=True``.
    moment_match : bool, default=False
        Fit a Gaussian to the draws' logits at each point, for ``predictive`` to apply
        to; needs a ``predictive`` other than None.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    posterior_ : GaussianPosterior
        ``q``: its mean and diagonal std.
    prior_precisions_ : dict of str to float
        As for :class:`BBBRegressor`.
    evidence_history_ : list of dict
        With ``prior_learning`` 'evidence' or 'evidence_then_elbo': the MAP's
        evidence updates, as for :class:`~sklearn_quinn.LaplaceClassifier`;
        else empty.
    net_ : skorch.NeuralNet
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string column names.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn_quinn import BBBClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = BBBClassifier(hidden_layer_sizes=(16,), max_epochs=100, random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 3)
    """

    _parameter_constraints: dict = {
        **BaseBayesianClassifier._parameter_constraints,
        **VariationalMixin._variational_constraints,
        "predictive": SAMPLE_PREDICTIVES,
        "moment_match": ["boolean"],
    }
    _auto_min_steps = 0  # its 1000 epochs scored as well as AUTO_MIN_STEPS steps

    def __init__(
        self,
        hidden_layer_sizes=(50,),
        activation="relu",
        *,
        linear_skip=True,
        module=None,
        prior_std=None,
        prior_learning="evidence",
        prior_pi=None,
        prior_sigma1=1.0,
        prior_sigma2=0.1,
        n_mc_samples=4,
        kl_weighting="uniform",
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
        self.prior_learning = prior_learning
        self.prior_pi = prior_pi
        self.prior_sigma1 = prior_sigma1
        self.prior_sigma2 = prior_sigma2
        self.n_mc_samples = n_mc_samples
        self.kl_weighting = kl_weighting
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
