"""Plots of predictive uncertainty and of MCMC chains, as scikit-learn Display objects.

As with scikit-learn's ``PredictionErrorDisplay`` and ``CalibrationDisplay``,
a Display stores the data it shows; ``plot(ax=None)`` draws them, keeps the
matplotlib artists (``line_``, ...), the axes ``ax_`` and the figure
``figure_``, and returns the Display; the classmethods ``from_estimator`` and
``from_predictions`` (``from_samples`` for chains) compute the data, build the
Display and plot it.

matplotlib is needed to plot only, and imported then: ``pip install
matplotlib``, or ``pip install 'sklearn-quinn[plot]'``.
"""

import numpy as np
from sklearn.utils.validation import check_consistent_length

from .mcmc import split_rhat
from .metrics import coverage_curve, expected_calibration_error, reliability_bins

_BAND_STDS = 2
_DEFAULT_GRID_SIZE = 200
_DEFAULT_TRACED_PARAMS = 4


def _pyplot(caller):
    """``matplotlib.pyplot``, or an ImportError saying how to install it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError(
            f"{caller} requires matplotlib; install it with `pip install matplotlib` "
            "(or `pip install 'sklearn-quinn[plot]'`)."
        ) from error
    return plt


def _axes(caller, ax):
    """``ax``, or the axes of a new figure."""
    plt = _pyplot(caller)
    if ax is None:
        _, ax = plt.subplots()
    return ax


def _one_dimensional(name, values):
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional; got an array of shape {values.shape}.")
    return values


def _diagonal(ax):
    ax.plot([0, 1], [0, 1], linestyle=":", color="k", label="perfectly calibrated")
    ax.set(xlim=(0, 1), ylim=(0, 1), aspect="equal")


class PredictiveBandDisplay:
    """Predictive mean and ``mean ± 2 std`` band of a regressor over its one feature.

    Optionally with draws of ``y`` from the predictive and the data points.
    Build it with :meth:`from_estimator` or :meth:`from_predictions`.

    Parameters
    ----------
    x : ndarray of shape (n_points,)
        Sorted points where the predictive is drawn.
    y_pred : ndarray of shape (n_points,)
        Predictive mean at ``x``.
    y_std : ndarray of shape (n_points,)
        Total predictive standard deviation at ``x``.
    y_samples : ndarray of shape (n_points, n_draws), default=None
        Draws of ``y`` at ``x``, one per column.
    x_data, y_data : ndarray of shape (n_data,), default=None
        Data points, shown as a scatter.

    Attributes
    ----------
    line_ : matplotlib Line2D
        The predictive mean.
    band_ : matplotlib PolyCollection
        The band between ``y_pred - 2 y_std`` and ``y_pred + 2 y_std``.
    draw_lines_ : list of matplotlib Line2D
        One line per column of ``y_samples`` (empty without draws).
    scatter_ : matplotlib PathCollection or None
        The data points (None without data).
    ax_ : matplotlib Axes
    figure_ : matplotlib Figure

    See Also
    --------
    RegressionCalibrationDisplay : Coverage of the predictive intervals.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from sklearn_quinn.plotting import PredictiveBandDisplay
    >>> x = np.linspace(0, 1, 5)
    >>> display = PredictiveBandDisplay.from_predictions(x, 2 * x, np.full(5, 0.1))
    >>> display.line_.get_ydata()
    array([0. , 0.5, 1. , 1.5, 2. ])
    >>> plt.close(display.figure_)
    """

    def __init__(self, *, x, y_pred, y_std, y_samples=None, x_data=None, y_data=None):
        self.x = x
        self.y_pred = y_pred
        self.y_std = y_std
        self.y_samples = y_samples
        self.x_data = x_data
        self.y_data = y_data

    def plot(self, ax=None):
        """Draw the band, the mean, the draws and the data.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; None makes a new figure.

        Returns
        -------
        self : PredictiveBandDisplay
        """
        ax = _axes(f"{type(self).__name__}.plot", ax)
        self.band_ = ax.fill_between(
            self.x,
            self.y_pred - _BAND_STDS * self.y_std,
            self.y_pred + _BAND_STDS * self.y_std,
            color="C0",
            alpha=0.25,
            linewidth=0,
            label=f"mean ± {_BAND_STDS} std",
        )
        self.draw_lines_ = []
        if self.y_samples is not None:
            self.draw_lines_ = ax.plot(self.x, self.y_samples, color="C1", linewidth=0.8, alpha=0.6)
        if self.draw_lines_:
            self.draw_lines_[0].set_label("predictive draws")
        (self.line_,) = ax.plot(self.x, self.y_pred, color="C0", label="predictive mean")
        self.scatter_ = None
        if self.y_data is not None:
            self.scatter_ = ax.scatter(
                self.x_data, self.y_data, s=12, color="k", zorder=3, label="data"
            )
        ax.set(xlabel="x", ylabel="y")
        ax.legend()
        self.ax_, self.figure_ = ax, ax.figure
        return self

    @classmethod
    def from_estimator(cls, estimator, X, y=None, *, n_draws=0, random_state=0, grid=None, ax=None):
        """Plot a fitted regressor's predictive along its single feature.

        Parameters
        ----------
        estimator : regressor
            Fitted, with ``predict(X, return_std=True)`` and
            ``sample_y(X, n_samples, random_state)``, on one feature and one target.
        X : array-like of shape (n_samples, 1)
            Inputs: exactly one column. A DataFrame's column name is kept on the grid.
        y : array-like of shape (n_samples,), default=None
            Targets; when given, the points ``(X, y)`` are shown.
        n_draws : int, default=0
            Draws of ``y`` from ``sample_y`` to show.
        random_state : int, RandomState instance or None, default=0
            Seeds the draws.
        grid : array-like of shape (n_points,), default=None
            Points where the predictive is drawn (sorted here); None uses 200
            evenly spaced points from the smallest to the largest ``X``.
        ax : matplotlib Axes, default=None

        Returns
        -------
        display : PredictiveBandDisplay
        """
        _pyplot(f"{cls.__name__}.from_estimator")
        feature = np.asarray(X, dtype=np.float64)
        if feature.ndim != 2 or feature.shape[1] != 1:
            raise ValueError(
                f"{cls.__name__} plots against a single feature: X must have exactly one column; "
                f"got an array of shape {feature.shape}."
            )
        feature = feature[:, 0]
        if not (isinstance(n_draws, (int, np.integer)) and n_draws >= 0):
            raise ValueError(f"n_draws must be a non-negative integer; got {n_draws!r}.")
        if grid is None:
            grid = np.linspace(feature.min(), feature.max(), _DEFAULT_GRID_SIZE)
        grid = np.sort(_one_dimensional("grid", grid))
        # A DataFrame (pandas or polars) keeps its column name, so the estimator sees the
        # feature name it was fitted with.
        grid_X = type(X)({X.columns[0]: grid}) if hasattr(X, "columns") else grid[:, None]
        y_pred, y_std = estimator.predict(grid_X, return_std=True)
        y_samples = None
        if n_draws > 0:
            y_samples = estimator.sample_y(grid_X, n_draws, random_state=random_state)
        return cls.from_predictions(
            grid,
            y_pred,
            y_std,
            y_samples,
            x_data=None if y is None else feature,
            y_data=y,
            ax=ax,
        )

    @classmethod
    def from_predictions(
        cls, x, y_pred, y_std, y_samples=None, x_data=None, y_data=None, *, ax=None
    ):
        """Plot a predictive given on points ``x`` (sorted here, with the values along).

        Parameters
        ----------
        x : array-like of shape (n_points,)
        y_pred : array-like of shape (n_points,)
        y_std : array-like of shape (n_points,)
        y_samples : array-like of shape (n_points, n_draws), default=None
        x_data, y_data : array-like of shape (n_data,), default=None
            Data points; both or neither.
        ax : matplotlib Axes, default=None

        Returns
        -------
        display : PredictiveBandDisplay
        """
        _pyplot(f"{cls.__name__}.from_predictions")
        x, y_pred, y_std = (
            _one_dimensional(name, values)
            for name, values in (("x", x), ("y_pred", y_pred), ("y_std", y_std))
        )
        check_consistent_length(x, y_pred, y_std)
        order = np.argsort(x, kind="stable")
        if y_samples is not None:
            y_samples = np.asarray(y_samples, dtype=np.float64)
            if y_samples.ndim != 2 or len(y_samples) != len(x):
                raise ValueError(
                    f"y_samples must have shape (n_points, n_draws) with n_points={len(x)}; "
                    f"got {y_samples.shape}."
                )
            y_samples = y_samples[order]
        if (x_data is None) != (y_data is None):
            raise ValueError("x_data and y_data must be given together.")
        if x_data is not None:
            x_data, y_data = _one_dimensional("x_data", x_data), _one_dimensional("y_data", y_data)
            check_consistent_length(x_data, y_data)
        display = cls(
            x=x[order],
            y_pred=y_pred[order],
            y_std=y_std[order],
            y_samples=y_samples,
            x_data=x_data,
            y_data=y_data,
        )
        return display.plot(ax=ax)


class RegressionCalibrationDisplay:
    """Observed against expected coverage of central predictive intervals.

    For each level ``p`` the fraction of targets inside the central ``p``
    interval of ``N(y_pred, y_std**2)``; a calibrated regressor lies on the
    diagonal, an overconfident one below it. Build it with
    :meth:`from_estimator` or :meth:`from_predictions`.

    Parameters
    ----------
    levels : ndarray of shape (n_levels,)
        Expected coverage levels.
    observed : ndarray of shape (n_levels,)
        Observed coverage at each level, from
        :func:`sklearn_quinn.metrics.coverage_curve`.

    Attributes
    ----------
    line_ : matplotlib Line2D
        Observed against expected coverage.
    ax_ : matplotlib Axes
    figure_ : matplotlib Figure

    See Also
    --------
    sklearn_quinn.metrics.coverage_curve : The plotted data.
    ReliabilityDisplay : The same question for classifiers.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from sklearn_quinn.plotting import RegressionCalibrationDisplay
    >>> y_true = np.random.default_rng(0).normal(size=1000)
    >>> display = RegressionCalibrationDisplay.from_predictions(
    ...     y_true, np.zeros(1000), np.ones(1000), levels=[0.5, 0.9])
    >>> display.observed.round(1)
    array([0.5, 0.9])
    >>> plt.close(display.figure_)
    """

    def __init__(self, *, levels, observed):
        self.levels = levels
        self.observed = observed

    def plot(self, ax=None):
        """Draw the coverage curve and the diagonal.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; None makes a new figure.

        Returns
        -------
        self : RegressionCalibrationDisplay
        """
        ax = _axes(f"{type(self).__name__}.plot", ax)
        _diagonal(ax)
        (self.line_,) = ax.plot(self.levels, self.observed, marker="s", label="observed")
        ax.set(xlabel="expected coverage of the central interval", ylabel="observed coverage")
        ax.legend(loc="upper left")
        self.ax_, self.figure_ = ax, ax.figure
        return self

    @classmethod
    def from_estimator(cls, estimator, X, y, *, levels=None, ax=None):
        """Plot the coverage of a fitted regressor's ``predict(X, return_std=True)``.

        Parameters
        ----------
        estimator : regressor
            Fitted, with ``predict(X, return_std=True)``.
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
        levels : array-like of float in (0, 1), default=None
            Expected levels; None uses 0.05, 0.10, ..., 0.95.
        ax : matplotlib Axes, default=None

        Returns
        -------
        display : RegressionCalibrationDisplay
        """
        _pyplot(f"{cls.__name__}.from_estimator")
        y_pred, y_std = estimator.predict(X, return_std=True)
        return cls.from_predictions(y, y_pred, y_std, levels=levels, ax=ax)

    @classmethod
    def from_predictions(cls, y_true, y_pred, y_std, *, levels=None, ax=None):
        """Plot the coverage of Gaussian predictions ``N(y_pred, y_std**2)``.

        Parameters
        ----------
        y_true, y_pred, y_std : array-like of shape (n_samples,) or (n_samples, n_targets)
        levels : array-like of float in (0, 1), default=None
            Expected levels; None uses 0.05, 0.10, ..., 0.95.
        ax : matplotlib Axes, default=None

        Returns
        -------
        display : RegressionCalibrationDisplay
        """
        _pyplot(f"{cls.__name__}.from_predictions")
        levels, observed = coverage_curve(y_true, y_pred, y_std, levels)
        return cls(levels=levels, observed=observed).plot(ax=ax)


class ReliabilityDisplay:
    """Reliability diagram of a classifier: accuracy against confidence per bin.

    Top-class probabilities are put in equal-width bins; each non-empty bin
    is a point (mean confidence, fraction correct). A calibrated classifier
    lies on the diagonal; the legend gives the expected calibration error.
    Build it with :meth:`from_estimator` or :meth:`from_predictions`.

    Parameters
    ----------
    confidence : ndarray of shape (n_bins,)
        Mean top-class probability per bin (NaN for an empty bin).
    accuracy : ndarray of shape (n_bins,)
        Fraction correct per bin (NaN for an empty bin).
    counts : ndarray of shape (n_bins,)
        Points per bin.
    ece : float
        Expected calibration error over the same bins.

    Attributes
    ----------
    line_ : matplotlib Line2D
        Accuracy against confidence over the non-empty bins.
    ax_ : matplotlib Axes
    figure_ : matplotlib Figure

    See Also
    --------
    sklearn_quinn.metrics.reliability_bins : The plotted data.
    sklearn_quinn.metrics.expected_calibration_error : The number in the legend.
    RegressionCalibrationDisplay : The same question for regressors.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from sklearn_quinn.plotting import ReliabilityDisplay
    >>> display = ReliabilityDisplay.from_predictions(
    ...     [0, 1, 1, 1], [[0.9, 0.1], [0.3, 0.7], [0.7, 0.3], [0.1, 0.9]], n_bins=5)
    >>> display.counts
    array([0, 0, 0, 2, 2])
    >>> display.accuracy
    array([nan, nan, nan, 0.5, 1. ])
    >>> round(display.ece, 2)
    0.15
    >>> plt.close(display.figure_)
    """

    def __init__(self, *, confidence, accuracy, counts, ece):
        self.confidence = confidence
        self.accuracy = accuracy
        self.counts = counts
        self.ece = ece

    def plot(self, ax=None):
        """Draw accuracy against confidence and the diagonal.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; None makes a new figure.

        Returns
        -------
        self : ReliabilityDisplay
        """
        ax = _axes(f"{type(self).__name__}.plot", ax)
        _diagonal(ax)
        filled = self.counts > 0
        (self.line_,) = ax.plot(
            self.confidence[filled],
            self.accuracy[filled],
            marker="s",
            label=f"classifier (ECE = {self.ece:.3f})",
        )
        ax.set(xlabel="confidence (top-class probability)", ylabel="accuracy")
        ax.legend(loc="upper left")
        self.ax_, self.figure_ = ax, ax.figure
        return self

    @classmethod
    def from_estimator(cls, estimator, X, y, *, n_bins=15, ax=None):
        """Plot the reliability of a fitted classifier's ``predict_proba(X)``.

        Parameters
        ----------
        estimator : classifier
            Fitted, with ``predict_proba`` and ``classes_``.
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        n_bins : int, default=15
        ax : matplotlib Axes, default=None

        Returns
        -------
        display : ReliabilityDisplay
        """
        _pyplot(f"{cls.__name__}.from_estimator")
        y_proba = estimator.predict_proba(X)
        return cls.from_predictions(y, y_proba, n_bins=n_bins, labels=estimator.classes_, ax=ax)

    @classmethod
    def from_predictions(cls, y_true, y_proba, *, n_bins=15, labels=None, ax=None):
        """Plot the reliability of class probabilities.

        Parameters
        ----------
        y_true : array-like of shape (n_samples,)
        y_proba : array-like of shape (n_samples, n_classes)
        n_bins : int, default=15
        labels : array-like of shape (n_classes,), default=None
            Class of each column of ``y_proba``; None uses the sorted labels of ``y_true``.
        ax : matplotlib Axes, default=None

        Returns
        -------
        display : ReliabilityDisplay
        """
        _pyplot(f"{cls.__name__}.from_predictions")
        confidence, accuracy, counts = reliability_bins(y_true, y_proba, n_bins, labels)
        ece = expected_calibration_error(y_true, y_proba, n_bins, labels)
        return cls(confidence=confidence, accuracy=accuracy, counts=counts, ece=ece).plot(ax=ax)


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
        plt = _pyplot(f"{type(self).__name__}.plot")
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
        _pyplot(f"{cls.__name__}.from_samples")
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
        estimator : MCMC estimator
            Fitted, with the attribute ``chains_``: an ndarray of shape
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
        _pyplot(f"{cls.__name__}.from_estimator")
        if not hasattr(estimator, "chains_"):
            raise ValueError(
                f"{type(estimator).__name__} has no chains_ attribute: "
                f"{cls.__name__}.from_estimator needs a fitted MCMC estimator, whose chains_ "
                "holds the draws as (n_chains, n_draws, n_params)."
            )
        return cls.from_samples(estimator.chains_, params, ax=ax)
