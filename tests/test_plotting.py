"""Displays: they render, and what they draw is exactly what the estimator predicts."""

import sys
import warnings

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_array_equal
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import BayesianRidge, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_quinn import LaplaceRegressor, MCMCRegressor
from sklearn_quinn.mcmc import split_rhat
from sklearn_quinn.metrics import (
    coverage_curve,
    expected_calibration_error,
    reliability_bins,
)
from sklearn_quinn.plotting import (
    PredictiveBandDisplay,
    RegressionCalibrationDisplay,
    ReliabilityDisplay,
    TraceDisplay,
)

from .stand_ins import GaussianFromColumns, ProbabilitiesAsInputs

matplotlib.use("Agg")  # draw to files only, whatever the machine


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def wave():
    rng = np.random.RandomState(0)
    X = rng.uniform(-3, 3, size=(30, 1))
    y = np.sin(X[:, 0]) + 0.1 * rng.randn(30)
    return X, y


def small_laplace():
    return LaplaceRegressor(hidden_layer_sizes=(8,), lr=0.01, max_epochs=30, random_state=0)


@pytest.fixture(scope="module")
def regressor(wave):
    return small_laplace().fit(*wave)


@pytest.fixture(scope="module")
def classification():
    X, y = make_classification(
        n_samples=150, n_features=4, n_informative=3, n_redundant=0, n_classes=3, random_state=0
    )
    y = np.array(["c", "a", "b"])[y]  # classes_ order differs from the encoding
    return LogisticRegression().fit(X, y), X, y


class ChainsHolder:
    """Stands in for a fitted MCMC estimator: only the ``chains_`` contract."""

    def __init__(self, chains):
        self.chains_ = chains


def render(display, tmp_path, name):
    path = tmp_path / f"{name}.png"
    display.figure_.savefig(path)
    assert path.stat().st_size > 0


def test_band_from_estimator_draws_the_predictive_on_the_grid(regressor, wave, tmp_path):
    X, y = wave
    display = PredictiveBandDisplay.from_estimator(regressor, X, y, n_draws=3, random_state=1)
    grid = np.linspace(X.min(), X.max(), 200)
    y_pred, y_std = regressor.predict(grid[:, None], return_std=True)
    assert_array_equal(display.x, grid)
    assert_array_equal(display.y_pred, y_pred)
    assert_array_equal(display.y_std, y_std)
    assert_array_equal(display.line_.get_xdata(), grid)
    assert_array_equal(display.line_.get_ydata(), y_pred)
    band = display.band_.get_paths()[0].vertices[:, 1]
    assert band.min() == pytest.approx((y_pred - 2 * y_std).min())
    assert band.max() == pytest.approx((y_pred + 2 * y_std).max())
    epistemic_std = regressor.predict_uncertainty(grid[:, None]).epistemic_std
    assert_array_equal(display.y_epistemic_std, epistemic_std)
    inner = display.epistemic_band_.get_paths()[0].vertices[:, 1]
    assert inner.min() == pytest.approx((y_pred - 2 * epistemic_std).min())
    assert inner.max() == pytest.approx((y_pred + 2 * epistemic_std).max())
    y_samples = regressor.sample_y(grid[:, None], 3, random_state=1)
    assert_array_equal(display.y_samples, y_samples)
    assert len(display.draw_lines_) == 3
    for line, draw in zip(display.draw_lines_, y_samples.T):
        assert_array_equal(line.get_ydata(), draw)
    assert_array_equal(display.scatter_.get_offsets(), np.column_stack([X[:, 0], y]))
    assert display.ax_ is display.line_.axes and display.figure_ is display.ax_.figure
    render(display, tmp_path, "band")


