"""LaplaceRegressor: exactness, shapes, the sklearn workflow, bad input."""

import functools
import pickle

import joblib
import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from torch import nn

from sklearn_quinn import LaplaceRegressor
from sklearn_quinn._core import curvature as curvature_module
from sklearn_quinn.metrics import neg_nll_scorer

from .exact import BayesianLinearRegression

NOISE, PRIOR_STD = 0.3, 2.0
# Full-batch L-BFGS drives the convex linear MAP to machine precision.
LBFGS = functools.partial(torch.optim.LBFGS, tolerance_grad=1e-14, tolerance_change=0, max_iter=50)


def exact_linear_regressor(X, **params):
    return LaplaceRegressor(
        module=nn.Linear(X.shape[1], 1),
        noise_std=NOISE,
        prior_std=PRIOR_STD,
        normalize_X=False,
        normalize_y=False,
        optimizer=LBFGS,
        lr=1.0,
        lr_schedule="constant",
        max_epochs=5,
        batch_size=len(X),
        random_state=0,
        **params,
    )


def fast(**params):
    return LaplaceRegressor(**{**dict(hidden_layer_sizes=(16,), lr=0.01, max_epochs=100, random_state=0), **params})


@pytest.mark.parametrize("curvature", ["ggn", "hessian"])
def test_linear_module_gives_the_exact_bayesian_posterior(linear_data, curvature, device):
    X, y = linear_data
    reg = exact_linear_regressor(X, curvature=curvature, device=device).fit(X, y)
    exact = BayesianLinearRegression(X, y, NOISE, PRIOR_STD)
    X_new = np.random.RandomState(5).randn(6, 3)
    rel = dict(rtol=1e-6, atol=0)
    np.testing.assert_allclose(reg.posterior_.mean.cpu().numpy(), exact.mean, **rel)
    np.testing.assert_allclose(reg.posterior_.covariance.cpu().numpy(), exact.covariance, **rel)
    np.testing.assert_allclose(reg.predict(X_new), exact.design(X_new) @ exact.mean, **rel)
    np.testing.assert_allclose(reg.predict(X_new, return_std=True)[1], exact.predictive_std(X_new), **rel)
    np.testing.assert_allclose(reg.log_marginal_likelihood(), exact.log_evidence(), **rel)


def test_diagonal_structure_keeps_the_exact_diagonal_precision(linear_data):
    X, y = linear_data
    reg = exact_linear_regressor(X, hessian_structure="diag").fit(X, y)
    exact = BayesianLinearRegression(X, y, NOISE, PRIOR_STD)
    np.testing.assert_allclose(reg.posterior_.variance.numpy(), 1 / np.diag(exact.precision), rtol=1e-6)


def test_marglik_finds_the_exact_evidence_maximum(linear_data):
    """For a linear model the tuned prior precision is the maximiser of the
    exact evidence (up to the MAP being taken under the initial prior, whose
    effect on the evidence is second order: 1e-3 in log precision)."""
    X, y = linear_data
    reg = exact_linear_regressor(X, prior_precision="marglik").fit(X, y)

    def negative_evidence(log_prior_std):
        return -BayesianLinearRegression(X, y, NOISE, np.exp(log_prior_std)).log_evidence()

    best = minimize_scalar(negative_evidence, bounds=(-5, 5), method="bounded").x
    np.testing.assert_allclose(np.log(reg.prior_precision_), -2 * best, atol=1e-2)
    assert reg.noise_std_ == pytest.approx(NOISE)


def test_noise_is_estimated(wave_data):
    X, y = wave_data
    reg = fast(prior_precision="marglik", max_epochs=500).fit(X, y)
    assert 0.07 < reg.noise_std_ < 0.15  # the data's noise std is 0.1


@pytest.mark.parametrize("pushforward", ["linear", "nonlinear"])
def test_shapes_single_and_multi_output(wave_data, pushforward):
    X, y = wave_data
    for target, shape in [(y, (5,)), (y[:, None], (5,)), (np.c_[y, -y, 2 * y], (5, 3))]:
        reg = fast(pushforward=pushforward, n_samples=30).fit(X, target)
        mean, std = reg.predict(X[:5], return_std=True)
        assert mean.shape == std.shape == shape
        assert mean.dtype == std.dtype == np.float64
        _, cov = reg.predict(X[:5], return_cov=True)
        assert cov.shape == (5, 5) + shape[1:]
        samples = reg.sample_y(X[:5], n_samples=4)
        assert samples.shape == shape + (4,)


