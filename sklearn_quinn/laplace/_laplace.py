"""LaplaceRegressor: a Gaussian at the MAP with the curvature as precision."""

import torch
from sklearn.utils._param_validation import StrOptions

from .._regressor_base import BaseBayesianRegressor
from .._scale_search import OBJECTIVES
from ._base import LaplaceMixin


class LaplaceRegressor(LaplaceMixin, BaseBayesianRegressor):
    """Neural-network regressor with a Laplace approximation of the weight posterior.

    The network is trained to the maximum a posteriori (MAP) weights
    ``theta*`` under a Gaussian prior and a Gaussian likelihood; the posterior
    is then approximated by ``N(theta*, (cov_scale * H)^-1)`` with ``H`` the
    curvature of the negative log posterior at ``theta*``: the generalised
    Gauss-Newton matrix, the exact Hessian or the empirical Fisher of the
    likelihood, plus the prior precision. Predictions push this Gaussian
    through the linearised network (closed form) or through the network itself
    (sampling). For a network without hidden layers the result is exactly the
    Bayesian linear-regression posterior.

    Cost: one MAP training, then one curvature. 'full' holds ``K x K``
    matrices (``K`` weights) and one eigen decomposition, ``O(N K^2 + K^3)``;
    'diag' is ``O(N K)`` for the GGN and the empirical Fisher. Tuning the prior
    precision by the evidence reuses the decomposition and costs no new
    curvature.

    Parameters
    ----------
    hidden_layer_sizes : array-like of int, default=(50,)
        Hidden layer widths of the default MLP backbone; ``()`` gives a linear model.
    activation : {'identity', 'logistic', 'tanh', 'relu'}, default='relu'
        Activation of the default MLP.
    linear_skip : bool, default=True
        Add a linear map of the inputs to the MLP's outputs, a weight tensor
        with its own prior. The network then contains the linear model, and
        on data that are nearly linear the learned prior shrinks the hidden
        layers instead of bending hinges into a line. Ignored with
        ``hidden_layer_sizes=()`` or a ``module``.
    module : torch.nn.Module or callable, default=None
        A backbone to use instead of the MLP: an instance (deep-copied at
        fit; an ensemble's members redraw its layers' weights) or a callable
        ``(n_features, n_outputs) -> nn.Module``. It maps ``(n_samples,
        n_features)`` to a tensor ``(n_samples, n_outputs)``: one mean per
        target, or under ``likelihood='heteroscedastic'`` a mean and a log
        noise std per target, the means first; a classifier's, one logit per
        class (two for a binary problem). Other outputs are refused at fit.
        Every parameter is inferred: a frozen one (``requires_grad=False``)
        is refused; hold a fixed tensor as a buffer.
    prior_std : float or None, default=None
        None learns the prior: one Gaussian precision per parameter tensor
        (each layer's weights and biases apart) and per input column of the
        layers that read the inputs (automatic relevance determination, the
        columns apart at the last four updates), set every twentieth of the
        training to the maximiser of the Laplace evidence at the current
        weights (empirical Bayes, ``prior_precisions_``). A float fixes the
        standard deviation of the Gaussian prior on every weight (of the
        network that fits the standardised target when ``normalize_y``).
    prior_std_scale : float > 0, default=1.0
        With a learned prior, the stds of the prior the training goes on under
        are the evidence's times this: each update sets the precisions to the
        evidence's maximisers over ``prior_std_scale**2``, so that the weights
        and the noise learned with them settle under a wider (> 1) or narrower
        (< 1) prior of the evidence's shape. 1 is empirical Bayes; other values
        are for cross-validation (``GridSearchCV`` over, e.g., ``[1, 2, 4]``
        with :func:`~sklearn_quinn.metrics.neg_nll_scorer`), for data where a
        single network under the evidence's prior predicts worse than under a
        weaker one (docs/evidence.rst). A value other than 1 with a float
        ``prior_std`` raises a ValueError.
    noise_std : float, default=None
        Observation noise std in the units of y. None learns it with the
        prior, by the evidence (``SSE / (N - gamma)``, not the training
        residual, which shrinks as the network over-fits), and again when
        ``prior_precision='marglik'``.
    likelihood : {'gaussian', 'heteroscedastic'}, default='gaussian'
        'gaussian': one noise std per target, the same at every input.
        'heteroscedastic': the network has a second head, the log noise std of
        each target at each input, whose weights share the posterior of the
        mean's (``noise_std`` must then be None); :meth:`predict_uncertainty`
        splits the predictive std into the weights' part and the noise's.
    hessian_structure : {'auto', 'full', 'kron', 'lowrank', 'diag'}, default='auto'
        The curvature's structure: the full ``K x K`` matrix; 'kron', a
        Kronecker product of two small factors per ``nn.Linear`` (KFAC,
        Ritter et al. 2018), the diagonal for any other weight; 'lowrank',
        its ``max_rank`` largest eigenpairs, found from a few products with
        it (randomized Nystrom, no ``K x K`` matrix), the prior alone across
        the other directions (Daxberger et al. 2021, "Laplace redux"); or the
        diagonal. 'auto' takes the full one when its matrices fit
        ``memory_budget`` and its eigen decomposition takes seconds (at most
        5000 weights), else 'kron' when its factors fit (each at most 5000
        wide), else the diagonal; the choice and its reason are in
        ``hessian_structure_`` and ``hessian_structure_reason_``. A structure
        named explicitly is taken as asked, whatever ``memory_budget``, except
        a full one whose matrix passes 2 GiB, which is refused. 'kron' and
        'lowrank' need ``curvature`` 'ggn' or 'ef'.
    memory_budget : int or 'auto', default='auto'
        Bytes the curvature may hold, for ``hessian_structure='auto'`` (the
        diagonal, its last resort, is taken whatever the budget);
        'auto' is a quarter of this machine's physical memory.
    max_rank : int, default=100
        The eigenpairs ``hessian_structure='lowrank'`` keeps (found by a
        random sketch that ``random_state`` seeds); the others ignore it.
    subset_of_weights : {'all', 'last_layer'}, default='all'
        The weights the posterior covers. 'last_layer' puts it on the final
        ``nn.Linear`` only, the rest fixed at the MAP (Kristiadi et al. 2020,
        "Being Bayesian, even just a bit, fixes overconfidence in ReLU
        networks"): the network is linear in those weights, so the Laplace
        posterior, its evidence and the linearised predictive are exact for
        them, at the cost of a linear model of the last hidden layer,
        whatever the size of the body. The MAP's learned prior precisions of
        that layer are kept; ``prior_precisions_`` lists its groups only.
    curvature : {'ggn', 'hessian', 'ef'}, default='ggn'
        Generalised Gauss-Newton, exact Hessian, or empirical Fisher (summed over
        the training points) of the negative log-likelihood.
    cov_scale : float, default=1.0
        The ``s`` of ``Sigma = (s H)^-1``: values above 1 shrink the posterior.
    pushforward : {'linear', 'nonlinear'}, default='linear'
        Linearised network (closed-form Gaussian predictive) or weight samples
        through the network. The Gauss-Newton posterior is that of the
        linearised network, and the evidence's prior is learned for it: run
        through the network itself, its draws can be far wider than the
        data allow (Immer, Korzepa and Bauer 2021, "Improving predictions of
        Bayesian neural nets via local linearization"; :doc:`/laplace`).
    prior_precision : float, 'marglik', 'gridsearch' or None, default=None
        Prior precision used in ``H``: None for the prior of the MAP (learned,
        or ``1 / prior_std**2``), a float, 'marglik' to maximise the Laplace evidence, or
        'gridsearch' to choose it on a grid by ``calibration_objective`` (see
        :func:`sklearn_quinn.calibration.calibrate`).
    calibration_objective : {'nll', 'chi_squared', 'crps', 'ece', 'coverage', \
            'marginal_log_likelihood'} or callable, default='nll'
        Objective of ``prior_precision='gridsearch'`` (see
        :func:`~sklearn_quinn.calibration.calibrate`). The held-out objectives
        are scored on ``validation_fraction`` of the training rows, which the
        MAP and the curvature then do not see.
    validation_fraction : float in (0, 1), default=0.1
        Held-out fraction for ``prior_precision='gridsearch'``.
    n_samples : int, default=100
        Weight samples for ``pushforward='nonlinear'``.
    lr : float, default=0.01
        (Initial) learning rate of the MAP optimizer.
    lr_schedule : {'cosine', 'constant'}, default='cosine'
        'cosine' anneals the learning rate to 0 over ``max_epochs``, so the
        MAP settles into a mode (the Laplace approximation assumes one).
    max_epochs : int or 'auto', default='auto'
        Epochs of MAP training; 'auto' is 1000, or fewer where they would
        take more than 200,000 minibatch steps (above 40,000 rows at the
        default batch size). A learned prior (``prior_std=None``) is read
        from the weights during this training: a training too short for the
        network to fit the data learns too strong a prior, and the fit
        under-fits without a warning (see the user guide's evidence page).
    batch_size : int or 'auto', default='auto'
        Minibatch size of MAP training; 'auto' is ``min(200, n_samples)``.
    optimizer : torch.optim.Optimizer class, default=torch.optim.Adam
        Optimizer of MAP training.
    callbacks : list of skorch callbacks, default=None
        Extra callbacks for the skorch net of MAP training, copied for it (the trained net's
        are in ``net_.callbacks_``). The training holds no rows out: a callback monitors
        ``'train_loss'``, not a validation score; skorch's checkpoints and
        ``LoadInitState``, which read a record of batches the training does
        not keep, are refused (pickle the fitted estimator).
    normalize_X : bool, default=True
        Standardise each input column internally by its training mean and std
        (ddof=0; a constant column is only centred), as ``StandardScaler``
        does; a column already standardised is left as it is. The network,
        its prior (``prior_std``, ``prior_precisions_``), ``posterior_`` and
        ``net_`` then read the standardised inputs, and ``predict`` takes
        them in the units of ``X``. False for a ``module`` that reads raw
        values (category codes, say); a ``module`` holding an ``nn.Embedding``
        or ``nn.EmbeddingBag`` warns under True.
    normalize_y : bool, default=True
        Standardise the target internally; outputs come back in the units of y.
    dtype : {'float64', 'float32'}, default='float64'
        Torch dtype of the weights and the posterior algebra.
    device : str or torch.device, default='cpu'
        Torch device for training, curvature and prediction (every family
        has this parameter); 'auto' is CUDA where there is one, else the CPU.
        A model fitted on a GPU and pickled unpickles, on the CPU, on a
        machine without one.
    random_state : int, RandomState instance or None, default=None
        Seeds the initialisation, the minibatches, the weight samples and
        the low-rank structure's random sketch.
    verbose : int, default=0
        1 shows a progress bar over the MAP epochs.

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
    posterior_ : GaussianPosterior
        The Gaussian over the flat weight vector (the last layer's, with
        ``subset_of_weights='last_layer'``).
    hessian_structure_ : {'full', 'kron', 'lowrank', 'diag'}
        The curvature structure used.
    hessian_structure_reason_ : str
        Why: "as asked", or the memory and size figures 'auto' weighed.
    net_ : skorch.NeuralNet
        The skorch net of MAP training; ``net_.module_`` is the backbone at the MAP
        (of the standardised inputs and target, under ``normalize_X`` and ``normalize_y``).
    noise_std_ : float, ndarray of shape (n_targets,) or None
        Observation noise std in the units of y.
        None under ``likelihood='heteroscedastic'``, whose noise is per input (``predict_uncertainty``).
    prior_precision_ : float
        The prior precision in the posterior when it is one for every weight
        (a float ``prior_std`` or ``prior_precision``); with a learned prior,
        the factor on the learned precisions (1 unless ``'marglik'``,
        ``'gridsearch'`` or :func:`~sklearn_quinn.calibration.calibrate` scaled
        them). ``prior_precisions_`` holds the precisions in use either way.
    cov_scale_ : float
        ``cov_scale`` in the posterior (changed by
        :func:`~sklearn_quinn.calibration.calibrate`).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string column names.

    See Also
    --------
    sklearn.gaussian_process.GaussianProcessRegressor : the same ``predict`` and
        ``sample_y`` interface for a Gaussian process.

    References
    ----------
    D. J. C. MacKay, "A practical Bayesian framework for backpropagation
    networks", Neural Computation 4(3), 1992.

    E. Daxberger, A. Kristiadi, A. Immer, R. Eschenhagen, M. Bauer and
    P. Hennig, "Laplace Redux - Effortless Bayesian Deep Learning", NeurIPS 2021.

    H. Ritter, A. Botev and D. Barber, "A Scalable Laplace Approximation for
    Neural Networks", ICLR 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_quinn import LaplaceRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-2, 2, size=(60, 1))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.randn(60)
    >>> reg = LaplaceRegressor(hidden_layer_sizes=(20,), max_epochs=100,
    ...                        prior_precision="marglik", random_state=0).fit(X, y)
    >>> mean, std = reg.predict(X[:3], return_std=True)
    >>> mean.shape, bool((std > 0).all())
    ((3,), True)
    >>> reg.sample_y(X[:3], n_samples=5).shape
    (3, 5)
    """

    _parameter_constraints: dict = {
        **BaseBayesianRegressor._parameter_constraints,
        **LaplaceMixin._laplace_constraints,
        "calibration_objective": [StrOptions(set(OBJECTIVES)), callable],
    }

    @property
    def _learns_from_the_rows(self):
        """A searched prior precision is learned from the rows too."""
        return super()._learns_from_the_rows or self.prior_precision in ("marglik", "gridsearch")

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
        hessian_structure="auto",
        memory_budget="auto",
        max_rank=100,
        subset_of_weights="all",
        curvature="ggn",
        cov_scale=1.0,
        pushforward="linear",
        prior_precision=None,
        calibration_objective="nll",
        validation_fraction=0.1,
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
        self.hessian_structure = hessian_structure
        self.memory_budget = memory_budget
        self.max_rank = max_rank
        self.subset_of_weights = subset_of_weights
        self.curvature = curvature
        self.cov_scale = cov_scale
        self.pushforward = pushforward
        self.prior_precision = prior_precision
        self.calibration_objective = calibration_objective
        self.validation_fraction = validation_fraction
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

    def _user_targets(self, Y):
        return Y * self._y_scale + self._y_mean
