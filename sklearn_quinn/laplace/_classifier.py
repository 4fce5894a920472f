"""LaplaceClassifier: a Gaussian at the MAP of a softmax network, pushed to class probabilities."""

from numbers import Real

import numpy as np
import torch
from sklearn.utils._param_validation import Interval, StrOptions

from .._classifier_base import GAUSSIAN_PREDICTIVES, BaseBayesianClassifier
from .._scale_search import CLASSIFICATION_OBJECTIVES
from ._base import LaplaceClassificationMixin, LaplaceMixin


class LaplaceClassifier(LaplaceClassificationMixin, LaplaceMixin, BaseBayesianClassifier):
    """Neural-network classifier with a Laplace approximation of the weight posterior.

    The network is trained to the MAP weights ``theta*`` of a categorical
    (softmax) likelihood under a Gaussian prior; the posterior is then
    ``N(theta*, (cov_scale * H)^-1)`` with ``H`` the curvature at ``theta*``
    (the generalised Gauss-Newton ``sum_i J_i^T (diag(p_i) - p_i p_i^T) J_i``,
    the exact Hessian or the empirical Fisher) plus the prior precision. With
    ``pushforward='linear'`` the logits are Gaussian, ``N(f(x; theta*), J Sigma
    J^T)``, and ``predictive`` turns that Gaussian into class probabilities;
    with 'nonlinear' the softmax is averaged over weight draws.

    Parameters
    ----------
    hidden_layer_sizes, activation, linear_skip, module, prior_std, prior_std_scale, lr, lr_schedule, max_epochs, \
batch_size, optimizer, callbacks, normalize_X, dtype, device, random_state, verbose
        As for :class:`~sklearn_quinn.LaplaceRegressor`.
    hessian_structure : {'auto', 'full', 'kron', 'lowrank', 'diag'}, default='auto'
    memory_budget : int or 'auto', default='auto'
    max_rank : int, default=100
    subset_of_weights : {'all', 'last_layer'}, default='all'
        As for :class:`~sklearn_quinn.LaplaceRegressor`.
    curvature : {'ggn', 'hessian', 'ef'}, default='ggn'
    cov_scale : float or 'loo', default='loo'
        The ``s`` of ``Sigma = (s H)^-1``. 'loo' picks it on a grid from 1
        to 1000 by the closed-form approximate leave-one-out NLL of the
        training rows (the Laplace cavity of each row, no refit, no held-out
        rows): at a confidently classified row the softmax curvature vanishes,
        so the Gaussian spreads the logits symmetrically where the likelihood
        is one-sided, and the evidence's posterior (``s = 1``) is too wide.
        The cavity needs each row's term of the curvature in the posterior: with
        a ``hessian_structure_`` other than 'full', or ``curvature='hessian'``,
        'loo' keeps ``s = 1``, with a warning (or, where 'auto' chose the
        structure, a word in ``hessian_structure_reason_``).
    pushforward : {'linear', 'nonlinear'}, default='linear'
    predictive : {'mc_bridge', 'laplace_bridge', 'mean_field_0', 'mean_field_1', \
'mean_field_2'}, default='mc_bridge'
        How the Gaussian over the logits becomes probabilities (see
        :mod:`sklearn_quinn.predictives`); 'mc_bridge' averages the softmax
        over 1000 logit draws. With ``pushforward='nonlinear'`` only
        'mc_bridge' applies (the draws are of the weights).
    prior_precision : float, 'marglik', 'gridsearch' or None, default=None
        None for the prior of the MAP (learned, or ``1 / prior_std**2``), a
        float, 'marglik' to maximise the
        Laplace evidence (one eigen decomposition, no new curvature), or
        'gridsearch' to choose it on a grid by ``calibration_objective`` (see
        :func:`sklearn_quinn.calibration.calibrate`).
    calibration_objective : {'nll', 'ece', 'brier', 'marginal_log_likelihood'} or callable, default='nll'
        Objective of ``prior_precision='gridsearch'``. The held-out objectives
        are scored on ``validation_fraction`` of the training rows (stratified
        by class when every class has two rows), which the network is then not
        trained on; 'marginal_log_likelihood' uses all rows and the evidence.
    validation_fraction : float in (0, 1), default=0.1
        Held-out fraction for ``prior_precision='gridsearch'``.
    n_samples : int, default=100
        Weight draws for ``pushforward='nonlinear'``.

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
    posterior_ : GaussianPosterior
    hessian_structure_, hessian_structure_reason_ : str
        As for :class:`~sklearn_quinn.LaplaceRegressor`.
    net_ : skorch.NeuralNet
        The skorch net of MAP training.
    prior_precision_ : float
        The prior precision in the posterior when it is one for every weight
        (a float ``prior_std`` or ``prior_precision``); with a learned prior,
        the factor on the learned precisions (1 unless ``'marglik'``,
        ``'gridsearch'`` or :func:`~sklearn_quinn.calibration.calibrate` scaled
        them). ``prior_precisions_`` holds the precisions in use either way.
    cov_scale_ : float
    loo_scores_ : ndarray of shape (13,)
        With ``cov_scale='loo'``, a full posterior and a curvature other than
        'hessian': the leave-one-out NLL at each grid value.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only for pandas input with string column names.

    References
    ----------
    D. J. C. MacKay, "The evidence framework applied to classification
    networks", Neural Computation 4(5), 1992.
    E. Daxberger et al., "Laplace Redux - Effortless Bayesian Deep Learning",
    NeurIPS 2021.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn_quinn import LaplaceClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = LaplaceClassifier(hidden_layer_sizes=(16,), max_epochs=100, predictive="mean_field_2",
    ...                         prior_precision="marglik", random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 3)
    >>> float(clf.score(X, y)) > 0.9
    True
    """

    _parameter_constraints: dict = {
        **BaseBayesianClassifier._parameter_constraints,
        **LaplaceMixin._laplace_constraints,
        "predictive": GAUSSIAN_PREDICTIVES,
        "cov_scale": [Interval(Real, 0, None, closed="neither"), StrOptions({"loo"})],
        "calibration_objective": [StrOptions(set(CLASSIFICATION_OBJECTIVES)), callable],
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
        hessian_structure="auto",
        memory_budget="auto",
        max_rank=100,
        subset_of_weights="all",
        curvature="ggn",
        cov_scale="loo",
        pushforward="linear",
        predictive="mc_bridge",
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
        self.hessian_structure = hessian_structure
        self.memory_budget = memory_budget
        self.max_rank = max_rank
        self.subset_of_weights = subset_of_weights
        self.curvature = curvature
        self.cov_scale = cov_scale
        self.pushforward = pushforward
        self.predictive = predictive
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
        self.dtype = dtype
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _user_targets(self, Y):
        return self.classes_[Y.ravel().astype(np.intp)]