def test_band_of_a_pipeline_reaches_its_last_steps_split_and_draws(regressor, wave):
    """A Pipeline has no predict_uncertainty or sample_y; its last step's, on X through the steps
    before it, give the band's two parts and its draws (the split band was silently left out)."""
    pipeline = make_pipeline(StandardScaler(), clone(regressor)).fit(*wave)
    display = PredictiveBandDisplay.from_estimator(pipeline, wave[0], n_draws=2, random_state=1)
    grid = pipeline[0].transform(display.x[:, None])
    assert_array_equal(display.y_epistemic_std, pipeline[-1].predict_uncertainty(grid).epistemic_std)
    assert_array_equal(display.y_samples, pipeline[-1].sample_y(grid, 2, random_state=1))
    nested = make_pipeline(StandardScaler(), make_pipeline(StandardScaler(), clone(regressor))).fit(*wave)
    assert PredictiveBandDisplay.from_estimator(nested, wave[0], n_draws=1).y_epistemic_std is not None


def test_band_defaults_to_no_draws_and_no_data(regressor, wave):
    display = PredictiveBandDisplay.from_estimator(regressor, wave[0])
    assert display.y_samples is None and display.draw_lines_ == []
    assert display.scatter_ is None


def test_band_without_the_split_draws_the_total_only(regressor, wave):
    display = PredictiveBandDisplay.from_estimator(regressor, wave[0], split=False)
    assert display.y_epistemic_std is None and display.epistemic_band_ is None


def test_band_of_an_estimator_without_predict_uncertainty(wave):
    estimator = BayesianRidge().fit(*wave)
    display = PredictiveBandDisplay.from_estimator(estimator, wave[0])
    y_pred, y_std = estimator.predict(display.x[:, None], return_std=True)
    assert_array_equal(display.y_std, y_std)
    assert display.epistemic_band_ is None


def test_band_sorts_a_given_grid(regressor, wave):
    display = PredictiveBandDisplay.from_estimator(regressor, wave[0], grid=[1.0, -2.0, 0.5])
    assert_array_equal(display.x, [-2.0, 0.5, 1.0])
    assert_array_equal(display.y_pred, regressor.predict([[-2.0], [0.5], [1.0]]))


