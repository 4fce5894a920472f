"""MCDropoutRegressor and MCDropoutClassifier: dropout masks on the weights as an approximate posterior."""

from numbers import Integral, Real

import numpy as np
import torch
from sklearn.utils._param_validation import Interval, StrOptions

from .. import base
from .._classifier_base import SAMPLE_PREDICTIVES, BaseBayesianClassifier
from .._local_posterior import LocalPosteriorMixin
from .._regressor_base import BaseBayesianRegressor
from ..base import MAP_TRAINING_CONSTRAINTS, PRIOR_SCALE_CONSTRAINTS
from ._engine import DropoutPosterior, InputDropout, linear_input_blocks


class MCDropoutMixin:
    """Training with dropout on the input of every linear layer of the MLP (not the linear skip
    path's), and the
    posterior of its masks (Gal and Ghahramani, 2016).

    Its ``_fit`` serves :class:`MCDropoutRegressor` and :class:`MCDropoutClassifier`.
    """

    _dropout_constraints: dict = {
        **MAP_TRAINING_CONSTRAINTS,
        **PRIOR_SCALE_CONSTRAINTS,
        "dropout_rate": [Interval(Real, 0, 1, closed="left"), StrOptions({"auto"})],
        "prior_learning": [StrOptions({"joint", "evidence"})],
        "n_samples": [Interval(Integral, 1, None, closed="left")],
    }

    #: Whether the masks' spread of the outputs is topped up to the Laplace posterior's where
    #: the learned rates leave it short (:meth:`_local_variance`): the regressor's.
    _carries_mean_local_variance = False

    def _fit(self, X, Y):
        """Train the network (and the rates) with dropout: the family's part of ``fit``.

        A learned prior is the Laplace evidence's: updated during the dropout training, at
        its weights without the masks (``prior_learning='joint'``), or that of the MAP
        network, trained first without dropout, and then held fixed while the network
        trains behind dropout from the same initial weights (``'evidence'``). An
        estimated noise is learned during the dropout training either way, at the
        weights that predict: the MAP's noise, on tables where the dropout training fits
        less closely than the MAP (UCI yacht), was too small for them."""
        with self._seeded(self._map_seed):
            self._refuse_undroppable(self._build_module(X.shape[1], self._n_outputs(Y)))
        prior_precision, map_history = None, []
        if self.dropout_rate != 0 and self.prior_std is None and self.prior_learning == "evidence":
            self._fit_map(X, Y, self.prior_std_scale)
            prior_precision, map_history = self.net_.criterion_.prior_precision, self.evidence_history_
        wrap = None if self.dropout_rate == 0 else self._behind_dropout
        theta, likelihood, _, _ = self._fit_map(X, Y, self.prior_std_scale, wrap=wrap, prior_precision=prior_precision)
        self.evidence_history_ = map_history + self.evidence_history_
        blocks = linear_input_blocks(self._model.module)
        self.dropout_rates_ = (self.net_.module_.rates.detach().cpu().numpy().astype(np.float64)
                               if self.dropout_rate == "auto" else np.full(len(blocks), float(self.dropout_rate)))
        self.posterior_ = DropoutPosterior(theta, blocks, self.dropout_rates_)
        noise_std = likelihood.output_noise_std(Y.shape[1])
        self._keep_noise(noise_std)
        self._draw_local_variance = self._local_variance(X, Y, noise_std)

    def _local_variance(self, X, Y, noise_std):
        """The variance ``(O,)`` (network units) by which each mask's outputs spread where the
        Laplace posterior at each row is out of reach
        (:class:`~sklearn_quinn._local_posterior.LocalPosteriorMixin`), or None: for the regressor
        at learned rates under a Gaussian likelihood, what the masks' spread (its mean over the
        training rows) falls short of the Laplace posterior's mean output variance there
        (:meth:`~sklearn_quinn._regressor_base.BaseBayesianRegressor._mean_local_variance`).

        The learned rates fall to 1e-4-1e-2 on tables of a few hundred rows and more, as
        mode-seeking variational fits do, and the predictive becomes the network with the
        evidence's noise, which leaves out the weights' spread that the evidence set the noise
        beside: the intervals fell short (UCI concrete 0.915). A fixed rate is the posterior
        the user chose, kept as it is."""
        # The training rows' mean is MacKay's noise_std**2 gamma / N, which a noise head (noise_std
        # None) does not have: its draws carry the posterior at the row or nothing.
        if not self._carries_mean_local_variance or not self._carries_local_posterior() or noise_std is None:
            return None
        # The masks' draws over the training rows a block at a time, as predictions go: all the
        # rows of a big table at once would hold draws x rows x units in memory.
        blocks = torch.split(self._tensor(X), base.PREDICT_BLOCK_ROWS)
        masks = torch.cat([self._draws_variance(rows) for rows in blocks]).mean(0)
        return (self._mean_local_variance(X, Y, noise_std) - masks).clamp(min=0)

    @staticmethod
    def _refuse_undroppable(module):
        """Refuse a backbone with no ``nn.Linear`` layer whose inputs dropout could drop."""
        if not linear_input_blocks(module):
            raise ValueError(
                "MC dropout drops the inputs of the module's nn.Linear layers, and module "
                f"{type(module).__name__} has none."
            )

    def _behind_dropout(self, module):
        """The backbone behind dropout on the input of each of its linear layers."""
        return InputDropout(module, None if self.dropout_rate == "auto" else float(self.dropout_rate))


