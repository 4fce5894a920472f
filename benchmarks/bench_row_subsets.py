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

With ``--direct``, one SWAG member is fitted once (subsets) and its rate and
covariance scale are then read at its weights both ways, with their seconds:
the estimates' own error, apart from the different training the two fits of
the side-by-side run take.

The tables are ``bench_scale.py``'s, with its settings (MCMC as SGHMC with
the empirical prior): the synthetic one (``make_friedman1``, 10 features,
unit noise, 1,000,000 training rows; ``--rows`` fewer, taken from its start)
under ``--max-epochs`` (default 10, as ``bench_scale.py``), or UCI protein's
split 0 (``--table protein``, its default training).

    python benchmarks/bench_row_subsets.py [--table synthetic|protein] [--methods swag laplace ...] \\
        [--rows N] [--max-epochs 10] [--data-dir ../shared/data/uci] [--direct]
"""

import argparse
import json
import subprocess
import sys
import time

from bench_scale import BIG_TABLE_PARAMS, load_table, max_epochs_for
from defaults_options import pin_threads
from uci_protocol import DEFAULT_DATA_DIR, score_fit, standardise_inputs

from sklearn_quinn._cli.methods import METHODS, make_estimator
from sklearn_quinn._core import row_subsets
from sklearn_quinn.swag._rate import sampling_rate
from sklearn_quinn.swag._scale import misfit_scale

MODES = ("subset", "every row")


def table_and_estimator(method, args, **params):
    """``X_train, X_test, y_train, y_test`` of ``--table`` (the synthetic one cut to ``--rows``
    training rows) and ``method``'s estimator at the defaults there, as ``bench_scale.py`` fits it."""
    (X_train, X_test, y_train, y_test), hidden = load_table(args.table, args.data_dir)
    if args.table == "synthetic" and args.rows:
        X_train, y_train = X_train[:args.rows], y_train[:args.rows]
    estimator = make_estimator(method, False, quick=False, max_epochs=max_epochs_for(args.table, args),
                               hidden_layer_sizes=hidden, **BIG_TABLE_PARAMS.get(method, {}), **params)
    return (X_train, X_test, y_train, y_test), estimator


def fit_one(method, mode, args):
    """The worker: fit ``method`` with the sums read ``mode``'s way; print one JSON line."""
    pin_threads(1)
    if mode == "every row":
        row_subsets.SUBSET_ROWS = float("inf")
    data, estimator = table_and_estimator(method, args)
    record = score_fit(estimator, *data)
    fitted = record.pop("estimator")
    swag = method == "swag"
    record.update(method=method, mode=mode, noise_std=getattr(fitted, "noise_std_", None),
                  lr_swag=fitted.lr_swag_ if swag else None, cov_scale=fitted.cov_scale_.tolist() if swag else None)
    print(json.dumps(record), flush=True)


def direct(args):
    """Fit one SWAG member, then read its rate and covariance scale at its weights from a random
    subset of the rows and from every row; print both, their ratio and seconds."""
    pin_threads(1)
    (X_train, _, y_train, _), swag = table_and_estimator("swag", args, n_estimators=1)
    X_train = standardise_inputs(X_train, X_train)[0]
    swag.fit(X_train, y_train)
    Y = (y_train[:, None] - swag._y_mean) / swag._y_scale
    likelihood = swag.net_.criterion_.likelihood.frozen(1)
    groups, precision = swag.net_.criterion_.groups, swag.net_.criterion_.prior_precision
    theta, component = swag._model.flatten(), swag.posterior_.components[0]
    print(f"{args.table}: {len(X_train)} training rows, one SWAG member's weights\n")
    print("| read from | rate | s | misfit scale | s |")
    print("|---|---|---|---|---|")
    values = []
    for label, (X_rows, Y_rows, weight) in (("subset", row_subsets.random_subset(X_train, Y, 0)),
                                            ("every row", (X_train, Y, 1.0))):
        X_rows, Y_rows = swag._tensor(X_rows), swag._tensor(Y_rows)
        start = time.perf_counter()
        rate = sampling_rate(swag._model, theta, X_rows, Y_rows, likelihood, groups, precision, 32, weight)
        middle = time.perf_counter()
        scale = misfit_scale(swag._model, component, X_rows, Y_rows, likelihood, groups, precision, weight)
        end = time.perf_counter()
        values.append((rate, scale))
        print(f"| {label} | {rate:.5g} | {middle - start:.1f} | {scale:.5g} | {end - middle:.1f} |", flush=True)
    print(f"\nsubset / every row: rate {values[0][0] / values[1][0]:.4f}, scale {values[0][1] / values[1][1]:.4f}")


def side_by_side(method, args):
    """Both modes' records of ``method``, fitted at the same time."""
    options = ["--table", args.table, "--data-dir", args.data_dir] \
        + (["--max-epochs", str(args.max_epochs)] if args.max_epochs else []) \
        + (["--rows", str(args.rows)] if args.rows else [])
    workers = [subprocess.Popen([sys.executable, __file__, "--worker", method, mode, *options],
                                stdout=subprocess.PIPE, text=True) for mode in MODES]
    return [json.loads(worker.communicate()[0].strip().splitlines()[-1]) for worker in workers]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", choices=("synthetic", "protein"), default="synthetic")
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=["swag", "laplace"])
    parser.add_argument("--rows", type=int, default=None, help="training rows of the synthetic table (default: all)")
    parser.add_argument("--max-epochs", type=int, default=None,
                        help="training epochs (default: 10 on the synthetic table, the defaults' on protein)")
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    parser.add_argument("--direct", action="store_true",
                        help="read one SWAG member's rate and scale both ways at the same weights")
    parser.add_argument("--worker", nargs=2, metavar=("METHOD", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return fit_one(*args.worker, args)
    if args.direct:
        return direct(args)

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
