"""Stochastic-gradient MCMC (SGLD, SGHMC with a cyclical step size) against an exact posterior."""

import math

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose
from torch import nn

from sklearn_quinn import MCMCClassifier, MCMCRegressor
from sklearn_quinn._core.curvature import curvature
from sklearn_quinn._core.priors import GaussianPrior
from sklearn_quinn.mcmc._sgmcmc import SGState, auto_step_size, check_cycles, cyclical_schedule, sg_step

from .exact import BayesianLinearRegression


@pytest.fixture(scope="module")
def big_linear():
    """100,000 rows of a linear model with unit noise, and 20 test inputs."""
    rng = np.random.RandomState(0)
    X = rng.randn(100_000, 3)
    y = X @ np.array([0.5, -1.0, 0.3]) + 0.2 + rng.randn(100_000)
    return X, y, 2 * rng.randn(20, 3)


@pytest.mark.slow
@pytest.mark.parametrize("sampler, step_size", [("sgld", 0.2), ("sghmc", 0.05)])
def test_on_100k_rows_the_predictive_matches_the_exact_posterior(big_linear, sampler, step_size, device):
    # step_size='auto' (the default) at 1000 rows a batch of 100,000: min(0.2, 2 sqrt(B / N)) for
    # SGLD, min(0.05, 0.5 sqrt(B / N)) for SGHMC.
    X, y, X_test = big_linear
    regressor = MCMCRegressor(
        module=nn.Linear(3, 1), prior_std=1.0, noise_std=1.0, normalize_X=False, normalize_y=False, sampler=sampler,
        n_samples=200, thin=10, n_burnin=1000, batch_size=1000, max_epochs=2, random_state=0, device=device,
    ).fit(X, y)
    assert_allclose(regressor.step_size_, step_size)
    # The network's output (the noise-free part of the predictive) under 800 autocorrelated draws
    # from 4 chains of 4 cycles each, with the minibatch noise uncorrected: its mean within one
    # posterior std of the exact mean, its std within 20% in the median and 40% at every point.
    error, ratio = _against_the_exact_posterior(regressor, X, y, X_test)
    assert np.max(np.abs(error)) < 1.0
    assert 0.8 < np.median(ratio) < 1.2
    assert np.all((ratio > 0.6) & (ratio < 1.4))
    assert np.all(regressor.acceptance_rate_ == 1)
    assert regressor.chains_.shape == (4, 200, 4)


@pytest.mark.parametrize("sampler", ["sgld", "sghmc"])
def test_at_the_defaults_on_4000_rows_the_draws_spread_as_the_posterior(sampler):
    # max_epochs=2: the MAP is only the chains' start, which the burn-in forgets on this posterior.
    # Each cycle's first half keeps the noise on. Off (Zhang et al.'s exploration stage), it pulled the
    # chains back to the mode each cycle, and their output's std here was 0.77 (SGLD) and 0.74 (SGHMC)
    # of the exact posterior's in the median over the test points.
    rng = np.random.RandomState(0)
    X = rng.randn(4000, 3)
    y = X @ np.array([0.5, -1.0, 0.3]) + 0.2 + rng.randn(4000)
    X_test = 2 * rng.randn(20, 3)
    regressor = MCMCRegressor(
        module=nn.Linear(3, 1), prior_std=1.0, noise_std=1.0, normalize_X=False, normalize_y=False, sampler=sampler,
        max_epochs=2, random_state=0,
    ).fit(X, y)
    _, ratio = _against_the_exact_posterior(regressor, X, y, X_test)
    # 0.93-1.08 over seeds 0-2 of either sampler (benchmarks/bench_sgmcmc_spread.py): the bounds leave
    # the seeds' spread, and exclude the noiseless halves' 0.66-0.77.
    assert 0.85 < np.median(ratio) < 1.2


