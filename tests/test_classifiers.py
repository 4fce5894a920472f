"""The classifiers: categorical curvature and gradients against autograd, accuracy and NLL
against the MAP network on bundled data, predictive options and bad input."""

import numpy as np
import pytest
import torch
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from torch.func import grad, hessian

from sklearn_quinn import (
    BBBClassifier,
    DeepEnsembleClassifier,
    LaplaceClassifier,
    MCMCClassifier,
    RMSClassifier,
    SMCClassifier,
    SWAGClassifier,
)
from sklearn_quinn._core.curvature import curvature
from sklearn_quinn._core.likelihoods import CategoricalLikelihood
from sklearn_quinn._core.log_posterior import log_posterior
from sklearn_quinn._core.network import FunctionalModel, build_mlp
from sklearn_quinn._core.priors import GaussianPrior
from sklearn_quinn.calibration import calibrate_cv
from sklearn_quinn.metrics import accuracy, categorical_nll

CLASSIFIERS = {
    "laplace": lambda **p: LaplaceClassifier(prior_precision="marglik", **p),
    "deep_ensemble": DeepEnsembleClassifier,
    "rms": RMSClassifier,
    "swag": SWAGClassifier,
    "bbb": BBBClassifier,
    "mcmc": lambda **p: MCMCClassifier(n_samples=200, n_burnin=200, n_leapfrog=10, **p),
    # SMC starts from prior draws: no MAP training, no max_epochs.
    # 100 particles: at 50, iris's accuracy fell to 0.82 on seed 0 (0.96-0.98 on seeds 1-2; 0.98-1.0 on
    # seeds 0-2 before) once the input columns' precisions were sampled about their layer's mean; at 100,
    # 0.96-1.0 on iris and 0.94-0.96 on breast cancer over seeds 0-2.
    "smc": lambda max_epochs, **p: SMCClassifier(n_particles=100, n_leapfrog=10, **p),
}


@pytest.fixture
def softmax_problem():
    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(3, 4, (5,), "tanh").double())
    X = torch.randn(12, 3, dtype=torch.float64)
    Y = torch.randint(0, 4, (12, 1)).double()
    return model, model.flatten(), X, Y


def _cross_entropy(model, X, Y):
    return lambda theta: torch.nn.functional.cross_entropy(model.single(theta, X), Y[:, 0].long(), reduction="sum")


def test_categorical_hessian_and_ggn(softmax_problem):
    """The Hessian is autograd's; the GGN is sum_n J_n^T (diag p - p p^T) J_n."""
    model, theta, X, Y = softmax_problem
    likelihood = CategoricalLikelihood()
    expected = hessian(_cross_entropy(model, X, Y))(theta)
    torch.testing.assert_close(curvature(model, theta, X, Y, likelihood, "hessian", "full"), expected)
    jac = model.jacobian(theta, X)
    p = torch.softmax(model.single(theta, X), dim=-1)
    output_hessian = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)
    expected = torch.einsum("nck,ncd,ndl->kl", jac, output_hessian, jac)
    torch.testing.assert_close(curvature(model, theta, X, Y, likelihood, "ggn", "full"), expected)


def test_categorical_empirical_fisher(softmax_problem):
    model, theta, X, Y = softmax_problem
    gradients = torch.stack([grad(_cross_entropy(model, X[i : i + 1], Y[i : i + 1]))(theta) for i in range(len(X))])
    ef = curvature(model, theta, X, Y, CategoricalLikelihood(), "ef", "full")
    torch.testing.assert_close(ef, gradients.T @ gradients)


def test_linear_softmax_ggn_is_the_hessian():
    """For a linear model the logits are linear in the weights: GGN = Hessian."""
    torch.manual_seed(1)
    model = FunctionalModel(build_mlp(3, 3, ()).double())
    X, Y = torch.randn(30, 3, dtype=torch.float64), torch.randint(0, 3, (30, 1)).double()
    theta = model.flatten()
    ggn = curvature(model, theta, X, Y, CategoricalLikelihood(), "ggn", "full")
    torch.testing.assert_close(ggn, curvature(model, theta, X, Y, CategoricalLikelihood(), "hessian", "full"))


def test_hand_written_classification_gradient(softmax_problem):
    model, _, X, Y = softmax_problem
    log_density = log_posterior(model, X, Y, CategoricalLikelihood(), GaussianPrior(0.7))
    rows = 0.3 * torch.randn(3, model.n_params, dtype=torch.float64)
    value, gradient = log_density.value_and_grad(rows)
    leaf = rows.clone().requires_grad_(True)
    expected = log_density(leaf)
    (expected_gradient,) = torch.autograd.grad(expected.sum(), leaf)
    torch.testing.assert_close(value, expected.detach())
    torch.testing.assert_close(gradient, expected_gradient)


