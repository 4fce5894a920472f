"""The UCI regression protocol of Hernández-Lobato and Adams (2015).

As the data README gives it: inputs standardised with the training split's
statistics (the target by the estimator, ``normalize_y=True``), test RMSE and
test log-likelihood per point in the original target units, mean ± standard
error over splits, beside the published figures read from the README at run
time. Shared by ``sklearn-quinn benchmark uci`` and the scripts in
``benchmarks/``.

References
----------
J. M. Hernández-Lobato and R. P. Adams, "Probabilistic backpropagation for
scalable learning of Bayesian neural networks", ICML 2015.
"""

import math
import time

import numpy as np
from scipy.stats import norm
from sklearn.base import clone

from ..datasets import load_uci_reference, load_uci_split


def standardise_inputs(X_train, X_test):
    """Both inputs standardised with the mean and std of ``X_train`` (a constant column by 1)."""
    mean, scale = X_train.mean(axis=0), X_train.std(axis=0)
    scale[scale == 0] = 1.0
    return (X_train - mean) / scale, (X_test - mean) / scale


def run_split(estimator, data_dir, name, split):
    """Fit a clone of ``estimator`` (``random_state=split`` where it has one) on one split.

    Returns
    -------
    dict
        ``score_fit``'s record of the split.
    """
    return score_fit(estimator, *load_uci_split(data_dir, name, split), random_state=split)


def score_fit(estimator, X_train, X_test, y_train, y_test, random_state=0):
    """Fit a clone of ``estimator`` on the standardised inputs and score its predictive on the test rows.

    Returns
    -------
    dict
        ``rmse`` and ``ll`` (mean test log-likelihood per point) in the
        original target units, ``coverage_95`` (of the central 95% interval),
        ``seconds`` (fit and predict, wall), ``cpu_seconds`` (the same, CPU time of
        this process: the cost when other work shares the cores), ``n_train``, ``n_test`` and the
        fitted ``estimator``.
    """
    X_train, X_test = standardise_inputs(X_train, X_test)
    start, cpu_start = time.perf_counter(), time.process_time()
    fitted = clone(estimator)
    if "random_state" in fitted.get_params():  # not scikit-learn's BayesianRidge, a reference
        fitted.set_params(random_state=random_state)
    fitted.fit(X_train, y_train)
    mean, std = fitted.predict(X_test, return_std=True)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    return {
        "rmse": float(np.sqrt(np.mean((y_test - mean) ** 2))),
        "ll": float(np.mean(norm.logpdf(y_test, mean, std))),
        "coverage_95": float(np.mean(np.abs(y_test - mean) <= norm.ppf(0.975) * std)),
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "n_train": len(y_train),
        "n_test": len(y_test),
        "estimator": fitted,
    }


def mean_se(values):
    """Mean and standard error (NaN for a single value)."""
    values = np.asarray(values, dtype=float)
    se = values.std(ddof=1) / math.sqrt(len(values)) if len(values) > 1 else float("nan")
    return float(values.mean()), float(se)


def decimals(magnitude, least):
    """Decimals that show two significant digits of ``magnitude`` (naval's RMSE is about 0.0006), at
    least ``least`` (and ``least`` for zero or a non-finite magnitude)."""
    if not np.isfinite(magnitude) or magnitude == 0:
        return least
    return max(least, 1 - int(np.floor(np.log10(abs(magnitude)))))


def fmt(values, digits=3):
    """``'mean ± s.e.'`` of ``values``."""
    mean, se = mean_se(values)
    return f"{mean:.{digits}f} ± {se:.{digits}f}"


def reference(data_dir, name, metric, method):
    """Published ``metric`` ('log_likelihood' or 'rmse') of ``method`` on ``name``, as text."""
    mean, error = load_uci_reference(data_dir)[metric][name][method]
    return f"{mean:.2f} ± {error:.2f}"
