"""The package's MAP training against a bare torch loop doing the same optimizer steps.

The package trains through skorch (``_map.fit_map``: the skorch net is what a
user reads as ``net_``); a bare loop runs the same steps with nothing around
them: the same module and initial weights, the same loss (the negative log
posterior per point of ``_map.NegativeLogPosterior``, fixed prior and learned
noise), Adam at ``lr=0.01`` with the cosine schedule, the same shuffled
minibatches drawn by bulk indexing. Tables: 800 x 8 rows of a linear model with
Gaussian noise, the default 1x50 ReLU network with its linear skip path,
float64, full batch (the package's default on small tables) and minibatches
of 32 (for a tenth of the epochs: 25 steps an epoch). Pairs are run
alternately on one thread; the ratio is the median over the pairs of ours /
bare. Target of issue 18: at most 1.15.

    python benchmarks/bench_training_overhead.py [--epochs 1000] [--repeats 5]
"""

import argparse
import statistics
import time

import numpy as np
import torch
from skorch.dataset import Dataset

from sklearn_quinn._core.network import build_mlp
from sklearn_quinn._map import NegativeLogPosterior, TensorBatches, fit_map, gaussian_likelihood

N_ROWS, N_FEATURES = 800, 8


def table():
    rng = np.random.RandomState(0)
    X = rng.randn(N_ROWS, N_FEATURES)
    return X, X @ rng.randn(N_FEATURES, 1) + rng.randn(N_ROWS, 1)


def fresh_module():
    torch.manual_seed(0)
    return build_mlp(N_FEATURES, 1, (50,), "relu", linear_skip=True).double()


def ours(X, Y, epochs, batch_size):
    likelihood = gaussian_likelihood(Y, None, torch.float64, "cpu")
    fit_map(fresh_module(), X, Y, prior_precision=1.0, likelihood=likelihood, lr=0.01, lr_schedule="cosine",
            max_epochs=epochs, batch_size=batch_size, optimizer=torch.optim.Adam, callbacks=None, device="cpu",
            seed=0, verbose=0)


def bare(X, Y, epochs, batch_size):
    module = fresh_module()
    criterion = NegativeLogPosterior(len(X), 1.0, gaussian_likelihood(Y, None, torch.float64, "cpu"))
    optimizer = torch.optim.Adam([*module.parameters(), *criterion.parameters()], lr=0.01)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    batches = TensorBatches(Dataset(X, Y), batch_size, shuffle=True, generator=torch.Generator().manual_seed(0))
    for _ in range(epochs):
        for X_batch, Y_batch in batches:
            optimizer.zero_grad()
            criterion(module(X_batch), Y_batch, module).backward()
            optimizer.step()
        schedule.step()


def paired_ratio(X, Y, epochs, batch_size, repeats):
    """Median seconds of ours and bare, and the median of their ratios, over alternating pairs."""
    times = {"ours": [], "bare": []}
    for _ in range(repeats):
        for name, train in (("ours", ours), ("bare", bare)):
            start = time.perf_counter()
            train(X, Y, epochs, batch_size)
            times[name].append(time.perf_counter() - start)
    ratios = [a / b for a, b in zip(times["ours"], times["bare"])]
    return statistics.median(times["ours"]), statistics.median(times["bare"]), statistics.median(ratios)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    X, Y = table()
    print(f"one thread, {args.epochs} epochs, {N_ROWS} x {N_FEATURES} rows, median of {args.repeats} pairs\n")
    print("| training | ours s | bare torch s | ours / bare | target <= 1.15 |")
    print("|---|---|---|---|---|")
    for label, batch_size in (("MAP, full batch", N_ROWS), ("MAP, minibatches of 32", 32)):
        epochs = args.epochs if batch_size == N_ROWS else max(1, args.epochs // 10)
        ours_s, bare_s, ratio = paired_ratio(X, Y, epochs, batch_size, args.repeats)
        print(f"| {label} ({epochs} epochs) | {ours_s:.2f} | {bare_s:.2f} | {ratio:.2f} | "
              f"{'yes' if ratio <= 1.15 else 'no'} |", flush=True)


if __name__ == "__main__":
    main()
