"""SWAGRegressor: the moment updates and sampling formulas of Maddox et al. (2019), by hand, and the estimator."""

import math
import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning

from sklearn_quinn import SWAGRegressor
from sklearn_quinn.swag import _engine as moments
from sklearn_quinn.swag._proximal_sgd import ProximalSGD

SNAPSHOTS = torch.tensor([[1.0, 2.0, 0.0], [3.0, 2.0, 1.0], [2.0, 5.0, -1.0], [0.0, 3.0, 2.0]], dtype=torch.float64)


def small(**params):
    return SWAGRegressor(**{**dict(hidden_layer_sizes=(8,), max_epochs=60, swag_epochs=10, max_rank=4,
                                   random_state=0), **params})


def moments_of(snapshots, max_rank):
    state = moments.init(snapshots[0])
    for theta in snapshots[1:]:
        state = moments.update(state, theta, max_rank)
    return state


def test_running_moments_by_hand():
    state = moments_of(SNAPSHOTS, max_rank=3)
    np.testing.assert_allclose(state.mean, [1.5, 3.0, 0.5])
    np.testing.assert_allclose(state.sq_mean, [3.5, 10.5, 1.5])
    assert int(state.n_snapshots) == 4
    assert state.snapshots.tolist() == SNAPSHOTS[1:].tolist()  # the last max_rank, oldest first


