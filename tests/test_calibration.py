"""Calibration of the posterior scale by grid search, without refitting."""

import functools
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_iris
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import GroupKFold, KFold, PredefinedSplit, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_quinn import (
    BBBClassifier,
    BBBRegressor,
    DeepEnsembleRegressor,
    LaplaceClassifier,
    LaplaceRegressor,
    MCMCRegressor,
    SMCRegressor,
    SWAGClassifier,
    SWAGRegressor,
)
from sklearn_quinn._scale_search import DEFAULT_GRIDS, best_value
from sklearn_quinn.calibration import (
    CLASSIFICATION_HELD_OUT_OBJECTIVES,
    HELD_OUT_OBJECTIVES,
    calibrate,
    calibrate_cv,
)
from sklearn_quinn.laplace import _engine
from sklearn_quinn.metrics import interval_coverage, interval_coverage_error, quantile_calibration_error

GRID = np.array([0.03, 0.3, 3.0, 30.0])


def laplace(**params):
    # A fixed isotropic prior: a float prior_precision then means the same in a grid
    # search (which, under a learned prior, scales the learned precisions) and in a refit.
    defaults = dict(hidden_layer_sizes=(12,), prior_std=1.0, lr=0.01, max_epochs=80, random_state=0)
    return LaplaceRegressor(**{**defaults, **params})


@pytest.fixture
def split(wave_data):
    X, y = wave_data
    return X[:60], y[:60], X[60:], y[60:]


@pytest.fixture
def count_curvatures(monkeypatch):
    calls = []
    original = _engine.curvature

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(_engine, "curvature", counting)
    return calls


def test_the_ece_objective_is_the_quantile_calibration_error(wave_data):
    """``objective='ece'`` scores each value of the grid by ``metrics.quantile_calibration_error``: the same
    scores, to rounding, as that function given itself."""
    X, y = wave_data
    grid = np.logspace(-2, 2, 9)

    def scores(objective):
        reg = LaplaceRegressor(hidden_layer_sizes=(12,), prior_std=1.0, lr=0.01, max_epochs=80, random_state=0)
        return calibrate(reg.fit(X[:60], y[:60]), X[60:], y[60:], param="cov_scale", grid=grid,
                         objective=objective).scores

    np.testing.assert_allclose(scores("ece"), scores(quantile_calibration_error), rtol=1e-12)


@pytest.mark.filterwarnings("ignore:The best")  # edge warnings have their own test
@pytest.mark.parametrize("pushforward", ["linear", "nonlinear"])
@pytest.mark.parametrize("structure", ["full", "diag"])
@pytest.mark.parametrize("param", ["prior_precision", "cov_scale"])
def test_grid_search_equals_refitting_at_each_value(split, count_curvatures, pushforward, structure, param):
    X, y, X_val, y_val = split
    params = dict(pushforward=pushforward, hessian_structure=structure, n_samples=50)
    reg = laplace(**params).fit(X, y)
    assert len(count_curvatures) == 1
    result = calibrate(reg, X_val, y_val, param=param, grid=GRID, objective="nll")
    assert len(count_curvatures) == 1  # the search computed no new curvature

    objective = HELD_OUT_OBJECTIVES["nll"]
    refitted = []
    for value in GRID:
        fresh = laplace(**params, **{param: value}).fit(X, y)
        refitted.append(objective(y_val, *fresh.predict(X_val, return_std=True)))
    np.testing.assert_allclose(result.scores, refitted, rtol=1e-6)
    assert result.best_value == GRID[np.argmin(refitted)]
    assert getattr(reg, f"{param}_") == result.best_value
    best = laplace(**params, **{param: result.best_value}).fit(X, y)
    np.testing.assert_allclose(reg.predict(X_val, return_std=True), best.predict(X_val, return_std=True), rtol=1e-6)


@pytest.mark.filterwarnings("ignore:The best")
@pytest.mark.parametrize("objective", ["chi_squared", "crps", "ece", "coverage"])
def test_other_held_out_objectives_pick_their_minimum(split, objective):
    X, y, X_val, y_val = split
    reg = laplace().fit(X, y)
    grid = np.logspace(-2, 2, 9)
    result = calibrate(reg, X_val, y_val, param="cov_scale", grid=grid, objective=objective)
    assert result.scores.shape == (9,)
    assert result.best_value == grid[np.argmin(result.scores)]


