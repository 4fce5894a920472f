"""Gamma hyperpriors: the Gamma draws, the hierarchical prior, the Gibbs conditionals, the rescoring."""

import math

import numpy as np
import pytest
import torch
from scipy import stats
from scipy.special import digamma, polygamma

from sklearn_quinn._core.evidence import COLUMN_SHAPE, ParameterGroups
from sklearn_quinn._core.hyperpriors import (
    GammaHyperprior,
    HierarchicalPrior,
    HyperparameterGibbs,
    log_generalized_inverse_gaussian,
    standard_gamma,
)
from sklearn_quinn._core.likelihoods import CategoricalLikelihood, GaussianLikelihood
from sklearn_quinn._core.log_posterior import LeadingColumns, LogPosterior, hierarchical_log_posterior
from sklearn_quinn._core.network import FunctionalModel, build_mlp
from sklearn_quinn.mcmc._gibbs import ConditionalDensity
from sklearn_quinn.mcmc._sampling import GradientCount

DOUBLE = dict(dtype=torch.float64)
HYPERPRIOR = GammaHyperprior(0.5, 0.01)


def _problem(task, n_outputs=2):
    """A 3-4-O tanh network (6 groups: its first layer's 3 input columns, then one group a
    tensor), 20 points, and its hierarchical log posterior."""
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
    """The log density over rows [theta | log noise std | log precisions | log layer mean] is
    N(theta_g; 0, 1/delta_g) Gamma(delta_g) delta_g Gamma(tau) 2 tau, with tau = exp(-2 log noise std),
    and for the first layer's input columns Gamma(delta_c; A, rate A / m) delta_c Gamma(m) m
    (scipy's densities, with the Jacobians of the log coordinates); its gradient is autograd's."""
    model, _, log_posterior, _ = _problem("regression")
    prior = log_posterior.log_prior
    rows = prior.sample(3, torch.Generator().manual_seed(1))
    theta, log_noise, log_precision, log_mean = prior.split(rows)
    assert log_precision.shape == (3, 6) and log_mean.shape == (3, 1)  # 3 columns, 0.bias, 2.weight, 2.bias
    gamma = stats.gamma(HYPERPRIOR.shape, scale=1 / HYPERPRIOR.rate)
    index = ParameterGroups.of(model).index.numpy()
    for row in range(3):
        precision, mean = np.exp(log_precision[row].numpy()), math.exp(float(log_mean[row, 0]))
        tau = math.exp(-2 * float(log_noise[row]))
        column = stats.gamma(COLUMN_SHAPE, scale=mean / COLUMN_SHAPE)
        expected = (
            stats.norm.logpdf(theta[row].numpy(), scale=precision[index] ** -0.5).sum()
            + (column.logpdf(precision[:3]) + np.log(precision[:3])).sum()
            + (gamma.logpdf(precision[3:]) + np.log(precision[3:])).sum()
            + gamma.logpdf(mean) + math.log(mean)
            + gamma.logpdf(tau) + math.log(2 * tau)
        )
        assert float(prior(rows[row : row + 1])) == pytest.approx(expected, rel=1e-12)
    leaf = rows.clone().requires_grad_(True)
    (gradient,) = torch.autograd.grad(prior.value_and_grad(leaf)[0].sum(), leaf)
    torch.testing.assert_close(prior.value_and_grad(rows)[1], gradient)
    torch.testing.assert_close(prior(rows), prior.value_and_grad(rows)[0], rtol=0, atol=0)
    # Held at the rows' hyperparameters: the same density and gradient in the weights, for all the
    # rows or the leading ones, whatever weights they carry; zero gradient in the held columns.
    held = prior.given_hyperparameters()
    held.hold(rows)
    moved = torch.cat([rows[:, : model.n_params].flip(0), rows[:, model.n_params :]], dim=1)
    for these in (moved, moved[:2]):
        joint = torch.cat([these[:, : model.n_params], rows[: len(these), model.n_params :]], dim=1)
        expected_value, expected_gradient = prior.value_and_grad(joint)
        value, gradient = held.value_and_grad(these)
        torch.testing.assert_close(value, expected_value, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(gradient[:, : model.n_params], expected_gradient[:, : model.n_params])
        assert not gradient[:, model.n_params :].any()
        # The kicks' force is the prior's own weight gradient, to the bit (HMC's draws rest on it).
        torch.testing.assert_close(gradient[:, : model.n_params], prior.weight_gradient(joint), rtol=0, atol=0)
    # Selected rows (a leapfrog's rows still going once others stopped), all of them or the leading ones.
    index = torch.tensor([2, 0])
    selected = held.select(index)
    for these in (moved[index], moved[index][:1]):
        joint = torch.cat([these[:, : model.n_params], rows[index][: len(these), model.n_params :]], dim=1)
        torch.testing.assert_close(selected(these), prior(joint), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(selected.value_and_grad(these)[1][:, : model.n_params],
                                   prior.weight_gradient(joint), rtol=0, atol=0)


def test_a_conditional_density_selects_its_held_rows():
    """``ConditionalDensity.select``: the density of the moved columns over some of its held rows,
    as a leapfrog's steps take it once some rows' trajectories stopped, is the whole density's at
    those rows (its value, gradient and float32 surrogate), the held prior's terms selected with them."""
    model, _, log_posterior, _ = _problem("regression")
    log_posterior.set_surrogate_dtype(torch.float32)
    rows = log_posterior.log_prior.sample(4, torch.Generator().manual_seed(3))
    conditional = ConditionalDensity(log_posterior, model.n_params)
    conditional.condition_on(rows)
    moved = rows[:, : model.n_params] + 0.1 * torch.randn(4, model.n_params, **DOUBLE)
    index = torch.tensor([3, 1])
    selected = conditional.select(index)
    value, gradient = conditional.value_and_grad(moved)
    surrogate_value, force = conditional.surrogate.value_and_grad(moved)
    for n in (2, 1):  # the selection, or its leading rows
        these = moved[index][:n]
        selected_value, selected_gradient = selected.value_and_grad(these)
        torch.testing.assert_close(selected_value, value[index][:n], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(selected_gradient, gradient[index][:n], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(selected(these), conditional(moved)[index][:n], rtol=1e-12, atol=1e-12)
        these_value, these_force = selected.surrogate.value_and_grad(these)
        torch.testing.assert_close(these_value, surrogate_value[index][:n], rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(these_force, force[index][:n], rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(selected.surrogate(these), these_value, rtol=1e-6, atol=1e-6)



def test_the_compile_pilots_counter_keeps_the_held_hyperparameters():
    """``compile='auto'`` runs its first steps through a counter of the gradients
    (:class:`~sklearn_quinn.mcmc._sampling.GradientCount`), and the rest through it too where it
    decides not to compile. A kernel within Gibbs must still take its forces from the posterior with
    the hyperparameters held, whose prior terms are computed once per Gibbs draw (behind the counter
    they were the whole prior's value and gradient at every leapfrog step: a quarter of the default
    ``MCMCRegressor``'s sampling time on diabetes); to the bit the same forces, every one counted.
    A density without ``select`` gives a counter without one."""
    model, _, log_posterior, _ = _problem("regression")
    log_posterior.set_surrogate_dtype(torch.float32)  # the default kicks'
    rows = log_posterior.log_prior.sample(4, torch.Generator().manual_seed(3))
    moved = rows[:, : model.n_params] + 0.1 * torch.randn(4, model.n_params, **DOUBLE)
    index = torch.tensor([3, 1])
    direct = ConditionalDensity(log_posterior, model.n_params)
    direct.condition_on(rows)
    expected = (direct.surrogate.value_and_grad(moved)[1],
                direct.select(index).surrogate.value_and_grad(moved[index])[1])
    counted = GradientCount(log_posterior)
    conditional = ConditionalDensity(counted, model.n_params)
    conditional.condition_on(rows)

    def whole_prior(rows):
        raise AssertionError("a kick took the whole prior's value and gradient")

    log_posterior.log_prior.value_and_grad = whole_prior
    torch.testing.assert_close(conditional.surrogate.value_and_grad(moved)[1], expected[0], rtol=0, atol=0)
    torch.testing.assert_close(conditional.select(index).surrogate.value_and_grad(moved[index])[1], expected[1],
                               rtol=0, atol=0)
    conditional.value_and_grad(moved)
    assert counted.n_calls == 3
    likelihood_alone = LeadingColumns(log_posterior.log_likelihood, model.n_params)
    assert GradientCount(likelihood_alone).given_hyperparameters() is None
    assert GradientCount(likelihood_alone).select is None


def test_hierarchical_prior_draws():
    """40k prior rows: E[log delta] = digamma(a) - log(b) within 4 standard errors
    (variance trigamma(a)), the same for the layer's mean m and tau; an input column's
    E[log delta_c] = E[log m] + digamma(A) - log(A) (variance trigamma(a) + trigamma(A));
    and sqrt(delta_g) theta standard normal (std within 2%)."""
    model, _, log_posterior, _ = _problem("regression")
    prior = log_posterior.log_prior
    n = 40_000
    rows = prior.sample(n, torch.Generator().manual_seed(2))
    theta, log_noise, log_precision, log_mean = prior.split(rows)
    log_tau = -2 * log_noise
    expected = digamma(HYPERPRIOR.shape) - math.log(HYPERPRIOR.rate)
    error = 4 * math.sqrt(polygamma(1, HYPERPRIOR.shape) / n)
    assert (np.abs(log_precision[:, 3:].numpy().mean(0) - expected) < error).all()
    assert abs(float(log_mean.mean()) - expected) < error
    assert abs(float(log_tau.mean()) - expected) < error
    column = expected + digamma(COLUMN_SHAPE) - math.log(COLUMN_SHAPE)
    column_error = 4 * math.sqrt((polygamma(1, HYPERPRIOR.shape) + polygamma(1, COLUMN_SHAPE)) / n)
    assert (np.abs(log_precision[:, :3].numpy().mean(0) - column) < column_error).all()
    standardised = theta * prior.per_weight(log_precision.exp()).sqrt()
    np.testing.assert_allclose(standardised.std(0).numpy(), 1.0, rtol=0.02)


@pytest.mark.parametrize("temperature", [1.0, 0.3])
def test_gibbs_draws_follow_the_conjugate_conditionals(temperature):
    """Given fixed weights and precisions, 20k draws of each hyperparameter: the layer's
    mean m from its generalized inverse Gaussian given the columns' precisions (scipy's
    geninvgauss, Kolmogorov-Smirnov), then delta_c (A/m + ||theta_c||^2/2) ~ Gamma(A + K_c/2)
    at each draw's m, delta_g ~ Gamma(a + K_g/2, b + ||theta_g||^2/2) and tau ~ Gamma(a +
    beta N O/2, b + beta SSE/2); the means of the precisions and of their logs within 4
    standard errors."""
    model, Y, log_posterior, gibbs = _problem("regression")
    prior = log_posterior.log_prior
    n = 20_000
    rows = prior.sample(1, torch.Generator().manual_seed(3)).expand(n, -1)
    theta = rows[:, : model.n_params]
    statistics = gibbs.statistics(theta)
    new = gibbs.draw(torch.Generator().manual_seed(4), rows, statistics, temperature)
    _, log_noise, log_precision, log_mean = prior.split(new)
    np.testing.assert_array_equal(new[:, : model.n_params].numpy(), theta.numpy())  # the weights stay
    a, b = HYPERPRIOR
    old_columns = np.exp(prior.split(rows[:1])[2][0, :3].numpy())
    scale = COLUMN_SHAPE * old_columns.sum()
    mean = stats.geninvgauss(a - 3 * COLUMN_SHAPE, 2 * math.sqrt(b * scale), scale=math.sqrt(scale / b))
    assert stats.kstest(np.exp(log_mean[:5000, 0].numpy()), mean.cdf).pvalue > 1e-3
    assert abs(float(log_mean.exp().mean()) - mean.mean()) < 4 * mean.std() / math.sqrt(n)
    sizes = ParameterGroups.of(model).sizes
    standardised = np.exp(log_precision[:, :3].numpy()) * (
        COLUMN_SHAPE / np.exp(log_mean.numpy()) + statistics.squares[:1, :3].numpy() / 2)
    sse = float(((Y - model(theta[:1], log_posterior.log_likelihood.density.X)) ** 2).sum())
    shapes = [COLUMN_SHAPE + int(size) / 2 for size in sizes[:3]]
    shapes += [a + int(size) / 2 for size in sizes[3:]] + [a + temperature * Y.numel() / 2]
    rates = [1.0] * 3 + [b + float(s) / 2 for s in statistics.squares[0, 3:]] + [b + temperature * sse / 2]
    draws = np.concatenate([np.log(standardised), log_precision[:, 3:].numpy(), -2 * log_noise[:, None].numpy()], 1)
    for column, (shape, rate) in enumerate(zip(shapes, rates)):
        values = np.exp(draws[:, column])
        assert abs(values.mean() - shape / rate) < 4 * math.sqrt(shape / n) / rate
        assert abs(draws[:, column].mean() - (digamma(shape) - math.log(rate))) < 4 * math.sqrt(
            polygamma(1, shape) / n)


@pytest.mark.parametrize("order, rate, scale", [(-3.5, 0.01, 400.0), (-99.5, 0.01, 100.0), (2.0, 0.01, 5.0),
                                                (-0.5, 1e-4, 1e6)])
def test_log_generalized_inverse_gaussian_draws(order, rate, scale):
    """The rejection draws of log x against scipy's geninvgauss, whose x**(p - 1) exp(-b (x + 1/x) / 2)
    at scale sqrt(scale / rate) is x**(order - 1) exp(-rate x - scale / x) with p = order, b = 2 sqrt(rate
    scale): Kolmogorov-Smirnov on 20k draws, the mean within 4 standard errors; the same seed, the
    same draws. Negative orders are a layer's mean precision given many columns; positive, few."""
    n = 20_000
    target = stats.geninvgauss(order, 2 * math.sqrt(rate * scale), scale=math.sqrt(scale / rate))
    scales = torch.full((n,), scale, **DOUBLE)
    draws = log_generalized_inverse_gaussian(order, rate, scales, torch.Generator().manual_seed(0))
    x = np.exp(draws.numpy())
    assert stats.kstest(x, target.cdf).pvalue > 1e-3
    assert abs(x.mean() - target.mean()) < 4 * target.std() / math.sqrt(n)
    again = log_generalized_inverse_gaussian(order, rate, scales, torch.Generator().manual_seed(0))
    torch.testing.assert_close(draws, again, rtol=0, atol=0)


def test_tied_groups_have_no_layer_means():
    """With each tensor's columns tied the prior is the one without layer means: no columns
    after the precisions, and a Gibbs draw leaves none."""
    model = FunctionalModel(build_mlp(3, 1, (4,), "tanh").double())
    tied = HierarchicalPrior(ParameterGroups.of(model).tied(), HYPERPRIOR)
    assert tied.n_layers == 0 and tied.n_hyperparameters == 4
    rows = tied.sample(5, torch.Generator().manual_seed(0))
    assert rows.shape == (5, model.n_params + 4) and tied.split(rows)[3].shape == (5, 0)
    apart = HierarchicalPrior(ParameterGroups.of(model), HYPERPRIOR)
    assert apart.n_layers == 1 and apart.n_hyperparameters == 3 + 3 + 1


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


def test_standard_gamma_draws_of_a_tiny_shape_stay_positive():
    """Shape 1e-3 boosts by U**1000, which underflows to 0 for half the draws: they are held at the
    dtype's smallest normal number, so their logs (a state's log precisions) are finite."""
    draws = standard_gamma(torch.full((1000,), 1e-3, **DOUBLE), torch.Generator().manual_seed(0))
    assert (draws >= torch.finfo(torch.float64).tiny).all()
    assert (draws == torch.finfo(torch.float64).tiny).any()  # the underflow this guards against occurs


def test_a_column_shape_apart_from_the_hyperprior_shape():
    """With the columns' shape A = 3 and the hyperprior Gamma(2, 0.5) (the defaults share 0.5, which
    would hide a swap of the two): the columns' precisions are Gamma(A, rate A / m) in the density
    (scipy's), and the layer's mean is drawn from x**(a - C A - 1) exp(-b x - A sum_c delta_c / x)."""
    model = FunctionalModel(build_mlp(3, 1, (4,), "tanh").double())
    groups = ParameterGroups.of(model)
    hyperprior = GammaHyperprior(2.0, 0.5)
    prior = HierarchicalPrior(groups, hyperprior, column_shape=3.0)
    rows = prior.sample(2, torch.Generator().manual_seed(0))
    theta, _, log_precision, log_mean = prior.split(rows)
    gamma = stats.gamma(2.0, scale=2.0)
    index = groups.index.numpy()
    for row in range(2):
        precision, mean = np.exp(log_precision[row].numpy()), math.exp(float(log_mean[row, 0]))
        expected = (
            stats.norm.logpdf(theta[row].numpy(), scale=precision[index] ** -0.5).sum()
            + (stats.gamma(3.0, scale=mean / 3.0).logpdf(precision[:3]) + np.log(precision[:3])).sum()
            + (gamma.logpdf(precision[3:]) + np.log(precision[3:])).sum()
            + gamma.logpdf(mean) + math.log(mean)
        )
        assert float(prior(rows[row : row + 1])) == pytest.approx(expected, rel=1e-12)
    drawn = prior.draw_log_means(torch.Generator().manual_seed(1), log_precision)
    scale = 3.0 * log_precision[:, :3].exp().sum(1)
    expected = log_generalized_inverse_gaussian(2.0 - 3 * 3.0, 0.5, scale, torch.Generator().manual_seed(1))
    torch.testing.assert_close(drawn[:, 0], expected, rtol=0, atol=0)


def test_holding_again_writes_the_new_hyperparameters_into_the_same_tensors():
    """A compiled kernel keeps reading the tensors of the first hold: a second hold of as many rows
    writes the new precisions and terms into them, and the density is the one at the new rows."""
    model, _, log_posterior, _ = _problem("regression")
    prior = log_posterior.log_prior
    first, second = prior.sample(3, torch.Generator().manual_seed(0)), prior.sample(3, torch.Generator().manual_seed(1))
    held = prior.given_hyperparameters()
    held.hold(first)
    precision, terms = held.precision, held.terms
    held.hold(second)
    assert held.precision is precision and held.terms is terms
    value, gradient = held.value_and_grad(second)
    torch.testing.assert_close(value, prior(second), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gradient[:, : model.n_params], prior.weight_gradient(second), rtol=0, atol=0)


def test_without_a_sampled_noise_the_statistics_need_no_forward_pass():
    """A likelihood given with a prior that samples no noise is not read: no residuals are computed."""
    model, _, log_posterior, gibbs = _problem("regression")
    prior = HierarchicalPrior(ParameterGroups.of(model), HYPERPRIOR)
    statistics = HyperparameterGibbs(prior, gibbs.log_likelihood).statistics(torch.zeros(2, model.n_params, **DOUBLE))
    assert statistics.sum_of_squares is None


# scipy's geninvgauss integrates its CDF by quadrature, which warns of its subdivisions over a
# density this wide (the draws still pass Kolmogorov-Smirnov against it).
@pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")
@pytest.mark.parametrize("order", [0.0, -500.0])
def test_log_generalized_inverse_gaussian_draws_for_a_pruned_layer(order):
    """A layer whose columns' precisions are all near 0 (scale 1e-12): one column with a = A (order
    0, a density some thousand units wide in log x, whose first steps to the edges are held to 1,
    as exp overflows beyond about 700) and a thousand columns (order -500, whose mode is written
    without the cancellation of order + root). The draws are finite and follow scipy's geninvgauss
    (Kolmogorov-Smirnov on 2000 draws; at order -500 rate x is below 1e-15 and scale / x is
    Gamma(500, 1), where scipy's geninvgauss loses its accuracy)."""
    rate, scale = 0.01, 1e-12
    draws = log_generalized_inverse_gaussian(order, rate, torch.full((2000,), scale, **DOUBLE),
                                             torch.Generator().manual_seed(0))
    assert torch.isfinite(draws).all()
    if order == 0.0:
        target = stats.geninvgauss(order, 2 * math.sqrt(rate * scale), scale=math.sqrt(scale / rate))
        assert stats.kstest(np.exp(draws.numpy()), target.cdf).pvalue > 1e-3
    else:
        assert stats.kstest(scale * np.exp(-draws.numpy()), stats.gamma(-order).cdf).pvalue > 1e-3
