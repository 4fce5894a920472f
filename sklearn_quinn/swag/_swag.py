"""SWAGRegressor: a Gaussian from the moments of the SGD trajectory after the MAP."""

import copy
from numbers import Integral, Real

import torch
from sklearn.utils._param_validation import Interval, StrOptions

from .._core.likelihoods import GaussianLikelihood
from .._core.network import FunctionalModel
from .._map import fit_map
from ..base import BaseBayesianRegressor
from ._engine import CollectSnapshots, SWAGMoments


class SWAGRegressor(BaseBayesianRegressor):
    """Neural-network regressor with a SWAG posterior (stochastic weight averaging Gaussian).

    The network is first trained to the MAP (negative log posterior, through
    skorch); SGD then runs ``swag_epochs`` more epochs at the constant rate
    ``lr_swag`` with the noise fixed at its MAP estimate, and every
    ``collect_every`` epochs the weights update running first and second
    moments and join the last ``max_rank`` snapshots. The posterior is the
    Gaussian of the notes: a draw is

        mean + diag(sqrt(var)) z1 / sqrt(2) + D z2 / sqrt(2 (k - 1)),

    ``var`` the snapshots' variance, ``D`` the last ``k`` deviations from the
    mean (the second term only for ``cov_type='lowrank'``). Predictions average
    the network over ``n_samples`` draws. Cost: one MAP training plus
    ``swag_epochs`` epochs; memory ``O(K max_rank)``.

    Parameters
    ----------
    hidden_layer_sizes, activation, module, prior_std, noise_std, lr, lr_schedule, \\
max_epochs, batch_size, optimizer, callbacks, normalize_y, dtype, device, random_state, verbose
        As for :class:`~sklearn_quinn.LaplaceRegressor` (they set the MAP
        training; ``batch_size`` also sets the SGD phase's minibatches).
    cov_type : {'lowrank', 'diag'}, default='lowrank'
    max_rank : int, default=20
        Number ``k`` of last deviations kept for the low-rank term.
    swag_epochs : int, default=100
        Epochs of SGD after the MAP.
    collect_every : int, default=1
        Epochs between snapshots (at least two snapshots are needed).
    lr_swag : float, default=0.05
        Constant SGD learning rate of the collection phase, on the scale of
        half the mean squared error (the per-point negative log posterior
        times ``noise_std**2``, in the units of the standardised target), so
        that a value suits any noise level.
    n_samples : int, default=100
        Weight draws averaged by ``predict`` (the same draws at every call).

    Attributes
    ----------
    posterior_ : GaussianPosterior
        Mean, diagonal std and (low rank) factor of the SWAG Gaussian.
    n_snapshots_ : int
        Snapshots collected.
    noise_std_ : float or ndarray of shape (n_targets,)
        Observation noise std (the MAP's estimate or the fixed value), units of y.
    net_ : skorch.NeuralNet
        The MAP net (the SGD phase trains a copy).

    References
    ----------
    W. J. Maddox, T. Garipov, P. Izmailov, D. Vetrov and A. G. Wilson, "A simple
    baseline for Bayesian uncertainty in deep learning", NeurIPS 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_quinn import SWAGRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-2, 2, size=(60, 1))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.randn(60)
    >>> reg = SWAGRegressor(hidden_layer_sizes=(16,), max_epochs=100, swag_epochs=20,
    ...                     max_rank=5, random_state=0).fit(X, y)
    >>> reg.n_snapshots_, reg.posterior_.low_rank.shape
    (20, torch.Size([49, 5]))
    >>> mean, std = reg.predict(X[:3], return_std=True)
    >>> mean.shape, bool((std > 0).all())
    ((3,), True)
    """

    _parameter_constraints: dict = {
        **BaseBayesianRegressor._parameter_constraints,
        "cov_type": [StrOptions({"lowrank", "diag"})],
        "max_rank": [Interval(Integral, 2, None, closed="left")],
        "swag_epochs": [Interval(Integral, 1, None, closed="left")],
        "collect_every": [Interval(Integral, 1, None, closed="left")],
        "lr_swag": [Interval(Real, 0, None, closed="neither")],
        "n_samples": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        hidden_layer_sizes=(50,),
        activation="relu",
        *,
        module=None,
        prior_std=1.0,
        noise_std=None,
        cov_type="lowrank",
        max_rank=20,
        swag_epochs=100,
        collect_every=1,
        lr_swag=0.05,
        n_samples=100,
        lr=0.01,
        lr_schedule="cosine",
        max_epochs=1000,
        batch_size="auto",
        optimizer=torch.optim.Adam,
        callbacks=None,
        normalize_y=True,
        dtype="float64",
        device="cpu",
        random_state=None,
        verbose=0,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.module = module
        self.prior_std = prior_std
        self.noise_std = noise_std
        self.cov_type = cov_type
        self.max_rank = max_rank
        self.swag_epochs = swag_epochs
        self.collect_every = collect_every
        self.lr_swag = lr_swag
        self.n_samples = n_samples
        self.lr = lr
        self.lr_schedule = lr_schedule
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.optimizer = optimizer
        self.callbacks = callbacks
        self.normalize_y = normalize_y
        self.dtype = dtype
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def fit(self, X, y):
        """Train to the MAP, then collect the SGD trajectory's moments.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)

        Returns
        -------
        self : SWAGRegressor
        """
        X, Y = self._begin_fit(X, y)
        if self.swag_epochs // self.collect_every < 2:
            raise ValueError(
                f"swag_epochs={self.swag_epochs} with collect_every={self.collect_every} "
                "collects fewer than the 2 snapshots SWAG needs."
            )
        _, noise_std = self._fit_map(X, Y)
        module = copy.deepcopy(self.net_.module_)
        moments = SWAGMoments(self.max_rank)
        collect = CollectSnapshots(moments, FunctionalModel(module).flatten, self.collect_every)
        with self._seeded(self._split_seed):
            fit_map(
                module,
                X.astype(self.dtype),
                Y.astype(self.dtype),
                prior_std=self.prior_std,
                likelihood=GaussianLikelihood(noise_std),
                lr=self.lr_swag * float(noise_std.square().mean()),
                lr_schedule="constant",
                max_epochs=self.swag_epochs,
                batch_size=self._batch_size(len(X)),
                optimizer=torch.optim.SGD,
                callbacks=[("swag", collect)],
                device=self._device,
                seed=self._split_seed,
                verbose=self.verbose,
            )
        self.posterior_ = moments.posterior(self.cov_type)
        self.n_snapshots_ = moments.n_snapshots
        self._set_noise(noise_std)
        return self