def test_coverage_objective_reaches_the_level_on_the_held_out_rows(split):
    """The 95% coverage objective on the default (2%-step) grid: the chosen
    cov_scale covers the validation rows at 0.95, up to one row."""
    X, y, X_val, y_val = split
    reg = laplace().fit(X, y)
    calibrate(reg, X_val, y_val, param="cov_scale", objective="coverage")
    assert abs(interval_coverage(y_val, *reg.predict(X_val, return_std=True)) - 0.95) <= 1 / len(y_val) + 1e-12


def test_callable_objective(split):
    """A callable is a held-out objective: the 90% coverage error by partial."""
    X, y, X_val, y_val = split
    reg = laplace().fit(X, y)
    objective = functools.partial(interval_coverage_error, level=0.9)
    result = calibrate(reg, X_val, y_val, param="noise_scale", objective=objective)
    mean, std = reg.predict(X_val, return_std=True)
    assert result.objective is objective
    assert result.scores.min() == objective(y_val, mean, std) <= 1 / len(y_val) + 1e-12


def test_marginal_likelihood_objective_maximises_the_evidence(split):
    X, y, _, _ = split
    reg = laplace().fit(X, y)
    grid = np.logspace(-3, 3, 25)
    evidence = [reg.log_marginal_likelihood(value) for value in grid]
    result = calibrate(reg, param="prior_precision", grid=grid, objective="marginal_log_likelihood")
    assert result.best_value == grid[np.argmax(evidence)]
    np.testing.assert_allclose(result.scores, -np.array(evidence))


def test_a_results_default_grid_is_its_own(split):
    """The default grid came back as the module's own array: editing a result's grid changed every
    later default search."""
    X, y, X_val, y_val = split
    reg = laplace().fit(X, y)
    first = calibrate(reg, X_val, y_val, param="cov_scale")
    default = first.grid.copy()
    first.grid *= 1000
    np.testing.assert_array_equal(calibrate(reg, X_val, y_val, param="cov_scale").grid, default)


