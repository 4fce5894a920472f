"""Big tables: the sums over the training rows read from a random subset of them, or from every row.

Above ``SUBSET_ROWS`` (20,000) training rows, the Laplace evidence's updates
during the MAP training, and SWAG's SGD rate and covariance scale, are read
from a seeded uniform random subset of that many rows, each standing for its
share of the table (``sklearn_quinn/_core/row_subsets.py``). This script fits
each family of ``--methods`` at its defaults both ways side by side, one
fresh process each on one thread at the same time (the other with
``SUBSET_ROWS`` raised past the table: every row, as before), and prints fit
seconds, test NLL, 95% coverage, RMSE, the learned noise and, for SWAG, the
rate and the members' covariance scales.

The tables are ``bench_scale.py``'s, with its settings (MCMC as SGHMC with
the empirical prior): the synthetic one (``make_friedman1``, 10 features,
unit noise, 1,000,000 training rows; ``--rows`` fewer, taken from its start)
under ``--max-epochs`` (default 10, as ``bench_scale.py``), or UCI protein's
split 0 (``--table protein``, its default training).

    python benchmarks/bench_row_subsets.py [--table synthetic|protein] [--methods swag laplace ...] \\
        [--rows N] [--max-epochs 10] [--data-dir ../shared/data/uci]
"""

import argparse
import json
import subprocess
import sys
import time

from bench_scale import BIG_TABLE_PARAMS, SYNTHETIC_MAX_EPOCHS, load_table
from defaults_options import pin_threads
from uci_protocol import DEFAULT_DATA_DIR, score_fit

from sklearn_quinn._cli.methods import METHODS, make_estimator
from sklearn_quinn._core import row_subsets

MODES = ("subset", "every row")


def fit_one(method, mode, args):
    """The worker: fit ``method`` with the sums read ``mode``'s way; print one JSON line."""
    pin_threads(1)
    if mode == "every row":
        row_subsets.SUBSET_ROWS = float("inf")
    (X_train, X_test, y_train, y_test), hidden = load_table(args.table, args.data_dir)
    if args.table == "synthetic" and args.rows:
        X_train, y_train = X_train[:args.rows], y_train[:args.rows]
    max_epochs = args.max_epochs if args.table == "synthetic" else None
    estimator = make_estimator(method, False, quick=False, max_epochs=max_epochs, hidden_layer_sizes=hidden,
                               **BIG_TABLE_PARAMS.get(method, {}))
    record = score_fit(estimator, X_train, X_test, y_train, y_test)
    fitted = record.pop("estimator")
    swag = method == "swag"
    record.update(method=method, mode=mode, noise_std=getattr(fitted, "noise_std_", None),
                  lr_swag=fitted.lr_swag_ if swag else None, cov_scale=fitted.cov_scale_.tolist() if swag else None)
    print(json.dumps(record), flush=True)


def side_by_side(method, args):
    """Both modes' records of ``method``, fitted at the same time."""
    options = ["--table", args.table, "--max-epochs", str(args.max_epochs), "--data-dir", args.data_dir] \
        + (["--rows", str(args.rows)] if args.rows else [])
    workers = [subprocess.Popen([sys.executable, __file__, "--worker", method, mode, *options],
                                stdout=subprocess.PIPE, text=True) for mode in MODES]
    return [json.loads(worker.communicate()[0].strip().splitlines()[-1]) for worker in workers]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", choices=("synthetic", "protein"), default="synthetic")
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=["swag", "laplace"])
    parser.add_argument("--rows", type=int, default=None, help="training rows of the synthetic table (default: all)")
    parser.add_argument("--max-epochs", type=int, default=SYNTHETIC_MAX_EPOCHS)
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    parser.add_argument("--worker", nargs=2, metavar=("METHOD", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return fit_one(*args.worker, args)

    print(f"{args.table}, each family's two fits side by side, one thread each\n")
    print("| method | sums from | fit s | test NLL | coverage | RMSE | noise_std_ | lr_swag_ | cov_scale_ |")
    print("|---|---|---|---|---|---|---|---|---|")
    for method in args.methods:
        start = time.perf_counter()
        records = side_by_side(method, args)
        for record in records:
            rows = f"{row_subsets.SUBSET_ROWS:,} rows" if record["mode"] == "subset" else "every row"
            scales = ", ".join(f"{scale:.4g}" for scale in record["cov_scale"] or [])
            noise = "" if record["noise_std"] is None else f"{record['noise_std']:.4f}"
            rate = "" if record["lr_swag"] is None else f"{record['lr_swag']:.4g}"
            print(f"| {method} | {rows} | {record['seconds']:.0f} | {-record['ll']:.4f} | "
                  f"{record['coverage_95']:.3f} | {record['rmse']:.4f} | {noise} | {rate} | {scales} |", flush=True)
        subset, every = records
        print(f"| {method} | subset / every row | {subset['seconds'] / every['seconds']:.2f} | "
              f"{every['ll'] - subset['ll']:+.4f} | | | | | |  ({records[0]['n_train']} training rows, "
              f"{time.perf_counter() - start:.0f} s wall)", flush=True)


if __name__ == "__main__":
    main()
