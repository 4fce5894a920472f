"""Calibration speed: a 50-value prior-precision grid search vs one curvature fit.

On a UCI split (default concrete, split 0), with a 1x50 ReLU MLP and the full
GGN Laplace, times (median of --repeats runs, same process, same thread count):

- one curvature fit: the GGN, its eigen decomposition and the Laplace set-up
  (``LaplaceApproximation(...)``, decomposed as the search's first call
  decomposes it), the part a refit at each grid value repeats;
- the re-scaling search: ``calibrate(reg, X_val, y_val, grid=<50 values>)``,
  which projects the validation Jacobian on the eigenvectors once and scores
  each prior precision in O(N K).

Prints both times and their ratio (target <= 1).

    python benchmarks/bench_calibration_speed.py [--dataset concrete] [--split 0]
"""

import argparse
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from timing import median_seconds

from sklearn_quinn import LaplaceRegressor
from sklearn_quinn._core.likelihoods import GaussianLikelihood
from sklearn_quinn.calibration import calibrate
from sklearn_quinn.datasets import load_uci_split
from sklearn_quinn.laplace._engine import LaplaceApproximation

ROOT = Path(__file__).resolve().parents[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data" / "uci"))
    parser.add_argument("--dataset", default="concrete")
    parser.add_argument("--split", type=int, default=0)
    parser.add_argument("--grid-size", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-epochs", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    X_train, _, y_train, _ = load_uci_split(args.data_dir, args.dataset, args.split)
    X_fit, X_val, y_fit, y_val = train_test_split(X_train, y_train, test_size=0.2, random_state=0)
    scaler = StandardScaler().fit(X_fit)
    X_fit, X_val = scaler.transform(X_fit), scaler.transform(X_val)
    reg = LaplaceRegressor(hidden_layer_sizes=(50,), max_epochs=args.max_epochs, lr=1e-2,
                           random_state=0).fit(X_fit, y_fit)
    laplace = reg._laplace
    X_t = torch.tensor(X_fit)
    Y_t = torch.tensor((y_fit[:, None] - reg._y_mean) / reg._y_scale)
    grid = np.logspace(-3, 3, args.grid_size)

    def curvature_fit():
        # The engine decomposes on first need; the search's first call takes that decomposition.
        return LaplaceApproximation(reg._model, laplace.theta, X_t, Y_t, GaussianLikelihood(reg._noise_std),
                                    "ggn", "full").eigenvalues

    def search():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            calibrate(reg, X_val, y_val, param="prior_precision", grid=grid, objective="nll")

    curvature_fit(), search()  # warm up
    curvature_seconds = median_seconds(curvature_fit, args.repeats)
    search_seconds = median_seconds(search, args.repeats)
    print(f"{args.dataset} split {args.split}: {len(X_fit)} fit rows, {len(X_val)} validation rows, "
          f"K = {laplace.n_params} weights, torch threads = {torch.get_num_threads()}")
    print(f"one curvature fit (GGN + eigh)          {curvature_seconds * 1e3:9.2f} ms")
    print(f"re-scaling search, {args.grid_size} prior precisions   {search_seconds * 1e3:9.2f} ms")
    print(f"ratio search / curvature fit            {search_seconds / curvature_seconds:9.3f}  (target <= 1)")


if __name__ == "__main__":
    main()