def test_a_grid_value_whose_std_overflows_loses():
    """A weak prior's weight draws put a heteroscedastic noise head's variance past the
    floating-point range at the grid's small precisions (inf at 1e-4): that value scores +inf
    and loses, silently, where the metric refused the std and the search failed; the fit's own
    grid search takes the same path."""
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, (80, 2))
    Y = np.c_[np.sin(X[:, 0]) + (0.05 + 0.3 * np.abs(X[:, 0])) * rng.randn(80), X[:, 1] + 0.1 * rng.randn(80)]
    params = dict(hidden_layer_sizes=(8,), likelihood="heteroscedastic", pushforward="nonlinear", max_epochs=60,
                  random_state=0)
    reg = LaplaceRegressor(**params).fit(X, Y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = calibrate(reg, X[40:], Y[40:], param="prior_precision")
    assert not any("floating-point range" in str(warning.message) for warning in caught)
    assert np.isinf(result.scores[0]) and np.isfinite(result.scores).any()
    assert np.isfinite(reg.predict(X[40:], return_std=True)[1]).all()
    LaplaceRegressor(**params, prior_precision="gridsearch").fit(X, Y)


def test_a_plateau_keeps_the_value_nearest_the_fits_and_does_not_warn_at_the_edge():
    """A step objective (coverage) ties over a plateau: of its values the one nearest the posterior's
    current value is chosen (the first of them was, the grid's smallest on a flat objective: a
    covariance 100 times the fit's from 20 held-out rows that told nothing apart), and an edge of
    the plateau at the grid's edge is no sign of an optimum beyond it; an edge value better than
    its neighbour is."""
    grid = np.array([3.0, 1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert best_value(grid, np.array([1.0, 0.0, 0.0]), "cov_scale", current=1.1) == 1.0
        assert best_value(grid, np.array([1.0, 0.0, 0.0]), "cov_scale", current=1.6) == 2.0
        # Nearest in the log: 1.45 lies above the geometric midpoint of 1 and 2 (1.414), below their mean.
        assert best_value(grid, np.array([1.0, 0.0, 0.0]), "cov_scale", current=1.45) == 2.0
        # A grid of one value is its own edge on both sides, and no sign of an optimum beyond it.
        assert best_value(np.array([2.0]), np.array([0.3]), "cov_scale", current=1.0) == 2.0
        assert best_value(np.logspace(-2, 2, 9), np.zeros(9), "cov_scale", current=1.0) == 1.0
    with pytest.warns(UserWarning, match="at the edge"):
        assert best_value(grid, np.array([1.0, 0.0, 0.5]), "cov_scale", current=3.0) == 1.0


def test_best_value_is_the_lowest_finite_score():
    """A score of -inf (an objective that diverges at some value) is no best: it loses, as +inf
    and NaN do."""
    grid = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert best_value(grid, np.array([0.5, 0.2, 0.3, -np.inf, np.nan]), "cov_scale", current=1.0) == 2.0


def test_the_default_scale_grids_step_the_predictive_std_by_about_two_percent():
    """cov_scale multiplies the posterior variance, noise_scale the noise std: from one value of their
    default grids to the next the std moves by 10**0.01 (2.3%) at most; both hold the fit's own 1.0."""
    cov_scale, noise_scale = DEFAULT_GRIDS["cov_scale"], DEFAULT_GRIDS["noise_scale"]
    assert np.sqrt(cov_scale[1:] / cov_scale[:-1]).max() <= 10**0.01 * (1 + 1e-12)
    assert (noise_scale[1:] / noise_scale[:-1]).max() <= 10**0.01 * (1 + 1e-12)
    assert 1.0 in cov_scale and 1.0 in noise_scale


def test_a_flat_held_out_objective_leaves_the_posterior_as_fitted(split):
    """20 held-out rows whose coverage is the same at every value of the grid; after an earlier
    calibration, the posterior stays as that one left it (a noise scale of 2, not the fit's 1)."""
    X, y, X_val, y_val = split
    reg = laplace().fit(X, y)
    std = reg.predict(X_val, return_std=True)[1]
    result = calibrate(reg, X_val, y_val, param="cov_scale", grid=np.logspace(-2, 2, 9),
                       objective=lambda y_true, mean, std: 0.0)
    assert result.best_value == 1.0 == reg.cov_scale_
    np.testing.assert_array_equal(reg.predict(X_val, return_std=True)[1], std)
    calibrate(reg, X_val, y_val, param="noise_scale", grid=[2.0])
    noise_std = reg.noise_std_
    result = calibrate(reg, X_val, y_val, param="noise_scale", grid=[0.5, 1.0, 2.0, 4.0],
                       objective=lambda y_true, mean, std: 0.0)
    assert result.best_value == 2.0 and reg.noise_std_ == noise_std


def test_best_value_at_the_edge_warns(split):
    X, y, X_val, y_val = split
    reg = laplace().fit(X, y)
    with pytest.warns(UserWarning, match=r"best cov_scale \(1e-0[56]\) is at the edge of the grid \[1e-06, 1e-05\]"):
        calibrate(reg, X_val, y_val, param="cov_scale", grid=[1e-6, 1e-5])


def test_edge_warnings_name_the_callers_line(split):
    """The edge-of-grid warning points at the user's line: the call of calibrate,
    or the call of fit for prior_precision='gridsearch'."""
    X, y, X_val, y_val = split
    with pytest.warns(UserWarning, match="at the edge") as from_calibrate:
        calibrate(laplace(max_epochs=5).fit(X, y), X_val, y_val, param="cov_scale", grid=[1e-6, 1e-5])
    # Minus the mean std is lowest at the smallest prior precision, the grid's lower edge.
    widest = laplace(max_epochs=5, prior_precision="gridsearch", calibration_objective=lambda y, mean, std: -std.mean())
    with pytest.warns(UserWarning, match="at the edge") as from_fit:
        widest.fit(X, y)
    assert {w.filename for w in [*from_calibrate, *from_fit] if "at the edge" in str(w.message)} == {__file__}


def test_estimator_option_gridsearch(wave_data):
    """prior_precision='gridsearch' holds out validation_fraction of the rows
    and runs the same calibrate function on them."""
    X, y = wave_data
    reg = laplace(prior_precision="gridsearch", calibration_objective="nll", validation_fraction=0.25).fit(X, y)
    assert reg.prior_precision_ in np.logspace(-4, 4, 41)
    assert reg.net_.criterion_.n_train == 60  # 80 rows minus 25%

    # Fitted on a DataFrame, the held-out rows are searched as the user's table: no warning of
    # feature names (one at every fit before), and the same choice as on the array.
    pd = pytest.importorskip("pandas")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        framed = laplace(prior_precision="gridsearch", calibration_objective="nll", validation_fraction=0.25).fit(
            pd.DataFrame(X, columns=[f"x{column}" for column in range(X.shape[1])]), y)
    assert framed.prior_precision_ == reg.prior_precision_

    evidence = laplace(prior_precision="gridsearch", calibration_objective="marginal_log_likelihood").fit(X, y)
    by_function = laplace().fit(X, y)
    calibrate(by_function, param="prior_precision", objective="marginal_log_likelihood")
    assert evidence.prior_precision_ == by_function.prior_precision_


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(param="noise_std"), "param must be one of"),
        (dict(objective="accuracy"), "objective must be one of"),
        (dict(grid=[1.0, -1.0]), "grid must be a non-empty 1-D array of positive floats"),
        (dict(grid=[]), "grid must be a non-empty"),
        (dict(grid=[[1.0, 2.0]]), "grid must be a non-empty 1-D array"),
        (dict(grid=[0.0, 1.0]), "grid must be a non-empty 1-D array of positive floats"),
        (dict(grid=[1.0, np.inf]), "grid must be a non-empty 1-D array of positive floats"),
        (dict(objective=lambda y_true, mean, std: np.nan), "objective is not finite anywhere on the grid"),
        (dict(param="cov_scale", objective="marginal_log_likelihood"), "prior_precision only, not cov_scale"),
    ],
)
def test_bad_calibration_requests(split, kwargs, message):
    X, y, X_val, y_val = split
    reg = laplace(max_epochs=5).fit(X, y)
    with pytest.raises(ValueError, match=message):
        calibrate(reg, X_val, y_val, **kwargs)


