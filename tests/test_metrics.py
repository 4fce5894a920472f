"""Metrics against scipy or hand-computed values; scorers in model selection."""

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.stats import norm
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_quinn import LaplaceRegressor
from sklearn_quinn import metrics as M
from sklearn_quinn.model_selection import EvidenceSearch

from .stand_ins import GaussianFromColumns, ProbabilitiesAsInputs


@pytest.fixture
def gaussian_predictions():
    rng = np.random.RandomState(0)
    return rng.randn(40), rng.randn(40), rng.uniform(0.5, 2, 40)


def test_gaussian_nll_matches_scipy(gaussian_predictions):
    y, mean, std = gaussian_predictions
    assert M.gaussian_nll(y, mean, std) == pytest.approx(-norm.logpdf(y, mean, std).mean())


def test_gaussian_nll_sums_over_targets():
    y = np.zeros((4, 2))
    assert M.gaussian_nll(y, y, np.ones((4, 2))) == pytest.approx(2 * 0.5 * np.log(2 * np.pi))


def test_crps_gaussian_is_the_integral_of_the_squared_cdf_gap(gaussian_predictions):
    y, mean, std = (a[:5] for a in gaussian_predictions)

    def integral(y_i, m, s):
        below = quad(lambda x: norm.cdf(x, m, s) ** 2, -np.inf, y_i)[0]
        above = quad(lambda x: norm.sf(x, m, s) ** 2, y_i, np.inf)[0]
        return below + above

    expected = np.mean([integral(*args) for args in zip(y, mean, std)])
    assert M.crps_gaussian(y, mean, std) == pytest.approx(expected, rel=1e-7)


def test_crps_from_samples_converges_to_the_closed_form(gaussian_predictions):
    """100k draws per point: the sample CRPS is within 0.5% of the closed form."""
    y, mean, std = (a[:8] for a in gaussian_predictions)
    draws = mean[:, None] + std[:, None] * np.random.RandomState(1).randn(8, 100_000)
    assert M.crps_samples(y, draws) == pytest.approx(M.crps_gaussian(y, mean, std), rel=5e-3)


def test_crps_samples_brute_force_pairs():
    rng = np.random.RandomState(2)
    y, draws = rng.randn(3, 2), rng.randn(3, 2, 7)
    pairs = np.abs(draws[..., :, None] - draws[..., None, :]).mean((-1, -2))
    expected = (np.abs(draws - y[..., None]).mean(-1) - 0.5 * pairs).sum(1).mean()
    assert M.crps_samples(y, draws) == pytest.approx(expected)


def test_rmse_and_chi_squared_by_hand():
    y, mean, std = np.array([1.0, 2.0, 4.0]), np.array([1.0, 0.0, 1.0]), np.array([1.0, 2.0, 3.0])
    assert M.root_mean_squared_error(y, mean) == pytest.approx(np.sqrt((0 + 4 + 9) / 3))
    assert M.chi_squared(y, mean, std) == pytest.approx((0 + 1 + 1) / 3)
    assert M.chi_squared_error(y, mean, std) == pytest.approx(1 / 3)


def test_chi_squared_averages_over_every_value_of_several_targets():
    """Squared standardised residuals 4, 0, 0, 0 over two rows of two targets: their mean, 1 (a sum over the
    targets per row, averaged over the rows, gave 2)."""
    assert M.chi_squared([[2.0, 0.0], [0.0, 0.0]], np.zeros((2, 2)), np.ones((2, 2))) == pytest.approx(1.0, abs=1e-12)


def test_quantile_calibration_error_averages_the_absolute_gaps():
    """Targets 0, 0.1, 10, 10 under N(0, 1): the central 10% interval (half-width 0.126) and the 90% one
    (1.645) each cover 2 of 4, gaps +0.4 and -0.4; the mean of their absolute values is 0.4 (the absolute
    value of their mean, 0)."""
    y = [0.0, 0.1, 10.0, 10.0]
    assert M.quantile_calibration_error(y, np.zeros(4), np.ones(4), levels=[0.1, 0.9]) == pytest.approx(0.4, abs=1e-12)


def test_coverage_curve_reads_the_levels_0_05_to_0_95_by_default():
    levels, observed = M.coverage_curve([0.0], [0.0], [1.0])
    np.testing.assert_allclose(levels, np.arange(1, 20) / 20)
    assert observed.shape == (19,)


