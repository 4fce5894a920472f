"""The MCMC kernels alone, on targets with known moments."""

import math
import warnings

import numpy as np
import pytest
import torch
from scipy import integrate, stats
from scipy.special import digamma, polygamma

from sklearn_quinn._core.evidence import ParameterGroups
from sklearn_quinn._core.hyperpriors import GammaHyperprior, HierarchicalPrior, HyperparameterGibbs
from sklearn_quinn._core.likelihoods import GaussianLikelihood
from sklearn_quinn._core.log_posterior import hierarchical_log_posterior
from sklearn_quinn._core.network import FunctionalModel, build_mlp
from sklearn_quinn._core.rng import standard_normal
from sklearn_quinn.mcmc import _kernels, _nuts, adaptive_metropolis, effective_sample_size, hmc, mala, nuts
from sklearn_quinn.mcmc._adaptation import DualAveraging, WindowedVariance, slow_window_ends
from sklearn_quinn.mcmc._gibbs import within_gibbs
from sklearn_quinn.mcmc._kernels import hmc_proposal, metropolis_accept
from sklearn_quinn.mcmc._sampling import PILOT_STEPS, SAMPLERS, Sampler, run_chains

# A correlated, badly scaled 2-D Gaussian: stds 1 and 2, correlation 0.9.
COVARIANCE = torch.tensor([[1.0, 1.8], [1.8, 4.0]], dtype=torch.float64)
PRECISION = torch.linalg.inv(COVARIANCE)


class HandDifferentiated:
    """A log density with its gradient written out, as the package's own
    densities give theirs (``value_and_grad``): autograd at every leapfrog
    step would be most of these tests' time."""

    def __init__(self, value, gradient):
        self.value, self.gradient = value, gradient

    def __call__(self, x):
        return self.value(x)

    def value_and_grad(self, x):
        return self.value(x), self.gradient(x)


gaussian_log_density = HandDifferentiated(lambda x: -0.5 * ((x @ PRECISION) * x).sum(-1), lambda x: -x @ PRECISION)


def _banana_residual(x):
    return (x[:, 1] - x[:, 0].square()) / 0.25


# x1 ~ N(0, 1), x2 | x1 ~ N(x1^2, 0.5^2): E[x2] = 1, Var[x2] = 2 + 0.25.
banana_log_density = HandDifferentiated(
    lambda x: -0.5 * x[:, 0].square() - 0.5 * ((x[:, 1] - x[:, 0].square()) / 0.5).square(),
    lambda x: torch.stack([-x[:, 0] + 2 * x[:, 0] * _banana_residual(x), -_banana_residual(x)], dim=-1),
)


