"""The hyperprior options that the sampling families (MCMC, SMC) share.

With ``prior_std=None`` the prior precision of each parameter tensor and of
each input column of the layers that read the inputs (about their layer's
mean precision), and a regressor's noise when ``noise_std=None``, are either
sampled under Gamma hyperpriors (``hyperprior='gamma'``,
:mod:`~sklearn_quinn._core.hyperpriors`) or fixed at the empirical-Bayes
values of the evidence-driven MAP (``hyperprior='empirical'``). A float
``prior_std`` is the fixed prior of earlier versions, with the noise's log
sampled under ``N(0, 1)``; the hyperprior parameters are then unused.
"""

from numbers import Real

import torch
from sklearn.utils._param_validation import Interval, StrOptions

from .._core.evidence import ParameterGroups
from .._core.hyperpriors import GammaHyperprior
from .._core.log_posterior import hierarchical_log_posterior

#: Defaults of the Gamma hyperprior on every precision (``tau = 1 / noise_std**2``
#: and each group's ``delta``). The networks work in standardised units (inputs
#: by ``normalize_X``, targets by ``normalize_y``), where
#: precisions of 1 to 1e3 and noise stds of 0.1 to 1 are typical. With shape
#: 1/2 and rate 1/100 a precision is ``50 chi^2_1``, so the std it gives is
#: ``0.14 / |z|`` (z standard normal): median 0.21, the central 90% of the mass
#: on [0.07, 2.3], and a ``1 / s`` tail toward wide priors (as a half-Cauchy's). That is
#: weak (a few observations outweigh it) but proper, which SMC's evidence needs
#: to be finite; Neal (1996), "Bayesian Learning for Neural Networks", uses
#: vague Gamma hyperpriors with shapes of this order.
DEFAULT_HYPERPRIOR_SHAPE = 0.5
DEFAULT_HYPERPRIOR_RATE = 0.01

HYPERPRIOR_CONSTRAINTS: dict = {
    "hyperprior": [StrOptions({"gamma", "empirical"})],
    "hyperprior_shape": [Interval(Real, 0, None, closed="neither")],
    "hyperprior_rate": [Interval(Real, 0, None, closed="neither")],
}


class HyperpriorMixin:
    """Which hyperparameters a sampling family samples, and the fitted attributes they give."""

    @property
    def _samples_hyperparameters(self):
        """Whether the prior precisions (and a learned noise) are sampled under Gamma hyperpriors."""
        return self.prior_std is None and self.hyperprior == "gamma"

    @property
    def _fixes_prior_and_noise(self):
        """Whether the prior and the noise are both given, so that nothing of them is learned or
        sampled (a classifier has no noise to give)."""
        return self.prior_std is not None and getattr(self, "noise_std", None) is not None

    @property
    def _empirical_hyperparameters(self):
        """Whether the prior precisions and a learned noise are fixed at the evidence-driven MAP's."""
        return self.prior_std is None and self.hyperprior == "empirical"

    def _hierarchical_posterior(self, X, Y, likelihood):
        """The log posterior over rows ``[theta | log noise std | log prior precisions | log layer means]``
        and the Gibbs updates of its hyperparameter columns (see
        :func:`~sklearn_quinn._core.log_posterior.hierarchical_log_posterior`)."""
        # The evidence's groups, the input columns apart, each column's precision drawn about its
        # layer's mean (HierarchicalPrior). With one precision per tensor the posterior cannot shrink
        # an input the targets ignore apart from the others; with each column's precision under its
        # own Gamma hyperprior, a column of the skip layer is one weight, whose precision's
        # conditional is nearly that hyperprior, and the chains mix over it slowly.
        self._groups = ParameterGroups.of(self._model)
        hyperprior = GammaHyperprior(float(self.hyperprior_shape), float(self.hyperprior_rate))
        return hierarchical_log_posterior(self._model, self._groups, X, Y, likelihood, hyperprior)

    def _empirical_state(self, likelihood, n_rows):
        """The hyperparameter columns ``(n_rows, H)`` at the MAP's learned values
        (``prior_precisions_``, the mean of each layer's input columns' and the likelihood's
        noise), in the state's log coordinates."""
        precision = torch.tensor([self.prior_precisions_[name] for name in self._groups.names],
                                 dtype=self._dtype, device=self._device)
        means = [precision[columns.to(self._device)].mean()[None] for columns in self._groups.column_layers()]
        columns = [likelihood.initial_state(n_rows)] if likelihood.n_state_columns else []
        columns.append(torch.log(torch.cat([precision, *means])).expand(n_rows, -1))
        return torch.cat(columns, dim=1)

    def _keep_precisions(self, prior, rows, weights=None):
        """Set ``prior_precisions_`` from the log precisions of the draws ``rows (S, P)`` of the
        hierarchical ``prior`` (weighted by ``weights (S,)``; equal weights when None) and return
        the draws' precisions."""
        precision = torch.exp(prior.split(rows)[2])
        mean = precision.mean(0) if weights is None else weights @ precision
        self.prior_precisions_ = self._groups.as_dict(mean)
        return self._to_numpy(precision)

    def _check_parameters(self):
        """A float prior_std fixes the prior; the conjugate updates need a Gaussian prior."""
        super()._check_parameters()
        if self.prior_std is None and getattr(self, "prior", "gaussian") != "gaussian":
            raise ValueError(
                f"prior={self.prior!r} needs a float prior_std: with prior_std=None the prior "
                "precisions are sampled or learned for a Gaussian prior only; got prior_std=None."
            )

