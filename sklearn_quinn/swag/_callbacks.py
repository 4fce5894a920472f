"""The skorch side of SWAG: a callback that feeds the SGD trajectory to the moments."""

from skorch.callbacks import Callback

from . import _engine as moments


class CollectSnapshots(Callback):
    """Feed the flat weights to the SWAG moments every ``every`` epochs.

    Parameters
    ----------
    flatten : callable ``() -> tensor of shape (K,)``
        The trained module's current flat weights.
    every : int
        Epochs between snapshots.
    max_rank : int
        Last snapshots the moments keep for the low-rank term.

    Attributes
    ----------
    state_ : SWAGState or None
        The moments of the snapshots collected since training began; None
        before the first.
    """

    def __init__(self, flatten, every, max_rank):
        self.flatten = flatten
        self.every = every
        self.max_rank = max_rank

    def on_train_begin(self, net, **kwargs):
        self.state_ = None

    def on_epoch_end(self, net, **kwargs):
        if len(net.history) % self.every == 0:
            theta = self.flatten()
            if self.state_ is None:
                self.state_ = moments.init(theta)
            else:
                self.state_ = moments.update(self.state_, theta, self.max_rank)
