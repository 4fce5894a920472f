"""Every family at the package's defaults on the 8 UCI regression sets, beside scikit-learn references.

Protocol in ``uci_protocol.py`` (Hernandez-Lobato & Adams 2015): the standard
90/10 splits, inputs standardised with the training split's statistics (what
``Pipeline([StandardScaler(), estimator])`` does), the target by the estimator
(``normalize_y=True``), ``random_state`` = split index; test log-likelihood per
point, RMSE and the coverage of the central 95% interval in the original target
units. The families are the command line's registry (``METHODS``), so a new
family joins without an edit here, at the package's defaults (one hidden layer
of ``n_hidden.txt`` = 50 units, the default width), or with ``--quick`` at
``compare --quick``'s smaller budgets. The references are ``compare``'s:
``BayesianRidge()`` and a ``GaussianProcessRegressor`` with an ARD RBF kernel
plus white noise, fitted on a random ``--gpr-max-rows`` of the training rows
where there are more (power, kin8nm, naval; wine above 1000).

``--set NAME=VALUE`` sets a parameter of every family away from its default
(``--set cov_scale=1.0 --methods swag``: SWAG's covariance unscaled), and
is part of a record's settings.

Splits: 20 on boston, concrete, energy, wine and yacht, 5 on power, kin8nm and
naval (``--splits N``: the first N on every set). Each finished (data set,
method, split) is appended at once as one JSON line to ``--out``; a run skips
the ones already there with the same settings, so an interrupted run continues,
and the table is made from every matching line of the file.

Prints, per data set and method, the mean 95% coverage, the mean test
log-likelihood ± s.e., RMSE and seconds per split, then the targets of issue
17: every family's mean coverage within [0.92, 0.98] on every set, no family's
mean log-likelihood below -3.5 on any set, and the best family at least the
best published figure on 6 of the 8 sets (the best published test NLL per
point, from NGBoost, deep evidential regression, concrete dropout and
Wasserstein gradient boosting, as tabled by Matsubara 2024).

    python benchmarks/bench_defaults_uci.py [--datasets boston ...] [--methods laplace de ...] \\
        [--splits N] [--quick] [--max-epochs N] [--device cpu] [--out uci-defaults.jsonl] [--n-jobs 1] [--threads 1] \\
        [--likelihood gaussian|heteroscedastic] [--set NAME=VALUE ...]

References
----------
T. Matsubara, "Wasserstein gradient boosting: a framework for
distribution-valued supervised learning", NeurIPS 2024.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
from defaults_options import add_defaults_options, add_set_option, pin_threads, set_arguments
from joblib import delayed
from records import append_as_they_end, matches, read_lines
from threadpoolctl import threadpool_limits
from uci_protocol import DEFAULT_DATA_DIR, fmt, mean_se, run_split

from sklearn_quinn._cli.benchmark import n_hidden
from sklearn_quinn._cli.methods import METHODS, make_estimator
from sklearn_quinn._cli.references import GPR_MAX_ROWS, make_reference, references_for, subsample_note
from sklearn_quinn.datasets import load_uci_split, uci_n_splits

LARGE = {"power", "kin8nm", "naval", "protein"}  # 5 splits each; the other sets 20
DATASETS = ("boston", "concrete", "energy", "kin8nm", "naval", "power", "wine", "yacht")
LIKELIHOODS = ("gaussian", "heteroscedastic")
# The best published test NLL per point of each set (Matsubara 2024, its table of
# NGBoost, deep evidential regression, concrete dropout and Wasserstein gradient boosting).
PUBLISHED_BEST_NLL = {"boston": 2.35, "concrete": 2.83, "energy": 0.53, "kin8nm": -1.24, "naval": -5.87,
                      "power": 2.60, "wine": 0.89, "yacht": 0.16}
COVERAGE_RANGE = (0.92, 0.98)
LL_FLOOR = -3.5
SETS_TO_BEAT = 6  # of the 8


def settings(args):
    """What makes two runs of a (data set, method, split) the same: a resumed run skips only these."""
    return {"quick": args.quick, "max_epochs": args.max_epochs, "device": args.device,
            "gpr_max_rows": args.gpr_max_rows, "likelihood": args.likelihood, "params": dict(args.set)}


#: What a setting was before it was recorded: Gaussian, no parameters set.
UNRECORDED = {"likelihood": "gaussian", "params": {}}


def estimator_for(method, name, args, n_features):
    if method in METHODS:
        # --set may override the protocol's hidden layer, as any other parameter.
        params = {"hidden_layer_sizes": (n_hidden(args.data_dir, name),), "likelihood": args.likelihood,
                  **dict(args.set)}
        return make_estimator(method, False, quick=args.quick, max_epochs=args.max_epochs, device=args.device,
                              **params)
    return make_reference(method, n_features, max_rows=args.gpr_max_rows)


def fit_split(estimator, data_dir, name, method, split, threads, run_settings):
    """One split as a JSON-able record (run in a worker process when ``--n-jobs`` > 1)."""
    torch.set_num_threads(threads)
    with threadpool_limits(threads):
        result = run_split(estimator, data_dir, name, split)
    del result["estimator"]
    return [{"dataset": name, "method": method, "split": split, **result, **run_settings, "threads": threads,
             "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")}]


def check(ok):
    return "yes" if ok else "NO"


def print_tables(records, datasets, methods, notes):
    """The per-set table and ``notes``, then the targets."""
    runs = {}
    for record in records:
        runs.setdefault((record["dataset"], record["method"]), []).append(record)
    print("| data set | method | splits | 95% coverage | test LL | RMSE | s / split | "
          f"coverage in [{COVERAGE_RANGE[0]:.2f}, {COVERAGE_RANGE[1]:.2f}] | LL >= {LL_FLOOR} |")
    print("|---|---|---|---|---|---|---|---|---|")
    best, failures = {}, []
    for name in datasets:
        for method in methods:
            if (name, method) not in runs:
                continue
            values = {key: [run[key] for run in runs[(name, method)]] for key in ("coverage_95", "ll", "rmse",
                                                                                  "seconds")}
            coverage, ll = np.mean(values["coverage_95"]), np.mean(values["ll"])
            if method in METHODS:
                coverage_ok, ll_ok = COVERAGE_RANGE[0] <= coverage <= COVERAGE_RANGE[1], ll >= LL_FLOOR
                failures += [f"{name} {method} coverage"] * (not coverage_ok) + [f"{name} {method} LL"] * (not ll_ok)
                checks = f"{check(coverage_ok)} | {check(ll_ok)}"
                if ll > best.get(name, (None, -np.inf))[1]:
                    best[name] = (method, ll, mean_se(values["ll"])[1])
            else:
                checks = "reference | reference"
            digits = 4 if np.mean(values["rmse"]) < 0.1 else 2
            print(f"| {name} | {method} | {len(values['ll'])} | {fmt(values['coverage_95'])} | "
                  f"{fmt(values['ll'], 2)} | {fmt(values['rmse'], digits)} | {np.mean(values['seconds']):.1f} | "
                  f"{checks} |")

    if notes:
        print("".join(f"\n{note}." for note in notes))
    print("\nThe best family of each set against the best published test LL per point (minus the published NLL):\n")
    print("| data set | best family | its test LL | best published LL | at least the published |")
    print("|---|---|---|---|---|")
    beaten = 0
    for name in datasets:
        if name not in best:
            continue
        method, ll, se = best[name]
        published = -PUBLISHED_BEST_NLL[name]
        beaten += ll >= published
        print(f"| {name} | {method} | {ll:.2f} ± {se:.2f} | {published:.2f} | {check(ll >= published)} |")
    print(f"\nBest family at least the best published figure on {beaten} of {len(best)} set(s) "
          f"(target: {SETS_TO_BEAT} of {len(PUBLISHED_BEST_NLL)}).")
    print("Coverage and LL targets all hold." if not failures else f"Targets missed: {', '.join(failures)}.")


def add_run_options(parser):
    """The options of a run of the families on the UCI sets, shared with ``bench_heteroscedastic_uci.py``."""
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR),
                        help="one folder per UCI data set (default: ../shared/data/uci beside the repository)")
    parser.add_argument("--splits", type=int,
                        help="the first N splits of every set (default: 20, and 5 on power, kin8nm, naval)")
    parser.add_argument("--gpr-max-rows", type=int, default=GPR_MAX_ROWS,
                        help=f"the GPR fits on a random subset of this many training rows (default: {GPR_MAX_ROWS})")
    parser.add_argument("--out", default="uci-defaults.jsonl",
                        help="JSON-lines results, appended as each split ends and read back to resume "
                             "(default: uci-defaults.jsonl)")
    parser.add_argument("--n-jobs", type=int, default=1, help="splits fitted at once, in separate processes")
    add_set_option(parser)
    add_defaults_options(parser, threads_help="torch and BLAS threads per process (default: 1)")


def run(args, datasets, methods):
    """Fit every (data set, method, split) of ``methods`` not yet in ``args.out`` with
    ``args``' settings; returns the records of all of them and the notes on subsampled references."""
    args.data_dir = str(Path(args.data_dir).resolve())
    run_settings = settings(args)
    done = {(r["dataset"], r["method"], r["split"]) for r in read_lines(args.out)
            if matches(r, run_settings, UNRECORDED)}
    tasks, skipped, notes = [], 0, []
    for name in datasets:
        n_splits = min(args.splits or (5 if name in LARGE else 20), uci_n_splits(args.data_dir, name))
        X_train = load_uci_split(args.data_dir, name, 0)[0]
        for method in methods:
            if method not in METHODS and (note := subsample_note(method, len(X_train), args.gpr_max_rows)):
                notes.append(f"{name}: {note}")
            estimator = estimator_for(method, name, args, X_train.shape[1])
            for split in range(n_splits):
                if (name, method, split) in done:
                    skipped += 1
                else:
                    tasks.append(delayed(fit_split)(estimator, args.data_dir, name, method, split, args.threads,
                                                    run_settings))
    print(f"{len(tasks)} split(s) to fit ({args.likelihood}), {skipped} already in {args.out}",
          file=sys.stderr, flush=True)
    append_as_they_end(args.out, tasks, args.n_jobs, lambda record: (
        f"{record['dataset']} {record['method']} ({args.likelihood}) split {record['split']}: "
        f"LL {record['ll']:.3f}  coverage {record['coverage_95']:.3f}  {record['seconds']:.1f} s"))
    return recorded(args, datasets, methods), notes


