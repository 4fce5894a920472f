"""MCMCRegressor against the exact posterior of a linear model, and its API."""

import pickle
import warnings
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np
import pytest
import torch
from torch import nn

from sklearn_quinn import MCMCRegressor
from sklearn_quinn._core import compiling

from .exact import BayesianLinearRegression, HierarchicalLinearRegression

NOISE, PRIOR_STD = 0.3, 2.0

SETTINGS = {
    "hmc": dict(n_samples=600, n_burnin=400, n_leapfrog=8),
    "nuts": dict(n_samples=600, n_burnin=400),
    "mala": dict(n_samples=1500, n_burnin=500),
    "amcmc": dict(n_samples=3000, n_burnin=1000, adapt_start=200, step_size=0.05),
}


def linear_mcmc(X, sampler, **params):
    return MCMCRegressor(
        module=nn.Linear(X.shape[1], 1),
        noise_std=NOISE,
        prior_std=PRIOR_STD,
        normalize_X=False,
        normalize_y=False,
        sampler=sampler,
        lr=0.01,
        max_epochs=50,
        random_state=0,
        **{**SETTINGS[sampler], **params},
    )


def small(**params):
    defaults = dict(hidden_layer_sizes=(8,), n_samples=30, n_burnin=30, n_leapfrog=4, lr=0.01,
                    max_epochs=30, random_state=0)
    return MCMCRegressor(**{**defaults, **params})


def test_the_draws_noise_is_their_weighted_root_mean_square(wave_data):
    """The noise the predictive adds is the root of the draws' weighted mean noise variance, not their
    mean std (the noise is drawn with the weights, so the draws' stds differ)."""
    X, y = wave_data
    reg = MCMCRegressor(hidden_layer_sizes=(8,), n_samples=30, n_burnin=30, n_leapfrog=4, lr=0.01, max_epochs=30,
                        random_state=0).fit(X, y)
    noise = reg._draw_noise[:, 0].double().numpy()
    assert np.ptp(noise) > 0
    expected = np.sqrt(reg.posterior_.weights.double().numpy() @ noise**2)
    np.testing.assert_allclose(float(reg._noise_std[0]), expected, rtol=1e-6)


def test_thinning_keeps_the_last_step_of_each_block(wave_data):
    """``thin=2`` over 6 draws runs the 12 steps ``thin=1`` over 12 does, from the same seeds, and keeps
    every second: steps 2, 4, ..., 12 of the kept phase, not 1, 3, ..., 11."""
    X, y = wave_data
    params = dict(hidden_layer_sizes=(8,), n_burnin=30, n_leapfrog=4, lr=0.01, max_epochs=30, n_chains=2,
                  compile=False, random_state=0)
    every = MCMCRegressor(**params, n_samples=12, thin=1).fit(X, y).chains_
    thinned = MCMCRegressor(**params, n_samples=6, thin=2).fit(X, y).chains_
    np.testing.assert_array_equal(thinned, every[:, 1::2])


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["hmc", "nuts", "mala", "amcmc"])
def test_linear_model_posterior_is_exact(linear_data, sampler, device):
    """Mean within 4 Monte Carlo standard errors (from ess_), std within 15%."""
    X, y = linear_data
    reg = linear_mcmc(X, sampler, device=device).fit(X, y)
    exact = BayesianLinearRegression(X, y, NOISE, PRIOR_STD)
    draws = reg.chains_.reshape(-1, 4)
    exact_std = np.sqrt(np.diag(exact.covariance))
    standard_error = exact_std / np.sqrt(reg.ess_)
    assert (np.abs(draws.mean(0) - exact.mean) < 4 * standard_error).all()
    np.testing.assert_allclose(draws.std(0), exact_std, rtol=0.15)
    assert (reg.rhat_ < 1.05).all()
    assert reg.n_divergent_ == 0
    X_new = np.random.RandomState(3).randn(5, 3)
    np.testing.assert_allclose(reg.predict(X_new, return_std=True)[1], exact.predictive_std(X_new), rtol=0.15)


_HIERARCHICAL_POSTERIORS = {}


def two_column_hierarchical_posterior(X, y, shape, rate):
    """The exact posterior of a linear model on two columns under the hierarchical prior: a
    four-axis quadrature of some seconds, computed once for the samplers' tests."""
    key = (X.tobytes(), y.tobytes(), shape, rate)
    if key not in _HIERARCHICAL_POSTERIORS:
        design = BayesianLinearRegression.design(X)
        _HIERARCHICAL_POSTERIORS[key] = HierarchicalLinearRegression(design, y, [0, 1, 2], shape, rate, n_points=25,
                                                                     columns=[0, 1])
    return _HIERARCHICAL_POSTERIORS[key]


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["hmc", "nuts", "mala", "amcmc"])
def test_hierarchical_linear_model_posterior_is_exact(linear_data, sampler):
    """The default prior (prior_std=None): Gamma hyperpriors on the precision of
    the bias and of the noise, and each input column's precision about their
    mean, itself under the Gamma hyperprior, sampled by Gibbs draws between the
    sampler's moves. A linear model's joint posterior of the logs of the four
    precisions (the columns' mean integrated out), and the coefficients'
    posterior, are exact by quadrature (tests/exact.py): every posterior mean
    within 4 Monte Carlo standard errors (from ess_), every posterior std
    within 15%."""
    X, y = linear_data
    X = X[:, :2]  # two columns: a grid over four hyperparameters
    reg = MCMCRegressor(hidden_layer_sizes=(), normalize_X=False, normalize_y=False, sampler=sampler, max_epochs=50,
                        random_state=0,
                        **{**SETTINGS[sampler], "n_samples": 2 * SETTINGS[sampler]["n_samples"]}).fit(X, y)
    exact = two_column_hierarchical_posterior(X, y, reg.hyperprior_shape, reg.hyperprior_rate)
    assert list(reg.prior_precisions_) == ["0.weight[:, 0]", "0.weight[:, 1]", "0.bias"]
    # 2 coefficients, the bias, the log noise std, 3 log precisions; then the columns' log mean
    draws = reg.chains_.reshape(-1, 8)[:, :7]
    draws[:, 3] *= -2  # log tau = -2 log noise std
    mean = np.r_[exact.mean, exact.mean_log_tau, exact.mean_log_precision]
    std = np.r_[exact.std, exact.std_log_tau, exact.std_log_precision]
    assert (np.abs(draws.mean(0) - mean) < 4 * std / np.sqrt(reg.ess_[:7])).all()
    np.testing.assert_allclose(draws.std(0), std, rtol=0.15)
    np.testing.assert_allclose(reg.prior_precision_samples_.mean(0), list(reg.prior_precisions_.values()))
    assert reg.n_divergent_ == 0