def test_running_moments_match_numpy_means_at_every_step():
    """After each of 30 random snapshots the state holds numpy's mean and mean
    of squares of the snapshots so far (to 1e-12: the running update rounds
    differently from a sum), and exactly the last max_rank of them."""
    snapshots = np.random.RandomState(0).randn(30, 7)
    state = moments.init(torch.tensor(snapshots[0]))
    for n in range(1, 31):
        if n > 1:
            state = moments.update(state, torch.tensor(snapshots[n - 1]), max_rank=5)
        np.testing.assert_allclose(state.mean.numpy(), snapshots[:n].mean(0), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(state.sq_mean.numpy(), (snapshots[:n] ** 2).mean(0), rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(state.snapshots.numpy(), snapshots[max(n - 5, 0) : n])
        assert int(state.n_snapshots) == n


def test_state_does_not_alias_the_trained_weights():
    theta = torch.zeros(3, dtype=torch.float64)
    state = moments.init(theta)
    theta += 1.0  # training moves the weights in place
    state = moments.update(state, theta, max_rank=2)
    theta += 1.0
    assert state.snapshots.tolist() == [[0.0] * 3, [1.0] * 3]
    np.testing.assert_array_equal(state.mean, [0.5] * 3)


def test_lowrank_sample_by_hand():
    """w = mean + sqrt(var) z1 / sqrt(2) + D z2 / sqrt(2 (k - 1)), same z from the same generator."""
    posterior = moments.gaussian_posterior(moments_of(SNAPSHOTS, max_rank=3), "lowrank")
    mean_before = posterior.mean.clone()
    draws = posterior.sample(5, torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(0)
    z1 = torch.randn(3, 5, generator=generator, dtype=torch.float64)
    z2 = torch.randn(3, 5, generator=generator, dtype=torch.float64)
    mean = torch.tensor([1.5, 3.0, 0.5], dtype=torch.float64)
    var = torch.tensor([3.5 - 1.5**2, 10.5 - 9.0, 1.5 - 0.25], dtype=torch.float64)
    D = (SNAPSHOTS[1:] - mean).T  # last k = 3 deviations as columns
    expected = mean[:, None] + var.sqrt()[:, None] * z1 / math.sqrt(2) + D @ z2 / math.sqrt(2 * 2)
    torch.testing.assert_close(draws, expected.T)
    torch.testing.assert_close(posterior.mean, mean_before)
    torch.testing.assert_close(posterior.covariance, torch.diag(var) / 2 + D @ D.T / 4)


def test_diag_sample_by_hand():
    posterior = moments.gaussian_posterior(moments_of(SNAPSHOTS, max_rank=3), "diag")
    draws = posterior.sample(4, torch.Generator().manual_seed(1))
    z1 = torch.randn(3, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    var = torch.tensor([1.25, 1.5, 1.25], dtype=torch.float64)
    expected = torch.tensor([1.5, 3.0, 0.5], dtype=torch.float64)[:, None] + var.sqrt()[:, None] * z1 / math.sqrt(2)
    torch.testing.assert_close(draws, expected.T)
    assert posterior.low_rank is None


def test_a_weight_that_never_moved_has_a_spread_of_zero_not_nan():
    """Three equal snapshots 0.1: the running mean and mean of squares round to 0.10000000000000002
    and 0.010000000000000002, whose difference is -1.7e-18; its square root was NaN, and every draw
    of every weight with it (the low-rank term mixes the coordinates). The variance is clipped at 0."""
    state = moments_of(torch.tensor([[0.1, 0.2]] * 3, dtype=torch.float64), max_rank=3)
    assert float(state.sq_mean[0] - state.mean[0].square()) < 0  # the rounding the clip is for
    for cov_type in ("diag", "lowrank"):
        posterior = moments.gaussian_posterior(state, cov_type)
        draws = posterior.sample(4, torch.Generator().manual_seed(0))
        assert posterior.std.tolist() == [0.0, 0.0]
        torch.testing.assert_close(draws, state.mean.expand(4, 2), rtol=0, atol=1e-15)


def test_each_trajectory_s_gaussian_is_built_from_its_own_snapshots():
    """Two trajectories side by side (MultiSWAG): component j's covariance is
    ``diag(var_j) / 2 + D_j D_j^T / (2 (k - 1))`` with ``var_j`` and the deviations ``D_j`` from row j's
    snapshots alone, here the rows of SNAPSHOTS and of 10 - 2 SNAPSHOTS."""
    rows = torch.stack([SNAPSHOTS, 10 - 2 * SNAPSHOTS], dim=1)  # (4 snapshots, 2 trajectories, 3 weights)
    mixture = moments.mixture_posterior(moments_of(rows, max_rank=3), "lowrank")
    for component, snapshots in zip(mixture.components, (SNAPSHOTS, 10 - 2 * SNAPSHOTS)):
        mean = snapshots.mean(0)
        var = snapshots.var(0, correction=0)
        D = (snapshots[1:] - mean).T  # the last k = 3 snapshots' deviations as columns
        torch.testing.assert_close(component.mean, mean)
        torch.testing.assert_close(component.covariance, torch.diag(var) / 2 + D @ D.T / 4)


def test_snapshots_are_taken_at_the_end_of_every_collect_every_th_epoch(wave_data):
    """Epochs k, 2k, ...: 12 epochs at every 5th give 2 snapshots (at epochs 1, 6, 11 there would be 3;
    at every 3rd both give 4)."""
    X, y = wave_data
    assert small(n_estimators=1, swag_epochs=12, collect_every=5).fit(X, y).n_snapshots_ == 2


def test_fit_collects_snapshots_and_keeps_the_map(wave_data):
    """One member: SWAG around the MAP, whose net stays as trained."""
    X, y = wave_data
    reg = small(n_estimators=1, swag_epochs=12, collect_every=3).fit(X, y)
    assert reg.n_snapshots_ == 4
    (component,) = reg.posterior_.components
    assert component.low_rank.shape == (reg._model.n_params, 4)
    map_theta = reg._model.flatten()
    assert not torch.equal(map_theta, component.mean)  # SGD moved a copy, not net_
    torch.testing.assert_close(map_theta, component.mean, atol=0.5, rtol=0)
    mean, std = reg.predict(X, return_std=True)
    assert (std > reg.noise_std_).all()
    np.testing.assert_array_equal(reg.predict(X), small(n_estimators=1, swag_epochs=12, collect_every=3).fit(X, y)
                                  .predict(X))


def test_members_are_the_map_and_networks_from_other_initialisations(wave_data):
    """MultiSWAG: the first Gaussian is SWAG around the MAP (the same as one
    member's, up to the rate, which is the slowest member's), the others sit
    around networks trained from other initial weights, far from it in weight
    space; each has its own scale, and the posterior is their equal mixture."""
    X, y = wave_data
    reg = small(n_estimators=3).fit(X, y)
    means = torch.stack([component.mean for component in reg.posterior_.components])
    map_theta = reg._model.flatten()
    distances = torch.linalg.vector_norm(means - map_theta, dim=1)
    assert float(distances[0]) < 0.5 * float(distances[1:].min())
    assert reg.cov_scale_.shape == (3,) and len(set(reg.cov_scale_)) == 3
    torch.testing.assert_close(reg.posterior_.mean, means.mean(0))
    single = small(n_estimators=1).fit(X, y)
    assert reg.lr_swag_ <= single.lr_swag_
    _, std = reg.predict(X, return_std=True)
    _, single_std = single.predict(X, return_std=True)
    assert np.mean(std) > np.mean(single_std)  # the members disagree where one Gaussian is sure


def test_mixture_samples_stratified_over_the_components():
    """7 draws of 3 components: one component gives 3 and the others 2, in a random order; a
    single draw comes from each component a third of the time (a fixed order drew every
    ``sample_y(n_samples=1)`` from the first member); the mixture's variance is the components'
    mean variance plus the variance of their means."""
    from sklearn_quinn._core.posterior import GaussianMixturePosterior, GaussianPosterior

    means = torch.tensor([[0.0, 0.0], [100.0, 0.0], [0.0, 100.0]], dtype=torch.float64)
    stds = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=torch.float64)
    mixture = GaussianMixturePosterior(GaussianPosterior.from_std(m, s) for m, s in zip(means, stds))

    def components(n, seed):
        return torch.cdist(mixture.sample(n, torch.Generator().manual_seed(seed)), means).argmin(1)

    orders = [components(7, seed) for seed in range(20)]
    for nearest in orders:
        assert sorted(torch.bincount(nearest, minlength=3).tolist()) == [2, 2, 3]
    assert len({tuple(nearest.tolist()) for nearest in orders}) > 10
    # 600 single draws: a count of each component within 4 binomial stds (15.4) of 200.
    singles = torch.bincount(torch.cat([components(1, seed) for seed in range(600)]), minlength=3)
    assert (singles - 200).abs().max() < 4 * (600 / 3 * 2 / 3) ** 0.5
    expected = stds.square().mean(0) + means.var(0, correction=0)
    torch.testing.assert_close(mixture.variance, expected)
    scaled = mixture.scaled([1.0, 4.0, 9.0])
    roots = torch.tensor([[1.0], [2.0], [3.0]], dtype=torch.float64)
    torch.testing.assert_close(torch.stack([component.std for component in scaled.components]), stds * roots)


def test_stiff_data_does_not_diverge():
    """Nearly noiseless data make the negative log posterior stiff; lr_swag is
    on the squared-error scale, so the default rate stays stable."""
    rng = np.random.RandomState(0)
    X = rng.randn(200, 3)
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.001 * rng.randn(200)
    reg = small(noise_std=0.001, swag_epochs=20).fit(X, y)
    assert np.isfinite(reg.predict(X, return_std=True)).all()


def test_diverged_sgd_phase_is_rerun_at_a_tenth_of_the_rate(wave_data):
    """On this data SGD diverges above lr_swag ~ 0.5: at 100 and 10 the weights
    overflow, at 1 the first epochs' negative log likelihood (2.2) rises
    above the untrained network's (1.3); 0.1 holds."""
    X, y = wave_data
    with pytest.warns(ConvergenceWarning, match="diverged at lr_swag=100;"):
        reg = small(lr_swag=100.0, linear_skip=False).fit(X, y)
    assert reg.lr_swag_ == pytest.approx(0.1)
    assert np.isfinite(reg.predict(X, return_std=True)).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        assert small(lr_swag=0.05).fit(X, y).lr_swag_ == 0.05  # a stable rate needs no cut
        assert small().fit(X, y).lr_swag_ < 0.5  # nor does the automatic one


def test_sgd_phase_blowing_up_within_the_finite_numbers_is_rerun(wave_data):
    """Two epochs at lr_swag=1.5 keep the weights finite while the negative log
    likelihood climbs from 2.5 to 4.8, above the untrained network's 2.8:
    the loss test catches what the finiteness test lets through."""
    X, y = wave_data
    with pytest.warns(ConvergenceWarning, match="diverged at lr_swag=1.5"):
        reg = small(lr_swag=1.5, swag_epochs=2).fit(X, y)
    assert reg.lr_swag_ == pytest.approx(0.15)
    assert max(float(component.std.max()) for component in reg.posterior_.components) < 1.0


def test_sgd_phase_diverging_at_every_rate_raises(wave_data):
    """Four runs, at the given rate and three tenfold cuts of it, all diverge."""
    X, y = wave_data
    with pytest.raises(FloatingPointError, match=r"diverged at every rate from lr_swag=1e\+06 down to 1000;"):
        small(lr_swag=1e6).fit(X, y)


@pytest.mark.parametrize(
    "params, message",
    [
        ({"cov_type": "full"}, "cov_type"),
        ({"max_rank": 1}, "max_rank"),
        ({"lr_swag": 0.0}, "lr_swag"),
        ({"lr_swag": "fast"}, "lr_swag"),
        ({"cov_scale": 0.0}, "cov_scale"),
        ({"cov_scale": "wide"}, "cov_scale"),
        ({"swag_epochs": 3, "collect_every": 2}, "fewer than the 2 snapshots"),
        ({"n_samples": 0}, "n_samples"),
        ({"n_estimators": 0}, "n_estimators"),
        ({"n_estimators": 1.5}, "n_estimators"),
        ({"n_estimators": 5, "n_samples": 4}, "cannot cover the 5 members"),
        ({"n_estimators": "many"}, "n_estimators"),
    ],
)
def test_bad_parameters(wave_data, params, message):
    X, y = wave_data
    with pytest.raises(ValueError, match=message):
        small(**params).fit(X, y)


def test_a_curvature_that_overflows_its_dtype_is_refused():
    # An input column of 1e12 left unscaled: the gradients' second moment overflows float32, and the rate
    # came out nan (a FloatingPointError after every SGD run, "from lr_swag=nan down to nan").
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, (120, 3))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.3 * rng.randn(120)
    X[:, 2] *= 1e12
    swag = SWAGRegressor(hidden_layer_sizes=(16,), max_epochs=40, swag_epochs=10, normalize_X=False, dtype="float32",
                         random_state=0)
    with warnings.catch_warnings(), pytest.raises(ValueError, match="overflow float32 here"):
        warnings.simplefilter("ignore")  # the MAP's and curvature's own, of the unscaled column
        swag.fit(X, y)


def test_too_few_draws_for_the_members_set_after_fit_are_refused_at_predict(wave_data):
    """``set_params(n_samples=1)`` after a fit of 3 members predicted silently from one member's
    Gaussian; fit refuses it, and so does predict."""
    X, y = wave_data
    model = small(n_estimators=3, n_samples=6).fit(X, y)
    with pytest.raises(ValueError, match="cannot cover the 3 members"):
        model.set_params(n_samples=1).predict(X)


def test_proximal_step_shrinks_by_the_implicit_factor():
    """With no loss gradient, one step takes theta to theta / (1 + lr * decay)
    exactly; one decay per weight ``(K,)`` serves stacked members ``(J, K)``."""
    stacked = torch.nn.Parameter(torch.tensor([[2.0, -4.0], [1.0, 3.0]]))
    optimizer = ProximalSGD([stacked], lr=0.5, decay=torch.tensor([3.0, 0.0]))
    (0.0 * stacked.sum()).backward()
    optimizer.step()
    torch.testing.assert_close(stacked.detach(), torch.tensor([[2.0 / 2.5, -4.0], [1.0 / 2.5, 3.0]]))


def test_proximal_step_is_stable_where_the_explicit_step_diverges():
    """On ``decay * theta^2 / 2`` at ``lr * decay = 10`` the explicit step
    multiplies theta by -9 each time; the proximal one by 1 / 11."""
    explicit, proximal = (torch.nn.Parameter(torch.ones(1)) for _ in range(2))
    optimizers = [torch.optim.SGD([explicit], lr=0.1, weight_decay=100.0),
                  ProximalSGD([proximal], lr=0.1, decay=100.0)]
    for _ in range(5):
        for optimizer, parameter in zip(optimizers, (explicit, proximal)):
            optimizer.zero_grad()
            (0.0 * parameter.sum()).backward()
            optimizer.step()
    assert abs(float(explicit)) == pytest.approx(9.0**5)
    assert float(proximal) == pytest.approx(11.0**-5)


def test_a_stiff_prior_needs_no_rate_cut(wave_data):
    """A prior precision of 1e5, as the evidence gives a group it switches
    off: with an explicit weight-decay step SGD diverged at lr_swag=0.05 and
    0.005 and held only at 5e-4; the proximal step keeps the default rate."""
    X, y = wave_data
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        reg = small(prior_std=10**-2.5, lr_swag=0.05).fit(X, y)
    assert reg.lr_swag_ == 0.05
    assert np.isfinite(reg.predict(X, return_std=True)).all()


@pytest.mark.parametrize("batch_size, binding", [(2, "mandt"), (400, "stable")])
def test_sampling_rate_of_a_linear_model_by_hand(batch_size, binding):
    """For ``f = X w + b`` under Gaussian noise every quantity of the
    automatic rate has a closed form: the curvature ``G = A^T A / s^2`` with
    ``A = [X, 1]``, the per-point gradients ``a_i r_i / s^2``, and the
    well-determined weights ``tr(G (G + delta I)^-1)``. A minibatch of 2
    rows puts Mandt's rate under the stability cap, one of 400 above it."""
    from torch import nn

    from sklearn_quinn._core.evidence import ParameterGroups
    from sklearn_quinn._core.likelihoods import GaussianLikelihood
    from sklearn_quinn._core.network import FunctionalModel
    from sklearn_quinn.swag._rate import STABILITY_FRACTION, sampling_rate

    rng = np.random.RandomState(0)
    X = rng.randn(400, 3) * [1.0, 3.0, 0.3]
    y = X @ [1.0, -2.0, 0.5] + 0.7 + rng.randn(400)
    model = FunctionalModel(nn.Linear(3, 1).double())
    theta = torch.tensor([0.9, -1.9, 0.6, 0.8], dtype=torch.float64)  # near, not at, the mode
    noise_std, delta = 1.3, 2.0
    likelihood = GaussianLikelihood(torch.tensor([noise_std], dtype=torch.float64)).frozen(1)
    rate = sampling_rate(model, theta, torch.as_tensor(X), torch.as_tensor(y[:, None]), likelihood,
                         ParameterGroups.of(model), torch.tensor(delta, dtype=torch.float64), batch_size)

    design = np.c_[X, np.ones(len(X))]
    curvature = design.T @ design / noise_std**2
    gradients = design * ((design @ theta.numpy() - y) / noise_std**2)[:, None]
    noise_trace = np.trace(np.cov(gradients.T, bias=True))
    well_determined = np.trace(curvature @ np.linalg.inv(curvature + delta * np.eye(4)))
    rates = {"mandt": 2 * batch_size * well_determined / (len(X) * noise_trace),
             "stable": 2 * STABILITY_FRACTION * len(X) / np.linalg.eigvalsh(curvature)[-1]}
    assert min(rates, key=rates.get) == binding
    assert rate == pytest.approx(rates[binding], rel=1e-9)


@pytest.mark.parametrize("structure", ["kron", "diag"])
def test_rate_cap_is_the_ggn_s_largest_eigenvalue_whatever_the_evidence_s_structure(monkeypatch, structure):
    """A network too large for the evidence's exact log determinants (forced
    here) still caps the rate at ``2 f N / lambda_max`` of its whole GGN: the
    diagonal and the Kronecker-factored blocks understate ``lambda_max`` (the
    largest curvature direction mixes the layers), and a cap read from them
    lets SGD pass its stability limit. A batch of 10**9 rows puts Mandt's rate
    far above the cap."""
    from sklearn_quinn._core.curvature import curvature
    from sklearn_quinn._core.evidence import ParameterGroups
    from sklearn_quinn._core.likelihoods import CategoricalLikelihood
    from sklearn_quinn._core.network import FunctionalModel, build_mlp
    from sklearn_quinn.swag._rate import STABILITY_FRACTION, sampling_rate

    from .test_evidence import force_structure

    force_structure(monkeypatch, structure)
    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(4, 3, (6,), "tanh").double())
    X = torch.randn(200, 4, dtype=torch.float64)
    Y = torch.randint(0, 3, (200, 1)).double()
    theta, likelihood = model.flatten(), CategoricalLikelihood()
    rate = sampling_rate(model, theta, X, Y, likelihood, ParameterGroups.of(model),
                         torch.tensor(1.0, dtype=torch.float64), 10**9)
    largest = float(torch.linalg.eigvalsh(curvature(model, theta, X, Y, likelihood, "ggn", "full"))[-1])
    assert rate == pytest.approx(2 * STABILITY_FRACTION * len(X) / largest, rel=1e-5)


def test_rate_without_curvature_is_the_unit_rate():
    """Outputs of infinite noise: no curvature and no gradient noise, so no
    stability limit and no Mandt rate; the unit rate, not a division by zero."""
    from sklearn_quinn._core.evidence import ParameterGroups
    from sklearn_quinn._core.likelihoods import GaussianLikelihood
    from sklearn_quinn._core.network import FunctionalModel, build_mlp
    from sklearn_quinn.swag._rate import sampling_rate

    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(2, 1, (4,), "tanh").double())
    X, Y = torch.randn(20, 2, dtype=torch.float64), torch.randn(20, 1, dtype=torch.float64)
    likelihood = GaussianLikelihood(torch.tensor([math.inf], dtype=torch.float64)).frozen(1)
    rate = sampling_rate(model, model.flatten(), X, Y, likelihood, ParameterGroups.of(model),
                         torch.tensor(1.0, dtype=torch.float64), 5)
    assert rate == 1.0


