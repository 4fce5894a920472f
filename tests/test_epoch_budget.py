"""``max_epochs='auto'``: 1000 epochs, capped at a number of minibatch steps, in every family that trains
(Bayes by backprop's ELBO raised to a number of steps first)."""

import numpy as np
import pytest
import torch

from sklearn_quinn import (
    BBBClassifier,
    BBBRegressor,
    DeepEnsembleRegressor,
    LaplaceRegressor,
    MCDropoutRegressor,
    RMSRegressor,
    SWAGRegressor,
)
from sklearn_quinn import base as base_module
from sklearn_quinn.ensemble import _engine as ensemble_engine
from sklearn_quinn.swag import _swag as swag_module


@pytest.mark.parametrize("n_rows, batch_size, expected", [
    (100, "auto", 1000),  # one step an epoch
    (40_000, "auto", 1000),  # 200 steps an epoch: 200,000 steps
    (40_002, "auto", 995),  # 201 steps an epoch (at 40,001 the last row joins the 200th batch)
    (1_000_000, "auto", 40),  # 5000 steps an epoch
    (1_000_000, 1000, 200),
    (10**9, "auto", 1),  # more steps in one epoch than the cap: still one epoch
])
def test_auto_epochs_are_1000_capped_at_200k_steps(n_rows, batch_size, expected):
    assert LaplaceRegressor(batch_size=batch_size)._n_epochs(n_rows) == expected
    assert LaplaceRegressor(max_epochs=7)._n_epochs(n_rows) == 7


@pytest.mark.parametrize("n_rows, expected", [
    (150, 4000),  # one step an epoch
    (300, 2000),
    (402, 1334),  # three steps an epoch: 4002 steps
    (800, 1000),  # four steps an epoch: the 1000 epochs take 4000
    (40_002, 995),  # the cap as for every family
])
def test_auto_epochs_raised_to_a_minimum_of_steps(n_rows, expected):
    assert BBBRegressor()._n_epochs(n_rows, min_steps=4000) == expected
    assert BBBRegressor(max_epochs=7)._n_epochs(n_rows, min_steps=4000) == 7


@pytest.mark.parametrize("estimator, prior_learning, expected", [
    (BBBRegressor, "elbo", 3),
    (BBBRegressor, "evidence", 3),
    (BBBClassifier, "evidence", 2),
])
def test_a_bbb_regressors_elbo_trains_its_minimum_steps_a_classifiers_its_epochs(estimator, prior_learning, expected,
                                                                                monkeypatch):
    """With 2 epochs the default and 30 steps the minimum, 400 rows in 40-row batches train a
    regressor's ELBO for 3 epochs, whichever its prior, and the MAP that learns the evidence's
    prior for 2; a classifier's ELBO trains the 2."""
    monkeypatch.setattr(base_module, "AUTO_EPOCHS", 2)
    monkeypatch.setattr(BBBRegressor, "_auto_min_steps", 30)
    rng = np.random.RandomState(0)
    X = rng.randn(400, 2)
    y = X[:, 0] + 0.1 * rng.randn(400)
    y = (y > 0).astype(int) if estimator is BBBClassifier else y
    fitted = estimator(hidden_layer_sizes=(4,), n_samples=5, batch_size=40, prior_learning=prior_learning,
                       random_state=0).fit(X, y)
    assert len(fitted.net_.history) == expected
    if prior_learning == "evidence":
        assert max(record["epoch"] for record in fitted.evidence_history_) == 2


@pytest.mark.parametrize("estimator", [
    LaplaceRegressor(hidden_layer_sizes=(4,)),
    MCDropoutRegressor(hidden_layer_sizes=(4,), n_samples=5),
    SWAGRegressor(hidden_layer_sizes=(4,), swag_epochs=2, n_samples=5),
    BBBRegressor(hidden_layer_sizes=(4,), n_samples=5),
    DeepEnsembleRegressor(hidden_layer_sizes=(4,), n_estimators=2),
    RMSRegressor(hidden_layer_sizes=(4,), n_estimators=2, data_fraction=0.5),
], ids=lambda estimator: type(estimator).__name__)
def test_every_family_trains_the_capped_epochs(estimator, monkeypatch):
    """With the cap lowered to 60 steps, 400 rows in 40-row batches (10 steps an
    epoch) train 6 epochs; RMS's members, on half the rows, 12. (SWAG's own
    phase after the MAP has its own ``swag_epochs``.)"""
    monkeypatch.setattr(base_module, "AUTO_MAX_STEPS", 60)
    rng = np.random.RandomState(0)
    X = rng.randn(400, 2)
    y = X[:, 0] + 0.1 * rng.randn(400)
    fitted = estimator.set_params(batch_size=40, random_state=0).fit(X, y)
    expected = 12 if isinstance(estimator, RMSRegressor) else 6
    nets = fitted.net_ if isinstance(fitted.net_, list) else [fitted.net_]
    assert [len(net.history) for net in nets] == [expected] * len(nets)


def test_unknown_max_epochs_is_refused(linear_data):
    with pytest.raises(ValueError, match="max_epochs"):
        LaplaceRegressor(max_epochs="many").fit(*linear_data)


@pytest.mark.parametrize("n_rows, batch_size_swag, expected", [
    (1000, 32, None),  # 32 steps an epoch: 100 epochs are 3,200 steps
    (64_000, 32, None),  # 2,000 steps an epoch: exactly the cap
    (64_002, 32, 2000),  # 2,001 steps an epoch (at 64,001 the last row joins the 2,000th batch)
    (1_000_000, 32, 2000),  # 31,250 steps an epoch: 2,000 steps between snapshots
])
def test_swag_periods_are_epochs_capped_at_200k_steps(n_rows, batch_size_swag, expected):
    assert SWAGRegressor(batch_size_swag=batch_size_swag)._steps_per_period(n_rows) == expected


def test_swag_collects_a_snapshot_a_capped_period(monkeypatch):
    """With the cap lowered to 20 steps for 4 swag_epochs, 400 rows in 10-row batches (40 steps an
    epoch) take 5 steps between snapshots, each on fresh random rows (each member its own), and
    still give 4 snapshots."""
    monkeypatch.setattr(swag_module, "AUTO_MAX_STEPS", 20)
    periods = []
    original = ensemble_engine.MemberBatches.__iter__

    def counted(self):
        batches = list(original(self))
        if self.batch_size == 10:
            periods.append(torch.cat([rows for rows, _ in batches], dim=1))
        return iter(batches)

    monkeypatch.setattr(ensemble_engine.MemberBatches, "__iter__", counted)
    rng = np.random.RandomState(0)
    X = rng.randn(400, 2)
    y = X[:, 0] + 0.1 * rng.randn(400)
    reg = SWAGRegressor(hidden_layer_sizes=(4,), n_estimators=2, max_epochs=5, swag_epochs=4, batch_size_swag=10,
                        n_samples=5, random_state=0).fit(X, y)
    assert reg.n_snapshots_ == 4
    assert [rows.shape[:2] for rows in periods] == [(2, 50)] * 4
    assert not torch.equal(periods[0], periods[1])
    assert not torch.equal(periods[0][0], periods[0][1])
    assert np.isfinite(reg.predict(X[:3], return_std=True)[1]).all()