def test_per_target_noise_for_multi_output(wave_data):
    """A target and its copy at 100 times its scale: each output's noise, learned from its own
    residuals, is in its target's units, so they are in the ratio 100 up to the difference of
    the two output units' fits (tests/test_evidence.py checks outputs of different noise)."""
    X, y = wave_data
    reg = fast().fit(X, np.c_[y, 100 * y])
    assert reg.noise_std_.shape == (2,)
    np.testing.assert_allclose(reg.noise_std_[1], 100 * reg.noise_std_[0], rtol=0.1)


@pytest.mark.parametrize("pushforward", ["linear", "nonlinear"])
def test_std_is_the_diagonal_of_cov_and_includes_noise(wave_data, pushforward):
    X, y = wave_data
    reg = fast(pushforward=pushforward, noise_std=0.5).fit(X, y)
    _, std = reg.predict(X[:6], return_std=True)
    _, cov = reg.predict(X[:6], return_cov=True)
    np.testing.assert_allclose(np.diag(cov), std**2, rtol=1e-10)
    assert (std > 0.5).all()  # total predictive std exceeds the noise alone


@pytest.mark.parametrize("pushforward", ["linear", "nonlinear"])
def test_sample_y_follows_the_predictive(wave_data, pushforward):
    """20k draws against predict (itself from 2000 weight draws when nonlinear):
    mean within 5 standard errors, std within 5 standard errors of a std
    estimate, ``std * sqrt((kurtosis - 1) / 4n)`` per sample of n draws."""
    X, y = wave_data
    reg = fast(pushforward=pushforward, n_samples=2000, prior_precision="marglik", max_epochs=300).fit(X, y)
    mean, std = reg.predict(X[:4], return_std=True)
    n_draws = 20_000
    draws = reg.sample_y(X[:4], n_samples=n_draws, random_state=1)
    n_predict = 2000 if pushforward == "nonlinear" else np.inf
    assert (np.abs(draws.mean(1) - mean) < 5 * std * np.sqrt(1 / n_draws + 1 / n_predict)).all()
    centred = draws - draws.mean(1, keepdims=True)
    kurtosis = (centred**4).mean(1) / (centred**2).mean(1) ** 2
    std_error = std * np.sqrt((kurtosis - 1) / 4 * (1 / n_draws + 1 / n_predict))
    assert (np.abs(draws.std(1) - std) < 5 * std_error).all()
    np.testing.assert_array_equal(draws, reg.sample_y(X[:4], n_samples=20_000, random_state=1))


def test_nonlinear_pushforward_converges_to_linear_for_a_linear_model(linear_data):
    X, y = linear_data
    linear = exact_linear_regressor(X).fit(X, y)
    sampled = exact_linear_regressor(X, pushforward="nonlinear", n_samples=20_000).fit(X, y)
    _, std_linear = linear.predict(X[:5], return_std=True)
    _, std_sampled = sampled.predict(X[:5], return_std=True)
    np.testing.assert_allclose(std_sampled, std_linear, rtol=0.02)


def test_normalize_y_makes_the_fit_scale_free(wave_data):
    X, y = wave_data
    mean, std = fast().fit(X, y).predict(X[:5], return_std=True)
    mean_k, std_k = fast().fit(X, 1000 * y + 7).predict(X[:5], return_std=True)
    # Equal up to the rounding of the standardised targets, which the training's steps and the
    # evidence's iterations (whose stopping rule may end one a step apart) carry to 1e-8.
    np.testing.assert_allclose(mean_k, 1000 * mean + 7, rtol=1e-6)
    np.testing.assert_allclose(std_k, 1000 * std, rtol=1e-6)


def test_log_marginal_likelihood_is_in_units_of_y(wave_data):
    X, y = wave_data
    evidence = fast().fit(X, y).log_marginal_likelihood()
    scaled = fast().fit(X, 1000 * y).log_marginal_likelihood()
    np.testing.assert_allclose(scaled, evidence - len(y) * np.log(1000), rtol=1e-8)


def test_grid_search_over_cov_scale_in_a_pipeline(wave_data):
    X, y = wave_data
    pipe = Pipeline([("scale", StandardScaler()), ("laplace", fast())])
    search = GridSearchCV(pipe, {"laplace__cov_scale": [0.1, 1.0, 10.0]}, scoring=neg_nll_scorer, cv=3)
    search.fit(X, y)
    assert search.best_params_["laplace__cov_scale"] in (0.1, 1.0, 10.0)
    assert np.isfinite(search.best_score_)


