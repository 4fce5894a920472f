"""Cost of evidence-driven MAP training against the fixed-prior MAP.

Times the MAP training of the default 1x50 MLP (the ``_fit_map`` step every
optimisation family runs) with the prior precisions and the noise learned by
the Laplace evidence (``prior_std=None, noise_std=None``: the defaults) and with
a fixed prior and noise (``prior_std=1.0`` and ``noise_std`` fixed: no
evidence update), alternating the two, one thread, median over repeats.
Target of issue 17: the ratio at most 1.5. With ``--whole-fit``, the whole
``fit`` instead: the posterior after the MAP and its calibration included
(for a classifier, ``cov_scale='loo'``), what a user waits for.

    python benchmarks/bench_evidence_cost.py [--repeats 5] [--max-epochs 1000] [--tables digits ...] [--whole-fit]
"""

import argparse
import time

import numpy as np
import torch
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits, make_regression
from sklearn.preprocessing import StandardScaler

from sklearn_quinn import LaplaceClassifier, LaplaceRegressor


def tables():
    X, y = load_diabetes(return_X_y=True)
    yield "diabetes (442 x 10)", LaplaceRegressor, X, y, {"noise_std": 50.0}
    X, y = make_regression(2000, 8, noise=10.0, random_state=0)
    yield "synthetic (2000 x 8)", LaplaceRegressor, X, y, {"noise_std": 10.0}
    # More weights (2,141) than rows: the evidence through the rows' kernel, 1500 x 1500.
    rng = np.random.RandomState(0)
    X = rng.randn(1500, 40)
    y = X[:, 0] + np.sin(X[:, 1]) + 0.3 * rng.randn(1500)
    yield "wide synthetic (1500 x 40)", LaplaceRegressor, X, y, {"noise_std": 0.3}
    X, y = load_breast_cancer(return_X_y=True)
    yield "breast cancer (569 x 30, 2 classes)", LaplaceClassifier, X, y, {}
    # 4,400 weights: the training's updates take the Kronecker-factored evidence, its end the full GGN's.
    X, y = load_digits(return_X_y=True)
    yield "digits (1797 x 64, 10 classes)", LaplaceClassifier, X, y, {}


def map_seconds(estimator, X, y):
    """Wall seconds of the MAP training alone (validation and set-up excluded)."""
    X, Y = estimator._begin_fit(X, y)
    start = time.perf_counter()
    estimator._fit_map(X, Y)
    return time.perf_counter() - start


def fit_seconds(estimator, X, y):
    """Wall seconds of the whole fit."""
    start = time.perf_counter()
    estimator.fit(X, y)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-epochs", type=int, default=1000)
    parser.add_argument("--tables", nargs="+", help="the tables whose name starts with one of these (default: all)")
    parser.add_argument("--whole-fit", action="store_true", help="time the whole fit, not the MAP training alone")
    args = parser.parse_args()
    torch.set_num_threads(1)
    seconds = fit_seconds if args.whole_fit else map_seconds
    timed = "the whole fit" if args.whole_fit else "the MAP training"
    print(f"one thread, {args.max_epochs} epochs, {timed}, median of {args.repeats}\n")
    print("| table | fixed prior s | evidence s | ratio | evidence updates |")
    print("|---|---|---|---|---|")
    for name, estimator_class, X, y, fixed in tables():
        if args.tables and not name.startswith(tuple(args.tables)):
            continue
        X = StandardScaler().fit_transform(X)
        learned = estimator_class(max_epochs=args.max_epochs, random_state=0)
        baseline = estimator_class(prior_std=1.0, max_epochs=args.max_epochs, random_state=0, **fixed)
        times = {"fixed": [], "evidence": []}
        for _ in range(args.repeats):
            times["fixed"].append(seconds(baseline, X, y))
            times["evidence"].append(seconds(learned, X, y))
        fixed_s, evidence_s = np.median(times["fixed"]), np.median(times["evidence"])
        print(f"| {name} | {fixed_s:.2f} | {evidence_s:.2f} | {evidence_s / fixed_s:.2f} | "
              f"{len(learned.evidence_history_)} |", flush=True)


if __name__ == "__main__":
    main()