@pytest.mark.parametrize("count", [-8e-15, 1.2e-14])
def test_a_prior_that_determines_every_weight_gives_the_stable_rate(monkeypatch, count):
    """prior_std=1e-8 leaves no weight well determined: the count's rounding below zero made the rate
    negative, which torch's SGD refused, and just above it a rate of 5e-15; below one well-determined
    weight the stable rate is taken."""
    from sklearn_quinn import SWAGClassifier
    from sklearn_quinn._core.evidence import LaplaceEvidence

    monkeypatch.setattr(LaplaceEvidence, "well_determined", lambda self, precision: torch.tensor([count]))
    rng = np.random.RandomState(0)
    X = rng.randn(30, 3)
    clf = SWAGClassifier(hidden_layer_sizes=(8,), prior_std=1e-8, max_epochs=30, random_state=0).fit(X, X[:, 0] > 0)
    proba = clf.predict_proba(X)
    assert clf.lr_swag_ > 1e-3 and np.allclose(proba.sum(1), 1) and np.all(np.isfinite(proba))


@pytest.mark.parametrize("factor", [1.0, 0.25])
@pytest.mark.parametrize("low_rank", [True, False])
def test_misfit_scale_of_the_exact_linear_posterior_by_hand(factor, low_rank):
    """For ``f = X w + b`` under Gaussian noise the Laplace posterior is exact:
    ``Sigma = (G + delta I)^-1``. Held as low rank (its eigenvectors times the
    roots of its eigenvalues, std 0) or as its diagonal, and shrunk by
    ``factor``, the scale is ``gamma / tr(G factor Sigma)``: ``1 / factor``
    for the exact covariance, by hand for its diagonal."""
    from torch import nn

    from sklearn_quinn._core.evidence import ParameterGroups
    from sklearn_quinn._core.likelihoods import GaussianLikelihood
    from sklearn_quinn._core.network import FunctionalModel
    from sklearn_quinn._core.posterior import GaussianPosterior
    from sklearn_quinn.swag._scale import misfit_scale

    rng = np.random.RandomState(0)
    X = rng.randn(50, 3) * [1.0, 3.0, 0.3]
    y = X @ [1.0, -2.0, 0.5] + 0.7 + rng.randn(50)
    model = FunctionalModel(nn.Linear(3, 1).double())
    noise_std, delta = 1.3, 2.0
    design = np.c_[X, np.ones(len(X))]
    curvature = design.T @ design / noise_std**2
    covariance = factor * np.linalg.inv(curvature + delta * np.eye(4))
    mean = torch.as_tensor(np.linalg.solve(curvature + delta * np.eye(4), design.T @ y / noise_std**2))
    if low_rank:
        values, vectors = np.linalg.eigh(covariance)
        posterior = GaussianPosterior.from_low_rank(mean, torch.zeros(4, dtype=torch.float64),
                                                    torch.as_tensor(vectors * np.sqrt(values)))
        expected = 1 / factor
    else:
        posterior = GaussianPosterior.from_std(mean, torch.as_tensor(np.sqrt(np.diag(covariance))))
        well_determined = np.trace(curvature @ np.linalg.inv(curvature + delta * np.eye(4)))
        expected = well_determined / (np.diag(curvature) @ np.diag(covariance))
    likelihood = GaussianLikelihood(torch.tensor([noise_std], dtype=torch.float64)).frozen(1)
    scale = misfit_scale(model, posterior, torch.as_tensor(X), torch.as_tensor(y[:, None]), likelihood,
                         ParameterGroups.of(model), torch.tensor(delta, dtype=torch.float64))
    assert scale == pytest.approx(expected, rel=1e-9)


