"""How far SG-MCMC's draws spread against the exact posterior, at the estimator's defaults.

A linear model with unit noise, ``y = X [0.5, -1, 0.3] + 0.2 + e`` on
``--rows`` training rows of 3 standard-normal columns, fitted by
``MCMCRegressor(module=nn.Linear(3, 1), sampler=SAMPLER, prior_std=1.0,
noise_std=1.0)`` (the prior and noise of the exact posterior, the inputs and
targets as given) at every other default (batches of 200 rows, the automatic
step, 500 burn-in steps, 4 cycles, ``--thin``) but ``max_epochs=2``: the MAP
is only the chains' start, which the burn-in forgets on this posterior
(``max_epochs='auto'`` gave the same ratios on seeds 0 and 1, at eight times
the seconds). On 20 test inputs drawn at twice
the training inputs' spread, the draws' output (the noise-free part of the
predictive) against the closed-form posterior of the linear-Gaussian model:
the ratio of its std to the exact std (median over the points, and the
smallest and largest), the largest error of its mean in exact stds, and the
fit's seconds, per seed and sampler.

    python benchmarks/bench_sgmcmc_spread.py [--rows 4000 20000 100000] [--seeds 3] [--thin 1] [--threads 1]
"""

import argparse
import time

import numpy as np
from defaults_options import pin_threads
from torch import nn

from sklearn_quinn import MCMCRegressor

COEFFICIENTS = np.array([0.5, -1.0, 0.3])
INTERCEPT = 0.2


def linear_table(n_rows, seed):
    rng = np.random.RandomState(seed)
    X = rng.randn(n_rows, len(COEFFICIENTS))
    y = X @ COEFFICIENTS + INTERCEPT + rng.randn(n_rows)
    return X, y, 2 * rng.randn(20, len(COEFFICIENTS))


def exact_output(X, y, X_test):
    """The exact posterior mean and std of ``[x 1] w`` at ``X_test``, under N(0, I) on ``w`` and unit noise."""
    design = np.c_[X, np.ones(len(X))]
    covariance = np.linalg.inv(design.T @ design + np.eye(design.shape[1]))
    test = np.c_[X_test, np.ones(len(X_test))]
    return test @ covariance @ design.T @ y, np.sqrt(np.einsum("ij,jk,ik->i", test, covariance, test))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[4000, 20000, 100000])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--thin", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    pin_threads(args.threads)
    print(f"thin={args.thin}\n")
    print("| rows | sampler | seed | std ratio, median | smallest, largest | largest mean error (exact stds) | s |")
    print("|---|---|---|---|---|---|---|")
    for n_rows in args.rows:
        for sampler in ("sgld", "sghmc"):
            medians = []
            for seed in range(args.seeds):
                X, y, X_test = linear_table(n_rows, seed)
                start = time.perf_counter()
                regressor = MCMCRegressor(module=nn.Linear(3, 1), prior_std=1.0, noise_std=1.0, normalize_X=False,
                                          normalize_y=False, sampler=sampler, thin=args.thin, max_epochs=2,
                                          random_state=seed).fit(X, y)
                seconds = time.perf_counter() - start
                draws = regressor.posterior_.samples.cpu().numpy()
                outputs = draws[:, :3] @ X_test.T + draws[:, 3:]
                mean, std = exact_output(X, y, X_test)
                ratio = outputs.std(0) / std
                medians.append(np.median(ratio))
                print(f"| {n_rows} | {sampler} | {seed} | {medians[-1]:.2f} | {ratio.min():.2f}, {ratio.max():.2f} | "
                      f"{np.max(np.abs(outputs.mean(0) - mean) / std):.2f} | {seconds:.1f} |", flush=True)
            print(f"| {n_rows} | {sampler} | all | {min(medians):.2f}-{max(medians):.2f} | | | |", flush=True)


if __name__ == "__main__":
    main()
