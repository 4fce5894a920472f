"""PredictiveBandDisplay: a regressor's predictive mean and band over its one feature.

The band can show its two sources: the epistemic part (the network's mean under the
weight posterior) inside the total (epistemic and observation noise).

matplotlib is imported when the Display draws, not before.
"""

import numpy as np
from sklearn.base import is_classifier
from sklearn.utils.validation import check_consistent_length

from ._pipelines import call_method, has_method
from ._plot_utils import axes_or_new, pyplot

_BAND_STDS = 2
_DEFAULT_GRID_SIZE = 200


def _one_dimensional(name, values):
    """``values`` as a float64 1-D array, or a ValueError naming ``name``."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional; got an array of shape {values.shape}.")
    return values


class PredictiveBandDisplay:
    """Predictive mean and ``mean ± 2 std`` band of a regressor over its one feature.

    Optionally with the epistemic part of the band drawn darker inside it, draws
    of ``y`` from the predictive and the data points.
    Build it with :meth:`from_estimator` or :meth:`from_predictions`.

    Parameters
    ----------
    x : ndarray of shape (n_points,)
        Sorted points where the predictive is drawn.
    y_pred : ndarray of shape (n_points,)
        Predictive mean at ``x``.
    y_std : ndarray of shape (n_points,)
        Total predictive standard deviation at ``x``.
    y_epistemic_std : ndarray of shape (n_points,), default=None
        Epistemic part of ``y_std`` (the standard deviation of the network's
        mean); None draws the total band only.
    y_samples : ndarray of shape (n_points, n_draws), default=None
        Draws of ``y`` at ``x``, one per column.
    x_data, y_data : ndarray of shape (n_data,), default=None
        Data points, shown as a scatter.
    estimator_name : str, default=None
        The prefix of the legend's entries, which tells displays drawn on one
        Axes apart; None: no prefix.

    Attributes
    ----------
    line_ : matplotlib Line2D
        The predictive mean.
    band_ : matplotlib PolyCollection
        The band between ``y_pred - 2 y_std`` and ``y_pred + 2 y_std``.
    epistemic_band_ : matplotlib PolyCollection or None
        The band between ``y_pred ∓ 2 y_epistemic_std`` (None without it).
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

    def __init__(
        self, *, x, y_pred, y_std, y_epistemic_std=None, y_samples=None, x_data=None, y_data=None,
        estimator_name=None,
    ):
        self.x = x
        self.y_pred = y_pred
        self.y_std = y_std
        self.y_epistemic_std = y_epistemic_std
        self.y_samples = y_samples
        self.x_data = x_data
        self.y_data = y_data
        self.estimator_name = estimator_name

    def plot(self, ax=None, *, name=None):
        """Draw the band, the mean, the draws and the data.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; None makes a new figure. On Axes that already show
            lines, the mean and its bands take the Axes' next colour, and the
            Axes keep their labels.
        name : str, default=None
            The prefix of the legend's entries; None: ``estimator_name``.

        Returns
        -------
        self : PredictiveBandDisplay
        """
        ax = axes_or_new(f"{type(self).__name__}.plot", ax)
        name = name or self.estimator_name
        prefix = f"{name}: " if name else ""
        # The mean first, in the Axes' next colour (C0 on new Axes), which its bands take.
        (self.line_,) = ax.plot(self.x, self.y_pred, label=f"{prefix}predictive mean", zorder=2.5)
        color = self.line_.get_color()
        split = self.y_epistemic_std is not None
        self.band_ = self._band(ax, self.y_std, 0.2, f"{prefix}mean ± {_BAND_STDS} {'total ' if split else ''}std",
                                color)
        self.epistemic_band_ = None
        if split:
            self.epistemic_band_ = self._band(ax, self.y_epistemic_std, 0.35,
                                              f"{prefix}mean ± {_BAND_STDS} epistemic std", color)
        self.draw_lines_ = []
        if self.y_samples is not None:
            self.draw_lines_ = ax.plot(self.x, self.y_samples, color="C1", linewidth=0.8, alpha=0.6)
        if self.draw_lines_:
            self.draw_lines_[0].set_label(f"{prefix}predictive draws")
        self.scatter_ = None
        if self.y_data is not None:
            self.scatter_ = ax.scatter(
                self.x_data, self.y_data, s=12, color="k", zorder=3, label=f"{prefix}data"
            )
        ax.set(xlabel=ax.get_xlabel() or "x", ylabel=ax.get_ylabel() or "y")
        ax.legend()
        self.ax_, self.figure_ = ax, ax.figure
        return self

    def _band(self, ax, std, alpha, label, color):
        """Fill ``y_pred ± 2 std`` on ``ax``."""
        return ax.fill_between(
            self.x,
            self.y_pred - _BAND_STDS * std,
            self.y_pred + _BAND_STDS * std,
            color=color,
            alpha=alpha,
            linewidth=0,
            label=label,
        )

    @classmethod
    def from_estimator(
        cls, estimator, X, y=None, *, n_draws=0, split=True, random_state=0, grid=None, name=None, ax=None
    ):
        """Plot a fitted regressor's predictive along its single feature.

        Parameters
        ----------
        estimator : regressor
            Fitted, with ``predict(X, return_std=True)`` and
            ``sample_y(X, n_samples, random_state)``, on one feature and one target.
            One with ``predict_uncertainty`` (every regressor of this package)
            can show the two sources of its band. A ``Pipeline`` ending in one
            reaches its ``sample_y`` and ``predict_uncertainty`` through the steps
            before it.
        X : array-like of shape (n_samples, 1)
            Inputs: exactly one column. A DataFrame's column name is kept on the grid.
        y : array-like of shape (n_samples,), default=None
            Targets; when given, the points ``(X, y)`` are shown.
        n_draws : int, default=0
            Draws of ``y`` from ``sample_y`` to show.
        split : bool, default=True
            Draw the epistemic part of the band inside the total, when the
            estimator has ``predict_uncertainty``.
        random_state : int, RandomState instance or None, default=0
            Seeds the draws.
        grid : array-like of shape (n_points,), default=None
            Points where the predictive is drawn (sorted here); None uses 200
            evenly spaced points from the smallest to the largest ``X``.
        name : str, default=None
            The prefix of the legend's entries, which tells displays drawn on
            one Axes apart; None: none.
        ax : matplotlib Axes, default=None
            On Axes that already show lines, the mean and its bands take the
            Axes' next colour.

        Returns
        -------
        display : PredictiveBandDisplay
        """
        pyplot(f"{cls.__name__}.from_estimator")
        if is_classifier(estimator):
            raise ValueError(f"{cls.__name__} draws a regressor's predictive band; {type(estimator).__name__} is a "
                             "classifier (ReliabilityDisplay shows a classifier's calibration).")
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
        y_epistemic_std = None
        if split and has_method(estimator, "predict_uncertainty"):
            parts = call_method(estimator, "predict_uncertainty", grid_X)
            y_pred, y_std, y_epistemic_std = parts.mean, parts.std, parts.epistemic_std
        else:
            y_pred, y_std = estimator.predict(grid_X, return_std=True)
        if np.ndim(y_pred) != 1:
            raise ValueError(f"{cls.__name__} draws one target's band; the estimator predicts "
                             f"{np.shape(y_pred)[1]} targets.")
        y_samples = None
        if n_draws > 0:
            y_samples = call_method(estimator, "sample_y", grid_X, n_draws, random_state=random_state)
        return cls.from_predictions(
            grid,
            y_pred,
            y_std,
            y_samples,
            y_epistemic_std=y_epistemic_std,
            x_data=None if y is None else feature,
            y_data=y,
            name=name,
            ax=ax,
        )

    @classmethod
    def from_predictions(
        cls,
        x,
        y_pred,
        y_std,
        y_samples=None,
        x_data=None,
        y_data=None,
        *,
        y_epistemic_std=None,
        name=None,
        ax=None,
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
        y_epistemic_std : array-like of shape (n_points,), default=None
            Epistemic part of ``y_std``, drawn as an inner band; at most ``y_std``.
        name : str, default=None
            The prefix of the legend's entries; None: none.
        ax : matplotlib Axes, default=None

        Returns
        -------
        display : PredictiveBandDisplay
        """
        pyplot(f"{cls.__name__}.from_predictions")
        x, y_pred, y_std = (
            _one_dimensional(name, values)
            for name, values in (("x", x), ("y_pred", y_pred), ("y_std", y_std))
        )
        check_consistent_length(x, y_pred, y_std)
        if not np.all(y_std >= 0):  # NaN included: an inverted or missing band is no band
            raise ValueError("y_std must be non-negative everywhere (and not NaN).")
        order = np.argsort(x, kind="stable")
        if y_epistemic_std is not None:
            y_epistemic_std = _one_dimensional("y_epistemic_std", y_epistemic_std)
            check_consistent_length(x, y_epistemic_std)
            # The epistemic variance is one of the two non-negative terms of the total.
            if np.any(y_epistemic_std > y_std * (1 + 1e-9)):
                raise ValueError("y_epistemic_std must not exceed y_std: it is a part of it.")
            y_epistemic_std = y_epistemic_std[order]
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
            y_epistemic_std=y_epistemic_std,
            y_samples=y_samples,
            x_data=x_data,
            y_data=y_data,
            estimator_name=name,
        )
        return display.plot(ax=ax)
