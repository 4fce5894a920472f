"""Stacked ensemble training: J members as one batched model vs one member, and vs plain skorch.

On a UCI training split (default concrete, split 0, inputs standardised), a
1x50 ReLU MLP in float64, Adam, minibatches of 128 rows per member, the same
number of epochs everywhere, one torch thread. Times (median of --repeats):

- ``DeepEnsembleRegressor(n_estimators=J)``: the J members trained together;
- ``DeepEnsembleRegressor(n_estimators=1)``: one member, same code path;
- J sequential fits of skorch's ``NeuralNetRegressor`` on the same network
  (MSE loss, ``train_split=None``, skorch's default DataLoader), the way a user
  would build an ensemble with plain skorch.

Prints the times and the ratios J-stacked / one member (target <= 2) and
J-sequential-skorch / J-stacked (target >= 3).

    python benchmarks/bench_ensemble_speed.py [--members 5] [--epochs 100]
"""

import argparse

import torch
from skorch import NeuralNetRegressor
from timing import median_seconds
from uci_protocol import DEFAULT_DATA_DIR, standardise_inputs

from sklearn_quinn import DeepEnsembleRegressor
from sklearn_quinn._core.network import build_mlp
from sklearn_quinn.datasets import load_uci_split


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    parser.add_argument("--dataset", default="concrete")
    parser.add_argument("--split", type=int, default=0)
    parser.add_argument("--members", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    X, _, y, _ = load_uci_split(args.data_dir, args.dataset, args.split)
    X, _ = standardise_inputs(X, X)
    y = (y - y.mean()) / y.std()

    def ensemble(n_members):
        return DeepEnsembleRegressor(
            n_estimators=n_members, max_epochs=args.epochs, batch_size=args.batch_size, random_state=0
        )

    def skorch_members():
        for seed in range(args.members):
            torch.manual_seed(seed)
            NeuralNetRegressor(
                build_mlp(X.shape[1], 1, [50]).double(),
                max_epochs=args.epochs,
                lr=0.01,
                batch_size=args.batch_size,
                optimizer=torch.optim.Adam,
                train_split=None,
                verbose=0,
            ).fit(X, y[:, None])

    stacked = median_seconds(lambda: ensemble(args.members).fit(X, y), args.repeats)
    single = median_seconds(lambda: ensemble(1).fit(X, y), args.repeats)
    sequential = median_seconds(skorch_members, args.repeats)

    print(f"{args.dataset} split {args.split}: {len(X)} rows, 1x50 ReLU MLP, float64, "
          f"{args.epochs} epochs, batches of {args.batch_size}, {args.threads} thread(s)\n")
    print("| fit | seconds |")
    print("|---|---|")
    print(f"| DeepEnsembleRegressor, {args.members} members stacked | {stacked:.3f} |")
    print(f"| DeepEnsembleRegressor, 1 member | {single:.3f} |")
    print(f"| {args.members} sequential skorch NeuralNetRegressor fits | {sequential:.3f} |")
    print(f"\nstacked {args.members} / 1 member: {stacked / single:.2f} (target <= 2)")
    print(f"sequential skorch / stacked: {sequential / stacked:.2f}x (target >= 3)")


if __name__ == "__main__":
    main()
