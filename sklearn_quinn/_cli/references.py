"""The scikit-learn references ``compare`` adds beside the networks.

A network's predictive uncertainty is worth its cost only if it beats what a
classical probabilistic model gives for free: for regression Bayesian ridge
regression and a Gaussian process with an ARD RBF kernel plus white noise,
for classification logistic regression. Each is fitted and scored exactly as a
network method is (in ``Pipeline([StandardScaler(), estimator])``, with the same
metrics).

Both regression references fit the standardised target, as the networks do
(``normalize_y=True``): ``BayesianRidge``'s default hyperpriors are not
invariant to the target's units, and on prices of about 1e5 it can stop at a
constant prediction that a linear fit beats several times over
(:class:`StandardisedTarget`; the GPR's own ``normalize_y``).

A Gaussian process costs ``O(n^3)`` in the training rows, so above
``GPR_MAX_ROWS`` rows it is fitted on a random subset of that many rows
(:class:`RowSubsample`) rather than hang; ``compare`` says so in a note.
"""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, RegressorMixin, clone
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
from sklearn.linear_model import BayesianRidge, LogisticRegression
from sklearn.utils import check_random_state

# A GPR fit costs O(n^3) in its rows; 1000 rows keep it to seconds on one core.
GPR_MAX_ROWS = 1000


class Reference(NamedTuple):
    """A scikit-learn model as the command line sees it."""

    label: str
    classification: bool
    make: Callable  # (n_features, random_state) -> estimator
    max_rows: int | None = None  # fitted on a random subset above this many training rows


def _gaussian_process(n_features, random_state):
    # normalize_y makes the target's variance about 1, hence the bounds of the
    # signal and noise variances; a length scale at its upper bound is an
    # irrelevant input (ARD), and inputs are standardised, so 1e5 is ample.
    # One restart from a random start besides the default one (more restarts
    # found the same optimum on diabetes's splits).
    kernel = ConstantKernel(1.0, (1e-2, 1e2)) * RBF(np.ones(n_features), (1e-2, 1e5)) + WhiteKernel(0.1, (1e-6, 1.0))
    return GaussianProcessRegressor(kernel, normalize_y=True, n_restarts_optimizer=1, random_state=random_state)


REFERENCES = {
    "sklearn-bayesian-ridge": Reference("BayesianRidge", False,
                                        lambda n_features, random_state: StandardisedTarget(BayesianRidge())),
    "sklearn-gpr": Reference("GaussianProcessRegressor, ARD RBF + white noise", False, _gaussian_process,
                             max_rows=GPR_MAX_ROWS),
    "sklearn-logistic": Reference("LogisticRegression", True,
                                  lambda n_features, random_state: LogisticRegression(max_iter=1000)),
}


def references_for(classification):
    """Names of the references of a task, in table order."""
    return [name for name, reference in REFERENCES.items() if reference.classification == classification]


def make_reference(name, n_features, *, random_state=0, max_rows=None):
    """A fresh estimator of reference ``name``.

    Parameters
    ----------
    name : str
        Key of ``REFERENCES``.
    n_features : int
        Input columns (the GPR has one length scale per input).
    random_state : int, default=0
        Seeds the GPR's optimiser restarts and its row subset.
    max_rows : int, default=None
        Overrides the row limit of a reference that has one (the GPR); None
        keeps ``GPR_MAX_ROWS``.
    """
    reference = REFERENCES[name]
    estimator = reference.make(n_features, random_state)
    if reference.max_rows is None:
        return estimator
    return RowSubsample(estimator, max_rows=max_rows or reference.max_rows, random_state=random_state)


def subsample_note(name, n_rows, max_rows=None):
    """The line saying that reference ``name`` fits on a subset of ``n_rows``, or None when it fits on all."""
    if REFERENCES[name].max_rows is None:
        return None
    max_rows = max_rows or REFERENCES[name].max_rows
    if n_rows <= max_rows:
        return None
    return (f"{name} is fitted on a random {max_rows} of the {n_rows} training rows "
            f"(its cost grows as the cube of the rows)")


class RowSubsample(MetaEstimatorMixin, RegressorMixin, BaseEstimator):
    """``estimator`` fitted on at most ``max_rows`` training rows drawn at random.

    For models whose fit costs ``O(n^3)`` (a Gaussian process); below
    ``max_rows`` rows it is ``estimator`` itself. ``predict`` passes its
    keyword arguments on (``return_std``).

    Parameters
    ----------
    estimator : estimator
    max_rows : int
    random_state : int, RandomState or None, default=None
        Draws the subset.

    Attributes
    ----------
    estimator_ : estimator
        The fitted clone of ``estimator``.
    n_fit_rows_ : int
        The rows it was fitted on.
    """

    def __init__(self, estimator, *, max_rows, random_state=None):
        self.estimator = estimator
        self.max_rows = max_rows
        self.random_state = random_state

    def fit(self, X, y):
        X, y = np.asarray(X), np.asarray(y)
        if len(X) > self.max_rows:
            rows = check_random_state(self.random_state).choice(len(X), self.max_rows, replace=False)
            X, y = X[rows], y[rows]
        self.estimator_ = clone(self.estimator).fit(X, y)
        self.n_fit_rows_ = len(X)
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X, **params):
        return self.estimator_.predict(X, **params)


class StandardisedTarget(MetaEstimatorMixin, RegressorMixin, BaseEstimator):
    """``estimator`` fitted on the target standardised by its training mean and std, its
    predictions (and ``return_std``'s std) read back in the target's units.

    scikit-learn's ``TransformedTargetRegressor`` does the same for the mean, but not for
    ``predict(X, return_std=True)``'s pair.

    Parameters
    ----------
    estimator : estimator

    Attributes
    ----------
    estimator_ : estimator
        The fitted clone of ``estimator``.
    """

    def __init__(self, estimator):
        self.estimator = estimator

    def fit(self, X, y):
        y = np.asarray(y, dtype=np.float64)
        self.y_mean_, scale = y.mean(), y.std()
        self.y_scale_ = scale if scale > 0 else 1.0
        self.estimator_ = clone(self.estimator).fit(X, (y - self.y_mean_) / self.y_scale_)
        self.n_features_in_ = self.estimator_.n_features_in_
        return self

    def predict(self, X, return_std=False):
        if not return_std:
            return self.estimator_.predict(X) * self.y_scale_ + self.y_mean_
        mean, std = self.estimator_.predict(X, return_std=True)
        return mean * self.y_scale_ + self.y_mean_, std * self.y_scale_
