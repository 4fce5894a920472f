"""The MAP network's Laplace posterior as the least spread of a regressor's draws at each row."""

import torch

from ._core.curvature import choose_model_structure
from ._core.kronecker import KroneckerUnsupportedError
from ._core.pushforward import linear_pushforward
from .laplace._engine import LaplaceApproximation

#: The Laplace posteriors a draw may carry: a diagonal one drops the correlations between the
#: weights that the data determine together, and with them the posterior's narrowness along them.
LOCAL_STRUCTURES = ("full", "kron")


class LocalPosteriorMixin:
    """For the regressors whose draws are trained from the MAP network that learned the prior and
    the noise (the deep ensemble's and RMS's members, SWAG's snapshots), or are masks of the network
    that learned them (MC dropout's at learned rates): at each prediction row their outputs spread
    at least as far as that network's Laplace posterior says.

    Members and snapshots found by optimisation spread where the optimisation takes them. Under the
    learned prior a deep ensemble's members reach one function. SWAG's snapshots move in the
    directions that the data determine: SGD's noise comes from the data's terms of the loss, and
    the directions that only the prior holds, where the Laplace posterior is as wide as the prior,
    get none. RMS's anchored members spread there through the nonlinear network, by less than the
    linearised posterior at rows away from the data. MC dropout's learned rates fall to 1e-4-1e-2
    on tables of a few hundred rows, and its masks then spread by almost nothing. Where the rows
    are few a feature, those directions hold most of the posterior's spread at a new row, and
    there the draws alone were overconfident (docs: comparison, "A wide table" and "A very small table").

    So each draw stands for a local posterior of its own (Eschenhagen, Daxberger, Hennig &
    Kristiadi 2021, "Mixtures of Laplace approximations for improved post-hoc uncertainty in deep
    learning"), taken as the MAP's (one curvature, none per draw): a Gaussian about the draw's
    outputs of the Laplace posterior's output variance at the row less the draws' own spread there
    (none where they spread more). The mixture's epistemic variance is then the larger of the two,
    not their sum, which would count twice the part of the posterior that the draws' spread holds
    already. For a linear model it is the exact posterior predictive wherever the draws collapse to
    the mode. The posterior is the full GGN's where a Laplace fit would choose it
    (``hessian_structure='auto'``), else its Kronecker factors (Ritter, Botev & Barber 2018, "A
    scalable Laplace approximation for neural networks"): on 100 rows of 200 columns, a network of
    10,151 weights, the draws without it were far over-confident (docs: ensembles). Past the
    Kronecker factors too there is none, and :meth:`_local_variance_at` is the family's.

    Under the heteroscedastic likelihood the posterior covers both heads, and the noise's spread
    enters ``E[sigma(x)**2]`` as in a Laplace fit. The noise heads, fitted to the residuals plus
    the means' posterior variance ``v_n``, do not carry it: ``v_n`` corrects the noise for the fit
    the residuals lost to the means (MacKay's ``N - gamma``), as the evidence's noise does under the
    Gaussian likelihood, and the predictive still needs the means' spread beside it. Without it MC
    dropout's learned rates left its heteroscedastic intervals short (docs: heteroscedastic,
    "The draws carry the MAP's posterior").
    """

    def _fit(self, X, Y):
        self._local_posterior = None  # set by _fit_map, which a fit under a fixed prior and noise skips
        super()._fit(X, Y)

    def _fit_map(self, X, Y, *args, **kwargs):
        """The family's MAP training, keeping the Laplace posterior about the MAP network under the
        prior and the noise it learned: the full GGN, or its Kronecker factors where the full
        structure is past the machine (the choice of ``LaplaceRegressor(hessian_structure='auto')``)."""
        theta, likelihood, prior, targets = super()._fit_map(X, Y, *args, **kwargs)
        if not self._carries_local_posterior():
            return theta, likelihood, prior, targets
        structure, _ = choose_model_structure(self._model, theta)
        if structure in LOCAL_STRUCTURES:
            precision = torch.as_tensor(prior.precision, dtype=theta.dtype, device=theta.device).expand_as(theta)
            try:
                laplace = LaplaceApproximation(self._model, theta, self._tensor(X), self._tensor(Y),
                                               likelihood.frozen(Y.shape[1]), structure=structure,
                                               prior_shape=precision)
            except KroneckerUnsupportedError:
                return theta, likelihood, prior, targets
            self._local_posterior = laplace.posterior(1.0)
        return theta, likelihood, prior, targets

    def _carries_local_posterior(self):
        """Whether this fit's draws carry the MAP network's posterior: under either likelihood,
        unless the family's posterior is the user's own (MC dropout at a fixed rate)."""
        return True

    def _local_variance_at(self, X):
        """The variance ``(N, O)`` each draw's Gaussian adds at the rows ``X``: the MAP network's
        Laplace posterior's output variance there beyond the draws' own spread (the class
        docstring); without that posterior, the family's."""
        if self._local_posterior is None:
            return super()._local_variance_at(X)
        laplace = linear_pushforward(self._model, self._local_posterior, X).variance
        excess = (laplace - self._draws_variance(X)).clamp(min=0)
        # Past the floating-point range both may be inf, and inf - inf is NaN: the variance is inf.
        return torch.where(torch.isposinf(laplace), laplace, excess)
