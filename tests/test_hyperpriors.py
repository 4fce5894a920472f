"""Gamma hyperpriors: the Gamma draws, the hierarchical prior, the Gibbs conditionals, the rescoring."""

import math

import numpy as np
import pytest
import torch
from scipy import stats
from scipy.special import digamma, polygamma

from sklearn_quinn._core.evidence import ParameterGroups
from sklearn_quinn._core.hyperpriors import GammaHyperprior, HierarchicalPrior, HyperparameterGibbs, standard_gamma
from sklearn_quinn._core.likelihoods import CategoricalLikelihood, GaussianLikelihood
from sklearn_quinn._core.log_posterior import LeadingColumns, LogPosterior, hierarchical_log_posterior
from sklearn_quinn._core.network import FunctionalModel, build_mlp

DOUBLE = dict(dtype=torch.float64)
HYPERPRIOR = GammaHyperprior(0.5, 0.01)


def _problem(task, n_outputs=2):
    """A 3-4-O tanh network (4 groups), 20 points, and its hierarchical log posterior."""
    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(3, n_outputs, (4,), "tanh").double())
    X = torch.randn(20, 3, **DOUBLE)
    if task == "regression":
        Y = torch.randn(20, n_outputs, **DOUBLE)
        likelihood = GaussianLikelihood(torch.ones(n_outputs, **DOUBLE), learn_noise=True)
    else:
        Y = torch.randint(0, n_outputs, (20, 1)).double()
        likelihood = CategoricalLikelihood()
    log_posterior, gibbs = hierarchical_log_posterior(model, ParameterGroups.of(model), X, Y, likelihood, HYPERPRIOR)
    return model, Y, log_posterior, gibbs


@pytest.mark.parametrize("shape", [0.3, 0.5, 1.0, 4.5, 200.0])
def test_standard_gamma_draws_have_the_gamma_moments(shape):
    """Below and above shape 1 (the boosted and the plain Marsaglia-Tsang paths):
    the mean and variance of 100k draws within 4 standard errors (from the
    Gamma's third and fourth moments), and the same seed gives the same draws."""
    n = 100_000
    draws = standard_gamma(torch.full((n,), shape, **DOUBLE), torch.Generator().manual_seed(0)).numpy()
    assert abs(draws.mean() - shape) < 4 * math.sqrt(shape / n)
    fourth_central = 3 * shape**2 + 6 * shape  # of Gamma(shape, 1)
    assert abs(draws.var() - shape) < 4 * math.sqrt((fourth_central - shape**2) / n)
    assert stats.kstest(draws[:5000], stats.gamma(shape).cdf).pvalue > 1e-3
    again = standard_gamma(torch.full((n,), shape, **DOUBLE), torch.Generator().manual_seed(0)).numpy()
    np.testing.assert_array_equal(draws, again)


def test_hierarchical_prior_density_is_the_product_of_its_parts():
    """The log density over rows [theta | log noise std | log precisions] is
    N(theta_g; 0, 1/delta_g) Gamma(delta_g) delta_g Gamma(tau) 2 tau, with tau = exp(-2 log noise std)
    (scipy's densities, with the Jacobians of the log coordinates); its gradient is autograd's."""
    model, _, log_posterior, _ = _problem("regression")
    prior = log_posterior.log_prior
    rows = prior.sample(3, torch.Generator().manual_seed(1))
    theta, log_noise, log_precision = prior.split(rows)
    gamma = stats.gamma(HYPERPRIOR.shape, scale=1 / HYPERPRIOR.rate)
    index = ParameterGroups.of(model).index.numpy()
    for row in range(3):
        precision = np.exp(log_precision[row].numpy())
        tau = math.exp(-2 * float(log_noise[row]))
        expected = (
            stats.norm.logpdf(theta[row].numpy(), scale=precision[index] ** -0.5).sum()
            + (gamma.logpdf(precision) + np.log(precision)).sum()
            + gamma.logpdf(tau) + math.log(2 * tau)
        )
        assert float(prior(rows[row : row + 1])) == pytest.approx(expected, rel=1e-12)
    leaf = rows.clone().requires_grad_(True)
    (gradient,) = torch.autograd.grad(prior.value_and_grad(leaf)[0].sum(), leaf)
    torch.testing.assert_close(prior.value_and_grad(rows)[1], gradient)


def test_hierarchical_prior_draws():
    """40k prior rows: E[log delta] = digamma(a) - log(b) within 4 standard errors
    (variance trigamma(a)), and sqrt(delta_g) theta standard normal (std within 2%)."""
    model, _, log_posterior, _ = _problem("regression")
    prior = log_posterior.log_prior
    n = 40_000
    rows = prior.sample(n, torch.Generator().manual_seed(2))
    theta, log_noise, log_precision = prior.split(rows)
    log_tau = -2 * log_noise
    expected = digamma(HYPERPRIOR.shape) - math.log(HYPERPRIOR.rate)
    error = 4 * math.sqrt(polygamma(1, HYPERPRIOR.shape) / n)
    assert (np.abs(log_precision.numpy().mean(0) - expected) < error).all()
    assert abs(float(log_tau.mean()) - expected) < error
    standardised = theta * prior.per_weight(log_precision.exp()).sqrt()
    np.testing.assert_allclose(standardised.std(0).numpy(), 1.0, rtol=0.02)