def test_the_chains_start_at_each_layers_mean_of_its_columns_precisions():
    """At the default ``hyperprior='gamma'`` the chains start at the MAP's learned precisions,
    mapped to the state's columns: the log of every group's precision, then of each layer's mean
    over its input columns' precisions (the mean that the columns' Gamma prior is about). Read
    here on the precisions the fit keeps, the draws' means."""
    rng = np.random.RandomState(0)
    X = rng.randn(30, 3)
    y = X @ [1.0, -0.5, 0.0] + 0.1 * rng.randn(30)
    reg = MCMCRegressor(hidden_layer_sizes=(3,), n_chains=2, n_burnin=2, n_samples=2, max_epochs=20,
                        random_state=0).fit(X, y)
    precisions = reg.prior_precisions_
    layers = {}
    for name, value in precisions.items():
        if "[:, " in name:
            layers.setdefault(name.split("[")[0], []).append(value)
    assert sorted(layers) == ["linear.weight", "mlp.0.weight"] and all(len(v) == 3 for v in layers.values())
    expected = np.log(np.r_[list(precisions.values()), [np.mean(values) for values in layers.values()]])
    state = reg._empirical_state(SimpleNamespace(n_state_columns=0), 2).numpy()
    np.testing.assert_allclose(state, np.tile(expected, (2, 1)), rtol=1e-10)

def test_nuts_reports_its_trajectory_lengths_and_warns_when_they_hit_the_maximum(linear_data):
    """On the linear posterior NUTS's trajectories turn back long before 2**10
    steps, with no warning; at max_tree_depth=1 every trajectory is the one
    leapfrog step the depth allows, and the fit says so. Other samplers report
    no lengths."""
    X, y = linear_data
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        deep = linear_mcmc(X, "nuts", n_samples=50, n_burnin=100).fit(X, y)
    assert not [w for w in caught if "max_tree_depth" in str(w.message)]
    assert deep.trajectory_length_.shape == (4,)
    assert (deep.trajectory_length_ > 1).all() and (deep.trajectory_length_ < 100).all()
    message = "100% of the NUTS trajectories after burn-in reached max_tree_depth=1"
    with pytest.warns(UserWarning, match=message) as record:
        shallow = linear_mcmc(X, "nuts", n_samples=20, n_burnin=20, max_tree_depth=1).fit(X, y)
    assert {w.filename for w in record if "max_tree_depth" in str(w.message)} == {__file__}  # the line that called fit
    np.testing.assert_array_equal(shallow.trajectory_length_, np.ones(4))
    assert linear_mcmc(X, "mala", n_samples=5, n_burnin=5).fit(X, y).trajectory_length_ is None


@pytest.mark.slow
def test_sampled_noise_recovers_the_noise(wave_data):
    X, y = wave_data
    reg = small(hidden_layer_sizes=(16,), n_samples=200, n_burnin=300, max_epochs=200).fit(X, y)
    # the weights, the log noise, 7 log precisions (2 + 2 input columns), 2 layers' log means
    assert reg.chains_.shape[-1] == reg.posterior_.samples.shape[1] + 1 + 7 + 2
    assert 0.07 < reg.noise_std_ < 0.16  # the data's noise std is 0.1


@pytest.mark.slow
def test_chain_layouts_sample_the_same_distribution(linear_data):
    """Four chains in one batch or in two joblib groups: posterior means agree
    within 4 combined Monte Carlo standard errors."""
    X, y = linear_data
    one = linear_mcmc(X, "mala").fit(X, y)
    two = linear_mcmc(X, "mala", n_jobs=2).fit(X, y)
    assert not np.array_equal(one.chains_, two.chains_)
    exact_std = np.sqrt(np.diag(BayesianLinearRegression(X, y, NOISE, PRIOR_STD).covariance))
    se = exact_std * np.sqrt(1 / one.ess_ + 1 / two.ess_)
    assert (np.abs(one.chains_.mean((0, 1)) - two.chains_.mean((0, 1))) < 4 * se).all()


def test_same_random_state_same_draws(wave_data):
    X, y = wave_data
    for sampler in ("hmc", "mala", "amcmc"):
        first, second = small(sampler=sampler).fit(X, y), small(sampler=sampler).fit(X, y)
        np.testing.assert_array_equal(first.chains_, second.chains_)
        np.testing.assert_array_equal(first.predict(X, return_std=True), second.predict(X, return_std=True))


def test_fitted_attributes(wave_data):
    X, y = wave_data
    reg = small(n_chains=3, n_samples=12, thin=2).fit(X, y)
    n_params = reg.posterior_.samples.shape[1]
    names = ["mlp.0.weight[:, 0]", "mlp.0.weight[:, 1]", "mlp.0.bias", "mlp.2.weight", "mlp.2.bias",
             "linear.weight[:, 0]", "linear.weight[:, 1]"]
    # weights, log noise std, log precisions, the log means of the two layers' input columns
    assert reg.chains_.shape == (3, 12, n_params + 1 + 7 + 2)
    assert reg.posterior_.samples.shape == (36, n_params)
    assert reg.acceptance_rate_.shape == reg.step_size_.shape == (3,)
    assert reg.rhat_.shape == reg.ess_.shape == (n_params + 10,)
    assert list(reg.prior_precisions_) == names
    assert reg.prior_precision_samples_.shape == (36, 7)
    log_precisions = reg.chains_[..., n_params + 1 : n_params + 8].reshape(-1, 7)
    np.testing.assert_allclose(reg.prior_precision_samples_, np.exp(log_precisions))
    np.testing.assert_allclose(reg._draw_noise[:, 0].numpy(), np.exp(reg.chains_[..., n_params].reshape(-1)))
    fixed = small(n_chains=3, n_samples=12, thin=2, prior_std=1.0).fit(X, y)
    assert fixed.chains_.shape == (3, 12, n_params + 1)  # the log noise std, sampled with the weights
    assert not hasattr(fixed, "prior_precision_samples_")
    assert isinstance(reg.n_divergent_, int)
    assert small(sampler="amcmc").fit(X, y).step_size_ is None


