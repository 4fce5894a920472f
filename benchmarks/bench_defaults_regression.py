"""Every family at the package's defaults on diabetes or on linear data, beside BayesianRidge and an ARD GP.

``--data diabetes`` (default) splits: the main job's (``sklearn-quinn compare``: a random 80/20 split of
scikit-learn's diabetes data with ``random_state=0``), then further random
80/20 splits with ``random_state`` 1, 2, ... (11 splits in all by default). Each
split runs ``compare``'s own code (``split_table``, ``candidates``,
``fit_and_score``): every estimator in ``Pipeline([StandardScaler(),
estimator])``, seeded with the split's ``random_state``, scored on the test rows
with ``sklearn_quinn.metrics``. ``--data linear``: issue 17's linear table,
300 training and 1000 test rows of ``y = X w + e`` with 10 standard-normal
features, ``w`` standard normal and unit noise, drawn afresh from each split's
seed (``BayesianRidge`` is the exact model there). Two more synthetic tables, drawn afresh
from each split's seed, have no target and print the table alone: ``--data friedman1``,
Friedman's (1991) smooth function of 5 of 10 uniform features with unit noise (300
training and 1000 test rows, where the GP is close to the exact model), and ``--data
categorical``, one 4-level feature one-hot encoded beside a numeric one, ``y = c_k +
sin(2 x) + N(0, 0.3**2)`` (200 training and 600 test rows); ``--data wide``, 40 standard-normal
features of which 5 carry a linear signal and the first a ``sin(2 x)`` too, with unit noise, 150
training and 1000 test rows (more features per row than any UCI set: a third of a feature a row,
where the posterior's spread is a large part of the predictive); ``--data columns``, 50 standard-normal
features of which 5 carry a linear signal (weights of 2), unit noise, 100 training and 1000 test rows (the input
columns' own prior precisions are then 100 hyperparameters fitted to 100 rows); ``--data many_columns``, the same
with 200 features, more columns than rows (the default network then has 10,151 weights, past the full curvature);
``--data small``, 30 training and
1000 test rows of 8 standard-normal features, ``y = sin(x_0) + x_1 - x_2**2 / 2 + x_3 x_4 / 2 + N(0, 0.3**2)`` (a
few rows a feature: most test rows lie away from every training row, where the posterior spreads most).
The families are the command line's registry
(``METHODS``), so a new family joins without an edit here; they run at the
package's defaults, as ``compare`` does, so that split 0 reproduces the main
job's table (``--quick``: ``compare --quick``'s smaller budgets). The references are ``compare``'s:
``BayesianRidge()`` and a ``GaussianProcessRegressor`` with an ARD RBF kernel
plus white noise.

Prints, per method, mean ± s.e. over the splits of the test NLL, the coverage of
the central 95% interval, RMSE and fit seconds, the NLL minus BayesianRidge's
on the same split (mean ± s.e.), and the targets of issue 17 for the networks:
on diabetes, mean NLL at most BayesianRidge's + 0.03 and mean coverage within
[0.90, 0.98]; on linear data, + 0.05 and [0.92, 0.98].
Per-fit lines go to stderr, the table to stdout.

    python benchmarks/bench_defaults_regression.py \\
        [--data diabetes|linear|friedman1|categorical|wide|columns|many_columns|small] [--methods laplace de ...] \\
        [--splits 11] [--quick] [--max-epochs N] [--set NAME=VALUE ...] [--device cpu] [--threads 1]
"""

import argparse
import sys

import numpy as np
from defaults_options import add_defaults_options, add_set_option, pin_threads, set_arguments
from sklearn.datasets import make_friedman1
from uci_protocol import fmt, mean_se

from sklearn_quinn._cli.compare import candidates, fit_and_score, split_table
from sklearn_quinn._cli.data import load_table
from sklearn_quinn._cli.methods import METHODS

