"""Bayes by backprop: a factored Gaussian q(theta) and its minibatch ELBO, pure torch.

``q(theta) = N(mean, diag(softplus(rho)**2))``; each step draws ``S`` weight
vectors by reparameterisation, evaluates them as one ``(S, K)`` batch, and
minimises, per training point,

    kl_weight_i * KL(q || p) / N  -  mean over the S draws and the batch of log p(y | f(theta, x), noise)

whose mean over the ``M`` minibatches of an epoch is the negative ELBO divided
by ``N`` when the KL weights of an epoch sum to ``M``: 'uniform' gives every
batch weight 1 (Graves 2011, "Practical variational inference for neural
networks"), 'blundell' gives batch ``i`` (1-based) weight
``M 2^(M-i) / (2^M - 1)``, most of the KL on the first batches (Blundell et
al. 2015, "Weight uncertainty in neural networks", their minibatch
re-weighting). The KL is
closed-form for a Gaussian prior and the Monte Carlo ``log q - log p`` over
the same draws for a scale mixture.

The Gaussian prior is fixed, or learned from the data (empirical Bayes,
:class:`EmpiricalBayesPrior`): ``N(0, s_g**2)`` on each group ``g`` of
weights (the evidence's groups: a parameter tensor of the backbone, or an
input column of a matrix that reads the inputs), whose variance maximising
the ELBO for the current ``q`` is ``s_g**2 = mean over g of (mean**2 + std**2)``.

The skorch criterion and callback that train ``q`` with these pieces live in
:mod:`sklearn_quinn.variational._skorch`.
"""

import math

import torch
from torch import nn
from torch.nn.functional import softplus

from .._core.priors import GaussianPrior

#: Floor of a learned prior variance (network units, where the standardised
#: target has std 1). A group of weights that the data do not need collapses
#: onto its prior (``q -> prior``, ``s_g -> 0``, automatic relevance
#: determination); the floor stops its variance at a prior std of 1e-6 instead
#: of following ``q``'s stds toward underflow (0 / 0 in the KL), well below any
#: weight that matters to a network of standardised inputs and target.
MIN_PRIOR_VARIANCE = 1e-12


def inverse_softplus(std):
    """``rho`` with ``softplus(rho) == std``."""
    return std + torch.log(-torch.expm1(-std))


class MeanFieldNetwork(nn.Module):
    """The variational parameters ``mean`` and ``rho`` of ``q``, and its reparameterised draws.

    Parameters
    ----------
    model : FunctionalModel
        The backbone as ``f(Theta, X) -> (S, N, O)``.
    mean, std : tensor of shape (K,)
        Starting mean and standard deviation of ``q``.
    n_mc_samples : int
        Draws ``S`` per forward pass.
    """

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
        """The outputs ``(S, N, O)`` of ``S`` reparameterised weight draws, and the draws ``(S, K)``."""
        eps = torch.randn(self.n_mc_samples, self.mean.shape[0], dtype=self.mean.dtype, device=self.mean.device)
        theta = self.mean + self.std * eps
        return self.model(theta, X), theta