def test_prior_initialisation_skips_the_map(wave_data):
    X, y = wave_data
    reg = small(init="prior", noise_std=0.1).fit(X, y)
    assert reg.net_ is None
    assert np.isfinite(reg.predict(X)).all()


def iris_classifier(**params):
    from sklearn_quinn import MCMCClassifier

    defaults = dict(hidden_layer_sizes=(8,), n_samples=10, n_burnin=10, n_leapfrog=4, lr=0.01, random_state=0)
    return MCMCClassifier(**{**defaults, **params})


def standardised_iris():
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    return (X - X.mean(0)) / X.std(0), y


@pytest.mark.parametrize("task", ["regressor", "classifier"])
def test_ensemble_initialisation_starts_each_chain_in_a_trained_network_of_its_own(wave_data, task, monkeypatch):
    """init='ensemble': chain 0 starts where init='map' starts it (the MAP, the same jitter); the
    others at networks trained from their own initial weights, far from the MAP and from each
    other (over 100 times the jitter's spread), and trained: each recovers at least half the log
    posterior that the MAP gains over the all-zero network, which predicts the target's mean or
    uniform class probabilities (measured 66% and 98% for the regressor; a member finds a basin of
    its own, which may be a poorer one)."""
    make, (X, y) = (small, wave_data) if task == "regressor" else (iris_classifier, standardised_iris())
    estimator_class = type(make())
    seen = {}
    sample_chains = estimator_class._sample_chains

    def spy(self, log_density, start, *args, **kwargs):
        seen[self.init] = start, log_density
        return sample_chains(self, log_density, start, *args, **kwargs)

    monkeypatch.setattr(estimator_class, "_sample_chains", spy)
    for init in ("map", "ensemble"):
        fitted = make(init=init, n_chains=3, hyperprior="empirical", max_epochs=500, normalize_X=False).fit(X, y)
    map_start, log_density = seen["map"]
    ensemble_start, _ = seen["ensemble"]
    assert torch.equal(ensemble_start[0], map_start[0])
    jitter_spread = torch.cdist(map_start, map_start).max()
    assert torch.pdist(ensemble_start).min() > 100 * jitter_spread
    gain = log_density(ensemble_start) - log_density(torch.zeros_like(ensemble_start))
    assert (gain[1:] > 0.5 * gain[0]).all()
    assert np.isfinite(fitted.predict(X)).all()


def test_verbose_shows_acceptance(wave_data, capsys):
    """The bars show, and leave nothing in the fit: n_jobs's workers, which get the estimator,
    and pickle need it whole (the MAP's closed bar kept its output stream, which neither could
    take)."""
    X, y = wave_data
    fitted = small(verbose=1, max_epochs=2).fit(X, y)
    err = capsys.readouterr().err
    assert "MCMC hmc" in err and "acceptance" in err
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(fitted)).predict(X), fitted.predict(X))
    small(verbose=1, max_epochs=2, n_chains=2, n_jobs=2).fit(X, y)  # its workers' bars go to their own stderr


@pytest.mark.slow
@pytest.mark.parametrize("prior_std, n_draws, tolerance", [(1.0, None, 1e-5), (None, 5, 2e-4)])
def test_compiled_trajectories_sample_as_eager_ones(wave_data, monkeypatch, prior_std, n_draws, tolerance):
    """compile=True runs the same arithmetic through torch.compile: the same
    draws up to rounding, amplified along the chain (measured up to 7e-6 here
    with a fixed prior; a flipped accept decision would part the chains by the
    size of a move). With the hyperparameters' Gibbs draws in between, the
    differences grow faster (5e-5 by the fifth draw) until an accept decision
    flips and the chains part (at the seventh draw of one chain here): the
    first five draws are compared. The kicks take the exact gradient: float32's
    rounding, which a compiled graph's fused passes round apart from the eager ones,
    would part the chains within the burn-in. The transition compiles as one graph: a
    fallback to eager (a graph break, say) fails the test. With every guard kept, the fit
    compiles once and never again (a recompilation is an error, which falls back to eager
    and fails the test): what the guards check does not change within a fit, the Gibbs
    draws' and the adaptation's changes included, so checking the tensors' guards alone,
    as ``compiled_or_eager`` does, loses nothing."""
    X, y = wave_data
    exact = dict(prior_std=prior_std, leapfrog_dtype="float64")
    eager = small(**exact).fit(X, y)
    monkeypatch.setattr(torch.compiler, "keep_tensor_guards_unsafe", lambda guards: [True] * len(guards))
    with warnings.catch_warnings(), torch._dynamo.config.patch(error_on_recompile=True):
        warnings.filterwarnings("error", message="torch.compile failed")
        compiled = small(**exact, compile=True).fit(X, y)
    np.testing.assert_allclose(compiled.chains_[:, :n_draws], eager.chains_[:, :n_draws], atol=tolerance)


@pytest.mark.parametrize("sampler, leapfrog_dtype, kicked", [("hmc", "float32", True), ("hmc", "float64", False),
                                                          ("nuts", "float32", True), ("nuts", "float64", False),
                                                          ("mala", "float32", False)])
