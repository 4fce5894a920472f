"""DeepEnsembleRegressor and RMSRegressor: exactness of RMS for a linear model, batching, joblib."""

import numpy as np
import pytest
import torch
from joblib import parallel_backend
from scipy.stats import norm
from torch import nn

from sklearn_quinn import (
    DeepEnsembleClassifier,
    DeepEnsembleRegressor,
    LaplaceRegressor,
    RMSClassifier,
    RMSRegressor,
)
from sklearn_quinn._core.likelihoods import CategoricalLikelihood
from sklearn_quinn._core.network import FunctionalModel, build_mlp
from sklearn_quinn._core.row_subsets import random_rows
from sklearn_quinn._map import gaussian_likelihood
from sklearn_quinn.ensemble._engine import (
    AnchoredNegativeLogPosterior,
    StackedMembers,
    member_targets,
    padded_perturbations,
)

from .exact import BayesianLinearRegression
from .test_local_posterior import map_posterior_variance
from .test_map import assert_flat_loss_is_the_criterions

NOISE, PRIOR_STD = 0.3, 1.0


def linear_rms(n_estimators, noise_std=NOISE, prior_std=PRIOR_STD, **params):
    return RMSRegressor(
        hidden_layer_sizes=(),
        n_estimators=n_estimators,
        noise_std=noise_std,
        prior_std=prior_std,
        normalize_X=False,
        normalize_y=False,
        lr=0.1,
        max_epochs=300,
        batch_size=40,
        random_state=0,
        **params,
    )


def small(estimator=DeepEnsembleRegressor, **params):
    return estimator(**{**dict(hidden_layer_sizes=(8,), max_epochs=40, random_state=0), **params})


@pytest.mark.parametrize("noise_std, prior_std", [(NOISE, PRIOR_STD), (3.0, 0.3)], ids=["data", "prior"])
def test_rms_members_are_exact_posterior_draws(linear_data, device, noise_std, prior_std):
    """J = 500 members of a linear model: mean within 4 Monte Carlo standard
    errors of the exact posterior mean, every covariance entry within 4 standard
    errors of a sample covariance, ``sqrt((S_ij^2 + S_ii S_jj) / J)``. Where the
    data dominate and where the prior holds most of the precision (noise 3, 40 rows:
    a weight's data precision about 4 against the prior's 11), at a prior std
    other than 1, where an anchor drawn at the prior's variance for its std looks the same."""
    X, y = linear_data
    n_members = 500
    draws = linear_rms(n_members, noise_std, prior_std, device=device).fit(X, y).posterior_.samples.cpu().numpy()
    exact = BayesianLinearRegression(X, y, noise_std, prior_std)
    cov = exact.covariance
    assert (np.abs(draws.mean(0) - exact.mean) < 4 * np.sqrt(np.diag(cov) / n_members)).all()
    cov_error = np.sqrt((cov**2 + np.outer(np.diag(cov), np.diag(cov))) / n_members)
    assert (np.abs(np.cov(draws.T) - cov) < 4 * cov_error).all()


def test_rms_degrees_of_freedom_are_the_fits_covariance_with_the_perturbations(linear_data, monkeypatch):
    """Three members of a linear model with a learned noise: ``degrees_of_freedom_`` is
    ``sum_j <f_j - f_mean, eps_j> / ((J - 1) noise)`` of the members' outputs on the training rows
    and their standard-normal perturbations, read from the fit and written out here, to rounding
    (the statistical test of 500 members could not tell ``J`` from ``J - 1``)."""
    from sklearn_quinn.ensemble._ensemble import BaseEnsembleRegressor, EnsembleMixin

    seen = {}
    members_noise, own_noise = BaseEnsembleRegressor._members_noise, EnsembleMixin._members_noise

    def spy(self, X, Y, theta, likelihoods, perturbations):
        seen.update(X=X, theta=theta, perturbations=perturbations,
                    noise=own_noise(self, X, Y, theta, likelihoods, perturbations))
        return members_noise(self, X, Y, theta, likelihoods, perturbations)

    monkeypatch.setattr(BaseEnsembleRegressor, "_members_noise", spy)
    X, y = linear_data
    reg = RMSRegressor(hidden_layer_sizes=(), n_estimators=3, normalize_X=False, normalize_y=False,
                       max_epochs=100, random_state=0).fit(X, y)
    outputs = reg._model(seen["theta"], torch.as_tensor(seen["X"])).detach().numpy()[..., 0]  # (J, N)
    eps = seen["perturbations"].numpy()[..., 0]
    by_hand = ((outputs - outputs.mean(0)) * eps).sum() / (2 * float(seen["noise"][0, 0]))
    assert reg.degrees_of_freedom_ == pytest.approx(by_hand, rel=1e-10)


