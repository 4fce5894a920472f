"""Pickled models move between machines: one fitted on a GPU loads and predicts on a CPU.

No GPU is needed: while pickling, a tagger ahead of torch's own (in its
storage-location registry) labels every CPU storage 'cuda:0' and the
estimator records a CUDA device, so the pickle is what a GPU machine writes,
byte for byte in its device labels. Loaded plainly on a machine without CUDA,
such a pickle fails (the first test shows it); the estimators load it on the CPU.
"""

import importlib.metadata
import io
import json
import pickle
import re

import numpy as np
import pytest
import torch
from numpy.testing import assert_array_equal

import sklearn_quinn
from sklearn_quinn import (
    DeepEnsembleRegressor,
    LaplaceClassifier,
    LaplaceRegressor,
    MCMCRegressor,
    SMCRegressor,
)
from sklearn_quinn._persistence import _VERSION, device_available, resolve_device
from sklearn_quinn.calibration import calibrate
from sklearn_quinn.exceptions import InconsistentVersionWarning

needs_no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="the machine has CUDA")


@pytest.fixture
def as_if_saved_on_cuda(monkeypatch):
    """Storages saved while active are tagged 'cuda:0', as on a GPU machine."""

    def tag_as_cuda(storage):
        return "cuda:0" if storage.device.type == "cpu" else None

    registry = torch.serialization._package_registry
    monkeypatch.setattr(torch.serialization, "_package_registry", [(0, tag_as_cuda, lambda *_: None), *registry])
    yield
    monkeypatch.setattr(torch.serialization, "_package_registry", registry)


def gpu_pickle(estimator, monkeypatch):
    """``estimator`` pickled as a GPU machine would pickle it."""
    saved = estimator._device
    estimator._device = torch.device("cuda:0")
    if hasattr(getattr(estimator, "net_", None), "device"):  # a skorch net, which has its own device
        monkeypatch.setattr(estimator.net_, "device", "cuda")
    try:
        return pickle.dumps(estimator)
    finally:
        estimator._device = saved


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    X = rng.randn(40, 3)
    return X, X @ [1.0, -0.5, 0.2] + 0.1 * rng.randn(40)


@needs_no_cuda
def test_a_plain_torch_load_of_a_gpu_pickle_fails(as_if_saved_on_cuda):
    blob = io.BytesIO()
    torch.save(torch.ones(2), blob)
    with pytest.raises(RuntimeError, match="CUDA"):
        torch.load(io.BytesIO(blob.getvalue()))


@needs_no_cuda
@pytest.mark.parametrize(
    "estimator",
    [
        LaplaceRegressor(hidden_layer_sizes=(8,), max_epochs=20, random_state=0),
        DeepEnsembleRegressor(hidden_layer_sizes=(8,), n_estimators=2, max_epochs=20, random_state=0),
        MCMCRegressor(hidden_layer_sizes=(8,), max_epochs=20, n_chains=2, n_burnin=5, n_samples=5, random_state=0),
        SMCRegressor(hidden_layer_sizes=(4,), n_particles=16, n_mcmc_steps=1, n_leapfrog=5, random_state=0),
    ],
    ids=lambda estimator: type(estimator).__name__,
)
def test_a_model_fitted_on_a_gpu_predicts_the_same_on_the_cpu(estimator, data, as_if_saved_on_cuda, monkeypatch):
    X, y = data
    estimator.fit(X, y)
    mean, std = estimator.predict(X, return_std=True)
    blob = gpu_pickle(estimator, monkeypatch)
    with pytest.warns(UserWarning, match="fitted on cuda:0, which this machine does not have"):
        loaded = pickle.loads(blob)
    assert loaded._device == torch.device("cpu")
    loaded_mean, loaded_std = loaded.predict(X, return_std=True)
    assert_array_equal(loaded_mean, mean)
    assert_array_equal(loaded_std, std)
    assert_array_equal(loaded.sample_y(X[:3], 4, random_state=0), estimator.sample_y(X[:3], 4, random_state=0))


@needs_no_cuda
def test_a_classifier_fitted_on_a_gpu_predicts_the_same_on_the_cpu(data, as_if_saved_on_cuda, monkeypatch):
    X, y = data
    classifier = LaplaceClassifier(hidden_layer_sizes=(8,), max_epochs=20, random_state=0).fit(X, y > 0)
    blob = gpu_pickle(classifier, monkeypatch)
    with pytest.warns(UserWarning, match="loaded on the CPU"):
        loaded = pickle.loads(blob)
    assert_array_equal(loaded.predict_proba(X), classifier.predict_proba(X))


def test_a_cpu_pickle_round_trips_without_a_warning(data, recwarn):
    estimator = LaplaceRegressor(hidden_layer_sizes=(8,), max_epochs=20, random_state=0).fit(*data)
    loaded = pickle.loads(pickle.dumps(estimator))
    assert not [w for w in recwarn if "fitted on" in str(w.message) or w.category is InconsistentVersionWarning]
    assert_array_equal(loaded.predict(data[0]), estimator.predict(data[0]))