def test_leapfrog_steps_take_the_likelihood_in_leapfrog_dtype(wave_data, float32_kicks, sampler, leapfrog_dtype,
                                                              kicked):
    """HMC's and NUTS's leapfrog steps take the float32 copy of the likelihood by default and
    the exact one with 'float64'; MALA the exact one either way. The draws come back in
    float64. (NUTS's trees at most 31 steps: what is read is the dtype, not the trees.)"""
    X, y = wave_data
    reg = small(sampler=sampler, leapfrog_dtype=leapfrog_dtype, n_samples=5, n_burnin=5, max_tree_depth=5).fit(X, y)
    assert bool(float32_kicks) == kicked
    assert reg.chains_.dtype == np.float64 and reg.predict(X[:3]).dtype == np.float64


def test_compile_failure_falls_back_to_eager(wave_data, no_compiler):
    X, y = wave_data
    with pytest.warns(UserWarning, match=f"torch.compile failed \\({no_compiler}\\); running hmc_transition eagerly"):
        fallback = small(compile=True).fit(X, y)
    np.testing.assert_array_equal(fallback.chains_, small().fit(X, y).chains_)


def test_auto_compiles_where_the_cost_model_says_it_pays():
    """At the defaults (4 chains, 990 steps after the pilot, 40 leapfrog
    steps each, the 1x50 network with one output and its skip path: 52
    output units) HMC compiles from about 2,650 training rows on, as the
    docstring says; the digits classifier's chains (1,437 rows, 70 units)
    stay eager, and NUTS's trajectories of hundreds of steps compile on a
    small table."""
    n_gradients = 990 * MCMCRegressor().n_leapfrog
    assert not compiling.compile_pays(n_gradients, 4 * 2_600 * 52)
    assert compiling.compile_pays(n_gradients, 4 * 2_700 * 52)
    assert not compiling.compile_pays(n_gradients, 4 * 1_437 * 70)
    assert compiling.compile_pays(990 * 700, 4 * 300 * 52)


def test_auto_stays_eager_on_a_small_fit_and_compiles_where_compiling_pays(wave_data, monkeypatch):
    """``compile='auto'`` (the default) on a small table compiles nothing and
    draws what ``compile=False`` draws; where the cost model says it pays,
    the chains switch to the compiled kernel after the pilot (the compiler
    replaced by one that runs the function as it is: the same draws), each
    joblib group of chains deciding on its own chains' activations."""
    import joblib

    from sklearn_quinn.mcmc import _kernels, _mcmc

    def no_compiler(function):
        raise AssertionError("torch.compile called")

    monkeypatch.setattr(compiling.torch, "compile", no_compiler)
    X, y = wave_data
    auto, eager = small().fit(X, y), small(compile=False).fit(X, y)
    assert not auto.compiled_ and not eager.compiled_
    np.testing.assert_array_equal(auto.chains_, eager.chains_)

    asked = []
    monkeypatch.setattr(_mcmc, "compile_pays", lambda n_gradients, activations: asked.append(activations) or True)
    monkeypatch.setattr(_kernels, "compiled_or_eager", lambda function: function)
    switched = small().fit(X, y)
    units = switched._model.total_width
    assert switched.compiled_ and asked == [small().n_chains * len(X) * units]
    np.testing.assert_array_equal(switched.chains_, eager.chains_)
    asked.clear()
    with joblib.parallel_config(backend="threading"):
        small(n_chains=3, n_jobs=2).fit(X, y)
    assert sorted(asked) == [len(X) * units, 2 * len(X) * units]


def test_compile_accepts_numpy_booleans(wave_data, monkeypatch):
    """scikit-learn's 'boolean' constraint admits ``numpy.bool_``: True compiles."""
    from sklearn_quinn.mcmc import _kernels

    monkeypatch.setattr(_kernels, "compiled_or_eager", lambda function: function)
    X, y = wave_data
    assert small(compile=np.True_).fit(X, y).compiled_
    assert not small(compile=np.False_).fit(X, y).compiled_


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(sampler="slice"), "'sampler' parameter"),
        (dict(sampler="nuts", max_tree_depth=0), "'max_tree_depth' parameter"),
        (dict(step_size=0.0), "'step_size' parameter"),
        (dict(step_size=-1.0), "'step_size' parameter"),
        (dict(n_samples=0), "'n_samples' parameter"),
        (dict(n_chains=0), "'n_chains' parameter"),
        (dict(thin=0), "'thin' parameter"),
        (dict(target_acceptance=1.0), "'target_acceptance' parameter"),
        (dict(init="zeros"), "'init' parameter"),
        (dict(compile="yes"), "'compile' parameter"),
        (dict(leapfrog_dtype="half"), "'leapfrog_dtype' parameter"),
        (dict(hyperprior="half_cauchy"), "'hyperprior' parameter"),
        (dict(hyperprior_shape=0.0), "'hyperprior_shape' parameter"),
        (dict(hyperprior_shape=-1.0), "'hyperprior_shape' parameter"),
        (dict(hyperprior_shape="weak"), "'hyperprior_shape' parameter"),
        (dict(hyperprior_rate=0.0), "'hyperprior_rate' parameter"),
        (dict(hyperprior_rate=-0.5), "'hyperprior_rate' parameter"),
        (dict(hyperprior_rate=None), "'hyperprior_rate' parameter"),
    ],
)
def test_bad_parameters(wave_data, params, message):
    X, y = wave_data
    with pytest.raises(ValueError, match=message):
        small(**params).fit(X, y)


def test_a_chain_starting_where_the_density_is_not_finite_is_refused_at_once(wave_data):
    """A hyperprior of shape 1e-3 draws precisions that underflow, and init='prior' then weights
    past the network's range: refused before the first step, naming the cause (it ran to the end
    and failed in the draws' diagnostics, "samples contain NaN")."""
    X, y = wave_data
    with pytest.raises(ValueError, match="chains start where the log posterior is not finite"):
        small(init="prior", hyperprior_shape=1e-3).fit(X, y)