def test_held_out_objective_needs_data(split):
    X, y, X_val, _ = split
    reg = laplace(max_epochs=5).fit(X, y)
    with pytest.raises(ValueError, match="needs held-out X and y"):
        calibrate(reg, objective="nll")
    with pytest.raises(ValueError, match="needs held-out X and y"):
        calibrate(reg, X_val, objective="nll")


@pytest.mark.filterwarnings("ignore:The best")
def test_a_column_of_held_out_targets_scores_as_the_1d_targets(split):
    """y of shape (n, 1), as a one-target regressor accepts it, reaches a user's objective written
    for 1-D arrays as 1-D: paired with the (n,) predictive row by row, not broadcast against it
    into an (n, n) table."""
    X, y, X_val, y_val = split
    reg = laplace(max_epochs=5).fit(X, y)
    grid = np.logspace(-1, 1, 5)

    def mean_squared_z(y_true, mean, std):
        return np.mean(((y_true - mean) / std) ** 2)

    as_1d = calibrate(reg, X_val, y_val, param="cov_scale", grid=grid, objective=mean_squared_z).scores
    as_column = calibrate(reg, X_val, y_val[:, None], param="cov_scale", grid=grid, objective=mean_squared_z).scores
    np.testing.assert_array_equal(as_column, as_1d)


@pytest.mark.parametrize(
    "estimator",
    [SWAGRegressor(), BBBRegressor(), SWAGClassifier(), BBBClassifier(), MCMCRegressor(), SMCRegressor(),
     DeepEnsembleRegressor(), LinearRegression()],
    ids=lambda estimator: type(estimator).__name__,
)
def test_unsupported_estimators_are_refused_by_name(split, estimator):
    """Only the Laplace estimators re-scale their posterior; the others are refused
    before anything is fitted, with the supported ones named."""
    X, y, X_val, y_val = split
    message = rf"support LaplaceRegressor and LaplaceClassifier only.*got {type(estimator).__name__}\."
    with pytest.raises(ValueError, match=message):
        calibrate(estimator, X_val, y_val)
    with pytest.raises(ValueError, match=message):
        calibrate_cv(estimator, X, y)


