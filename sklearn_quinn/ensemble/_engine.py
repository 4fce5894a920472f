"""Train J ensemble members together: the members are the rows of one (J, K) weight matrix.

One optimiser step updates every member. Member ``j`` sees only its own rows
``subsets[j]``, in its own shuffled order, and minimises

    mean over its batch of -log N(y_i + noise_j * eps_ij | f(w_j, x_i), noise_j^2)
        + (w_j - anchor_j)^T P (w_j - anchor_j) / (2 N)

which is, per point of its subset, the anchored negative log posterior of
randomized MAP sampling under the prior ``N(0, P^-1)`` (``P`` diagonal): the
prior term is ``|D_j| / N`` times the anchored penalty, divided by ``|D_j|``.
Anchors at zero and ``eps = 0`` give a deep ensemble with weight decay; random
anchors ``w0 ~ N(0, P^-1)``
give Pearce et al.'s anchored ensemble; adding the target perturbations
``eps ~ N(0, 1)`` makes each member an exact posterior draw for a linear model
(randomize-then-optimize).
"""

from typing import NamedTuple

import torch
from torch import nn

from .._map import FlatPosteriorLoss, batch_slices, polish, polishable, train_net


class MemberBatches:
    """Minibatches for stacked members, as skorch's ``iterator_train``.

    Yields ``X`` of shape ``(J, B, D)`` and targets ``(J, B, O', 2)`` (the
    target, then the member's standard-normal perturbation of it): member ``j``
    draws its rows from ``subsets[j]`` in an order from its own generator, so a
    member's training does not depend on which other members share its batch.
    With ``max_batches``, an epoch is its first ``max_batches`` batches, a
    random part of each subset drawn afresh every epoch (as for
    :class:`~sklearn_quinn._map.TensorBatches`).
    """

    def __init__(self, dataset, batch_size, subsets, perturbations, generators, max_batches=None):
        self.X = torch.as_tensor(dataset.X)
        self.y = torch.as_tensor(dataset.y)
        self.subsets = subsets
        self.perturbations = perturbations
        self.generators = generators
        self.batch_size = batch_size
        self.max_batches = max_batches

    def __len__(self):
        return len(batch_slices(self.subsets.shape[1], self.batch_size, self.max_batches))

    def __iter__(self):
        n_rows = self.subsets.shape[1]
        order = torch.stack(
            [subset[torch.randperm(n_rows, generator=g)] for subset, g in zip(self.subsets, self.generators)]
        )
        for batch in batch_slices(n_rows, self.batch_size, self.max_batches):
            rows = order[:, batch]
            yield self.X[rows], member_targets(self.y, self.perturbations, rows)


def member_targets(Y, perturbations, rows):
    """The targets of the members' rows ``(J, n)``: ``(J, n, O', 2)``, each row's target
    columns and then the member's perturbations of them (see :func:`padded_perturbations`)."""
    members = torch.arange(len(rows))[:, None]
    return torch.stack([Y[rows], perturbations[members, rows]], dim=-1)


def padded_perturbations(perturbations, n_members, Y):
    """The members' perturbations ``(J, N, O)`` of the targets (None: none) as ``(J, N, O')``,
    one beside every column of ``Y``: zero for the columns after the targets."""
    if perturbations is None:
        return torch.zeros(n_members, *Y.shape, dtype=torch.as_tensor(Y).dtype)
    return nn.functional.pad(perturbations, (0, Y.shape[-1] - perturbations.shape[-1]))


class StackedMembers(nn.Module):
    """The members' weights as one ``(J, K)`` parameter, forwarded as ``f(Theta, X)``."""

    def __init__(self, model, theta):
        super().__init__()
        self.model = model
        self.theta = nn.Parameter(theta)

    def forward(self, X):
        return self.model(self.theta, X)


class AnchoredNegativeLogPosterior(nn.Module):
    """Sum over members of each member's anchored negative log posterior per point.

    Parameters
    ----------
    n_train : int
        Number of training points ``N`` (of the whole data, not of a subset).
    prior_precision : float or tensor of shape (K,)
        The prior precision of every weight, or of each.
    anchors : tensor of shape (J, K)
    likelihood : GaussianLikelihood or CategoricalLikelihood
        Over outputs ``(J, B, O)``: a Gaussian noise of shape ``(J, 1, O)``
        gives each member its own (fixed or trained) noise.
    perturb : bool
        Perturb the targets by the members' noise draws (Gaussian only).

    Attributes
    ----------
    mean_misfit : tensor of shape (J,)
        Each member's negative log likelihood per point, averaged over the
        batches since :meth:`reset_misfit`: per member what skorch's
        ``train_loss`` is for the sum.
    """

    def __init__(self, n_train, prior_precision, anchors, likelihood, perturb):
        super().__init__()
        self.n_train = n_train
        self.prior_precision = prior_precision
        self.register_buffer("anchors", anchors)
        self.likelihood = likelihood
        self.perturb = perturb
        self.reset_misfit()

    def reset_misfit(self):
        """Start a new average of the members' misfits (:attr:`mean_misfit`)."""
        self._misfit_sum, self._misfit_batches = 0.0, 0

    @property
    def mean_misfit(self):
        return self._misfit_sum / self._misfit_batches

    def forward(self, y_pred, y_true, module):
        misfit = self.misfit(y_pred, y_true)
        self._misfit_sum, self._misfit_batches = self._misfit_sum + misfit.detach(), self._misfit_batches + 1
        penalty = ((module.theta - self.anchors).square() * self.prior_precision).sum(-1)
        return (misfit + 0.5 * penalty / self.n_train).sum()

    def misfit(self, y_pred, y_true):
        """Each member's negative log likelihood per point, ``(J,)``."""
        y, eps = y_true[..., 0], y_true[..., 1]
        return -self.likelihood.log_prob(y_pred, y, eps if self.perturb else None).mean(-1)

    def flat_loss(self, module, X, Y):
        """The loss of the :class:`StackedMembers` ``module`` on ``X, Y`` as a
        :class:`~sklearn_quinn._map.FlatPosteriorLoss` of its ``(J, K)`` weights, or None off
        :class:`~sklearn_quinn._core.network.FunctionalModel`'s fast path."""
        if not module.model.fast_path:
            return None
        theta = module.theta
        precision = torch.as_tensor(self.prior_precision, dtype=theta.dtype, device=theta.device)
        return FlatPosteriorLoss(module.model, theta, X, lambda outputs: self.misfit(outputs, Y).sum(),
                                 precision.expand(theta.shape[1]), self, anchors=self.anchors)