@pytest.mark.parametrize("noise", [None, 0.3])
@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_hand_written_gradient_equals_autograd(noise, activation):
    from sklearn_quinn._core.likelihoods import GaussianLikelihood
    from sklearn_quinn._core.log_posterior import log_posterior
    from sklearn_quinn._core.network import FunctionalModel, build_mlp
    from sklearn_quinn._core.priors import GaussianPrior

    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(3, 2, (6,), activation).double())
    X, Y = torch.randn(20, 3, dtype=torch.float64), torch.randn(20, 2, dtype=torch.float64)
    noise_std = torch.tensor([1.0, 1.0] if noise is None else [noise, 2 * noise], dtype=torch.float64)
    likelihood = GaussianLikelihood(noise_std, learn_noise=noise is None)
    log_density = log_posterior(model, X, Y, likelihood, GaussianPrior(0.7))
    rows = 0.3 * torch.randn(4, model.n_params + (noise is None), dtype=torch.float64)
    value, gradient = log_density.value_and_grad(rows)
    leaf = rows.clone().requires_grad_(True)
    expected_value = log_density(leaf)
    (expected_gradient,) = torch.autograd.grad(expected_value.sum(), leaf)
    torch.testing.assert_close(value, expected_value.detach())
    torch.testing.assert_close(gradient, expected_gradient)


def test_sample_y_draws_each_draws_own_noise(wave_data):
    """With the noise sampled, y draws mix the draws' noise levels: 20k of them
    have the predictive std, within 5 standard errors of a std estimate plus
    0.5% for predict's unbiased (S - 1) variance over the S = 400 kept draws."""
    X, y = wave_data
    reg = small(n_samples=100, n_burnin=100).fit(X, y)
    _, std = reg.predict(X[:3], return_std=True)
    draws = reg.sample_y(X[:3], n_samples=20_000, random_state=0)
    centred = draws - draws.mean(1, keepdims=True)
    kurtosis = (centred**4).mean(1) / (centred**2).mean(1) ** 2
    std_error = std * np.sqrt((kurtosis - 1) / (4 * 20_000))
    assert (np.abs(draws.std(1) - std) < 5 * std_error + 0.005 * std).all()


def test_a_fixed_prior_ignores_the_hyperprior(wave_data):
    """A float prior_std is the fixed prior of old: the hyperprior's parameters do not enter."""
    X, y = wave_data
    reference = small(prior_std=1.0).fit(X, y)
    other = small(prior_std=1.0, hyperprior="empirical", hyperprior_shape=3.0, hyperprior_rate=7.0).fit(X, y)
    np.testing.assert_array_equal(other.chains_, reference.chains_)


def test_empirical_hyperprior_is_the_maps(wave_data):
    """hyperprior='empirical' fixes the prior precisions and the noise at the
    values the evidence-driven MAP learns: those of a LaplaceRegressor trained
    alike; only the weights are sampled."""
    from sklearn_quinn import LaplaceRegressor

    X, y = wave_data
    reg = small(hyperprior="empirical", init="prior").fit(X, y)
    laplace = LaplaceRegressor(hidden_layer_sizes=(8,), lr=0.01, max_epochs=30, random_state=0).fit(X, y)
    assert reg.prior_precisions_ == pytest.approx(laplace.prior_precisions_, rel=1e-12)
    assert reg.noise_std_ == pytest.approx(laplace.noise_std_, rel=1e-12)
    assert reg.chains_.shape[-1] == reg.posterior_.samples.shape[1]
    assert not hasattr(reg, "prior_precision_samples_")


def test_hyperparameters_in_joblib_groups(wave_data):
    """Chains split over two joblib workers carry their hyperparameter columns."""
    X, y = wave_data
    reg = small(n_jobs=2, n_samples=10, n_burnin=10).fit(X, y)
    assert reg.chains_.shape == (4, 10, reg.posterior_.samples.shape[1] + 1 + 7 + 2)
    assert np.isfinite(reg.chains_).all() and reg.prior_precision_samples_.shape == (40, 7)


def test_chains_start_near_the_map_under_a_flat_prior():
    """The chains' jitter about the MAP was a thousandth of the prior's std: a flat prior_std=1e5 started
    them 100 away from it, where the training fit stayed hundreds of noise stds off."""
    rng = np.random.RandomState(0)
    X = rng.randn(30, 3)
    y = X @ [1.0, -2.0, 0.5] + 0.3 * rng.randn(30)
    reg = MCMCRegressor(hidden_layer_sizes=(8,), prior_std=1e5, max_epochs=100, n_samples=50, n_burnin=100,
                        n_chains=2, compile=False, random_state=0).fit(X, y)
    assert np.sqrt(np.mean((reg.predict(X) - y) ** 2)) < 0.5


def test_n_jobs_as_joblib_reads_it(wave_data, monkeypatch):
    """-1 is every core (it split the chains into no group and failed after the MAP trained); 0 is
    refused, as joblib refuses it, before the MAP trains."""
    import joblib

    from sklearn_quinn.mcmc import _mcmc

    X, y = wave_data
    two_cores = lambda n_jobs: 2 if n_jobs == -1 else joblib.effective_n_jobs(n_jobs)  # noqa: E731
    monkeypatch.setattr(_mcmc, "effective_n_jobs", two_cores)
    with joblib.parallel_config(backend="threading"):
        reg = small(n_jobs=-1, n_samples=5, n_burnin=5).fit(X, y)
    assert reg.chains_.shape[:2] == (small().n_chains, 5)
    with joblib.parallel_config(n_jobs=2):  # None is one batch whatever the joblib context says
        assert len(small()._chain_groups()) == 1
    trained = []
    monkeypatch.setattr(_mcmc.MCMCRegressor, "_fit_map", lambda *args, **kwargs: trained.append(1))
    with pytest.raises(ValueError, match="n_jobs == 0"):
        small(n_jobs=0).fit(X, y)
    assert not trained