def test_interval_coverage_and_width_by_hand():
    # The 95% half-width is 1.96 std: 1.9 is inside, 2.0 outside.
    y = np.array([0.0, 1.9, -1.9, 2.0, -2.0])
    assert M.interval_coverage(y, np.zeros(5), np.ones(5), level=0.95) == pytest.approx(0.6)
    assert M.interval_coverage_error(y, np.zeros(5), np.ones(5), level=0.95) == pytest.approx(0.35)
    assert M.interval_width(y, np.zeros(5), np.full(5, 2.0), level=0.95) == pytest.approx(4 * norm.ppf(0.975))


def test_calibrated_gaussian_scores_as_calibrated():
    """200k draws from the predictive itself: coverage at each level within
    0.003 (binomial standard error at most 0.0011), chi-squared within 0.01,
    quantile calibration error below 0.003."""
    rng = np.random.RandomState(0)
    mean, std = rng.randn(200_000), rng.uniform(0.5, 2, 200_000)
    y = mean + std * rng.randn(200_000)
    levels, observed = M.coverage_curve(y, mean, std)
    np.testing.assert_allclose(observed, levels, atol=3e-3)
    assert M.chi_squared(y, mean, std) == pytest.approx(1.0, abs=0.01)
    assert M.quantile_calibration_error(y, mean, std) < 3e-3
    # Twice too wide: every interval over-covers.
    assert (M.coverage_curve(y, mean, 2 * std)[1] > levels).all()


def test_classification_metrics_by_hand():
    y = np.array(["b", "a", "c"])
    proba = np.array([[0.2, 0.7, 0.1], [0.5, 0.3, 0.2], [0.6, 0.2, 0.2]])
    labels = np.array(["a", "b", "c"])
    assert M.categorical_nll(y, proba, labels) == pytest.approx(-np.mean(np.log([0.7, 0.5, 0.2])))
    brier = np.mean([0.04 + 0.09 + 0.01, 0.25 + 0.09 + 0.04, 0.36 + 0.04 + 0.64])
    assert M.brier_score(y, proba, labels) == pytest.approx(brier)
    assert M.accuracy(y, proba, labels) == pytest.approx(2 / 3)
    # Bins of width 1/15: 0.7 -> bin 10 (correct), 0.5 -> bin 7 (correct), 0.6 -> bin 8 (wrong).
    assert M.expected_calibration_error(y, proba, labels=labels) == pytest.approx((0.3 + 0.5 + 0.6) / 3)
    assert M.maximum_calibration_error(y, proba, labels=labels) == pytest.approx(0.6)


def test_perfectly_calibrated_classifier_has_near_zero_ece():
    """100k points whose labels are drawn from the predicted probabilities:
    ECE below 0.01 (the binning and sampling noise), MCE below 0.05."""
    rng = np.random.RandomState(0)
    logits = 2 * rng.randn(100_000, 3)
    proba = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    y = (proba.cumsum(1) > rng.rand(100_000, 1)).argmax(1)
    assert M.expected_calibration_error(y, proba, labels=[0, 1, 2]) < 0.01
    assert M.maximum_calibration_error(y, proba, labels=[0, 1, 2]) < 0.05
    overconfident = np.exp(3 * logits) / np.exp(3 * logits).sum(1, keepdims=True)
    assert M.expected_calibration_error(y, overconfident, labels=[0, 1, 2]) > 0.05


