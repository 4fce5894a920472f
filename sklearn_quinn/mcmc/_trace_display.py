"""TraceDisplay: every chain's draws of a few parameters, with their split R-hat.

matplotlib is imported when the Display draws, not before.
"""

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._pipelines import final_step
from .._plot_utils import pyplot
from ._diagnostics import split_rhat
from ._mcmc import MCMCMixin

_DEFAULT_TRACED_PARAMS = 4


class TraceDisplay:
    """MCMC trace plot: every chain's draws of a few parameters, with their split R-hat.

    One panel per parameter, one line per chain, titled with the parameter's
    index and its rank-normalised split R-hat
    (:func:`sklearn_quinn.mcmc.split_rhat`). Chains that have mixed overlap
    and give an R-hat near 1. Build it with :meth:`from_samples` or
    :meth:`from_estimator`.

    Parameters
    ----------
    chains : ndarray of shape (n_chains, n_draws, n_selected)
        Draws of the selected parameters.
    params : ndarray of shape (n_selected,)
        Index of each selected parameter among all sampled ones.
    rhat : ndarray of shape (n_selected,)
        Split R-hat of each selected parameter.

    Attributes
    ----------
    lines_ : ndarray of matplotlib Line2D, shape (n_selected, n_chains)
        The trace of each chain, per panel.
    axes_ : ndarray of matplotlib Axes, shape (n_selected,)
        One panel per selected parameter.
    figure_ : matplotlib Figure

    See Also
    --------
    sklearn_quinn.mcmc.split_rhat : The R-hat in the titles.

    References
    ----------
    A. Vehtari, A. Gelman, D. Simpson, B. Carpenter and P.-C. Bürkner,
    "Rank-normalization, folding, and localization: an improved R-hat for
    assessing convergence of MCMC", Bayesian Analysis 16(2), 2021.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from sklearn_quinn.plotting import TraceDisplay
    >>> samples = np.random.default_rng(0).normal(size=(2, 100, 6))
    >>> display = TraceDisplay.from_samples(samples)
    >>> display.params
    array([0, 1, 2, 3])
    >>> display.lines_.shape
    (4, 2)
    >>> plt.close(display.figure_)
    """

    def __init__(self, *, chains, params, rhat):
        self.chains = chains
        self.params = params
        self.rhat = rhat

    def plot(self, ax=None):
        """Draw one panel per selected parameter.

        Parameters
        ----------
        ax : array-like of matplotlib Axes, default=None
            One Axes per selected parameter; None makes a new figure with
            the panels stacked.

        Returns
        -------
        self : TraceDisplay
        """
        plt = pyplot(f"{type(self).__name__}.plot")
        n_chains, _, n_selected = self.chains.shape
        if ax is None:
            _, ax = plt.subplots(
                n_selected, 1, sharex=True, squeeze=False, layout="constrained",
                figsize=(6.4, 1.2 + 1.6 * n_selected),
            )
        axes = np.ravel(ax)
        if axes.size != n_selected:
            raise ValueError(
                f"ax must hold one Axes per selected parameter ({n_selected}); got {axes.size}."
            )
        self.lines_ = np.empty((n_selected, n_chains), dtype=object)
        for panel, (axis, param, rhat) in enumerate(zip(axes, self.params, self.rhat)):
            self.lines_[panel] = axis.plot(self.chains[:, :, panel].T, linewidth=0.7, alpha=0.8)
            axis.set_title(f"parameter {param}: split R-hat = {rhat:.3f}")
            axis.set_ylabel("value")
        axes[-1].set_xlabel("draw")
        self.axes_, self.figure_ = axes, axes[0].figure
        return self

    @classmethod
    def from_samples(cls, samples, params=None, *, ax=None):
        """Plot the traces of selected parameters.

        Parameters
        ----------
        samples : array-like of shape (n_chains, n_draws, n_params)
            Draws after burn-in; at least 4 per chain.
        params : int or array-like of int, default=None
            Indices of the parameters to show; None shows the first 4 (all if fewer).
        ax : array-like of matplotlib Axes, default=None
            One Axes per selected parameter.

        Returns
        -------
        display : TraceDisplay
        """
        pyplot(f"{cls.__name__}.from_samples")
        samples = np.asarray(samples, dtype=np.float64)
        if samples.ndim != 3:
            raise ValueError(
                "samples must have shape (n_chains, n_draws, n_params); "
                f"got an array of shape {samples.shape}."
            )
        n_params = samples.shape[2]
        if params is None:
            params = np.arange(min(_DEFAULT_TRACED_PARAMS, n_params))
        params = np.atleast_1d(np.asarray(params))
        if (
            params.ndim != 1
            or params.size == 0
            or not np.issubdtype(params.dtype, np.integer)
            or np.any((params < 0) | (params >= n_params))
        ):
            raise ValueError(
                f"params must be indices in [0, {n_params}) of the sampled parameters; "
                f"got {params.tolist()}."
            )
        chains = samples[:, :, params]
        return cls(chains=chains, params=params, rhat=split_rhat(chains)).plot(ax=ax)

    @classmethod
    def from_estimator(cls, estimator, params=None, *, ax=None):
        """Plot the traces kept by a fitted MCMC estimator.

        Parameters
        ----------
        estimator : MCMC estimator or Pipeline
            Fitted (or a pipeline ending in one), with the attribute ``chains_``: an ndarray of shape
            ``(n_chains, n_draws, n_params)`` holding the draws kept after
            burn-in and thinning, each draw the flat vector of the sampled
            parameters.
        params : int or array-like of int, default=None
            Indices of the parameters to show; None shows the first 4 (all if fewer).
        ax : array-like of matplotlib Axes, default=None
            One Axes per selected parameter.

        Returns
        -------
        display : TraceDisplay
        """
        pyplot(f"{cls.__name__}.from_estimator")
        estimator = final_step(estimator)
        if not hasattr(estimator, "chains_"):
            if isinstance(estimator, MCMCMixin):
                check_is_fitted(estimator)  # an MCMC estimator before its fit: NotFittedError
            raise ValueError(
                f"{type(estimator).__name__} has no chains_ attribute: "
                f"{cls.__name__}.from_estimator needs a fitted MCMC estimator, whose chains_ "
                "holds the draws as (n_chains, n_draws, n_params)."
            )
        return cls.from_samples(estimator.chains_, params, ax=ax)
