"""SMC's moves with and without the acceptance floor on their step sizes.

``SMCRegressor()`` at every default, whose moves' step sizes shrink whenever a
stage's mean acceptance fell below 0.65 (``run_smc``'s ``min_acceptance``, the
default), against the same fit with the step sizes left to the jump-weighted
draw alone (``min_acceptance=None``, the engine before the floor). The two fits
of a seed run side by side in two processes of one thread each, with the same
``random_state``. Per fit: wall seconds, stages, particle gradients (rows of the
batched log-likelihood gradients), the mean acceptance of the second half of
the stages, the log evidence and the test log-likelihood; then the paired
differences (floor minus none), their means and standard errors.

Tables: the 300 x 8 table of ``bench_smc_speed.py`` (``--seeds``, 1000 test
rows each) and UCI concrete splits (``--concrete-splits``, none by default:
a few minutes a fit).

    python benchmarks/bench_smc_acceptance.py [--seeds 5] [--concrete-splits 0 1 2 3 4]
"""

import argparse
import functools
import json
import sys

import numpy as np
from bench_smc_speed import fit_counting_gradients, nonlinear_table, test_log_likelihood
from defaults_options import pin_threads
from records import side_by_side
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from uci_protocol import DEFAULT_DATA_DIR

from sklearn_quinn import SMCRegressor
from sklearn_quinn.datasets import load_uci_split
from sklearn_quinn.smc import _smc, run_smc

FLOORS = ("0.65", "none")
COLUMNS = ("seconds", "stages", "particle_gradients", "late_acceptance", "log_evidence", "log_likelihood")


def table(name, seed, data_dir):
    """``X_train, y_train, X_test, y_test`` of the 300 x 8 table's ``seed`` or a concrete split."""
    if name == "300x8":
        return nonlinear_table(seed)
    X_train, X_test, y_train, y_test = load_uci_split(data_dir, "concrete", seed)
    return X_train, y_train, X_test, y_test


def fit(name, seed, floor, data_dir):
    """One fit in this (fresh) process: a JSON line."""
    if floor == "none":
        _smc.run_smc = functools.partial(run_smc, min_acceptance=None)
    X, y, X_test, y_test = table(name, seed, data_dir)
    smc = make_pipeline(StandardScaler(), SMCRegressor(random_state=seed))
    seconds, particle_gradients = fit_counting_gradients(smc, X, y)
    acceptance = smc[-1].acceptance_history_
    print(json.dumps(dict(
        seconds=seconds, stages=smc[-1].n_stages_, particle_gradients=particle_gradients,
        late_acceptance=float(acceptance[len(acceptance) // 2:].mean()), log_evidence=smc[-1].log_evidence_,
        log_likelihood=test_log_likelihood(smc, X_test, y_test),
    )))


def compare(name, seeds, data_dir):
    print(f"### {name}\n")
    print("| seed | floor | seconds | stages | particle gradients | late acceptance | log evidence | test LL |")
    print("|---|---|---|---|---|---|---|---|")
    differences = []
    for seed in seeds:
        records = side_by_side({floor: [sys.executable, __file__, "--fit", name, str(seed), floor, "--data-dir",
                                        data_dir] for floor in FLOORS})
        for floor, record in records.items():
            print(f"| {seed} | {floor} | {record['seconds']:.0f} | {record['stages']} | "
                  f"{record['particle_gradients']:,} | {record['late_acceptance']:.2f} | "
                  f"{record['log_evidence']:.2f} | {record['log_likelihood']:.3f} |", flush=True)
        differences.append([records["0.65"][column] - records["none"][column] for column in COLUMNS])
    differences = np.array(differences)
    error = differences.std(0, ddof=1) / np.sqrt(len(seeds)) if len(seeds) > 1 else np.full(len(COLUMNS), np.nan)
    print(f"\nFloor minus none, mean ± standard error over {len(seeds)}:\n")
    for column, mean, stderr in zip(COLUMNS, differences.mean(0), error):
        print(f"- {column}: {mean:+.3f} ± {stderr:.3f}")
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5, help="seeds of the 300 x 8 table (0 for none)")
    parser.add_argument("--concrete-splits", type=int, nargs="*", default=[])
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="the UCI sets (for --concrete-splits)")
    parser.add_argument("--fit", nargs=3, metavar=("TABLE", "SEED", "FLOOR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    pin_threads(1)
    if args.fit:
        return fit(args.fit[0], int(args.fit[1]), args.fit[2], args.data_dir)
    if args.seeds:
        compare("300x8", range(args.seeds), args.data_dir)
    if args.concrete_splits:
        compare("concrete", args.concrete_splits, args.data_dir)


if __name__ == "__main__":
    main()