def test_classifier_samples_the_prior_precisions():
    """A classifier has no noise: its rows are the weights, one log precision per parameter tensor
    and per input column of the layers that read the inputs, and those layers' log means."""
    from sklearn.datasets import load_iris

    from sklearn_quinn import MCMCClassifier

    X, y = load_iris(return_X_y=True)
    clf = MCMCClassifier(hidden_layer_sizes=(4,), n_samples=20, n_burnin=20, n_leapfrog=4, max_epochs=30,
                         random_state=0).fit(X, y)
    n_params = clf.posterior_.samples.shape[1]
    assert clf.chains_.shape == (4, 20, n_params + 4 + 1 + 1 + 1 + 4 + 2)
    assert list(clf.prior_precisions_) == [*(f"mlp.0.weight[:, {j}]" for j in range(4)), "mlp.0.bias", "mlp.2.weight",
                                           "mlp.2.bias", *(f"linear.weight[:, {j}]" for j in range(4))]
    np.testing.assert_allclose(clf.predict_proba(X[:5]).sum(1), 1.0)


@pytest.mark.slow
def test_default_is_near_bayesian_ridge_on_linear_data():
    """Issue 17's target on the data of tests/test_calibrated_defaults.py (300
    training rows from a linear model, 10 features, unit noise; 1000 test rows):
    the default MCMC (a 1x50 ReLU network with the linear skip path, sampled
    precisions and noise) within 0.05 nats of BayesianRidge, the exact model
    here (measured 1.418 against 1.414 at 40 leapfrog steps, 1.422 at 10;
    1.443 to 1.445 over three seeds of the chains without the skip path), with
    a 95% coverage in [0.92, 0.98] (measured 0.954). Half the default draws,
    for half the time: 1.415, coverage 0.954."""
    from sklearn.linear_model import BayesianRidge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from sklearn_quinn import metrics

    rng = np.random.RandomState(0)
    X = rng.randn(1300, 10)
    y = X @ rng.randn(10) + rng.randn(1300)

    def scores(estimator):
        model = make_pipeline(StandardScaler(), estimator).fit(X[:300], y[:300])
        mean, std = model.predict(X[300:], return_std=True)
        return metrics.gaussian_nll(y[300:], mean, std), metrics.interval_coverage(y[300:], mean, std, 0.95)

    reference, _ = scores(BayesianRidge())
    nll, coverage = scores(MCMCRegressor(n_samples=250, n_burnin=250, random_state=0))
    assert nll <= reference + 0.05
    assert 0.92 <= coverage <= 0.98



class CountingState(NamedTuple):
    position: torch.Tensor  # (C, K)
    log_density: torch.Tensor  # (C,)
    step_size: torch.Tensor  # (C,)
    inverse_mass: torch.Tensor  # (C, K)


def counting_kernel(acceptance, seen):
    """A kernel whose chains move by +1 a step, chain c's steps accepted with probability
    ``acceptance[c]``, and which records the step size and inverse mass every step gave the first
    chain: burn-in's and thinning's bookkeeping then has a closed form."""

    def kernel(log_density):
        def init(position, step_size):
            zeros = torch.zeros(len(position), dtype=position.dtype)
            return CountingState(position, zeros, zeros + step_size, torch.ones_like(position))

        def step(generator, state):
            seen.append((float(state.step_size[0]), float(state.inverse_mass[0, 0])))
            info = SimpleNamespace(acceptance_probability=torch.tensor(acceptance, dtype=state.position.dtype),
                                   is_divergent=torch.zeros(len(state.position), dtype=torch.bool), n_leapfrog=None)
            return state._replace(position=state.position + 1), info

        return init, step

    return kernel


def test_burn_in_retunes_at_the_window_ends_and_thinning_keeps_the_last_step_of_each_block(monkeypatch):
    """200 burn-in steps: a fast start of int(0.15 * 200) = 30 steps, then windows of 10, 20 and 90
    steps (the last runs to 50 steps before the end; ``slow_window_ends(200) == [40, 60, 150]``). Each
    window's draws are consecutive integers, whose variance is ``n (n + 1) / 12``: the inverse mass is
    Stan's regularised ``n / (n + 5) var + 1e-3 * 5 / (n + 5)`` of the window's n draws, from the step
    after the window's last on (steps 40, 60 and 150). With the first chain's acceptance at the target, dual
    averaging's error stays 0, so each search steps at ten times the step size it (re)started from:
    0.1 from 0.01, then 1, 10 and 100 from the second step after each window's end (the first still
    takes the step its last update gave), and 100, the averaged step, while sampling. Thinning
    by 3 keeps steps 3, 6, ... of the sampling phase, counted from its first step."""
    from sklearn_quinn.mcmc._sampling import SAMPLERS, Sampler, run_chains

    seen = []
    monkeypatch.setitem(SAMPLERS, "counting", Sampler(counting_kernel([0.65, 0.95], seen), (), target_acceptance=0.8,
                                                      adapt_mass=True))
    reports = []
    start = torch.tensor([[0.0], [10.0]], dtype=torch.float64)
    result = run_chains(None, start, sampler="counting", n_samples=4, n_burnin=200, thin=3, step_size=0.01,
                        target_acceptance=0.65, progress=lambda done, rate: reports.append((done, rate)))

    def regularised(n):
        return n / (n + 5) * n * (n + 1) / 12 + 1e-3 * 5 / (n + 5)

    steps = np.arange(212)
    expected_mass = np.select([steps < 40, steps < 60, steps < 150], [1.0, regularised(10), regularised(20)],
                              regularised(90))
    expected_step = np.select([steps == 0, steps <= 40, steps <= 60, steps <= 150], [0.01, 0.1, 1.0, 10.0], 100.0)
    step_sizes, masses = np.array(seen).T
    np.testing.assert_allclose(masses, expected_mass, rtol=1e-12)
    np.testing.assert_allclose(step_sizes, expected_step, rtol=1e-12)
    np.testing.assert_allclose(result.inverse_mass.numpy(), regularised(90), rtol=1e-12)
    assert float(result.step_size[0]) == pytest.approx(100.0, rel=1e-12)
    # Step t leaves the chains at start + t + 1; the kept draws end the steps 200 + 3, 6, 9 and 12.
    np.testing.assert_array_equal(result.draws[:, :, 0].numpy(), start.numpy() + [203, 206, 209, 212])
    assert result.acceptance.shape == result.divergent.shape == (2, 12)
    assert reports == [(t, pytest.approx(0.8, rel=1e-12)) for t in range(1, 213)]  # the chains' mean


