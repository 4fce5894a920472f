"""Bayes by backprop: a factored Gaussian q(theta) trained on the minibatch ELBO.

``q(theta) = N(mean, diag(softplus(rho)**2))``; each step draws ``S`` weight
vectors by reparameterisation, evaluates them as one ``(S, K)`` batch, and
minimises, per training point,

    kl_weight_i * KL(q || p) / N  -  mean over the S draws and the batch of log p(y | f(theta, x), noise)

whose sum over the ``M`` minibatches of an epoch is the negative ELBO divided
by ``N`` when the KL weights of an epoch sum to ``M``: 'uniform' gives every
batch weight 1 (Graves), 'blundell' gives batch ``i`` (1-based) weight
``M 2^(M-i) / (2^M - 1)``, most of the KL on the first batches. The KL is
closed-form for a Gaussian prior and the Monte Carlo ``log q - log p`` over
the same draws for a scale mixture.
"""

import math

import torch
from skorch.callbacks import Callback
from torch import nn
from torch.nn.functional import softplus


def inverse_softplus(std):
    return std + torch.log(-torch.expm1(-std))


class MeanFieldNetwork(nn.Module):
    """The variational parameters; ``forward(X)`` returns the outputs of
    ``n_mc_samples`` reparameterised weight draws ``(S, N, O)`` and the draws ``(S, K)``."""

    def __init__(self, model, mean, std, n_mc_samples):
        super().__init__()
        self.model = model
        self.mean = nn.Parameter(mean)
        self.rho = nn.Parameter(inverse_softplus(std))
        self.n_mc_samples = n_mc_samples

    @property
    def std(self):
        return softplus(self.rho)

    def forward(self, X):
        eps = torch.randn(self.n_mc_samples, self.mean.shape[0], dtype=self.mean.dtype, device=self.mean.device)
        theta = self.mean + self.std * eps
        return self.model(theta, X), theta

    def kl_divergence(self, theta, prior):
        """``KL(q || prior)``: closed form for a Gaussian prior, else the Monte
        Carlo mean of ``log q - log p`` over the draws ``theta (S, K)``."""
        std = self.std
        prior_std = prior.gaussian_std
        if prior_std is not None:
            ratio = (std / prior_std).square()
            return 0.5 * (ratio + (self.mean / prior_std).square() - 1 - ratio.log()).sum()
        z = (theta - self.mean) / std
        log_q = (-0.5 * z.square() - std.log() - 0.5 * math.log(2 * math.pi)).sum(-1)
        return (log_q - prior.log_prob(theta)).mean()


class NegativeELBO(nn.Module):
    """The minibatch negative ELBO per training point (see the module docstring).

    Parameters
    ----------
    n_train : int
    prior : ScaleMixturePrior
    likelihood : GaussianLikelihood or CategoricalLikelihood
        A trained Gaussian noise is a point estimate, trained with the ELBO.
    """

    def __init__(self, n_train, prior, likelihood):
        super().__init__()
        self.n_train = n_train
        self.prior = prior
        self.likelihood = likelihood
        self.kl_weight = 1.0

    def forward(self, y_pred, y_true, module):
        outputs, theta = y_pred
        log_likelihood = self.likelihood.log_prob(outputs, y_true).mean()
        return self.kl_weight * module.kl_divergence(theta, self.prior) / self.n_train - log_likelihood


class KLWeighting(Callback):
    """Set the criterion's ``kl_weight`` before each training batch of an epoch."""

    def __init__(self, scheme, n_batches):
        self.scheme = scheme
        self.n_batches = n_batches

    def on_epoch_begin(self, net, **kwargs):
        self.index_ = 0

    def on_batch_begin(self, net, batch=None, training=False, **kwargs):
        if training:
            self.index_ += 1
            net.criterion_.kl_weight = kl_weight(self.scheme, self.index_, self.n_batches)


def kl_weight(scheme, index, n_batches):
    """Weight of the KL term for batch ``index`` (1-based) of ``n_batches``;
    the weights of an epoch sum to ``n_batches``."""
    if scheme == "uniform":
        return 1.0
    # M 2^(M-i) / (2^M - 1), written without overflow for large M.
    return n_batches * 2.0 ** (-index) / -math.expm1(-n_batches * math.log(2))
