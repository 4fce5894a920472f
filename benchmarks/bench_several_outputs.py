"""Every family at its defaults on a table of two targets with different noise.

Two targets of 200 training rows and 5 standard-normal columns: a quiet
nonlinear one, ``sin(2 x0) + x1`` plus noise of std 0.1, and a noisy linear
one, ``x2 - x3`` plus noise of std 1.0. One fit of each family takes both
(``Pipeline([StandardScaler(), estimator])``, the package's defaults,
``random_state`` the seed); ``BayesianRidge``, one fit a target, is the
reference. Prints, per family, each target's test NLL per point and 95%
coverage on 1000 test rows and its learned noise std (``noise_std_``, where
the family has one), mean over the seeds, one thread::

    python benchmarks/bench_several_outputs.py [--seeds 6] [--methods laplace de ...]

Run it under two versions of the package (``PYTHONPATH``) to pair them by seed.
"""

import argparse

import numpy as np
from defaults_options import add_defaults_options, pin_threads
from scipy.stats import norm
from sklearn.linear_model import BayesianRidge
from sklearn.multioutput import MultiOutputRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_quinn._cli.methods import METHODS, make_estimator

NOISE = np.array([0.1, 1.0])


def table(seed, n_train=200, n_test=1000):
    rng = np.random.RandomState(seed)
    X = rng.randn(n_train + n_test, 5)
    Y = np.c_[np.sin(2 * X[:, 0]) + X[:, 1], X[:, 2] - X[:, 3]] + NOISE * rng.randn(n_train + n_test, 2)
    return X[:n_train], X[n_train:], Y[:n_train], Y[n_train:]


def scores(estimator, seed):
    """Each target's test NLL and 95% coverage ``(2, 2)``, and the learned noise std ``(2,)``."""
    X_train, X_test, Y_train, Y_test = table(seed)
    model = make_pipeline(StandardScaler(), estimator).fit(X_train, Y_train)
    if isinstance(estimator, MultiOutputRegressor):
        moments = [member.predict(model[0].transform(X_test), return_std=True) for member in estimator.estimators_]
        mean, std = (np.stack(part, axis=1) for part in zip(*moments))
        noise = np.array([member.alpha_**-0.5 for member in estimator.estimators_])
    else:
        mean, std = model.predict(X_test, return_std=True)
        noise = np.ravel(getattr(estimator, "noise_std_", [np.nan, np.nan]))
    nll = -norm.logpdf(Y_test, mean, std).mean(0)
    coverage = (np.abs(Y_test - mean) <= norm.ppf(0.975) * std).mean(0)
    return np.stack([nll, coverage]), noise


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_defaults_options(parser)
    parser.add_argument("--seeds", type=int, default=6)
    args = parser.parse_args()
    pin_threads(args.threads)
    print(f"true noise std {NOISE}; {args.seeds} seeds, mean over them\n")
    print("| method | NLL quiet | NLL noisy | coverage quiet | coverage noisy | noise quiet | noise noisy |")
    print("|---|---|---|---|---|---|---|")
    rows = {"BayesianRidge": lambda seed: MultiOutputRegressor(BayesianRidge())}
    for name in args.methods:
        rows[METHODS[name].label] = lambda seed, name=name: make_estimator(
            name, False, quick=args.quick, max_epochs=args.max_epochs, random_state=seed, device=args.device)
    for label, build in rows.items():
        results = [scores(build(seed), seed) for seed in range(args.seeds)]
        score = np.mean([result[0] for result in results], axis=0)
        noise = np.mean([result[1] for result in results], axis=0)
        print(f"| {label} | {score[0, 0]:.3f} | {score[0, 1]:.3f} | {score[1, 0]:.3f} | {score[1, 1]:.3f} | "
              f"{noise[0]:.3f} | {noise[1]:.3f} |", flush=True)


if __name__ == "__main__":
    main()