def test_reliability_bins_counts():
    proba = [[0.95, 0.05], [0.45, 0.55], [0.4, 0.6]]
    confidence, bin_accuracy, counts = M.reliability_bins([0, 1, 1], proba, n_bins=10)
    assert counts.sum() == 3 and counts[9] == 1 and counts[5] == 2
    assert confidence[5] == pytest.approx(0.575) and bin_accuracy[5] == 1.0
    assert np.isnan(confidence[0])


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: M.gaussian_nll([0.0, 1.0], [0.0], [1.0]), "inconsistent numbers of samples"),
        (lambda: M.gaussian_nll([0.0], [0.0], [0.0]), "y_std must be positive"),
        (lambda: M.crps_gaussian([[0.0, 1.0]], [[0.0]], [[1.0]]), "same shape"),
        (lambda: M.interval_coverage([0.0], [0.0], [1.0], level=1.5), "level must be a number in"),
        (lambda: M.interval_coverage([0.0], [0.0], [1.0], level="0.9"), "level must be a number in"),
        (lambda: M.quantile_calibration_error([0.0], [0.0], [1.0], levels=[]), "non-empty 1-D"),
        (lambda: M.coverage_curve([0.0], [0.0], [1.0], levels=[[0.5, 0.9]]), "non-empty 1-D"),
        (lambda: M.crps_samples([0.0, 1.0], [[0.0, 1.0]]), "y_samples must have shape"),
        (lambda: M.brier_score([0, 1], [[0.5, 0.6], [0.5, 0.5]]), "sum to 1"),
        (lambda: M.brier_score([0, 1], [0.5, 0.5]), r"shape \(n_samples, n_classes\)"),
        (lambda: M.accuracy([0, 1, 2], [[0.5, 0.5]] * 3), "3 labels"),
        (lambda: M.accuracy([0, 3], [[0.5, 0.5]] * 2, labels=[0, 1]), r"labels \[3\] not in labels"),
        (lambda: M.expected_calibration_error([0, 1], [[0.5, 0.5]] * 2, n_bins=0), "n_bins"),
        (lambda: M.expected_calibration_error([0, 1], [[0.5, 0.5]] * 2, n_bins=True), "n_bins"),
        (lambda: M.gaussian_nll([0.0, np.nan], [0.0, 0.0], [1.0, 1.0]), "y_true contains NaN"),
        (lambda: M.interval_coverage([0.0, 1.0], [0.0, np.nan], [1.0, 1.0]), "y_pred contains NaN"),
        (lambda: M.root_mean_squared_error([0.0, np.nan], [0.0, 0.0]), "y_true contains NaN"),
        (lambda: M.crps_samples([np.nan], [[0.0, 1.0]]), "y_true contains NaN"),
        (lambda: M.gaussian_nll([0.0], [0.0], [np.nan]), "y_std contains NaN"),
        (lambda: M.crps_gaussian([], [], []), "0 sample"),
        (lambda: M.categorical_nll([], np.empty((0, 2))), "0 samples"),
        (lambda: M.root_mean_squared_error([[0.0, 1.0]], [[0.0]]), "same shape"),
        (lambda: M.categorical_nll([0, 1], [[0.5, 0.5]] * 2, labels=[0, 0]), "labels must be distinct"),
    ],
)
def test_bad_metric_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


REGRESSION_METRICS = [
    M.gaussian_nll, M.crps_gaussian, M.chi_squared, M.chi_squared_error, M.interval_coverage,
    M.interval_coverage_error, M.interval_width, M.quantile_calibration_error,
    lambda y, mean, std, **kwargs: M.root_mean_squared_error(y, mean, **kwargs),
    lambda y, mean, std, **kwargs: M.crps_samples(y, mean[..., None] + std[..., None] * [-1.0, 0.5, 2.0], **kwargs),
    lambda y, mean, std, **kwargs: M.coverage_curve(y, mean, std, [0.3, 0.8], **kwargs)[1],
]
CLASSIFICATION_METRICS = [
    M.categorical_nll, M.brier_score, M.accuracy, M.expected_calibration_error, M.maximum_calibration_error,
    lambda y, proba, **kwargs: M.reliability_bins(y, proba, n_bins=4, **kwargs)[:2],
]


@pytest.mark.parametrize("metric", REGRESSION_METRICS)
@pytest.mark.parametrize("n_targets", [None, 2])
def test_integer_weights_repeat_points(metric, n_targets):
    """Weights 0, 1, 2, 3 give the metric of the rows repeated that often, as scikit-learn's weights do."""
    rng = np.random.RandomState(3)
    shape = (8,) if n_targets is None else (8, n_targets)
    y, mean, std = rng.randn(*shape), rng.randn(*shape), rng.uniform(0.5, 2, shape)
    weights = np.array([0, 1, 2, 3, 1, 0, 2, 1])
    repeated = np.repeat(np.arange(8), weights)
    weighted = metric(y, mean, std, sample_weight=weights)
    np.testing.assert_allclose(weighted, metric(y[repeated], mean[repeated], std[repeated]), rtol=1e-12)
    np.testing.assert_allclose(metric(y, mean, std, sample_weight=np.full(8, 0.3)), metric(y, mean, std), rtol=1e-12)


@pytest.mark.parametrize("metric", CLASSIFICATION_METRICS)
def test_integer_weights_repeat_points_of_class_probabilities(metric):
    rng = np.random.RandomState(4)
    y, proba = rng.randint(0, 3, 12), rng.dirichlet(np.ones(3), 12)
    weights = rng.randint(0, 4, 12)
    repeated = np.repeat(np.arange(12), weights)
    kwargs = {"labels": [0, 1, 2]}
    weighted = metric(y, proba, sample_weight=weights, **kwargs)
    np.testing.assert_allclose(weighted, metric(y[repeated], proba[repeated], **kwargs), rtol=1e-12)


