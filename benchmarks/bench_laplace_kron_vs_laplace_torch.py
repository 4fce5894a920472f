"""KFAC and last-layer Laplace: sklearn_quinn's engine against laplace-torch on the same MAP.

For each UCI data set (split 0; inputs and target standardised with training
statistics) and each network, one MAP network (ReLU, float64, no linear skip,
so that both libraries see the same plain ``nn.Sequential``) is trained once
with ``LaplaceRegressor``. Both libraries then get that network, the training
data, the MAP's observation noise and the starting prior precision 1.0, and
are timed on

- 'kron' (all weights, Kronecker-factored GGN): ours
  ``LaplaceApproximation(structure='kron')`` + ``maximise_evidence`` +
  ``posterior``; laplace-torch ``Laplace(hessian_structure='kron')`` + ``fit``
  (one full-batch loader) + ``optimize_prior_precision(method='marglik')``
  with its defaults (Adam, 100 steps);
- 'last layer' (full GGN of the final ``nn.Linear``): ours through
  ``LastLayerModel``; laplace-torch ``subset_of_weights='last_layer'``.

and on the linearised (GLM) predictive of the test rows. Each time is the
median of ``--reps`` repetitions after one warm-up, the two sides interleaved.
Test log-likelihood per point is in the original units of y, with the
observation noise added to the GLM variance.

Needs laplace-torch (see benchmarks/README.md, ``.venv-bench``) and the UCI
data (``--data-dir``, default ``../shared/data/uci`` from the repository root).

    python benchmarks/bench_laplace_kron_vs_laplace_torch.py [--threads 1] [--reps 5]
"""

import argparse
import copy
import os
import statistics
import time
import warnings

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset
from uci_protocol import DEFAULT_DATA_DIR, standardise_inputs

from sklearn_quinn import LaplaceRegressor
from sklearn_quinn._core.last_layer import LastLayerModel
from sklearn_quinn._core.likelihoods import GaussianLikelihood
from sklearn_quinn._core.network import FunctionalModel
from sklearn_quinn._core.pushforward import linear_pushforward
from sklearn_quinn.datasets import load_uci_split
from sklearn_quinn.laplace._engine import LaplaceApproximation

#: (label, our structure, subset of weights) of each comparison.
CASES = [("kron", "kron", "all"), ("last layer", "full", "last_layer")]


def timed(function):
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result


def test_log_likelihood(y, mean, variance, y_scale):
    """Mean Gaussian log-likelihood per test point, in the original units of y."""
    values = -0.5 * np.log(2 * np.pi * variance) - 0.5 * (y - mean) ** 2 / variance
    return float(values.mean() - np.log(y_scale))


def ours_fit(module, X, Y, noise, structure, subset):
    model = FunctionalModel(module)
    theta = model.flatten()
    if subset == "last_layer":
        model = LastLayerModel(model, theta, X)
        theta = model.flatten()
    laplace = LaplaceApproximation(model, theta, X, Y, GaussianLikelihood(noise), kind="ggn", structure=structure)
    prior_precision, _ = laplace.maximise_evidence(1.0)
    return model, laplace.posterior(prior_precision), prior_precision


def ours_predict(model, posterior, X):
    predictive = linear_pushforward(model, posterior, X)
    return predictive.mean[:, 0], predictive.variance[:, 0]


def theirs_fit(module, loader, noise, structure, subset):
    from laplace import Laplace

    laplace = Laplace(copy.deepcopy(module), "regression", subset_of_weights=subset, hessian_structure=structure,
                      sigma_noise=noise, prior_precision=1.0)
    laplace.fit(loader)
    laplace.optimize_prior_precision(method="marglik")
    return laplace


def theirs_predict(laplace, X):
    with torch.no_grad():
        mean, variance = laplace(X, pred_type="glm")
    return mean[:, 0], variance[:, 0, 0]