@pytest.mark.filterwarnings("ignore:The best")
@pytest.mark.parametrize("pushforward", ["linear", "nonlinear"])
def test_noise_scale_path_is_the_rescaled_predictive(split, count_curvatures, pushforward):
    """Each noise scale c gives the predictive of the posterior with curvature
    C / c^2 and noise c * sigma_MAP, built here directly from the engine."""
    X, y, X_val, y_val = split
    reg = laplace(pushforward=pushforward, n_samples=50).fit(X, y)
    map_noise = reg.noise_std_
    path = reg._calibration_path(X_val, "noise_scale")
    for c in (0.5, 2.0):
        posterior = reg._laplace.posterior(reg.prior_precision_, c, reg.cov_scale_)
        predictive = reg._outputs(reg._validated_inputs(X_val), posterior)
        variance = predictive.variance + (reg._map_noise_std * c) ** 2
        expected = reg._y_units(predictive.mean), reg._std(variance)
        np.testing.assert_allclose(path(c), expected, rtol=1e-8)
    result = calibrate(reg, X_val, y_val, param="noise_scale", objective="nll")
    assert reg.noise_std_ == pytest.approx(map_noise * result.best_value)
    np.testing.assert_allclose(
        reg.predict(X_val, return_std=True), path(result.best_value), rtol=1e-8
    )
    assert len(count_curvatures) == 1


# ------------------------------------------------------------ classifiers
def laplace_classifier(**params):
    # A fixed cov_scale: with 'loo' each refit of the grid would choose its own.
    defaults = dict(hidden_layer_sizes=(8,), prior_std=1.0, cov_scale=1.0, lr=0.01, max_epochs=60, random_state=0)
    return LaplaceClassifier(**{**defaults, **params})


@pytest.fixture
def class_split():
    X, y = load_iris(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    labels = np.array(["setosa", "versicolor", "virginica"])[y]  # string labels through classes_
    return train_test_split(X, labels, test_size=0.3, random_state=0, stratify=y)


@pytest.mark.filterwarnings("ignore:The best")
@pytest.mark.parametrize(
    "pushforward, predictive", [("linear", "mc_bridge"), ("linear", "mean_field_1"), ("nonlinear", "mc_bridge")]
)
@pytest.mark.parametrize("param", ["prior_precision", "cov_scale"])
def test_classifier_grid_search_equals_refitting(class_split, count_curvatures, pushforward, predictive, param):
    """For each held-out objective, the search's scores are those of a classifier refitted at each
    value of the grid, and it keeps the best (the refits serve every objective)."""
    X, X_val, y, y_val = class_split
    params = dict(pushforward=pushforward, predictive=predictive, n_samples=30)
    refitted = [laplace_classifier(**params, **{param: value}).fit(X, y).predict_proba(X_val) for value in GRID]
    for objective in ["nll", "ece", "brier"]:
        count_curvatures.clear()
        clf = laplace_classifier(**params).fit(X, y)
        result = calibrate(clf, X_val, y_val, param=param, grid=GRID, objective=objective)
        assert len(count_curvatures) == 1  # the search computed no new curvature

        metric = CLASSIFICATION_HELD_OUT_OBJECTIVES[objective]
        scores = [metric(y_val, proba, labels=clf.classes_) for proba in refitted]
        np.testing.assert_allclose(result.scores, scores, rtol=1e-6)
        best = int(np.argmin(scores))
        assert result.best_value == GRID[best] and getattr(clf, f"{param}_") == result.best_value
        np.testing.assert_allclose(clf.predict_proba(X_val), refitted[best], rtol=1e-6)


@pytest.mark.filterwarnings("ignore:The best")  # on iris the narrowest posterior wins: the grid's edge
def test_classifier_option_gridsearch(class_split):
    """prior_precision='gridsearch' holds out a stratified validation_fraction and calibrates on it."""
    X, _, y, _ = class_split
    clf = laplace_classifier(prior_precision="gridsearch", validation_fraction=0.2).fit(X, y)
    assert clf.prior_precision_ in np.logspace(-4, 4, 41)
    assert clf.net_.criterion_.n_train == 84  # 105 rows minus 20%
    evidence = laplace_classifier(prior_precision="gridsearch", calibration_objective="marginal_log_likelihood")
    evidence.fit(X, y)
    by_function = laplace_classifier().fit(X, y)
    calibrate(by_function, param="prior_precision", objective="marginal_log_likelihood")
    assert evidence.prior_precision_ == by_function.prior_precision_


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(param="noise_scale"), "a classifier has no noise to scale: calibrate 'prior_precision' or 'cov_scale'"),
        (dict(objective="crps"), "objective must be one of .* for a classifier"),
    ],
)
def test_bad_classifier_calibration_requests(class_split, kwargs, message):
    X, X_val, y, y_val = class_split
    with pytest.raises(ValueError, match=message):
        calibrate(laplace_classifier(max_epochs=5).fit(X, y), X_val, y_val, **kwargs)