def test_reliability_counts_are_the_bins_weights():
    proba = [[0.95, 0.05], [0.45, 0.55], [0.4, 0.6]]
    counts = M.reliability_bins([0, 1, 1], proba, n_bins=10)[2]
    weighed = M.reliability_bins([0, 1, 1], proba, n_bins=10, sample_weight=[0.5, 2.0, 1.0])[2]
    assert counts.dtype.kind == "i" and weighed[9] == 0.5 and weighed[5] == 3.0


@pytest.mark.parametrize(
    "weights, message",
    [
        ([1.0, -1.0, 1.0], "non-negative"),
        ([0.0, 0.0, 0.0], "non-zero|positive sum"),  # scikit-learn's check, or ours where it has none
        ([1.0, 1.0], "sample_weight.shape"),
        ([1.0, np.nan, 1.0], "NaN"),
    ],
)
@pytest.mark.parametrize(
    "metric",
    [
        lambda w: M.gaussian_nll([0.0, 1.0, 2.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0], sample_weight=w),
        lambda w: M.crps_samples([0.0, 1.0, 2.0], [[0.0, 1.0]] * 3, sample_weight=w),
        lambda w: M.brier_score([0, 1, 1], [[0.5, 0.5]] * 3, sample_weight=w),
    ],
)
def test_bad_sample_weight(metric, weights, message):
    with pytest.raises(ValueError, match=message):
        metric(weights)


def test_coverage_curve_takes_one_level():
    levels, observed = M.coverage_curve([0.0, 3.0], [0.0, 0.0], [1.0, 1.0], levels=0.5)
    assert levels.tolist() == [0.5] and observed.tolist() == [0.5]


def test_one_target_as_a_column_reads_as_one_dimensional():
    """``y`` as a DataFrame's column ``(n, 1)`` beside 1-D predictions, what a single-target estimator
    gives: every metric reads it as 1-D, as scikit-learn's do (the classification metrics broadcast it
    to ``(n, n)``)."""
    y, mean, std = np.array([0.0, 1.0, 3.0]), np.array([0.5, 1.0, 2.0]), np.array([1.0, 2.0, 1.5])
    for metric in (M.gaussian_nll, M.crps_gaussian, M.interval_coverage, M.chi_squared):
        assert metric(y[:, None], mean, std) == metric(y, mean, std)
    assert M.root_mean_squared_error(y, mean[:, None]) == M.root_mean_squared_error(y, mean)
    assert M.crps_samples(y[:, None], np.stack([mean, mean + 1], 1)) == M.crps_samples(y, np.stack([mean, mean + 1], 1))
    labels, proba = np.array([0, 1, 1]), np.array([[0.7, 0.3], [0.4, 0.6], [0.2, 0.8]])
    for metric in (M.categorical_nll, M.brier_score, M.accuracy, M.expected_calibration_error):
        assert metric(labels[:, None], proba) == metric(labels, proba)


def test_scorers_call_the_predictive_never_score():
    class Fixed(RegressorMixin, BaseEstimator):
        def predict(self, X, return_std=False):
            assert return_std
            return np.zeros(len(X)), np.ones(len(X))

        def score(self, X, y):
            raise AssertionError("a scorer must not call score")

    X, y = np.zeros((4, 1)), np.array([0.0, 0.0, 3.0, -3.0])
    assert M.neg_nll_scorer(Fixed(), X, y) == pytest.approx(-M.gaussian_nll(y, np.zeros(4), np.ones(4)))
    assert M.neg_crps_scorer(Fixed(), X, y) == pytest.approx(-M.crps_gaussian(y, np.zeros(4), np.ones(4)))
    assert M.coverage_scorer(0.95)(Fixed(), X, y) == pytest.approx(-0.45)
    assert M.neg_interval_width_scorer(0.5)(Fixed(), X, y) == pytest.approx(-2 * norm.ppf(0.75))


def test_classification_scorers_use_predict_proba_and_classes():
    X = np.r_[np.linspace(-3, -1, 20), np.linspace(1, 3, 20)][:, None]
    y = np.where(X[:, 0] > 0, "yes", "no")
    model = LogisticRegression().fit(X, y)
    proba = model.predict_proba(X)
    assert M.neg_nll_scorer(model, X, y) == pytest.approx(-M.categorical_nll(y, proba, model.classes_))
    assert M.neg_brier_scorer(model, X, y) == pytest.approx(-M.brier_score(y, proba, model.classes_))
    ece = M.expected_calibration_error(y, proba, labels=model.classes_)
    assert M.neg_ece_scorer(model, X, y) == pytest.approx(-ece)