def _against_the_exact_posterior(regressor, X, y, X_test):
    """A linear module's draws at ``X_test`` against the exact posterior of unit noise and prior: the
    error of their mean and the ratio of their std, each point's in units of its exact std."""
    exact = BayesianLinearRegression(X, y, noise_std=1.0, prior_std=1.0)
    design = exact.design(X_test)
    exact_std = np.sqrt(np.einsum("ij,jk,ik->i", design, exact.covariance, design))
    draws = regressor.posterior_.samples.cpu().numpy()
    outputs = draws[:, :3] @ X_test.T + draws[:, 3:]
    return (outputs.mean(0) - design @ exact.mean) / exact_std, outputs.std(0) / exact_std


class Gaussian:
    """The log density of N(0, variance) per coordinate, with an exact gradient (a full batch)."""

    def __init__(self, variance):
        self.variance = variance

    def value_and_grad(self, rows, generator):
        return -0.5 * (rows.square() / self.variance).sum(1), -rows / self.variance


@pytest.mark.parametrize("sampler", ["sgld", "sghmc"])
def test_at_a_fixed_step_the_dynamics_keep_a_gaussian_target(sampler):
    # 20,000 chains started from N(0, 4) take 200 steps at eps = 0.1 with the preconditioner
    # M^-1 = 4 (the target's variance): the variance stays 4 within 5% (a standard error of 1%,
    # SGLD's discretisation bias 1 / (1 - eps**2 / 4) - 1 = 0.25%); without the noise, or with it
    # mis-scaled by the preconditioner, it would not.
    generator = torch.Generator().manual_seed(0)
    position = 2.0 * torch.randn(20_000, 1, generator=generator, dtype=torch.float64)
    inverse_mass = torch.full((1,), 4.0, dtype=torch.float64)
    state = SGState(position, 2.0 ** -1 * torch.randn(20_000, 1, generator=generator, dtype=torch.float64))
    for _ in range(200):
        state, finite = sg_step(sampler, Gaussian(4.0), state, 0.1, inverse_mass, generator)
    assert bool(finite.all())
    assert float(state.position.var()) == pytest.approx(4.0, rel=0.05)
    assert abs(float(state.position.mean())) < 5 * (4.0 / 20_000) ** 0.5


def test_the_cyclical_schedule():
    sizes, sampling, keep = cyclical_schedule(n_samples=6, thin=2, n_cycles=2, step_size=0.1)
    assert len(sizes) == 2 * 6 * 2  # each cycle's first half is as long as its sampling half
    cycle = sizes[:12]
    # Zhang et al. (2020), "Cyclical stochastic gradient MCMC for Bayesian deep learning": the
    # squared step falls along half a cosine over the cycle.
    t = torch.arange(12, dtype=cycle.dtype)
    torch.testing.assert_close(cycle.square(), 0.1**2 * (torch.cos(math.pi * t / 12) + 1) / 2, rtol=1e-12, atol=0)
    torch.testing.assert_close(sizes[12:], cycle)
    assert sampling[:12].tolist() == [False] * 6 + [True] * 6
    assert torch.nonzero(keep)[:, 0].tolist() == [7, 9, 11, 19, 21, 23]  # every 2nd sampling step


def test_a_classifier_samples_with_sghmc():
    rng = np.random.RandomState(0)
    X = rng.randn(400, 2)
    labels = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    classifier = MCMCClassifier(hidden_layer_sizes=(8,), hyperprior="empirical", sampler="sghmc", step_size=0.05,
                                n_samples=40, n_burnin=100, batch_size=100, max_epochs=30,
                                random_state=0).fit(X, labels)
    assert classifier.score(X, labels) > 0.9
    assert classifier.n_divergent_ == 0