def test_band_keeps_a_dataframe_column_name(wave):
    X = pd.DataFrame(wave[0], columns=["dose"])
    estimator = small_laplace().fit(X, wave[1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "X does not have valid feature names"
        display = PredictiveBandDisplay.from_estimator(estimator, X, n_draws=1)
    assert_array_equal(display.y_pred, estimator.predict(pd.DataFrame({"dose": display.x})))


def test_band_from_predictions_sorts_every_array_along_x():
    x = np.array([2.0, 0.0, 1.0])
    y_samples = np.array([[20.0, 21.0], [0.0, 1.0], [10.0, 11.0]])
    display = PredictiveBandDisplay.from_predictions(
        x, 10 * x, x + 1, y_samples, y_epistemic_std=x / 2
    )
    assert_array_equal(display.x, [0.0, 1.0, 2.0])
    assert_array_equal(display.y_pred, [0.0, 10.0, 20.0])
    assert_array_equal(display.y_std, [1.0, 2.0, 3.0])
    assert_array_equal(display.y_epistemic_std, [0.0, 0.5, 1.0])
    assert_array_equal(display.y_samples, y_samples[[1, 2, 0]])


@pytest.mark.parametrize(
    "X, kwargs, message",
    [
        (np.zeros((5, 2)), {}, "exactly one column"),
        (np.zeros(5), {}, "exactly one column"),
        (np.zeros((5, 1)), {"n_draws": -1}, "n_draws"),
        (np.zeros((5, 1)), {"grid": np.zeros((3, 2))}, "grid must be one-dimensional"),
    ],
)
def test_band_from_estimator_bad_input(regressor, X, kwargs, message):
    with pytest.raises(ValueError, match=message):
        PredictiveBandDisplay.from_estimator(regressor, X, **kwargs)


def test_bands_on_one_axes_are_told_apart(regressor, wave):
    """A second band on the same Axes takes the Axes' next colour and its legend entries carry its
    name, and the user's axis labels stay (the second drew in the first's colour, unnamed, and
    wrote 'x' and 'y' over the labels)."""
    X, y = wave
    fig, ax = plt.subplots()
    ax.set(xlabel="dose", ylabel="response")
    first = PredictiveBandDisplay.from_estimator(regressor, X, y, name="laplace", ax=ax)
    second = PredictiveBandDisplay.from_estimator(BayesianRidge().fit(X, y), X, name="ridge", ax=ax)
    assert first.line_.get_color() != second.line_.get_color()
    assert tuple(second.band_.get_facecolor()[0][:3]) == matplotlib.colors.to_rgb(second.line_.get_color())
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert "laplace: predictive mean" in legend and "ridge: predictive mean" in legend
    assert "ridge: mean ± 2 std" in legend and "laplace: data" in legend
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("dose", "response")
    plt.close(fig)


def test_band_refuses_a_classifier_and_several_targets(wave):
    """Named as such: they failed inside predict (return_std) or on a from_predictions argument
    the user never passed."""
    X, y = wave
    classifier = LogisticRegression().fit(X, y > 0)
    with pytest.raises(ValueError, match="LogisticRegression is a classifier"):
        PredictiveBandDisplay.from_estimator(classifier, X)
    two_targets = LaplaceRegressor(hidden_layer_sizes=(4,), max_epochs=5, random_state=0).fit(X, np.c_[y, -y])
    with pytest.raises(ValueError, match="predicts 2 targets"):
        PredictiveBandDisplay.from_estimator(two_targets, X)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"y_samples": np.zeros((4, 2))}, "y_samples must have shape"),
        ({"x_data": np.zeros(3)}, "together"),
        ({"y_pred": np.zeros((3, 2))}, "y_pred must be one-dimensional"),
        ({"y_epistemic_std": np.zeros(4)}, "inconsistent numbers of samples"),
        ({"y_epistemic_std": np.full(3, 1.5)}, "must not exceed y_std"),
        ({"y_std": np.array([1.0, -1.0, 1.0])}, "y_std must be non-negative"),
        ({"y_std": np.array([1.0, np.nan, 1.0])}, "y_std must be non-negative"),
    ],
)
def test_band_from_predictions_bad_input(kwargs, message):
    arguments = {"x": np.arange(3.0), "y_pred": np.zeros(3), "y_std": np.ones(3), **kwargs}
    with pytest.raises(ValueError, match=message):
        PredictiveBandDisplay.from_predictions(**arguments)


def test_band_takes_an_epistemic_std_equal_to_the_total_within_rounding():
    """Without observation noise the epistemic std is the total: equal, or above it by the rounding of
    the square root of a sum (a relative 1e-12 here), it is accepted, and the two bands coincide."""
    x = np.arange(3.0)
    y_std = np.array([0.5, 1.0, 2.0])
    display = PredictiveBandDisplay.from_predictions(x, x, y_std, y_epistemic_std=y_std * (1 + 1e-12))
    for band in (display.band_, display.epistemic_band_):
        vertices = band.get_paths()[0].vertices[:, 1]
        assert vertices.min() == pytest.approx(-2.0) and vertices.max() == pytest.approx(6.0)
    display = PredictiveBandDisplay.from_predictions(x, x, y_std, y_epistemic_std=y_std)
    assert_array_equal(display.y_epistemic_std, y_std)


def test_band_legend_names_each_part_and_the_split_band_takes_the_mean_colour():
    """Every part of the band has its legend entry (the draws once, on their first line), and on
    Axes that already show a band, the second's epistemic band is filled in its own mean's colour."""
    x = np.array([0.0, 1.0, 2.0])
    first = PredictiveBandDisplay.from_predictions(
        x, x, np.ones(3), [[0.0, 1.0], [1.0, 2.0], [2.0, 3.0]], [0.5], [0.7], y_epistemic_std=np.full(3, 0.5),
        name="nn",
    )
    legend = [text.get_text() for text in first.ax_.get_legend().get_texts()]
    assert legend == ["nn: predictive mean", "nn: mean ± 2 total std", "nn: mean ± 2 epistemic std",
                      "nn: predictive draws", "nn: data"]
    assert [line.get_label().startswith("_") for line in first.draw_lines_] == [False, True]
    second = PredictiveBandDisplay.from_predictions(x, -x, np.ones(3), y_epistemic_std=np.full(3, 0.5), ax=first.ax_)
    colour = matplotlib.colors.to_rgb(second.line_.get_color())
    assert colour != matplotlib.colors.to_rgb(first.line_.get_color())
    assert tuple(second.epistemic_band_.get_facecolor()[0][:3]) == colour


