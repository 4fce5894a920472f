"""Model selection and averaging by the model evidence, and a cautious refit rule for cross-validation."""

import math
from numbers import Integral

import numpy as np
from joblib import Parallel, delayed
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.metrics import accuracy_score, r2_score
from sklearn.model_selection import ParameterGrid
from sklearn.utils import get_tags
from sklearn.utils._available_if import available_if
from sklearn.utils._param_validation import HasMethods
from sklearn.utils.validation import check_is_fitted, validate_data

from ._pipelines import final_step
from .base import BaseBayesianNetwork
from .smc._smc import SMCMixin


def log_evidence(estimator):
    """The log evidence ``log p(y | X)`` of a fitted estimator (or of a
    pipeline's final step): ``log_evidence_`` (SMC) or
    ``log_marginal_likelihood()`` (Laplace)."""
    final = final_step(estimator)
    if hasattr(final, "log_evidence_"):
        return float(final.log_evidence_)
    if hasattr(final, "log_marginal_likelihood"):
        return float(final.log_marginal_likelihood())
    raise _no_evidence_error(final)


def _check_gives_evidence(estimator):
    """Refuse, before any fit, one of this package's estimators that will have no evidence to rank by
    (another estimator's ``log_evidence_`` is looked for once it is fitted)."""
    final = final_step(estimator)
    if isinstance(final, BaseBayesianNetwork) and not (
        isinstance(final, SMCMixin) or hasattr(final, "log_marginal_likelihood")
    ):
        raise _no_evidence_error(final)


def _no_evidence_error(final):
    return ValueError(
        "EvidenceSearch needs an estimator with a model evidence: log_evidence_ (SMCRegressor, "
        "SMCClassifier) or log_marginal_likelihood() (LaplaceRegressor, LaplaceClassifier); "
        f"got {type(final).__name__}."
    )


