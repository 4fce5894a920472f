"""Predictions in blocks of rows: the same numbers as all rows at once, in bounded memory."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sklearn_quinn import LaplaceClassifier, LaplaceRegressor, MCDropoutRegressor, MCMCClassifier, MCMCRegressor, base

SMALL = dict(hidden_layer_sizes=(4,), max_epochs=30, random_state=0)


@pytest.mark.parametrize("regressor", [LaplaceRegressor(**SMALL),
                                       MCMCRegressor(n_chains=2, n_burnin=10, n_samples=10, **SMALL)],
                         ids=["laplace", "mcmc"])
def test_a_regressor_predicts_in_blocks(regressor, linear_data, monkeypatch):
    X, y = linear_data
    regressor.fit(X, y)
    whole = regressor.predict(X, return_std=True), regressor.predict_uncertainty(X), regressor.predict(X)
    monkeypatch.setattr(base, "PREDICT_BLOCK_ROWS", 7)  # 6 blocks, the last of 5 rows
    blocked = regressor.predict(X, return_std=True), regressor.predict_uncertainty(X), regressor.predict(X)
    assert_allclose(blocked[0], whole[0], rtol=1e-12)
    for key in whole[1]:
        assert_allclose(blocked[1][key], whole[1][key], rtol=1e-12)
    assert_allclose(blocked[2], whole[2], rtol=1e-12)
    assert blocked[2].shape == (40,)
    # The joint covariance of the rows is taken over all of them at once.
    assert regressor.predict(X, return_cov=True)[1].shape == (40, 40)


@pytest.mark.parametrize("classifier", [LaplaceClassifier(predictive="laplace_bridge", **SMALL),
                                        MCMCClassifier(n_chains=2, n_burnin=10, n_samples=10, **SMALL)],
                         ids=["laplace", "mcmc"])
def test_a_classifier_predicts_in_blocks(classifier, linear_data, monkeypatch):
    X, y = linear_data
    labels = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    whole = classifier.fit(X, labels).predict_proba(X)
    monkeypatch.setattr(base, "PREDICT_BLOCK_ROWS", 7)
    assert_allclose(classifier.predict_proba(X), whole, rtol=1e-12)
    assert_allclose(classifier.predict_log_proba(X), np.log(whole), rtol=1e-12)


def test_mc_dropout_takes_its_masks_spread_over_the_training_rows_in_blocks(linear_data, monkeypatch):
    X, y = linear_data
    whole = MCDropoutRegressor(**SMALL).fit(X, y)
    monkeypatch.setattr(base, "PREDICT_BLOCK_ROWS", 7)
    rows_seen, spread = [], MCDropoutRegressor._draws_variance
    monkeypatch.setattr(MCDropoutRegressor, "_draws_variance",
                        lambda self, X: rows_seen.append(len(X)) or spread(self, X))
    blocked = MCDropoutRegressor(**SMALL).fit(X, y)
    assert whole._draw_local_variance is not None and rows_seen and max(rows_seen) == 7
    assert_allclose(blocked._draw_local_variance, whole._draw_local_variance, rtol=1e-12)
