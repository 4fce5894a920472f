"""Every family on a big table: fit time, peak memory and test NLL.

Two tables: UCI protein (its split 0: 41,157 training and 4,573 test rows,
9 features, one hidden layer of 100 units as the protocol's ``n_hidden.txt``
says) and a synthetic one of 1,000,000 training and 100,000 test rows
(``make_friedman1`` with 10 features, 5 of them noise, and unit Gaussian noise,
so the true model's test NLL is 0.5 log(2 pi e) = 1.419).

Each family is fitted at the package's defaults in a fresh process of its own,
so that its peak resident memory (the kernel's high-water mark of that
process, polled every half second and read by the process at its end) is its own. ``MCMCRegressor`` runs with
``sampler='sghmc'``, its mode for big tables (full-data HMC takes one pass
over every row per leapfrog step), and ``hyperprior='empirical'`` (the Gibbs
draws of the default hyperprior would need those passes too). A process still running after ``--timeout``
seconds (default 900, the 15 minutes issue 20 allows on protein) or above
``--max-memory`` GiB (default 8) is killed and recorded as such. On the
synthetic table the default ``max_epochs='auto'`` is 40 epochs (its cap of
200,000 minibatch steps; a fixed 1000 would be 5 million), more than fits in
the time limit with the evidence updates, so ``--max-epochs`` (default there
10) caps the training; SWAG's SGD phase keeps its defaults, 100 periods of
2,000 steps of 32 rows (its own cap of 200,000 steps).

Each finished (table, method) is appended as one JSON line to ``--out``; a
run skips those already there with the same settings. Prints one table per
data set: seconds, peak GiB, test NLL, 95% coverage, RMSE, and whether the
fit stayed within the limits.

    python benchmarks/bench_scale.py [--tables protein synthetic] [--methods laplace ...] \\
        [--timeout 900] [--max-memory 8] [--max-epochs N] [--set NAME=VALUE ...] [--out scale.jsonl] \\
        [--threads 1]
"""

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

from defaults_options import add_set_option, pin_threads, set_arguments
from records import matches, read_lines
from sklearn.datasets import make_friedman1
from uci_protocol import DEFAULT_DATA_DIR, score_fit

from sklearn_quinn._cli.benchmark import n_hidden
from sklearn_quinn._cli.methods import METHODS, make_estimator
from sklearn_quinn.datasets import load_uci_split

TABLES = ("protein", "synthetic")
SYNTHETIC_ROWS = (1_000_000, 100_000)  # training, test
SYNTHETIC_MAX_EPOCHS = 10
BIG_TABLE_PARAMS = {"mcmc": {"sampler": "sghmc", "hyperprior": "empirical"}}
POLL_SECONDS = 0.5


def load_table(table, data_dir):
    """``X_train, X_test, y_train, y_test`` of ``table`` and the hidden layer sizes the table's protocol uses."""
    if table == "protein":
        return load_uci_split(data_dir, "protein", 0), (n_hidden(data_dir, "protein"),)
    n_train, n_test = SYNTHETIC_ROWS
    X, y = make_friedman1(n_train + n_test, n_features=10, noise=1.0, random_state=0)
    return (X[:n_train], X[n_train:], y[:n_train], y[n_train:]), (50,)


def max_epochs_for(table, args):
    return args.max_epochs or (SYNTHETIC_MAX_EPOCHS if table == "synthetic" else None)


