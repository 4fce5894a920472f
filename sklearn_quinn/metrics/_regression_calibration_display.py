"""RegressionCalibrationDisplay: observed against expected coverage of central intervals.

matplotlib is imported when the Display draws, not before.
"""

from .._plot_utils import axes_or_new, estimator_name, plot_diagonal, pyplot
from ._regression import coverage_curve


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
    estimator_name : str, default=None
        The curve's name in the legend; None: 'observed'.

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

    def __init__(self, *, levels, observed, estimator_name=None):
        self.levels = levels
        self.observed = observed
        self.estimator_name = estimator_name

    def plot(self, ax=None, *, name=None):
        """Draw the coverage curve and the diagonal.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; None makes a new figure. Curves drawn on one
            Axes share its diagonal, and the legend tells them apart by name.
        name : str, default=None
            The curve's name in the legend; None: ``estimator_name``.

        Returns
        -------
        self : RegressionCalibrationDisplay
        """
        ax = axes_or_new(f"{type(self).__name__}.plot", ax)
        plot_diagonal(ax)
        label = name or self.estimator_name or "observed"
        (self.line_,) = ax.plot(self.levels, self.observed, marker="s", label=label)
        ax.set(xlabel="expected coverage of the central interval", ylabel="observed coverage")
        ax.legend(loc="upper left")
        self.ax_, self.figure_ = ax, ax.figure
        return self

    @classmethod
    def from_estimator(cls, estimator, X, y, *, levels=None, name=None, ax=None):
        """Plot the coverage of a fitted regressor's ``predict(X, return_std=True)``.

        Parameters
        ----------
        estimator : regressor
            Fitted, with ``predict(X, return_std=True)``.
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
        levels : array-like of float in (0, 1), default=None
            Expected levels; None uses 0.05, 0.10, ..., 0.95.
        name : str, default=None
            The curve's name in the legend; None: the estimator's class (a
            ``Pipeline``'s last step's).
        ax : matplotlib Axes, default=None

        Returns
        -------
        display : RegressionCalibrationDisplay
        """
        pyplot(f"{cls.__name__}.from_estimator")
        y_pred, y_std = estimator.predict(X, return_std=True)
        return cls.from_predictions(y, y_pred, y_std, levels=levels, name=name or estimator_name(estimator), ax=ax)

    @classmethod
    def from_predictions(cls, y_true, y_pred, y_std, *, levels=None, name=None, ax=None):
        """Plot the coverage of Gaussian predictions ``N(y_pred, y_std**2)``.

        Parameters
        ----------
        y_true, y_pred, y_std : array-like of shape (n_samples,) or (n_samples, n_targets)
        levels : array-like of float in (0, 1), default=None
            Expected levels; None uses 0.05, 0.10, ..., 0.95.
        name : str, default=None
            The curve's name in the legend; None: 'observed'.
        ax : matplotlib Axes, default=None

        Returns
        -------
        display : RegressionCalibrationDisplay
        """
        pyplot(f"{cls.__name__}.from_predictions")
        levels, observed = coverage_curve(y_true, y_pred, y_std, levels)
        return cls(levels=levels, observed=observed, estimator_name=name).plot(ax=ax)
