"""The bytes of a fitted model's pickle, per family, and whether it loads to the same predictions.

Every regressor at its defaults but ``max_epochs`` (the pickle's size does not
depend on the training's length) on a synthetic table of 300 rows and 40
features (2,141 weights in the default network), pickled with ``pickle.dumps``
and loaded back: megabytes, the weights ``K``, the bytes over ``8 K**2`` (one
float64 ``K x K`` matrix), and whether ``predict(X, return_std=True)`` of the
loaded model equals the fitted one's to the bit::

    python benchmarks/bench_pickle_size.py [--features 40] [--max-epochs 50]
"""

import argparse
import pickle
import warnings

import numpy as np
from defaults_options import pin_threads

import sklearn_quinn as sq

FAMILIES = [sq.LaplaceRegressor, sq.DeepEnsembleRegressor, sq.RMSRegressor, sq.SWAGRegressor, sq.BBBRegressor,
            sq.MCDropoutRegressor, sq.MCMCRegressor]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--features", type=int, default=40)
    parser.add_argument("--max-epochs", type=int, default=50)
    args = parser.parse_args()
    pin_threads(1)
    rng = np.random.RandomState(0)
    X = rng.randn(300, args.features)
    y = X[:, 0] + np.sin(X[:, 1]) + 0.3 * rng.randn(300)
    print("| family | MB | K | bytes / (8 K^2) | same predictions after loading |")
    print("|---|---|---|---|---|")
    for family in FAMILIES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted = family(max_epochs=args.max_epochs, random_state=0).fit(X, y)
        blob = pickle.dumps(fitted)
        loaded = pickle.loads(blob)
        predictions = [np.stack(model.predict(X, return_std=True)) for model in (fitted, loaded)]
        same = np.array_equal(*predictions)
        n_params = fitted._model.flatten().numel()
        print(f"| {family.__name__} | {len(blob) / 1e6:.1f} | {n_params} | {len(blob) / (8 * n_params**2):.2f} | "
              f"{same} |", flush=True)


if __name__ == "__main__":
    main()
