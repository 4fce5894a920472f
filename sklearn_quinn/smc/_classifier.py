"""SMCClassifier: weighted particles of a softmax network from adaptive annealed SMC."""

import torch

from .._classifier_base import SAMPLE_PREDICTIVES, BaseBayesianClassifier
from ..mcmc._hierarchical import DEFAULT_HYPERPRIOR_RATE, DEFAULT_HYPERPRIOR_SHAPE
from ._smc import SMCMixin


class SMCClassifier(SMCMixin, BaseBayesianClassifier):
    """Neural-network classifier from adaptive annealed SMC, with the model evidence.

    :class:`SMCRegressor`'s sampler with a categorical (softmax) likelihood.
    Predictions average the softmax over the weighted particles, or apply an
    analytic predictive to the Gaussian fitted to their logits
    (``moment_match=True``). ``log_evidence_`` estimates ``log p(y | X)``.

    Parameters
    ----------
    hidden_layer_sizes, activation, linear_skip, module, prior_std, prior, hyperprior, hyperprior_shape, \
hyperprior_rate, n_particles, target_ess, resample_threshold, n_mcmc_steps, step_size, n_leapfrog, \
waste_free, compile, leapfrog_dtype, lr, lr_schedule, max_epochs, batch_size, optimizer, callbacks, normalize_X, \
dtype, device, random_state, verbose
        As for :class:`SMCRegressor` (a classifier has no noise: with
        ``prior_std=None`` only the prior precisions are sampled or learned).
    predictive : {None, 'mc_bridge', 'laplace_bridge', 'mean_field_0', 'mean_field_1', \
'mean_field_2'}, default=None
        None averages the softmax over the particles; the others need ``moment_match=True``.
    moment_match : bool, default=False
        Fit a Gaussian to the draws' logits at each point, for ``predictive`` to apply
        to; needs a ``predictive`` other than None.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    posterior_ : SamplePosterior
        The weighted particles.
    particles_, weights_, log_evidence_, lambdas_, ess_history_, acceptance_history_, n_stages_, \
step_size_, n_leapfrog_, compiled_, prior_precisions_, prior_precision_samples_, net_, evidence_history_
        As for :class:`SMCRegressor`.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string column names.

    See Also
    --------
    SMCRegressor, sklearn_quinn.model_selection.EvidenceSearch

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn_quinn import SMCClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = SMCClassifier(hidden_layer_sizes=(3,), n_particles=50, n_leapfrog=10,
    ...                     random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 3)
    >>> bool(clf.log_evidence_ < 0)
    True
    """

    _parameter_constraints: dict = {
        **BaseBayesianClassifier._parameter_constraints,
        **SMCMixin._smc_constraints,
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
        prior="gaussian",
        hyperprior="gamma",
        hyperprior_shape=DEFAULT_HYPERPRIOR_SHAPE,
        hyperprior_rate=DEFAULT_HYPERPRIOR_RATE,
        n_particles=200,
        target_ess=0.5,
        resample_threshold=0.5,
        n_mcmc_steps=5,
        step_size=0.5,
        n_leapfrog=50,
        waste_free=False,
        compile="auto",
        leapfrog_dtype="float32",
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
        self.prior = prior
        self.hyperprior = hyperprior
        self.hyperprior_shape = hyperprior_shape
        self.hyperprior_rate = hyperprior_rate
        self.n_particles = n_particles
        self.target_ess = target_ess
        self.resample_threshold = resample_threshold
        self.n_mcmc_steps = n_mcmc_steps
        self.step_size = step_size
        self.n_leapfrog = n_leapfrog
        self.waste_free = waste_free
        self.compile = compile
        self.leapfrog_dtype = leapfrog_dtype
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