def test_a_refuted_quadratic_model_scales_the_draws_to_add_half_the_well_determined_weights():
    """A ReLU network whose hidden units are dead at the mean: only the output bias carries
    curvature, ``N / s**2``, so ``gamma = (N / s**2) / (N / s**2 + delta)``. The hidden biases'
    wide stds, flat at the mean, put ``gamma / tr(G Sigma)`` far out; the check's draws there
    revive the units and refute it, and the scale is then the one at which those draws add
    ``gamma / 2`` to the mean's misfit (MacKay's expected misfit of a quadratic posterior)."""
    from torch import nn

    from sklearn_quinn._core.evidence import ParameterGroups
    from sklearn_quinn._core.likelihoods import GaussianLikelihood
    from sklearn_quinn._core.network import FunctionalModel
    from sklearn_quinn._core.posterior import GaussianPosterior
    from sklearn_quinn.swag._scale import misfit_scale

    rng = np.random.RandomState(0)
    n_rows, noise_std, delta = 40, 0.5, 1.0
    X, Y = torch.as_tensor(rng.randn(n_rows, 1)), torch.as_tensor(rng.randn(n_rows, 1))
    model = FunctionalModel(nn.Sequential(nn.Linear(1, 3), nn.ReLU(), nn.Linear(3, 1)).double())
    # The hidden weights (3), hidden biases (3), output weights (3) and the output bias.
    mean = torch.tensor([0.0] * 3 + [-5.0] * 3 + [1.0] * 3 + [float(Y.mean())], dtype=torch.float64)
    std = torch.tensor([1e-3] * 3 + [2.0] * 3 + [1e-3] * 4, dtype=torch.float64)
    posterior = GaussianPosterior.from_std(mean, std)
    likelihood = GaussianLikelihood(torch.tensor([noise_std], dtype=torch.float64)).frozen(1)
    scale = misfit_scale(model, posterior, X, Y, likelihood, ParameterGroups.of(model),
                         torch.tensor(delta, dtype=torch.float64))
    curvature = n_rows / noise_std**2
    gamma = curvature / (curvature + delta)
    assert scale < gamma / (curvature * 1e-6) / 100  # the quadratic model's scale, refuted
    assert misfit_added_at(model, posterior, X, Y, likelihood, scale) == pytest.approx(gamma / 2, rel=1e-3)


def linear_table(n_rows=50):
    """``f = X w + b`` under Gaussian noise: the module, its design's rows and targets (tensors)."""
    from torch import nn

    from sklearn_quinn._core.network import FunctionalModel

    rng = np.random.RandomState(0)
    X = rng.randn(n_rows, 3) * [1.0, 3.0, 0.3]
    y = X @ [1.0, -2.0, 0.5] + 0.7 + rng.randn(n_rows)
    return FunctionalModel(nn.Linear(3, 1).double()), torch.as_tensor(X), torch.as_tensor(y[:, None])


@pytest.mark.parametrize("batch_size, weight_matters", [(2, True), (400, False)])
def test_rate_of_rows_weighted_equals_the_rate_of_the_rows_repeated(batch_size, weight_matters):
    """Each row standing for ``row_weight`` rows of the table is the table with
    every row repeated that often: the same GGN, ``gamma``, gradient noise and
    rate, whichever of Mandt's rate (a batch of 2 rows) and the stability cap
    (400) binds. The cap, ``2 f N / lambda_max(G)``, is the same for the rows
    taken once; Mandt's rate is not."""
    from sklearn_quinn._core.evidence import ParameterGroups
    from sklearn_quinn._core.likelihoods import GaussianLikelihood
    from sklearn_quinn.swag._rate import sampling_rate

    model, X, Y = linear_table()
    theta = torch.tensor([0.9, -1.9, 0.6, 0.8], dtype=torch.float64)  # near, not at, the mode
    likelihood = GaussianLikelihood(torch.tensor([1.3], dtype=torch.float64)).frozen(1)
    args = (likelihood, ParameterGroups.of(model), torch.tensor(2.0, dtype=torch.float64), batch_size)
    repeated = sampling_rate(model, theta, X.repeat(4, 1), Y.repeat(4, 1), *args)
    weighted = sampling_rate(model, theta, X, Y, *args, row_weight=4.0)
    assert weighted == pytest.approx(repeated, rel=1e-9)
    assert (weighted != pytest.approx(sampling_rate(model, theta, X, Y, *args), rel=1e-3)) == weight_matters


