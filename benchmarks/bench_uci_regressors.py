"""Deep ensemble, RMS, SWAG and BBB on UCI regression: test RMSE and log-likelihood.

Protocol in ``uci_protocol.py`` (1x50 ReLU MLP, the package's default
training: Adam at 1e-2 with cosine annealing over 1000 epochs, batches of up
to 200 rows, noise estimated). Prints mean ± s.e. over splits beside the
published deep-ensemble and VI columns of the data README, and the wall seconds
per split (fit and predict).

    python benchmarks/bench_uci_regressors.py [--methods de rms swag bbb] \\
        [--datasets concrete energy yacht boston wine] [--splits 5]
"""

import argparse

import torch
from uci_protocol import DEFAULT_DATA_DIR, fmt, reference, run_split

from sklearn_quinn import BBBRegressor, DeepEnsembleRegressor, RMSRegressor, SWAGRegressor

METHODS = {
    "de": ("DeepEnsemble (5)", DeepEnsembleRegressor()),
    "rms": ("RMS (5)", RMSRegressor()),
    "swag": ("SWAG low-rank", SWAGRegressor()),
    "bbb": ("BBB", BBBRegressor()),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    parser.add_argument("--methods", nargs="+", choices=sorted(METHODS), default=list(METHODS))
    parser.add_argument("--datasets", nargs="+", default=["concrete", "energy", "yacht", "boston", "wine"])
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    print(f"{args.splits} splits per data set, {args.threads} thread(s)\n")
    print("| data set | method | RMSE | test LL | DE LL (published) | VI LL (published) | s / split |")
    print("|---|---|---|---|---|---|---|")
    for name in args.datasets:
        for method in args.methods:
            label, estimator = METHODS[method]
            runs = [run_split(estimator, args.data_dir, name, split) for split in range(args.splits)]
            seconds = sum(run["seconds"] for run in runs) / len(runs)
            print(
                f"| {name} | {label} | {fmt([r['rmse'] for r in runs], 2)} | {fmt([r['ll'] for r in runs], 2)} | "
                f"{reference(args.data_dir, name, 'log_likelihood', 'Deep ensembles')} | "
                f"{reference(args.data_dir, name, 'log_likelihood', 'VI')} | {seconds:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
