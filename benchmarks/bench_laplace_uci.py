"""LaplaceRegressor (full and diag) on the standard UCI regression splits.

Protocol in ``uci_protocol.py`` (Hernandez-Lobato & Adams 2015, as the data
README gives it): inputs standardised with the training split's statistics,
the target by the estimator itself (``normalize_y=True``); one hidden layer of
``n_hidden`` ReLU units (the data set's ``n_hidden.txt``: 50, protein 100);
test RMSE and test log-likelihood per point (``norm.logpdf(y, mean, std)``
with the total predictive std) in the ORIGINAL target units, mean ± standard
error over the splits, ``random_state`` = split index. Printed beside the
published PBP and MC-dropout columns read from the data README, with the wall
seconds per split (fit + predict). Per-split figures go to stderr, the
Markdown table to stdout. Data sets whose folder is absent are skipped.

MAP-training defaults, the same for every data set and both structures:
Adam at a peak learning rate of 1e-2 annealed to 0 by a cosine schedule over
1000 epochs, minibatches of 200 ('auto'), prior std 1 on the weights of the
network that fits the standardised target, noise learned jointly with the
MAP; then the prior precision and the noise are re-tuned by the Laplace
evidence (``prior_precision='marglik'``).

    python benchmarks/bench_laplace_uci.py [--datasets concrete yacht] [--splits 5]
        [--structures full diag] [--max-epochs 1000] [--lr 1e-2] [--schedule cosine]
        [--batch-size auto] [--prior-std 1] [--prior-precision marglik]
"""

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
from uci_protocol import DEFAULT_DATA_DIR, fmt, reference, run_split

from sklearn_quinn import LaplaceRegressor
from sklearn_quinn.datasets import UCI_DATASETS, uci_n_splits


def prior_precision_arg(value):
    if value.lower() == "none":
        return None
    if value in ("marglik", "gridsearch"):
        return value
    return float(value)


def batch_size_arg(value):
    return value if value == "auto" else int(value)


def n_hidden(data_dir, name, override):
    if override is not None:
        return override
    path = Path(data_dir) / UCI_DATASETS[name] / "n_hidden.txt"
    return int(np.loadtxt(path)) if path.is_file() else 50


def make_estimator(args, structure, hidden):
    return LaplaceRegressor(
        hidden_layer_sizes=(hidden,),
        activation="relu",
        prior_std=args.prior_std,
        hessian_structure=structure,
        prior_precision=args.prior_precision,
        lr=args.lr,
        max_epochs=args.max_epochs,
        batch_size=args.batch_size,
        lr_schedule=args.schedule,
    )


def safe_reference(data_dir, name, method):
    try:
        return reference(data_dir, name, "log_likelihood", method)
    except (ValueError, KeyError):
        return "n/a"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR),
                        help="directory with one folder per UCI data set (default: ../shared/data/uci "
                             "beside the repository)")
    parser.add_argument("--datasets", nargs="+", default=["concrete", "yacht"],
                        choices=sorted(UCI_DATASETS))
    parser.add_argument("--splits", type=int, default=5, help="the first SPLITS splits (capped at n_splits)")
    parser.add_argument("--structures", nargs="+", default=["full", "diag"], choices=["full", "diag"])
    parser.add_argument("--hidden", type=int, default=None,
                        help="hidden units (default: the data set's n_hidden.txt, else 50)")
    parser.add_argument("--max-epochs", type=int, default=1000)
    parser.add_argument("--lr", type=float, default=1e-2, help="(peak) Adam learning rate")
    parser.add_argument("--schedule", choices=["cosine", "constant"], default="cosine",
                        help="learning-rate schedule over the MAP epochs")
    parser.add_argument("--batch-size", type=batch_size_arg, default="auto")
    parser.add_argument("--prior-std", type=float, default=1.0)
    parser.add_argument("--prior-precision", type=prior_precision_arg, default="marglik",
                        help="'marglik', 'gridsearch', 'none' (1 / prior_std**2) or a float")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (1 is fastest for a 1x50 network)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    data_dir = Path(args.data_dir).resolve()

    print(f"LaplaceRegressor, data {data_dir}\nMAP: Adam lr {args.lr:g} ({args.schedule}), "
          f"{args.max_epochs} epochs, batch {args.batch_size}, prior std {args.prior_std:g}; "
          f"prior precision {args.prior_precision!r}; {args.threads} thread(s)\n")
    rows = []
    for name in args.datasets:
        folder = data_dir / UCI_DATASETS[name]
        if not (folder / "data.txt").is_file():
            print(f"skipping {name}: no data under {folder}", file=sys.stderr)
            continue
        n_splits = min(args.splits, uci_n_splits(data_dir, name))
        hidden = n_hidden(data_dir, name, args.hidden)
        for structure in args.structures:
            estimator = make_estimator(args, structure, hidden)
            runs = []
            for split in range(n_splits):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    run = run_split(estimator, data_dir, name, split)
                fitted = run["estimator"]
                print(f"  {name} {structure} split {split}: RMSE {run['rmse']:.3f}  LL {run['ll']:.3f}  "
                      f"noise {fitted.noise_std_:.3g}  prior precision {fitted.prior_precision_:.3g}  "
                      f"{run['seconds']:.1f} s", file=sys.stderr, flush=True)
                runs.append(run)
            rows.append(
                f"| {name} | {structure} | {hidden} | {n_splits} | {fmt([r['rmse'] for r in runs], 2)} | "
                f"{fmt([r['ll'] for r in runs], 2)} | {safe_reference(data_dir, name, 'PBP')} | "
                f"{safe_reference(data_dir, name, 'MC dropout')} | "
                f"{np.mean([r['seconds'] for r in runs]):.1f} |"
            )

    print("| data set | structure | hidden | splits | test RMSE | test LL | PBP LL | MC dropout LL "
          "| s / split |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