@pytest.mark.parametrize("params, message", [
    (dict(sampler="sgld"), "hyperprior='empirical'"),  # the default Gamma hyperprior samples from full passes
    (dict(sampler="sghmc", prior_std=1.0, n_samples=3, n_cycles=4), "n_cycles=4"),
    (dict(sampler="sgld", prior_std=1.0, n_cycles=0), "n_cycles"),
])
def test_bad_sg_parameters_are_refused(params, message, monkeypatch):
    """Before the MAP trains (n_cycles above n_samples was refused only after it)."""
    rng = np.random.RandomState(0)
    X = rng.randn(30, 2)
    monkeypatch.setattr(MCMCRegressor, "_fit_map", lambda *args, **kwargs: pytest.fail("the MAP trained first"))
    with pytest.raises(ValueError, match=message):
        MCMCRegressor(hidden_layer_sizes=(4,), max_epochs=5, n_burnin=5, **{"n_samples": 10, **params}).fit(
            X, X[:, 0])


def test_a_unit_dead_at_the_start_gets_its_tensors_mean_curvature():
    # Hidden unit 0 is off on every row at the chain's start, so its weights have no GGN
    # curvature; scaled by the prior alone, their steps would throw the chain off once it
    # moves the unit into the data. The preconditioner gives them their tensor's mean curvature.
    rng = np.random.RandomState(0)
    X, y = rng.randn(200, 2), rng.randn(200)
    regressor = MCMCRegressor(hidden_layer_sizes=(4,), linear_skip=False, prior_std=1.0, noise_std=1.0,
                              sampler="sgld", n_samples=4, n_cycles=1, n_burnin=0, max_epochs=2,
                              random_state=0).fit(X, y)
    model = regressor._model
    start = model.flatten().unsqueeze(0).clone()
    start[0, 0:2], start[0, 8] = 0.0, -100.0  # unit 0: no input weight, a bias that keeps it off
    X_, Y_ = regressor._tensor(X), regressor._tensor(y[:, None])
    likelihood = regressor._likelihood(Y_)
    inverse_mass = regressor._preconditioner(start, X_, Y_, likelihood, GaussianPrior(1.0))[0]
    ggn = curvature(model, start[0], X_, Y_, likelihood.frozen(1), "ggn", "diag")
    output_weights = slice(12, 16)  # mlp.2.weight, after 8 input weights and 4 biases
    assert float(ggn[12]) == 0.0 and float(ggn[13:16].min()) > 0
    expected = 1 / (ggn[output_weights].mean() + 1.0)
    torch.testing.assert_close(inverse_mass[12], expected)
    torch.testing.assert_close(inverse_mass[13:16], 1 / (torch.maximum(ggn[13:16], ggn[output_weights].mean()) + 1.0))


def test_the_automatic_step_shrinks_as_the_root_of_the_batch_fraction():
    # Protein: 41,157 rows in batches of 200; the caps where a batch is a large fraction of the rows.
    assert auto_step_size("sgld", 200, 41_157) == pytest.approx(2 * (200 / 41_157) ** 0.5)
    assert auto_step_size("sghmc", 200, 41_157) == pytest.approx(0.5 * (200 / 41_157) ** 0.5)
    assert auto_step_size("sgld", 200, 400) == 0.2 and auto_step_size("sghmc", 200, 400) == 0.05
    assert auto_step_size("sgld", 100, 1_000_000) == pytest.approx(auto_step_size("sgld", 400, 4_000_000))


