"""Plots of predictive uncertainty and of MCMC chains, as scikit-learn Display objects.

As with scikit-learn's ``PredictionErrorDisplay`` and ``CalibrationDisplay``,
a Display stores the data it shows; ``plot(ax=None)`` draws them, keeps the
matplotlib artists (``line_``, ...), the axes ``ax_`` and the figure
``figure_``, and returns the Display; the classmethods ``from_estimator`` and
``from_predictions`` (``from_samples`` for chains) compute the data, build the
Display and plot it.

matplotlib is needed to plot only, and imported then: ``pip install
matplotlib``, or ``pip install 'sklearn-quinn[plot]'``.

Each Display lives beside what it plots (the trace plot in
:mod:`sklearn_quinn.mcmc`, the calibration plots beside the metrics they
draw); this module is where to import them from.
"""

from ._predictive_band_display import PredictiveBandDisplay
from .mcmc._trace_display import TraceDisplay
from .metrics._regression_calibration_display import RegressionCalibrationDisplay
from .metrics._reliability_display import ReliabilityDisplay

__all__ = ["PredictiveBandDisplay", "RegressionCalibrationDisplay", "ReliabilityDisplay", "TraceDisplay"]
