"""Would the Laplace evidence choose well between the default network and its linear skip path alone?

The default backbone contains the linear model (``linear_skip=True``), and
the evidence-learned precisions should switch its hidden layer off where the
data are linear; MacKay's fixed point moves the precisions one step at a time
from the trained network, so it cannot jump to the linear model even where
that model's evidence is higher. Choosing between the two by their evidence
after the fit (MacKay 1992, "Bayesian interpolation": the evidence ranks
models) would. This script measures whether that choice would help before it
is built: on each split of the real regression tables of
``bench_real_tables.py`` and of diabetes (``compare``'s splits), it fits
``LaplaceRegressor()`` and ``LaplaceRegressor(hidden_layer_sizes=())`` (the
linear model under the same evidence-driven training) and prints, per table,
the splits where the linear model's log evidence is the higher, the paired
differences (linear minus network) of log evidence and test NLL, and the
test NLL the choice by evidence would have given against the network's.

    .venv-bench/bin/python benchmarks/bench_evidence_choice.py [--tables swiss mpg ...] [--splits 5] [--n-jobs 2]
"""

import argparse

import numpy as np
from bench_real_tables import REGRESSION, load
from defaults_options import pin_threads
from joblib import Parallel, delayed
from uci_protocol import fmt

from sklearn_quinn import LaplaceRegressor
from sklearn_quinn._cli.compare import fit_and_score, split_table
from sklearn_quinn._cli.data import load_table

TABLES = [*REGRESSION, "diabetes"]


def fit_split(table, seed, threads):
    """``(test NLL, log evidence)`` of the network and of the linear model on split ``seed`` of ``table``."""
    pin_threads(threads)
    X, y = load_table("diabetes")[:2] if table == "diabetes" else load(table)
    X_train, X_test, y_train, y_test = split_table(X, y, False, test_size=0.2, random_state=seed)
    result = {}
    for name, sizes in (("network", (50,)), ("linear", ())):
        scored = fit_and_score(LaplaceRegressor(hidden_layer_sizes=sizes, random_state=seed),
                               X_train, y_train, X_test, y_test, False)
        result[name] = (scored.scores["NLL"], float(scored.model[-1].log_marginal_likelihood()))
    return table, seed, result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", nargs="+", choices=TABLES, default=TABLES)
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    fits = Parallel(n_jobs=args.n_jobs)(delayed(fit_split)(table, seed, args.threads)
                                        for table in args.tables for seed in range(args.splits))
    print(f"LaplaceRegressor() against LaplaceRegressor(hidden_layer_sizes=()), {args.splits} random 80/20 splits a "
          "table, one thread a fit; differences linear minus network, mean ± s.e. over the splits\n")
    print("| table | splits the evidence gives the linear model | log evidence | test NLL | "
          "test NLL of the choice by evidence minus the network's |")
    print("|---|---|---|---|---|")
    chosen_all = []
    for table in args.tables:
        results = [result for name, _, result in fits if name == table]
        evidence = np.array([r["linear"][1] - r["network"][1] for r in results])
        nll = np.array([r["linear"][0] - r["network"][0] for r in results])
        chosen = np.where(evidence > 0, nll, 0.0)
        chosen_all.extend(chosen)
        print(f"| {table} | {int((evidence > 0).sum())} of {len(results)} | {fmt(evidence, 2)} | {fmt(nll)} | "
              f"{fmt(chosen)} |")
    print(f"\nOver every split: the choice by evidence minus the network, test NLL {fmt(chosen_all)} "
          f"(lower on {int((np.array(chosen_all) < 0).sum())}, higher on {int((np.array(chosen_all) > 0).sum())}).")


if __name__ == "__main__":
    main()
