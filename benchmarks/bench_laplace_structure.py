"""Which curvature structure ``hessian_structure='auto'`` picks for a big network, at what memory and time.

A (256, 256, 256) ReLU MLP (about 140k weights) on a synthetic 20-feature
table (``make_friedman1`` with 15 noise features, unit noise), package
defaults otherwise (evidence-driven MAP training, ``--max-epochs`` of it), as
``LaplaceRegressor()`` (where 'auto' picks the Kronecker factors), with the
diagonal asked for, with its top 100 eigenpairs (``'lowrank'``), and with
``subset_of_weights='last_layer'``, and the default 1x50 network for
comparison (``--only TEXT``: the fits whose name holds TEXT). Prints, per fit, the structure chosen and
why, the weights the posterior covers, the fit's wall time, the process's peak
resident memory so far, and the test NLL and 95% coverage. One thread.

    python benchmarks/bench_laplace_structure.py [--rows 2000] [--max-epochs 200] [--only lowrank]
"""

import argparse
import resource
import time

from defaults_options import pin_threads
from sklearn.datasets import make_friedman1
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_quinn import LaplaceRegressor
from sklearn_quinn.metrics import gaussian_nll, interval_coverage


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--max-epochs", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", default="", help="run only the fits whose name holds this text")
    args = parser.parse_args(argv)
    pin_threads(args.threads)
    X, y = make_friedman1(int(args.rows / 0.8), n_features=20, noise=1.0, random_state=0)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=0)
    fits = {
        "(50,), all weights": dict(),
        "(256, 256, 256), all weights": dict(hidden_layer_sizes=(256, 256, 256)),
        "(256, 256, 256), all weights, diag": dict(hidden_layer_sizes=(256, 256, 256), hessian_structure="diag"),
        "(256, 256, 256), all weights, lowrank": dict(hidden_layer_sizes=(256, 256, 256),
                                                      hessian_structure="lowrank"),
        "(256, 256, 256), last layer": dict(hidden_layer_sizes=(256, 256, 256), subset_of_weights="last_layer"),
    }
    print(f"make_friedman1, {args.rows} training rows x 20 features, {args.max_epochs} epochs, "
          f"{args.threads} thread(s)\n")
    print("| network | structure | weights in the posterior | fit s | peak RSS GiB | test NLL | coverage | why |")
    print("|---|---|---|---|---|---|---|---|")
    for name, params in fits.items():
        if args.only not in name:
            continue
        regressor = LaplaceRegressor(max_epochs=args.max_epochs, random_state=0, **params)
        start = time.perf_counter()
        model = make_pipeline(StandardScaler(), regressor).fit(X_train, y_train)
        seconds = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # KiB on Linux
        mean, std = model.predict(X_test, return_std=True)
        print(f"| {name} | {regressor.hessian_structure_} | {regressor.posterior_.mean.shape[0]} | {seconds:.1f} | "
              f"{peak:.2f} | {gaussian_nll(y_test, mean, std):.3f} | "
              f"{interval_coverage(y_test, mean, std, 0.95):.3f} | {regressor.hessian_structure_reason_} |")


if __name__ == "__main__":
    main()
