"""Metrics of predictive distributions, and scorers for model selection.

Functions take ``(y_true, ...)`` as scikit-learn's metrics do. Regression
metrics take the predictive mean and standard deviation (or draws of ``y``,
shaped as ``sample_y`` returns them); classification metrics take the class
probabilities of ``predict_proba``.

Scorers take ``(estimator, X, y)`` and return a value where greater is
better, so they plug into ``GridSearchCV(scoring=...)`` alone or in a scoring
dict. They call ``predict(X, return_std=True)``, ``sample_y`` or
``predict_proba``, never ``score``.
"""

from ._classification import (
    accuracy,
    brier_score,
    categorical_nll,
    expected_calibration_error,
    maximum_calibration_error,
    reliability_bins,
)
from ._regression import (
    chi_squared,
    chi_squared_error,
    coverage_curve,
    crps_gaussian,
    crps_samples,
    gaussian_nll,
    interval_coverage,
    interval_coverage_error,
    interval_width,
    quantile_calibration_error,
    root_mean_squared_error,
)
from ._scorer import (
    coverage_scorer,
    neg_brier_scorer,
    neg_chi_squared_error_scorer,
    neg_crps_scorer,
    neg_ece_scorer,
    neg_interval_width_scorer,
    neg_nll_scorer,
    neg_quantile_calibration_error_scorer,
)

__all__ = [
    "accuracy",
    "brier_score",
    "categorical_nll",
    "chi_squared",
    "chi_squared_error",
    "coverage_curve",
    "coverage_scorer",
    "crps_gaussian",
    "crps_samples",
    "expected_calibration_error",
    "gaussian_nll",
    "interval_coverage",
    "interval_coverage_error",
    "interval_width",
    "maximum_calibration_error",
    "neg_brier_scorer",
    "neg_chi_squared_error_scorer",
    "neg_crps_scorer",
    "neg_ece_scorer",
    "neg_interval_width_scorer",
    "neg_nll_scorer",
    "neg_quantile_calibration_error_scorer",
    "quantile_calibration_error",
    "reliability_bins",
    "root_mean_squared_error",
]
