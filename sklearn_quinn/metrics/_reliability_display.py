"""ReliabilityDisplay: a classifier's accuracy against its confidence, per bin.

matplotlib is imported when the Display draws, not before.
"""

from .._plot_utils import axes_or_new, estimator_name, plot_diagonal, pyplot
from ._classification import expected_calibration_error, reliability_bins


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
    estimator_name : str, default=None
        The curve's name in the legend; None: 'classifier'.

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

    def __init__(self, *, confidence, accuracy, counts, ece, estimator_name=None):
        self.confidence = confidence
        self.accuracy = accuracy
        self.counts = counts
        self.ece = ece
        self.estimator_name = estimator_name

    def plot(self, ax=None, *, name=None):
        """Draw accuracy against confidence and the diagonal.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; None makes a new figure. Curves drawn on one
            Axes share its diagonal, and the legend tells them apart by name.
        name : str, default=None
            The curve's name in the legend, beside its ECE; None:
            ``estimator_name``, or 'classifier'.

        Returns
        -------
        self : ReliabilityDisplay
        """
        ax = axes_or_new(f"{type(self).__name__}.plot", ax)
        plot_diagonal(ax)
        filled = self.counts > 0
        (self.line_,) = ax.plot(
            self.confidence[filled],
            self.accuracy[filled],
            marker="s",
            label=f"{name or self.estimator_name or 'classifier'} (ECE = {self.ece:.3f})",
        )
        ax.set(xlabel="confidence (top-class probability)", ylabel="accuracy")
        ax.legend(loc="upper left")
        self.ax_, self.figure_ = ax, ax.figure
        return self

    @classmethod
    def from_estimator(cls, estimator, X, y, *, n_bins=15, name=None, ax=None):
        """Plot the reliability of a fitted classifier's ``predict_proba(X)``.

        Parameters
        ----------
        estimator : classifier
            Fitted, with ``predict_proba`` and ``classes_``.
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        n_bins : int, default=15
        name : str, default=None
            The curve's name in the legend; None: the estimator's class (a
            ``Pipeline``'s last step's).
        ax : matplotlib Axes, default=None

        Returns
        -------
        display : ReliabilityDisplay
        """
        pyplot(f"{cls.__name__}.from_estimator")
        y_proba = estimator.predict_proba(X)
        return cls.from_predictions(y, y_proba, n_bins=n_bins, labels=estimator.classes_,
                                    name=name or estimator_name(estimator), ax=ax)

    @classmethod
    def from_predictions(cls, y_true, y_proba, *, n_bins=15, labels=None, name=None, ax=None):
        """Plot the reliability of class probabilities.

        Parameters
        ----------
        y_true : array-like of shape (n_samples,)
        y_proba : array-like of shape (n_samples, n_classes)
        n_bins : int, default=15
        labels : array-like of shape (n_classes,), default=None
            Class of each column of ``y_proba``; None uses the sorted labels of ``y_true``.
        name : str, default=None
            The curve's name in the legend; None: 'classifier'.
        ax : matplotlib Axes, default=None

        Returns
        -------
        display : ReliabilityDisplay
        """
        pyplot(f"{cls.__name__}.from_predictions")
        confidence, accuracy, counts = reliability_bins(y_true, y_proba, n_bins, labels)
        ece = expected_calibration_error(y_true, y_proba, n_bins, labels)
        return cls(confidence=confidence, accuracy=accuracy, counts=counts, ece=ece, estimator_name=name).plot(ax=ax)
