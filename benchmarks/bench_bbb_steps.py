"""Bayes by backprop on small tables: 1000 epochs against at least 4000 steps.

At the default 200-row batches a table of a few hundred rows takes one or
two steps an epoch, so 1000 epochs are 1000-2000 steps of the ELBO, a
quarter of them under the warm-up prior. ``max_epochs='auto'`` now trains
``BBBRegressor`` for at least ``AUTO_MIN_STEPS`` steps (its ``_auto_min_steps``).
The variants, each on the same splits:

- ``1000 epochs``: the count before (``max_epochs=1000``);
- ``auto``: the package's default;
- ``auto, warm-up N steps`` (with ``--warmup-steps N``): the same epochs as
  'auto', but the ELBO's learned prior switched on after ``N`` steps: whether
  the gain is the warm-up's steps or the steps after it (on the tables whose
  prior the ELBO learns, the ones with a warm-up).

The tables: ``wave``, 300 rows of ``sin(x) + (0.1 + 0.4 |x|) eps`` on
[-3, 3] fitted with ``likelihood='heteroscedastic'`` (3000 test rows, the
heteroscedastic test's table, redrawn per split), whose default prior is the
ELBO's from the evidence's MAP (``'evidence_then_elbo'``); ``wave_elbo``, the same under the ELBO's own prior
(``prior_learning='elbo'``); and bench_defaults_regression's
``linear``, ``friedman1``, ``categorical`` (200 rows) and ``wide`` (150
rows; one step an epoch on both).
Every fit in ``Pipeline([StandardScaler(), BBBRegressor(...)])``, seeded by
the split. Prints mean ± s.e. over the splits of the test NLL, the 95%
coverage and the fit seconds.

    python benchmarks/bench_bbb_steps.py [--splits 5] [--tables wave linear ...] [--warmup-steps 500] \\
        [--min-steps 8000] [--threads 1]
"""

import argparse
import time

import numpy as np
from bench_defaults_regression import SYNTHETIC
from defaults_options import pin_threads
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from uci_protocol import fmt

import sklearn_quinn.variational._bbb as bbb
from sklearn_quinn import BBBRegressor, metrics
from sklearn_quinn.datasets import make_heteroscedastic_wave


def wave_split(seed, n_train=300, n_test=3000):
    """Training and test rows of ``sin(x) + (0.1 + 0.4 |x|) eps``, ``x`` uniform on [-3, 3]."""
    X, y = make_heteroscedastic_wave(n_train + n_test, random_state=seed)
    return X[:n_train], X[n_train:], y[:n_train], y[n_train:]


TABLES = {"wave": (wave_split, {"likelihood": "heteroscedastic"}),
          "wave_elbo": (wave_split, {"likelihood": "heteroscedastic", "prior_learning": "elbo"}),
          **{name: (SYNTHETIC[name], {}) for name in ("linear", "friedman1", "categorical", "wide")}}


def score(params, split, warmup_fraction):
    """Test NLL, 95% coverage and fit seconds of one BBB fit."""
    X_train, X_test, y_train, y_test = split
    bbb.PRIOR_WARMUP_FRACTION = warmup_fraction
    model = make_pipeline(StandardScaler(), BBBRegressor(**params))
    start = time.perf_counter()
    model.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    mean, std = model.predict(X_test, return_std=True)
    return metrics.gaussian_nll(y_test, mean, std), metrics.interval_coverage(y_test, mean, std, 0.95), seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--tables", nargs="+", choices=list(TABLES), default=list(TABLES))
    parser.add_argument("--warmup-steps", type=int, help="add 'auto' with the prior learned after this many steps")
    parser.add_argument("--min-steps", type=int, help="'auto' with this minimum of steps instead of the package's")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    pin_threads(args.threads)
    if args.min_steps:
        BBBRegressor._auto_min_steps = args.min_steps
    default_warmup = bbb.PRIOR_WARMUP_FRACTION
    print(f"BBBRegressor, {args.splits} splits, {args.threads} thread(s), at least "
          f"{BBBRegressor._auto_min_steps} steps at 'auto'. Mean ± s.e. over the splits.\n")
    print("| table | variant | epochs | test NLL | 95% coverage | fit s |")
    print("|---|---|---|---|---|---|")
    for table in args.tables:
        make_split, params = TABLES[table]
        splits = [make_split(seed) for seed in range(args.splits)]
        n_rows = len(splits[0][0])
        auto_epochs = BBBRegressor()._n_epochs(n_rows, min_steps=BBBRegressor._auto_min_steps)
        variants = [("1000 epochs", 1000, default_warmup), ("auto", "auto", default_warmup)]
        if args.warmup_steps and BBBRegressor(**params)._prior_learning() != "evidence":
            steps_per_epoch = -(-n_rows // BBBRegressor()._batch_size(n_rows))
            fraction = args.warmup_steps / (auto_epochs * steps_per_epoch)
            variants.append((f"auto, warm-up {args.warmup_steps} steps", "auto", fraction))
        for name, max_epochs, warmup in variants:
            results = np.array([score({**params, "max_epochs": max_epochs, "random_state": seed}, split, warmup)
                                for seed, split in enumerate(splits)])
            epochs = auto_epochs if max_epochs == "auto" else max_epochs
            print(f"| {table} | {name} | {epochs} | {fmt(results[:, 0])} | {fmt(results[:, 1])} | "
                  f"{np.median(results[:, 2]):.1f} |", flush=True)


if __name__ == "__main__":
    main()
