"""The log posterior over rows of a sampler's state: a prior plus a tempered likelihood.

A sampler's state is a ``(C, P)`` matrix: one row per chain or particle, the
network's ``K`` weights, then the likelihood's sampled parameters (the log
noise std of a Gaussian with learned noise). Every density here is a callable
``rows -> (C,)`` with a ``value_and_grad(rows) -> ((C,), (C, P))`` method that
computes the gradient without an autograd graph (the kernels call it when
present). Likelihoods and priors are normalised, so that sums of them are
exact log evidences in SMC.
"""

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