def recorded(args, datasets, methods):
    """The records in ``args.out`` of ``datasets`` and ``methods`` under ``args``' settings."""
    run_settings = settings(args)
    return [r for r in read_lines(args.out) if matches(r, run_settings, UNRECORDED)
            and r["dataset"] in datasets and r["method"] in methods]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--no-references", dest="references", action="store_false",
                        help="leave out BayesianRidge and the GPR")
    parser.add_argument("--likelihood", choices=LIKELIHOODS, default="gaussian",
                        help="the regressors' likelihood (default: gaussian)")
    add_run_options(parser)
    args = parser.parse_args(argv)
    pin_threads(args.threads)
    methods = args.methods + (references_for(False) if args.references else [])
    records, notes = run(args, args.datasets, methods)
    budget = "compare --quick's budgets" if args.quick else "the package's defaults"
    epochs = f", max_epochs {args.max_epochs}" if args.max_epochs else ""
    epochs += "".join(f", {text}" for text in set_arguments(args.set))
    print(f"UCI, {budget}{epochs}, likelihood {args.likelihood!r}, {args.threads} thread(s) per fit; "
          f"results in {args.out}. Mean ± s.e. over the splits.\n")
    print_tables(records, args.datasets, methods, notes)


if __name__ == "__main__":
    main()
