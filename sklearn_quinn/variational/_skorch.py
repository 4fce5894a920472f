"""The skorch side of Bayes by backprop: the criterion skorch calls, and callbacks that set its KL weight and prior."""

from skorch.callbacks import Callback
from torch import nn

from ._engine import kl_weight, negative_elbo


class NegativeELBO(nn.Module):
    """:func:`~sklearn_quinn.variational._engine.negative_elbo` as the criterion
    of a :class:`~sklearn_quinn._map.PosteriorNet`, called as
    ``criterion((outputs, theta), y, module)`` with ``module`` the
    :class:`~sklearn_quinn.variational._engine.MeanFieldNetwork`.

    Parameters
    ----------
    n_train : int
    prior : ScaleMixturePrior, GaussianPrior or EmpiricalBayesPrior
    likelihood : GaussianLikelihood or CategoricalLikelihood
        A submodule, so that skorch trains its parameters (a Gaussian noise
        is then a point estimate, trained with the ELBO). A heteroscedastic
        likelihood's warm-up weights keep their total
        (``beta_keeps_total``): here the likelihood is weighed against the KL.

    Attributes
    ----------
    kl_weight : float
        The current batch's KL weight: 1, or set by :class:`KLWeighting`.
    """

    def __init__(self, n_train, prior, likelihood):
        super().__init__()
        self.n_train = n_train
        self.prior = prior
        self.likelihood = likelihood
        if hasattr(likelihood, "beta_keeps_total"):
            likelihood.beta_keeps_total = True
        self.kl_weight = 1.0

    def forward(self, y_pred, y_true, module):
        outputs, theta = y_pred
        return negative_elbo(outputs, y_true, theta, module.mean, module.std, likelihood=self.likelihood,
                             prior=self.prior, n_train=self.n_train, kl_weight=self.kl_weight)


class KLWeighting(Callback):
    """Set the criterion's ``kl_weight`` before each training batch of an epoch.

    Parameters
    ----------
    scheme : {'uniform', 'blundell'}
        See :func:`~sklearn_quinn.variational._engine.kl_weight`.
    n_batches : int
        Training batches per epoch.
    """

    def __init__(self, scheme, n_batches):
        self.scheme = scheme
        self.n_batches = n_batches

    def on_epoch_begin(self, net, **kwargs):
        self.index_ = 0

    def on_batch_begin(self, net, batch=None, training=False, **kwargs):
        if training:
            self.index_ += 1
            net.criterion_.kl_weight = kl_weight(self.scheme, self.index_, self.n_batches)


class PriorWarmup(Callback):
    """Train with ``warmup_prior`` for the first ``n_epochs`` epochs, then with ``prior``.

    An :class:`~sklearn_quinn.variational._engine.EmpiricalBayesPrior` learned
    from the first step fits the prior to ``q`` at its random initialisation,
    whose narrow variances pull the means toward zero, which narrows the prior
    further: every group collapses onto its prior and the network predicts a
    constant, a local optimum of the ELBO from which the data do not pull it
    out. Fitting the data under a fixed broad prior first starts the learned
    prior where the weights already carry the data. Immer et al. (2021,
    "Scalable marginal likelihood estimation for model selection in deep
    learning") likewise leave their prior at its starting value for a number
    of burn-in epochs before they learn it.

    Parameters
    ----------
    prior : EmpiricalBayesPrior
    warmup_prior : ScaleMixturePrior
    n_epochs : int
        Epochs trained with ``warmup_prior``.
    """

    def __init__(self, prior, warmup_prior, n_epochs):
        self.prior = prior
        self.warmup_prior = warmup_prior
        self.n_epochs = n_epochs

    def on_epoch_begin(self, net, **kwargs):
        # skorch has already opened this epoch's row of the history.
        net.criterion_.prior = self.warmup_prior if len(net.history) <= self.n_epochs else self.prior