def test_an_interpolating_fit_has_no_gradient_noise_and_gets_the_stable_rate():
    """Integer rows and targets that ``f = X w + b`` fits exactly at integer weights: every per-point
    gradient is exactly 0, so is the noise's trace, and Mandt's ``2 S gamma / (N tr C)`` is a division
    by zero; the rate is the stability cap ``2 f N / lambda_max(G)``, ``G = A^T A / s^2`` with
    ``A = [X, 1]``."""
    from torch import nn

    from sklearn_quinn._core.evidence import ParameterGroups
    from sklearn_quinn._core.likelihoods import GaussianLikelihood
    from sklearn_quinn._core.network import FunctionalModel
    from sklearn_quinn.swag._rate import STABILITY_FRACTION, sampling_rate

    X = np.random.RandomState(0).randint(-3, 4, size=(40, 2)).astype(np.float64)
    y = X @ [2.0, -1.0] + 3.0
    model = FunctionalModel(nn.Linear(2, 1).double())
    theta = torch.tensor([2.0, -1.0, 3.0], dtype=torch.float64)  # the exact fit
    likelihood = GaussianLikelihood(torch.tensor([0.5], dtype=torch.float64)).frozen(1)
    rate = sampling_rate(model, theta, torch.as_tensor(X), torch.as_tensor(y[:, None]), likelihood,
                         ParameterGroups.of(model), torch.tensor(1.0, dtype=torch.float64), 4)
    design = np.c_[X, np.ones(len(X))]
    largest = np.linalg.eigvalsh(design.T @ design / 0.5**2)[-1]
    assert rate == pytest.approx(2 * STABILITY_FRACTION * len(X) / largest, rel=1e-9)


def test_the_capped_rate_widens_the_stiffest_direction_by_a_quarter():
    """The module's promise, by hand: SGD at rate ``eps`` along a direction of per-point curvature
    ``lambda`` settles at ``2 / (2 - eps lambda)`` times the continuous law's variance. At the cap,
    ``eps = 2 f N / lambda_max(G)`` and the per-point loss's ``lambda = lambda_max(G) / N``, so the
    stiffest direction is widened by ``2 / (2 - 2 f)``, which is 1.25."""
    from sklearn_quinn._core.evidence import ParameterGroups
    from sklearn_quinn._core.likelihoods import GaussianLikelihood
    from sklearn_quinn.swag._rate import sampling_rate

    model, X, Y = linear_table()
    theta = torch.tensor([0.9, -1.9, 0.6, 0.8], dtype=torch.float64)
    likelihood = GaussianLikelihood(torch.tensor([1.3], dtype=torch.float64)).frozen(1)
    rate = sampling_rate(model, theta, X, Y, likelihood, ParameterGroups.of(model),
                         torch.tensor(2.0, dtype=torch.float64), 10**6)  # a batch that puts Mandt's rate above the cap
    design = np.c_[X.numpy(), np.ones(len(X))]
    per_point = np.linalg.eigvalsh(design.T @ design / 1.3**2)[-1] / len(X)
    assert 2 / (2 - rate * per_point) == pytest.approx(1.25, rel=1e-9)


def misfit_added_at(model, posterior, X, Y, likelihood, scale):
    """The mean misfit that the check's draws of ``posterior`` scaled by ``scale`` add to its mean's."""
    from sklearn_quinn.swag._scale import added_misfit, check_deviations

    return added_misfit(model, posterior.mean, check_deviations(posterior), X, Y, likelihood, 1.0, math.log(scale))


def linear_table_posterior():
    """``linear_table``'s module and data, a Gaussian posterior of std 0.05 about weights near the
    data's (the bias last), and unit Gaussian noise."""
    from sklearn_quinn._core.likelihoods import GaussianLikelihood
    from sklearn_quinn._core.posterior import GaussianPosterior

    model, X, Y = linear_table()
    posterior = GaussianPosterior.from_std(torch.tensor([0.9, -1.9, 0.6, 0.8], dtype=torch.float64),
                                           torch.full((4,), 0.05, dtype=torch.float64))
    likelihood = GaussianLikelihood(torch.tensor([1.0], dtype=torch.float64)).frozen(1)
    return model, X, Y, posterior, likelihood


@pytest.mark.parametrize("scale", [0.3, 4.0])
def test_the_added_misfit_is_the_scaled_draws_by_hand(scale):
    """For ``f = X w + b`` under unit Gaussian noise the draws ``m + sqrt(c) d_s`` add to the mean's
    misfit ``-sqrt(c) r^T X d_s + c |X d_s|^2 / 2`` each (``r`` the mean's residuals), times the
    rows' weight, averaged over the draws: written out here in numpy, to rounding. (The test below
    reads its target from the same function, so that alone could not tell the draws' scale.)"""
    from sklearn_quinn._core.likelihoods import GaussianLikelihood
    from sklearn_quinn.swag._scale import added_misfit

    model, X, Y = linear_table()
    mean = torch.tensor([0.9, -1.9, 0.6, 0.8], dtype=torch.float64)  # weights, then the bias
    deviations = torch.as_tensor(np.random.RandomState(1).randn(5, 4) * 0.1)
    likelihood = GaussianLikelihood(torch.tensor([1.0], dtype=torch.float64)).frozen(1)
    design = np.column_stack([X.numpy(), np.ones(len(X))])
    residuals = Y.numpy()[:, 0] - design @ mean.numpy()
    moved = design @ deviations.numpy().T  # (N, S)
    by_hand = 2.5 * np.mean(-np.sqrt(scale) * residuals @ moved + scale * (moved**2).sum(0) / 2)
    assert added_misfit(model, mean, deviations, X, Y, likelihood, 2.5, math.log(scale)) == pytest.approx(
        by_hand, rel=1e-10)


def test_the_draws_keep_a_scale_they_agree_with_and_find_one_they_refute():
    """``draws_scale`` on a linear model, whose misfit is quadratic: the scale the quadratic model
    gives is kept; one a million times too large (the draws' added misfit a million times its
    target) is replaced by the scale at which the same draws add the target misfit."""
    from sklearn_quinn.swag._scale import draws_scale

    model, X, Y, posterior, likelihood = linear_table_posterior()
    target = misfit_added_at(model, posterior, X, Y, likelihood, 3.0)
    assert draws_scale(model, posterior, X, Y, likelihood, 1.0, 3.0, target) == 3.0
    found = draws_scale(model, posterior, X, Y, likelihood, 1.0, 3e6, target)
    assert found == pytest.approx(3.0, rel=1e-3)
    assert misfit_added_at(model, posterior, X, Y, likelihood, found) == pytest.approx(target, rel=1e-3)


def test_on_a_dozen_rows_the_draws_stay_where_the_misfit_is_quadratic():
    """On 12 rows SWAG's snapshots spread along directions that are flat at their mean, and the
    quadratic misfit widened them up to 1e14 times, into draws whose networks missed the test
    targets by thousands (test NLL 10.4); the draws' own misfit bounds the widening, and the
    test NLL is the Laplace posterior's."""
    from scipy.stats import norm

    from sklearn_quinn import LaplaceRegressor

    rng = np.random.RandomState(0)
    X = rng.randn(1012, 3)
    y = X @ rng.randn(3) + np.sin(2 * X[:, 0]) + rng.randn(1012)

    def nll(estimator):
        mean, std = estimator.fit(X[:12], y[:12]).predict(X[12:], return_std=True)
        return -norm.logpdf(y[12:], mean, std).mean()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the snapshots' spread, widened
        assert nll(SWAGRegressor(random_state=0)) == pytest.approx(nll(LaplaceRegressor(random_state=0)), abs=0.1)


