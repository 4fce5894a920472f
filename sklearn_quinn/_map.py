"""Training through skorch: the generic loop, and the MAP of a backbone.

The loss is the negative log posterior per training point,
``-log p(y_b | f, noise) averaged over the batch + ||theta||^2 / (2 prior_std^2 N)``,
whose minimiser over full-batch or unbiased minibatches is the MAP. When the
observation noise is estimated, its log is one more parameter of the loss.
No validation split is held out.
"""

import numpy as np
import torch
from skorch import NeuralNet
from skorch.callbacks import Callback, LRScheduler
from skorch.utils import to_tensor
from torch import nn

from ._core.distributions import gaussian_log_likelihood


class GaussianNegativeLogPosterior(nn.Module):
    """Negative log posterior per point for a Gaussian likelihood and prior.

    Parameters
    ----------
    n_train : int
        Number of training points, to scale the prior term per point.
    prior_precision : float
        ``1 / prior_std**2``.
    noise_std : tensor of shape (O,)
        Fixed noise per output, or the starting value when ``learn_noise``.
    learn_noise : bool
        Whether the (log) noise, one value shared by all outputs, is trained.
    """

    def __init__(self, n_train, prior_precision, noise_std, learn_noise):
        super().__init__()
        self.n_train = n_train
        self.prior_precision = prior_precision
        log_noise = torch.log(noise_std)
        if learn_noise:
            self.log_noise_std = nn.Parameter(log_noise.mean().reshape(1))
        else:
            self.register_buffer("log_noise_std", log_noise)

    @property
    def noise_std(self):
        return self.log_noise_std.detach().exp()

    def forward(self, y_pred, y_true, module):
        y_pred = y_pred.reshape(y_true.shape)
        log_likelihood = gaussian_log_likelihood(y_pred, y_true, self.log_noise_std.exp())
        penalty = sum(p.square().sum() for p in module.parameters())
        return -log_likelihood.mean() + 0.5 * self.prior_precision * penalty / self.n_train


class PosteriorNet(NeuralNet):
    """A skorch net whose loss sees the module (for prior and variational terms):
    the criterion is called as ``criterion(y_pred, y_true, module)``."""

    def get_loss(self, y_pred, y_true, X=None, training=False):
        y_true = to_tensor(y_true, device=self.device)
        return self.criterion_(y_pred, y_true, self.module_)


class TensorBatches:
    """Minibatches of in-memory tensors by bulk indexing, for skorch's ``iterator_train``.

    Indexing whole batches avoids the per-row ``__getitem__`` and collate of a
    ``DataLoader``, which dominate an epoch of a small tabular network.
    """

    def __init__(self, dataset, batch_size, shuffle=False, generator=None):
        self.X = torch.as_tensor(dataset.X)
        self.y = torch.as_tensor(dataset.y)
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.generator = generator

    def __len__(self):
        return -(-len(self.X) // self.batch_size)

    def __iter__(self):
        n_rows = len(self.X)
        if self.shuffle:
            order = torch.randperm(n_rows, generator=self.generator)
        else:
            order = torch.arange(n_rows)
        for start in range(0, n_rows, self.batch_size):
            rows = order[start : start + self.batch_size]
            yield self.X[rows], self.y[rows]


class EpochProgress(Callback):
    """A tqdm bar over epochs showing the training loss (``verbose=1``)."""

    def __init__(self, desc="MAP"):
        self.desc = desc

    def on_train_begin(self, net, **kwargs):
        from tqdm.auto import tqdm

        self.bar_ = tqdm(total=net.max_epochs, desc=self.desc, unit="epoch", leave=False)

    def on_epoch_end(self, net, **kwargs):
        self.bar_.update(1)
        self.bar_.set_postfix(loss=f"{net.history[-1, 'train_loss']:.4g}")

    def on_train_end(self, net, **kwargs):
        self.bar_.close()


def train_net(module, criterion, X, Y, *, lr, lr_schedule, max_epochs, optimizer, callbacks,
              device, verbose, iterator=TensorBatches, desc="MAP", **iterator_params):
    """Minimise ``criterion(module(X_batch), Y_batch, module)`` through skorch.

    Parameters
    ----------
    module, criterion : torch.nn.Module
        Trained in place (the criterion may own parameters, e.g. a log noise).
    X, Y : array-like
        Training data, no validation split.
    lr_schedule : {'cosine', 'constant'}
        'cosine' anneals the learning rate from ``lr`` to 0 over the epochs, so
        the last epochs settle into a mode.
    iterator : type, default=TensorBatches
        skorch's ``iterator_train``; ``iterator_params`` (``batch_size``
        among them) are passed to it.
    desc : str
        Label of the progress bar (``verbose=1``).

    Returns
    -------
    net : PosteriorNet
        The fitted skorch net (``net.module_`` is ``module``).
    """
    progress = [("progress", EpochProgress(desc))] if verbose else []
    schedule = []
    if lr_schedule == "cosine":
        annealing = LRScheduler(policy=torch.optim.lr_scheduler.CosineAnnealingLR, T_max=max_epochs)
        schedule = [("lr_schedule", annealing)]
    net = PosteriorNet(
        module=module,
        criterion=criterion,
        optimizer=optimizer,
        lr=lr,
        max_epochs=max_epochs,
        train_split=None,
        iterator_train=iterator,
        **{f"iterator_train__{name}": value for name, value in iterator_params.items() if name != "batch_size"},
        batch_size=iterator_params.get("batch_size", 128),
        callbacks=list(callbacks or []) + schedule + progress,
        callbacks__print_log=None,
        device=device,
        verbose=0,
    )
    return net.fit(X, Y)


def fit_map(module, X, Y, *, prior_std, noise_std, lr, lr_schedule, max_epochs, batch_size,
            optimizer, callbacks, device, seed, verbose):
    """Train ``module`` to the MAP of a Gaussian likelihood and Gaussian prior.

    Parameters
    ----------
    module : torch.nn.Module
        Already on ``device`` in the working dtype; trained in place.
    X, Y : ndarray of shape (N, D) and (N, O), in the working dtype.
    noise_std : ndarray of shape (O,) or None
        Fixed noise per output; None estimates one shared noise level.
    seed : int
        Seeds the minibatch shuffling; the caller's global torch state is
        left untouched.
    lr, lr_schedule, max_epochs, optimizer, callbacks, device, verbose
        As for :func:`train_net`.

    Returns
    -------
    net : PosteriorNet
        The fitted skorch net (``net.module_`` is ``module``).
    noise_std : ndarray of shape (O,)
        The fixed or estimated noise.
    """
    n_train = X.shape[0]
    learn_noise = noise_std is None
    start = np.full(Y.shape[1], max(float(Y.std()), 1e-3)) if learn_noise else noise_std
    criterion = GaussianNegativeLogPosterior(
        n_train, prior_std**-2, torch.as_tensor(start, dtype=module_dtype(module)), learn_noise
    )
    net = train_net(
        module, criterion, X, Y, lr=lr, lr_schedule=lr_schedule, max_epochs=max_epochs,
        optimizer=optimizer, callbacks=callbacks, device=device, verbose=verbose,
        batch_size=min(batch_size, n_train), shuffle=True, generator=torch.Generator().manual_seed(seed),
    )
    return net, net.criterion_.noise_std.expand(Y.shape[1]).cpu().numpy()


def module_dtype(module):
    return next(module.parameters()).dtype