def _split(loader):
    X, y = loader(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    scaler = StandardScaler().fit(X_train)
    return scaler.transform(X_train), scaler.transform(X_test), y_train, y_test


SETTINGS = dict(hidden_layer_sizes=(50,), max_epochs=500, random_state=0)


@pytest.mark.slow
@pytest.mark.parametrize("loader", [load_iris, load_breast_cancer], ids=["iris", "breast_cancer"])
@pytest.mark.parametrize("name", sorted(CLASSIFIERS))
def test_accuracy_on_bundled_data(loader, name):
    """Every family classifies real data: above 0.9 accuracy on held-out rows, with a small network
    trained briefly (measured 0.95-1.0 for every family on both tables; 50 hidden units and 500 epochs
    add nothing to what this shows)."""
    X_train, X_test, y_train, y_test = _split(loader)
    clf = CLASSIFIERS[name](hidden_layer_sizes=(16,), max_epochs=100, random_state=0).fit(X_train, y_train)
    assert accuracy(y_test, clf.predict_proba(X_test), labels=clf.classes_) > 0.9


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mcmc", "rms", "smc"])
def test_posterior_averaging_beats_the_map_network_on_iris(name):
    """Test NLL below the MAP network's (same backbone, prior and training) on
    this split, by a clear margin (HMC 0.056, RMS 0.047 and SMC 0.054, with
    100 particles, vs the MAP's 0.078): the samplers and the anchored ensemble leave the mode. This
    is one split, not a law: over 20 splits HMC and RMS are level with the
    MAP on iris (NLL difference +0.001 ± 0.004 and +0.005 ± 0.009), and the
    families centred on the MAP cannot beat it there (it is under-confident
    under this prior); see benchmarks/bench_classifiers.py and
    docs/classification.rst."""
    X_train, X_test, y_train, y_test = _split(load_iris)
    # The fixed N(0, 1) prior these figures were measured under, for both.
    settings = dict(SETTINGS, prior_std=1.0)
    clf = CLASSIFIERS[name](**settings).fit(X_train, y_train)
    map_nll = _map_nll(X_train, y_train, X_test, y_test, settings)
    assert categorical_nll(y_test, clf.predict_proba(X_test), labels=clf.classes_) < 0.8 * map_nll


def _map_nll(X_train, y_train, X_test, y_test, settings):
    map_net = LaplaceClassifier(**settings).fit(X_train, y_train)
    with torch.no_grad():
        logits = map_net._model.single(map_net.posterior_.mean, map_net._validated_inputs(X_test))
    return categorical_nll(y_test, torch.softmax(logits, -1).numpy(), labels=map_net.classes_)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:The best prior_precision")
@pytest.mark.parametrize("loader", [load_iris, load_breast_cancer], ids=["iris", "breast_cancer"])
def test_cross_validated_laplace_is_no_worse_than_the_map(loader):
    """With its prior precision chosen by 3-fold CV, the Laplace classifier's NLL is
    at most 1% above its MAP network's (iris 0.0796 vs 0.0796, breast cancer 0.0963
    vs 0.0969 on this split, after 250 epochs; the posterior at the MAP's own prior
    precision scores 0.0796 and 0.0962). On iris the MAP is under-confident (its
    NLL halves at temperature 0.5), so no Gaussian around it can do better and the
    CV picks the narrowest posterior of the grid."""
    X_train, X_test, y_train, y_test = _split(loader)
    settings = dict(SETTINGS, prior_std=1.0, max_epochs=250)  # the fixed prior these figures were measured under
    clf, _ = calibrate_cv(LaplaceClassifier(**settings), X_train, y_train, param="prior_precision", cv=3)
    nll = categorical_nll(y_test, clf.predict_proba(X_test), labels=clf.classes_)
    assert nll < 1.01 * _map_nll(X_train, y_train, X_test, y_test, settings)


# Largest |p - p_mc_bridge| allowed on iris's test points, where this network's
# logit variances are large (median 6, up to 18); the Laplace bridge is known to
# be less confident than the Gaussian integral there. Moderate variances are
# tested against 100k-draw integrals in test_predictives.py.
PREDICTIVE_BANDS = {"mc_bridge": 0.0, "laplace_bridge": 0.3, "mean_field_0": 0.2, "mean_field_1": 0.2,
                    "mean_field_2": 0.2}


@pytest.mark.parametrize("predictive", sorted(PREDICTIVE_BANDS))
def test_laplace_predictives(predictive):
    X_train, X_test, y_train, _ = _split(load_iris)
    clf = LaplaceClassifier(hidden_layer_sizes=(16,), prior_std=1.0, max_epochs=200, predictive=predictive,
                            random_state=0)
    proba = clf.fit(X_train, y_train).predict_proba(X_test)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    reference = clf.set_params(predictive="mc_bridge").predict_proba(X_test)  # same posterior
    assert np.abs(proba - reference).max() <= PREDICTIVE_BANDS[predictive]


def test_moment_matching_on_draws():
    X_train, X_test, y_train, _ = _split(load_iris)
    clf = DeepEnsembleClassifier(hidden_layer_sizes=(16,), max_epochs=100, random_state=0)
    averaged = clf.fit(X_train, y_train).predict_proba(X_test)
    matched = clf.set_params(predictive="mean_field_1", moment_match=True).predict_proba(X_test)
    np.testing.assert_allclose(matched.sum(1), 1.0)
    assert np.abs(matched - averaged).max() < 0.2


def test_string_labels_and_log_proba():
    X_train, X_test, y_train, _ = _split(load_iris)
    names = np.array(["setosa", "versicolor", "virginica"])
    clf = DeepEnsembleClassifier(hidden_layer_sizes=(8,), max_epochs=50, n_estimators=2, random_state=0)
    clf.fit(X_train, names[y_train])
    assert set(clf.predict(X_test)) <= set(names)
    np.testing.assert_allclose(np.exp(clf.predict_log_proba(X_test)), clf.predict_proba(X_test))
    np.testing.assert_allclose(np.exp(clf.predict_log_proba(X_test)).sum(1), 1.0, rtol=1e-12)  # over the classes


@pytest.mark.parametrize("estimator", [DeepEnsembleClassifier(n_estimators=2), LaplaceClassifier()],
                         ids=lambda estimator: type(estimator).__name__)
def test_log_probabilities_stay_finite_where_the_probabilities_underflow(estimator):
    """Rows 1000 times out put a class's probability below float64's smallest: ``predict_proba`` says 0,
    ``predict_log_proba`` its finite log, computed in logs, and the log of every other probability."""
    X, y = np.random.RandomState(0).randn(60, 2), np.arange(60) % 3
    X[y == 1] += 3
    X[y == 2] -= 3
    clf = estimator.set_params(hidden_layer_sizes=(8,), max_epochs=100, random_state=0).fit(X, y)
    far = 1000 * np.array([[1.0, 1.0], [-1.0, -1.0]])
    proba, log_proba = clf.predict_proba(far), clf.predict_log_proba(far)
    assert (proba == 0).any() and np.isfinite(log_proba).all()
    np.testing.assert_allclose(np.exp(log_proba), proba, rtol=1e-12, atol=0)
    if isinstance(clf, DeepEnsembleClassifier):  # the members' mixture, written out
        theta, _ = clf._prediction_draws()
        logits = clf._model(theta, clf._validated_inputs(far))
        reference = torch.logsumexp(torch.log_softmax(logits, dim=-1), dim=0) - np.log(len(theta))
        np.testing.assert_allclose(log_proba, reference.numpy(), rtol=1e-10)


def test_marglik_maximises_the_evidence():
    X_train, _, y_train, _ = _split(load_iris)
    clf = LaplaceClassifier(hidden_layer_sizes=(8,), max_epochs=100, prior_precision="marglik", random_state=0)
    clf.fit(X_train, y_train)
    best = clf.log_marginal_likelihood()
    for factor in (0.8, 1.25):
        assert clf.log_marginal_likelihood(clf.prior_precision_ * factor) < best


@pytest.mark.parametrize(
    "estimator, y, message",
    [
        (DeepEnsembleClassifier(), np.zeros(20), "at least 2 classes"),
        (LaplaceClassifier(), np.r_[np.zeros(10), np.ones(9), np.nan], "NaN"),
        (LaplaceClassifier(predictive="probit"), np.arange(20) % 2, "predictive"),
        (RMSClassifier(predictive="laplace_bridge"), np.arange(20) % 2, "moment_match=True"),
        (MCMCClassifier(predictive="mean_field_0"), np.arange(20) % 2, "needs a Gaussian over the logits"),
        (DeepEnsembleClassifier(moment_match=True), np.arange(20) % 2, "Choose a predictive"),
        (LaplaceClassifier(prior_precision="gridsearch", validation_fraction=0.05), np.arange(20) % 4,
         "validation_fraction=0.05 of 20 rows"),
        (LaplaceClassifier(pushforward="nonlinear", predictive="laplace_bridge"), np.arange(20) % 2,
         "pushforward='linear'"),
    ],
)
def test_bad_input(estimator, y, message):
    X = np.random.RandomState(0).randn(20, 3)
    with pytest.raises(ValueError, match=message):
        estimator.set_params(max_epochs=5).fit(X, y)


@pytest.mark.parametrize("width", [3, 5])
def test_a_refit_refused_for_one_class_keeps_the_earlier_fit(width):
    """The one-class check comes before ``classes_`` is set, and a refusal after scikit-learn's
    validation restores the width it had set: the earlier fit still predicts its own classes
    (it kept a one-element ``classes_`` and failed with an IndexError, or expected 5 features)."""
    rng = np.random.RandomState(0)
    X, y = rng.randn(20, 3), np.array(["a", "b", "c", "d"] * 5)
    clf = LaplaceClassifier(hidden_layer_sizes=(4,), max_epochs=5, random_state=0).fit(X, y)
    proba = clf.predict_proba(X)
    with pytest.raises(ValueError, match="at least 2 classes"):
        clf.fit(rng.randn(20, width), np.full(20, "z"))
    assert clf.classes_.tolist() == ["a", "b", "c", "d"] and clf.n_features_in_ == 3
    np.testing.assert_array_equal(clf.predict_proba(X), proba)


def test_a_predictive_set_after_fit_is_checked_at_predict():
    """``set_params`` after fit does not get round the fit's check of ``predictive``."""
    X, y = np.random.RandomState(0).randn(20, 3), np.arange(20) % 2
    clf = DeepEnsembleClassifier(hidden_layer_sizes=(4,), n_estimators=2, max_epochs=5, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="needs a Gaussian over the logits"):
        clf.set_params(predictive="mean_field_1").predict_proba(X)
    with pytest.raises(ValueError, match="Choose a predictive"):
        clf.set_params(predictive=None, moment_match=True).predict_proba(X)
    assert clf.set_params(predictive="mean_field_1").predict_proba(X).shape == (20, 2)
    laplace = LaplaceClassifier(hidden_layer_sizes=(4,), max_epochs=5, pushforward="nonlinear", n_samples=5,
                                random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="pushforward='linear'"):
        laplace.set_params(predictive="laplace_bridge").predict_proba(X)


def test_laplace_nonlinear_averages_the_softmax_over_its_weight_draws():
    """``pushforward='nonlinear'``: the probabilities are the mean of the softmax over the posterior's
    weight draws, as the docs say, not a Gaussian fitted to the draws' logits and bridged (up to
    0.07 apart on iris at a wide prior)."""
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    clf = LaplaceClassifier(hidden_layer_sizes=(8,), max_epochs=100, prior_std=1.0, cov_scale=1.0,
                            pushforward="nonlinear", n_samples=200, random_state=0).fit(X, y)
    with torch.no_grad():
        draws = clf._outputs(clf._validated_inputs(X)).samples
        expected = torch.softmax(draws, dim=-1).mean(0).numpy()
    np.testing.assert_allclose(clf.predict_proba(X), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("context", [torch.inference_mode, lambda: torch.autograd.set_detect_anomaly(True)],
                         ids=["inference_mode", "anomaly_mode"])
def test_laplace_probabilities_in_a_callers_torch_context(context):
    """The layered output covariance (chosen here, three classes on 60 rows) took a batched backward
    pass that torch.inference_mode (no graph) and anomaly mode (no batching rule) refused; both are
    PyTorch's own contexts for prediction and for debugging a user's module."""
    rng = np.random.RandomState(0)
    X = rng.randn(60, 3)
    y = (X[:, 0] + 0.5 * rng.randn(60) > 0).astype(int) + (X[:, 2] > 1)
    clf = LaplaceClassifier(hidden_layer_sizes=(8,), max_epochs=10, random_state=0).fit(X, y)
    expected = clf.predict_proba(X)
    with context():
        np.testing.assert_array_equal(clf.predict_proba(X), expected)


@pytest.mark.parametrize("predictive", ["mc_bridge", "laplace_bridge", "mean_field_2"])
def test_float32_classifier_probabilities_sum_to_one_in_float64(predictive):
    """``predict_proba`` is float64 with rows summing to one to float64 rounding, also where the
    network and its predictive run in float32 (whose own sums are off by about 1e-7)."""
    from sklearn.datasets import load_iris

    from sklearn_quinn import LaplaceClassifier

    X, y = load_iris(return_X_y=True)
    clf = LaplaceClassifier(hidden_layer_sizes=(4,), max_epochs=10, predictive=predictive, dtype="float32",
                            random_state=0).fit(X, y)
    proba = clf.predict_proba(X)
    assert proba.dtype == np.float64
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=0, atol=1e-12)