class EvidenceSearch(MetaEstimatorMixin, BaseEstimator):
    """Rank candidate models by their evidence and average them by it.

    Each candidate of ``param_grid`` is fitted on all the data (no
    cross-validation split: the evidence ``p(y | X, M)`` already penalises
    complexity) and scored by its log evidence. With equal prior
    probabilities the posterior probability of candidate ``m`` is
    ``p(M_m | y) = p(y | M_m) / sum_k p(y | M_k)``. Predictions are the
    Bayesian model average: the mixture of the candidates' predictive
    distributions with those probabilities.

    Parameters
    ----------
    estimator : estimator or Pipeline
        Fits a model evidence: an SMC or Laplace estimator, or a pipeline
        ending in one.
    param_grid : dict or list of dicts
        Candidates, as for :class:`~sklearn.model_selection.GridSearchCV`.
    n_jobs : int, default=None
        Candidates fitted in parallel through joblib.
    verbose : int, default=0
        joblib's verbosity while fitting the candidates.

    Attributes
    ----------
    results_ : dict of ndarrays
        Per candidate: ``'params'``, ``'param_<name>'``, ``'log_evidence'``,
        ``'probability'`` (posterior model probability) and ``'rank'`` (1 =
        highest evidence); ``pandas.DataFrame(results_)`` tabulates it.
    estimators_ : list of estimators
        Every fitted candidate, in the order of ``results_``.
    best_index_ : int
    best_params_ : dict
    best_estimator_ : estimator
        The candidate with the highest evidence.
    classes_ : ndarray of shape (n_classes,)
        Classifiers only.

    See Also
    --------
    sklearn_quinn.SMCClassifier, sklearn_quinn.SMCRegressor, sklearn_quinn.LaplaceRegressor

    Notes
    -----
    A ranking is as reliable as the evidence is exact. SMC's is a Monte
    Carlo estimate whose spread grows with the number of rows: give
    ``random_state`` a few values in ``param_grid`` to see it (each run is
    then a candidate, and the average runs over them too). Laplace's is a
    Gaussian at one mode, which can miss more of the posterior's volume the
    weaker the prior, and then falls further below the exact evidence for
    such candidates; the user guide's evidence page measures both.

    References
    ----------
    D. J. C. MacKay, "Bayesian interpolation", Neural Computation 4(3), 1992.
    J. A. Hoeting, D. Madigan, A. E. Raftery and C. T. Volinsky, "Bayesian
    model averaging: a tutorial", Statistical Science 14(4), 1999.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_quinn import LaplaceRegressor
    >>> from sklearn_quinn.model_selection import EvidenceSearch
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-2, 2, size=(60, 1))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.randn(60)
    >>> search = EvidenceSearch(LaplaceRegressor(max_epochs=200, random_state=0),
    ...                         {"hidden_layer_sizes": [(1,), (20,)]}).fit(X, y)
    >>> search.best_params_
    {'hidden_layer_sizes': (20,)}
    >>> mean, std = search.predict(X[:2], return_std=True)
    >>> mean.shape
    (2,)
    """

    # Requested by default under metadata routing, as the regressors request it (``BaseBayesianRegressor``).
    __metadata_request__predict = {"return_std": True}

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit"])],
        "param_grid": [dict, list],
        "n_jobs": [None, Integral],
        "verbose": ["verbose"],
    }

    def __init__(self, estimator, param_grid, *, n_jobs=None, verbose=0):
        self.estimator = estimator
        self.param_grid = param_grid
        self.n_jobs = n_jobs
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = get_tags(self.estimator)
        tags.estimator_type = inner.estimator_type
        tags.classifier_tags = inner.classifier_tags
        tags.regressor_tags = inner.regressor_tags
        tags.target_tags.multi_output = inner.target_tags.multi_output
        tags.input_tags.pairwise = inner.input_tags.pairwise
        tags.input_tags.sparse = inner.input_tags.sparse
        return tags

    def fit(self, X, y):
        """Fit every candidate on ``(X, y)`` and weigh it by its evidence.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)

        Returns
        -------
        self : EvidenceSearch
        """
        self._validate_params()
        candidates = list(ParameterGrid(self.param_grid))
        if not candidates:
            raise ValueError(f"param_grid={self.param_grid!r} has no candidates to fit.")
        unfitted = [_candidate(self.estimator, params) for params in candidates]
        for candidate in unfitted:  # a grid's estimator too, before any fit
            _check_gives_evidence(candidate)
        fitted = Parallel(n_jobs=self.n_jobs, verbose=self.verbose)(
            delayed(candidate.fit)(X, y) for candidate in unfitted
        )
        evidence = np.array([log_evidence(estimator) for estimator in fitted])
        undefined = np.flatnonzero(np.isnan(evidence) | (evidence == np.inf))
        if len(undefined):  # it would turn every weight, and every prediction, into NaN
            raise ValueError(f"The log evidence of candidate {candidates[undefined[0]]!r} is "
                             f"{evidence[undefined[0]]}: no weights follow from it.")
        if np.all(evidence == -np.inf):
            raise ValueError("Every candidate's log evidence is -inf: no weights follow from them.")
        self.estimators_ = fitted
        probability = np.exp(evidence - logsumexp(evidence))
        order = np.argsort(-evidence, kind="stable")
        rank = np.empty(len(order), dtype=int)
        rank[order] = np.arange(1, len(order) + 1)
        self.results_ = {"params": candidates}
        for name in sorted({name for params in candidates for name in params}):
            column = np.empty(len(candidates), dtype=object)  # 1-D whatever the values: a tuple is one cell
            for index, params in enumerate(candidates):
                column[index] = params.get(name)
            self.results_[f"param_{name}"] = column
        self.results_.update(log_evidence=evidence, probability=probability, rank=rank)
        self.best_index_ = int(order[0])
        self.best_params_ = candidates[self.best_index_]
        self.best_estimator_ = self.estimators_[self.best_index_]
        if is_classifier(self.best_estimator_):
            self.classes_ = self.best_estimator_.classes_
        self.n_features_in_ = self.best_estimator_.n_features_in_
        if hasattr(self.best_estimator_, "feature_names_in_"):
            self.feature_names_in_ = self.best_estimator_.feature_names_in_
        elif hasattr(self, "feature_names_in_"):  # an earlier fit's, on a DataFrame
            del self.feature_names_in_
        return self

    @available_if(lambda self: hasattr(self.estimator, "predict_proba"))
    def predict_proba(self, X):
        """Model-averaged class probabilities, ``sum_m p(M_m | y) p(y | x, M_m)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        X = self._checked_inputs(X)
        return sum(p * estimator.predict_proba(X) for p, estimator in self._weighted())

    @available_if(lambda self: hasattr(self.estimator, "predict_proba"))
    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`, the candidates' log probabilities summed in logs: finite
        where a probability underflows to zero."""
        X = self._checked_inputs(X)
        with np.errstate(divide="ignore"):  # a candidate of probability zero adds nothing
            terms = [np.log(p) + estimator.predict_log_proba(X) for p, estimator in self._weighted()]
        return np.logaddexp.reduce(terms)

    def predict(self, X, return_std=False):
        """Model-averaged prediction.

        Classifiers: the most probable class under :meth:`predict_proba`.
        Regressors: the mean of the mixture of the candidates' predictive
        distributions and, on request, its total standard deviation
        ``sqrt(sum_m p_m (std_m**2 + mean_m**2) - mean**2)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Regressors only.

        Returns
        -------
        y : ndarray of shape (n_samples,) or (n_samples, n_targets)
        y_std : ndarray of the same shape, only when ``return_std``
        """
        X = self._checked_inputs(X)
        if is_classifier(self):
            if return_std:
                raise ValueError("return_std applies to regressors; use predict_proba for a classifier.")
            return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
        if not return_std:
            return sum(p * estimator.predict(X) for p, estimator in self._weighted())
        moments = [(p, *estimator.predict(X, return_std=True)) for p, estimator in self._weighted()]
        mean = sum(p * m for p, m, _ in moments)
        second = sum(p * (s**2 + m**2) for p, m, s in moments)
        return mean, np.sqrt(np.clip(second - mean**2, 0, None))

    def score(self, X, y):
        """Accuracy (classifiers) or R² (regressors) of :meth:`predict`."""
        metric = accuracy_score if is_classifier(self) else r2_score
        return metric(y, self.predict(X))

    def _checked_inputs(self, X):
        """``X`` as given, after checking its width (and feature names) against the fit."""
        check_is_fitted(self)
        validate_data(self, X, reset=False, dtype=None, ensure_all_finite=False, accept_sparse=True)
        return X

    def _weighted(self):
        return zip(self.results_["probability"], self.estimators_)


