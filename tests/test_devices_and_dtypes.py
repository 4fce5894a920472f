"""Every family on a GPU and in float32: a fit as good as the float64 one on the CPU, float64 results,
and a GPU fit that loads on a CPU-only machine.

The GPU tests need CUDA and are skipped without it (CI has none); they are run
on a GPU machine by hand. The network's initial weights are drawn on the CPU
and moved, so a deterministic training (the MAP, the evidence-driven prior,
the Laplace posterior) gives the CPU's fit to rounding; a family that draws
from a random generator on the device (the samplers, the ensembles'
perturbations, BBB's and dropout's noise) draws other numbers there, so its fit is compared by its test NLL, as every
float32 fit is (rounding in float32 moves a training's path). SMC regression
is left to the exact evidence tests, which take a ``device``
(tests/conftest.py): with few particles its fits on these rows land in one of
two modes by chance.
"""

import pickle

import numpy as np
import pytest
import scipy.sparse
import torch
from numpy.testing import assert_allclose
from sklearn.base import clone

import sklearn_quinn as sq
from sklearn_quinn.metrics import categorical_nll, gaussian_nll

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
# Away from float64 on the CPU: the fits of these settings are compared with that one.
SETTINGS = [
    pytest.param(dict(device="cuda"), marks=needs_cuda, id="cuda"),
    pytest.param(dict(dtype="float32"), id="float32"),
]

FAST = dict(hidden_layer_sizes=(16,), max_epochs=250, random_state=0)
# MC dropout's regressor trains longer: its noisy steps at 250 epochs leave a fit whose test NLL
# moves by 0.5 with random_state.
DROPOUT_FAST = dict(FAST, max_epochs=500)
# 10 leapfrog steps, not the default 40: these tests compare devices and dtypes, not trajectory lengths.
CHAINS = dict(FAST, n_chains=2, n_burnin=100, n_samples=100, n_leapfrog=10)
SMC_FAST = dict(hidden_layer_sizes=(8,), n_particles=64, random_state=0)

# Fits that draw nothing on the device: the same numbers as on the CPU, to rounding.
DETERMINISTIC = [
    sq.LaplaceRegressor(**FAST),
    sq.LaplaceRegressor(**FAST, hessian_structure="kron"),
    sq.LaplaceRegressor(**FAST, hessian_structure="lowrank"),
    # A sketch of 30 of the 81 weights' directions: the randomised eigensolver's draws matter.
    sq.LaplaceRegressor(**FAST, hessian_structure="lowrank", max_rank=20),
    sq.LaplaceRegressor(**FAST, subset_of_weights="last_layer"),
]
REGRESSORS = [
    *DETERMINISTIC,
    # Deterministic too, but its short training here amplifies rounding: on the
    # CPU, one thread against two moves its predictive std by up to 60% (at the
    # package's defaults, by 1e-9).
    sq.LaplaceRegressor(**FAST, likelihood="heteroscedastic"),
    sq.MCMCRegressor(**CHAINS),
    sq.MCMCRegressor(**CHAINS, sampler="nuts", max_tree_depth=3),
    sq.MCMCRegressor(**CHAINS, sampler="sghmc", hyperprior="empirical"),
    sq.DeepEnsembleRegressor(**FAST, n_estimators=3),
    sq.RMSRegressor(**FAST, n_estimators=3),
    sq.SWAGRegressor(**FAST),
    sq.BBBRegressor(**FAST),
    sq.MCDropoutRegressor(**DROPOUT_FAST),
]
# The classifiers but Laplace's train under a fixed prior: a classifier's evidence searches the
# prior's scale with several full-batch polishes, the one MAP training they share, which the
# Laplace classifiers take in float32 here (and the regressors their own evidence); the fixed
# prior halves the others' fits.
FIXED_PRIOR = dict(prior_std=1.0)
CLASSIFIERS = [
    sq.LaplaceClassifier(**FAST),
    sq.LaplaceClassifier(**FAST, hessian_structure="kron", predictive="laplace_bridge", cov_scale=1.0),
    sq.MCMCClassifier(**CHAINS, **FIXED_PRIOR),
    sq.DeepEnsembleClassifier(**FAST, **FIXED_PRIOR, n_estimators=3),
    sq.RMSClassifier(**FAST, **FIXED_PRIOR, n_estimators=3),
    sq.SWAGClassifier(**FAST, **FIXED_PRIOR),
    sq.BBBClassifier(**FAST, **FIXED_PRIOR),
    sq.MCDropoutClassifier(**FAST, **FIXED_PRIOR),
    sq.SMCClassifier(**SMC_FAST, **FIXED_PRIOR),
]

# How far a GPU or float32 fit's test NLL may sit from the float64 CPU fit's.
# Both start from the same initial weights and differ in their device draws
# or their rounding only, less than a change of random_state, which moves the
# CPU fits' NLL on these tables by up to 0.08 (range over random_state 0..4:
# the regressors'; the classifiers' under the fixed prior at most 0.046, the
# SMC classifier's under its learned prior 0.14).
NLL_TOLERANCE = 0.15