class Members(NamedTuple):
    """What one group of trained members gives back."""

    theta: torch.Tensor  # (J, K)
    likelihood: nn.Module  # trained with them
    net: object  # the skorch net that trained them


def train_members(model, theta, X, Y, *, subsets, anchors, perturbations, likelihood, prior_precision, seeds,
                  batch_size, max_batches=None, desc="ensemble", **train_params):
    """Train the rows of ``theta`` as ensemble members, all in one batched model.

    Parameters
    ----------
    model : FunctionalModel
    theta : tensor of shape (J, K)
        Initial weights, one row per member.
    X, Y : ndarray of shape (N, D) and (N, O)
        ``Y`` holds one column of class indices for a categorical likelihood,
        and under the heteroscedastic likelihood may carry the variances its
        noise head covers beside the residuals after the targets (the means'
        posterior variances and the targets' resolution, ``likelihood.training_targets``).
    subsets : tensor of shape (J, n)
        The row indices each member trains on.
    anchors : tensor of shape (J, K)
    perturbations : tensor of shape (J, N, O) or None
        Standard-normal perturbations of the targets (not of the columns after them).
    likelihood : GaussianLikelihood or CategoricalLikelihood
        See :class:`AnchoredNegativeLogPosterior`.
    prior_precision : float or tensor of shape (K,)
    seeds : sequence of int, one per member
        Seed each member's minibatch order.
    batch_size : int
        Rows per member per step.
    max_batches : int, default=None
        Steps an epoch at most (see :class:`MemberBatches`).
    desc : str, default='ensemble'
        Label of the progress bar.
    **train_params
        ``lr``, ``lr_schedule``, ``max_epochs``, ``optimizer``, ``callbacks``,
        ``device``, ``verbose``, ``warm_up`` of :func:`~sklearn_quinn._map.train_net`.

    Returns
    -------
    Members
    """
    criterion = AnchoredNegativeLogPosterior(len(X), prior_precision, anchors, likelihood, perturbations is not None)
    net = train_net(
        StackedMembers(model, theta),
        criterion,
        X,
        Y,
        iterator=MemberBatches,
        desc=desc,
        batch_size=min(batch_size, subsets.shape[1]),
        max_batches=max_batches,
        subsets=subsets,
        perturbations=padded_perturbations(perturbations, len(theta), Y),
        generators=[torch.Generator().manual_seed(int(seed)) for seed in seeds],
        **train_params,
    )
    return Members(net.module_.theta.detach(), net.criterion_.likelihood, net)


def finish_members(model, theta, X, Y, *, subsets, anchors, perturbations, likelihood, prior_precision):
    """The members ``theta`` ``(J, K)`` trained by :func:`train_members` (same arguments) ended
    at stationary points of their full-batch losses, where that is cheap for all of them
    together (:func:`~sklearn_quinn._map.polishable` of the stacked weights); else as they are.

    A deep ensemble's members and randomized MAP sampling's stand for modes, and the MAP's
    training ends at one (:func:`~sklearn_quinn._map.polish`). Adam's minibatch steps can stop
    short of them (a few hundred rows in two minibatches), and the ensemble's mean then fits its
    training rows worse than the MAP network whose noise it is given.
    One L-BFGS run over the sum of the members' losses, whose minimiser is each member's, once
    the groups that :func:`train_members` trained apart are joined, so that the result does not
    depend on the grouping.
    """
    module = StackedMembers(model, theta.clone())
    if not polishable(subsets.shape[1], module):
        return theta
    X, Y = torch.as_tensor(X), torch.as_tensor(Y)
    criterion = AnchoredNegativeLogPosterior(len(X), prior_precision, anchors, likelihood, perturbations is not None)
    perturbations = padded_perturbations(perturbations, len(theta), Y)
    polish(module, criterion, X[subsets], member_targets(Y, perturbations, subsets))
    return module.theta.detach()