def test_same_random_state_same_numbers(wave_data):
    X, y = wave_data
    first = fast(pushforward="nonlinear", n_samples=10).fit(X, y)
    second = fast(pushforward="nonlinear", n_samples=10).fit(X, y)
    np.testing.assert_array_equal(first.predict(X, return_std=True), second.predict(X, return_std=True))
    np.testing.assert_array_equal(first.predict(X, return_std=True), first.predict(X, return_std=True))
    other = fast(pushforward="nonlinear", n_samples=10).set_params(random_state=1).fit(X, y)
    assert not np.allclose(other.predict(X), first.predict(X))


def test_fit_leaves_global_torch_rng_alone(wave_data):
    X, y = wave_data
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    fast().fit(X, y)
    torch.testing.assert_close(torch.rand(3), expected)


@pytest.mark.parametrize("dump", ["pickle", "joblib"])
def test_round_trip_gives_identical_predictions(wave_data, tmp_path, dump):
    X, y = wave_data
    reg = fast().fit(X, y)
    path = tmp_path / "model"
    if dump == "pickle":
        path.write_bytes(pickle.dumps(reg))
        loaded = pickle.loads(path.read_bytes())
    else:
        joblib.dump(reg, path)
        loaded = joblib.load(path)
    np.testing.assert_array_equal(loaded.predict(X, return_std=True), reg.predict(X, return_std=True))
    np.testing.assert_array_equal(loaded.sample_y(X, 3), reg.sample_y(X, 3))


def test_dataframe_feature_names(wave_data):
    pd = pytest.importorskip("pandas")
    X, y = wave_data
    frame = pd.DataFrame(X, columns=["a", "b"])
    reg = fast().fit(frame, y)
    np.testing.assert_array_equal(reg.feature_names_in_, ["a", "b"])
    with pytest.raises(ValueError, match="feature names"):
        reg.predict(frame.rename(columns={"a": "c"}))


def test_hidden_layer_sizes_as_int_or_empty(wave_data):
    X, y = wave_data
    assert fast(hidden_layer_sizes=7).fit(X, y).posterior_.n_params == 2 * 7 + 7 + 7 + 1 + 2  # + linear skip
    assert fast(hidden_layer_sizes=7, linear_skip=False).fit(X, y).posterior_.n_params == 2 * 7 + 7 + 7 + 1
    assert fast(hidden_layer_sizes=()).fit(X, y).posterior_.n_params == 3


def test_a_tiny_fixed_noise_fits_where_round_off_breaks_the_precisions_factor():
    """noise_std=1e-8 on nearly noise-free data: the data's curvature dwarfs the prior's by more than
    float64 resolves, and the posterior precision's Cholesky factor failed with torch's LinAlgError;
    it is jittered at the round-off's level, as the evidence's is."""
    rng = np.random.RandomState(0)
    X = rng.randn(100, 3)
    y = X @ [1.0, -2.0, 0.5] + 1e-8 * rng.randn(100)
    with pytest.warns(ConvergenceWarning, match=r"needed a diagonal jitter of \d"):
        reg = LaplaceRegressor(noise_std=1e-8, max_epochs=300, random_state=0).fit(X, y)
    _, std = reg.predict(np.r_[X[:5], 3 * X[:5]], return_std=True)
    assert np.all(np.isfinite(std)) and np.all(std >= 1e-8)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_targets_of_a_narrow_float_are_standardised_in_float64(dtype):
    """float16 targets near 1000 were standardised in float16: their mean off by 0.03, their std by 2%."""
    y = (1000 + 2.4 * np.random.RandomState(0).randn(50)).astype(dtype)
    X = np.arange(50.0)[:, None]
    narrow, wide = fast(max_epochs=5).fit(X, y), fast(max_epochs=5).fit(X, y.astype(np.float64))
    np.testing.assert_array_equal(narrow.predict(X, return_std=True), wide.predict(X, return_std=True))


def test_float32_dtype_returns_float64(wave_data):
    X, y = wave_data
    reg = fast(dtype="float32").fit(X, y)
    mean, std = reg.predict(X, return_std=True)
    assert mean.dtype == std.dtype == np.float64
    assert reg.posterior_.mean.dtype == torch.float32


