"""The UCI regression protocol shared by the benchmark scripts.

Hernandez-Lobato & Adams (2015), as the data README gives it: inputs
standardised with the training split's statistics (the target by the
estimator, ``normalize_y=True``), test RMSE and test log-likelihood per point
in the original target units, mean ± standard error over splits, beside the
published figures read from the README at run time.
"""

import math
import time
from pathlib import Path

import numpy as np
from scipy.stats import norm
from sklearn.base import clone

from sklearn_quinn.datasets import load_uci_reference, load_uci_split

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "uci"


def standardise_inputs(X_train, X_test):
    mean, scale = X_train.mean(axis=0), X_train.std(axis=0)
    scale[scale == 0] = 1.0
    return (X_train - mean) / scale, (X_test - mean) / scale


def run_split(estimator, data_dir, name, split):
    """Fit a clone of ``estimator`` (``random_state=split``) on one split; test RMSE, LL, seconds."""
    X_train, X_test, y_train, y_test = load_uci_split(data_dir, name, split)
    X_train, X_test = standardise_inputs(X_train, X_test)
    start = time.perf_counter()
    fitted = clone(estimator).set_params(random_state=split).fit(X_train, y_train)
    mean, std = fitted.predict(X_test, return_std=True)
    seconds = time.perf_counter() - start
    return {
        "rmse": float(np.sqrt(np.mean((y_test - mean) ** 2))),
        "ll": float(np.mean(norm.logpdf(y_test, mean, std))),
        "seconds": seconds,
        "estimator": fitted,
    }


def mean_se(values):
    values = np.asarray(values, dtype=float)
    se = values.std(ddof=1) / math.sqrt(len(values)) if len(values) > 1 else float("nan")
    return float(values.mean()), float(se)


def fmt(values, digits=3):
    mean, se = mean_se(values)
    return f"{mean:.{digits}f} ± {se:.{digits}f}"


def reference(data_dir, name, metric, method):
    """Published ``metric`` ('log_likelihood' or 'rmse') of ``method`` on ``name``, as text."""
    mean, error = load_uci_reference(data_dir)[metric][name][method]
    return f"{mean:.2f} ± {error:.2f}"