class MCDropoutRegressor(LocalPosteriorMixin, MCDropoutMixin, BaseBayesianRegressor):
    """Neural-network regressor with an MC-dropout posterior.

    The network is trained (through skorch) with dropout on the input of
    every linear layer of the MLP, on the expected negative log likelihood plus the KL
    divergence from the Gaussian prior: weight decay, ``1 / (1 - p)`` times
    stronger on the dropped matrices, less the masks' entropy. Gal and
    Ghahramani (2016) show this minimises a KL divergence to the posterior
    over the weights from the variational family whose draws are the trained
    weight matrices with their input columns kept with probability ``1 - p``
    (and scaled by ``1 / (1 - p)``).
    At ``dropout_rate='auto'`` the rate ``p`` of each layer is a variational
    parameter too, trained with the weights through relaxed (Concrete) masks
    (Gal, Hron and Kendall 2017): it falls as the data leave less room for
    doubt, where a fixed rate keeps the spread it was given.
    A learned prior and noise are the Laplace evidence's, updated during the
    training as the other families' are (``prior_learning``).
    Predictions average the network over ``n_samples`` such draws, the same at
    every call; the std adds the observation noise. At learned rates, where
    the masks' spread at a row falls short of the Laplace posterior's output
    variance there (the rates fall to 1e-4-1e-2 on tables of a few hundred
    rows and more), each draw's outputs are spread by the shortfall, as the
    deep ensemble's members are: the evidence's noise was set beside that
    variance. Each draw masks the weights
    once for every point, so ``return_cov`` and ``sample_y`` are those of
    whole functions. The linear skip path (``linear_skip=True``) is not
    dropped: dropout's spread of a linear map is set by its weights and does
    not shrink with more data, so that path keeps its trained weights. Cost:
    one training (two with ``prior_learning='evidence'``); prediction runs
    ``n_samples`` networks.

    At ``dropout_rate=0`` this is the MAP network with its noise.

    Parameters
    ----------
    hidden_layer_sizes, activation, linear_skip, module, prior_std, prior_std_scale, noise_std, likelihood, lr, \
lr_schedule, max_epochs, batch_size, optimizer, callbacks, normalize_X, normalize_y, dtype, device, random_state, \
verbose
        As for :class:`~sklearn_quinn.LaplaceRegressor` (they set the training).
        A custom ``module`` has the inputs of each of its ``nn.Linear``
        layers dropped (the columns of their weights masked); its other
        parameters are left as trained, and a module without ``nn.Linear``
        is refused.
    prior_learning : {'joint', 'evidence'}, default='joint'
        How ``prior_std=None`` learns the prior. 'joint': by the Laplace
        evidence's updates during the dropout training, at its weights
        without the masks. 'evidence': by the Laplace evidence of the MAP
        network, trained first without dropout (the cost of one more
        training), then held fixed while the network trains behind dropout
        from the same initial weights. The evidence is that of a mode of the
        loss it was trained on, and the dropout training's weights minimise
        another loss, the masks' average; where the rates stay high, its
        updates there can tighten the prior, and the tighter prior raise the
        rates, until the training prunes a path (the classifier's default is
        'evidence' for that reason). An estimated noise is learned during the
        dropout training either way, at the weights that predict. Ignored
        with a float ``prior_std``.
    dropout_rate : float in [0, 1) or 'auto', default='auto'
        Probability ``p`` of dropping each input of each linear layer, in
        training and in the posterior's draws; 'auto' learns one per layer
        by the variational objective, starting from 0.1.
    n_samples : int, default=100
        Weight draws (dropout masks) averaged by ``predict``.

    Attributes
    ----------
    prior_precisions_ : dict
        The prior precision of each group of weights, by name (a parameter
        tensor, or an input column of a layer that reads the inputs, as
        ``'mlp.0.weight[:, 2]'``): learned by the evidence (``prior_std=None``)
        or ``1 / prior_std**2``.
    evidence_history_ : list of dict
        One entry per evidence update (``epoch``, ``stage``, ``log_evidence``,
        ``noise_std`` in network units, the precision of each group): those
        of the training with dropout, after (``prior_learning='evidence'``)
        those of the MAP network's; empty when nothing is learned.
    dropout_rates_ : ndarray of shape (n_dropped_matrices,)
        The rate of each dropped weight matrix (one per ``nn.Linear`` whose
        inputs are dropped, a shared weight counted once), learned or
        ``dropout_rate``.
    mask_std_ : float, ndarray of shape (n_targets,) or None
        The std (units of y) by which the learned rates' spread of the
        outputs falls short of the Laplace posterior's, on average over the
        training rows (0 where it does not); None at a fixed rate or under
        the heteroscedastic likelihood. At a prediction row each draw's
        Gaussian about its outputs carries the shortfall there (under either
        likelihood); where the network is past the full and the
        Kronecker-factored curvature, this mean at every row (none under the
        heteroscedastic likelihood).
    posterior_ : DropoutPosterior
        The trained weights ``theta``, the weight matrices it masks and their rates.
    noise_std_ : float, ndarray of shape (n_targets,) or None
        Observation noise std (learned by the Laplace evidence during the
        dropout training, or the fixed value), units of y.
        None under ``likelihood='heteroscedastic'``, whose noise is per input (``predict_uncertainty``).
    net_ : skorch.NeuralNet
        The skorch net trained with dropout (its module applies dropout only
        in training mode); at ``dropout_rate=0``, the MAP network's.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string column names.

    See Also
    --------
    BBBRegressor : a factored Gaussian variational posterior.
    DeepEnsembleRegressor : independently trained networks.

    References
    ----------
    Y. Gal and Z. Ghahramani, "Dropout as a Bayesian approximation: representing
    model uncertainty in deep learning", ICML 2016.

    Y. Gal, J. Hron and A. Kendall, "Concrete dropout", NeurIPS 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_quinn import MCDropoutRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-2, 2, size=(60, 1))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.randn(60)
    >>> reg = MCDropoutRegressor(hidden_layer_sizes=(16,), max_epochs=50, random_state=0).fit(X, y)
    >>> mean, std = reg.predict(X[:3], return_std=True)
    >>> mean.shape, bool((std > reg.noise_std_).all())
    ((3,), True)
    """

    _parameter_constraints: dict = {
        **BaseBayesianRegressor._parameter_constraints,
        **MCDropoutMixin._dropout_constraints,
    }

    _carries_mean_local_variance = True

    def __init__(
        self,
        hidden_layer_sizes=(50,),
        activation="relu",
        *,
        linear_skip=True,
        module=None,
        prior_std=None,
        prior_std_scale=1.0,
        prior_learning="joint",
        noise_std=None,
        likelihood="gaussian",
        dropout_rate="auto",
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
        self.prior_learning = prior_learning
        self.noise_std = noise_std
        self.likelihood = likelihood
        self.dropout_rate = dropout_rate
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

    def _fit(self, X, Y):
        super()._fit(X, Y)
        self.mask_std_ = self._local_std_in_y_units()

    def _carries_local_posterior(self):
        """At learned rates (a fixed rate is the posterior the user chose, kept as it is)."""
        return self.dropout_rate == "auto"


class MCDropoutClassifier(MCDropoutMixin, BaseBayesianClassifier):
    """Neural-network classifier with an MC-dropout posterior.

    :class:`MCDropoutRegressor`'s training and weight draws with a categorical
    (softmax) likelihood. Predictions average the softmax over ``n_samples``
    draws, or apply an analytic predictive to the Gaussian fitted to their
    logits (``moment_match=True``). At ``dropout_rate=0`` this is the MAP
    network's softmax.

    Parameters
    ----------
    hidden_layer_sizes, activation, linear_skip, module, prior_std, prior_std_scale, dropout_rate, n_samples, lr, \
lr_schedule, max_epochs, batch_size, optimizer, callbacks, normalize_X, dtype, device, random_state, verbose
        As for :class:`MCDropoutRegressor`.
    prior_learning : {'joint', 'evidence'}, default='evidence'
        As for :class:`MCDropoutRegressor`, but the MAP network's evidence by
        default: updated during the dropout training, the classifier's prior
        and rates can feed on each other until the training prunes the hidden
        path (on the digits it does; see the dropout page of the
        documentation).
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
        One entry per evidence update (``epoch``, ``stage``, ``log_evidence``,
        ``noise_std`` in network units, the precision of each group): those
        of the training with dropout, after (``prior_learning='evidence'``)
        those of the MAP network's; empty when nothing is learned.
    classes_ : ndarray of shape (n_classes,)
    dropout_rates_ : ndarray of shape (n_dropped_matrices,)
        The rate of each dropped weight matrix (one per ``nn.Linear`` whose
        inputs are dropped, a shared weight counted once), learned or
        ``dropout_rate``.
    posterior_ : DropoutPosterior
    net_ : skorch.NeuralNet
        The skorch net trained with dropout; at ``dropout_rate=0``, the MAP
        network's.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string column names.

    References
    ----------
    Y. Gal and Z. Ghahramani, "Dropout as a Bayesian approximation: representing
    model uncertainty in deep learning", ICML 2016.

    Y. Gal, J. Hron and A. Kendall, "Concrete dropout", NeurIPS 2017.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn_quinn import MCDropoutClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = MCDropoutClassifier(hidden_layer_sizes=(16,), max_epochs=50, random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 3)
    """

    _parameter_constraints: dict = {
        **BaseBayesianClassifier._parameter_constraints,
        **MCDropoutMixin._dropout_constraints,
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
        prior_learning="evidence",
        dropout_rate="auto",
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
        self.prior_learning = prior_learning
        self.dropout_rate = dropout_rate
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