def test_burn_in_without_step_size_adaptation_keeps_the_step_size_and_the_unit_mass(monkeypatch):
    """``adapt_step_size=False`` adapts neither the step size nor (MCMCRegressor's documentation) the
    mass: every step, burn-in's and sampling's, runs at the given step and the unit inverse mass."""
    from sklearn_quinn.mcmc._sampling import SAMPLERS, Sampler, run_chains

    seen = []
    monkeypatch.setitem(SAMPLERS, "counting", Sampler(counting_kernel([0.3, 0.3], seen), (), target_acceptance=0.8,
                                                      adapt_mass=True))
    result = run_chains(None, torch.zeros(2, 1, dtype=torch.float64), sampler="counting", n_samples=5, n_burnin=200,
                        step_size=0.01, adapt_step_size=False)
    assert seen == [(0.01, 1.0)] * 205
    assert result.step_size.tolist() == [0.01, 0.01] and result.inverse_mass.tolist() == [[1.0], [1.0]]


def test_acceptance_by_quarter_is_the_mean_over_chains_of_each_quarter_of_the_steps():
    """10 sampling steps in quarters of 3, 3, 2 and 2 steps (the first quarters take the remainder),
    averaged over both chains' steps in each."""
    from sklearn_quinn.mcmc._sampling import acceptance_by_quarter

    acceptance = torch.tensor([[1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.0, 0.0, 0.2, 0.2],
                               [0.0, 0.0, 0.0, 0.5, 0.5, 0.5, 1.0, 1.0, 0.6, 0.6]], dtype=torch.float64)
    np.testing.assert_allclose(acceptance_by_quarter(acceptance), [0.5, 0.5, 0.5, 0.4], rtol=1e-12)


def test_gaussian_draws_keep_an_infinite_mean_and_take_the_spread_s_infinity_against_it():
    """``mean + std z`` element by element, from the generator's standard normals z (here 1.54, -0.29,
    -2.18, 0.57, -1.08, -1.40): an infinite mean with a finite spread stays that infinity, an infinite
    spread about a finite mean is the spread's, and against a mean of the other sign (inf - inf, NaN)
    the spread's infinity too."""
    from sklearn_quinn._core.rng import gaussian_draws

    mean = torch.tensor([1.0, torch.inf, -torch.inf, 2.0, torch.inf, -torch.inf], dtype=torch.float64)
    std = torch.tensor([2.0, 3.0, 1.0, torch.inf, torch.inf, torch.inf], dtype=torch.float64)
    z = torch.randn(6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert z[0] > 0 and z[4] < 0 and z[5] < 0  # the signs the infinities below follow
    draws = gaussian_draws(torch.Generator().manual_seed(0), mean, std)
    assert float(draws[0]) == pytest.approx(1.0 + 2.0 * float(z[0]), rel=1e-15)
    assert draws[1:].tolist() == [torch.inf, -torch.inf, torch.inf, -torch.inf, -torch.inf]


def test_the_regressor_hands_each_of_its_parameters_to_the_engine(wave_data, monkeypatch):
    """Every sampling parameter reaches ``run_chains`` as set (each a value apart from its default, so a
    parameter dropped, or passed as its default, shows), from ``n_chains`` starts, and the fitted
    attributes are the engine's draws: ``chains_`` as it returns them (chain, draw, column), the posterior's
    samples those rows chain by chain with equal weights."""
    from sklearn_quinn.mcmc import _mcmc

    calls, run_chains = [], _mcmc.run_chains

    def recording(log_density, position, **keywords):
        result = run_chains(log_density, position, **keywords)
        calls.append(dict(keywords, n_chains=len(position), result=result))
        return result

    monkeypatch.setattr(_mcmc, "run_chains", recording)
    X, y = wave_data
    settings = dict(sampler="hmc", n_samples=3, n_burnin=5, thin=2, n_chains=2, step_size=0.02, n_leapfrog=3,
                    max_tree_depth=4, target_acceptance=0.7, adapt_step_size=False, gamma=0.5, adapt_start=2,
                    adapt_every=3)
    reg = MCMCRegressor(hidden_layer_sizes=(2,), prior_std=1.0, noise_std=0.2, init="prior", compile=False,
                        random_state=0, **settings).fit(X[:20], y[:20])
    (call,) = calls
    expected = {name: value for name, value in settings.items() if name != "n_chains"}
    assert {name: call[name] for name in expected} == expected
    assert call["n_chains"] == 2 and call["compile"] is False and call["gibbs"] is None
    draws = call["result"].draws.numpy()
    assert draws.shape[:2] == (2, 3)
    np.testing.assert_array_equal(reg.chains_, draws)
    # Rows chain by chain: chain 0's three draws, then chain 1's.
    np.testing.assert_array_equal(reg.posterior_.samples.numpy(), np.concatenate([draws[0], draws[1]]))
    np.testing.assert_allclose(reg.posterior_.weights.numpy(), np.full(6, 1 / 6))
    # The per-chain diagnostics in the chains' order: each chain's mean acceptance over its steps.
    result = call["result"]
    np.testing.assert_array_equal(reg.acceptance_rate_, result.acceptance.mean(1).numpy())
    np.testing.assert_array_equal(reg.step_size_, result.step_size.numpy())
    assert reg.n_divergent_ == int(result.divergent.sum())


@pytest.mark.parametrize("classifier", [False, True], ids=["regressor", "classifier"])
def test_the_defaults_are_the_documented_ones(classifier):
    """The defaults MCMCRegressor's docstring gives (the classifier's are "as for" the regressor's),
    written out here rather than read from either class."""
    from sklearn_quinn import MCMCClassifier

    documented = dict(hidden_layer_sizes=(50,), activation="relu", linear_skip=True, prior_std=None,
                      hyperprior="gamma", hyperprior_shape=0.5, hyperprior_rate=0.01, sampler="hmc",
                      n_samples=500, n_burnin=500, thin=1, n_chains=4, step_size="auto", n_leapfrog=40,
                      max_tree_depth=10, n_cycles=4, target_acceptance=None, adapt_step_size=True, gamma=1.0,
                      adapt_start=100, adapt_every=10, init="map", normalize_X=True, dtype="float64",
                      device="cpu", compile="auto", leapfrog_dtype="float32", n_jobs=None)
    params = (MCMCClassifier if classifier else MCMCRegressor)().get_params()
    assert {name: params[name] for name in documented} == documented


def test_sampled_hyperparameters_reach_the_chains_as_their_gibbs_updates(wave_data, monkeypatch):
    """With ``prior_std=None`` the chains get the hierarchical posterior's Gibbs updates of the precisions
    and the noise: HMC over every column targets the same posterior, so the exactness tests cannot tell
    the two apart."""
    from sklearn_quinn.mcmc import _mcmc

    built, passed = [], []
    hierarchical_posterior, run_chains = MCMCRegressor._hierarchical_posterior, _mcmc.run_chains

    def building(self, *args):
        built.append(hierarchical_posterior(self, *args))
        return built[-1]

    def recording(log_density, position, **keywords):
        passed.append((log_density, keywords["gibbs"]))
        return run_chains(log_density, position, **keywords)

    monkeypatch.setattr(MCMCRegressor, "_hierarchical_posterior", building)
    monkeypatch.setattr(_mcmc, "run_chains", recording)
    X, y = wave_data
    MCMCRegressor(hidden_layer_sizes=(2,), n_samples=2, n_burnin=2, n_leapfrog=2, n_chains=2, init="prior",
                  compile=False, random_state=0).fit(X[:20], y[:20])
    ((log_density, gibbs),) = built
    assert gibbs is not None and passed == [(log_density, gibbs)]


def test_a_map_start_in_the_units_of_far_off_targets_warns_under_a_fixed_prior_and_noise(wave_data):
    """``init='map'`` trains a network, in y's units with ``normalize_y=False``, even where the prior and
    the noise are fixed: targets of a std of 1e4 warn, as for any training (only ``init='prior'`` with
    both fixed trains nothing and is exempt)."""
    X, y = wave_data
    params = dict(hidden_layer_sizes=(2,), prior_std=1.0, noise_std=1.0, normalize_y=False, n_samples=2,
                  n_burnin=2, n_leapfrog=2, n_chains=1, max_epochs=2, compile=False, random_state=0)
    with pytest.warns(UserWarning, match="normalize_y=False: the network trains in the units of y"):
        MCMCRegressor(init="map", **params).fit(X[:20], 1e4 * y[:20])
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="normalize_y=False")
        MCMCRegressor(init="prior", **params).fit(X[:20], 1e4 * y[:20])