def name(estimator):
    """The class and the options that set it apart from its family's default, for test ids."""
    defaults = type(estimator)().get_params()
    options = [str(value) for key, value in estimator.get_params(deep=False).items()
               if key in ("hessian_structure", "subset_of_weights", "likelihood", "sampler", "prior_precision")
               and value != defaults[key]]
    return "-".join([type(estimator).__name__, *options])


def devices_in(value, depth=0):
    """The torch devices that ``value``'s tensors, modules and device attributes name, looked into recursively."""
    if isinstance(value, torch.Tensor):
        yield value.device
    elif isinstance(value, torch.device):
        yield value
    elif isinstance(value, torch.nn.Module):
        yield from (tensor.device for tensor in [*value.parameters(), *value.buffers()])
    elif depth < 4 and isinstance(value, (list, tuple, dict)):
        for item in value.values() if isinstance(value, dict) else value:
            yield from devices_in(item, depth + 1)
    elif depth < 4 and type(value).__module__.startswith(("sklearn_quinn", "skorch")):
        yield from devices_in(vars(value), depth + 1)


@pytest.fixture(scope="module")
def regression():
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(400, 3))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.3 * rng.randn(400)
    return X[:300], y[:300], X[300:], y[300:]


@pytest.fixture(scope="module")
def classification():
    rng = np.random.RandomState(0)
    X = rng.randn(400, 3)
    y = (X[:, 0] + np.sin(2 * X[:, 1]) + 0.5 * rng.randn(400) > 0).astype(int) + (X[:, 2] > 1)
    return X[:300], y[:300], X[300:], y[300:]


def fit_on(estimator, data, **params):
    X, y = data[:2]
    return clone(estimator).set_params(**params).fit(X, y)


def check_setting(fitted, setting):
    """The fit ran on the setting's device and in its dtype."""
    assert fitted._device.type == setting.get("device", "cpu")
    assert fitted._dtype == getattr(torch, setting.get("dtype", "float64"))
    assert fitted.posterior_.mean.dtype == fitted._dtype


def check_float64_arrays(*arrays):
    for array in arrays:
        assert isinstance(array, np.ndarray) and array.dtype == np.float64
        assert np.all(np.isfinite(array))


def checked_nll(fitted, data):
    """The fit's test NLL, after checking that its predictions are finite float64 arrays of the right shapes."""
    X_test, y_test = data[2:]
    if hasattr(fitted, "predict_proba"):
        proba = fitted.predict_proba(X_test)
        check_float64_arrays(proba)
        assert_allclose(proba.sum(axis=1), 1.0)
        return categorical_nll(y_test, proba, labels=fitted.classes_)
    mean, std = fitted.predict(X_test, return_std=True)
    draws = fitted.sample_y(X_test[:5], 4, random_state=0)
    check_float64_arrays(mean, std, draws)
    assert np.all(std > 0) and draws.shape == (5, 4)
    return gaussian_nll(y_test, mean, std)


@pytest.mark.slow
@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("estimator", [*REGRESSORS, *CLASSIFIERS], ids=name)
def test_a_fit_is_as_good_as_in_float64_on_the_cpu(estimator, setting, regression, classification):
    data = classification if hasattr(estimator, "predict_proba") else regression
    reference, fitted = fit_on(estimator, data), fit_on(estimator, data, **setting)
    check_setting(fitted, setting)
    nll = [checked_nll(reference, data), checked_nll(fitted, data)]
    assert abs(nll[1] - nll[0]) < NLL_TOLERANCE, nll


@needs_cuda
@pytest.mark.parametrize("estimator", DETERMINISTIC, ids=name)
def test_a_deterministic_fit_on_the_gpu_equals_the_cpu_fit(estimator, regression):
    X_test = regression[2]
    cpu, gpu = (fit_on(estimator, regression, device=device).predict(X_test, return_std=True)
                for device in ("cpu", "cuda"))
    assert_allclose(gpu[0], cpu[0], rtol=1e-6, atol=1e-8)
    assert_allclose(gpu[1], cpu[1], rtol=1e-5)


@needs_cuda
def test_hmc_compiled_on_the_gpu(regression):
    fitted = fit_on(sq.MCMCRegressor(**CHAINS, compile=True), regression, device="cuda")
    assert fitted.compiled_
    eager = fit_on(sq.MCMCRegressor(**CHAINS, compile=False), regression, device="cuda")
    nll = [checked_nll(model, regression) for model in (fitted, eager)]
    assert abs(nll[0] - nll[1]) < NLL_TOLERANCE, nll


