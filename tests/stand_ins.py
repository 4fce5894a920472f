"""Fitted estimators whose predictive a test reads from its inputs: the displays and scorers that
call ``predict`` or ``predict_proba`` can then be checked against values worked out by hand."""

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils import ClassifierTags, Tags, TargetTags


class GaussianFromColumns(RegressorMixin, BaseEstimator):
    """Predicts ``N(X[:, 0], X[:, 1]**2)`` at each row."""

    def predict(self, X, return_std=False):
        X = np.asarray(X, dtype=float)
        return (X[:, 0], X[:, 1]) if return_std else X[:, 0]


class ProbabilitiesAsInputs(BaseEstimator):
    """A classifier over ``classes`` whose probabilities are its inputs, one row per point."""

    def __init__(self, classes=(0, 1, 2)):
        self.classes = classes

    @property
    def classes_(self):
        return np.asarray(self.classes)

    def __sklearn_tags__(self):
        return Tags(estimator_type="classifier", target_tags=TargetTags(required=True),
                    classifier_tags=ClassifierTags())

    def predict_proba(self, X):
        return np.asarray(X, dtype=float)