@pytest.mark.parametrize("fitted", [True, False], ids=["fitted", "unfitted"])
def test_another_versions_pickle_warns_and_loads(data, fitted, monkeypatch):
    """A pickle names the version that wrote it; another version warns, naming both, and loads it."""
    estimator = LaplaceRegressor(hidden_layer_sizes=(8,), max_epochs=20, random_state=0)
    if fitted:
        estimator.fit(*data)
    current = sklearn_quinn.__version__
    monkeypatch.setattr(sklearn_quinn, "__version__", "0.0.1")
    blob = pickle.dumps(estimator)
    monkeypatch.setattr(sklearn_quinn, "__version__", current)
    expected = re.escape(f"version 0.0.1 and is unpickled by version {current}")
    with pytest.warns(InconsistentVersionWarning, match=expected) as caught:
        loaded = pickle.loads(blob)
    warning = caught[0].message
    assert (warning.estimator_name, warning.original_version, warning.current_version) == (
        "LaplaceRegressor", "0.0.1", current)
    assert caught[0].filename == __file__  # the line that unpickled it
    assert loaded.get_params() == estimator.get_params()
    if fitted:
        assert_array_equal(loaded.predict(data[0]), estimator.predict(data[0]))


def test_the_pickles_version_is_the_installed_distributions():
    """The version a pickle names is the one pip installed: pyproject.toml reads ``__version__``."""
    assert importlib.metadata.version("sklearn-quinn") == sklearn_quinn.__version__


def test_a_pickle_that_names_no_version_warns(data):
    """A pickle written before pickles named their version: its version is unknown."""
    estimator = LaplaceRegressor(hidden_layer_sizes=(8,), max_epochs=20, random_state=0).fit(*data)
    state = estimator.__getstate__()
    del state[_VERSION]
    loaded = LaplaceRegressor.__new__(LaplaceRegressor)
    with pytest.warns(InconsistentVersionWarning, match="an unnamed version"):
        loaded.__setstate__(state)
    assert_array_equal(loaded.predict(data[0]), estimator.predict(data[0]))


def test_an_unfitted_estimator_pickles_its_parameters_only():
    estimator = LaplaceRegressor(hidden_layer_sizes=(3,), device="auto")
    assert "_torch_state" not in estimator.__getstate__()
    assert pickle.loads(pickle.dumps(estimator)).get_params() == estimator.get_params()


def test_auto_device_is_cuda_where_there_is_one():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    fitted = LaplaceRegressor(hidden_layer_sizes=(3,), max_epochs=2, device="auto").fit([[0.0], [1.0]], [0.0, 1.0])
    assert fitted._device.type == expected


@needs_no_cuda
@pytest.mark.parametrize(
    "device, message",
    [("tpu:9", "is not a torch device"), ("cuda", "has no such device"), ("cuda:3", "has no such device"),
     ("meta", "without values")],
)
def test_a_device_this_machine_lacks_is_refused(device, message):
    """Before anything of an earlier fit goes: a refit on such a device kept nothing of the fit before
    ('meta' failed deep inside the training)."""
    X, y = [[0.0], [1.0]], [0.0, 1.0]
    regressor = LaplaceRegressor(max_epochs=2).fit(X, y)
    expected = regressor.predict(X, return_std=True)
    with pytest.raises(ValueError, match=message):
        regressor.set_params(device=device).fit(X, y)
    np.testing.assert_array_equal(regressor.predict(X, return_std=True), expected)


def test_a_refit_refused_for_its_data_keeps_the_fits_dtype():
    """The dtype of a refit was set before its data were refused, and the fit before, in float32, then
    ran its float32 tensors in float64 (the review's catch)."""
    X, y = np.random.RandomState(0).randn(30, 2), np.arange(30.0)
    regressor = LaplaceRegressor(hidden_layer_sizes=(4,), max_epochs=5, dtype="float32").fit(X, y)
    expected = regressor.predict(X[:3], return_std=True)
    with pytest.raises(ValueError, match="NaN"):
        regressor.set_params(dtype="float64").fit(X, np.full(30, np.nan))
    np.testing.assert_array_equal(regressor.predict(X[:3], return_std=True), expected)


@needs_no_cuda
def test_device_availability():
    assert device_available(torch.device("cpu"))
    assert not device_available(torch.device("cuda:0"))
    assert device_available(torch.device("meta"))