@pytest.mark.parametrize("temperature", [1.0, 0.3])
def test_gibbs_draws_follow_the_conjugate_conditionals(temperature):
    """Given fixed weights, 20k draws of each hyperparameter: delta_g ~ Gamma(a + K_g/2,
    b + ||theta_g||^2/2) and tau ~ Gamma(a + beta N O/2, b + beta SSE/2); the means
    of the precisions and of their logs within 4 standard errors."""
    model, Y, log_posterior, gibbs = _problem("regression")
    n = 20_000
    rows = log_posterior.log_prior.sample(1, torch.Generator().manual_seed(3)).expand(n, -1)
    theta = rows[:, : model.n_params]
    statistics = gibbs.statistics(theta)
    new = gibbs.draw(torch.Generator().manual_seed(4), rows, statistics, temperature)
    _, log_noise, log_precision = log_posterior.log_prior.split(new)
    np.testing.assert_array_equal(new[:, : model.n_params].numpy(), theta.numpy())  # the weights stay
    a, b = HYPERPRIOR
    sse = float(((Y - model(theta[:1], log_posterior.log_likelihood.density.X)) ** 2).sum())
    shapes = [a + int(size) / 2 for size in ParameterGroups.of(model).sizes] + [a + temperature * Y.numel() / 2]
    rates = [b + float(s) / 2 for s in statistics.squares[0]] + [b + temperature * sse / 2]
    draws = torch.cat([log_precision, -2 * log_noise[:, None]], dim=1).numpy()
    for column, (shape, rate) in enumerate(zip(shapes, rates)):
        values = np.exp(draws[:, column])
        assert abs(values.mean() - shape / rate) < 4 * math.sqrt(shape / n) / rate
        assert abs(draws[:, column].mean() - (digamma(shape) - math.log(rate))) < 4 * math.sqrt(
            polygamma(1, shape) / n)


@pytest.mark.parametrize("task", ["regression", "classification"])
@pytest.mark.parametrize("temperature", [1.0, 0.3, 1e-4])
def test_rescore_equals_a_fresh_evaluation(task, temperature):
    """After a Gibbs draw, the kernel's cached value and weight gradient brought to
    the new hyperparameters equal the target evaluated there (to rounding)."""
    model, _, log_posterior, gibbs = _problem(task, n_outputs=3)
    target = LogPosterior(log_posterior.log_likelihood, log_posterior.log_prior, temperature)
    generator = torch.Generator().manual_seed(5)
    rows = 0.5 * log_posterior.log_prior.sample(6, generator)
    value, gradient = target.value_and_grad(rows)
    statistics = gibbs.statistics(rows[:, : model.n_params])
    new = gibbs.draw(generator, rows, statistics, temperature)
    rescored = gibbs.rescore(rows, new, statistics, temperature, value, gradient[:, : model.n_params])
    expected_value, expected_gradient = target.value_and_grad(new)
    torch.testing.assert_close(rescored[0], expected_value, rtol=1e-12, atol=1e-9)
    torch.testing.assert_close(rescored[1], expected_gradient[:, : model.n_params], rtol=1e-10, atol=1e-10)
    value_only = gibbs.rescore(rows, new, statistics, temperature, value)
    assert value_only[1] is None
    torch.testing.assert_close(value_only[0], expected_value, rtol=1e-12, atol=1e-9)


def test_the_likelihood_reads_the_leading_columns_only():
    """LeadingColumns: the value of the leading columns, a zero gradient after them."""
    model, _, log_posterior, _ = _problem("regression")
    likelihood = log_posterior.log_likelihood
    assert isinstance(likelihood, LeadingColumns) and likelihood.n_columns == model.n_params + 1
    rows = log_posterior.log_prior.sample(4, torch.Generator().manual_seed(6))
    value, gradient = likelihood.value_and_grad(rows)
    torch.testing.assert_close(value, likelihood.density(rows[:, : model.n_params + 1]))
    assert gradient.shape == rows.shape and (gradient[:, model.n_params + 1 :] == 0).all()


def test_a_sampled_noise_needs_the_likelihood():
    model = FunctionalModel(build_mlp(2, 1, ()).double())
    prior = HierarchicalPrior(ParameterGroups.of(model), HYPERPRIOR, noise=True)
    with pytest.raises(ValueError, match="needs the Gaussian likelihood"):
        HyperparameterGibbs(prior)