@pytest.mark.parametrize("polished", [False, True])
def test_deep_ensemble_members_end_at_the_exact_map_of_a_linear_model(linear_data, device, polished, monkeypatch):
    """Twenty epochs of Adam leave a linear model's members far from the mode; the full-batch
    L-BFGS polish that ends their training (:func:`~sklearn_quinn._map.polish`, as it ends the
    MAP's) takes every one to the closed-form posterior mean to 1e-6."""
    if not polished:
        monkeypatch.setattr("sklearn_quinn.ensemble._engine.polishable", lambda n_rows, module: False)
    X, y = linear_data
    exact = BayesianLinearRegression(X, y, NOISE, PRIOR_STD)
    members = DeepEnsembleRegressor(
        hidden_layer_sizes=(), n_estimators=3, noise_std=NOISE, prior_std=PRIOR_STD, normalize_X=False,
        normalize_y=False, lr=0.01, max_epochs=20, batch_size=16, random_state=0, device=device,
    ).fit(X, y).posterior_.samples.cpu().numpy()
    relative_error = np.abs(members / exact.mean - 1).max()
    assert relative_error < 1e-6 if polished else relative_error > 1e-2


@pytest.mark.parametrize("task", ["gaussian, perturbed, a noise per member trained", "categorical"])
def test_the_members_flat_loss_is_the_anchored_criterions_with_its_gradients(task):
    """The members' polish takes the stacked weights through the hand-written backward pass
    (:class:`~sklearn_quinn._map.FlatPosteriorLoss`, a row per member): its loss is the anchored
    criterion's, its gradients autograd's, each member's trained noise's included."""
    rng = np.random.RandomState(0)
    n_members, n_rows = 3, 30
    X = torch.as_tensor(rng.randn(40, 3))
    rows = torch.as_tensor(np.stack([rng.choice(40, n_rows, replace=False) for _ in range(n_members)]))
    torch.manual_seed(0)
    if task.startswith("gaussian"):
        model = FunctionalModel(build_mlp(3, 2, (8,), "tanh", linear_skip=True).double())
        Y = torch.as_tensor(rng.randn(40, 2))
        likelihood = gaussian_likelihood(Y, None, torch.float64, "cpu", leading_shape=(n_members, 1))
        likelihood.log_noise_std.data += torch.as_tensor(rng.uniform(-0.5, 0.5, (n_members, 1, 2)))
        perturbations = torch.as_tensor(rng.randn(n_members, 40, 2))
        precision = torch.as_tensor(rng.uniform(0.5, 3.0, model.n_params))
    else:
        model = FunctionalModel(build_mlp(3, 4, (8,), "relu").double())
        Y = torch.as_tensor(rng.randint(4, size=(40, 1)), dtype=torch.float64)
        likelihood, perturbations, precision = CategoricalLikelihood(), None, 1.7
    theta = torch.as_tensor(rng.randn(n_members, model.n_params))
    anchors = torch.as_tensor(rng.randn(n_members, model.n_params))
    criterion = AnchoredNegativeLogPosterior(40, precision, anchors, likelihood, perturbations is not None)
    module = StackedMembers(model, theta.clone())
    X_rows, Y_rows = X[rows], member_targets(Y, padded_perturbations(perturbations, n_members, Y), rows)
    assert_flat_loss_is_the_criterions(module, criterion, X_rows, Y_rows,
                                       n_variables=2 if task.startswith("gaussian") else 1)


def test_anchors_alone_underestimate_the_linear_posterior(linear_data):
    """Without target perturbations (Pearce et al.'s anchored ensemble) the
    members' spread is far below the posterior's when the data dominate."""
    X, y = linear_data
    draws = linear_rms(200, perturb_targets=False).fit(X, y).posterior_.samples.numpy()
    exact_std = np.sqrt(np.diag(BayesianLinearRegression(X, y, NOISE, PRIOR_STD).covariance))
    assert (draws.std(0) < 0.3 * exact_std).all()


def test_members_on_a_part_of_the_rows_end_at_the_mode_of_their_own_rows(linear_data):
    """A linear model's member on ``n`` of the ``N`` rows ends at the mode of its rows' likelihood
    times the prior raised to ``n / N``: ``(D_s^T D_s / noise**2 + (n / N) / prior_std**2)^-1
    D_s^T y_s / noise**2``, to 1e-6 (the prior's share moves the mode by about 0.1% here)."""
    X, y = linear_data
    reg = DeepEnsembleRegressor(hidden_layer_sizes=(), n_estimators=2, noise_std=NOISE, prior_std=PRIOR_STD,
                                data_fraction=0.5, normalize_X=False, normalize_y=False, max_epochs=20,
                                random_state=0).fit(X, y)
    subsets = reg.net_[0].get_params()["iterator_train__subsets"].numpy()
    design = BayesianLinearRegression.design(X)
    for member, rows in zip(reg.posterior_.samples.numpy(), subsets):
        precision = design[rows].T @ design[rows] / NOISE**2 + len(rows) / len(X) / PRIOR_STD**2 * np.eye(4)
        np.testing.assert_allclose(member, np.linalg.solve(precision, design[rows].T @ y[rows] / NOISE**2), rtol=1e-6)