def test_custom_module_instance_and_callable(wave_data):
    X, y = wave_data

    class Residual(nn.Module):
        def __init__(self, n_features):
            super().__init__()
            self.linear = nn.Linear(n_features, 1)
            self.hidden = nn.Sequential(nn.Linear(n_features, 8), nn.Tanh(), nn.Linear(8, 1))

        def forward(self, x):
            return self.linear(x) + self.hidden(x)

    instance = Residual(2)
    before = [p.detach().clone() for p in instance.parameters()]
    for module in (instance, lambda n_features, n_outputs: Residual(n_features)):
        reg = LaplaceRegressor(module=module, lr=0.01, max_epochs=50, random_state=0).fit(X, y)
        mean, std = reg.predict(X, return_std=True)
        assert np.isfinite(mean).all() and (std > 0).all()
    for old, new in zip(before, instance.parameters()):
        torch.testing.assert_close(old, new)  # the user's module is copied, not trained


def test_verbose_shows_progress(wave_data, capsys):
    X, y = wave_data
    fast(verbose=1, max_epochs=5).fit(X, y)
    assert "MAP" in capsys.readouterr().err
    fast(max_epochs=5).fit(X, y)
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "X, message",
    [
        (np.array([[np.nan, 1.0]] * 5), "NaN"),
        (np.array([[np.inf, 1.0]] * 5), "infinity"),
        (np.empty((0, 2)), "0 sample"),
        (np.array([["a", "b"]] * 5), "could not convert"),
        (np.zeros((5, 2, 2)), "dim 3"),
    ],
    ids=["nan", "inf", "empty", "strings", "3d"],
)
def test_bad_X_at_fit(X, message):
    with pytest.raises(ValueError, match=message):
        fast().fit(X, np.zeros(len(X)))


def test_nan_in_y():
    with pytest.raises(ValueError, match="NaN"):
        fast().fit(np.zeros((5, 2)), np.array([0, 1, np.nan, 0, 1.0]))


def test_wrong_number_of_features_at_predict(wave_data):
    X, y = wave_data
    reg = fast(max_epochs=2).fit(X, y)
    with pytest.raises(ValueError, match="3 features, but LaplaceRegressor is expecting 2"):
        reg.predict(np.zeros((4, 3)))


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(cov_scale=0.0), "'cov_scale' parameter"),
        (dict(cov_scale=-1.0), "'cov_scale' parameter"),
        (dict(hessian_structure="kfac"), "'hessian_structure' parameter"),
        (dict(curvature="fisher"), "'curvature' parameter"),
        (dict(pushforward="probit"), "'pushforward' parameter"),
        (dict(prior_precision="evidence"), "'prior_precision' parameter"),
        (dict(prior_std=0.0), "'prior_std' parameter"),
        (dict(noise_std=-0.1), "'noise_std' parameter"),
        (dict(hidden_layer_sizes=(10, 0)), "'hidden_layer_sizes' parameter"),
        (dict(activation="gelu"), "'activation' parameter"),
        (dict(linear_skip="yes"), "'linear_skip' parameter"),
        (dict(dtype="float16"), "'dtype' parameter"),
        (dict(device="tpu:9"), "device='tpu:9' is not a torch device"),
        (dict(module=lambda n_features, n_outputs: "not a module"), "callable returned str"),
    ],
)
def test_bad_parameters_fail_at_fit_naming_the_problem(wave_data, params, message):
    X, y = wave_data
    with pytest.raises(ValueError, match=message):
        fast(**params).fit(X, y)


def test_full_curvature_over_the_memory_budget_is_refused(wave_data, monkeypatch):
    """Before the MAP training, which it came after (hours on a big table)."""
    X, y = wave_data
    monkeypatch.setattr(curvature_module, "MAX_FULL_MATRIX_BYTES", 10_000)
    with monkeypatch.context() as patched:
        patched.setattr(LaplaceRegressor, "_fit_map", lambda *args: pytest.fail("the MAP was trained"))
        with pytest.raises(ValueError, match=r"67 x 67 matrix .*hessian_structure='kron'"):
            fast(hessian_structure="full").fit(X, y)
    fast(hessian_structure="diag").fit(X, y)
    assert fast().fit(X, y).hessian_structure_ == "kron"  # 'auto' stays under the budget


def test_a_module_with_dropout_fits_and_predicts_its_function(wave_data):
    """Dropout regularises the MAP's training; the evidence, the curvature and the predictions read the
    network without it (torch's vmap refused its random masks: every family failed to fit)."""
    X, y = wave_data
    module = nn.Sequential(nn.Linear(X.shape[1], 16), nn.Tanh(), nn.Dropout(0.2), nn.Linear(16, 1))
    reg = LaplaceRegressor(module=module, max_epochs=30, random_state=0).fit(X, y)
    first, second = reg.predict(X[:5], return_std=True), reg.predict(X[:5], return_std=True)
    np.testing.assert_array_equal(first, second)
    assert np.all(np.isfinite(first[1]))