def run(name, hidden, args):
    X_train, X_test, y_train, y_test = load_uci_split(args.data_dir, name, args.split)
    X_train, X_test = standardise_inputs(X_train, X_test)
    y_mean, y_std = y_train.mean(), y_train.std()
    y_train, y_test = (y_train - y_mean) / y_std, (y_test - y_mean) / y_std
    t_map, regressor = timed(lambda: LaplaceRegressor(
        hidden_layer_sizes=hidden, linear_skip=False, max_epochs=args.epochs, normalize_y=False, random_state=0,
    ).fit(X_train, y_train))
    module = regressor.net_.module_
    noise = regressor._noise_std.detach().clone()
    X = torch.as_tensor(X_train)
    Y = torch.as_tensor(y_train).reshape(-1, 1)
    X_test = torch.as_tensor(X_test)
    loader = DataLoader(TensorDataset(X, Y), batch_size=len(X))
    n_params = sum(p.numel() for p in module.parameters())
    print(f"\n[{name}, {hidden}] {len(X)} training rows, K = {n_params}; MAP {args.epochs} epochs in {t_map:.0f} s, "
          f"noise {float(noise[0]):.4f} (standardised units)")
    rows = []
    for label, structure, subset in CASES:
        times = {"ours fit": [], "theirs fit": [], "ours predict": [], "theirs predict": []}
        for repetition in range(args.reps + 1):  # the first is a warm-up
            t_ours, (model, posterior, delta_ours) = timed(lambda: ours_fit(module, X, Y, noise, structure, subset))
            t_theirs, laplace = timed(lambda: theirs_fit(module, loader, float(noise[0]), structure, subset))
            p_ours, (mean_ours, var_ours) = timed(lambda: ours_predict(model, posterior, X_test))
            p_theirs, (mean_theirs, var_theirs) = timed(lambda: theirs_predict(laplace, X_test))
            if repetition:
                for key, value in zip(times, (t_ours, t_theirs, p_ours, p_theirs)):
                    times[key].append(value)
        medians = {key: statistics.median(values) for key, values in times.items()}
        noise_var = float(noise[0]) ** 2
        ll_ours = test_log_likelihood(y_test, mean_ours.numpy(), var_ours.numpy() + noise_var, y_std)
        ll_theirs = test_log_likelihood(y_test, mean_theirs.numpy(), var_theirs.numpy() + noise_var, y_std)
        rows.append((name, hidden, n_params, label, medians, ll_ours, ll_theirs, delta_ours,
                     float(laplace.prior_precision.mean())))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("UCI_DATA_DIR", DEFAULT_DATA_DIR))
    parser.add_argument("--datasets", nargs="+", default=["concrete", "kin8nm"])
    parser.add_argument("--networks", nargs="+", default=["50", "256,256"],
                        help="hidden layer sizes, comma-separated per network")
    parser.add_argument("--split", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=300)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    import laplace

    print(f"torch {torch.__version__}, laplace-torch {getattr(laplace, '__version__', '?')}, "
          f"{torch.get_num_threads()} thread(s), median of {args.reps} (+1 warm-up), load {os.getloadavg()}")
    rows = []
    for name in args.datasets:
        for network in args.networks:
            rows += run(name, tuple(int(width) for width in network.split(",")), args)
    print("\nfit = curvature + evidence tuning of the prior precision (+ our posterior factor); predict = GLM "
          "predictive of the test rows; median s. LL: test log-likelihood per point, original units.\n")
    print("| data | network | K | structure | fit ours s | fit theirs s | fit ratio | predict ours s | "
          "predict theirs s | LL ours | LL theirs | prior precision ours / theirs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, hidden, n_params, label, t, ll_ours, ll_theirs, delta_ours, delta_theirs in rows:
        print(f"| {name} | {hidden} | {n_params} | {label} | {t['ours fit']:.4f} | {t['theirs fit']:.4f} | "
              f"{t['ours fit'] / t['theirs fit']:.2f} | {t['ours predict']:.4f} | {t['theirs predict']:.4f} | "
              f"{ll_ours:.3f} | {ll_theirs:.3f} | {delta_ours:.3g} / {delta_theirs:.3g} |")
    print(f"\nload at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