def test_band_replotted_under_a_new_name_takes_that_name():
    display = PredictiveBandDisplay.from_predictions([0.0, 1.0], [0.0, 1.0], [1.0, 1.0], name="old")
    display.plot(name="new")
    legend = [text.get_text() for text in display.ax_.get_legend().get_texts()]
    assert legend == ["new: predictive mean", "new: mean ± 2 std"]


def test_band_with_one_draw_draws_one_line(regressor, wave):
    """n_draws=1 is one draw of y, not none."""
    display = PredictiveBandDisplay.from_estimator(regressor, wave[0], n_draws=1, random_state=2)
    assert display.y_samples.shape == (200, 1) and len(display.draw_lines_) == 1
    assert_array_equal(display.draw_lines_[0].get_ydata(), display.y_samples[:, 0])


def test_band_compares_the_epistemic_std_with_the_total_at_the_same_point():
    """Unsorted x: each epistemic std is checked against its own point's total, before or after the
    sort alike; equal to the total at every point, it is accepted and both bands are the same
    (the check against the sorted totals refused it: 2 > 1 at x=1)."""
    x = np.array([1.0, 0.0])
    y_std = np.array([2.0, 1.0])
    display = PredictiveBandDisplay.from_predictions(x, np.zeros(2), y_std, y_epistemic_std=y_std.copy())
    assert_array_equal(display.y_epistemic_std, [1.0, 2.0])
    # fill_between's path: the lower edge along x, then the upper edge back.
    for band in (display.band_, display.epistemic_band_):
        vertices = band.get_paths()[0].vertices
        assert {tuple(v) for v in vertices} >= {(0.0, -2.0), (1.0, -4.0), (0.0, 2.0), (1.0, 4.0)}


def test_regression_calibration_from_estimator_is_the_coverage_curve(regressor, wave, tmp_path):
    X, y = wave
    display = RegressionCalibrationDisplay.from_estimator(regressor, X, y)
    levels, observed = coverage_curve(y, *regressor.predict(X, return_std=True))
    assert_array_equal(display.levels, levels)
    assert_array_equal(display.observed, observed)
    assert_array_equal(display.line_.get_xdata(), levels)
    assert_array_equal(display.line_.get_ydata(), observed)
    render(display, tmp_path, "coverage")


def test_regression_calibration_from_predictions_takes_levels():
    y_true = np.array([0.0, 0.5, 3.0])
    display = RegressionCalibrationDisplay.from_predictions(
        y_true, np.zeros(3), np.ones(3), levels=[0.2, 0.9]
    )
    assert_array_equal(display.levels, [0.2, 0.9])
    assert_array_equal(display.observed, [1 / 3, 2 / 3])


def test_regression_calibration_from_estimator_passes_levels_and_name():
    """Targets 0, 0.5 and 3 under N(0, 1): the central 20% interval is |y| <= 0.2533 (one in three),
    the 90% one |y| <= 1.6449 (two in three)."""
    y_true = np.array([0.0, 0.5, 3.0])
    standard_normal = np.c_[np.zeros(3), np.ones(3)]
    display = RegressionCalibrationDisplay.from_estimator(
        GaussianFromColumns(), standard_normal, y_true, levels=[0.2, 0.9], name="fixed"
    )
    assert_array_equal(display.line_.get_xydata(), [[0.2, 1 / 3], [0.9, 2 / 3]])
    assert [text.get_text() for text in display.ax_.get_legend().get_texts()] == ["perfectly calibrated", "fixed"]


