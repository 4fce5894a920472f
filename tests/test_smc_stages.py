"""The pieces of an SMC stage on hand-sized cases: systematic resampling, the tempering rule's
exponent, and the tuning of the moves (their mass, step sizes and trajectory lengths)."""

import inspect
import math

import numpy as np
import pytest
import torch

from sklearn_quinn.smc import _tuning
from sklearn_quinn.smc._engine import run_smc
from sklearn_quinn.smc._resampling import systematic_resample
from sklearn_quinn.smc._tempering import conditional_ess, next_increment, uniform_log_weights
from sklearn_quinn.smc._tuning import initial_parameters, inverse_mass, particle_variance, perturb_parameters

DOUBLE = dict(dtype=torch.float64)


# ------------------------------------------------------------------- resampling
def test_resampling_reads_the_weights_up_to_a_constant():
    """Log weights shifted by a constant (not normalised) pick the particles the normalised ones pick."""
    log_weights = torch.tensor([0.5, 0.25, 0.125, 0.125], **DOUBLE).log()
    for seed in range(5):
        normalised = systematic_resample(log_weights, torch.Generator().manual_seed(seed))
        shifted = systematic_resample(log_weights + 5.0, torch.Generator().manual_seed(seed))
        assert torch.equal(shifted, normalised)


def test_resampling_keeps_each_particle_n_times_its_weight_on_average():
    """Unbiased: over 400 seeds, a particle of weight 0.1 among two is kept 0.2 times on average (a copy
    with probability 0.2), within 4 standard errors (0.02 each). Points that always start at 0
    keep floor-or-ceil copies too, but the first particle every time."""
    log_weights = torch.tensor([0.1, 0.9], **DOUBLE).log()
    counts = [int((systematic_resample(log_weights, torch.Generator().manual_seed(seed)) == 0).sum())
              for seed in range(400)]
    assert set(counts) == {0, 1}
    assert abs(np.mean(counts) - 0.2) < 4 * math.sqrt(0.2 * 0.8 / 400)


def test_resampling_stays_within_the_particles_where_the_weights_sum_below_one():
    """In float32 the cumulative weights of 2982 equal particles end 6e-8 below one, and seed 7977's
    uniform (0.99989) rounds the last point up to 1: it still picks the last particle, never one
    past it, and with a particle of weight zero after them (2983 points, the last again at 1), the
    last particle of positive weight."""
    index = systematic_resample(torch.zeros(2982), torch.Generator().manual_seed(7977))
    assert float(torch.rand((), generator=torch.Generator().manual_seed(7977))) > 0.9998
    assert int(index.max()) == 2981 and len(index) == 2982
    log_weights = torch.cat([torch.zeros(2982), torch.tensor([-math.inf])])
    index = systematic_resample(log_weights, torch.Generator().manual_seed(7977))
    assert int(index.max()) == 2981 and len(index) == 2983


@pytest.mark.parametrize(("weights", "expected"), [([0.0, 1.0], [1, 1]), ([0.5, 0.5], [0, 1]),
                                                 ([1.0, 0.0, 0.0], [0, 0, 0]), ([0.0, 0.5, 0.0, 0.5], [1, 1, 3, 3])])
def test_resampling_at_a_uniform_of_zero_keeps_no_particle_of_zero_weight(monkeypatch, weights, expected):
    """At ``u = 0`` the points ``i / N`` fall on the cumulative weights themselves: each goes to the
    particle whose interval ``[C_(i-1), C_i)`` holds it, so a particle of weight zero is never kept
    and each of two equal halves is kept once (a search from the left kept ``[0, 1]``'s first
    particle, of weight zero, and one half twice)."""
    from sklearn_quinn.smc import _resampling

    monkeypatch.setattr(_resampling, "standard_uniform", lambda generator, like, shape: torch.zeros(shape, **DOUBLE))
    assert systematic_resample(torch.tensor(weights, **DOUBLE).log()).tolist() == expected


# ------------------------------------------------------------------- tempering
def test_the_exponent_keeps_the_ess_at_or_above_its_target():
    """The bisection returns the end of its bracket whose conditional ESS is at or above
    ``target_ess * N``, never the one just below it, and its 60 halvings leave it within
    1e-9 of N (rounding of the ESS itself is about 1e-13 of N)."""
    generator = torch.Generator().manual_seed(0)
    log_like = -50 * torch.rand(400, generator=generator, **DOUBLE)
    log_weights = uniform_log_weights(400, torch.float64, "cpu")
    for target_ess in (0.3, 0.5, 0.9):
        increment = next_increment(log_weights, log_like, 1.0, target_ess)
        assert 0 <= conditional_ess(log_weights, log_like, increment) - target_ess * 400 < 400e-9


