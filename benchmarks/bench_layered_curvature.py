"""The full GGN of a network of nn.Linear layers: from the layers' inputs and output gradients against the Jacobians.

``curvature(..., 'full')`` builds the GGN of a network whose every weight
sits in an ``nn.Linear`` from the sum KFAC factors, taken exactly
(``layered_curvature``); otherwise from the per-example Jacobians. Both
routes on the same weights, one after the other, one thread, median of repeats, with
their largest relative difference. The layered route sums the output
directions (a softmax's classes) before the product, so it gains where they
are many; with one it does the Jacobians' arithmetic through larger
temporaries. The last column is the route ``curvature`` takes
(``layered_is_cheaper``).

A second table does the same for the linearised predictive's covariance
across a classifier's outputs at each row under a full posterior (the
curvature plus a unit prior): from the layers (``layered_output_covariance``,
the covariance formed from the precision's Cholesky factor first) against the
Jacobians' triangular solve through that factor (``GaussianPosterior.project``),
on all the rows (what the leave-one-out ``cov_scale`` search reads at fit) and
on a fifth of them (a test set), with the route the predictive takes
(``layered_output_covariance_is_cheaper``).

    python benchmarks/bench_layered_curvature.py [--repeats 5]
"""

import argparse

import torch
from defaults_options import pin_threads
from sklearn.datasets import load_digits
from sklearn.preprocessing import StandardScaler
from timing import median_seconds

from sklearn_quinn._core.curvature import jacobian_curvature
from sklearn_quinn._core.kronecker import (
    layered_curvature,
    layered_is_cheaper,
    layered_output_covariance,
    layered_output_covariance_is_cheaper,
)
from sklearn_quinn._core.likelihoods import CategoricalLikelihood, GaussianLikelihood
from sklearn_quinn._core.network import FunctionalModel, build_mlp
from sklearn_quinn._core.posterior import GaussianPosterior


def problems():
    """(name, model, X, Y, likelihood): digits' default classifier network, a wide-input classifier and regressor."""
    torch.manual_seed(0)
    X, y = load_digits(return_X_y=True)
    X = torch.as_tensor(StandardScaler().fit_transform(X))
    model = FunctionalModel(build_mlp(64, 10, (50,), "relu", linear_skip=True).double())
    yield "digits, 64-50-10 + skip, softmax (1797 rows)", model, X, torch.as_tensor(y[:, None]).double(), \
        CategoricalLikelihood()
    X = torch.randn(400, 1000, dtype=torch.float64)
    model = FunctionalModel(build_mlp(1000, 10, (4,), "tanh").double())
    yield "1000-4-10, softmax (400 rows)", model, X, torch.randint(0, 10, (400, 1)).double(), CategoricalLikelihood()
    model = FunctionalModel(build_mlp(1000, 1, (4,), "tanh").double())
    yield "1000-4-1, Gaussian (400 rows)", model, X, torch.randn(400, 1, dtype=torch.float64), \
        GaussianLikelihood(torch.ones(1, dtype=torch.float64))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    pin_threads(args.threads)
    print(f"{args.threads} thread(s), median of {args.repeats}\n")
    print("| network | weights | layered s | Jacobians s | ratio | max relative difference | curvature takes |")
    print("|---|---|---|---|---|---|---|")
    for name, model, X, Y, likelihood in problems():
        theta = model.flatten().detach()
        layered = median_seconds(lambda: layered_curvature(model, theta, X, Y, likelihood), args.repeats)
        jacobians = median_seconds(lambda: jacobian_curvature(model, theta, X, Y, likelihood), args.repeats)
        exact = jacobian_curvature(model, theta, X, Y, likelihood)
        difference = float((layered_curvature(model, theta, X, Y, likelihood) - exact).abs().max() / exact.abs().max())
        route = "layers" if layered_is_cheaper(model, model.single(theta, X[:1]).shape[-1]) else "Jacobians"
        print(f"| {name} | {theta.shape[0]} | {layered:.2f} | {jacobians:.2f} | {jacobians / layered:.1f} | "
              f"{difference:.1e} | {route} |", flush=True)

    print("\n| network | rows | layered s | triangular solve s | ratio | max relative difference | predictive takes |")
    print("|---|---|---|---|---|---|---|")
    for name, model, X, Y, likelihood in problems():
        theta = model.flatten().detach()
        n_outputs = model.single(theta, X[:1]).shape[-1]
        if n_outputs == 1:
            continue
        precision = layered_curvature(model, theta, X, Y, likelihood)
        precision.diagonal().add_(1.0)
        posterior = GaussianPosterior.from_precision_cholesky(theta, torch.linalg.cholesky(precision))
        for rows in (X, X[: len(X) // 5]):
            def layered():
                return layered_output_covariance(model, theta, posterior.covariance, rows)

            def solved():
                factor = posterior.project(model.jacobian(theta, rows).reshape(-1, theta.shape[0]))
                factor = factor.reshape(len(rows), n_outputs, -1)
                return factor @ factor.mT

            layered_s, solved_s = median_seconds(layered, args.repeats), median_seconds(solved, args.repeats)
            exact = solved()
            difference = float((layered() - exact).abs().max() / exact.abs().max())
            cheaper = layered_output_covariance_is_cheaper(model, len(rows), n_outputs)
            print(f"| {name} | {len(rows)} | {layered_s:.2f} | {solved_s:.2f} | {solved_s / layered_s:.1f} | "
                  f"{difference:.1e} | {'layers' if cheaper else 'triangular solve'} |", flush=True)


if __name__ == "__main__":
    main()