@pytest.mark.filterwarnings("ignore:The best")
def test_held_out_rows_without_a_class_are_scored_by_the_classifiers_classes(class_split):
    """Held-out rows of two of the three classes: each value's score reads the probabilities'
    columns as classes_ names them, as the metric given those labels does at that value."""
    X, X_val, y, y_val = class_split
    two_classes = y_val != "virginica"
    clf = laplace_classifier(max_epochs=5).fit(X, y)
    result = calibrate(clf, X_val[two_classes], y_val[two_classes], param="cov_scale", grid=GRID, objective="nll")
    nll = CLASSIFICATION_HELD_OUT_OBJECTIVES["nll"]
    for value, score in zip(GRID, result.scores):
        calibrate(clf, X_val, y_val, param="cov_scale", grid=[value])  # the posterior at that value
        expected = nll(y_val[two_classes], clf.predict_proba(X_val[two_classes]), labels=clf.classes_)
        assert score == pytest.approx(expected, rel=1e-6)


def test_a_pipeline_calibrates_its_last_step_on_the_transformed_rows(wave_data):
    """calibrate and calibrate_cv refused a Pipeline (the README's own set-up); its last step is
    calibrated on the rows its earlier steps transform, as that step alone is."""
    X, y = wave_data
    X = 100 * X + 5  # a scale the scaler undoes
    grid = np.logspace(-1, 1, 5)
    pipeline = make_pipeline(StandardScaler(), laplace()).fit(X[:40], y[:40])
    alone = laplace().fit(pipeline[0].transform(X[:40]), y[:40])
    result = calibrate(pipeline, X[40:], y[40:], param="cov_scale", grid=grid)
    expected = calibrate(alone, pipeline[0].transform(X[40:]), y[40:], param="cov_scale", grid=grid)
    np.testing.assert_allclose(result.scores, expected.scores, rtol=1e-12)
    assert pipeline[-1].cov_scale_ == result.best_value
    fitted, cv_result = calibrate_cv(make_pipeline(StandardScaler(), laplace()), X, y, param="cov_scale", grid=grid,
                                     cv=3)
    assert fitted[-1].cov_scale_ == cv_result.best_value and np.all(np.isfinite(cv_result.scores))


def test_a_heteroscedastic_noise_is_not_scaled_and_no_fold_is_fitted_to_say_so(wave_data, monkeypatch):
    """The refusal named a classifier, and calibrate_cv fitted a fold before it."""
    X, y = wave_data
    regressor = laplace(likelihood="heteroscedastic")
    fitted = clone(regressor).fit(X, y)
    with pytest.raises(ValueError, match="likelihood='heteroscedastic' predicts its noise per input to scale"):
        calibrate(fitted, X, y, param="noise_scale")
    fitted.set_params(likelihood="gaussian")  # for the next fit: the fitted network still predicts its noise
    with pytest.raises(ValueError, match="predicts its noise per input"):
        calibrate(fitted, X, y, param="noise_scale")
    monkeypatch.setattr(type(regressor), "fit", lambda *args, **kwargs: pytest.fail("a fold was fitted"))
    with pytest.raises(ValueError, match="predicts its noise per input"):
        calibrate_cv(regressor, X, y, param="noise_scale")


@pytest.mark.filterwarnings("ignore:The best")
def test_calibrate_cv_averages_the_folds_and_refits_on_all_rows(wave_data, count_curvatures):
    X, y = wave_data
    folds = list(KFold(3).split(X))
    fitted, result = calibrate_cv(laplace(), X, y, param="cov_scale", grid=GRID, cv=KFold(3))
    assert len(count_curvatures) == 4  # one per fold, one on all rows; none per grid value

    by_hand = [calibrate(laplace().fit(X[train], y[train]), X[test], y[test], param="cov_scale", grid=GRID).scores
               for train, test in folds]
    np.testing.assert_allclose(result.scores, np.mean(by_hand, axis=0), rtol=1e-10)
    assert result.best_value == GRID[np.argmin(result.scores)] == fitted.cov_scale_
    on_all_rows = laplace(cov_scale=result.best_value).fit(X, y)
    np.testing.assert_allclose(fitted.predict(X, return_std=True), on_all_rows.predict(X, return_std=True), rtol=1e-6)


