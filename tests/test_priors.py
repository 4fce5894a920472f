"""GaussianPrior: its density and gradient against the closed form, and a prior pickled by an earlier version."""

import pickle

import numpy as np
import pytest
import torch
from scipy.stats import norm

from sklearn_quinn._core.priors import GaussianPrior

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
