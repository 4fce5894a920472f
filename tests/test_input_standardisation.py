"""``normalize_X``: every estimator standardises its input columns, so that their units do not matter."""

import warnings

import numpy as np
import pytest
import torch
from scipy.stats import norm
from sklearn.base import clone, is_classifier
from sklearn.preprocessing import StandardScaler
from torch import nn

from sklearn_quinn import LaplaceClassifier, LaplaceRegressor, MCMCRegressor
from sklearn_quinn.base import input_standardisation

from .test_common import ESTIMATORS, FAST
from .test_devices_and_dtypes import name

# Every estimator, and the Laplace grid search, which scores rows it held out of the training.
NETWORKS = [estimator for estimator in ESTIMATORS if hasattr(estimator, "normalize_X")] + [
    LaplaceRegressor(**FAST, prior_precision="gridsearch"),
    LaplaceClassifier(**FAST, prior_precision="gridsearch"),
]

#: Powers of two scale a column without rounding: its mean, its std and its standardised values
#: come out the same to the bit.
COLUMN_SCALES = 2.0 ** np.array([0, 7, 14])


def table(n=80, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-2, 2, size=(n, 3))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.2 * rng.randn(n)
    return X, y


def outputs(estimator, X_train, y, X):
    """What the fitted estimator predicts at ``X``: class probabilities, or the mean and the std."""
    estimator = clone(estimator)
    if is_classifier(estimator):
        return estimator.fit(X_train, (y > np.median(y)).astype(int)).predict_proba(X)
    return np.stack(estimator.fit(X_train, y).predict(X, return_std=True))


@pytest.mark.parametrize("estimator", NETWORKS, ids=name)
def test_the_units_of_the_columns_do_not_change_the_fit(estimator):
    """Each column rescaled by its own factor: the same predictions, to the bit. Without the
    standardisation the network's initial weights, its optimiser's steps and its prior meet the
    columns in their own units, and the fits differ."""
    X, y = table()
    X_new = table(20, seed=1)[0]
    expected = outputs(estimator, X, y, X_new)
    np.testing.assert_array_equal(outputs(estimator, X * COLUMN_SCALES, y, X_new * COLUMN_SCALES), expected)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_table_already_standardised_fits_as_without_the_standardisation(dtype):
    """A ``StandardScaler``'s output, of float64 or float32 columns, passes through unchanged: a
    pipeline fits as it did before the estimators standardised their inputs, to the bit (an MCMC
    fit, whose chains would carry a rounding difference on)."""
    X, y = table()
    X_scaled = StandardScaler().fit_transform((1e3 * X + 5e4).astype(dtype))
    settings = dict(hidden_layer_sizes=(8,), max_epochs=60, n_chains=2, n_burnin=30, n_samples=30, random_state=0)
    standardised = MCMCRegressor(**settings).fit(X_scaled, y).predict(X_scaled, return_std=True)
    as_given = MCMCRegressor(**settings, normalize_X=False).fit(X_scaled, y).predict(X_scaled, return_std=True)
    np.testing.assert_array_equal(standardised, as_given)


def test_raw_columns_in_the_thousands_fit_as_standardised_ones():
    """Columns of scales 1 to 1,000 with positive offsets, as a user's table may hold them, fitted
    without a scaler: the test NLL is that of the same columns standardised (the fits differ only
    by rounding), where reading them as given it is worse by more than half a nat."""
    rng = np.random.RandomState(0)
    Z = rng.randn(400, 4)
    y = Z @ [1.0, -1.0, 0.5, 0.0] + np.sin(2 * Z[:, 0]) + 0.5 * rng.randn(400)
    X = (Z + 3.0) * 10.0 ** np.arange(4)

    def nll(estimator, X):
        mean, std = estimator.fit(X[:300], y[:300]).predict(X[300:], return_std=True)
        return -norm.logpdf(y[300:], mean, std).mean()

    scaler = StandardScaler().fit(X[:300])
    standardised = nll(LaplaceRegressor(random_state=0), scaler.transform(X))
    assert nll(LaplaceRegressor(random_state=0), X) == pytest.approx(standardised, abs=0.01)
    assert nll(LaplaceRegressor(normalize_X=False, random_state=0), X) > standardised + 0.5


def test_a_constant_column_is_centred_not_divided_by_zero():
    """As ``StandardScaler`` does, also for a constant its mean does not hold exactly (its std is
    rounding, 1.9e-10 here)."""
    X = np.c_[np.linspace(0.0, 1.0, 5), np.full(5, 1e6), np.full(5, 100000.1), np.zeros(5)]
    mean, scale = input_standardisation(X)
    np.testing.assert_allclose(mean, [0.5, 1e6, 100000.1, 0.0])
    np.testing.assert_allclose(scale, [X[:, 0].std(), 1.0, 1.0, 1.0])


def test_normalize_X_must_be_a_boolean():
    X, y = table()
    with pytest.raises(ValueError, match="normalize_X"):
        LaplaceRegressor(normalize_X="yes").fit(X, y)