# Issue 17's targets per table: how far a family's mean NLL may exceed BayesianRidge's, and the range
# of its mean coverage of the central 95% interval; None for a table without targets.
TARGETS = {"diabetes": (0.03, (0.90, 0.98)), "linear": (0.05, (0.92, 0.98)), "friedman1": None,
           "categorical": None, "wide": None, "columns": None, "many_columns": None, "small": None}
BASELINE = "sklearn-bayesian-ridge"


def linear_split(seed, n_train=300, n_test=1000, n_features=10):
    """Training and test rows of a linear model with unit Gaussian noise, drawn from ``seed``."""
    rng = np.random.RandomState(seed)
    X = rng.randn(n_train + n_test, n_features)
    y = X @ rng.randn(n_features) + rng.randn(n_train + n_test)
    return X[:n_train], X[n_train:], y[:n_train], y[n_train:]


def friedman1_split(seed, n_train=300, n_test=1000):
    """Training and test rows of Friedman's first function with unit noise, drawn from ``seed``."""
    X, y = make_friedman1(n_train + n_test, n_features=10, noise=1.0, random_state=seed)
    return X[:n_train], X[n_train:], y[:n_train], y[n_train:]


def categorical_split(seed, n_train=200, n_test=600, levels=(0.0, 2.0, -1.0, 5.0)):
    """Training and test rows of ``y = levels[k] + sin(2 x) + N(0, 0.3**2)``, the level ``k``
    one-hot encoded beside the standard-normal ``x``, drawn from ``seed``."""
    rng = np.random.RandomState(seed)
    k, x = rng.randint(len(levels), size=n_train + n_test), rng.randn(n_train + n_test)
    X = np.column_stack([np.eye(len(levels))[k], x])
    y = np.asarray(levels)[k] + np.sin(2 * x) + 0.3 * rng.randn(n_train + n_test)
    return X[:n_train], X[n_train:], y[:n_train], y[n_train:]


def wide_split(seed, n_train=150, n_test=1000, n_features=40, n_relevant=5):
    """Training and test rows of ``y = X w + sin(2 x_0) + e`` with ``n_relevant`` nonzero standard-normal
    weights of ``n_features`` and unit noise, drawn from ``seed``."""
    rng = np.random.RandomState(seed)
    X = rng.randn(n_train + n_test, n_features)
    weights = np.zeros(n_features)
    weights[:n_relevant] = rng.randn(n_relevant)
    y = X @ weights + np.sin(2 * X[:, 0]) + rng.randn(n_train + n_test)
    return X[:n_train], X[n_train:], y[:n_train], y[n_train:]


def columns_split(seed, n_train=100, n_test=1000, n_features=50, n_relevant=5):
    """Training and test rows of ``y = X w + e`` with ``n_features`` standard-normal features, the first
    ``n_relevant`` weighted 2 and the rest 0, and unit noise, drawn from ``seed``."""
    rng = np.random.RandomState(seed)
    X = rng.randn(n_train + n_test, n_features)
    y = 2.0 * X[:, :n_relevant].sum(1) + rng.randn(n_train + n_test)
    return X[:n_train], X[n_train:], y[:n_train], y[n_train:]


def many_columns_split(seed):
    """:func:`columns_split` with 200 features on its 100 training rows."""
    return columns_split(seed, n_features=200)


def small_split(seed, n_train=30, n_test=1000, n_features=8):
    """Training and test rows of ``y = sin(x_0) + x_1 - x_2**2 / 2 + x_3 x_4 / 2 + N(0, 0.3**2)`` with
    ``n_features`` standard-normal features, drawn from ``seed``."""
    rng = np.random.RandomState(seed)
    X = rng.randn(n_train + n_test, n_features)
    y = np.sin(X[:, 0]) + X[:, 1] - 0.5 * X[:, 2] ** 2 + 0.5 * X[:, 3] * X[:, 4] + 0.3 * rng.randn(n_train + n_test)
    return X[:n_train], X[n_train:], y[:n_train], y[n_train:]


