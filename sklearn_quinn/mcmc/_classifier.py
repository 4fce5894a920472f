"""MCMCClassifier: posterior draws of a softmax network's weights from batched chains."""

import torch

from .._classifier_base import SAMPLE_PREDICTIVES, BaseBayesianClassifier
from ._hierarchical import DEFAULT_HYPERPRIOR_RATE, DEFAULT_HYPERPRIOR_SHAPE
from ._mcmc import MCMCMixin


class MCMCClassifier(MCMCMixin, BaseBayesianClassifier):
    """Neural-network classifier with weight-posterior draws from Markov chains.

    :class:`MCMCRegressor`'s samplers, adaptation and diagnostics with a
    categorical (softmax) likelihood. Predictions average the softmax over
    every kept draw, or apply an analytic predictive to the Gaussian fitted to
    the draws' logits (``moment_match=True``).

    Parameters
    ----------
    hidden_layer_sizes, activation, linear_skip, module, prior_std, hyperprior, hyperprior_shape, hyperprior_rate, \
sampler, n_samples, n_burnin, thin, n_chains, step_size, n_leapfrog, max_tree_depth, n_cycles, \
target_acceptance, adapt_step_size, gamma, adapt_start, adapt_every, init, lr, lr_schedule, max_epochs, batch_size, \
optimizer, callbacks, normalize_X, dtype, device, compile, leapfrog_dtype, n_jobs, random_state, verbose
        As for :class:`MCMCRegressor` (a classifier has no noise: with
        ``prior_std=None`` only the prior precisions are sampled or learned).
    predictive : {None, 'mc_bridge', 'laplace_bridge', 'mean_field_0', 'mean_field_1', \
'mean_field_2'}, default=None
        None averages the softmax over the draws; the others need ``moment_match=True``.
    moment_match : bool, default=False
        Fit a Gaussian to the draws' logits at each point, for ``predictive`` to apply
        to; needs a ``predictive`` other than None.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    posterior_ : SamplePosterior
        The kept draws, ``(n_chains * n_samples, K)``.
    chains_ : ndarray of shape (n_chains, n_samples, n_columns)
        The kept draws per chain: the weights, then the log prior precisions and the log means
        of the layers that read the inputs when sampled.
    acceptance_rate_, rhat_, ess_, n_divergent_, step_size_, trajectory_length_, prior_precisions_, \
prior_precision_samples_, evidence_history_, compiled_
        As for :class:`MCMCRegressor`.
    net_ : skorch.NeuralNet or None
        The MAP net, when a MAP is trained.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string column names.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn_quinn import MCMCClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = MCMCClassifier(hidden_layer_sizes=(8,), n_samples=50, n_burnin=50, n_leapfrog=5,
    ...                      max_epochs=100, random_state=0).fit(X, y)
    >>> clf.chains_.shape  # 67 MLP and 12 linear-skip weights, 11 log prior precisions, 2 log layer means
    (4, 50, 92)
    >>> clf.predict_proba(X[:2]).shape
    (2, 3)
    """

    _parameter_constraints: dict = {
        **BaseBayesianClassifier._parameter_constraints,
        **MCMCMixin._mcmc_constraints,
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
        hyperprior="gamma",
        hyperprior_shape=DEFAULT_HYPERPRIOR_SHAPE,
        hyperprior_rate=DEFAULT_HYPERPRIOR_RATE,
        sampler="hmc",
        n_samples=500,
        n_burnin=500,
        thin=1,
        n_chains=4,
        step_size="auto",
        n_leapfrog=40,
        max_tree_depth=10,
        n_cycles=4,
        target_acceptance=None,
        adapt_step_size=True,
        gamma=1.0,
        adapt_start=100,
        adapt_every=10,
        init="map",
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
        compile="auto",
        leapfrog_dtype="float32",
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.linear_skip = linear_skip
        self.module = module
        self.prior_std = prior_std
        self.hyperprior = hyperprior
        self.hyperprior_shape = hyperprior_shape
        self.hyperprior_rate = hyperprior_rate
        self.sampler = sampler
        self.n_samples = n_samples
        self.n_burnin = n_burnin
        self.thin = thin
        self.n_chains = n_chains
        self.step_size = step_size
        self.n_leapfrog = n_leapfrog
        self.max_tree_depth = max_tree_depth
        self.n_cycles = n_cycles
        self.target_acceptance = target_acceptance
        self.adapt_step_size = adapt_step_size
        self.gamma = gamma
        self.adapt_start = adapt_start
        self.adapt_every = adapt_every
        self.init = init
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
        self.compile = compile
        self.leapfrog_dtype = leapfrog_dtype
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose
