"""The log posterior over rows of a sampler's state: a prior plus a tempered likelihood.

A sampler's state is a ``(C, P)`` matrix: one row per chain or particle, the
network's ``K`` weights, then the likelihood's sampled parameters (the log
noise std of a Gaussian with learned noise). Every density here is a callable
``rows -> (C,)`` with a ``value_and_grad(rows) -> ((C,), (C, P))`` method that
computes the gradient without an autograd graph (the kernels call it when
present). Likelihoods and priors are normalised, so that sums of them are
exact log evidences in SMC.

With hyperpriors (:mod:`~sklearn_quinn._core.hyperpriors`) the rows carry the
log prior precisions (and the log means of the layers whose input columns'
precisions are drawn about them) after the likelihood's columns; the
likelihood reads the leading columns only (:class:`LeadingColumns`).
"""

import torch

from .hyperpriors import HierarchicalPrior, HyperparameterGibbs
from .priors import StatePrior


class LogPosterior:
    """``log prior + temperature * log likelihood``: the posterior (temperature 1)
    or one of SMC's tempered targets."""

    def __init__(self, log_likelihood, log_prior, temperature=1.0):
        self.log_likelihood, self.log_prior = log_likelihood, log_prior
        self.temperature = float(temperature)

    def __call__(self, rows):
        return self.log_prior(rows) + self.temperature * self.log_likelihood(rows)

    def value_and_grad(self, rows):
        likelihood, likelihood_gradient = self.log_likelihood.value_and_grad(rows)
        prior, prior_gradient = self.log_prior.value_and_grad(rows)
        return prior + self.temperature * likelihood, prior_gradient + self.temperature * likelihood_gradient

    def given_hyperparameters(self):
        """This posterior with the prior's :meth:`~HierarchicalPrior.given_hyperparameters`, or None
        where the prior has no hyperparameter columns to hold."""
        given = getattr(self.log_prior, "given_hyperparameters", None)
        return None if given is None else LogPosterior(self.log_likelihood, given(), self.temperature)

    def select(self, index):
        """This posterior over the rows ``index`` of those its prior holds (:meth:`HeldHyperparameters.select`);
        itself where the prior holds none: the likelihood and the other priors read each row alone."""
        select = getattr(self.log_prior, "select", None)
        return self if select is None else LogPosterior(self.log_likelihood, select(index), self.temperature)

    def hold(self, rows):
        """Hold the hyperparameter columns of ``rows`` (a posterior from :meth:`given_hyperparameters`)."""
        self.log_prior.hold(rows)

    def set_surrogate_dtype(self, dtype):
        """The likelihood's :meth:`~sklearn_quinn._core.likelihoods.RowBlockLikelihood.set_surrogate_dtype`."""
        self.log_likelihood.set_surrogate_dtype(dtype)

    @property
    def surrogate(self):
        """This posterior with the likelihood's ``surrogate`` (a cheaper approximation of it:
        :meth:`~sklearn_quinn._core.likelihoods.RowBlockLikelihood.set_surrogate_dtype`) and the
        prior itself, or None where the likelihood has none."""
        likelihood = getattr(self.log_likelihood, "surrogate", None)
        return None if likelihood is None else LogPosterior(likelihood, self.log_prior, self.temperature)


def state_prior(weight_prior, model, likelihood):
    """``weight_prior`` on the weights and the log-noise prior on the likelihood's sampled columns."""
    return StatePrior(weight_prior, model.n_params, log_noise=bool(likelihood.n_state_columns))


def log_posterior(model, X, Y, likelihood, weight_prior):
    """The log posterior over state rows of ``model`` on ``(X, Y)``.

    Parameters
    ----------
    model : FunctionalModel
    X, Y : tensor of shape (N, D) and (N, O)
    likelihood : GaussianLikelihood or CategoricalLikelihood
        Its parameters are sampled when it learns them (a Gaussian's noise).
    weight_prior : GaussianPrior or LogisticPrior
    """
    return LogPosterior(likelihood.state_log_likelihood(model, X, Y), state_prior(weight_prior, model, likelihood))


class LeadingColumns:
    """A density of the first ``n_columns`` columns of each row, over whole rows:
    the rows' further columns do not enter it, and its gradient there is zero.

    Parameters
    ----------
    density : callable ``(C, n_columns) -> (C,)`` with ``value_and_grad``
    n_columns : int
    """

    def __init__(self, density, n_columns):
        self.density, self.n_columns = density, n_columns

    def __call__(self, rows):
        return self.density(rows[:, : self.n_columns])

    def value_and_grad(self, rows):
        value, gradient = self.density.value_and_grad(rows[:, : self.n_columns])
        return value, self._padded(gradient, rows)

    def set_surrogate_dtype(self, dtype):
        """The density's ``set_surrogate_dtype``."""
        self.density.set_surrogate_dtype(dtype)

    def fisher_draws(self, rows, generator=None):
        """The density's ``fisher_draws`` over whole rows (zero in the further columns)."""
        return self._padded(self.density.fisher_draws(rows[:, : self.n_columns], generator), rows)

    @property
    def surrogate(self):
        """The density's ``surrogate`` over whole rows, or None where it has none."""
        surrogate = getattr(self.density, "surrogate", None)
        return None if surrogate is None else LeadingColumns(surrogate, self.n_columns)

    def _padded(self, gradient, rows):
        return torch.nn.functional.pad(gradient, (0, rows.shape[1] - self.n_columns))


def hierarchical_log_posterior(model, groups, X, Y, likelihood, hyperprior):
    """The log posterior over rows ``[theta | log noise std | log prior precisions | log layer means]``
    under Gamma hyperpriors, and the Gibbs updates of its hyperparameter columns.

    Parameters
    ----------
    model : FunctionalModel
    groups : ParameterGroups
        The groups of weights that share a prior precision.
    X, Y : tensor of shape (N, D) and (N, O)
    likelihood : GaussianLikelihood or CategoricalLikelihood
        A learned noise (``learn_noise``) is sampled under the hyperprior.
    hyperprior : GammaHyperprior

    Returns
    -------
    log_posterior : LogPosterior
        Its ``log_likelihood`` and ``log_prior`` are SMC's normalised pieces.
    gibbs : HyperparameterGibbs
    """
    state_likelihood = likelihood.state_log_likelihood(model, X, Y)
    prior = HierarchicalPrior(groups, hyperprior, noise=likelihood.n_state_columns > 0)
    log_likelihood = LeadingColumns(state_likelihood, model.n_params + likelihood.n_state_columns)
    gibbs = HyperparameterGibbs(prior, state_likelihood if prior.noise else None)
    return LogPosterior(log_likelihood, prior), gibbs