def test_std_and_cov_together_is_an_error(wave_data):
    X, y = wave_data
    reg = fast(max_epochs=2).fit(X, y)
    with pytest.raises(RuntimeError, match="At most one"):
        reg.predict(X, return_std=True, return_cov=True)


@pytest.mark.parametrize("n_samples", [0, -1, 2.0, "3", True])
def test_sample_y_refuses_a_number_of_draws_that_is_not_a_positive_integer(wave_data, n_samples):
    X, y = wave_data
    reg = fast(max_epochs=2).fit(X, y)
    with pytest.raises(ValueError, match="n_samples must be a positive integer"):
        reg.sample_y(X[:3], n_samples=n_samples)


@pytest.mark.slow
def test_diagonal_evidence_that_inflates_the_noise_warns():
    """Diabetes, a 1x200 network under a fixed N(0, 1): the diagonal evidence
    multiplies the (full-evidence) noise std of the MAP about 4.6-fold, and says so."""
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    reg = LaplaceRegressor(hidden_layer_sizes=(200,), prior_std=1.0, hessian_structure="diag",
                           prior_precision="marglik", random_state=0)
    with pytest.warns(UserWarning, match=r"diagonal Laplace evidence raised the noise std .*-fold"):
        reg.fit(X, y)


def test_evidence_search_at_a_bound_warns(linear_data):
    """With no data to speak of, the evidence wants an ever larger prior
    precision: the search ends at its bound and warns."""
    from sklearn.exceptions import ConvergenceWarning

    X, y = linear_data
    reg = exact_linear_regressor(X, prior_precision="marglik")
    with pytest.warns(ConvergenceWarning, match="stopped at a bound of the prior precision"):
        reg.fit(X[:2] * 0, y[:2] * 0)


@pytest.mark.parametrize("value", [0.0, -1.0, np.nan, np.inf, "1", True])
def test_log_marginal_likelihood_refuses_a_bad_prior_precision(wave_data, value):
    """0 and -1 failed with a 'math domain error'; NaN and inf returned NaN."""
    X, y = wave_data
    reg = fast(max_epochs=5).fit(X, y)
    with pytest.raises(ValueError, match="prior_precision must be a finite positive number"):
        reg.log_marginal_likelihood(value)
    assert np.isfinite(reg.log_marginal_likelihood(np.float32(2.0)))


@pytest.mark.parametrize("prior_precision", ["marglik", "gridsearch"])
def test_one_row_is_refused_where_the_prior_precision_is_searched(prior_precision):
    """A fixed prior_std and noise_std learn nothing from the rows, so one row fits; a searched
    prior precision is learned from them, and one row holds no spread to learn it from."""
    fixed = dict(hidden_layer_sizes=(4,), prior_std=1.0, noise_std=0.5, max_epochs=1, random_state=0)
    LaplaceRegressor(**fixed, prior_precision=2.0).fit([[0.0]], [1.0])
    with pytest.raises(ValueError, match=r"one row \(n_samples=1\)"):
        LaplaceRegressor(**fixed, prior_precision=prior_precision).fit([[0.0]], [1.0])


def test_documented_defaults():
    """The defaults the docstring states, which the fit and the user guide's figures assume."""
    params = LaplaceRegressor().get_params()
    expected = dict(
        hidden_layer_sizes=(50,), activation="relu", linear_skip=True, prior_std=None, prior_std_scale=1.0,
        noise_std=None, likelihood="gaussian", hessian_structure="auto", memory_budget="auto", max_rank=100,
        subset_of_weights="all", curvature="ggn", cov_scale=1.0, pushforward="linear", prior_precision=None,
        calibration_objective="nll", validation_fraction=0.1, n_samples=100, lr=0.01, lr_schedule="cosine",
        max_epochs="auto", batch_size="auto", optimizer=torch.optim.Adam, normalize_X=True, normalize_y=True,
        dtype="float64", device="cpu", random_state=None, verbose=0,
    )
    assert {name: params[name] for name in expected} == expected
    given = LaplaceRegressor(n_samples=7, validation_fraction=0.3, pushforward="nonlinear").get_params()
    assert (given["n_samples"], given["validation_fraction"], given["pushforward"]) == (7, 0.3, "nonlinear")
