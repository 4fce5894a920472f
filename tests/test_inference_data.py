"""to_inference_data: the MCMC and SMC draws as ArviZ's InferenceData, value for value."""

import copy
import sys
import warnings

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import NotFittedError

from sklearn_quinn import MCMCClassifier, MCMCRegressor, SMCRegressor

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)  # ArviZ 0.2x announces its 1.0 refactor
    arviz = pytest.importorskip("arviz")

SMALL = dict(hidden_layer_sizes=(4,), max_epochs=30, random_state=0)


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    X = rng.randn(40, 2)
    return X, X @ [1.0, -0.5] + 0.3 * rng.randn(40)


@pytest.fixture(scope="module")
def hmc(data):
    return MCMCRegressor(n_chains=3, n_burnin=30, n_samples=40, thin=2, **SMALL).fit(*data)


def test_the_posterior_holds_every_weight_per_chain_and_draw(hmc):
    idata = hmc.to_inference_data()
    assert dict(idata.posterior.sizes)["chain"] == 3 and dict(idata.posterior.sizes)["draw"] == 40
    start = 0
    for name, shape, size in zip(hmc._model.names, hmc._model.shapes, hmc._model.sizes):
        values = idata.posterior[name].values
        assert values.shape == (3, 40, *shape)
        assert_array_equal(values.reshape(3, 40, size), hmc.chains_[..., start : start + size])
        start += size
    assert idata.attrs["estimator"] == "MCMCRegressor"


def test_the_noise_is_per_draw_in_the_units_of_y(hmc):
    noise = hmc.to_inference_data().posterior["noise_std"].values
    assert noise.shape == (3, 40, 1)
    # noise_std_ is the root mean square of the draws' noise std.
    assert_allclose(np.sqrt(np.mean(noise**2)), hmc.noise_std_, rtol=1e-12)
    # The sampled column is the log noise std in the network's units (normalize_y scales it).
    n_params = hmc._model.n_params
    assert_allclose(noise[..., 0], np.exp(hmc.chains_[..., n_params]) * hmc._y_scale[0], rtol=1e-12)


def test_sample_stats_summarise_each_thinning_block(hmc):
    stats = hmc.to_inference_data().sample_stats
    assert_allclose(stats["acceptance_rate"].values.mean(1), hmc.acceptance_rate_, rtol=1e-12)
    assert stats["diverging"].values.dtype == bool
    assert int(stats["diverging"].values.sum()) <= hmc.n_divergent_
    assert_array_equal(stats["step_size"].values, np.repeat(hmc.step_size_[:, None], 40, axis=1))
    assert stats.attrs["sampler"] == "hmc" and stats.attrs["thin"] == 2


def test_sample_stats_reduce_each_run_of_thin_consecutive_steps_to_its_draw(hmc):
    """Draw d of a chain is kept after steps 2d and 2d + 1 (thin=2): its acceptance rate is their
    mean, it diverged if either did, and its leapfrog steps (NUTS's) are their sum. Per-step records
    set by hand on a copy of the fit, where each rule gives other values than a strided grouping
    (steps d and d + 40), a divergence of both steps, or a mean of the steps would."""
    model = copy.copy(hmc)
    steps = torch.arange(3 * 80).reshape(3, 80)
    model._acceptance = steps.to(torch.float64) / 240
    model._divergent = ((steps % 6 == 0) | (steps % 10 == 1)).clone()
    model._n_leapfrog = steps.clone()
    stats = model.to_inference_data().sample_stats
    pairs = np.arange(3 * 80).reshape(3, 40, 2)  # chain-major steps, two to a draw
    even, odd = pairs[..., 0], pairs[..., 1]
    assert_allclose(stats["acceptance_rate"].values, (even + odd) / 2 / 240, rtol=1e-12)
    assert_array_equal(stats["diverging"].values, (even % 6 == 0) | (odd % 10 == 1))
    assert 0 < stats["diverging"].values.sum() < 120
    assert_array_equal(stats["n_steps"].values, even + odd)