def fit_one(table, method, args):
    """The worker: fit ``method`` on ``table`` and print its record as one JSON line."""
    pin_threads(args.threads)
    data, hidden = load_table(table, args.data_dir)
    estimator = make_estimator(method, False, quick=False, **{"max_epochs": max_epochs_for(table, args),
                                                              "hidden_layer_sizes": hidden, **params(method, args)})
    record = score_fit(estimator, *data)
    del record["estimator"]
    record["worker_peak_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # KiB on Linux
    print(json.dumps(record), flush=True)


def params(method, args):
    """The parameters of ``method`` away from its defaults: its big-table mode, then ``--set``'s (which
    may override the table's ``hidden_layer_sizes`` and ``max_epochs`` too)."""
    return {**BIG_TABLE_PARAMS.get(method, {}), **dict(args.set)}


def peak_gib(pid):
    """The high-water mark of ``pid``'s resident memory in GiB (0 once it has gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    line = next((line for line in status.splitlines() if line.startswith("VmHWM:")), "VmHWM: 0 kB")
    return int(line.split()[1]) / 1024**2


def run_in_process(table, method, args):
    """Run the worker of (``table``, ``method``) in a fresh process under the time and memory limits."""
    command = [sys.executable, __file__, "--worker", table, method, "--data-dir", args.data_dir,
               "--threads", str(args.threads)] + (["--max-epochs", str(args.max_epochs)] if args.max_epochs else []) \
        + (["--set", *set_arguments(args.set)] if args.set else [])
    start, peak, stopped = time.perf_counter(), 0.0, None
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    while process.poll() is None:
        peak = max(peak, peak_gib(process.pid))
        if peak > args.max_memory:
            stopped = f"killed above {args.max_memory:g} GiB"
        elif time.perf_counter() - start > args.timeout:
            stopped = f"killed after {args.timeout:g} s"
        if stopped:
            process.kill()
            break
        time.sleep(POLL_SECONDS)
    output = process.communicate()[0]
    record = {"seconds": time.perf_counter() - start}
    if stopped is None and process.returncode == 0:
        record = json.loads(output.strip().splitlines()[-1])
        peak = max(peak, record.pop("worker_peak_gib"))  # a peak in the last half second escapes the polling
    else:
        record["failed"] = stopped or f"exit status {process.returncode}"
    return {"table": table, "method": method, **record, "peak_gib": peak, **settings(table, args)}


def settings(table, args):
    return {"max_epochs": max_epochs_for(table, args), "threads": args.threads, "timeout": args.timeout,
            "max_memory": args.max_memory, "params": BIG_TABLE_PARAMS, "set": dict(args.set)}


def print_table(table, records, args):
    limits = f"{args.timeout:g} s and {args.max_memory:g} GiB"
    print(f"\n{table}: {records[0].get('n_train', '?')} training rows, max_epochs "
          f"{max_epochs_for(table, args) or 'default'}, {args.threads} thread(s)\n")
    print(f"| method | fit + predict s | peak GiB | test NLL | 95% coverage | RMSE | within {limits}, finite |")
    print("|---|---|---|---|---|---|---|")
    for record in records:
        if "failed" in record:
            print(f"| {record['method']} | > {record['seconds']:.0f} | {record['peak_gib']:.2f} | - | - | - | "
                  f"NO ({record['failed']}) |")
            continue
        within = (record["seconds"] <= args.timeout and record["peak_gib"] <= args.max_memory
                  and math.isfinite(record["ll"]))
        print(f"| {record['method']} | {record['seconds']:.0f} | {record['peak_gib']:.2f} | {-record['ll']:.3f} | "
              f"{record['coverage_95']:.3f} | {record['rmse']:.3f} | {'yes' if within else 'NO'} |")
    if table == "synthetic":
        print(f"\nThe true model's test NLL: {0.5 * math.log(2 * math.pi * math.e):.3f}.")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", nargs="+", choices=TABLES, default=list(TABLES))
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS))
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds before a fit is killed")
    parser.add_argument("--max-memory", type=float, default=8.0, help="GiB of resident memory before it is killed")
    parser.add_argument("--max-epochs", type=int, help="training epochs (default: the package's; 10 on synthetic)")
    parser.add_argument("--out", default="scale.jsonl")
    parser.add_argument("--threads", type=int, default=1)
    add_set_option(parser)
    parser.add_argument("--worker", nargs=2, metavar=("TABLE", "METHOD"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return fit_one(*args.worker, args)
    done = read_lines(args.out)
    for table in args.tables:
        records = []
        for method in args.methods:
            record = next((r for r in done if r["table"] == table and r["method"] == method
                           and matches(r, settings(table, args), {"set": {}})), None)
            if record is None:
                record = run_in_process(table, method, args)
                with open(args.out, "a") as file:
                    file.write(json.dumps(record) + "\n")
                print(f"{table} {method}: {record}", file=sys.stderr, flush=True)
            records.append(record)
        print_table(table, records, args)


if __name__ == "__main__":
    main()
