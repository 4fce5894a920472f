"""How a Laplace fit on a UCI set moves with the shape of the input columns' hyperprior.

``LaplaceRegressor`` at the package's defaults (``--likelihood`` gaussian or
heteroscedastic) on the first ``--splits`` standard splits of ``--dataset``,
under each ``--shapes`` value of the Gamma hyperprior's shape on the input
columns' precisions (``sklearn_quinn._core.evidence.COLUMN_SHAPE``; 0 is
MacKay's plain fixed point, no hyperprior), the UCI protocol's scores
(``uci_protocol.score_fit``). Prints each fit's test log-likelihood per point
and 95% coverage, then per shape the mean log-likelihood and its paired
difference from the first shape's (mean ± s.e. over the splits).

The question it answers: does a change the hyperprior makes grow with its
shape (the hyperprior's weight against the data), or does any hyperprior at
all tip the fit into another mode (a fit near a fork of its training's paths)?

    python benchmarks/bench_column_shape.py [--dataset yacht] [--likelihood heteroscedastic] \\
        [--shapes 0 0.0001 0.01 0.25 0.5 1] [--splits 10] [--threads 1]
"""

import argparse

import numpy as np
from defaults_options import pin_threads
from uci_protocol import DEFAULT_DATA_DIR, fmt, score_fit

from sklearn_quinn import LaplaceRegressor
from sklearn_quinn._core import evidence
from sklearn_quinn.datasets import load_uci_split


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="yacht")
    parser.add_argument("--likelihood", choices=["gaussian", "heteroscedastic"], default="heteroscedastic")
    parser.add_argument("--shapes", nargs="+", type=float, default=[0.0, 0.0001, 0.01, 0.25, 0.5, 1.0])
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    pin_threads(args.threads)

    ll = np.empty((len(args.shapes), args.splits))
    for split in range(args.splits):
        data = load_uci_split(args.data_dir, args.dataset, split)
        for row, shape in enumerate(args.shapes):
            evidence.COLUMN_SHAPE = shape
            record = score_fit(LaplaceRegressor(likelihood=args.likelihood), *data, random_state=split)
            ll[row, split] = record["ll"]
            print(f"split {split} shape {shape:g}: LL {record['ll']:.3f}  coverage {record['coverage_95']:.3f}",
                  flush=True)

    print(f"\n{args.dataset}, {args.likelihood} Laplace, {args.splits} splits: test log-likelihood per point, "
          f"and its paired difference from shape {args.shapes[0]:g}'s (mean ± s.e.)")
    print("\n| shape | LL | difference |\n|---|---|---|")
    for row, shape in enumerate(args.shapes):
        print(f"| {shape:g} | {fmt(ll[row])} | {fmt(ll[row] - ll[0])} |")


if __name__ == "__main__":
    main()