def test_calibration_displays_label_their_axes_and_default_curve_names():
    coverage = RegressionCalibrationDisplay.from_predictions([0.0], [0.0], [1.0])
    assert coverage.ax_.get_xlabel() == "expected coverage of the central interval"
    assert coverage.ax_.get_ylabel() == "observed coverage"
    assert coverage.line_.get_label() == "observed"
    coverage.plot(name="renamed")
    assert coverage.ax_.get_lines()[-1].get_label() == "renamed"
    reliability = ReliabilityDisplay.from_predictions([0, 1], [[0.9, 0.1], [0.2, 0.8]], name="first")
    assert reliability.ax_.get_xlabel() == "confidence (top-class probability)"
    assert reliability.ax_.get_ylabel() == "accuracy"
    reliability.plot(name="second")
    assert reliability.line_.get_label().startswith("second (ECE")


def test_reliability_from_estimator_is_the_binned_accuracy(classification, tmp_path):
    classifier, X, y = classification
    display = ReliabilityDisplay.from_estimator(classifier, X, y, n_bins=10)
    y_proba = classifier.predict_proba(X)
    confidence, accuracy, counts = reliability_bins(y, y_proba, 10, labels=classifier.classes_)
    assert_array_equal(display.confidence, confidence)
    assert_array_equal(display.accuracy, accuracy)
    assert_array_equal(display.counts, counts)
    ece = expected_calibration_error(y, y_proba, 10, labels=classifier.classes_)
    assert display.ece == ece
    filled = counts > 0
    assert_array_equal(display.line_.get_xdata(), confidence[filled])
    assert_array_equal(display.line_.get_ydata(), accuracy[filled])
    legend = [text.get_text() for text in display.ax_.get_legend().get_texts()]
    assert f"LogisticRegression (ECE = {ece:.3f})" in legend
    render(display, tmp_path, "reliability")


def test_curves_on_one_axes_are_told_apart_by_name(regressor, wave, classification):
    """As scikit-learn's Displays: the legend names each curve (the estimator's class by default, a
    Pipeline's last step's, or ``name``), and the diagonal is drawn once (it was repeated, and every
    curve was 'observed')."""
    X, y = wave
    ridge = make_pipeline(StandardScaler(), BayesianRidge()).fit(X, y)
    first = RegressionCalibrationDisplay.from_estimator(ridge, X, y)
    RegressionCalibrationDisplay.from_estimator(regressor, X, y, ax=first.ax_)
    RegressionCalibrationDisplay.from_predictions(y, *regressor.predict(X, return_std=True), name="mine", ax=first.ax_)
    legend = [text.get_text() for text in first.ax_.get_legend().get_texts()]
    assert legend == ["perfectly calibrated", "BayesianRidge", "LaplaceRegressor", "mine"]
    classifier, X, y = classification
    display = ReliabilityDisplay.from_estimator(classifier, X, y, name="logistic")
    ReliabilityDisplay.from_predictions(y, classifier.predict_proba(X), labels=classifier.classes_, ax=display.ax_)
    legend = [text.get_text() for text in display.ax_.get_legend().get_texts()]
    assert legend[0] == "perfectly calibrated" and legend[1].startswith("logistic (ECE")
    assert legend[2].startswith("classifier (ECE") and len(legend) == 3


def test_reliability_from_predictions_uses_labels():
    y_proba = np.array([[0.9, 0.1], [0.2, 0.8]])
    display = ReliabilityDisplay.from_predictions(["b", "a"], y_proba, n_bins=2, labels=["b", "a"])
    assert display.ece == pytest.approx(0.15)
    assert_array_equal(display.counts, [0, 2])


