"""MCDropoutRegressor at its defaults on the standard UCI regression splits.

Protocol in ``uci_protocol.py`` (Hernandez-Lobato & Adams 2015): inputs
standardised with the training split's statistics, the target by the estimator
(``normalize_y=True``); test log-likelihood per point (``norm.logpdf`` with the
total predictive std), RMSE and the coverage of the central 95% interval, in
the original target units, mean ± standard error over the splits,
``random_state`` = split index. The estimator runs at the package's defaults
(one hidden layer of 50 ReLU units, the rates learned from 0.1 as Concrete
dropout, ``max_epochs='auto'`` (1000 epochs of Adam on these sets), the prior and the noise learned by the Laplace
evidence, 100 mask draws; ``--dropout-rate 0.1`` fixes the rate). The published MC
dropout figures of Gal and Ghahramani (2016) are read from the data README for
comparison (they tuned the rate and the noise precision per data set, and used
the data set's hidden width). Per-split figures go to stderr, the table to stdout.

    python benchmarks/bench_dropout_uci.py [--datasets yacht boston] [--splits 5] [--dropout-rate auto]
"""

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
from uci_protocol import DEFAULT_DATA_DIR, fmt, reference, run_split

from sklearn_quinn import MCDropoutRegressor
from sklearn_quinn.datasets import UCI_DATASETS, uci_n_splits


def published(data_dir, name, metric):
    try:
        return reference(data_dir, name, metric, "MC dropout")
    except (ValueError, KeyError):
        return "n/a"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR),
                        help="one folder per UCI data set (default: ../shared/data/uci beside the repository)")
    parser.add_argument("--datasets", nargs="+", default=["yacht", "boston"], choices=sorted(UCI_DATASETS))
    parser.add_argument("--splits", type=int, default=5, help="the first SPLITS splits (capped at n_splits)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--dropout-rate", default="auto", type=lambda rate: rate if rate == "auto" else float(rate),
                        help="'auto' (the default: learned) or a fixed rate")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    data_dir = Path(args.data_dir).resolve()

    estimator = MCDropoutRegressor(dropout_rate=args.dropout_rate)
    print(f"MCDropoutRegressor(dropout_rate={args.dropout_rate!r}), data {data_dir}; {args.threads} thread(s)\n")
    rows = []
    for name in args.datasets:
        if not (data_dir / UCI_DATASETS[name] / "data.txt").is_file():
            print(f"skipping {name}: no data under {data_dir / UCI_DATASETS[name]}", file=sys.stderr)
            continue
        n_splits = min(args.splits, uci_n_splits(data_dir, name))
        runs = []
        for split in range(n_splits):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                run = run_split(estimator, data_dir, name, split)
            print(f"  {name} split {split}: LL {run['ll']:.3f}  RMSE {run['rmse']:.3f}  "
                  f"coverage {run['coverage_95']:.3f}  noise {run['estimator'].noise_std_:.3g}  "
                  f"rates {np.array2string(run['estimator'].dropout_rates_, precision=4)}  "
                  f"{run['seconds']:.1f} s", file=sys.stderr, flush=True)
            runs.append(run)
        rows.append(
            f"| {name} | {n_splits} | {fmt([r['ll'] for r in runs], 2)} | {fmt([r['rmse'] for r in runs], 2)} | "
            f"{fmt([r['coverage_95'] for r in runs], 3)} | {published(data_dir, name, 'log_likelihood')} | "
            f"{published(data_dir, name, 'rmse')} | {np.mean([r['seconds'] for r in runs]):.1f} |"
        )
    print("| data set | splits | test LL | test RMSE | 95% coverage | published MC dropout LL "
          "| published MC dropout RMSE | s / split |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
