"""Scorers ``(estimator, X, y) -> float`` for ``GridSearchCV(scoring=...)``, greater is better.

Each reads the predictive through ``predict(X, return_std=True)`` or
``predict_proba``, never ``score``, and applies one of the metrics. Like
scikit-learn's scorers they take ``sample_weight``, and ask for it through
metadata routing once ``set_score_request(sample_weight=True)`` says so.
"""

import copy

from sklearn import get_config
from sklearn.base import is_classifier
from sklearn.utils.metadata_routing import MetadataRequest

from ._classification import brier_score, categorical_nll, expected_calibration_error
from ._regression import (
    _check_level,
    chi_squared_error,
    crps_gaussian,
    gaussian_nll,
    interval_coverage_error,
    interval_width,
    quantile_calibration_error,
)


class _PredictiveScorer:
    """A scorer ``(estimator, X, y, sample_weight=None) -> float``, greater is better.

    ``metric`` is called on what ``needs`` asks of the estimator: ``'std'``
    (``predict(X, return_std=True)``) or ``'proba'`` (``predict_proba``, with
    ``labels=estimator.classes_``).
    """

    def __init__(self, metric, needs, sign, name, **kwargs):
        self.metric, self.needs, self.sign, self.name, self.kwargs = metric, needs, sign, name, kwargs
        self._metadata_request = _score_request(None, name)

    def __call__(self, estimator, X, y, sample_weight=None):
        if self.needs == "proba":
            value = self.metric(
                y, estimator.predict_proba(X), labels=estimator.classes_, sample_weight=sample_weight, **self.kwargs
            )
        else:
            y_pred, y_std = estimator.predict(X, return_std=True)
            value = self.metric(y, y_pred, y_std, sample_weight=sample_weight, **self.kwargs)
        return self.sign * value

    def set_score_request(self, *, sample_weight=None):
        """A copy of this scorer that asks metadata routing for ``sample_weight``.

        As scikit-learn's scorers' method, with metadata routing enabled
        (``sklearn.set_config(enable_metadata_routing=True)``); it returns a
        copy, where theirs changes the scorer, because this package's scorers
        are shared module-level objects.

        Parameters
        ----------
        sample_weight : bool, str or None, default=None
            True to ask for it, False not to, a string to ask for it under that name.

        Returns
        -------
        scorer : a copy of this scorer
        """
        if not get_config()["enable_metadata_routing"]:
            raise RuntimeError(
                "set_score_request is only available when metadata routing is enabled: "
                "sklearn.set_config(enable_metadata_routing=True)."
            )
        scorer = copy.copy(self)
        scorer._metadata_request = _score_request(sample_weight, self.name)
        return scorer

    def get_metadata_routing(self):
        """What this scorer asks metadata routing for: ``sample_weight``, once requested."""
        return copy.deepcopy(self._metadata_request)

    def __repr__(self):
        return self.name


def _score_request(sample_weight, name):
    """Scorer ``name``'s metadata request: ``sample_weight`` at ``score``, as ``sample_weight`` says."""
    request = MetadataRequest(owner=name)
    request.score.add_request(param="sample_weight", alias=sample_weight)
    return request


class _NegNLLScorer(_PredictiveScorer):
    """Minus the NLL: Gaussian for a regressor, categorical for a classifier."""

    def __init__(self):
        super().__init__(gaussian_nll, "std", -1, "neg_nll_scorer")

    def __call__(self, estimator, X, y, sample_weight=None):
        if is_classifier(estimator):
            proba = estimator.predict_proba(X)
            return -categorical_nll(y, proba, labels=estimator.classes_, sample_weight=sample_weight)
        return super().__call__(estimator, X, y, sample_weight)


neg_nll_scorer = _NegNLLScorer()
neg_crps_scorer = _PredictiveScorer(crps_gaussian, "std", -1, "neg_crps_scorer")
neg_chi_squared_error_scorer = _PredictiveScorer(
    chi_squared_error, "std", -1, "neg_chi_squared_error_scorer"
)
neg_quantile_calibration_error_scorer = _PredictiveScorer(
    quantile_calibration_error, "std", -1, "neg_quantile_calibration_error_scorer"
)
neg_brier_scorer = _PredictiveScorer(brier_score, "proba", -1, "neg_brier_scorer")
neg_ece_scorer = _PredictiveScorer(expected_calibration_error, "proba", -1, "neg_ece_scorer")


def coverage_scorer(level=0.95):
    """A scorer of minus the gap ``|coverage - level|`` of the central ``level`` intervals (a factory:
    ``coverage_scorer(0.9)`` is the scorer).

    Greater is better, 0 at best; a plain coverage is not a score (wider is
    not better), its distance to the level is.
    """
    _check_level(level)
    return _PredictiveScorer(interval_coverage_error, "std", -1, f"coverage_scorer(level={level})", level=level)


def neg_interval_width_scorer(level=0.95):
    """A scorer of minus the mean width of the central ``level`` intervals (a factory, as
    :func:`coverage_scorer`: ``neg_interval_width_scorer(0.9)`` is the scorer).

    Parameters
    ----------
    level : float in (0, 1), default=0.95
    """
    _check_level(level)
    return _PredictiveScorer(interval_width, "std", -1, f"neg_interval_width_scorer({level})", level=level)