@pytest.mark.parametrize("sampler", ["sgld", "sghmc"])
def test_one_step_is_the_papers_update_written_out(sampler):
    """With the generator's standard normals z, gradient g and ``M^-1`` of each chain, step 0.3:
    SGLD (Welling and Teh 2011) moves to ``theta + eps**2 / 2 M^-1 g + eps M^(-1/2) z``; SGHMC (Chen
    et al. 2014) takes ``p' = 0.9 p + eps g + sqrt(2 * 0.1) M^(1/2) z`` (friction 0.1, momentum of
    covariance M) and moves to ``theta + eps M^-1 p'``. The target is N(0, 4), so ``g = -theta / 4``."""
    theta = torch.tensor([[1.0, -2.0], [0.5, 3.0]], dtype=torch.float64)
    momentum = torch.tensor([[0.2, -0.1], [0.0, 0.4]], dtype=torch.float64)
    inverse_mass = torch.tensor([[4.0, 0.25], [1.0, 9.0]], dtype=torch.float64)
    z = torch.randn(2, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    eps, g = 0.3, -theta / 4
    state, finite = sg_step(sampler, Gaussian(4.0), SGState(theta, momentum if sampler == "sghmc" else 0 * momentum),
                            eps, inverse_mass, torch.Generator().manual_seed(0))
    if sampler == "sgld":
        expected = SGState(theta + eps**2 / 2 * inverse_mass * g + eps * inverse_mass.sqrt() * z, 0 * momentum)
    else:
        new_momentum = 0.9 * momentum + eps * g + math.sqrt(0.2) * z / inverse_mass.sqrt()
        expected = SGState(theta + eps * inverse_mass * new_momentum, new_momentum)
    torch.testing.assert_close(state.position, expected.position, rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(state.momentum, expected.momentum, rtol=1e-12, atol=1e-15)
    assert finite.tolist() == [True, True]


@pytest.mark.parametrize("sampler", ["sgld", "sghmc"])
def test_a_chain_whose_gradient_is_not_finite_stays_where_it_was(sampler):
    """One coordinate's NaN gradient makes the chain's step a divergence: its position and momentum
    are kept; the other chain moves."""

    class NaNOnChainOne(Gaussian):
        def value_and_grad(self, rows, generator):
            value, gradient = super().value_and_grad(rows, generator)
            gradient[1, 0] = torch.nan
            return value, gradient

    state = SGState(torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64),
                    torch.full((2, 2), 0.5, dtype=torch.float64))
    new, finite = sg_step(sampler, NaNOnChainOne(1.0), state, 0.1, torch.ones(2, dtype=torch.float64),
                          torch.Generator().manual_seed(0))
    assert finite.tolist() == [True, False]
    assert new.position[1].tolist() == [3.0, 4.0] and new.momentum[1].tolist() == [0.5, 0.5]
    assert bool((new.position[0] != state.position[0]).all())


def test_the_draws_split_among_the_cycles_as_evenly_as_they_go_the_first_taking_the_remainder():
    """7 draws in 3 cycles: 3, 2 and 2 (not 3, 3, 1), so cycles of 6, 4 and 4 steps at thin=1, each
    restarting at the full step, each keeping every step of its second half."""
    sizes, sampling, keep = cyclical_schedule(n_samples=7, thin=1, n_cycles=3, step_size=0.2)
    assert len(sizes) == 14
    assert torch.nonzero(sizes == 0.2)[:, 0].tolist() == [0, 6, 10]
    assert sampling.tolist() == [False] * 3 + [True] * 3 + ([False] * 2 + [True] * 2) * 2
    assert keep.tolist() == sampling.tolist()


def test_as_many_cycles_as_draws_keep_one_draw_each_and_one_more_cycle_is_refused():
    """A cycle keeps at least one draw: 3 cycles of 3 draws are cycles of 2 steps at thin=1, each
    keeping its last; 4 cycles of 3 draws are refused."""
    check_cycles(3, 3)
    _, _, keep = cyclical_schedule(n_samples=3, thin=1, n_cycles=3, step_size=0.1)
    assert keep.tolist() == [False, True] * 3
    with pytest.raises(ValueError, match="n_cycles=4 is more than the n_samples=3"):
        check_cycles(4, 3)


def test_chains_burn_in_at_the_step_size_then_take_the_cycles_and_keep_their_draws(monkeypatch):
    """Steps recorded through a stand-in for ``sg_step`` that moves each chain by 1 and reports chain
    1's gradient non-finite at every third step (0-based t = 0, 3, 6, ...): 3 burn-in steps at the
    step size 0.1, then 2 cycles of 2 draws at thin=2, each of 8 steps (half a cosine of eps**2 over
    them). The draws are the positions after the steps 5 and 7 of each cycle (t = 8, 10, 16, 18), so
    start + 9, 11, 17, 19; the divergences those of the cycles' second halves (t = 7-10, 15-18), and
    progress is each step's count and the share of the chains whose gradient was finite."""
    from sklearn_quinn.mcmc import _sgmcmc

    taken = []

    def counting_step(sampler, density, state, step_size, inverse_mass, generator):
        t = len(taken)
        taken.append(step_size)
        return SGState(state.position + 1, state.momentum), torch.tensor([True, t % 3 != 0])

    monkeypatch.setattr(_sgmcmc, "sg_step", counting_step)
    reports = []
    start = torch.tensor([[0.0], [100.0]], dtype=torch.float64)
    draws, divergent = _sgmcmc.run_sg_chains(None, start, None, sampler="sgld", n_samples=4, n_burnin=3, thin=2,
                                             step_size=0.1, n_cycles=2,
                                             progress=lambda done, rate: reports.append((done, rate)))
    cycle = [0.1 * math.sqrt((math.cos(math.pi * t / 8) + 1) / 2) for t in range(8)]
    np.testing.assert_allclose(taken, [0.1] * 3 + cycle + cycle, rtol=1e-12)
    np.testing.assert_array_equal(draws[:, :, 0].numpy(), start.numpy() + [9, 11, 17, 19])
    assert divergent.shape == (2, 8) and not bool(divergent[0].any())
    assert divergent[1].tolist() == [t % 3 == 0 for t in [7, 8, 9, 10, 15, 16, 17, 18]]
    assert reports == [(t + 1, 0.5 if t % 3 == 0 else 1.0) for t in range(19)]


def test_a_minibatch_estimate_scales_its_rows_by_n_over_b_and_a_batch_is_at_most_the_table():
    """The estimate is ``log prior + (N / B) sum of the B drawn rows' log likelihoods`` (Welling and
    Teh 2011, eq. 4). On 4 rows with log likelihoods ``-(y_i - theta x_i)**2 / 2`` and a prior of
    ``-theta**2 / 2``: a batch of 1 is 4 times one row's; a batch of 10 is the table's 4 rows, drawn
    with replacement, at weight 1, so some multiset of 4 of the rows."""
    from itertools import combinations_with_replacement

    from sklearn_quinn.mcmc._sgmcmc import MinibatchLogPosterior

    X = torch.tensor([[1.0], [2.0], [-0.5], [3.0]], dtype=torch.float64)
    Y = torch.tensor([[0.3], [-1.7], [2.2], [0.9]], dtype=torch.float64)

    class RowsLikelihood:
        def __init__(self, X, Y):
            self.X, self.Y = X, Y

        def value_and_grad(self, rows):  # rows (C, 1): theta per chain
            residual = self.Y[:, 0] - rows * self.X[:, 0]
            return -0.5 * residual.square().sum(1), (residual * self.X[:, 0]).sum(1, keepdim=True)

    unit_prior = GaussianPrior(1.0)
    theta = torch.tensor([[0.7]], dtype=torch.float64)
    rows = -0.5 * (Y[:, 0] - 0.7 * X[:, 0]).square()  # each row's log likelihood at theta
    prior = float(unit_prior.log_prob(theta)[0])
    generator = torch.Generator().manual_seed(0)
    one = MinibatchLogPosterior(lambda model, X, Y: RowsLikelihood(X, Y), None, X, Y, unit_prior, batch_size=1)
    values = [float(one.value_and_grad(theta, generator)[0][0]) - prior for _ in range(20)]
    assert all(min(abs(value - 4 * rows.numpy())) < 1e-12 for value in values)
    whole = MinibatchLogPosterior(lambda model, X, Y: RowsLikelihood(X, Y), None, X, Y, unit_prior, batch_size=10)
    assert whole.batch_size == 4
    sums = [float(rows[list(chosen)].sum()) for chosen in combinations_with_replacement(range(4), 4)]
    value = float(whole.value_and_grad(theta, generator)[0][0]) - prior
    assert min(abs(value - np.array(sums))) < 1e-12