def test_reliability_from_estimator_on_rows_without_one_class_bins_by_the_estimators_classes():
    """A held-out set may lack a class (here 'a'): the columns are still the estimator's classes_, not
    the labels found in y. By hand, with 5 bins of width 0.2: confidences 0.65 (b, right), 0.55 (c,
    right), 0.45 (b, wrong: c) and 0.95 (c, wrong: b) fill bins 2 (0.55, 0.45), 3 and 4."""
    y = np.array(["b", "c", "c", "b"])
    proba = np.array([[0.10, 0.65, 0.25], [0.15, 0.30, 0.55], [0.30, 0.45, 0.25], [0.02, 0.03, 0.95]])
    display = ReliabilityDisplay.from_estimator(ProbabilitiesAsInputs(("a", "b", "c")), proba, y, n_bins=5)
    assert_array_equal(display.counts, [0, 0, 2, 1, 1])
    np.testing.assert_allclose(display.line_.get_xydata(), [[0.5, 0.5], [0.65, 1.0], [0.95, 0.0]], rtol=1e-12)
    # ECE: (2 |0.5 - 0.5| + |1 - 0.65| + |0 - 0.95|) / 4
    assert display.ece == pytest.approx(1.3 / 4, rel=1e-12)


def test_reliability_from_predictions_scores_accuracy_by_the_given_labels():
    """Columns labelled b, a: both rows are right (with the sorted labels a, b both were wrong)."""
    y_proba = np.array([[0.9, 0.1], [0.2, 0.8]])
    display = ReliabilityDisplay.from_predictions(["b", "a"], y_proba, n_bins=2, labels=["b", "a"])
    assert_array_equal(display.accuracy, [np.nan, 1.0])
    np.testing.assert_allclose(display.line_.get_xydata(), [[0.85, 1.0]], rtol=1e-12)


def test_trace_from_samples_draws_every_chain(tmp_path):
    samples = np.random.default_rng(0).normal(size=(3, 50, 6))
    samples[0, :, 1] += 2.0  # one chain elsewhere: a large R-hat in the title
    display = TraceDisplay.from_samples(samples)
    assert_array_equal(display.params, [0, 1, 2, 3])
    assert_array_equal(display.chains, samples[:, :, :4])
    assert_array_equal(display.rhat, split_rhat(samples)[:4])
    assert display.lines_.shape == (4, 3) and display.axes_.shape == (4,)
    for panel, param in enumerate(display.params):
        for chain in range(3):
            assert_array_equal(display.lines_[panel, chain].get_ydata(), samples[chain, :, param])
        title = display.axes_[panel].get_title()
        assert f"parameter {param}" in title and f"{display.rhat[panel]:.3f}" in title
    assert display.rhat[1] > 1.1
    render(display, tmp_path, "trace")


def test_trace_from_estimator_reads_chains_and_selects_params(tmp_path):
    chains = np.random.default_rng(1).normal(size=(2, 40, 7))
    display = TraceDisplay.from_estimator(ChainsHolder(chains), params=[5, 2])
    assert_array_equal(display.chains, chains[:, :, [5, 2]])
    assert_array_equal(display.lines_[0, 1].get_ydata(), chains[1, :, 5])
    assert display.axes_[1].get_title().startswith("parameter 2:")
    render(display, tmp_path, "trace_estimator")


def test_trace_shows_all_params_when_fewer_than_four():
    display = TraceDisplay.from_samples(np.random.default_rng(2).normal(size=(2, 20, 2)))
    assert_array_equal(display.params, [0, 1])


@pytest.mark.parametrize("source", ["samples", "estimator"])
def test_trace_draws_on_given_axes_one_per_parameter_with_the_draws_labelled_below(source):
    _, axes = plt.subplots(2, 1)
    chains = np.random.default_rng(6).normal(size=(2, 20, 5))
    make = TraceDisplay.from_samples if source == "samples" else TraceDisplay.from_estimator
    display = make(chains if source == "samples" else ChainsHolder(chains), [0, 4], ax=axes)
    assert list(display.axes_) == list(axes)
    assert (axes[0].get_xlabel(), axes[1].get_xlabel()) == ("", "draw")
    # One Axes too few or too many (which would leave an empty panel) is refused.
    for n_axes in (1, 3):
        _, wrong = plt.subplots(n_axes, 1)
        with pytest.raises(ValueError, match="one Axes per selected parameter"):
            make(chains if source == "samples" else ChainsHolder(chains), [0, 4], ax=np.atleast_1d(wrong))