def _candidate(estimator, params):
    """A clone of ``estimator`` with ``params``, each value cloned as ``GridSearchCV`` does: an
    estimator in the grid is one object, which candidates fitted in turn would share and refit
    (and the user's own would come back fitted)."""
    return clone(estimator).set_params(**{name: clone(value, safe=False) for name, value in params.items()})


def one_standard_error_rule(param, default):
    """A ``refit`` rule for :class:`~sklearn.model_selection.GridSearchCV`: the
    default unless a candidate beats it by more than the noise of the folds.

    Returns a callable ``cv_results -> index`` for ``GridSearchCV(refit=...)``.
    The reference is the best candidate (by mean test score) with ``param``
    equal to ``default``; the best candidate overall replaces it only when its
    mean gain over the reference exceeds the standard error of their paired
    per-fold differences. Cross-validation on a few hundred rows picks among
    close candidates by chance, and a hyperparameter whose default is
    principled (``prior_std_scale=1``, the evidence's prior) should move only
    on evidence of a gain: the one-standard-error rule of Hastie, Tibshirani
    and Friedman (2009, "The Elements of Statistical Learning", section 7.10),
    here with the default as the simpler model and the error of the paired
    differences, as the folds are shared.

    Parameters
    ----------
    param : str
        The searched parameter, as named in ``param_grid`` (a pipeline's
        ``'step__name'``).
    default : object
        Its value to keep unless beaten; some candidate must have it, with a
        fit that did not fail (a mean test score other than NaN).

    Returns
    -------
    refit : callable
        ``refit(cv_results) -> int``, the index of the chosen candidate.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import Ridge
    >>> from sklearn.model_selection import GridSearchCV
    >>> from sklearn_quinn.model_selection import one_standard_error_rule
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(40, 3)
    >>> y = X @ [1.0, 0.5, 0.0] + rng.randn(40)
    >>> grid = {"alpha": [1.0, 3.0]}
    >>> GridSearchCV(Ridge(), grid, cv=5).fit(X, y).best_params_
    {'alpha': 3.0}
    >>> GridSearchCV(Ridge(), grid, cv=5, refit=one_standard_error_rule("alpha", 1.0)).fit(X, y).best_params_
    {'alpha': 1.0}
    """

    return _OneStandardErrorRefit(param, default)


class _OneStandardErrorRefit:
    """The callable :func:`one_standard_error_rule` returns: a class at module level, so that a search
    holding it pickles (a function defined inside another does not)."""

    def __init__(self, param, default):
        self.param, self.default = param, default

    def __repr__(self):
        return f"one_standard_error_rule({self.param!r}, {self.default!r})"

    def __call__(self, cv_results):
        key = f"param_{self.param}"
        if key not in cv_results:
            searched = sorted(name.removeprefix("param_") for name in cv_results if name.startswith("param_"))
            raise ValueError(f"one_standard_error_rule: {self.param!r} is not searched; the grid searches {searched}.")
        if "mean_test_score" not in cv_results:
            raise ValueError("one_standard_error_rule needs a single scoring metric (cv_results_ has no "
                             "'mean_test_score'); with several, refit by a callable that reads one.")
        n_folds = sum(1 for key in cv_results if key.startswith("split") and key.endswith("_test_score"))
        scores = np.column_stack([cv_results[f"split{fold}_test_score"] for fold in range(n_folds)])
        mean = np.asarray(cv_results["mean_test_score"], dtype=float)
        # A candidate of a sub-grid that does not set the parameter is masked: it runs at the estimator's
        # own default, which the rule cannot see, and np.ma.masked compares equal to 0.
        unset = np.ma.getmaskarray(cv_results[key])
        candidates = np.flatnonzero([not masked and _equal(value, self.default)
                                     for value, masked in zip(cv_results[key], unset)])
        if not len(candidates):
            raise ValueError(f"one_standard_error_rule: no candidate has {self.param}={self.default!r} to keep.")
        if np.isnan(mean[candidates]).all():  # error_score=np.nan: every fit at the default failed
            raise ValueError(f"one_standard_error_rule: every candidate with {self.param}={self.default!r} failed "
                             "to fit (a mean test score of NaN), so there is no reference to keep or to beat.")
        reference = int(candidates[np.nanargmax(mean[candidates])])
        best = int(np.nanargmax(mean))
        gain = scores[best] - scores[reference]
        standard_error = gain.std(ddof=1) / math.sqrt(n_folds) if n_folds > 1 else math.inf
        return best if gain.mean() > standard_error else reference


def _equal(value, default):
    """Whether a candidate's value is the default, also for array values (whose ``==`` is an array)."""
    try:
        return bool(np.array_equal(value, default))
    except (TypeError, ValueError):
        return value == default