def test_scorers_weigh_the_points_they_are_routed(wave_data):
    """Under metadata routing a scorer that asks for ``sample_weight`` (a copy: the module's scorer
    is unchanged) receives each test fold's weights; without the request it is an error."""
    import sklearn
    from sklearn.exceptions import UnsetMetadataPassedError
    from sklearn.model_selection import cross_validate

    X, y = wave_data
    weights = np.random.RandomState(5).uniform(0, 3, len(y))
    model = _pipeline()[-1]
    with pytest.raises(RuntimeError, match="metadata routing is enabled"):
        M.neg_nll_scorer.set_score_request(sample_weight=True)
    with sklearn.config_context(enable_metadata_routing=True):
        scorer = M.neg_nll_scorer.set_score_request(sample_weight=True)
        assert M.neg_nll_scorer.get_metadata_routing().score.requests["sample_weight"] is None
        result = cross_validate(
            model, X, y, cv=2, scoring=scorer, params={"sample_weight": weights}, return_estimator=True,
            return_indices=True,
        )
        with pytest.raises(UnsetMetadataPassedError):
            cross_validate(model, X, y, cv=2, scoring=M.neg_nll_scorer, params={"sample_weight": weights})
    for fitted, test, score in zip(result["estimator"], result["indices"]["test"], result["test_score"]):
        mean, std = fitted.predict(X[test], return_std=True)
        assert score == pytest.approx(-M.gaussian_nll(y[test], mean, std, sample_weight=weights[test]))
        assert score != pytest.approx(-M.gaussian_nll(y[test], mean, std))


def test_scorers_score_a_pipeline_under_metadata_routing(wave_data):
    """A Pipeline passes predict's return_std on under routing: the scorers failed there (cross_validate
    then recorded NaN scores)."""
    import sklearn

    X, y = wave_data
    pipeline = _pipeline().fit(X, y)
    search = Pipeline([("scale", StandardScaler()), ("search", EvidenceSearch(
        LaplaceRegressor(hidden_layer_sizes=(8,), max_epochs=30, random_state=0), {"cov_scale": [0.5, 1.0]}))])
    search.fit(X, y)
    expected = [M.neg_nll_scorer(pipeline, X, y), M.neg_nll_scorer(search, X, y)]
    with sklearn.config_context(enable_metadata_routing=True):
        assert [M.neg_nll_scorer(pipeline, X, y), M.neg_nll_scorer(search, X, y)] == expected
        assert pipeline.predict(X, return_cov=True)[1].shape == (len(X), len(X))


def _pipeline():
    laplace = LaplaceRegressor(hidden_layer_sizes=(8,), lr=0.01, max_epochs=60, random_state=0)
    return Pipeline([("scale", StandardScaler()), ("laplace", laplace)])


def test_grid_search_with_a_scoring_dict_and_refit(wave_data):
    X, y = wave_data
    scoring = {"nll": M.neg_nll_scorer, "crps": M.neg_crps_scorer, "coverage": M.coverage_scorer(0.9)}
    search = GridSearchCV(_pipeline(), {"laplace__cov_scale": [0.3, 1.0, 3.0]}, scoring=scoring, refit="nll", cv=3)
    search.fit(X, y)
    best = int(np.argmax(search.cv_results_["mean_test_nll"]))
    assert search.best_params_ == search.cv_results_["params"][best]
    assert all(np.isfinite(search.cv_results_[f"mean_test_{name}"]).all() for name in scoring)
    assert search.predict(X[:3]).shape == (3,)


