"""evaluate: summaries computed once and reused, then the metrics."""

import numpy as np
import pytest
from sklearn.linear_model import BayesianRidge, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_quinn import LaplaceRegressor
from sklearn_quinn import metrics as M
from sklearn_quinn.evaluation import PredictiveSummaries, evaluate


@pytest.fixture
def fitted(wave_data):
    X, y = wave_data
    reg = LaplaceRegressor(hidden_layer_sizes=(12,), lr=0.01, max_epochs=60, random_state=0).fit(X, y)
    return reg, X, y


def test_default_regression_metrics_equal_the_metric_functions(fitted):
    reg, X, y = fitted
    mean, std = reg.predict(X, return_std=True)
    results = evaluate(reg, X, y, level=0.9)
    assert results["rmse"] == pytest.approx(M.root_mean_squared_error(y, mean))
    assert results["nll"] == pytest.approx(M.gaussian_nll(y, mean, std))
    assert results["crps"] == pytest.approx(M.crps_gaussian(y, mean, std))
    assert results["coverage"] == pytest.approx(M.interval_coverage(y, mean, std, 0.9))
    assert results["interval_width"] == pytest.approx(M.interval_width(y, mean, std, 0.9))
    assert set(results) == {"rmse", "nll", "crps", "chi_squared", "coverage", "interval_width",
                            "quantile_calibration_error"}


def test_each_summary_is_computed_once(fitted):
    reg, X, y = fitted
    summaries = PredictiveSummaries(reg, X)
    for _ in range(2):
        summaries["std"], summaries["mean"], summaries["variance"]
    assert summaries.calls == {"predict": 1}


def test_variance_and_std_reuse_the_covariance(fitted):
    reg, X, y = fitted
    seen = {}

    def joint_nll(y_true, summaries):
        seen.update(summaries.calls)
        cov = summaries["covariance"]
        residual = y_true - summaries["mean"]
        sign, logdet = np.linalg.slogdet(cov)
        return 0.5 * (residual @ np.linalg.solve(cov, residual) + logdet + len(y_true) * np.log(2 * np.pi))

    results = evaluate(reg, X, y, metrics={"nll": "nll", "joint_nll": joint_nll}, summaries=["covariance"])
    assert seen == {"predict": 1}  # one predict(return_cov=True) served every summary
    _, std = reg.predict(X, return_std=True)
    assert results["nll"] == pytest.approx(M.gaussian_nll(y, reg.predict(X), std), rel=1e-10)
    assert np.isfinite(results["joint_nll"])


def test_several_targets_variances_are_each_targets_diagonal_of_the_covariance(wave_data):
    """With two targets ``predict(return_cov=True)`` gives ``(N, N, 2)``; the variance summary read from
    it is each target's diagonal, ``predict(return_std=True)``'s squares."""
    X, y = wave_data
    Y = np.column_stack([y, 2 * y + 0.1 * X[:, 0]])
    reg = LaplaceRegressor(hidden_layer_sizes=(12,), lr=0.01, max_epochs=60, random_state=0).fit(X, Y)
    summaries = PredictiveSummaries(reg, X)
    assert summaries["covariance"].shape == (len(X), len(X), 2)
    np.testing.assert_allclose(summaries["variance"], reg.predict(X, return_std=True)[1] ** 2, rtol=1e-10)


def test_a_pipeline_draws_through_its_last_step_and_one_name_is_one_metric(fitted):
    reg, X, y = fitted
    pipeline = make_pipeline(StandardScaler(), reg).fit(X, y)
    results = evaluate(pipeline, X, y, metrics="crps_samples", n_draws=50)
    draws = pipeline[-1].sample_y(pipeline[0].transform(X), n_samples=50, random_state=0)
    assert results == {"crps_samples": pytest.approx(M.crps_samples(y, draws))}


def test_sample_based_crps(fitted):
    reg, X, y = fitted
    results = evaluate(reg, X, y, metrics=["crps", "crps_samples"], n_draws=4000)
    assert results["crps_samples"] == pytest.approx(results["crps"], rel=0.05)


def test_classifier_metrics():
    rng = np.random.RandomState(0)
    X = rng.randn(100, 2)
    y = np.where(X[:, 0] + 0.3 * rng.randn(100) > 0, "pos", "neg")
    model = LogisticRegression().fit(X, y)
    proba = model.predict_proba(X)
    results = evaluate(model, X, y)
    assert results["accuracy"] == pytest.approx(M.accuracy(y, proba, model.classes_))
    assert results["ece"] == pytest.approx(M.expected_calibration_error(y, proba, labels=model.classes_))
    assert set(results) == {"accuracy", "nll", "brier", "ece", "mce"}


def test_unknown_metric_or_summary(fitted):
    reg, X, y = fitted
    with pytest.raises(ValueError, match="Unknown regression metric 'ece'"):
        evaluate(reg, X, y, metrics=["ece"])
    with pytest.raises(ValueError, match="Unknown summaries"):
        evaluate(reg, X, y, metrics=["rmse"], summaries=["median"])
    with pytest.raises(ValueError, match="n_draws must be a positive integer"):  # it failed naming 0 features
        evaluate(reg, X, y, metrics=["crps_samples"], n_draws=0)


def test_one_summary_name_is_one_summary(fitted):
    """A string was read as its characters: 'std' asked for 'd', 's' and 't'."""
    reg, X, y = fitted
    assert evaluate(reg, X, y, metrics=["rmse"], summaries="std") == evaluate(reg, X, y, metrics=["rmse"])


@pytest.mark.parametrize(
    "metrics, summaries, message",
    [
        (["crps_samples"], (), r"'samples' summary needs sample_y\(X, n_samples=..., random_state=...\), which "
                               "BayesianRidge does not have"),
        (["rmse"], ("covariance",), r"'covariance' summary needs predict\(X, return_cov=...\): .*return_cov"),
    ],
)
def test_a_summary_the_estimator_cannot_give_is_named(metrics, summaries, message):
    """Another library's regressor without sample_y or return_cov: a ValueError naming the summary
    and the method it needs, not an AttributeError or a TypeError."""
    X, y = np.arange(20.0)[:, None], np.arange(20.0)
    with pytest.raises(ValueError, match=message):
        evaluate(BayesianRidge().fit(X, y), X, y, metrics=metrics, summaries=summaries)


def test_an_error_inside_the_estimators_method_is_its_own():
    """A TypeError raised inside predict (a bug of the estimator's) is not read as a missing keyword."""

    class Buggy(BayesianRidge):
        def predict(self, X, return_std=False):
            return np.ones(len(X), copy_=True)

    X, y = np.arange(20.0)[:, None], np.arange(20.0)
    with pytest.raises(TypeError, match="copy_"):
        evaluate(Buggy().fit(X, y), X, y, metrics=["nll"])