class CodedColumnNet(nn.Module):
    """A network whose first input column holds category codes, which an ``nn.Embedding`` reads."""

    def __init__(self, n_features, n_outputs, n_codes=4):
        super().__init__()
        self.embed = nn.Embedding(n_codes, 3)
        self.linear = nn.Linear(3 + n_features - 1, n_outputs)

    def forward(self, x):
        return self.linear(torch.cat([self.embed(x[..., 0].long()), x[..., 1:]], dim=-1))


def coded_table(seed=0):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 4, 120)
    X = np.column_stack([codes, rng.normal(size=(120, 2))])
    return X, np.array([0.0, 2.0, -1.0, 5.0])[codes] + X[:, 1] + 0.1 * rng.normal(size=120)


def test_a_module_reading_category_codes_is_warned_of_the_standardisation():
    """Standardised, codes 0-3 reach the embedding as floats that round to other categories and
    to negative indices; the warning comes before the error that torch then raises."""
    X, y = coded_table()
    with pytest.warns(UserWarning, match="nn.Embedding.*normalize_X=False"), pytest.raises(IndexError):
        LaplaceRegressor(module=CodedColumnNet, max_epochs=5, random_state=0).fit(X, y)


def test_a_module_reading_category_codes_fits_them_with_normalize_X_false():
    X, y = coded_table()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        regressor = LaplaceRegressor(module=CodedColumnNet, normalize_X=False, max_epochs=200, random_state=0).fit(X, y)
    assert np.sqrt(np.mean((regressor.predict(X) - y) ** 2)) < 0.2  # the codes' four levels are learned (noise 0.1)


def test_targets_of_any_magnitude_fit_as_standardised_ones():
    """Targets of 1e-16 were read as a constant (an absolute threshold, 2e-15, on their std), and the
    network trained on the raw values: R^2 of -1e24. Targets of 1e160, whose squares pass float64's
    range, had an infinite scale and predicted inf; those of 1e-170, whose squares underflow, a
    std of 0. They now fit as the unit-scale targets do."""
    rng = np.random.RandomState(0)
    X = rng.randn(60, 2)
    y = X[:, 0] + 0.3 * rng.randn(60)
    params = dict(hidden_layer_sizes=(4,), max_epochs=40, random_state=0)
    mean, std = LaplaceRegressor(**params).fit(X, y).predict(X, return_std=True)
    for scale in (1e-16, 1e160, 1e-170):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            scaled_mean, scaled_std = LaplaceRegressor(**params).fit(X, scale * y).predict(X, return_std=True)
        np.testing.assert_allclose(scaled_mean / scale, mean, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(scaled_std / scale, std, rtol=1e-6)


def test_a_constant_target_is_centred_not_divided_by_its_rounding():
    """A constant target's std is rounding of its mean's order: told apart relative to the mean. Its
    std of 2.3e-10 about 1e6 was the targets' scale, and their rounding the network's targets."""
    X = np.random.RandomState(0).randn(30, 2)
    y = np.full(30, 1e6 + 0.1)  # a std of 2.3e-10: the mean's rounding
    reg = LaplaceRegressor(hidden_layer_sizes=(4,), max_epochs=5, random_state=0).fit(X, y)
    assert reg._y_scale.tolist() == [1.0]
    np.testing.assert_allclose(reg.predict(X), y, atol=1e-3)


def test_a_column_whose_squares_overflow_is_refused_naming_it():
    """A cell of 1e200 failed later, as a kernel that is not positive definite (or a NaN in BBB's
    solver, every particle's likelihood non-finite in SMC), after NumPy's overflow warnings."""
    X = np.random.RandomState(0).randn(30, 3)
    X[4, 1] = 1e200
    with pytest.raises(ValueError, match=r"Feature column\(s\) \[1\] hold values whose squares pass float64's range"):
        LaplaceRegressor(max_epochs=5).fit(X, X[:, 0])
    X[:, 1] = 1e160 * np.sign(X[:, 0])  # a variance of inf, not NaN: StandardScaler's scale_ reads 1
    with pytest.raises(ValueError, match=r"Feature column\(s\) \[1\]"):
        LaplaceRegressor(max_epochs=5).fit(X, X[:, 0])


def test_one_training_row_is_refused_where_the_prior_or_the_noise_is_learned():
    """From one row the evidence learned intervals 1000 times BayesianRidge's at other rows, and
    Bayes by backprop intervals that missed the truth by hundreds of stds. A fixed prior and noise
    need no spread: one row fits."""
    X, y = np.array([[0.5, -1.0]]), np.array([2.0])
    with pytest.raises(ValueError, match="n_samples=1"):
        LaplaceRegressor(max_epochs=5).fit(X, y)
    with pytest.raises(ValueError, match="n_samples=1"):  # its std collapsed to the noise's
        LaplaceRegressor(max_epochs=5, prior_std=1.0, noise_std=0.5, prior_precision="marglik").fit(X, y)
    fixed = LaplaceRegressor(max_epochs=5, prior_std=1.0, noise_std=0.5, random_state=0).fit(X, y)
    assert np.isfinite(fixed.predict(np.zeros((2, 2)), return_std=True)[1]).all()
