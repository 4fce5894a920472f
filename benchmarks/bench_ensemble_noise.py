"""The ensembles' predictive noise: the evidence's, or rescaled to their members' mean.

The deep ensemble and RMS train their members under the noise the Laplace
evidence learns with one MAP network, and predict with the noise of their
members' mean: the evidence's, each output's variance times the ratio of the
mean's residual sum of squares over the training rows to the MAP network's
(``noise_std_``). The members do not depend on which noise the predictive
adds, so one fit gives both: for every UCI split this scores the test
predictive as fitted and with the evidence's noise in its place (the
predictive variance less ``noise_std_**2`` plus the evidence's noise squared,
the noise of the last entry of ``evidence_history_``), and prints, per table
and family, the test log-likelihood per point and the 95% coverage of both,
their paired difference, and the two noises' mean ratio (mean ± standard
error over the splits; one thread a fit)::

    python benchmarks/bench_ensemble_noise.py [--datasets yacht energy] [--splits 20] \\
        [--methods de rms] [--n-jobs 2] [--data-dir ../shared/data/uci]
"""

import argparse

import numpy as np
from defaults_options import pin_threads
from joblib import Parallel, delayed
from scipy.stats import norm
from uci_protocol import DEFAULT_DATA_DIR, fmt, standardise_inputs

from sklearn_quinn import DeepEnsembleRegressor, RMSRegressor
from sklearn_quinn.datasets import load_uci_split

METHODS = {"de": DeepEnsembleRegressor, "rms": RMSRegressor}


def scores(y, mean, std):
    """Test log-likelihood per point and the 95% coverage of ``N(mean, std**2)``."""
    return float(norm.logpdf(y, mean, std).mean()), float(np.mean(np.abs(y - mean) <= norm.ppf(0.975) * std))


def fit_split(data_dir, name, method, split):
    """One split's scores with the fitted noise and with the evidence's, and the two noises."""
    pin_threads(1)
    X_train, X_test, y_train, y_test = load_uci_split(data_dir, name, split)
    X_train, X_test = standardise_inputs(X_train, X_test)
    estimator = METHODS[method](random_state=split).fit(X_train, y_train)
    mean, std = estimator.predict(X_test, return_std=True)
    # normalize_y (the default) fits the network to y over its std: the evidence's noise in y's units.
    evidence_noise = float(estimator.evidence_history_[-1]["noise_std"][0]) * y_train.std()
    noise = float(np.ravel(estimator.noise_std_)[0])
    evidence_std = np.sqrt(std**2 - noise**2 + evidence_noise**2)
    return (*scores(y_test, mean, std), *scores(y_test, mean, evidence_std), noise / evidence_noise)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["yacht", "energy", "concrete", "boston", "wine"])
    parser.add_argument("--methods", nargs="+", choices=sorted(METHODS), default=sorted(METHODS))
    parser.add_argument("--splits", type=int, default=20, help="the first splits of each table (default: 20)")
    parser.add_argument("--n-jobs", type=int, default=1, help="fits at once, one thread each (default: 1)")
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    args = parser.parse_args(argv)
    tasks = [(name, method, split) for name in args.datasets for method in args.methods
             for split in range(args.splits)]
    results = Parallel(n_jobs=args.n_jobs)(
        delayed(fit_split)(args.data_dir, name, method, split) for name, method, split in tasks)
    print("| table | family | splits | log-likelihood, members' mean's noise | with the evidence's | "
          "difference | coverage, members' mean's noise | with the evidence's | noise ratio |")
    print("|---" * 9 + "|")
    for name in args.datasets:
        for method in args.methods:
            rows = np.array([result for (table, family, _), result in zip(tasks, results)
                             if (table, family) == (name, method)])
            print(f"| {name} | {method} | {len(rows)} | {fmt(rows[:, 0])} | {fmt(rows[:, 2])} | "
                  f"{fmt(rows[:, 0] - rows[:, 2])} | {fmt(rows[:, 1])} | {fmt(rows[:, 3])} | {fmt(rows[:, 4])} |",
                  flush=True)


if __name__ == "__main__":
    main()