def test_the_dataset_names_its_dimensions_and_its_source(hmc, data):
    """The dimensions of the documentation, which arviz.summary and the plots label with."""
    idata = hmc.to_inference_data(*data)
    assert idata.posterior["noise_std"].dims == ("chain", "draw", "target")
    assert idata.posterior["prior_precision"].dims == ("chain", "draw", "group")
    assert idata.log_likelihood["y"].dims == ("chain", "draw", "y_dim_0")
    assert idata.attrs["inference_library"] == "sklearn_quinn"


def test_sample_stats_describe_the_fit_whatever_set_params_says_after_it(data):
    """``thin`` changed after fit made to_inference_data fail reshaping the per-step statistics,
    and a changed ``sampler`` or ``n_burnin`` was written as the draws' own. So was a pickle's
    from before the settings were recorded: it takes them from its parameters."""
    model = MCMCRegressor(n_chains=2, n_burnin=30, n_samples=15, thin=2, **SMALL).fit(*data)
    expected = model.to_inference_data().sample_stats
    model.set_params(thin=3, sampler="mala", n_burnin=7)
    stats = model.to_inference_data().sample_stats
    assert stats.attrs["sampler"] == "hmc" and stats.attrs["thin"] == 2 and stats.attrs["n_burnin"] == 30
    assert_array_equal(stats["acceptance_rate"].values, expected["acceptance_rate"].values)
    older = {name: value for name, value in vars(model).items() if name != "_sampling"}
    older.update(thin=2, sampler="hmc", n_burnin=30)
    assert model._state_loaded(older)["_sampling"] == {"sampler": "hmc", "n_burnin": 30, "thin": 2}


def test_arviz_diagnostics_agree_with_the_fitted_ones(hmc):
    """ArviZ's rank-normalised split R-hat and bulk ESS (Vehtari et al. 2021) are the package's."""
    idata = hmc.to_inference_data()
    name = hmc._model.names[0]
    size = hmc._model.sizes[0]
    assert_allclose(arviz.rhat(idata, var_names=[name])[name].values.ravel(), hmc.rhat_[:size], rtol=1e-6)
    assert_allclose(arviz.ess(idata, var_names=[name])[name].values.ravel(), hmc.ess_[:size], rtol=1e-6)
    assert "mean" in arviz.summary(idata, var_names=["noise_std"]).columns
    # The noise and the precisions are exported in their own units, their diagnostics are of their logs
    # (the columns sampled): bulk ESS, of the ranks, is the same; R-hat's folded half is not.
    hyper = np.concatenate([idata.posterior["noise_std"].values, idata.posterior["prior_precision"].values], axis=-1)
    columns = slice(hmc._model.n_params, hmc._model.n_params + hyper.shape[-1])
    assert_allclose([float(arviz.ess(hyper[..., i])) for i in range(hyper.shape[-1])], hmc.ess_[columns], rtol=1e-6)
    # The exported logs are the sampled columns to rounding (the noise's shifted by the log of the
    # targets' scale), so that an export mixing up chains, draws or columns fails here. That rounding
    # can break the tie that the folded draws' median makes between its two middle draws (an even
    # count), which moves R-hat by 2e-3 (seen with two threads): R-hat is compared on the columns sampled.
    shift = np.log(hyper) - hmc.chains_[..., columns]
    assert_allclose(shift, np.broadcast_to(shift[:1, :1], shift.shape), rtol=0, atol=1e-12)
    assert_allclose([float(arviz.rhat(hmc.chains_[..., i])) for i in range(columns.start, columns.stop)],
                    hmc.rhat_[columns], rtol=1e-6)


def test_nuts_reports_its_leapfrog_steps_and_each_divergence(data):
    nuts = MCMCRegressor(sampler="nuts", n_chains=2, n_burnin=20, n_samples=15, **SMALL).fit(*data)
    stats = nuts.to_inference_data().sample_stats
    assert_allclose(stats["n_steps"].values.mean(1), nuts.trajectory_length_, rtol=1e-12)
    assert int(stats["diverging"].values.sum()) == nuts.n_divergent_  # thin=1: one step a draw