@pytest.mark.parametrize("target", [gaussian_log_density, banana_log_density], ids=["gaussian", "banana"])
def test_hand_written_gradients_are_autograds(target):
    x = torch.randn(16, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    value, gradient = target.value_and_grad(x)
    (expected,) = torch.autograd.grad(target(x.requires_grad_()).sum(), x)
    torch.testing.assert_close(gradient, expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(value, target(x).detach(), rtol=0, atol=0)


def _run(log_density, sampler, n_samples=1000, step_size=0.3, seed=0, n_chains=8, target_acceptance=None):
    result = run_chains(
        log_density,
        torch.zeros(n_chains, 2, dtype=torch.float64),
        sampler=sampler,
        n_samples=n_samples,
        n_burnin=500,
        step_size=step_size,
        n_leapfrog=8,
        target_acceptance=target_acceptance,
        generator=torch.Generator().manual_seed(seed),
    )
    return result.draws.numpy(), result


class WithSurrogate(HandDifferentiated):
    """A density carrying a ``surrogate``: a cheaper one the kernels may build on."""

    def __init__(self, exact, surrogate):
        super().__init__(exact.value, exact.gradient)
        self.surrogate = surrogate


# A surrogate far from the target: the mean shifted by (0.5, -0.5) and every variance 1.5 times the target's.
SHIFT = torch.tensor([0.5, -0.5], dtype=torch.float64)
WIDER = PRECISION / 1.5
wrong_surrogate = HandDifferentiated(lambda x: -0.5 * (((x - SHIFT) @ WIDER) * (x - SHIFT)).sum(-1),
                                     lambda x: -(x - SHIFT) @ WIDER)


@pytest.mark.slow
@pytest.mark.parametrize("sampler, target", [
    ("hmc", gaussian_log_density), ("nuts", gaussian_log_density), ("mala", gaussian_log_density),
    ("amcmc", gaussian_log_density), ("nuts", WithSurrogate(gaussian_log_density, wrong_surrogate)),
], ids=["hmc", "nuts", "mala", "amcmc", "nuts-on-a-surrogate"])
def test_correlated_gaussian_moments(sampler, target):
    """Mean within 4 Monte Carlo standard errors (from the ESS), standard
    deviations within 10% and the correlation within 0.05. NUTS on a surrogate
    builds its trees on one whose mean is half a std off and whose stds are 22%
    too wide, each step then tested against the exact density (the surrogate
    transition): the exact moments, where the surrogate's own would fail every
    check but the correlation."""
    draws, result = _run(target, sampler)
    flat = draws.reshape(-1, 2)
    ess = effective_sample_size(draws)
    std = np.sqrt(np.diag(COVARIANCE.numpy()))
    assert (np.abs(flat.mean(0)) < 4 * std / np.sqrt(ess)).all()
    np.testing.assert_allclose(flat.std(0), std, rtol=0.10)
    assert abs(np.corrcoef(flat.T)[0, 1] - 0.9) < 0.05
    assert int(result.divergent.sum()) == 0


def banana_tail(threshold):
    """``P(x2 > threshold)`` of the banana, by quadrature over x1."""
    return integrate.quad(lambda x1: stats.norm.pdf(x1) * stats.norm.sf((threshold - x1**2) / 0.5),
                          -np.inf, np.inf)[0]


@pytest.mark.slow
@pytest.mark.parametrize("sampler, target_acceptance", [("hmc", None), ("nuts", 0.95), ("amcmc", None)])
def test_banana_moments(sampler, target_acceptance):
    """E[x2] = 1 and the tail probabilities P(x2 > 3) and P(x2 > 6) (0.088 and
    0.015: mostly |x1| beyond 1.7 and 2.4), each within 4 Monte Carlo standard
    errors from its own ESS, over 32 chains of 500 draws. (MALA's fixed step stalls in the
    tails.)

    The tails are checked through bounded statistics: Var[x2] = 2.25 rests on
    x2's fourth moment, made by rare excursions to large |x1| that the ESS
    does not count reliably. NUTS's long trajectories reach the tails, whose
    curvature grows as x1**2, where a step tuned to Stan's 0.8 acceptance
    diverges and the tails are under-visited; Stan's remedy, a higher target
    acceptance, is used."""
    draws, _ = _run(banana_log_density, sampler, n_samples=500, n_chains=32, target_acceptance=target_acceptance)
    x2 = draws[:, :, 1]
    assert abs(x2.mean() - 1.0) < 4 * math.sqrt(2.25 / effective_sample_size(x2))
    for threshold in (3.0, 6.0):
        exceeds, probability = (x2 > threshold).astype(np.float64), banana_tail(threshold)
        error = 4 * math.sqrt(probability * (1 - probability) / effective_sample_size(exceeds))
        assert abs(exceeds.mean() - probability) < error, threshold


def test_kernels_step_every_chain_in_one_batch():
    calls = []

    def counting(x):
        calls.append(x.shape[0])
        return gaussian_log_density(x)

    init, step = hmc(counting, n_leapfrog=3)
    state = init(torch.zeros(5, 2, dtype=torch.float64), 0.1)
    state, info = step(torch.Generator().manual_seed(0), state)
    assert calls == [5, 5, 5, 5]  # init + one per leapfrog step, all chains at once
    assert info.is_accepted.shape == (5,) and state.position.shape == (5, 2)


def test_hmc_without_jitter_is_one_proposal_and_one_accept():
    """step_jitter=0 draws no jitter: a step is the momenta, the trajectory and
    the accept draw, in that order (what SMC's moves were written against),
    with per-chain trajectory lengths, and Info carries the proposal."""
    lengths = torch.tensor([6, 3, 1])  # per-chain lengths are sorted longest first
    init, step = hmc(gaussian_log_density, lengths, step_jitter=0.0)
    state = init(torch.tensor([[0.5, -1.0], [2.0, 1.0], [-0.3, 0.2]], dtype=torch.float64),
                 torch.tensor([0.3, 0.2, 0.1], dtype=torch.float64))
    new_state, info = step(torch.Generator().manual_seed(0), state)
    generator = torch.Generator().manual_seed(0)
    proposal, log_ratio = hmc_proposal(gaussian_log_density, standard_normal(generator, state.position), state,
                                       state.step_size, lengths)
    expected_state, expected_info = metropolis_accept(generator, log_ratio, proposal, state)
    for got, expected in zip((*new_state, *info), (*expected_state, *expected_info)):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
    torch.testing.assert_close(info.proposed_position, proposal.position, rtol=0, atol=0)


@pytest.mark.slow
def test_compiled_nuts_steps_are_the_eager_ones(monkeypatch):
    """compile=True runs each half's leapfrog steps and their points' bookkeeping
    through torch.compile: from the same state and draws, 20 steps of 8 chains end at
    the eager steps' positions up to rounding (short trees on a Gaussian, where
    rounding cannot flip a decision). A half compiles as one graph, once for every half of
    every step: with every guard kept (not the tensors' alone) and a recompilation an error,
    a fallback to eager fails the test."""
    start = torch.randn(8, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    ends = []
    monkeypatch.setattr(torch.compiler, "keep_tensor_guards_unsafe", lambda guards: [True] * len(guards))
    for compile in (False, True):
        init, step = nuts(gaussian_log_density, max_tree_depth=4, compile=compile)
        state, generator = init(start, 0.3), torch.Generator().manual_seed(1)
        with warnings.catch_warnings(), torch._dynamo.config.patch(error_on_recompile=True):
            warnings.filterwarnings("error", message="torch.compile failed")
            for _ in range(20):
                state, info = step(generator, state)
        ends.append((state.position, info.n_leapfrog))
    torch.testing.assert_close(ends[1][0], ends[0][0], rtol=0, atol=1e-10)
    torch.testing.assert_close(ends[1][1], ends[0][1])


@pytest.mark.parametrize("sampler, module", [("hmc", _kernels), ("nuts", _nuts)])
@pytest.mark.parametrize("pays", [False, True])
def test_a_compile_decision_counts_the_pilots_gradients_and_switches_in_place(monkeypatch, sampler, module, pays):
    """``compile`` given as a decision: the first PILOT_STEPS steps run
    eagerly, the decision gets their batched gradient evaluations projected
    over the remaining steps (``n_leapfrog`` a step for HMC; for NUTS, whose
    chains step together, each step's longest trajectory), and the remaining
    steps run on the compiled kernel from the same state and random draws.
    The compiler is replaced by a marker that counts the calls of what it
    compiled and runs it as it is, so the draws must equal an eager run's to
    the bit, and the compiled part must serve every step after the pilot
    (HMC's whole transition a call, NUTS's each half its doublings add)."""
    calls, halves = [], []
    grow_half = _nuts._grow_half
    monkeypatch.setattr(_nuts, "_grow_half", lambda *args: halves.append(args) or grow_half(*args))

    def counting_compiler(function):
        def counted(*args, **kwargs):
            calls.append(function.__name__)
            return function(*args, **kwargs)

        return counted

    monkeypatch.setattr(module, "compiled_or_eager", counting_compiler)
    asked = []

    def decide(n_gradients):
        asked.append((n_gradients, len(halves)))  # the pilot's halves
        return pays

    def run(compile):
        return run_chains(gaussian_log_density, torch.zeros(4, 2, dtype=torch.float64), sampler=sampler,
                          n_samples=50, n_burnin=0, step_size=0.3, n_leapfrog=3, compile=compile,
                          generator=torch.Generator().manual_seed(0))

    decided = run(decide)
    [(projected, pilot_halves)] = asked
    remaining, all_halves = 50 - PILOT_STEPS, len(halves)
    eager = run(False)
    if sampler == "hmc":
        pilot_gradients, compiled_calls = 3 * PILOT_STEPS, remaining
    else:
        longest = eager.n_leapfrog.max(0).values
        pilot_gradients, compiled_calls = int(longest[:PILOT_STEPS].sum()), all_halves - pilot_halves
        assert 0 < pilot_halves < all_halves == len(halves) / 2  # the eager run's halves are the decided run's
    assert projected == pilot_gradients / PILOT_STEPS * remaining
    assert decided.compiled is pays and len(calls) == (compiled_calls if pays else 0)
    torch.testing.assert_close(decided.draws, eager.draws, rtol=0, atol=0)
    assert not eager.compiled


def test_a_compile_decision_is_not_asked_of_a_kernel_that_does_not_compile_or_a_run_within_the_pilot():
    def never(n_gradients):
        raise AssertionError("asked")

    start = torch.zeros(4, 2, dtype=torch.float64)
    for sampler, n_samples in (("mala", 30), ("hmc", PILOT_STEPS - 5)):
        result = run_chains(gaussian_log_density, start, sampler=sampler, n_samples=n_samples, n_burnin=5,
                            compile=never, generator=torch.Generator().manual_seed(0))
        assert not result.compiled


def test_mala_correction_removes_the_langevin_bias():
    """At a large step the unadjusted Langevin chain on N(0, 1) has variance
    1 / (1 - eps^2 / 4) = 1.33 (eps = 1); the Metropolis-Hastings-corrected one
    must have variance 1 (within 5%)."""
    init, step = mala(lambda x: -0.5 * x.square().sum(-1))
    state = init(torch.zeros(200, 1, dtype=torch.float64), 1.0)
    generator = torch.Generator().manual_seed(0)
    draws = []
    for t in range(600):
        state, _ = step(generator, state)
        if t >= 100:
            draws.append(state.position)
    assert float(torch.stack(draws).var()) == pytest.approx(1.0, rel=0.05)


def test_nuts_u_turn_criterion_reads_the_momenta_summed_between_the_ends():
    """Betancourt's generalised criterion: ``rho = sum - (p_start + p_end) / 2`` (the sum less half of
    each end), turning where ``p_start . rho <= 0`` or ``p_end . rho <= 0``. Ends (1, 0) and (0, 1)
    with the sum (0.1, 1.1) turn (``rho = (-0.4, 0.6)``), with (1.5, 1.5) they do not."""
    inverse_mass, start, end = torch.ones(2, dtype=torch.float64), torch.tensor([[1.0, 0.0]], dtype=torch.float64), \
        torch.tensor([[0.0, 1.0]], dtype=torch.float64)
    assert _nuts._is_turning(inverse_mass, start, end, torch.tensor([[0.1, 1.1]], dtype=torch.float64)).item()
    assert not _nuts._is_turning(inverse_mass, start, end, torch.tensor([[1.5, 1.5]], dtype=torch.float64)).item()


def test_nuts_acceptance_statistic_is_at_most_one_and_favours_the_new_half():
    """The statistic a step size is tuned on is the trajectory's mean of ``min(1, exp(H_0 - H))``: at
    most 1 (500 chains on N(0, I_3) at a step of 1.2, where some energies fall). At a step of 1e-3 and
    depth 1 every trajectory is its start and one new point of nearly the same energy, and the
    biased progressive sampling of Betancourt (2017) takes the new half with probability ``min(1,
    w_new / w_old)``, near 1: every chain moves (uniform progressive sampling would move half)."""
    init, step = nuts(lambda x: -0.5 * x.square().sum(-1))
    generator = torch.Generator().manual_seed(0)
    state = init(torch.randn(500, 3, generator=generator, dtype=torch.float64), step_size=1.2)
    for _ in range(20):
        state, info = step(generator, state)
        assert float(info.acceptance_probability.max()) <= 1.0
    init, step = nuts(lambda x: -0.5 * x.square().sum(-1), max_tree_depth=1)
    state = init(torch.randn(2000, 1, generator=generator, dtype=torch.float64), step_size=1e-3)
    _, info = step(generator, state)
    assert float(info.is_accepted.double().mean()) > 0.99


def test_hmc_jitters_each_chains_step_uniformly_within_a_fifth():
    """On a flat density one leapfrog step moves a chain by ``eps_j p``, with ``eps_j = eps (1 + 0.2 (2 u
    - 1))``: the step's draws (the jitter's uniforms, then the momenta) replayed from the generator give
    every proposal to rounding, and the steps span [0.8, 1.2] eps."""
    init, step = hmc(lambda x: torch.zeros(len(x), dtype=x.dtype) + 0.0 * x.sum(-1), n_leapfrog=1)
    state = init(torch.zeros(4000, 1, dtype=torch.float64), step_size=0.5)
    generator = torch.Generator().manual_seed(0)
    replay = torch.Generator().set_state(generator.get_state())
    _, info = step(generator, state)
    uniform = torch.rand(4000, generator=replay, dtype=torch.float64)
    momentum = torch.randn(4000, 1, generator=replay, dtype=torch.float64)
    steps = 0.5 * (1 + 0.2 * (2 * uniform - 1))
    torch.testing.assert_close(info.proposed_position, steps[:, None] * momentum, rtol=1e-12, atol=0)
    assert 0.4 <= float(steps.min()) < 0.41 and 0.59 < float(steps.max()) <= 0.6


def test_mala_accepts_with_the_hand_written_hastings_ratio():
    """One step of 12 chains on ``log p(x) = -sum(x^4 / 4 + x^2 / 2)`` at step sizes 0.3-0.8: the
    acceptance probability is ``min(1, p(x') q(x | x') / (p(x) q(x' | x)))`` with ``q(b | a) =
    N(b; a + eps^2 / 2 grad log p(a), eps^2 I)``, written out here in numpy, to rounding. The
    variance test above is statistical: a drift a tenth off in the proposal density moved it 5%."""

    def log_p(x):
        return -(x**4 / 4 + x**2 / 2).sum(-1)

    def log_q(to, start, eps):
        drift = start + 0.5 * eps**2 * (-(start**3) - start)
        return stats.norm.logpdf(to, drift, eps).sum(-1)

    init, step = mala(lambda x: -(x.pow(4) / 4 + x.square() / 2).sum(-1))
    x = np.random.RandomState(0).randn(12, 3)
    eps = np.linspace(0.3, 0.8, 12)
    state = init(torch.as_tensor(x), 1.0)._replace(step_size=torch.as_tensor(eps))
    _, info = step(torch.Generator().manual_seed(0), state)
    proposed = info.proposed_position.numpy()
    log_ratio = log_p(proposed) - log_p(x) + log_q(x, proposed, eps[:, None]) - log_q(proposed, x, eps[:, None])
    np.testing.assert_allclose(info.acceptance_probability.numpy(), np.minimum(1.0, np.exp(log_ratio)), rtol=1e-12)
    assert ((0.2 < info.acceptance_probability) & (info.acceptance_probability < 0.95)).sum() >= 4  # ratios below 1


def test_windowed_variance_is_stans_regularised_variance():
    """After n positions of 4 chains, each chain's inverse mass is Stan's ``n / (n + 5) var + 1e-3 *
    5 / (n + 5)``, ``var`` the unbiased variance of its window, to rounding; a reset forgets the window.
    (The mass test of a whole run reads it within 30%.)"""
    positions = torch.as_tensor(np.random.RandomState(0).randn(12, 4, 3) * [0.1, 1.0, 30.0])
    window = WindowedVariance()
    for position in positions[:5]:
        window.update(position)
    window.reset()
    for position in positions[5:]:
        window.update(position)
    n = len(positions) - 5
    expected = n / (n + 5) * positions[5:].numpy().var(axis=0, ddof=1) + 1e-3 * 5 / (n + 5)
    np.testing.assert_allclose(window.inverse_mass().numpy(), expected, rtol=1e-12)


def test_adaptive_metropolis_covariance_is_haarios():
    """After adapt_start, the proposal is gamma 2.4^2 / K (C_t + 1e-8 I) with
    C_t the sample covariance of the chain's own history."""
    init, step = adaptive_metropolis(gaussian_log_density, gamma=0.5, adapt_start=30, adapt_every=10)
    position = torch.tensor([[0.3, -0.2], [1.0, 1.0]], dtype=torch.float64)
    state = init(position, 0.5)
    generator = torch.Generator().manual_seed(0)
    history = [state.position]
    for _ in range(50):  # steps 1..50: refreshes at t = 30, 40, 50
        state, _ = step(generator, state)
        history.append(state.position)
    history = torch.stack(history, dim=1)  # (C, 51, K)
    for chain in range(2):
        covariance = torch.cov(history[chain].T)
        expected = 0.5 * 2.4**2 / 2 * (covariance + 1e-8 * torch.eye(2, dtype=torch.float64))
        cholesky = state.proposal_cholesky[chain]
        torch.testing.assert_close(cholesky @ cholesky.T, expected)


def test_divergences_are_rejected_and_counted():
    """A step far too large for the target: every proposal is non-finite or
    rejected, the chain never leaves its start and never holds a NaN."""

    def steep(x):
        return -1e6 * x.pow(4).sum(-1)

    result = run_chains(steep, torch.full((3, 2), 0.5, dtype=torch.float64), sampler="hmc",
                        n_samples=20, n_burnin=0, step_size=10.0, n_leapfrog=5,
                        generator=torch.Generator().manual_seed(0))
    assert int(result.divergent.sum()) > 0
    assert torch.isfinite(result.draws).all()
    torch.testing.assert_close(result.draws, torch.full_like(result.draws, 0.5))


@pytest.mark.parametrize("step_size, n_divergent", [(3.0, 3 * 20), (0.5, 0)])
def test_hmc_counts_an_energy_error_past_the_threshold_as_a_divergence(step_size, n_divergent):
    """On N(0, 1), leapfrog steps over 2 (here 2.4-3.6 with the jitter)
    grow the energy geometrically: after 20 of them the error is 1e21 to
    1e41 nats, finite, and every transition is a divergence, as NUTS counts
    it (an energy error over 1000); stable steps give none."""
    result = run_chains(lambda x: -0.5 * x.square().sum(-1), torch.ones(3, 1, dtype=torch.float64), sampler="hmc",
                        n_samples=20, n_burnin=0, step_size=step_size, n_leapfrog=20,
                        generator=torch.Generator().manual_seed(0))
    assert int(result.divergent.sum()) == n_divergent
    assert torch.isfinite(result.draws).all()


class TwoScales:
    """``x1 ~ N(0, 1)``, ``x2 | x1 ~ N(0, s**2)`` with ``s = 0.2`` where ``x1 < 0`` and 1 elsewhere:
    leapfrog steps of 0.5 diverge in the narrow half (0.5 / 0.2 is beyond the stability limit of
    2) and not in the wide one, and half of them are stable in both. Rows are independent, so
    ``select`` gives the density itself. (The gradient leaves out the jump at ``x1 = 0``: the
    leapfrog map stays reversible and volume-preserving, and the accept step reads the jump.)"""

    narrow = 0.2

    def scale(self, x):
        return torch.where(x[:, 0] < 0, self.narrow, 1.0)

    def __call__(self, x):
        scale = self.scale(x)
        return -0.5 * x[:, 0].square() - 0.5 * (x[:, 1] / scale).square() - torch.log(scale)

    def value_and_grad(self, x):
        scale = self.scale(x)
        return self(x), torch.stack([-x[:, 0], -x[:, 1] / scale.square()], -1)

    def select(self, index):
        return self

    def sample(self, n, generator):
        x1 = torch.randn(n, generator=generator, dtype=torch.float64)
        return torch.stack([x1, torch.randn(n, generator=generator, dtype=torch.float64) * self.scale(x1[:, None])], -1)


@pytest.mark.parametrize("retry_factor", [None, 2])
def test_retrying_diverged_trajectories_leaves_the_target_invariant_and_moves_the_stuck_rows(retry_factor):
    """20,000 exact draws of :class:`TwoScales`, 20 HMC steps each of 4 leapfrog steps of 0.5. The
    draws stay exact: the narrow half's mass 0.5 within 4 standard errors (0.014), and each half's
    second moment of ``x2`` within 5% of its own. Without a retry, 42% of the rows that start in
    the narrow half never leave their start (those that move begin near its edge); with the retry
    on steps of 0.25, under 1% stay. The ghost's condition is what keeps the retry exact: accepting
    a retried end whose own first trajectory does not diverge drifts the narrow half's mass to
    0.530-0.532 (three seeds)."""
    target, generator, n = TwoScales(), torch.Generator().manual_seed(0), 20_000
    start = target.sample(n, generator)
    init, step = hmc(target, torch.full((n,), 4), step_jitter=0.0, retry_factor=retry_factor)
    state = init(start, torch.full((n,), 0.5, dtype=torch.float64))
    for _ in range(20):
        state, info = step(generator, state)
    x, narrow = state.position, state.position[:, 0] < 0
    assert abs(narrow.double().mean() - 0.5) < 4 * 0.5 / math.sqrt(n)
    assert abs(x[narrow, 1].square().mean() / target.narrow**2 - 1) < 0.05
    assert abs(x[~narrow, 1].square().mean() - 1) < 0.05
    stuck = (x == start).all(-1)[start[:, 0] < 0].double().mean()
    assert stuck < 0.01 if retry_factor else stuck > 0.3


def test_dual_averaging_reaches_the_target_acceptance():
    """HMC on N(0, I_10): after a 1500-step burn-in the acceptance is near 0.8
    (within 0.1; the averaged step of a short final window is conservative)."""
    def log_density(x):
        return -0.5 * x.square().sum(-1)

    result = run_chains(log_density, torch.zeros(4, 10, dtype=torch.float64), sampler="hmc",
                        n_samples=300, n_burnin=1500, step_size=1e-3, n_leapfrog=5,
                        generator=torch.Generator().manual_seed(0))
    assert float(result.acceptance.mean()) == pytest.approx(0.8, abs=0.1)
    assert (result.step_size > 1e-2).all()  # grew from the tiny start


def test_mass_matrix_learns_the_scales():
    """A diagonal Gaussian with stds from 0.1 to 10: the adapted inverse mass
    (the variance estimate) is within 30% of the true variances, and the draws'
    stds within 15% of the truth."""
    scales = torch.logspace(-1, 1, 6, dtype=torch.float64)

    def log_density(x):
        return -0.5 * (x / scales).square().sum(-1)

    result = run_chains(log_density, torch.zeros(4, 6, dtype=torch.float64), sampler="hmc",
                        n_samples=1000, n_burnin=1000, step_size=0.01, n_leapfrog=5,
                        generator=torch.Generator().manual_seed(0))
    np.testing.assert_allclose(result.inverse_mass.mean(0).numpy(), scales.square().numpy(), rtol=0.3)
    np.testing.assert_allclose(result.draws.reshape(-1, 6).std(0).numpy(), scales.numpy(), rtol=0.15)


def test_window_ends_double_and_a_window_whose_successor_would_pass_the_end_runs_to_it():
    """The windows' ends written out: a fast start of 15% of the burn-in, windows of 5% doubling, and
    a window whose successor would pass the slow phase's end (10% or 50 steps before the burn-in's)
    runs to that end (82: 12 + 4 = 16, then 16 + 8 = 24, whose successor would reach 40 > 32)."""
    assert slow_window_ends(82) == [16, 32]
    assert slow_window_ends(1000) == [200, 300, 500, 900]


def test_window_schedule():
    # Too short for windows of at least 20 steps and the fast end (at 59 one window held one draw).
    assert slow_window_ends(10) == slow_window_ends(59) == slow_window_ends(81) == []
    assert slow_window_ends(82)[-1] - int(0.15 * 82) == 20
    ends = slow_window_ends(1000)
    assert ends[0] > 150 and ends[-1] == 900
    assert all(b > a for a, b in zip(ends, ends[1:]))
    assert slow_window_ends(100)[-1] == 50 and slow_window_ends(500)[-1] == 450  # the fast end: >= 50 steps


@pytest.mark.parametrize("sampler", ["hmc", "nuts"])
def test_a_short_burn_in_leaves_no_chain_stuck(sampler):
    """A burn-in of 20 had a mass window end 2 steps before it: the step size's search, restarted ten
    times above the last step, ended on its exploratory steps, and chains accepted nothing after."""
    from sklearn_quinn import MCMCRegressor

    rng = np.random.RandomState(0)
    X = rng.randn(60, 2)
    y = X @ [1.0, -0.5] + 0.3 * rng.randn(60)
    reg = MCMCRegressor(hidden_layer_sizes=(4,), max_epochs=20, sampler=sampler, n_burnin=20, n_samples=40,
                        n_chains=4, n_leapfrog=3, max_tree_depth=5, compile=False, random_state=0).fit(X, y)
    assert np.all(reg.acceptance_rate_ > 0.5) and reg.n_divergent_ <= 4


def test_dual_averaging_moves_toward_the_target():
    search = DualAveraging(torch.tensor([0.1]), target_acceptance=0.8)
    low = search.update(torch.tensor([0.1]))  # accepting too little: shrink
    search.restart(torch.tensor([0.1]))
    high = search.update(torch.tensor([1.0]))  # accepting everything: grow
    assert float(low) < float(high)


def test_a_new_sampler_is_one_entry(monkeypatch):
    """run_chains reads what to adapt from the sampler's entry: MALA entered
    without a target acceptance keeps its step size through burn-in, reports
    it, and reports no inverse mass (its state holds none); adaptive
    Metropolis reports no step size, HMC its adapted inverse mass."""
    monkeypatch.setitem(SAMPLERS, "fixed_mala", Sampler(mala, (), target_acceptance=None, adapt_mass=False))
    start = torch.zeros(2, 2, dtype=torch.float64)
    fixed = run_chains(gaussian_log_density, start, sampler="fixed_mala", n_samples=5, n_burnin=30, step_size=0.3,
                       generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(fixed.step_size, torch.full((2,), 0.3, dtype=torch.float64), rtol=0, atol=0)
    assert fixed.inverse_mass is None and fixed.draws.shape == (2, 5, 2)
    adapted = run_chains(gaussian_log_density, start, sampler="mala", n_samples=5, n_burnin=30, step_size=0.3,
                         generator=torch.Generator().manual_seed(0))
    assert not torch.equal(adapted.step_size, fixed.step_size)
    metropolis = run_chains(gaussian_log_density, start, sampler="amcmc", n_samples=5, n_burnin=30,
                            generator=torch.Generator().manual_seed(0))
    assert metropolis.step_size is None and metropolis.inverse_mass is None
    hamiltonian = run_chains(gaussian_log_density, start, sampler="hmc", n_samples=5, n_burnin=100, n_leapfrog=3,
                             generator=torch.Generator().manual_seed(0))
    assert hamiltonian.inverse_mass.shape == (2, 2) and not torch.equal(hamiltonian.inverse_mass, torch.ones(2, 2))


def test_unknown_sampler():
    with pytest.raises(ValueError, match="sampler must be one of"):
        run_chains(gaussian_log_density, torch.zeros(1, 2), sampler="gibbs_only")


# ------------------------------------------------------------ within Gibbs
def _hierarchical_prior(n_weights=4, shape=5.0, rate=5.0):
    """theta | delta ~ N(0, I / delta), delta ~ Gamma(5, 5): theta's marginal is a
    Student t with 10 degrees of freedom and variance rate / (shape - 1) = 1.25."""
    groups = ParameterGroups(["weight"], torch.zeros(n_weights, dtype=torch.long), [0], ["weight"],
                             [torch.Size([n_weights])])
    prior = HierarchicalPrior(groups, GammaHyperprior(shape, rate))
    return prior, HyperparameterGibbs(prior)


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["hmc", "nuts", "mala", "amcmc"])
def test_any_kernel_within_gibbs_samples_the_joint(sampler):
    """The kernel on the weights given the precision, then the exact draw of the
    precision: E[log delta] = digamma(5) - log(5) and E[theta_k^2] = 1.25, each
    within 4 Monte Carlo standard errors (from the ESS of the draws, or of their
    squares). Burn-in adapts the kernel to the weights only."""
    prior, gibbs = _hierarchical_prior()
    start = prior.sample(8, torch.Generator().manual_seed(0))
    result = run_chains(prior, start, sampler=sampler, n_samples=2000, n_burnin=500, step_size=0.3, n_leapfrog=5,
                        gibbs=gibbs, generator=torch.Generator().manual_seed(1))
    draws = result.draws.numpy()
    assert draws.shape == (8, 2000, 5)
    log_precision = draws[..., 4]
    expected = digamma(5.0) - math.log(5.0)
    ess = effective_sample_size(log_precision)
    assert abs(log_precision.mean() - expected) < 4 * math.sqrt(polygamma(1, 5.0) / ess)
    squares = draws[..., :4] ** 2
    ess = effective_sample_size(squares)
    standard_error = squares.reshape(-1, 4).std(0) / np.sqrt(ess)
    assert (np.abs(squares.mean((0, 1)) - 1.25) < 4 * standard_error).all()
    if sampler == "hmc":
        assert result.inverse_mass.shape == (8, 4)


def test_within_gibbs_steps_keep_the_kernel_state_current():
    """After every step the kernel's cached log density and gradient are the
    joint's at the state's row (weights and new hyperparameters), and the
    reported proposal carries the hyperparameters it was made under."""
    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(2, 1, (3,), "tanh").double())
    X, Y = torch.randn(15, 2, dtype=torch.float64), torch.randn(15, 1, dtype=torch.float64)
    likelihood = GaussianLikelihood(torch.ones(1, dtype=torch.float64), learn_noise=True)
    log_density, gibbs = hierarchical_log_posterior(model, ParameterGroups.of(model), X, Y, likelihood,
                                                    GammaHyperprior(0.5, 0.01))
    for kernel, options in [(hmc, dict(n_leapfrog=3)), (mala, {}), (adaptive_metropolis, {})]:
        init, step = within_gibbs(kernel, log_density, gibbs, **options)
        generator = torch.Generator().manual_seed(1)
        state = init(0.3 * log_density.log_prior.sample(3, generator), 0.05)
        for _ in range(4):
            before = state.position
            state, info = step(generator, state)
            value, gradient = log_density.value_and_grad(state.position)
            torch.testing.assert_close(state.kernel.log_density, value)
            if hasattr(state.kernel, "gradient"):
                torch.testing.assert_close(state.kernel.gradient, gradient[:, : model.n_params])
            torch.testing.assert_close(info.proposed_position[:, model.n_params :], before[:, model.n_params :],
                                       rtol=0, atol=0)
            torch.testing.assert_close(state.position[:, : model.n_params], state.kernel.position, rtol=0, atol=0)
