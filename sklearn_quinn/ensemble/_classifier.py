"""DeepEnsembleClassifier and RMSClassifier: softmax members trained together as rows of one weight matrix."""

import torch

from .._classifier_base import SAMPLE_PREDICTIVES, BaseBayesianClassifier
from ._ensemble import RMS_AUTO_MEMBERS, EnsembleMixin

_PARAMETERS_DOC = """
    Parameters
    ----------
    hidden_layer_sizes, activation, linear_skip, module, n_estimators, data_fraction, prior_std, prior_std_scale, \
lr, lr_schedule, max_epochs, batch_size, optimizer, callbacks, normalize_X, dtype, device, n_jobs, random_state, verbose
        As for :class:`~sklearn_quinn.DeepEnsembleRegressor`.
    predictive : {None, 'mc_bridge', 'laplace_bridge', 'mean_field_0', 'mean_field_1', \
'mean_field_2'}, default=None
        None averages the softmax over the members. The others need
        ``moment_match=True``: they apply to the Gaussian fitted to the
        members' logits at each point.
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
    n_estimators_ : int
        The members (``n_estimators``, or the number ``'auto'`` chose).
    posterior_ : SamplePosterior
        The members' weights, ``(n_estimators_, K)``.
    net_ : list of skorch.NeuralNet
        The skorch net of each group of members trained together.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only for pandas input with string column names.
"""


class BaseEnsembleClassifier(EnsembleMixin, BaseBayesianClassifier):
    """Shared fit of the ensemble classifiers."""

    _parameter_constraints: dict = {
        **BaseBayesianClassifier._parameter_constraints,
        **EnsembleMixin._ensemble_constraints,
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
        n_estimators="auto",
        data_fraction=1.0,
        prior_std=None,
        prior_std_scale=1.0,
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
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose


class DeepEnsembleClassifier(BaseEnsembleClassifier):
    __doc__ = (
        """Deep ensemble classifier: ``n_estimators`` softmax networks from independent initialisations.

    Each member minimises the cross-entropy of its own rows plus the weight
    decay of the Gaussian prior; all train together as rows of one batched
    weight matrix. Predictions average the members' softmax.
"""
        + _PARAMETERS_DOC
        + """
    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn_quinn import DeepEnsembleClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = DeepEnsembleClassifier(hidden_layer_sizes=(16,), max_epochs=100, random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 3)
    """
    )


class RMSClassifier(BaseEnsembleClassifier):
    __doc__ = (
        """Randomized MAP sampling classifier: members anchored to their own prior draws.

    Member ``j`` minimises its rows' cross-entropy plus
    ``|D_j| / N * ||w_j - w0_j||^2 / (2 prior_std^2)`` with its own anchor
    ``w0_j ~ N(0, prior_std^2 I)`` (Pearce et al.'s anchored ensemble; a
    categorical likelihood has no target noise to perturb).
"""
        + _PARAMETERS_DOC
        + """
    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn_quinn import RMSClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = RMSClassifier(hidden_layer_sizes=(16,), max_epochs=100, random_state=0).fit(X, y)
    >>> clf.predict(X[:2]).shape
    (2,)
    """
    )

    _auto_members = RMS_AUTO_MEMBERS

    def _randomization(self, n_params, target_shape, generator):
        return self._anchor(n_params, generator), None
