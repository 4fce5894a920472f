"""Targets without noise: what each family's predictive says of a target it can fit exactly.

Two targets on 100 standard-normal rows of 3 features: ``y = 5`` everywhere and
``y = 2 x_0 + 1``, no noise. Each regressor at the package's defaults, but
``max_epochs`` (300) and shorter samplers (MCMC 200 burn-in steps and 200
draws, SMC 64 particles), with ``likelihood='heteroscedastic'``
(``--likelihoods`` to add the Gaussian one), and scikit-learn's
``BayesianRidge`` for reference. Prints, per target and family, the largest
absolute error of the mean and the largest predictive std over the training
rows, the largest aleatoric and epistemic stds (``predict_uncertainty``) and
the seconds of the fit: on a target fitted exactly, a std far above the mean's
error is a noise the data never had.

Until 2026-12-06 a heteroscedastic MAP training drove such a target's noise head
past the clip's lower bound, where the Laplace posterior of the head is its
prior, and Laplace, the deep ensemble, RMS and SWAG predicted stds of 900 to
22,000 (docs: heteroscedastic, "Targets fitted exactly"); to see them, run this
script with a checkout of commit 808665e first on ``PYTHONPATH``.

    python benchmarks/bench_exact_fits.py [--methods laplace de ...] [--likelihoods gaussian heteroscedastic] \\
        [--max-epochs 300] [--threads 1]
"""

import argparse
import time
import warnings

import numpy as np
from defaults_options import pin_threads
from sklearn.linear_model import BayesianRidge

from sklearn_quinn._cli.methods import METHODS, make_estimator

#: The samplers' shorter runs; every other setting is the package's default.
SHORTER = {"mcmc": dict(n_samples=200, n_burnin=200), "smc": dict(n_particles=64)}


def targets(n_rows=100, seed=0):
    X = np.random.RandomState(seed).randn(n_rows, 3)
    yield "y = 5", X, np.full(n_rows, 5.0)
    yield "y = 2 x0 + 1", X, 2 * X[:, 0] + 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS))
    parser.add_argument("--likelihoods", nargs="+", choices=["gaussian", "heteroscedastic"],
                        default=["heteroscedastic"])
    parser.add_argument("--max-epochs", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    pin_threads(args.threads)
    warnings.simplefilter("ignore")
    print(f"max_epochs={args.max_epochs}, {args.threads} thread(s); largest over the 100 training rows\n")
    print("| target | method | likelihood | mean's error | std | aleatoric std | epistemic std | s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, X, y in targets():
        mean, std = BayesianRidge().fit(X, y).predict(X, return_std=True)
        print(f"| {name} | BayesianRidge | gaussian | {np.abs(mean - y).max():.1e} | {std.max():.1e} | | | |")
        for method in args.methods:
            for likelihood in args.likelihoods:
                start = time.perf_counter()
                model = make_estimator(method, False, quick=False, max_epochs=args.max_epochs, likelihood=likelihood,
                                       **SHORTER.get(method, {})).fit(X, y)
                parts = model.predict_uncertainty(X)
                print(f"| {name} | {method} | {likelihood} | {np.abs(parts.mean - y).max():.1e} | "
                      f"{parts.std.max():.1e} | {parts.aleatoric_std.max():.1e} | "
                      f"{parts.epistemic_std.max():.1e} | {time.perf_counter() - start:.0f} |", flush=True)


if __name__ == "__main__":
    main()
