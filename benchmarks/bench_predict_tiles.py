"""Predictions through many draws on a CPU: cache-sized tiles against the larger blocks before them.

Without gradients, ``FunctionalModel`` computes the outputs of ``S`` weight
rows on ``N`` points in pieces. On a GPU (and on the CPU before the tiles)
every row goes at once, the points in blocks whose activations hold at most
``INFERENCE_BLOCK_ELEMENTS`` (256 MiB of float64); on a CPU the outputs now go
in tiles of at most ``CPU_INFERENCE_TILE_POINTS`` points and as many rows as
keep a tile within ``CPU_INFERENCE_TILE_ELEMENTS`` (8 MiB). Each family that
predicts through weight draws is fitted once at its defaults on 500 x 8 rows
of a nonlinear table, then ``predict(X, return_std=True)`` on ``--rows`` fresh
rows runs alternately with the tiles and with the blocks (the rule a GPU
takes, swapped in for the timing), ``--repeats`` pairs; prints the median
seconds of each, their ratio (blocks / tiles), and the largest difference of
the two's means and stds (the same numbers, up to the order of the sums).

A second table times a classifier's Monte Carlo predictive over its logits
(``mc_bridge``: 1000 draws of each row's Gaussian logits, the softmax averaged)
on random Gaussians of digits' shape (1437 rows, 10 classes) and of a larger
table, in blocks of 2 MiB of draws (``MC_BLOCK_BYTES`` now) against 64 MiB
(before), alternated, median seconds and the largest difference.

    python benchmarks/bench_predict_tiles.py [--methods mcmc swag bbb dropout] \\
        [--rows 20000] [--repeats 3] [--threads 1]
"""

import argparse
import statistics
import time
import warnings

import numpy as np
import torch
from defaults_options import pin_threads

from sklearn_quinn._cli.methods import METHODS, make_estimator
from sklearn_quinn._core import link_approximations, network

#: mc_bridge's block of draws before the cache-sized one.
EARLIER_MC_BLOCK_BYTES = 2**26


def blocks_of_every_row(self, n_rows, n_points, device):
    """The rule off a CPU: every row at once, the points in blocks of INFERENCE_BLOCK_ELEMENTS."""
    return n_rows, max(1, network.INFERENCE_BLOCK_ELEMENTS // (n_rows * self.max_width))


def timed_predict(estimator, X):
    start = time.perf_counter()
    mean, std = estimator.predict(X, return_std=True)
    return time.perf_counter() - start, mean, std


def mc_bridge_table(repeats, shapes=((1437, 10), (20000, 3))):
    """Median seconds of mc_bridge in cache-sized blocks against the earlier blocks, per shape."""
    print("\n| logits (rows x classes) | blocks of 64 MiB s | blocks of 2 MiB s | ratio | largest difference |")
    print("|---|---|---|---|---|")
    generator = torch.Generator().manual_seed(0)
    now = link_approximations.MC_BLOCK_BYTES
    for n_rows, n_classes in shapes:
        mean = torch.randn(n_rows, n_classes, generator=generator, dtype=torch.float64)
        factor = torch.randn(n_rows, n_classes, n_classes, generator=generator, dtype=torch.float64)
        covariance = factor @ factor.mT / n_classes
        times, results = {now: [], EARLIER_MC_BLOCK_BYTES: []}, {}
        try:
            for _ in range(repeats):
                for block in times:
                    link_approximations.MC_BLOCK_BYTES = block
                    start = time.perf_counter()
                    results[block] = link_approximations.mc_bridge(mean, covariance, 1000,
                                                                   torch.Generator().manual_seed(1))
                    times[block].append(time.perf_counter() - start)
        finally:
            link_approximations.MC_BLOCK_BYTES = now
        earlier, cached = statistics.median(times[EARLIER_MC_BLOCK_BYTES]), statistics.median(times[now])
        difference = float((results[now] - results[EARLIER_MC_BLOCK_BYTES]).abs().max())
        print(f"| {n_rows} x {n_classes} | {earlier:.3f} | {cached:.3f} | {earlier / cached:.2f} | {difference:.1e} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=["mcmc", "swag", "bbb", "dropout"])
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    pin_threads(args.threads)

    rng = np.random.RandomState(0)
    X = rng.randn(500 + args.rows, 8)
    y = X @ rng.randn(8) + np.sin(2 * X[:, 0]) + 0.3 * rng.randn(len(X))
    X_train, y_train, X_test = X[:500], y[:500], X[500:]
    tiled_rule = network.FunctionalModel.inference_tile
    print(f"predict(X, return_std=True) on {args.rows} rows, 8 features, one hidden layer of 50; "
          f"{args.threads} thread(s); median of {args.repeats} alternating pairs.\n")
    print("| method | weight draws | blocks of every draw s | tiles s | ratio | largest difference |")
    print("|---|---|---|---|---|---|")
    for name in args.methods:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimator = make_estimator(name, False, quick=False, random_state=0).fit(X_train, y_train)
        times = {"blocks": [], "tiles": []}
        results = {}
        try:
            for _ in range(args.repeats):
                for rule, method in (("blocks", blocks_of_every_row), ("tiles", tiled_rule)):
                    network.FunctionalModel.inference_tile = method
                    seconds, *results[rule] = timed_predict(estimator, X_test)
                    times[rule].append(seconds)
        finally:
            network.FunctionalModel.inference_tile = tiled_rule
        blocks, tiles = (statistics.median(times[rule]) for rule in ("blocks", "tiles"))
        difference = max(float(np.abs(a - b).max()) for a, b in zip(results["blocks"], results["tiles"]))
        draws = getattr(estimator, "n_samples", "?")
        if name == "mcmc":
            draws = estimator.n_chains * estimator.n_samples
        print(f"| {name} | {draws} | {blocks:.2f} | {tiles:.2f} | {blocks / tiles:.2f} | {difference:.1e} |",
              flush=True)
    mc_bridge_table(args.repeats)


if __name__ == "__main__":
    main()