def test_stochastic_gradient_draws_have_a_statistic_per_draw(data):
    sgld = MCMCRegressor(sampler="sgld", hyperprior="empirical", n_chains=2, n_samples=15, n_burnin=30, batch_size=10,
                         **SMALL).fit(*data)
    stats = sgld.to_inference_data().sample_stats
    assert stats["diverging"].shape == (2, 15)
    assert not stats["diverging"].values.any()  # a stochastic-gradient step is never rejected
    assert stats.attrs["sampler"] == "sgld"


def test_sampled_prior_precisions_are_a_variable_by_group(data):
    model = MCMCRegressor(hyperprior="gamma", n_chains=2, n_burnin=20, n_samples=10, **SMALL).fit(*data)
    precision = model.to_inference_data().posterior["prior_precision"]
    assert list(precision.coords["group"].values) == list(model.prior_precisions_)
    assert_array_equal(precision.values.reshape(20, -1), model.prior_precision_samples_)


def test_a_classifier_and_a_heteroscedastic_regressor_have_no_noise_variable(data):
    X, y = data
    classifier = MCMCClassifier(n_chains=2, n_burnin=10, n_samples=5, **SMALL).fit(X, y > 0)
    heteroscedastic = MCMCRegressor(likelihood="heteroscedastic", n_chains=2, n_burnin=10, n_samples=5,
                                    **SMALL).fit(X, y)
    for model in (classifier, heteroscedastic):
        posterior = model.to_inference_data().posterior
        assert "noise_std" not in posterior
        assert set(posterior.data_vars) == {*model._model.names, "prior_precision"}


@pytest.mark.parametrize("waste_free", [False, True], ids=["standard", "waste-free"])
def test_smc_particles_are_one_weighted_chain(data, waste_free):
    """Every particle with its weight and its move's parameters (waste-free: its chain's)."""
    smc = SMCRegressor(hidden_layer_sizes=(3,), n_particles=32, n_mcmc_steps=1, n_leapfrog=5, waste_free=waste_free,
                       random_state=0).fit(*data)
    idata = smc.to_inference_data()
    assert smc.step_size_.shape == smc.n_leapfrog_.shape == (32,)
    assert dict(idata.posterior.sizes)["chain"] == 1 and dict(idata.posterior.sizes)["draw"] == 32
    assert_array_equal(idata.sample_stats["weight"].values[0], smc.weights_)
    assert_array_equal(idata.sample_stats["n_steps"].values[0], smc.n_leapfrog_)
    assert idata.sample_stats.attrs["lambdas"][-1] == 1.0
    assert idata.sample_stats.attrs["log_evidence"] == smc.log_evidence_
    first = smc._model.names[0]
    assert_array_equal(idata.posterior[first].values.reshape(32, -1), smc.particles_[:, : smc._model.sizes[0]])
    # The precisions it samples by default, as MCMC's (the particles' were dropped).
    assert_array_equal(idata.posterior["prior_precision"].values.reshape(32, -1), smc.prior_precision_samples_)
    np.testing.assert_allclose(smc.weights_ @ smc.prior_precision_samples_, list(smc.prior_precisions_.values()))


def test_smc_stages_are_the_sample_stats_attributes(data):
    """Each stage's record under its own name, and each particle's step size and leapfrog steps."""
    smc = SMCRegressor(hidden_layer_sizes=(3,), n_particles=16, n_mcmc_steps=1, n_leapfrog=3, random_state=1).fit(*data)
    stats = smc.to_inference_data().sample_stats
    assert_array_equal(stats.attrs["ess_history"], smc.ess_history_)
    assert_array_equal(stats.attrs["acceptance_history"], smc.acceptance_history_)
    assert_array_equal(stats.attrs["lambdas"], smc.lambdas_)
    assert_array_equal(stats["step_size"].values, smc.step_size_[None])


