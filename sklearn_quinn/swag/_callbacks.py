"""The skorch side of SWAG: a callback that feeds the SGD trajectories to the moments."""

from skorch.callbacks import Callback

from . import _engine as moments


class CollectSnapshots(Callback):
    """Feed the stacked members' weights to the SWAG moments every ``every`` epochs.

    Parameters
    ----------
    every : int
        Epochs between snapshots.
    max_rank : int
        Last snapshots the moments keep for the low-rank term.

    Attributes
    ----------
    state_ : SWAGState or None
        The moments of the snapshots ``(J, K)`` of ``net.module_.theta``
        (:class:`~sklearn_quinn.ensemble._engine.StackedMembers`) collected
        since training began; None before the first.
    losses_ : list of tensor of shape (J,)
        Each member's training loss over each epoch (the criterion's
        ``mean_misfit``, :class:`~sklearn_quinn.ensemble._engine.AnchoredNegativeLogPosterior`).
    """

    def __init__(self, every, max_rank):
        self.every = every
        self.max_rank = max_rank

    def on_train_begin(self, net, **kwargs):
        self.state_ = None
        self.losses_ = []

    def on_epoch_begin(self, net, **kwargs):
        net.criterion_.reset_misfit()

    def on_epoch_end(self, net, **kwargs):
        self.losses_.append(net.criterion_.mean_misfit)
        if len(net.history) % self.every == 0:
            theta = net.module_.theta.detach()
            if self.state_ is None:
                self.state_ = moments.init(theta)
            else:
                self.state_ = moments.update(self.state_, theta, self.max_rank)
