"""The package's defaults against scikit-learn's BayesianRidge on data from a linear model.

Data: 300 training rows, 10 standard-normal features, unit Gaussian noise,
1000 test rows; every estimator in ``Pipeline([StandardScaler(), estimator])``
at its defaults, seeds fixed. BayesianRidge is the exact model here (test NLL
1.414, coverage 0.949). Issue 17 asks for every regressor within 0.05 nats of
it and a coverage in [0.92, 0.98]. What makes that reachable: the default
network's linear skip path (a ReLU network alone stayed 0.09-0.19 nats behind:
it builds a linear function out of hinges, which its prior does not prefer),
an evidence maximised often enough during training to switch the hidden
layers off (RMS's anchors drawn from their prior otherwise fit the noise), and
MC dropout leaving the linear path undropped.
"""

import numpy as np
import pytest
from sklearn.linear_model import BayesianRidge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_quinn import (
    DeepEnsembleRegressor,
    LaplaceRegressor,
    MCDropoutRegressor,
    RMSRegressor,
    SWAGRegressor,
    metrics,
)

NLL_EXCESS = 0.05
COVERAGE = (0.92, 0.98)


@pytest.fixture(scope="module")
def linear_table():
    rng = np.random.RandomState(0)
    X = rng.randn(1300, 10)
    y = X @ rng.randn(10) + rng.randn(1300)
    return X[:300], y[:300], X[300:], y[300:]


def scores(estimator, table):
    X_train, y_train, X_test, y_test = table
    mean, std = make_pipeline(StandardScaler(), estimator).fit(X_train, y_train).predict(X_test, return_std=True)
    return metrics.gaussian_nll(y_test, mean, std), metrics.interval_coverage(y_test, mean, std, 0.95)


@pytest.mark.slow
@pytest.mark.parametrize(
    "estimator",
    [LaplaceRegressor, DeepEnsembleRegressor, RMSRegressor, SWAGRegressor, MCDropoutRegressor],
    ids=lambda cls: cls.__name__,
)
def test_default_regressor_is_near_bayesian_ridge_on_linear_data(estimator, linear_table):
    reference_nll, _ = scores(BayesianRidge(), linear_table)
    nll, coverage = scores(estimator(random_state=0), linear_table)
    assert nll <= reference_nll + NLL_EXCESS
    assert COVERAGE[0] <= coverage <= COVERAGE[1]