def test_without_arviz_the_error_says_how_to_install_it(hmc, monkeypatch):
    monkeypatch.setitem(sys.modules, "arviz", None)
    with pytest.raises(ImportError, match=r"pip install 'sklearn_quinn\[arviz\]'"):
        hmc.to_inference_data()


def test_an_unfitted_estimator_has_no_draws():
    with pytest.raises(NotFittedError):
        MCMCRegressor().to_inference_data()


def test_the_log_likelihood_of_each_row_under_each_draw(hmc, data):
    """With X and y, the pointwise log density in the units of y, each draw with its own noise:
    what arviz.loo and arviz.waic need."""
    X, y = data
    idata = hmc.to_inference_data(X, y)
    values = idata.log_likelihood["y"].values
    assert values.shape == (3, 40, len(y))
    draws = hmc.posterior_.samples
    outputs = hmc._model(draws, hmc._validated_inputs(X))[..., 0].numpy() * hmc._y_scale[0] + hmc._y_mean[0]
    noise = hmc._draw_noise.numpy()[:, 0] * hmc._y_scale[0]
    expected = -0.5 * ((y - outputs) / noise[:, None]) ** 2 - np.log(noise[:, None]) - 0.5 * np.log(2 * np.pi)
    # A row's log density is a sum of terms of order one, and may cancel to near zero, where a
    # relative tolerance alone would judge the rounding of those terms.
    assert_allclose(values.reshape(120, -1), expected, rtol=1e-10, atol=1e-12)
    assert_array_equal(idata.observed_data["y"].values, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Pareto k of a few rows with 120 draws
        loo = arviz.loo(idata)
    assert np.isfinite(loo.elpd_loo) and loo.elpd_loo < values.mean(axis=(0, 1)).sum()


def test_a_classifier_scores_labels_and_refuses_unseen_ones(data):
    X, y = data
    labels = np.where(y > 0, "up", "down")
    classifier = MCMCClassifier(n_chains=2, n_burnin=10, n_samples=5, **SMALL).fit(X, labels)
    values = classifier.to_inference_data(X, labels).log_likelihood["y"].values.reshape(10, -1)
    logits = classifier._model(classifier.posterior_.samples, classifier._validated_inputs(X)).numpy()
    log_softmax = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    index = np.searchsorted(classifier.classes_, labels)
    # atol: a log probability near 0 (-1e-8 and above) rounds apart in the two computations by 1e-16
    assert_allclose(values, log_softmax[:, np.arange(len(labels)), index], rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="labels not seen in fit"):
        classifier.to_inference_data(X, np.where(y > 0, "up", "sideways"))
    with pytest.raises(ValueError, match="expected 40, one per row"):
        classifier.to_inference_data(X, labels[:1])


def test_scoring_needs_both_x_and_y_of_matching_shapes(hmc, data):
    X, y = data
    with pytest.raises(ValueError, match="both X and y"):
        hmc.to_inference_data(X)
    for wrong in (np.tile(y, 2), y[:-1], np.column_stack([y, y])):
        with pytest.raises(ValueError, match="expected 40 rows"):
            hmc.to_inference_data(X, wrong)


def test_a_heteroscedastic_regressor_scores_each_row_with_its_own_noise(data):
    X, y = data
    model = MCMCRegressor(likelihood="heteroscedastic", n_chains=2, n_burnin=10, n_samples=5, **SMALL).fit(X, y)
    values = model.to_inference_data(X, y).log_likelihood["y"].values.reshape(10, -1)
    outputs = model._model(model.posterior_.samples, model._validated_inputs(X)).numpy()
    mean = outputs[..., 0] * model._y_scale[0] + model._y_mean[0]
    # The log std head is clipped at +-10 in the training's density, with a slope of 0.01 beyond.
    clipped = np.clip(outputs[..., 1], -10, 10)
    std = np.exp(clipped + 0.01 * (outputs[..., 1] - clipped)) * model._y_scale[0]
    expected = -0.5 * ((y - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)
    assert_allclose(values, expected, rtol=1e-8)