class EmpiricalBayesPrior:
    """``N(0, s_g**2)`` on each group ``g`` of weights, with ``s_g**2`` the
    variance that maximises the ELBO for the current ``q`` (empirical Bayes).

    For ``q = N(mean, diag(std**2))`` the ELBO depends on ``s_g`` only through
    ``KL(q || prior)``, whose derivative in ``s_g**2`` vanishes at
    ``s_g**2 = mean over g of (mean**2 + std**2)``. The prior is a function of
    ``q``: substituted into the KL, it leaves the ELBO maximised over the
    prior, a function of ``q`` alone, which training maximises. Wu et al.
    (2019, "Deterministic variational inference for robust Bayesian neural
    networks", section 4) substitute the same optimum, there under an
    inverse-gamma hyperprior on ``s_g**2``; here the groups that are not input
    columns have no hyperprior (the input columns' is below), and a floor
    (:data:`MIN_PRIOR_VARIANCE`) keeps the variance positive.

    Substitution rather than alternation (EM steps on the prior between
    stretches of training ``q``): the KL is stationary in ``s_g`` at the
    optimum, so the gradient in ``q`` of the substituted KL is that of the KL
    at the prior held at its optimum for the current ``q``; substitution is an
    EM step on the prior before every gradient step. It has no schedule to
    choose, and the loss is at every step the bound that the prior maximises;
    an alternation with an EM step every epoch (or every 10 or 50) reaches the
    same fixed point, having only lagged behind ``q`` on the way.

    A group per input column of the matrices that read the inputs
    (:class:`~sklearn_quinn._core.evidence.ParameterGroups`, as the Laplace
    evidence has them) is automatic relevance determination: with one
    variance for a whole matrix, the few columns the targets depend on pay a
    KL of about ``mean**2 / (2 s_g**2)`` each against a variance that the
    many irrelevant columns hold small, and on few rows the ELBO prefers to
    prune the matrix; a column's own variance follows its weights. Mean-field
    variational networks under-fit on small data by this pruning (Trippe and
    Turner 2018, "Overpruning in variational Bayesian neural networks").

    Where the columns are many for the rows, the variances of columns that
    correlate with the noise by chance follow the weights that fit it, as
    type-II maximum likelihood over many relevance hyperparameters does in
    the evidence; the columns' Gamma hyperprior about their layer's mean
    (:class:`~sklearn_quinn._core.evidence.ColumnHyperprior`, Neal 1996) holds
    them together where the data say little. For a fixed ``q`` the ELBO times
    the hyperprior is then largest at the evidence's fixed point with every
    one of a group's ``K_g`` weights counted (``gamma_g = K_g``: the KL's
    stationary point in ``1 / s_g**2`` is the evidence's with all weights
    well determined) and ``K_g`` times the mean second moment as its squared
    norm. The optimum is computed without a gradient: the ELBO is stationary
    in the prior there, so ``q``'s gradient is that of the KL at the prior
    held at its optimum, as the substituted closed form gives without the
    hyperprior.

    Parameters
    ----------
    index : tensor of shape (K,)
        The group of each weight of the flat ``theta``, ``0 .. G - 1``
        (``ParameterGroups.index``).
    min_variance : float, default=MIN_PRIOR_VARIANCE
    hyperprior : ColumnHyperprior, default=None
        The input columns' hyperprior, of the groups of ``index``; None: none.
    """

    def __init__(self, index, min_variance=MIN_PRIOR_VARIANCE, hyperprior=None):
        self.group_index = torch.as_tensor(index)
        self.sizes = torch.bincount(self.group_index)
        self.min_variance = min_variance
        self.hyperprior = hyperprior

    def second_moments(self, mean, std):
        """``mean over each group of (mean**2 + std**2)``, shape ``(G,)``."""
        values = mean.square() + std.square()
        totals = values.new_zeros(len(self.sizes)).index_add(0, self.group_index.to(values.device), values)
        return totals / self.sizes.to(totals)

    def variances(self, mean, std):
        """The ELBO-optimal prior variance of each group for ``q`` (times the hyperprior, where
        there is one), shape ``(G,)``."""
        return self._optimal_variances(self.second_moments(mean, std))

    def _optimal_variances(self, second_moments):
        if self.hyperprior is None:
            return second_moments.clamp(min=self.min_variance)
        sizes = self.sizes.to(second_moments)
        bounds = (self.min_variance, 1 / self.min_variance)
        with torch.no_grad():
            return 1 / self.hyperprior.fixed_point(sizes, sizes * second_moments, bounds)

    def kl_divergence(self, mean, std):
        """``KL(q || prior)``: the sum of :meth:`group_kl_divergences`."""
        return self.group_kl_divergences(mean, std).sum()

    def group_kl_divergences(self, mean, std):
        """``KL(q || prior)`` of each group, shape ``(G,)``: ``0.5 K_g (m_g / v_g - 1 + log v_g)
        - sum over g of log std`` for ``K_g`` weights of second moment ``m_g`` under a prior
        variance ``v_g``. Above the floor ``v_g = m_g``, which leaves ``0.5 K_g log m_g -
        sum over g of log std``, a function of ``q`` alone; zero for a group whose ``q`` is
        its prior (pruned). With the hyperprior ``v_g`` is its optimum, held without a gradient."""
        second_moments = self.second_moments(mean, std)
        variances = self._optimal_variances(second_moments)
        log_std = std.log()
        log_std_totals = log_std.new_zeros(len(self.sizes)).index_add(0, self.group_index.to(log_std.device), log_std)
        sizes = self.sizes.to(variances)
        return 0.5 * sizes * (second_moments / variances - 1 + variances.log()) - log_std_totals