def test_trace_titles_give_each_selected_parameters_own_rhat():
    """Parameters 5 and 2 shown in that order: 5's chains sit 3 apart (R-hat far above 1), 2's mix,
    as do 0 and 1 (the R-hat of the first columns was written under the selected ones)."""
    chains = np.random.default_rng(4).normal(size=(2, 40, 6))
    chains[1, :, 5] += 3.0
    display = TraceDisplay.from_estimator(ChainsHolder(chains), params=[5, 2])
    assert display.rhat[0] > 1.5 and display.rhat[1] < 1.1
    assert_array_equal(display.rhat, split_rhat(chains[:, :, [5, 2]]))
    assert display.axes_[0].get_title() == f"parameter 5: split R-hat = {display.rhat[0]:.3f}"


def test_trace_takes_a_single_parameter_index():
    samples = np.random.default_rng(5).normal(size=(2, 20, 5))
    display = TraceDisplay.from_samples(samples, 3)
    assert_array_equal(display.params, [3])
    assert display.lines_.shape == (1, 2)
    assert_array_equal(display.lines_[0, 1].get_ydata(), samples[1, :, 3])


@pytest.mark.parametrize(
    "samples, params, message",
    [
        (np.zeros((2, 20)), None, r"shape \(n_chains, n_draws, n_params\)"),
        (np.zeros((2, 20, 3)), [3], "indices"),
        (np.zeros((2, 20, 3)), [-1], "indices"),
        (np.zeros((2, 20, 3)), [0.5], "indices"),
        (np.zeros((2, 20, 3)), [], "indices"),
    ],
)
def test_trace_bad_input(samples, params, message):
    with pytest.raises(ValueError, match=message):
        TraceDisplay.from_samples(samples, params)


@pytest.mark.parametrize("fitted", [False, True])
def test_trace_from_estimator_without_chains(fitted):
    """Not an MCMC estimator, fitted or not: it has no chains to draw."""
    estimator = LaplaceRegressor(hidden_layer_sizes=(), max_epochs=5)
    if fitted:
        estimator.fit(np.arange(8.0).reshape(-1, 1), np.arange(8.0))
    for holder in (object(), estimator):
        with pytest.raises(ValueError, match="chains_"):
            TraceDisplay.from_estimator(holder)


def test_trace_from_unfitted_estimator():
    with pytest.raises(NotFittedError):
        TraceDisplay.from_estimator(MCMCRegressor())


def test_trace_from_pipeline_reads_its_last_step():
    chains = np.random.default_rng(0).normal(size=(2, 10, 3))
    inner = make_pipeline(StandardScaler(), ChainsHolder(chains))
    display = TraceDisplay.from_estimator(make_pipeline(StandardScaler(), inner), params=[1])
    assert_array_equal(display.chains, chains[:, :, [1]])
    plt.close(display.figure_)


@pytest.mark.parametrize(
    "make_display",
    [
        lambda: PredictiveBandDisplay.from_predictions([0.0, 1.0], [0.0, 1.0], [1.0, 1.0]),
        lambda: RegressionCalibrationDisplay.from_predictions([0.0], [0.0], [1.0]),
        lambda: ReliabilityDisplay.from_predictions([0, 1], [[0.9, 0.1], [0.2, 0.8]]),
        lambda: TraceDisplay.from_samples(np.zeros((2, 10, 1))),
        lambda: TraceDisplay.from_estimator(ChainsHolder(np.zeros((2, 10, 1)))),
        lambda: ReliabilityDisplay(
            confidence=np.ones(1), accuracy=np.ones(1), counts=np.ones(1), ece=0.0
        ).plot(),
    ],
)
def test_missing_matplotlib_says_how_to_install_it(monkeypatch, make_display):
    # None in sys.modules makes `import matplotlib.pyplot` raise ImportError.
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r"pip install matplotlib.*sklearn-quinn\[plot\]"):
        make_display()
