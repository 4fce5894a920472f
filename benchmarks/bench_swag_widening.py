"""How far ``cov_scale='auto'`` widens SWAG's snapshots at the defaults, and whether that predicts a poor fit.

At ``lr_swag='auto'`` the collection phase runs at the largest rate the
stability cap allows, and ``cov_scale='auto'`` widens each member's Gaussian
until its draws add the misfit the Laplace posterior's do (docs/swag.rst).
A widening above ``_MAX_QUIET_WIDENING`` (100-fold) warned at the defaults
until 2026-12-05. This fits ``SWAGRegressor()`` and ``LaplaceRegressor()``
at their defaults on the regression tables of ``bench_real_tables.py``
(``compare``'s random 80/20 splits, ``Pipeline([StandardScaler(),
estimator])``, one thread a fit) and prints, per fit, the members' smallest
and largest widening, whether one is above the threshold, and SWAG's test
NLL and coverage less Laplace's on the same split; then the mean of that
difference over the fits above the threshold and over the rest.

    .venv-bench/bin/python benchmarks/bench_swag_widening.py [--tables airquality mpg ...] [--splits 3] [--n-jobs 2]
"""

import argparse

import numpy as np
from bench_real_tables import REGRESSION, load
from defaults_options import pin_threads
from joblib import Parallel, delayed
from uci_protocol import fmt

from sklearn_quinn import LaplaceRegressor, SWAGRegressor
from sklearn_quinn._cli.compare import fit_and_score, split_table
from sklearn_quinn.swag._swag import _MAX_QUIET_WIDENING


def fit_pair(table, seed):
    """SWAG's widening per member, and SWAG's and Laplace's scores, on split ``seed`` of ``table``."""
    pin_threads(1)
    X, y = load(table)
    X_train, X_test, y_train, y_test = split_table(X, y, False, test_size=0.2, random_state=seed)
    swag, laplace = (fit_and_score(estimator, X_train, y_train, X_test, y_test, False)
                     for estimator in (SWAGRegressor(random_state=seed), LaplaceRegressor(random_state=seed)))
    return table, seed, 1 / swag.model[-1].cov_scale_, swag.scores, laplace.scores


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", nargs="+", choices=list(REGRESSION), default=list(REGRESSION))
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--n-jobs", type=int, default=1, help="fits at once, in separate processes")
    args = parser.parse_args()
    results = Parallel(n_jobs=args.n_jobs)(
        delayed(fit_pair)(table, seed) for table in args.tables for seed in range(args.splits))
    print(f"| table | split | widening | above {_MAX_QUIET_WIDENING:g} | NLL - Laplace's | coverage | Laplace's |")
    print("|---|---|---|---|---|---|---|")
    differences = {True: [], False: []}
    for table, seed, widening, swag, laplace in results:
        above = bool((widening > _MAX_QUIET_WIDENING).any())
        difference = swag["NLL"] - laplace["NLL"]
        differences[above].append(difference)
        print(f"| {table} | {seed} | {widening.min():.3g} to {widening.max():.3g} | {'yes' if above else 'no'} | "
              f"{difference:+.3f} | {swag['95% coverage']:.3f} | {laplace['95% coverage']:.3f} |")
    for above, values in differences.items():
        if values:
            print(f"\nFits {'above' if above else 'within'} the threshold: {len(values)}, SWAG's NLL less "
                  f"Laplace's {fmt(np.array(values))} (mean ± s.e.)")


if __name__ == "__main__":
    main()