def test_classifier_members_on_a_part_of_the_rows_weigh_the_prior_by_their_share():
    """A classifier's members (no polish after their minibatch training) train on their ``n``
    rows' mean cross-entropy plus the prior's penalty over the whole table's ``N``: the ``n / N``
    share of the prior that their rows' likelihood is weighed against."""
    X = np.random.RandomState(0).randn(40, 2)
    clf = RMSClassifier(hidden_layer_sizes=(4,), n_estimators=2, data_fraction=0.5, prior_std=1.0, max_epochs=2,
                        random_state=0).fit(X, (X[:, 0] > 0).astype(int))
    assert clf.net_[0].get_params()["iterator_train__subsets"].shape == (2, 20)
    assert clf.net_[0].criterion_.n_train == 40


def test_classifier_members_train_alike_in_any_joblib_grouping():
    """A classifier's members end where their minibatch training leaves them (no polish), so
    each member's row order comes from its own seed, whatever group it trains in: four members
    in two joblib groups (threads) have the weights of four in one, to the bit."""
    rng = np.random.RandomState(0)
    X = rng.randn(60, 2)
    y = (X[:, 0] + 0.5 * rng.randn(60) > 0).astype(int)
    params = dict(hidden_layer_sizes=(4,), n_estimators=4, data_fraction=0.8, prior_std=1.0, max_epochs=3,
                  batch_size=16, random_state=0)
    one = DeepEnsembleClassifier(**params).fit(X, y)
    with parallel_backend("threading"):
        two = DeepEnsembleClassifier(**params, n_jobs=2).fit(X, y)
    assert len(two.net_) == 2
    torch.testing.assert_close(two.posterior_.samples, one.posterior_.samples, rtol=0, atol=0)


def test_rms_classifier_anchors_its_members_at_prior_draws():
    """RMS's classifier members are anchored at their own draws from ``N(0, prior_std**2)``
    (all apart; their mean square over 3 x 86 weights, divided by ``prior_std**2``, within
    [0.65, 1.35], four standard errors of a chi-square mean); the deep ensemble's at zero."""
    X = np.random.RandomState(0).randn(40, 2)
    y = (X[:, 0] > 0).astype(int)
    params = dict(hidden_layer_sizes=(16,), n_estimators=3, prior_std=0.5, max_epochs=1, random_state=0)
    anchors = RMSClassifier(**params).fit(X, y).net_[0].criterion_.anchors
    assert anchors.shape == (3, 86) and len(torch.unique(anchors, dim=0)) == 3
    assert 0.65 < float((anchors / 0.5).square().mean()) < 1.35
    assert not DeepEnsembleClassifier(**params).fit(X, y).net_[0].criterion_.anchors.any()


def test_fixed_prior_precisions_are_one_over_the_prior_variance(wave_data):
    """With ``prior_std`` and ``noise_std`` both fixed no MAP is trained; ``prior_precisions_``
    is ``prior_std**-2`` for every group of the backbone."""
    from sklearn_quinn._core.evidence import ParameterGroups

    reg = small(prior_std=0.5, noise_std=0.2, n_estimators=2, max_epochs=2).fit(*wave_data)
    names = ParameterGroups.of(reg._model).names
    assert reg.prior_precisions_ == {name: pytest.approx(4.0, rel=1e-12) for name in names}
    assert reg.evidence_history_ == []


def test_the_nets_hold_the_members_final_weights(wave_data):
    """After the full-batch polish the skorch nets' stacked weights are the members'
    (``posterior_``), not where the minibatch training left them."""
    reg = small(n_estimators=3, max_epochs=5).fit(*wave_data)
    assert torch.equal(torch.cat([net.module_.theta.detach() for net in reg.net_]), reg.posterior_.samples)


def test_member_subsets():
    rows = random_rows(50, 20, seed=3)
    assert len(np.unique(rows)) == 20 and rows.min() >= 0 and rows.max() < 50
    np.testing.assert_array_equal(random_rows(50, 50, seed=3), np.arange(50))
    assert not np.array_equal(rows, random_rows(50, 20, seed=4))


def test_data_fraction_gives_members_different_rows(wave_data):
    """Each member draws half the rows of its own, and fits them better than the rest."""
    X, y = wave_data
    reg = small(n_estimators=3, data_fraction=0.5, max_epochs=300, hidden_layer_sizes=(32,)).fit(X, y)
    subsets = reg.net_[0].get_params()["iterator_train__subsets"]
    assert subsets.shape == (3, 40)
    assert len({tuple(sorted(rows)) for rows in subsets.numpy()}) == 3
    outputs = reg._model(reg.posterior_.samples, reg._validated_inputs(X)).squeeze(-1).numpy()
    y_scaled = (y - y.mean()) / y.std()
    for member, rows in enumerate(subsets.numpy()):
        held_out = np.setdiff1d(np.arange(len(X)), rows)
        seen = np.mean((outputs[member, rows] - y_scaled[rows]) ** 2)
        unseen = np.mean((outputs[member, held_out] - y_scaled[held_out]) ** 2)
        assert seen < unseen