def test_misfit_scale_of_rows_weighted_equals_that_of_the_rows_repeated():
    """``gamma / tr(G Sigma)`` over a table whose every row stands for 4: that of
    the table with every row repeated 4 times."""
    from sklearn_quinn._core.evidence import ParameterGroups
    from sklearn_quinn._core.likelihoods import GaussianLikelihood
    from sklearn_quinn._core.posterior import GaussianPosterior
    from sklearn_quinn.swag._scale import misfit_scale

    model, X, Y = linear_table()
    generator = torch.Generator().manual_seed(0)
    posterior = GaussianPosterior.from_low_rank(
        torch.tensor([0.9, -1.9, 0.6, 0.8], dtype=torch.float64),
        0.05 * torch.rand(4, generator=generator, dtype=torch.float64),
        0.05 * torch.randn(4, 3, generator=generator, dtype=torch.float64),
    )
    likelihood = GaussianLikelihood(torch.tensor([1.3], dtype=torch.float64)).frozen(1)
    args = (likelihood, ParameterGroups.of(model), torch.tensor(2.0, dtype=torch.float64))
    repeated = misfit_scale(model, posterior, X.repeat(4, 1), Y.repeat(4, 1), *args)
    weighted = misfit_scale(model, posterior, X, Y, *args, row_weight=4.0)
    assert weighted == pytest.approx(repeated, rel=1e-9)
    assert weighted != pytest.approx(misfit_scale(model, posterior, X, Y, *args), rel=1e-3)