def test_the_exponent_takes_the_rest_at_an_ess_exactly_at_its_target():
    """Two of four particles have no likelihood (weight zero after any step): the conditional ESS
    is 2 at every step, exactly the target of 0.5 * 4, so the whole rest is taken, to the bit;
    a bisection towards it would stop an ulp short (0.29999999999999993) and leave a stage."""
    log_weights = uniform_log_weights(4, torch.float64, "cpu")
    log_like = torch.tensor([0.0, 0.0, -math.inf, -math.inf], **DOUBLE)
    assert conditional_ess(log_weights, log_like, 0.3) == 2.0
    assert next_increment(log_weights, log_like, 0.3, 0.5) == 0.3


def test_the_exponent_takes_the_rest_where_the_rest_keeps_the_target():
    """The step to the end is judged by the ESS after the rest of the way (0.3 here, ESS 2.07 of
    3), not after a whole step from zero (ESS 1.10, below the target of 1.5)."""
    log_weights = uniform_log_weights(3, torch.float64, "cpu")
    log_like = torch.tensor([0.0, -3.0, -6.0], **DOUBLE)
    assert conditional_ess(log_weights, log_like, 1.0) < 1.5 < conditional_ess(log_weights, log_like, 0.3)
    assert next_increment(log_weights, log_like, 0.3, 0.5) == 0.3


def test_the_exponent_still_moves_where_no_step_keeps_the_target():
    """A likelihood 1e300 nats below the other's: after any step the ESS is 1, below the target of
    0.9 * 2, and the bisection's lower end never moves. The step is then the upper end after 60
    halvings, ``remaining * 2**-60``, not zero (a step of zero would temper forever)."""
    log_weights = uniform_log_weights(2, torch.float64, "cpu")
    log_like = torch.tensor([0.0, -1e300], **DOUBLE)
    assert next_increment(log_weights, log_like, 0.5, 0.9) == 0.5 * 2**-60


# ------------------------------------------------------------------- tuning
#: Three particles of weights 1/2, 1/4, 1/4 that agree on their second coordinate: the first's
#: weighted mean is 1.5 and its weighted variance 0.5 * 1.5**2 + 0.25 * 0.5**2 + 0.25 * 2.5**2 = 2.75.
PARTICLES = torch.tensor([[0.0, 1.0], [2.0, 1.0], [4.0, 1.0]], **DOUBLE)
LOG_WEIGHTS = torch.tensor([0.5, 0.25, 0.25], **DOUBLE).log()


def test_the_particles_variance_is_weighted_and_stays_positive():
    """The weighted variance by hand (2.75, where equal weights would give 8 / 3), and a coordinate
    on which the particles agree gets the dtype's epsilon, not zero."""
    variance = particle_variance(PARTICLES, LOG_WEIGHTS)
    expected = torch.tensor([2.75, torch.finfo(torch.float64).eps], **DOUBLE)
    torch.testing.assert_close(variance, expected.expand(3, 2), rtol=1e-15, atol=0)


class SquareDraws:
    """A likelihood stand-in whose Fisher draws are the particles themselves, so that the mass's
    information is the particles' weighted mean square, by hand."""

    def __call__(self, particles):
        return torch.zeros(len(particles), **DOUBLE)

    def fisher_draws(self, particles, generator):
        return particles


def test_the_moves_mass_weighs_each_particles_information():
    """``1 / (lambda F + 1 / var)`` with ``F`` the weighted mean of the draws' squares: for the first
    coordinate ``F = 0.25 * 4 + 0.25 * 16 = 5`` (equal weights would give 20 / 3), at
    temperature 0.4."""
    mass = inverse_mass(SquareDraws(), PARTICLES, LOG_WEIGHTS, 0.4)
    first = 1 / (0.4 * 5.0 + 1 / 2.75)
    second = 1 / (0.4 * 1.0 + 1 / torch.finfo(torch.float64).eps)
    torch.testing.assert_close(mass, torch.tensor([first, second], **DOUBLE).expand(3, 2), rtol=1e-14, atol=0)


class OverflowingDraws(SquareDraws):
    """Fisher draws that overflow on the second coordinate (as a prior's draw of a log noise std near
    -1000 makes them)."""

    def fisher_draws(self, particles, generator):
        return particles * torch.tensor([1.0, math.inf], **DOUBLE)