@pytest.mark.parametrize("estimator", [DeepEnsembleRegressor, RMSRegressor])
def test_joblib_groups_give_the_same_predictions(wave_data, estimator):
    X, y = wave_data
    one = small(estimator, n_estimators=4, data_fraction=0.8).fit(X, y)
    two = small(estimator, n_estimators=4, data_fraction=0.8, n_jobs=2).fit(X, y)
    assert len(two.net_) == 2
    for a, b in zip(one.predict(X, return_std=True), two.predict(X, return_std=True)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.slow
def test_members_train_under_a_dask_cluster(wave_data):
    distributed = pytest.importorskip("dask.distributed")
    X, y = wave_data
    expected = small(n_estimators=4).fit(X, y).predict(X)
    # One worker process: the members still train in another process, through dask (each worker
    # process pays torch's import, the most of this test's time).
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster, distributed.Client(cluster):
        with parallel_backend("dask"):
            predicted = small(n_estimators=4, n_jobs=2).fit(X, y).predict(X)
    np.testing.assert_allclose(predicted, expected, rtol=1e-10, atol=1e-12)


def test_predictive_std_adds_spread_and_noise(wave_data):
    """The deep ensemble's epistemic variance at each row is the larger of its members' spread
    and the MAP network's Laplace posterior variance there (an independent reference: the
    Jacobians and the GGN written out), which varies from row to row."""
    X, y = wave_data
    reg = small(n_estimators=5).fit(X, y)
    outputs = reg._model(reg.posterior_.samples, reg._validated_inputs(X)).squeeze(-1).numpy() * y.std()
    mean, std = reg.predict(X, return_std=True)
    np.testing.assert_allclose(mean, outputs.mean(0) + y.mean())
    laplace = map_posterior_variance(reg, X, X, y.std())
    assert np.ptp(laplace) > 0.5 * laplace.mean()
    epistemic = np.maximum(outputs.var(0, ddof=1), laplace)
    np.testing.assert_allclose(std**2, epistemic + reg.noise_std_**2, rtol=1e-6)
    parts = reg.predict_uncertainty(X)
    np.testing.assert_allclose(parts.epistemic_std**2, epistemic, rtol=1e-6)
    # One noise for every member: the evidence's noise of the MAP network, which a LaplaceRegressor
    # of the same settings trains too, rescaled to the residuals of the members' mean.
    member_noise = reg._draw_noise[:, 0].numpy() * y.std()
    np.testing.assert_allclose(member_noise, reg.noise_std_)
    map_network = LaplaceRegressor(hidden_layer_sizes=(8,), max_epochs=40, random_state=0).fit(X, y)
    evidence_noise = reg.evidence_history_[-1]["noise_std"][0] * y.std()
    np.testing.assert_allclose(map_network.evidence_history_[-1]["noise_std"][0] * y.std(), evidence_noise)
    map_residuals = np.sum((map_network.predict(X) - y) ** 2)
    np.testing.assert_allclose(reg.noise_std_, evidence_noise * np.sqrt(np.sum((mean - y) ** 2) / map_residuals))
    # The degrees of freedom the evidence's noise leaves the MAP network's residuals.
    np.testing.assert_allclose(reg.degrees_of_freedom_, len(X) - map_residuals / evidence_noise**2)


def test_past_the_kronecker_factors_each_member_carries_the_training_rows_mean(wave_data, monkeypatch):
    """Where the structure a Laplace fit would choose is the diagonal (patched), no Laplace
    posterior is kept, and each member carries ``member_std_`` at every row."""
    from sklearn_quinn import _local_posterior

    X, y = wave_data
    monkeypatch.setattr(_local_posterior, "choose_model_structure", lambda model, theta: ("diag", "patched"))
    reg = small(n_estimators=5).fit(X, y)
    assert reg._local_posterior is None
    outputs = reg._model(reg.posterior_.samples, reg._validated_inputs(X)).squeeze(-1).numpy() * y.std()
    _, std = reg.predict(X, return_std=True)
    np.testing.assert_allclose(std**2, outputs.var(0, ddof=1) + reg.member_std_**2 + reg.noise_std_**2)


@pytest.mark.parametrize("estimator", [DeepEnsembleRegressor, RMSRegressor])
def test_noise_is_the_members_mean_s_where_the_members_disagree(estimator):
    """On a nearly noise-free table (noise std 0.01) the residuals are mostly each network's
    approximation error, where the members part and their mean fits more closely: the noise
    rescaled to the mean's residuals is below the MAP network's evidence noise by more than
    20% (about 35% measured), and on 2000 fresh rows the test NLL is lower than with the
    evidence's noise by more than 0.05 (0.16 measured), at a 95% coverage within [0.95, 0.99]
    (0.98 measured, 0.99 with the evidence's noise)."""
    rng = np.random.RandomState(0)
    X, X_test = rng.uniform(-2, 2, size=(400, 3)), rng.uniform(-2, 2, size=(2000, 3))
    y, y_test = (np.sin(2 * x[:, 0]) * x[:, 1] + 0.5 * x[:, 2] ** 2 + 0.01 * rng.randn(len(x)) for x in (X, X_test))
    reg = estimator(hidden_layer_sizes=(16,), max_epochs=100, random_state=0).fit(X, y)
    mean, std = reg.predict(X_test, return_std=True)
    evidence_noise = reg.evidence_history_[-1]["noise_std"][0] * y.std()
    assert reg.noise_std_ < 0.8 * evidence_noise
    evidence_std = np.sqrt(std**2 - reg.noise_std_**2 + evidence_noise**2)
    nll, evidence_nll = (-norm.logpdf(y_test, mean, scale).mean() for scale in (std, evidence_std))
    assert nll < evidence_nll - 0.05
    assert 0.95 <= np.mean(np.abs(y_test - mean) <= norm.ppf(0.975) * std) <= 0.99


def test_members_mean_s_noise_is_read_from_a_random_subset_of_a_big_table(wave_data, monkeypatch):
    """Above ``SUBSET_ROWS`` rows the two residual sums of the noise's ratio are read from the
    same random subset of the rows: with ``SUBSET_ROWS`` at half the table the noise is within
    10% of the ratio over every row (5% measured; the MAP network's from a LaplaceRegressor of the same
    settings, which trains the same one), and not equal to it."""
    from sklearn_quinn._core import row_subsets

    X, y = wave_data
    monkeypatch.setattr(row_subsets, "SUBSET_ROWS", len(X) // 2)
    reg = small(n_estimators=4).fit(X, y)
    map_network = LaplaceRegressor(hidden_layer_sizes=(8,), max_epochs=40, random_state=0).fit(X, y)
    evidence_noise = reg.evidence_history_[-1]["noise_std"][0] * y.std()
    np.testing.assert_allclose(map_network.evidence_history_[-1]["noise_std"][0] * y.std(), evidence_noise)
    every_row = evidence_noise * np.sqrt(np.sum((reg.predict(X) - y) ** 2) / np.sum((map_network.predict(X) - y) ** 2))
    assert reg.noise_std_ == pytest.approx(every_row, rel=0.1)
    assert reg.noise_std_ != pytest.approx(every_row, rel=1e-6)


def test_rms_reads_its_perturbations_from_the_rows_of_its_residuals(wave_data, monkeypatch):
    """Above ``SUBSET_ROWS`` rows the members' covariance with their perturbations is read
    from the same random subset of the rows as the residuals, each row's outputs beside its
    own perturbations: with ``SUBSET_ROWS`` at half the table, the sum equals the one written
    out over those rows."""
    from sklearn_quinn._core import row_subsets
    from sklearn_quinn.ensemble._ensemble import perturbation_covariances

    X, y = wave_data
    reg = small(RMSRegressor, n_estimators=3).fit(X, y)
    monkeypatch.setattr(row_subsets, "SUBSET_ROWS", len(X) // 2)
    theta = reg.posterior_.samples
    perturbations = torch.randn(3, len(X), 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    sums, n_rows = reg._row_sums(theta, X, perturbations.transpose(0, 1).numpy(), perturbation_covariances)
    rows = random_rows(len(X), len(X) // 2, reg._split_seed)
    with torch.no_grad():
        outputs = reg._model(theta, torch.as_tensor(X[rows])).reshape(3, len(rows), 1)
    expected = ((outputs - outputs.mean(0)) * perturbations[:, rows]).sum()
    assert n_rows == len(rows)
    np.testing.assert_allclose(sums.numpy(), [expected.item()], rtol=1e-10)


def exact_mean_leverage_variance(reg, X, y):
    """``noise**2 gamma / N`` of a linear model at ``reg``'s learned precisions and noise, with
    ``gamma = tr(H (H + A)^-1)`` the exact well-determined parameters."""
    exact = BayesianLinearRegression.at_precisions(X, y, reg.noise_std_, reg.prior_precisions_)
    return reg.noise_std_**2 * exact.well_determined() / len(X)


def test_deep_ensemble_of_a_linear_model_predicts_the_exact_posterior(linear_data):
    """A linear model's members all reach the MAP; each then carries the Laplace posterior, exact
    here: the predictive variance at a new row is the exact posterior's ``x^T (H + A)^-1 x`` plus
    the noise, at the learned precisions and noise, and ``sample_y`` draws it; ``member_std_`` is
    its mean over the training rows, ``noise**2 gamma / N`` with ``gamma`` the exact
    well-determined parameters ``tr(H (H + A)^-1)``. RMS's members, posterior draws, carry none."""
    X, y = linear_data
    reg = DeepEnsembleRegressor(module=nn.Linear(3, 1, dtype=torch.float64), normalize_X=False, normalize_y=False,
                                n_estimators=3, random_state=0).fit(X, y)
    posterior = BayesianLinearRegression.at_precisions(X, y, reg.noise_std_, reg.prior_precisions_)
    gamma = posterior.well_determined()
    assert reg.member_std_**2 == pytest.approx(reg.noise_std_**2 * gamma / len(X), rel=1e-6)
    # The members' mean is the MAP's function: its residuals give the evidence's noise back.
    assert reg.noise_std_ == pytest.approx(reg.evidence_history_[-1]["noise_std"][0], rel=1e-6)
    assert reg.degrees_of_freedom_ == pytest.approx(gamma, rel=1e-3)  # the evidence at its fixed point
    X_new = 3 * np.random.RandomState(1).randn(5, X.shape[1])  # away from the training rows too
    new = posterior.design(X_new)
    exact = np.einsum("ni,ij,nj->n", new, posterior.covariance, new)
    _, std = reg.predict(X_new, return_std=True)
    np.testing.assert_allclose(std**2, exact + reg.noise_std_**2, rtol=1e-6)
    assert exact.max() > 3 * reg.member_std_**2  # where the training rows' mean falls short
    draws = reg.sample_y(X_new[:2], 20000, random_state=0)
    np.testing.assert_allclose(draws.std(1), np.sqrt(exact[:2] + reg.noise_std_**2), rtol=0.03)
    assert linear_rms(3).fit(X, y).member_std_ is None
    noise_head = small(likelihood="heteroscedastic", max_epochs=5).fit(X, y)
    assert noise_head.member_std_ is None and noise_head.degrees_of_freedom_ is None


def test_each_output_carries_its_own_posterior_s_mean_variance(linear_data):
    """Two targets of a linear model, the first with a signal, the second noise alone: each
    output's ``member_std_`` is the mean over the training rows of its own exact posterior's
    variance, ``noise_o**2 gamma_o / N``, at the learned precisions (which the outputs share)
    and the noise the evidence learned (the MAP network's; ``noise_std_`` is the members'
    mean's, rescaled to its residuals). An equal share of the outputs' total ``gamma`` gave the
    signal's too little and the noise's too much."""
    X, y = linear_data
    Y = np.c_[y, np.random.RandomState(2).randn(len(y))]
    reg = DeepEnsembleRegressor(module=nn.Linear(3, 2, dtype=torch.float64), normalize_X=False, normalize_y=False,
                                n_estimators=2, random_state=0).fit(X, Y)
    noise = reg.evidence_history_[-1]["noise_std"]
    exact = [noise[o] ** 2 / len(X)
             * BayesianLinearRegression.at_precisions(X, Y[:, o], noise[o], reg.prior_precisions_).well_determined()
             for o in range(2)]
    np.testing.assert_allclose(reg.member_std_**2, exact, rtol=1e-6)


def test_rms_measures_the_degrees_of_freedom_of_its_fit_with_its_perturbations(linear_data):
    """RMS's members on perturbed targets measure the degrees of freedom of their fit as its
    covariance with their perturbations (Efron 2004). For a linear model the members are
    ``f_j = S (y + noise eps_j) + D M A w0_j``, with the hat matrix ``S = D M D^T / noise^2``,
    ``M = (D^T D / noise^2 + A)^-1`` at the learned precisions ``A`` and the noise the members
    trained under, so the estimate's mean is ``tr(S)``, the evidence's ``gamma``, and its
    variance ``(2 tr(S^2) + tr(D M A M D^T) / noise^2) / J``: within 4 of its standard errors
    of ``tr(S)``; the noise is the members' mean's residual sum of squares over the rows less
    those degrees of freedom."""
    X, y = linear_data
    n_members = 500
    reg = RMSRegressor(module=nn.Linear(3, 1, dtype=torch.float64), normalize_X=False, normalize_y=False,
                       n_estimators=n_members, random_state=0).fit(X, y)
    noise = reg.evidence_history_[-1]["noise_std"][0]
    posterior = BayesianLinearRegression.at_precisions(X, y, noise, reg.prior_precisions_)
    design, prior, covariance = posterior.design(X), np.diag(posterior.prior_std**-2.0), posterior.covariance
    hat = design @ covariance @ design.T / noise**2
    anchors = design @ covariance @ prior @ covariance @ design.T / noise**2
    standard_error = np.sqrt((2 * np.trace(hat @ hat) + np.trace(anchors)) / n_members)
    assert abs(reg.degrees_of_freedom_ - np.trace(hat)) < 4 * standard_error
    assert standard_error < 0.05 * np.trace(hat)
    residual_sum = np.sum((reg.predict(X) - y) ** 2)
    assert reg.noise_std_**2 == pytest.approx(residual_sum / (len(X) - reg.degrees_of_freedom_), rel=1e-6)


def test_one_rms_member_keeps_the_evidence_s_degrees_of_freedom(linear_data):
    """One member has no spread about the members' mean to measure its fit's degrees of freedom
    with: it keeps those the evidence's noise leaves the MAP network (those of the members of
    the same settings that do not perturb their targets)."""
    X, y = linear_data
    params = dict(module=nn.Linear(3, 1, dtype=torch.float64), normalize_X=False, normalize_y=False, random_state=0)
    one = RMSRegressor(n_estimators=1, **params).fit(X, y)
    unperturbed = RMSRegressor(n_estimators=2, perturb_targets=False, **params).fit(X, y)
    assert np.isfinite(one.noise_std_) and one.noise_std_ > 0
    assert one.degrees_of_freedom_ == pytest.approx(unperturbed.degrees_of_freedom_, rel=1e-9)


def test_deep_ensemble_reads_its_members_spread_from_a_random_subset_of_a_big_table(linear_data, monkeypatch):
    """Above ``SUBSET_ROWS`` rows ``gamma`` of the members' spread is read from a random subset
    of the rows, each standing for its share: with ``SUBSET_ROWS`` at half the table, within
    10% of the exact ``noise**2 gamma / N`` at the fit's learned precisions and noise (here
    0.1%), and not equal to it."""
    from sklearn_quinn._core import row_subsets

    X, y = linear_data
    monkeypatch.setattr(row_subsets, "SUBSET_ROWS", len(X) // 2)
    reg = DeepEnsembleRegressor(module=nn.Linear(3, 1, dtype=torch.float64), normalize_X=False, normalize_y=False,
                                n_estimators=3, random_state=0).fit(X, y)
    exact = exact_mean_leverage_variance(reg, X, y)
    assert reg.member_std_**2 == pytest.approx(exact, rel=0.1)
    assert reg.member_std_**2 != pytest.approx(exact, rel=1e-6)


def test_fixed_noise_and_same_random_state(wave_data):
    X, y = wave_data
    reg = small(RMSRegressor, noise_std=0.2).fit(X, y)
    assert reg.noise_std_ == pytest.approx(0.2)
    assert reg.degrees_of_freedom_ is None
    again = small(RMSRegressor, noise_std=0.2).fit(X, y)
    np.testing.assert_array_equal(reg.sample_y(X, 3), again.sample_y(X, 3))
    other = small(RMSRegressor, noise_std=0.2, random_state=1).fit(X, y)
    assert not np.allclose(reg.predict(X), other.predict(X))


class TwoBranches(nn.Module):
    """A module off the MLP fast path: its members run through torch.func."""

    def __init__(self, n_features, n_outputs):
        super().__init__()
        self.linear = nn.Linear(n_features, n_outputs)
        self.hidden = nn.Linear(n_features, 4)
        self.out = nn.Linear(4, n_outputs)

    def forward(self, X):
        return self.linear(X) + self.out(torch.tanh(self.hidden(X)))


def test_custom_module_members(wave_data):
    X, y = wave_data
    reg = small(RMSRegressor, module=TwoBranches, n_estimators=3, data_fraction=0.7).fit(X, y)
    assert reg._model._plan is None
    mean, std = reg.predict(X[:5], return_std=True)
    assert mean.shape == std.shape == (5,) and np.isfinite(mean).all()


def test_multi_output(wave_data):
    X, y = wave_data
    Y = np.column_stack([y, 2 * y])
    reg = small(n_estimators=3).fit(X, Y)
    mean, std = reg.predict(X[:4], return_std=True)
    assert mean.shape == std.shape == (4, 2)
    assert reg.sample_y(X[:4], 6).shape == (4, 2, 6)
    assert reg.degrees_of_freedom_.shape == (2,)
    rms = small(RMSRegressor, n_estimators=3).fit(X, Y)
    assert rms.degrees_of_freedom_.shape == rms.noise_std_.shape == (2,)
    assert np.all(rms.noise_std_ > 0)


@pytest.mark.parametrize(
    "params, message",
    [
        ({"n_estimators": 0}, "n_estimators"),
        ({"n_estimators": "many"}, "n_estimators"),
        ({"data_fraction": 0.0}, "data_fraction"),
        ({"data_fraction": 1.5}, "data_fraction"),
        ({"data_fraction": 0.01}, "leaves no training row"),
        ({"prior_std": 0.0}, "prior_std"),
        ({"noise_std": -1.0}, "noise_std"),
    ],
)
@pytest.mark.parametrize("estimator", [DeepEnsembleRegressor, RMSRegressor])
def test_bad_parameters(wave_data, estimator, params, message):
    X, y = wave_data
    with pytest.raises(ValueError, match=message):
        small(estimator, **params).fit(X, y)


@pytest.mark.parametrize("estimator, n_rows, params, expected", [
    (RMSRegressor, 40_000, {}, 20),  # 200 steps an epoch: 1000 epochs are exactly the 200,000-step cap
    (RMSRegressor, 40_002, {}, 5),  # capped: each member would be another capped training (40,001: 200 steps)
    (RMSClassifier, 40_002, {}, 5),
    (RMSClassifier, 100, {}, 20),  # the classifier's members are posterior draws too
    (RMSRegressor, 10**6, {"max_epochs": 100}, 20),  # epochs fixed by the user: no cap
    (RMSRegressor, 10**6, {"n_estimators": 3}, 3),
    (DeepEnsembleRegressor, 100, {}, 5),
    (DeepEnsembleClassifier, 40_002, {}, 5),
])
def test_auto_members_are_twenty_draws_for_rms_and_five_for_the_deep_ensemble(estimator, n_rows, params,
                                                                              expected):
    assert estimator(**params)._n_members(n_rows) == expected


@pytest.mark.parametrize("estimator", [RMSRegressor, DeepEnsembleRegressor])
def test_auto_members_are_the_posterior_s_rows(wave_data, estimator):
    """The members 'auto' (the default) chose on a small table are the draws predictions average."""
    X, y = wave_data
    model = small(estimator, data_fraction=0.5).fit(X, y)
    assert model.n_estimators_ == (20 if estimator is RMSRegressor else 5)
    assert model.posterior_.samples.shape[0] == model.n_estimators_


def test_criterion_averages_each_member_s_misfit_over_the_batches():
    """``mean_misfit``: per member, the negative log likelihood per point averaged over the batches
    since ``reset_misfit``, by hand for two members of a unit-noise Gaussian; the prior's part is
    left out."""
    from sklearn_quinn._core.likelihoods import GaussianLikelihood
    from sklearn_quinn.ensemble._engine import AnchoredNegativeLogPosterior, StackedMembers

    theta = torch.tensor([[1.0], [2.0]], dtype=torch.float64)
    members = StackedMembers(lambda weights, X: weights[:, None, :] * X, theta)
    criterion = AnchoredNegativeLogPosterior(10, 5.0, torch.zeros_like(theta),
                                             GaussianLikelihood(torch.ones(1, dtype=torch.float64)), False)
    X = torch.ones(2, 3, 1, dtype=torch.float64)
    half_log_2pi = 0.5 * np.log(2 * np.pi)
    criterion(members(X), torch.zeros(2, 3, 1, 2, dtype=torch.float64), members)  # targets 0
    criterion.reset_misfit()
    for target in (0.0, 2.0):
        targets = torch.stack([torch.full((2, 3, 1), target), torch.zeros(2, 3, 1)], dim=-1).double()
        criterion(members(X), targets, members)  # the target, then no perturbation
    expected = [((1 - 0) ** 2 / 2 + (1 - 2) ** 2 / 2) / 2, ((2 - 0) ** 2 / 2 + 0) / 2]
    torch.testing.assert_close(criterion.mean_misfit, torch.tensor(expected, dtype=torch.float64) + half_log_2pi)


@pytest.mark.parametrize("module", [nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1)), None])
def test_members_of_a_module_instance_start_apart(module):
    """A ``module`` instance is deep-copied, the same weights under every member's seed: its layers are
    drawn afresh under each seed, so the members start apart, as from a callable or the default
    network; the user's instance is left as it was."""
    reg = DeepEnsembleRegressor(module=module, hidden_layer_sizes=(8,), n_estimators=3, max_epochs=5, random_state=0)
    weights = [] if module is None else [parameter.detach().clone() for parameter in module.parameters()]
    reg.fit(np.random.RandomState(0).randn(20, 3), np.arange(20.0))
    initial, _ = reg._initial_weights(3, 1, [11, 12, 13])
    assert len(torch.unique(initial, dim=0)) == 3
    assert all(torch.equal(old, new) for old, new in zip(weights, [] if module is None else module.parameters()))


def test_a_constant_target_leaves_no_degree_of_freedom_to_inflate_the_noise():
    """Members fitting a constant target leave ``N - dof`` of about 1e-5 degrees of freedom, and the
    residuals' sum over them made a noise std of 140 where the residuals are 4e-4; under one degree
    of freedom the evidence's noise is kept."""
    rng = np.random.RandomState(0)
    X = rng.randn(30, 3)
    reg = small(max_epochs=30).fit(X, np.full(30, 5.0))
    assert reg.noise_std_ < 1e-2
    assert np.all(reg.predict(rng.randn(3, 3), return_std=True)[1] < 0.1)


def test_members_of_an_instance_warn_of_the_parameters_no_reset_reaches():
    """A parameter of the module's own (no layer's reset_parameters draws it) starts every member at
    the instance's value: said, with the callable that avoids it."""

    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear, self.scale = nn.Linear(3, 1), nn.Parameter(torch.ones(1))

        def forward(self, X):
            return self.linear(X) * self.scale

    X = np.random.RandomState(0).randn(20, 3)
    with pytest.warns(UserWarning, match="'scale' belong to no layer with reset_parameters.*callable"):
        DeepEnsembleRegressor(module=Scaled(), n_estimators=2, max_epochs=2).fit(X, X[:, 0])


def test_deep_ensemble_degrees_of_freedom_count_every_row_of_a_big_table(wave_data, monkeypatch):
    """Above ``SUBSET_ROWS`` rows the MAP network's residuals are read from a random half of the
    table: the degrees of freedom are the whole table's, ``N / n`` times the subset's
    ``n - RSS_subset / noise**2`` (the MAP network's residuals written out over those rows, from a
    LaplaceRegressor of the same settings, which trains the same network)."""
    from sklearn_quinn._core import row_subsets
    from sklearn_quinn._core.row_subsets import random_rows

    X, y = wave_data
    monkeypatch.setattr(row_subsets, "SUBSET_ROWS", len(X) // 2)
    reg = DeepEnsembleRegressor(hidden_layer_sizes=(8,), n_estimators=2, max_epochs=40, random_state=0).fit(X, y)
    map_network = LaplaceRegressor(hidden_layer_sizes=(8,), max_epochs=40, random_state=0).fit(X, y)
    rows = random_rows(len(X), len(X) // 2, reg._split_seed)
    noise = reg.evidence_history_[-1]["noise_std"][0] * y.std()
    subset_dof = len(rows) - np.sum((map_network.predict(X[rows]) - y[rows]) ** 2) / noise**2
    assert reg.degrees_of_freedom_ == pytest.approx(len(X) / len(rows) * subset_dof, rel=1e-6)
