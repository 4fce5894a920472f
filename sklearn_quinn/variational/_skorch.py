"""The skorch side of Bayes by backprop: the criterion skorch calls, and the KL-weighting callback."""

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
    prior : ScaleMixturePrior
    likelihood : GaussianLikelihood or CategoricalLikelihood
        A submodule, so that skorch trains its parameters (a Gaussian noise
        is then a point estimate, trained with the ELBO).

    Attributes
    ----------
    kl_weight : float
        The current batch's KL weight, set by :class:`KLWeighting`.
    """

    def __init__(self, n_train, prior, likelihood):
        super().__init__()
        self.n_train = n_train
        self.prior = prior
        self.likelihood = likelihood
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
