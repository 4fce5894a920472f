"""Where the evidence-driven training's learned noise collapses: very small tables.

For ``bench_defaults_regression.py``'s ``small`` table (8 standard-normal
features, ``y = sin(x_0) + x_1 - x_2**2 / 2 + x_3 x_4 / 2 + N(0, 0.3**2)``,
1000 test rows) at each ``--rows`` count of training rows and each seed, two
``LaplaceRegressor`` fits in ``Pipeline([StandardScaler(), estimator])``: at
the package's defaults (the prior and the noise learned by the evidence during
the training), and with the noise fixed at the data's, 0.3 (the prior still
learned). For each it prints the noise std, the Laplace log evidence of the
fit's end state (``evidence_history_[-1]``, of the same standardised targets in
both fits, so the two compare), and the test NLL and 95% coverage; then, per
row count, how many learned noises fell below a third of the data's, and the
paired mean differences (learned minus fixed) of the log evidence and the NLL.

The question it answers: is a learned noise far below the data's the evidence's
choice, or a state the training's updates ran into? Where the learned fit's log
evidence is below the fixed-noise fit's, the training ended away from the
evidence's maximum. Until 2026-12-02 that happened where the network fitted
nearly every row: MacKay's noise ``SSE / (N - gamma)`` divided by one residual
degree of freedom once ``gamma``, the well-determined weights, passed ``N - 1``,
and the weights then trained further under that noise; since, the update leaves
the noise where it is there (docs: evidence).

    python benchmarks/bench_noise_collapse.py [--rows 20 30 60] [--seeds 12] [--threads 1]
"""

import argparse
import warnings

import numpy as np
from bench_defaults_regression import small_split
from defaults_options import pin_threads
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from uci_protocol import fmt

from sklearn_quinn import LaplaceRegressor
from sklearn_quinn.metrics import gaussian_nll, interval_coverage

#: The data's noise std, which the second fit holds fixed.
DATA_NOISE = 0.3


def fit_and_score(n_rows, seed, noise_std):
    """Noise std, end-state log evidence, test NLL and coverage of one fit."""
    X, X_test, y, y_test = small_split(seed, n_train=n_rows)
    model = make_pipeline(StandardScaler(), LaplaceRegressor(noise_std=noise_std, random_state=seed)).fit(X, y)
    mean, std = model.predict(X_test, return_std=True)
    regressor = model[-1]
    return (float(regressor.noise_std_), regressor.evidence_history_[-1]["log_evidence"],
            gaussian_nll(y_test, mean, std), interval_coverage(y_test, mean, std, 0.95))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[20, 30, 60])
    parser.add_argument("--seeds", type=int, default=12)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    pin_threads(args.threads)
    warnings.filterwarnings("ignore", category=UserWarning)
    print("| rows | seed | learned noise | log Z learned | log Z fixed | NLL learned | NLL fixed | "
          "coverage learned | coverage fixed |")
    print("|---|---|---|---|---|---|---|---|---|")
    summary = []
    for n_rows in args.rows:
        results = np.array([[*fit_and_score(n_rows, seed, None), *fit_and_score(n_rows, seed, DATA_NOISE)]
                            for seed in range(args.seeds)])
        for seed, row in enumerate(results):
            noise, evidence, nll, coverage, _, fixed_evidence, fixed_nll, fixed_coverage = row
            print(f"| {n_rows} | {seed} | {noise:.3f} | {evidence:.2f} | {fixed_evidence:.2f} | {nll:.3f} | "
                  f"{fixed_nll:.3f} | {coverage:.3f} | {fixed_coverage:.3f} |", flush=True)
        collapsed = int(np.sum(results[:, 0] < DATA_NOISE / 3))
        summary.append((n_rows, collapsed, results[:, 1] - results[:, 5], results[:, 2] - results[:, 6]))
    print(f"\nPer row count, over {args.seeds} seeds: learned noises below {DATA_NOISE / 3:.2f}, and the paired "
          "differences learned - fixed (mean ± s.e.):\n")
    print("| rows | collapsed | log Z learned - fixed | NLL learned - fixed |")
    print("|---|---|---|---|")
    for n_rows, collapsed, evidence, nll in summary:
        print(f"| {n_rows} | {collapsed} of {args.seeds} | {fmt(evidence, 2)} | {fmt(nll)} |")


if __name__ == "__main__":
    main()