def test_every_regression_scorer_is_minus_its_weighted_metric_at_its_level():
    """Each scorer is minus its metric (greater is better), reads its level, and passes the
    weights on; the expected values are computed by hand from the z-scores."""
    mean, std = np.array([0.0, 1.0, -1.0, 2.0, 0.5]), np.array([1.0, 2.0, 0.5, 1.0, 3.0])
    y = np.array([0.5, -3.0, -1.2, 2.0, 4.0])
    weights = np.array([1.0, 3.0, 0.5, 2.0, 1.0])
    X, z = np.c_[mean, std], (y - mean) / std
    chi_squared_error = abs(np.average(z**2, weights=weights) - 1)
    covered = np.abs(z) <= norm.ppf(0.9)  # the central 80% interval
    coverage_error = abs(np.average(covered, weights=weights) - 0.8)
    width = np.average(2 * norm.ppf(0.9) * std, weights=weights)
    nll = np.average(-norm.logpdf(y, mean, std), weights=weights)
    cases = [
        (M.neg_nll_scorer, nll),
        (M.neg_chi_squared_error_scorer, chi_squared_error),
        (M.coverage_scorer(0.8), coverage_error),
        (M.neg_interval_width_scorer(0.8), width),
        (M.neg_crps_scorer, M.crps_gaussian(y, mean, std, sample_weight=weights)),
        (M.neg_quantile_calibration_error_scorer, M.quantile_calibration_error(y, mean, std, sample_weight=weights)),
    ]
    for scorer, expected in cases:
        assert expected > 0
        assert scorer(GaussianFromColumns(), X, y, sample_weight=weights) == pytest.approx(-expected), scorer
    # The level is the scorer's, not the metric's default of 0.95.
    stand_in = GaussianFromColumns()
    assert M.coverage_scorer(0.8)(stand_in, X, y) != pytest.approx(M.coverage_scorer(0.95)(stand_in, X, y))


@pytest.mark.parametrize("factory", [M.coverage_scorer, M.neg_interval_width_scorer])
@pytest.mark.parametrize("level", [0.0, 1.0, 1.5])
def test_scorer_factories_refuse_a_level_outside_0_1(factory, level):
    with pytest.raises(ValueError, match="level"):
        factory(level)


def test_classification_scorers_read_the_classes_and_weigh_a_fold_missing_a_class():
    """A test fold without class 1 is scored over the estimator's three classes (labels from
    classes_, not from y), with the weights passed on; NLL and Brier by hand."""
    proba = np.array([[0.7, 0.2, 0.1], [0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
    y, weights = np.array([0, 0, 2]), np.array([1.0, 2.0, 3.0])
    nll = -(1 * np.log(0.7) + 2 * np.log(0.2) + 3 * np.log(0.8)) / 6
    brier = (1 * (0.09 + 0.04 + 0.01) + 2 * (0.64 + 0.09 + 0.25) + 3 * (0.01 + 0.01 + 0.04)) / 6
    assert M.neg_nll_scorer(ProbabilitiesAsInputs(), proba, y, sample_weight=weights) == pytest.approx(-nll)
    assert M.neg_brier_scorer(ProbabilitiesAsInputs(), proba, y, sample_weight=weights) == pytest.approx(-brier)
    # Bins of width 1/15: 0.7 (right, weight 1), 0.5 (wrong, weight 2), 0.8 (right, weight 3).
    ece = (1 * 0.3 + 2 * 0.5 + 3 * 0.2) / 6
    assert M.neg_ece_scorer(ProbabilitiesAsInputs(), proba, y, sample_weight=weights) == pytest.approx(-ece)


def test_a_scorer_told_not_to_take_weights_ignores_those_routed():
    """``set_score_request(sample_weight=False)`` scores without the weights that routing carries
    to other consumers (None, unset, would raise UnsetMetadataPassedError instead)."""
    import sklearn
    from sklearn.utils.metadata_routing import MetadataRouter, MethodMapping, process_routing

    mean, std = np.array([0.0, 1.0, 2.0]), np.array([1.0, 1.0, 2.0])
    y, X = np.array([1.0, 1.0, -2.0]), np.c_[mean, std]
    with sklearn.config_context(enable_metadata_routing=True):
        scorer = M.neg_nll_scorer.set_score_request(sample_weight=False)
        to_score = MethodMapping().add(caller="score", callee="score")
        to_fit = MethodMapping().add(caller="score", callee="fit")
        # Routing refuses weights that no consumer takes: a regressor's fit takes them here.
        router = MetadataRouter(owner="test").add(scorer=scorer, method_mapping=to_score).add(
            regressor=LinearRegression().set_fit_request(sample_weight=True), method_mapping=to_fit)
        routed = process_routing(router, "score", sample_weight=np.array([1.0, 5.0, 1.0]))
        assert routed.scorer.score == {}
        renamed = M.neg_nll_scorer.set_score_request(sample_weight="test_weights")
        assert renamed.get_metadata_routing().score.requests["sample_weight"] == "test_weights"
    assert scorer(GaussianFromColumns(), X, y) == pytest.approx(-np.mean(-norm.logpdf(y, mean, std)))