def test_rate_and_scale_are_read_from_a_random_subset_of_a_big_table(monkeypatch, wave_data):
    """Above ``SUBSET_ROWS`` training rows the rate and the covariance's scale
    are read from that many rows drawn at random, each standing for its share
    of the table; at or below it, from every row. On the wave's 80 rows with
    ``SUBSET_ROWS`` at 40, the rate and the scales stay within 20% of those
    read from all 80 (here 2% and 4%: estimates from 40 rows). 100 epochs:
    after 60 the network still under-fits the sine, and the two fits can end
    in different modes (a noise of 0.42 against 0.62), which compares two
    posteriors rather than two estimates of one. One member: a second, from
    its own initial weights, reaches a mode of its own in each fit (its
    means 0.28 apart), which the slightly different MAP training of the
    subset's evidence sends elsewhere."""
    from sklearn_quinn._core import row_subsets
    from sklearn_quinn.swag import _swag

    X, y = wave_data
    seen = []
    original = _swag.sampling_rate

    def spy(model, theta, X_rows, *args):
        seen.append((len(X_rows), args[-1]))
        return original(model, theta, X_rows, *args)

    monkeypatch.setattr(_swag, "sampling_rate", spy)
    every_row = small(n_estimators=1, max_epochs=100, normalize_X=False).fit(X, y)
    assert seen == [(len(X), 1.0)]
    seen.clear()
    monkeypatch.setattr(row_subsets, "SUBSET_ROWS", len(X) // 2)
    subset = small(n_estimators=1, max_epochs=100, normalize_X=False).fit(X, y)
    assert seen == [(len(X) // 2, 2.0)]
    assert subset.lr_swag_ == pytest.approx(every_row.lr_swag_, rel=0.2)
    np.testing.assert_allclose(subset.cov_scale_, every_row.cov_scale_, rtol=0.2)
    assert subset.lr_swag_ != every_row.lr_swag_


def assert_components_scaled(scaled, unscaled, scales):
    for component, reference, scale in zip(scaled.posterior_.components, unscaled.posterior_.components, scales,
                                           strict=True):
        torch.testing.assert_close(component.mean, reference.mean)
        torch.testing.assert_close(component.variance, reference.variance / scale)


def test_cov_scale_divides_the_covariance(wave_data):
    """``cov_scale=s`` (Laplace's meaning): the same snapshots (same seed) with
    every member's covariance over ``s``; 'auto' reports the ``s`` it took for
    each member, ``1 / misfit_scale``."""
    X, y = wave_data
    one = small(n_estimators=2, cov_scale=1.0).fit(X, y)
    four = small(n_estimators=2, cov_scale=4.0).fit(X, y)
    np.testing.assert_array_equal(one.cov_scale_, [1.0, 1.0])
    np.testing.assert_array_equal(four.cov_scale_, [4.0, 4.0])
    assert_components_scaled(four, one, [4.0, 4.0])
    auto = small(n_estimators=2).fit(X, y)
    assert (auto.cov_scale_ > 0).all() and (auto.cov_scale_ != 1.0).all()
    assert_components_scaled(auto, one, auto.cov_scale_)


def test_a_trajectory_that_barely_moved_warns(wave_data):
    """At lr_swag=1e-9 the snapshots hardly spread: the scale widens them more than 100-fold,
    with one warning for all the members, which names the line that called fit."""
    X, y = wave_data
    with pytest.warns(UserWarning, match="spread .* times too little") as record:
        reg = small(lr_swag=1e-9, n_estimators=3).fit(X, y)
    assert (reg.cov_scale_ < 1 / 100).all()
    [warning] = [w for w in record if "too little" in str(w.message)]
    assert "(3 of 3 members)" in str(warning.message) and warning.filename == __file__


def test_the_auto_rate_does_not_warn_of_the_widening_its_cap_needs(wave_data, monkeypatch):
    """At ``lr_swag='auto'`` the rate is already the largest stable one, and the widening measures
    its cap: no warning, whatever the widening (the threshold set to 0 here, below every member's);
    the same rate given as a float warns, since a larger one would then spread the snapshots."""
    from sklearn_quinn.swag import _swag

    monkeypatch.setattr(_swag, "_MAX_QUIET_WIDENING", 0.0)
    X, y = wave_data
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        auto = small(n_estimators=2).fit(X, y)
    assert not [w for w in record if "too little" in str(w.message)]
    with pytest.warns(UserWarning, match=r"spread .* times too little .*\(2 of 2 members\)"):
        given = small(n_estimators=2, lr_swag=auto.lr_swag_).fit(X, y)
    np.testing.assert_allclose(given.cov_scale_, auto.cov_scale_, rtol=1e-12)


def test_auto_scale_is_one_where_the_curvature_vanishes_with_confidence(wave_data):
    """A classifier's 'auto' scale is 1: a softmax's misfit is not quadratic across
    the draws. A heteroscedastic regressor's curvature moves with its noise head
    but does not vanish, and its 'auto' scale is ``1 / misfit_scale`` as a
    Gaussian one's."""
    from sklearn_quinn import SWAGClassifier

    X, y = wave_data
    params = dict(hidden_layer_sizes=(8,), max_epochs=60, swag_epochs=10, max_rank=4, random_state=0)
    np.testing.assert_array_equal(SWAGClassifier(**params).fit(X, y > np.median(y)).cov_scale_, np.ones(5))
    one = small(likelihood="heteroscedastic", cov_scale=1.0).fit(X, y)
    auto = small(likelihood="heteroscedastic").fit(X, y)
    assert (auto.cov_scale_ > 0).all() and (auto.cov_scale_ != 1.0).all()
    assert_components_scaled(auto, one, auto.cov_scale_)


@pytest.mark.parametrize("n_rows, params, expected", [
    (40_000, {}, 5),  # 200 steps an epoch: 1000 epochs are exactly the 200,000-step cap
    (40_002, {}, 1),  # capped: each member would be another capped training (40,001: 200 steps still)
    (10**6, {"max_epochs": 100}, 5),  # epochs fixed by the user: no cap
    (10**6, {"n_estimators": 3}, 3),
])
def test_auto_members_are_five_below_the_training_s_step_cap(n_rows, params, expected):
    assert SWAGRegressor(**params)._n_members(n_rows) == expected


def test_members_end_at_modes_on_targets_far_from_unit_scale():
    """``normalize_y=False`` on targets near 1000: Adam's minibatch steps from a member's own
    initial weights stopped far short of a mode (training RMSE 720 and 584 against the MAP's
    67), and its Gaussian predicted about 500; every member now ends at a mode, as the MAP
    does, and its mean fits the rows about as well as the MAP's Gaussian (the first)."""
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(30, 2))
    y = 100 * (np.sin(2 * X[:, 0]) + 0.1 * rng.randn(30)) + 1000
    reg = SWAGRegressor(hidden_layer_sizes=(8,), n_estimators=2, swag_epochs=10, n_samples=20, normalize_y=False,
                        random_state=0).fit(X, y)
    inputs = reg._validated_inputs(X)
    rmse = [float((reg._model(component.mean[None], inputs)[0, :, 0] - torch.as_tensor(y)).square().mean().sqrt())
            for component in reg.posterior_.components]
    assert max(rmse) < 1.5 * rmse[0]


def test_proximal_step_shrinks_after_the_gradient_step():
    """One step on the loss ``g . theta`` is ``(theta - lr g) / (1 + lr decay)``: the shrinkage acts
    on the gradient step's result (the proximal map of the prior), not on the weights before it,
    which would give ``theta / (1 + lr decay) - lr g``."""
    theta = torch.nn.Parameter(torch.tensor([2.0, -4.0], dtype=torch.float64))
    gradient = torch.tensor([1.0, 2.0], dtype=torch.float64)
    optimizer = ProximalSGD([theta], lr=0.5, decay=3.0)
    (gradient * theta).sum().backward()
    optimizer.step()
    torch.testing.assert_close(theta.detach(), torch.tensor([1.5 / 2.5, -5.0 / 2.5], dtype=torch.float64))


@pytest.mark.parametrize("collapsed", ["spread", "well_determined"])
def test_misfit_scale_is_one_where_the_draws_add_no_misfit(monkeypatch, collapsed):
    """A posterior collapsed to its mean (std 0, no low-rank term) adds no misfit, and a count of
    well-determined weights rounded to or below zero (a prior that holds every weight) leaves none
    to add: ``gamma / tr(G Sigma)`` is then x / 0 or a scale of at most 0, and the scale is 1."""
    from sklearn_quinn._core.evidence import LaplaceEvidence, ParameterGroups
    from sklearn_quinn._core.likelihoods import GaussianLikelihood
    from sklearn_quinn._core.posterior import GaussianPosterior
    from sklearn_quinn.swag._scale import misfit_scale

    model, X, Y = linear_table()
    mean = torch.tensor([0.9, -1.9, 0.6, 0.8], dtype=torch.float64)
    std = torch.full((4,), 0.0 if collapsed == "spread" else 0.05, dtype=torch.float64)
    if collapsed == "well_determined":
        monkeypatch.setattr(LaplaceEvidence, "well_determined", lambda self, precision: torch.tensor([-8e-15]))
    likelihood = GaussianLikelihood(torch.tensor([1.3], dtype=torch.float64)).frozen(1)
    scale = misfit_scale(model, GaussianPosterior.from_std(mean, std), X, Y, likelihood, ParameterGroups.of(model),
                         torch.tensor(2.0, dtype=torch.float64))
    assert scale == 1.0


class AveragingCriterion:
    """The members' criterion as the collector sees it: the mean of the losses fed since the last reset."""

    def reset_misfit(self):
        self.fed = []

    def feed(self, loss):
        self.fed.append(loss)

    @property
    def mean_misfit(self):
        return torch.stack(self.fed).mean(0)


def test_snapshot_collector_keeps_every_epoch_s_own_mean_loss():
    """Driven by hand through skorch's hooks for 4 epochs at ``every=2``: ``losses_`` holds each
    epoch's mean loss per member, of that epoch's batches only and of every epoch (snapshot or
    not); the moments hold the weights of epochs 2 and 4."""
    from types import SimpleNamespace

    from sklearn_quinn.swag._callbacks import CollectSnapshots

    net = SimpleNamespace(criterion_=AveragingCriterion(), history=[], module_=SimpleNamespace())
    collect = CollectSnapshots(every=2, max_rank=3)
    collect.on_train_begin(net)
    batch_losses = [[1.0, 3.0], [10.0, 20.0], [5.0, 7.0], [0.0, 4.0]]  # two batches an epoch, one member
    for epoch, losses in enumerate(batch_losses, start=1):
        net.history.append({})  # skorch's own on_epoch_begin opens the epoch's row first
        collect.on_epoch_begin(net)
        for loss in losses:
            net.criterion_.feed(torch.tensor([loss]))
        net.module_.theta = torch.tensor([[float(epoch)]])
        collect.on_epoch_end(net)
    assert torch.cat(collect.losses_).tolist() == [2.0, 15.0, 6.0, 2.0]
    assert collect.state_.snapshots.flatten().tolist() == [2.0, 4.0]
    assert int(collect.state_.n_snapshots) == 2


def test_the_widening_warning_names_the_members_beyond_a_hundredfold():
    """A member widened exactly 100-fold is not warned of; those above it are, with the range of
    their factors and their count among the members."""
    from sklearn_quinn.swag._swag import _warn_of_wide_guesses

    with pytest.warns(UserWarning, match=r"spread 150 to 400 times too little .*\(2 of 4 members\)"):
        _warn_of_wide_guesses(np.array([100.0, 150.0, 99.0, 400.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _warn_of_wide_guesses(np.array([100.0, 1.0]))


def faked_phase(monkeypatch, untrained_loss, losses_by_run=(), overflow_first=False):
    """The estimator's SGD phase with the untrained network's loss set to ``untrained_loss``; the
    epochs' losses of run ``i`` replaced by ``losses_by_run[i]`` (one value per epoch, for every
    member) where given, and the first run's mean of squares overflowed where ``overflow_first``.
    Returns the list of the rates the runs had."""
    from sklearn_quinn.swag import _swag

    rates, original = [], _swag.SWAGMixin._run_sgd

    def run(self, X, Y, members, likelihood, prior, lr, seeds):
        state, losses = original(self, X, Y, members, likelihood, prior, lr, seeds)
        if overflow_first and not rates:
            state = state._replace(sq_mean=torch.full_like(state.sq_mean, math.inf))
        if len(rates) < len(losses_by_run):
            losses = [torch.full_like(losses[0], value) for value in losses_by_run[len(rates)]]
        rates.append(lr)
        return state, losses

    monkeypatch.setattr(_swag.SWAGMixin, "_run_sgd", run)
    monkeypatch.setattr(_swag.SWAGMixin, "_untrained_loss", lambda self, *args: untrained_loss)
    return rates


def test_a_phase_is_judged_by_its_mean_loss_over_the_epochs(wave_data, monkeypatch):
    """The untrained network's loss put at 50: epochs alternating 70 and 40 (mean 55) undo the
    training and the phase is rerun at a tenth of the rate; alternating 70 and 20 (mean 45) it
    holds, though every other epoch is above 50."""
    X, y = wave_data
    rates = faked_phase(monkeypatch, 50.0, [[70.0, 40.0] * 5, [70.0, 20.0] * 5])
    with pytest.warns(ConvergenceWarning, match="diverged at lr_swag=0.05;"):
        reg = small(n_estimators=2, lr_swag=0.05, cov_scale=1.0).fit(X, y)
    assert reg.lr_swag_ == pytest.approx(0.005) and len(rates) == 2


def test_a_member_no_better_than_an_untrained_network_is_checked_for_finiteness_only(wave_data, monkeypatch):
    """The untrained network's loss put below the members' trained losses: there is no training for
    SGD to undo, and a phase whose losses stand far above it holds at the first rate."""
    X, y = wave_data
    rates = faked_phase(monkeypatch, -1e9, [[1e6] * 10])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        reg = small(n_estimators=2, lr_swag=0.05, cov_scale=1.0).fit(X, y)
    assert reg.lr_swag_ == 0.05 and len(rates) == 1


def test_a_phase_whose_squared_weights_overflow_is_rerun(wave_data, monkeypatch):
    """Weights near 1e200 keep their mean finite while their squares overflow to inf, and with them
    the variance and every draw: such a phase is rerun at a tenth of the rate."""
    X, y = wave_data
    rates = faked_phase(monkeypatch, -1e9, overflow_first=True)
    with pytest.warns(ConvergenceWarning, match="diverged at lr_swag=0.05;"):
        reg = small(n_estimators=2, lr_swag=0.05, cov_scale=1.0).fit(X, y)
    assert reg.lr_swag_ == pytest.approx(0.005) and len(rates) == 2
    assert all(torch.isfinite(component.std).all() for component in reg.posterior_.components)


def test_the_sgd_phase_runs_at_lr_swag_in_noise_variance_units_under_the_prior_per_row(wave_data, monkeypatch):
    """``lr_swag`` is a rate on half the squared error: on the per-point negative log likelihood SGD
    runs at ``lr_swag * noise_std**2`` (here 0.05 * 0.5**2, ``normalize_y=False`` keeping y's units),
    at that constant rate, and the prior's shrinkage is its precision per training row (1 / (2**2 80))."""
    from sklearn_quinn.swag import _swag

    X, y = wave_data
    calls, original = [], _swag.train_members

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(_swag, "train_members", spy)
    small(n_estimators=1, noise_std=0.5, prior_std=2.0, normalize_y=False, lr_swag=0.05, cov_scale=1.0).fit(X, y)
    [call] = calls
    assert call["lr"] == pytest.approx(0.05 * 0.5**2, rel=1e-12) and call["lr_schedule"] == "constant"
    assert call["optimizer"].keywords["decay"] == pytest.approx(1 / (2.0**2 * len(X)), rel=1e-12)


def test_the_draws_refute_a_scale_only_beyond_ten_times_their_target():
    """The quadratic model's scale stands while the check's draws add at most ten times the target
    misfit: kept at 9.9 times, replaced at 10.1 times by a smaller scale, the bisection's end at
    which the draws add no more than the target (its other end, 2**-20 of a decade above, adds more)."""
    from sklearn_quinn.swag._scale import draws_scale

    model, X, Y, posterior, likelihood = linear_table_posterior()
    added = misfit_added_at(model, posterior, X, Y, likelihood, 3.0)
    assert added > 0
    assert draws_scale(model, posterior, X, Y, likelihood, 1.0, 3.0, added / 9.9) == 3.0
    found = draws_scale(model, posterior, X, Y, likelihood, 1.0, 3.0, added / 10.1)
    assert found < 3.0 and misfit_added_at(model, posterior, X, Y, likelihood, found) <= added / 10.1


class SquareRootOfLinear(torch.nn.Module):
    """``sqrt(x w)``: NaN wherever a draw of ``w`` turns ``x w`` negative."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(1, dtype=torch.float64))

    def forward(self, x):
        return (x * self.weight).sqrt()


def test_draws_whose_misfit_is_nan_keep_the_quadratic_model_s_scale():
    """Draws far out can leave the finite numbers (``inf - inf`` inside a network); the check cannot
    judge a NaN misfit and keeps the scale it was given, where a bisection on NaN comparisons would
    return a tenth of it. Here ``sqrt(x w)`` at positive ``x`` and mean ``w = 1``, and draws of std
    10 that make ``w`` negative."""
    from sklearn_quinn._core.likelihoods import GaussianLikelihood
    from sklearn_quinn._core.network import FunctionalModel
    from sklearn_quinn._core.posterior import GaussianPosterior
    from sklearn_quinn.swag._scale import draws_scale

    model = FunctionalModel(SquareRootOfLinear())
    X = torch.linspace(0.5, 2.0, 10, dtype=torch.float64)[:, None]
    posterior = GaussianPosterior.from_std(torch.ones(1, dtype=torch.float64),
                                           torch.full((1,), 10.0, dtype=torch.float64))
    likelihood = GaussianLikelihood(torch.tensor([1.0], dtype=torch.float64)).frozen(1)
    assert math.isnan(misfit_added_at(model, posterior, X, X.sqrt(), likelihood, 3.0))
    assert draws_scale(model, posterior, X, X.sqrt(), likelihood, 1.0, 3.0, 0.5) == 3.0


def test_as_many_draws_as_members_are_enough():
    """One draw a member covers every member's Gaussian: ``n_samples == n_estimators`` is accepted,
    one fewer refused."""
    SWAGRegressor(n_estimators=3, n_samples=3)._check_parameters()
    with pytest.raises(ValueError, match="cannot cover the 3 members"):
        SWAGRegressor(n_estimators=3, n_samples=2)._check_parameters()


def test_the_sgd_phase_s_batch_is_at_most_the_table():
    """A table smaller than ``batch_size_swag`` takes whole-table steps, and the automatic rate reads
    that batch (Mandt's rate grows with the rows a step averages)."""
    assert SWAGRegressor(batch_size_swag=64)._swag_batch_size(20) == 20
    assert SWAGRegressor(batch_size_swag=64)._swag_batch_size(100) == 64


def test_member_losses_are_the_negative_log_likelihood_per_row(wave_data):
    """The losses the divergence test compares with the SGD phase's per-row losses are per row too:
    under a Gaussian of std 0.5 (``normalize_y=False``: y's units), numpy's mean of ``-log N(y; f, 0.5)``
    over the rows, not its sum."""
    from scipy.stats import norm

    from sklearn_quinn._core.likelihoods import GaussianLikelihood

    X, y = wave_data
    reg = small(n_estimators=1, noise_std=0.5, normalize_y=False, cov_scale=1.0).fit(X, y)
    inputs = reg._validated_inputs(X)
    theta = torch.stack([reg._model.flatten(), reg.posterior_.components[0].mean])
    likelihood = GaussianLikelihood(torch.tensor([0.5], dtype=torch.float64)).frozen(1)
    losses = reg._member_losses(inputs, torch.as_tensor(y[:, None]), likelihood, theta)
    outputs = reg._model(theta, inputs)[:, :, 0].numpy()
    np.testing.assert_allclose(losses.numpy(), -norm.logpdf(y, outputs, 0.5).mean(1), rtol=1e-12)