SYNTHETIC = {"linear": linear_split, "friedman1": friedman1_split, "categorical": categorical_split,
             "wide": wide_split, "columns": columns_split, "many_columns": many_columns_split,
             "small": small_split}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", choices=list(TARGETS), default="diabetes")
    parser.add_argument("--splits", type=int, default=11,
                        help="splits in all: random_state 0 (the main job's) to SPLITS - 1 (default: 11)")
    add_defaults_options(parser)
    add_set_option(parser)
    args = parser.parse_args(argv)
    pin_threads(args.threads)

    if args.data == "diabetes":
        X, y, _ = load_table("diabetes")
    scores = {}  # method -> list of score dicts, one per split
    for seed in range(args.splits):
        if args.data == "diabetes":
            X_train, X_test, y_train, y_test = split_table(X, y, False, test_size=0.2, random_state=seed)
        else:
            X_train, X_test, y_train, y_test = SYNTHETIC[args.data](seed)
        for candidate in candidates(args.methods, False, X_train, quick=args.quick, max_epochs=args.max_epochs,
                                    random_state=seed, device=args.device, params=dict(args.set)):
            result = fit_and_score(candidate.estimator, X_train, y_train, X_test, y_test, False).scores
            scores.setdefault(candidate.name, []).append(result)
            print(f"split {seed} {candidate.name}: NLL {result['NLL']:.3f}  coverage {result['95% coverage']:.3f}  "
                  f"RMSE {result['RMSE']:.2f}  {result['fit s']:.1f} s", file=sys.stderr, flush=True)

    budget = "compare --quick's budgets" if args.quick else "the package's defaults"
    epochs = f", max_epochs {args.max_epochs}" if args.max_epochs else ""
    epochs += "".join(f", {text}" for text in set_arguments(args.set))
    splits = ("random 80/20 splits (random_state 0 = the main job's)" if args.data == "diabetes"
              else "draws of the training and test rows")
    print(f"{args.data}, {args.splits} {splits}, {budget}{epochs}, "
          f"{args.threads} thread(s). Mean ± s.e. over the splits.\n")
    if TARGETS[args.data] is None:
        print("| method | test NLL | 95% coverage | RMSE | fit s | NLL - BayesianRidge's |")
        print("|---|---|---|---|---|---|")
    else:
        nll_margin, coverage_range = TARGETS[args.data]
        print(f"| method | test NLL | 95% coverage | RMSE | fit s | NLL - BayesianRidge's | "
              f"NLL <= BR + {nll_margin} | coverage in [{coverage_range[0]:.2f}, {coverage_range[1]:.2f}] |")
        print("|---|---|---|---|---|---|---|---|")
    baseline = np.array([result["NLL"] for result in scores[BASELINE]])
    failures = []
    for name, results in scores.items():
        nll, coverage = (np.array([result[key] for result in results]) for key in ("NLL", "95% coverage"))
        checks = ""
        if TARGETS[args.data] is not None and name in METHODS:
            nll_ok = nll.mean() <= baseline.mean() + nll_margin
            coverage_ok = coverage_range[0] <= coverage.mean() <= coverage_range[1]
            failures += [f"{name} NLL"] * (not nll_ok) + [f"{name} coverage"] * (not coverage_ok)
            checks = f" {'yes' if nll_ok else 'NO'} | {'yes' if coverage_ok else 'NO'} |"
        elif TARGETS[args.data] is not None:
            checks = " reference | reference |"
        print(f"| {name} | {fmt(nll)} | {fmt(coverage)} | {fmt([result['RMSE'] for result in results], 2)} | "
              f"{mean_se([result['fit s'] for result in results])[0]:.1f} | {fmt(nll - baseline)} |{checks}")
    if TARGETS[args.data] is not None:
        print("\nAll targets hold." if not failures else f"\nTargets missed: {', '.join(failures)}.")

if __name__ == "__main__":
    main()
