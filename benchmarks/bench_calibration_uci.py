"""Before / after calibration of the Laplace posterior scale on UCI splits.

Per split: the training rows are divided into a fit part and a validation part
(``--validation-fraction``); ``LaplaceRegressor`` (1x50 ReLU, full GGN, linear
pushforward, prior precision 1 / prior_std**2) is fitted on the fit part;
``calibrate`` then chooses each ``--calibrations`` parameter by its objective
on the validation part; test NLL, chi-squared and 95% interval coverage are measured
before and after. ``--cv K`` adds, per calibration, ``calibrate_cv``: the
parameter chosen by K-fold cross-validation over all the training rows and set
on a network fitted on all of them (with "before, all rows" as its baseline).
Prints mean ± standard error over splits.

    python benchmarks/bench_calibration_uci.py [--datasets concrete yacht] [--splits 5] [--cv 5]
"""

import argparse
import copy
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.base import clone
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from sklearn_quinn import LaplaceRegressor
from sklearn_quinn.calibration import calibrate, calibrate_cv
from sklearn_quinn.datasets import load_uci_split
from sklearn_quinn.metrics import chi_squared, gaussian_nll, interval_coverage

ROOT = Path(__file__).resolve().parents[1]


def test_metrics(reg, X_test, y_test):
    mean, std = reg.predict(X_test, return_std=True)
    return {
        "nll": gaussian_nll(y_test, mean, std),
        "chi2": chi_squared(y_test, mean, std),
        "cov95": interval_coverage(y_test, mean, std, 0.95),
    }


def summary(values):
    values = np.asarray(values)
    return f"{values.mean():7.3f} ± {values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else 0:5.3f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data" / "uci"))
    parser.add_argument("--datasets", nargs="+", default=["concrete", "yacht"])
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--validation-fraction", type=float, default=0.2)
    parser.add_argument("--calibrations", nargs="+",
                        default=["cov_scale:nll", "noise_scale:nll", "noise_scale:ece", "cov_scale:coverage",
                                 "noise_scale:coverage"],
                        help="param:objective pairs, each applied to a copy of the fitted estimator")
    parser.add_argument("--prior-precision", default="marglik",
                        help="the estimator's prior_precision before calibration: 'marglik' or 'none'")
    parser.add_argument("--cv", type=int, default=0, help="folds of calibrate_cv rows (0: none)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    prior_precision = None if args.prior_precision == "none" else args.prior_precision
    base = LaplaceRegressor(hidden_layer_sizes=(50,), prior_precision=prior_precision)
    print(f"LaplaceRegressor(full GGN, linear, MAP defaults, prior_precision={prior_precision!r}); "
          f"each calibration on {args.validation_fraction:.0%} of the training rows; "
          "test metrics, mean ± s.e. over splits\n")
    print("| data set | calibration | test NLL | chi-squared | 95% coverage | seconds / split |")
    print("|---|---|---|---|---|---|")
    for name in args.datasets:
        keys = ["before", *args.calibrations]
        if args.cv:
            keys += ["before, all rows", *(f"{c}:{args.cv}-fold CV" for c in args.calibrations)]
        rows = {key: {"nll": [], "chi2": [], "cov95": []} for key in keys}
        seconds = []
        for split in range(args.splits):
            start = time.perf_counter()
            X_train, X_test, y_train, y_test = load_uci_split(args.data_dir, name, split)
            X_test_raw = X_test
            X_fit, X_val, y_fit, y_val = train_test_split(
                X_train, y_train, test_size=args.validation_fraction, random_state=split
            )
            scaler = StandardScaler().fit(X_fit)
            X_fit, X_val, X_test = (scaler.transform(a) for a in (X_fit, X_val, X_test))
            reg = clone(base).set_params(random_state=split).fit(X_fit, y_fit)
            for key, value in test_metrics(reg, X_test, y_test).items():
                rows["before"][key].append(value)
            for calibration in args.calibrations:
                param, objective = calibration.split(":")
                calibrated = copy.deepcopy(reg)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)
                    calibrate(calibrated, X_val, y_val, param=param, objective=objective)
                for key, value in test_metrics(calibrated, X_test, y_test).items():
                    rows[calibration][key].append(value)
            if args.cv:
                scaler_all = StandardScaler().fit(X_train)
                X_all, X_test_all = scaler_all.transform(X_train), scaler_all.transform(X_test_raw)
                on_all = clone(base).set_params(random_state=split).fit(X_all, y_train)
                for key, value in test_metrics(on_all, X_test_all, y_test).items():
                    rows["before, all rows"][key].append(value)
                for calibration in args.calibrations:
                    param, objective = calibration.split(":")
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", UserWarning)
                        fitted, _ = calibrate_cv(clone(base).set_params(random_state=split), X_all, y_train,
                                                 param=param, objective=objective, cv=args.cv)
                    for key, value in test_metrics(fitted, X_test_all, y_test).items():
                        rows[f"{calibration}:{args.cv}-fold CV"][key].append(value)
            seconds.append(time.perf_counter() - start)
        for key, metrics in rows.items():
            label = key if key.startswith("before") else key.replace(":", " by ", 1).replace(":", ", ")
            print(f"| {name} | {label} | {summary(metrics['nll'])} | {summary(metrics['chi2'])} | "
                  f"{summary(metrics['cov95'])} | {np.mean(seconds):.1f} |")


if __name__ == "__main__":
    main()