def kl_divergence(mean, std, theta, prior):
    """``KL(q || prior)`` for ``q = N(mean, diag(std**2))``.

    Parameters
    ----------
    mean, std : tensor of shape (K,)
    theta : tensor of shape (S, K) or None
        Draws from ``q``, used only when ``prior`` is not a single Gaussian.
    prior : ScaleMixturePrior, GaussianPrior or EmpiricalBayesPrior

    Returns
    -------
    tensor of shape ()
        The closed form for a Gaussian prior (``prior.gaussian_std`` set, a
        ``GaussianPrior`` of a std per weight, or the learned prior), else the
        Monte Carlo mean of ``log q - log p`` over ``theta``.
    """
    if isinstance(prior, EmpiricalBayesPrior):
        return prior.kl_divergence(mean, std)
    prior_std = prior.std if isinstance(prior, GaussianPrior) else prior.gaussian_std
    if prior_std is not None:
        ratio = (std / prior_std).square()
        return 0.5 * (ratio + (mean / prior_std).square() - 1 - ratio.log()).sum()
    z = (theta - mean) / std
    log_q = (-0.5 * z.square() - std.log() - 0.5 * math.log(2 * math.pi)).sum(-1)
    return (log_q - prior.log_prob(theta)).mean()


def negative_elbo(outputs, y, theta, mean, std, *, likelihood, prior, n_train, kl_weight=1.0):
    """The minibatch negative ELBO per training point (see the module docstring).

    Parameters
    ----------
    outputs : tensor of shape (S, B, O)
        The network's outputs at the draws ``theta`` for a batch of ``B`` rows.
    y : tensor
        The batch's targets.
    theta : tensor of shape (S, K)
        The draws from ``q``.
    mean, std : tensor of shape (K,)
        ``q``'s parameters.
    likelihood : GaussianLikelihood or CategoricalLikelihood
    prior : ScaleMixturePrior, GaussianPrior or EmpiricalBayesPrior
    n_train : int
        Training rows ``N``.
    kl_weight : float, default=1.0
        This batch's weight of the KL term (:func:`kl_weight`).

    Returns
    -------
    tensor of shape ()
    """
    log_likelihood = likelihood.log_prob(outputs, y).mean()
    return kl_weight * kl_divergence(mean, std, theta, prior) / n_train - log_likelihood


def kl_weight(scheme, index, n_batches):
    """Weight of the KL term for batch ``index`` (1-based) of ``n_batches``;
    the weights of an epoch sum to ``n_batches``.

    Parameters
    ----------
    scheme : {'uniform', 'blundell'}
    index, n_batches : int

    Returns
    -------
    float
    """
    if scheme == "uniform":
        return 1.0
    # M 2^(M-i) / (2^M - 1), written without overflow for large M.
    return n_batches * 2.0 ** (-index) / -math.expm1(-n_batches * math.log(2))