def test_a_cuda_device_is_available_up_to_the_machines_count(monkeypatch):
    """On a machine with two CUDA devices (as torch reports them) 'cuda', 'cuda:0' and 'cuda:1' are
    there and 'cuda:2' is not: the indices run from 0 to the count less one."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert all(device_available(torch.device(name)) for name in ("cuda", "cuda:0", "cuda:1"))
    assert not device_available(torch.device("cuda:2"))


def test_a_full_laplace_pickles_one_matrix_of_its_weights_and_predicts_the_same_bits(data):
    """The full curvature and the posterior's Cholesky factor pickle as their lower triangles, and the
    curvature's last factor and its eigenvectors, caches, not at all: one ``K x K`` matrix's bytes in
    all where three were (the eigenvectors, once the evidence had taken them, doubled it). The
    loaded model predicts, re-scales and scores its evidence as the fitted one, to the bit."""
    X = np.random.RandomState(0).randn(40, 10)  # 611 weights: the matrices are most of the pickle
    y = X @ np.linspace(-1, 1, 10) + 0.1 * data[1]
    fitted = LaplaceRegressor(hidden_layer_sizes=(50,), max_epochs=20, random_state=0).fit(X, y)
    n_params = fitted.posterior_.n_params
    fitted.log_marginal_likelihood()  # takes the eigenvectors
    blob = pickle.dumps(fitted)
    assert len(blob) < 1.1 * n_params**2 * 8
    loaded = pickle.loads(blob)
    assert_array_equal(np.stack(loaded.predict(X, return_std=True)), np.stack(fitted.predict(X, return_std=True)))
    assert loaded.log_marginal_likelihood() == fitted.log_marginal_likelihood()
    grid = [0.5 * fitted.prior_precision_, 2.0 * fitted.prior_precision_]  # new factors of the curvature
    searches = [calibrate(model, X, y, param="prior_precision", grid=grid) for model in (fitted, loaded)]
    assert_array_equal(searches[1].scores, searches[0].scores)
    assert_array_equal(loaded.predict(X, return_std=True)[1], fitted.predict(X, return_std=True)[1])


def test_a_regressor_pickled_before_its_likelihood_was_kept_predicts(data):
    """A fit pickled before ``_likelihood_name`` was kept at fit has it from its parameter on
    loading (predict failed with an AttributeError, under the same package version)."""
    fitted = LaplaceRegressor(hidden_layer_sizes=(4,), max_epochs=5, random_state=0).fit(*data)
    expected = fitted.predict(data[0], return_std=True)
    del fitted._likelihood_name
    loaded = pickle.loads(pickle.dumps(fitted))
    assert_array_equal(np.stack(loaded.predict(data[0], return_std=True)), np.stack(expected))


def test_mcmc_pickles_its_draws_once(data):
    """The posterior's draws are the weights' columns of ``chains_``: the pickle holds them once, and
    the loaded model rebuilds the posterior from ``chains_``, predicting and sampling to the bit."""
    X, y = data
    fitted = MCMCRegressor(hidden_layer_sizes=(50,), max_epochs=20, n_chains=2, n_burnin=20, n_samples=200,
                           random_state=0).fit(X, y)
    blob = pickle.dumps(fitted)
    assert len(blob) < 1.3 * fitted.chains_.nbytes
    loaded = pickle.loads(blob)
    assert loaded.posterior_.samples.stride() == fitted.posterior_.samples.stride()
    assert_array_equal(np.stack(loaded.predict(X, return_std=True)), np.stack(fitted.predict(X, return_std=True)))
    assert_array_equal(loaded.sample_y(X[:3], 4, random_state=0), fitted.sample_y(X[:3], 4, random_state=0))


def test_a_module_defined_in_a_script_reaches_the_workers_and_loads_elsewhere(data):
    """A backbone class defined where it cannot be imported (a script's ``__main__``, a notebook, here a
    function's local class) or given as a lambda: the fitted estimator's state is written by value, so
    the members' joblib workers (n_jobs=2) get it, and a fresh process without the class loads it."""
    import subprocess
    import sys

    from torch import nn

    class TanhNet(nn.Module):
        def __init__(self, n_features, n_outputs):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(n_features, 4), nn.Tanh(), nn.Linear(4, n_outputs))

        def forward(self, X):
            return self.body(X)

    X, y = data
    ensemble = DeepEnsembleRegressor(module=TanhNet, n_estimators=2, n_jobs=2, max_epochs=5, random_state=0)
    serial = DeepEnsembleRegressor(module=TanhNet, n_estimators=2, max_epochs=5, random_state=0)
    assert_array_equal(ensemble.fit(X, y).predict(X), serial.fit(X, y).predict(X))
    laplace = LaplaceRegressor(module=lambda n_features, n_outputs: TanhNet(n_features, n_outputs), max_epochs=5)
    blob = pickle.dumps(laplace.fit(X, y))
    expected = laplace.predict(X[:3])
    script = f"import pickle, sys; print(pickle.loads(sys.stdin.buffer.read()).predict({X[:3].tolist()}).tolist())"
    loaded = subprocess.run([sys.executable, "-c", script], input=blob, capture_output=True, check=True)
    np.testing.assert_allclose(json.loads(loaded.stdout), expected, rtol=1e-12)
