"""The weight priors: their densities, gradients and draws against the closed forms, the noise's prior in
a sampler's state, and a Gaussian prior pickled by an earlier version."""

import math
import pickle

import numpy as np
import pytest
import torch
from scipy.stats import norm

from sklearn_quinn._core.priors import GaussianPrior, LogisticPrior, ScaleMixturePrior, StatePrior

STDS = [0.7, torch.tensor([0.5, 1.0, 2.0, 3e-3], dtype=torch.float64)]


@pytest.mark.parametrize("std", STDS, ids=["one std", "a std per weight"])
def test_density_and_gradient_are_the_normal_ones(std):
    theta = torch.randn(5, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    scale = np.broadcast_to(np.asarray(std, dtype=np.float64), (4,))
    value, gradient = GaussianPrior(std).value_and_grad(theta)
    np.testing.assert_allclose(value.numpy(), norm.logpdf(theta.numpy(), scale=scale).sum(1), rtol=1e-12)
    np.testing.assert_allclose(gradient.numpy(), -theta.numpy() / scale**2, rtol=1e-12)
    torch.testing.assert_close(GaussianPrior(std).log_prob(theta), value, rtol=0.0, atol=0.0)


@pytest.mark.parametrize("std", STDS, ids=["one std", "a std per weight"])
def test_a_prior_pickled_with_its_std_alone_takes_its_constants_on_loading(std):
    """An earlier version's pickle held ``std`` alone; the constants a step reads are taken on loading."""
    earlier = object.__new__(GaussianPrior)
    earlier.__dict__["std"] = std
    loaded = pickle.loads(pickle.dumps(earlier))
    theta = torch.randn(3, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for got, expected in zip(loaded.value_and_grad(theta), GaussianPrior(std).value_and_grad(theta)):
        torch.testing.assert_close(got, expected, rtol=0.0, atol=0.0)


def test_precision_is_a_new_tensor_at_each_call():
    """Callers keep and train under it: changing one in place leaves the prior as it was."""
    prior = GaussianPrior(torch.tensor([0.5, 2.0], dtype=torch.float64))
    prior.precision.mul_(10.0)
    torch.testing.assert_close(prior.precision, torch.tensor([4.0, 0.25], dtype=torch.float64))


def test_gaussian_draws_are_each_weights_std_times_a_standard_normal():
    """The seeded draws are ``std * z`` for the generator's own normals ``z``, the std of each weight."""
    std = torch.tensor([0.5, 2.0, 3.0], dtype=torch.float64)
    draws = GaussianPrior(std).sample(4, 3, torch.Generator().manual_seed(0))
    z = torch.randn(4, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    torch.testing.assert_close(draws, std * z, rtol=0, atol=0)


def test_a_tensor_std_is_held_apart_from_its_graph():
    """A std taken from a trained parameter: the prior's density and draws carry no graph back to it."""
    std = torch.tensor([0.5, 2.0], dtype=torch.float64, requires_grad=True)
    prior = GaussianPrior(std)
    theta = torch.ones(3, 2, dtype=torch.float64)
    assert not prior.log_prob(theta).requires_grad
    assert not prior.sample(3, 2, torch.Generator().manual_seed(0)).requires_grad


def test_a_scale_mixture_of_one_component_is_gaussian():
    """Equal stds, or all the weight on one component, make the mixture a single Gaussian, whose
    std the variational KL then takes in closed form; two stds with weight on both do not."""
    assert ScaleMixturePrior(0.3, 0.8, 0.8).gaussian_std == 0.8
    assert ScaleMixturePrior(1.0, 0.8, 0.1).gaussian_std == 0.8
    assert ScaleMixturePrior(0.0, 0.8, 0.1).gaussian_std == 0.1
    assert ScaleMixturePrior(0.3, 0.8, 0.1).gaussian_std is None


def test_logistic_draws_are_finite_where_the_uniform_is_zero():
    """A float32 uniform is exactly 0 once in 2**24 draws (this seed's row 18555): the inverse CDF
    is held off it, so every draw is finite."""
    u = torch.rand(20_000, 1, generator=torch.Generator().manual_seed(146), dtype=torch.float32)
    assert u[18555, 0] == 0
    draws = LogisticPrior(1.0).sample(20_000, 1, torch.Generator().manual_seed(146), dtype=torch.float32)
    assert torch.isfinite(draws).all()
    assert float(draws[18555, 0]) == pytest.approx(LogisticPrior(1.0).scale * math.log(torch.finfo(torch.float32).tiny),
                                                   rel=1e-6)


def test_state_prior_puts_a_standard_normal_on_the_log_noise_std():
    """With ``log_noise=True`` the last column is N(0, 1) apart from the weights: the density is the
    weights' plus that normal's (scipy's), the gradient the two gradients side by side, and the seeded
    draws the weights' draws then the generator's next normals."""
    weights = GaussianPrior(torch.tensor([0.5, 2.0, 3.0], dtype=torch.float64))
    prior = StatePrior(weights, 3, log_noise=True)
    rows = torch.randn(5, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    value, gradient = prior.value_and_grad(rows)
    expected = norm.logpdf(rows[:, :3].numpy(), scale=[0.5, 2.0, 3.0]).sum(1) + norm.logpdf(rows[:, 3].numpy())
    np.testing.assert_allclose(value.numpy(), expected, rtol=1e-12)
    torch.testing.assert_close(prior(rows), value, rtol=0, atol=0)
    torch.testing.assert_close(gradient, torch.cat([-rows[:, :3] / weights.std**2, -rows[:, 3:]], dim=1))
    generator = torch.Generator().manual_seed(1)
    draws = prior.sample(6, torch.Generator().manual_seed(1))
    expected_draws = torch.cat(
        [weights.sample(6, 3, generator), torch.randn(6, 1, generator=generator, dtype=torch.float64)], dim=1
    )
    torch.testing.assert_close(draws, expected_draws, rtol=0, atol=0)
    # Without the noise the rows are the weights alone.
    assert StatePrior(weights, 3).sample(6, torch.Generator().manual_seed(1)).shape == (6, 3)
    torch.testing.assert_close(StatePrior(weights, 3)(rows[:, :3]), weights.log_prob(rows[:, :3]), rtol=0, atol=0)