@pytest.mark.filterwarnings("ignore:The best")
def test_calibrate_cv_classifier_folds_are_stratified(class_split):
    X, _, y, _ = class_split
    fitted, result = calibrate_cv(laplace_classifier(max_epochs=20), X, y, param="cov_scale", grid=GRID, cv=3)
    assert result.scores.shape == GRID.shape and fitted.cov_scale_ == result.best_value
    assert fitted.n_features_in_ == 4 and list(fitted.classes_) == ["setosa", "versicolor", "virginica"]


@pytest.mark.filterwarnings("ignore:The best")
def test_calibrate_cv_keeps_a_dataframes_feature_names(wave_data):
    pd = pytest.importorskip("pandas")
    X, y = wave_data
    frame = pd.DataFrame(X, columns=[f"x{column}" for column in range(X.shape[1])])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # "X has feature names, but ... was fitted without"
        fitted, _ = calibrate_cv(laplace(), frame, y, param="cov_scale", grid=GRID, cv=KFold(3))
        fitted.predict(frame)
    assert list(fitted.feature_names_in_) == list(frame.columns)


@pytest.mark.filterwarnings("ignore:The best")
def test_calibrate_cv_splits_by_groups(wave_data):
    X, y = wave_data
    groups = np.arange(len(X)) % 4
    _, by_groups = calibrate_cv(laplace(), X, y, param="cov_scale", grid=GRID, cv=GroupKFold(4), groups=groups)
    _, by_folds = calibrate_cv(laplace(), X, y, param="cov_scale", grid=GRID,
                               cv=PredefinedSplit(groups))  # the same folds, given directly
    np.testing.assert_allclose(by_groups.scores, by_folds.scores, rtol=1e-10)


def test_calibrate_cv_refuses_the_evidence(wave_data):
    X, y = wave_data
    with pytest.raises(ValueError, match="needs a held-out objective"):
        calibrate_cv(laplace(), X, y, objective="marginal_log_likelihood")


def test_calibrate_cv_checks_the_request_before_fitting(wave_data, count_curvatures):
    X, y = wave_data
    with pytest.raises(ValueError, match="grid must be a non-empty 1-D array of positive floats"):
        calibrate_cv(laplace(), X, y, grid=[1.0, -1.0])
    assert not count_curvatures  # no fold was fitted


def test_calibrate_cv_refuses_a_fold_whose_training_rows_lack_a_class_before_any_fit(class_split, monkeypatch):
    """A class of one row and three folds: the fold holding it out cannot score it. The refusal named
    neither the fold nor the class count, and came after the folds' fits."""
    X, _, y, _ = class_split
    y = np.where(np.arange(len(y)) == 0, "rare", y)
    monkeypatch.setattr(LaplaceClassifier, "fit", lambda *args: pytest.fail("a fold was fitted"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # scikit-learn's of the least populated class
        with pytest.raises(ValueError, match=r"fold \d hold class\(es\) \[.rare.\] that its training rows lack"):
            calibrate_cv(laplace_classifier(), X, y, param="cov_scale", cv=3)


def test_calibrate_cv_refuses_a_fold_whose_held_out_rows_hold_a_class_its_training_rows_lack():
    """Class 2 has one row: the fold that holds it out trains without it, and calibrate_cv
    names that fold (not one whose training rows hold a class its held-out rows lack, which
    is harmless) and that class."""
    from sklearn.model_selection import StratifiedKFold

    from sklearn_quinn import LaplaceClassifier
    from sklearn_quinn.calibration import calibrate_cv

    rng = np.random.RandomState(0)
    X = rng.randn(13, 2)
    y = np.array([0] * 6 + [1] * 6 + [2])
    clf = LaplaceClassifier(hidden_layer_sizes=(2,), max_epochs=2, random_state=0)
    with pytest.warns(UserWarning):
        folds = list(StratifiedKFold(3).split(X, y))
    fold = next(index for index, (_, test) in enumerate(folds) if 12 in test)
    with pytest.warns(UserWarning), pytest.raises(ValueError, match=rf"rows of fold {fold} hold class\(es\) \[2\] "):
        calibrate_cv(clf, X, y, param="cov_scale", grid=[1.0, 2.0], cv=3)