@pytest.mark.parametrize("n_jobs, groups", [(None, [[0, 1]]), (1, [[0, 1]]), (2, [[0], [1]]), (3, [[0], [1]])])
def test_the_chains_split_into_at_most_one_group_per_chain(n_jobs, groups):
    """Two chains take one joblib group each however many workers ``n_jobs`` asks for: a third worker
    would get no chain, and an empty start."""
    reg = MCMCRegressor(n_chains=2, n_jobs=n_jobs)
    assert [list(group) for group in reg._chain_groups()] == groups


def test_each_group_of_chains_draws_from_a_seed_of_its_own(linear_data, monkeypatch):
    """With ``n_jobs=2`` the chains run in two joblib groups, each on its own generator: one seed
    for both would give the groups the same random stream (the same momenta and accept draws), and
    the chains of one group would move as those of the other. Run here in this process, where the
    recorder is."""
    import joblib

    from sklearn_quinn.mcmc import _mcmc

    seeds = []
    run_group = MCMCRegressor._run_group

    def recording(self, log_density, start, seed, *args, **kwargs):
        seeds.append(seed)
        return run_group(self, log_density, start, seed, *args, **kwargs)

    monkeypatch.setattr(MCMCRegressor, "_run_group", recording)
    monkeypatch.setattr(_mcmc, "Parallel", lambda n_jobs: joblib.Parallel(n_jobs=1))
    X, y = linear_data
    MCMCRegressor(hidden_layer_sizes=(), n_chains=4, n_jobs=2, n_samples=4, n_burnin=4, max_epochs=5,
                  random_state=0).fit(X, y)
    assert len(seeds) == 2 and seeds[0] != seeds[1]


def test_the_classifier_keeps_each_sampling_parameter_as_given():
    """Each value apart from its default comes back from ``get_params`` (which reads what ``__init__``
    stored), so that a fit, a clone or a search sees it: an ``__init__`` that stored a constant would
    pass for the default alone."""
    from sklearn_quinn import MCMCClassifier

    given = dict(sampler="nuts", n_samples=7, n_burnin=9, thin=3, n_chains=5, step_size=0.02, n_leapfrog=6,
                 max_tree_depth=4, n_cycles=2, target_acceptance=0.7, adapt_step_size=False, gamma=0.5,
                 adapt_start=3, adapt_every=4, init="prior", hyperprior="empirical", hyperprior_shape=2.0,
                 hyperprior_rate=0.5, compile=False, leapfrog_dtype="float64", n_jobs=2)
    params = MCMCClassifier(**given).get_params()
    assert {name: params[name] for name in given} == given


@pytest.mark.parametrize("n_samples, finite", [(3, False), (4, True)])
def test_split_rhat_and_ess_from_four_draws_a_chain(wave_data, n_samples, finite):
    """Split R-hat halves each chain: from 4 draws on (two halves of two) it and the ESS are computed;
    below, NaN."""
    X, y = wave_data
    reg = MCMCRegressor(hidden_layer_sizes=(2,), prior_std=1.0, noise_std=0.2, init="prior", n_samples=n_samples,
                        n_burnin=2, n_leapfrog=2, n_chains=2, compile=False, random_state=0).fit(X[:20], y[:20])
    assert np.isfinite(reg.rhat_).all() == finite and np.isfinite(reg.ess_).all() == finite
    assert np.isnan(reg.rhat_).all() != finite