@needs_cuda
@pytest.mark.parametrize(
    "estimator",
    [
        sq.LaplaceRegressor(**FAST),
        sq.MCMCRegressor(**CHAINS),
        sq.SMCRegressor(**SMC_FAST),
        # Predictives drawn at predict time: weight vectors, masks, Monte Carlo logits.
        sq.SWAGRegressor(**FAST),
        sq.BBBRegressor(**FAST),
        sq.MCDropoutRegressor(**FAST),
        sq.LaplaceClassifier(**FAST),
        sq.SWAGClassifier(**FAST),
    ],
    ids=name,
)
def test_a_gpu_fit_loads_and_predicts_on_a_machine_without_one(estimator, regression, classification, monkeypatch):
    """The same predictions to rounding, the sampled ones too: a prediction's
    draws come from a CPU generator whatever the model's device."""
    data = classification if hasattr(estimator, "predict_proba") else regression
    fitted = fit_on(estimator, data, device="cuda")
    X_test = data[2]

    def predict(model):
        if hasattr(model, "predict_proba"):
            return model.predict_proba(X_test)
        return np.stack([*model.predict(X_test, return_std=True), model.sample_y(X_test, 1, random_state=0)[:, 0]])

    expected = predict(fitted)
    blob = pickle.dumps(fitted)
    # Unpickle as a CPU-only machine would: torch (and so skorch) sees no CUDA.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.warns(UserWarning, match="fitted on cuda"):
        loaded = pickle.loads(blob)
    assert loaded._device == torch.device("cpu")
    assert {device.type for device in devices_in(vars(loaded))} == {"cpu"}
    assert torch.device(getattr(getattr(loaded, "net_", None), "device", "cpu")).type == "cpu"  # skorch's own
    assert_allclose(predict(loaded), expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("estimator", [*REGRESSORS, sq.SMCRegressor(**SMC_FAST), *CLASSIFIERS], ids=name)
def test_predictions_draw_from_a_cpu_generator(estimator, regression, classification, monkeypatch):
    """After the fit, no prediction draws from the fit's generator, which lives on the
    model's device and gives other numbers on a GPU: predict, predict_proba and sample_y
    draw from a seeded CPU generator, the same numbers on every device."""
    is_classifier = hasattr(estimator, "predict_proba")
    data = classification if is_classifier else regression
    fitted = fit_on(estimator, data, max_epochs=20)

    def refuse(seed):
        raise AssertionError("a prediction drew from the fit's device generator")

    monkeypatch.setattr(fitted, "_generator", refuse)
    X_test = data[2][:20]
    if is_classifier:
        fitted.predict_proba(X_test)
    else:
        fitted.predict(X_test, return_std=True)
        fitted.sample_y(X_test, 3, random_state=0)


@pytest.mark.parametrize("estimator", [
    sq.MCMCRegressor(hidden_layer_sizes=(8,), max_epochs=20, n_chains=2, n_burnin=20, n_samples=20, random_state=0),
    sq.MCMCClassifier(hidden_layer_sizes=(8,), max_epochs=20, n_chains=2, n_burnin=20, n_samples=20, random_state=0),
], ids=name)
def test_a_column_major_table_fits_as_a_row_major_one(estimator, regression, classification):
    """A pandas DataFrame's values are column-major. The layout of the same numbers changes
    neither the fit nor a prediction, to the bit, even where a sampler's chains would carry a
    rounding difference on (the regressor with two targets, a column-major ``Y`` too)."""
    is_classifier = hasattr(estimator, "predict_proba")
    X, y, X_test, _ = classification if is_classifier else regression
    if not is_classifier:
        y = np.c_[y, X[:, 2] + y]
    in_rows = clone(estimator).fit(X, y)
    in_columns = clone(estimator).fit(np.asfortranarray(X), np.asfortranarray(y) if y.ndim == 2 else y)
    predict = "predict_proba" if is_classifier else "predict"
    expected = getattr(in_rows, predict)(X_test)
    for fitted in (in_rows, in_columns):
        for X_read in (X_test, np.asfortranarray(X_test)):
            np.testing.assert_array_equal(getattr(fitted, predict)(X_read), expected)


@pytest.mark.parametrize("estimator", [
    sq.LaplaceRegressor(hidden_layer_sizes=(8,), max_epochs=20, random_state=0),
    sq.MCMCClassifier(hidden_layer_sizes=(8,), max_epochs=20, n_chains=2, n_burnin=10, n_samples=10, n_leapfrog=10,
                      random_state=0),
], ids=name)
def test_a_sparse_table_fits_as_its_dense_array(estimator, regression, classification):
    """A sparse matrix (``OneHotEncoder``'s output, and ``ColumnTransformer``'s where its
    columns are mostly zeros), in each of scipy's formats, fits and predicts as its dense
    array, to the bit."""
    is_classifier = hasattr(estimator, "predict_proba")
    X, y, X_test, _ = classification if is_classifier else regression
    zeros = np.random.RandomState(1).rand(*X.shape) < 0.6
    X = np.where(zeros, 0.0, X)
    predict = "predict_proba" if is_classifier else "predict"
    expected = getattr(clone(estimator).fit(X, y), predict)(X_test)
    for layout in ("csr", "csc", "coo"):
        fitted = clone(estimator).fit(scipy.sparse.coo_matrix(X).asformat(layout), y)
        np.testing.assert_array_equal(getattr(fitted, predict)(scipy.sparse.csr_matrix(X_test)), expected)