def test_the_moves_mass_at_temperature_zero_is_the_variance_whatever_the_information():
    """At temperature 0 the likelihood has no say: the mass is the particles' variance to the bit, even
    where the information is infinite (``0 * inf`` would make it NaN)."""
    variance = particle_variance(PARTICLES, LOG_WEIGHTS)
    assert torch.equal(inverse_mass(OverflowingDraws(), PARTICLES, LOG_WEIGHTS, 0.0), variance)
    # Above 0 the infinite information pins its coordinate: a mass of 0 there.
    assert torch.equal(inverse_mass(OverflowingDraws(), PARTICLES, LOG_WEIGHTS, 0.3)[:, 1], torch.zeros(3, **DOUBLE))


def test_all_jumps_zero_leaves_every_particle_a_parent():
    """Where no move jumped (every proposal rejected) the parents are drawn uniformly: each of three
    particles' lengths (1, 10, 20) is a centre of children, about a third each of 3000 (within 150,
    over 5 standard errors of 26)."""
    step_size = torch.tensor([0.1, 0.2, 0.3], **DOUBLE).repeat(1000)
    n_leapfrog = torch.tensor([1, 10, 20]).repeat(1000)
    _, length = perturb_parameters(step_size, n_leapfrog, torch.zeros(3000, **DOUBLE),
                                   torch.Generator().manual_seed(0))
    for centre in (1, 10, 20):
        near = int(((length - centre).abs() <= 1).sum())
        assert abs(near - 1000) < 150


def test_a_parent_of_one_leapfrog_step_has_children_of_one_or_two():
    """``L_j + {-1, 0, +1}`` floored at one step: from ``L_j = 1`` a child has 1 step (two draws in three)
    or 2, never 0."""
    _, length = perturb_parameters(torch.full((3000,), 0.1, **DOUBLE), torch.ones(3000, dtype=torch.int64),
                                   torch.ones(3000, **DOUBLE), torch.Generator().manual_seed(0))
    assert set(length.tolist()) == {1, 2}
    assert abs(int((length == 1).sum()) - 2000) < 130  # 5 standard errors of 26


def test_perturbed_step_sizes_spread_by_0_015_around_a_parent_far_from_zero():
    """Far from zero (a parent step of 0.3, 20 standard deviations away) the truncation is nil and the
    children are ``N(0.3, 0.015**2)``: their standard deviation within 5 standard errors over 4000 draws
    (0.015 / sqrt(2 * 4000) each)."""
    epsilon, _ = perturb_parameters(torch.full((4000,), 0.3, **DOUBLE), None, torch.ones(4000, **DOUBLE),
                                    torch.Generator().manual_seed(0))
    assert abs(float(epsilon.std()) - 0.015) < 5 * 0.015 / math.sqrt(8000)
    assert abs(float(epsilon.mean()) - 0.3) < 5 * 0.015 / math.sqrt(4000)


def test_step_sizes_stay_positive_at_a_uniform_draw_of_zero(monkeypatch):
    """A uniform draw of exactly 0 (one in 2**53) puts the truncated normal's inverse CDF at its lower end,
    where rounding leaves the step at 0, a little below it, or at minus infinity (for a parent of 0.3,
    20 standard deviations up, torch's ``ndtr`` rounds the mass below zero to 0 and ``ndtri(0)`` is
    -inf); the initial draw ``U(0, step_size)`` is 0 there. Both are floored at the smallest positive
    float."""
    tiny = torch.finfo(torch.float64).tiny
    monkeypatch.setattr(_tuning, "standard_uniform", lambda generator, like: torch.zeros_like(like))
    step_size = torch.tensor([0.005, 0.0123, 0.3], **DOUBLE)
    epsilon, _ = perturb_parameters(step_size, None, torch.ones(3, **DOUBLE))
    assert torch.equal(epsilon, torch.full((3,), tiny, **DOUBLE))
    monkeypatch.setattr(torch, "rand", lambda n, **keywords: torch.zeros(n, dtype=keywords["dtype"]))
    epsilon, _ = initial_parameters(3, 0.5, 4)
    assert torch.equal(epsilon, torch.full((3,), tiny, **DOUBLE))


def test_the_step_sizes_floor_is_hmcs_optimal_acceptance_by_default():
    """``run_smc`` shrinks the step sizes below a mean acceptance of 0.65 unless told otherwise (HMC's
    optimal acceptance in high dimensions, Beskos et al. 2013)."""
    assert inspect.signature(run_smc).parameters["min_acceptance"].default == 0.65
