"""A model fitted on a GPU, loaded and predicting on a machine without one.

Run in two steps on two machines. On the GPU machine, ``--save PATH`` fits every
family's regressor and two classifiers with ``device='cuda'`` on a seeded
synthetic table and pickles them into one file, beside the predictions each
made there. On a CPU-only machine, ``--load PATH`` unpickles them (each warns
that it was fitted on cuda and loads on the CPU), predicts the same rows and
prints, per model, the largest relative difference from the GPU's predictions
and whether every one is within ``--rtol`` (1e-9, and 1e-12 absolute: float64
on two processors rounds differently, nothing more). tests/test_persistence.py
loads pickles of CPU fits tagged as a GPU machine writes them, and
tests/test_devices_and_dtypes.py loads a GPU fit as a CPU-only machine would
on the GPU machine itself; this is the real crossing, between two machines.

    python benchmarks/check_gpu_pickles.py --save gpu_fits.pkl   # where CUDA is
    python benchmarks/check_gpu_pickles.py --load gpu_fits.pkl   # where it is not
"""

import argparse
import pickle
import sys
import warnings

import numpy as np
import torch

from sklearn_quinn import (
    BBBRegressor,
    DeepEnsembleRegressor,
    LaplaceClassifier,
    LaplaceRegressor,
    MCDropoutRegressor,
    MCMCClassifier,
    MCMCRegressor,
    RMSRegressor,
    SMCRegressor,
    SWAGRegressor,
)

SMALL = dict(hidden_layer_sizes=(16,), max_epochs=100, random_state=0, device="cuda")
MODELS = {
    "laplace": LaplaceRegressor(**SMALL),
    "laplace-kron": LaplaceRegressor(**SMALL, hessian_structure="kron"),
    "mcmc": MCMCRegressor(**SMALL, n_chains=2, n_burnin=100, n_samples=100),
    "de": DeepEnsembleRegressor(**SMALL, n_estimators=3),
    "rms": RMSRegressor(**SMALL, n_estimators=3),
    "swag": SWAGRegressor(**SMALL),
    "bbb": BBBRegressor(**SMALL),
    "dropout": MCDropoutRegressor(**SMALL),
    "smc": SMCRegressor(hidden_layer_sizes=(8,), n_particles=64, random_state=0, device="cuda"),
    "laplace-classifier": LaplaceClassifier(**SMALL),
    "mcmc-classifier": MCMCClassifier(**SMALL, n_chains=2, n_burnin=100, n_samples=100),
}


def table():
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(400, 3))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.3 * rng.randn(400)
    return X[:300], y[:300], X[300:]


def predictions(model, X):
    """What a user reads off the model: class probabilities, or the predictive mean, std and a draw of y."""
    if hasattr(model, "predict_proba"):
        return model.predict_proba(X)
    return np.stack([*model.predict(X, return_std=True), model.sample_y(X, 1, random_state=0)[:, 0]])


def save(path):
    if not torch.cuda.is_available():
        sys.exit("--save needs a CUDA device.")
    X, y, X_test = table()
    fitted, expected = {}, {}
    for name, model in MODELS.items():
        target = (y > 0).astype(int) if hasattr(model, "predict_proba") else y
        fitted[name] = model.fit(X, target)
        expected[name] = predictions(fitted[name], X_test)
        print(f"{name}: fitted on {fitted[name]._device}", flush=True)
    with open(path, "wb") as file:
        pickle.dump({"models": fitted, "expected": expected, "X_test": X_test, "torch": torch.__version__}, file)


def load(path, rtol):
    if torch.cuda.is_available():
        sys.exit("--load is the CPU-only side: run it where torch sees no CUDA.")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with open(path, "rb") as file:
            saved = pickle.load(file)
    loaded_on_cpu = sum("fitted on cuda" in str(warning.message) for warning in caught)
    print(f"pickled under torch {saved['torch']}, loaded under torch {torch.__version__}; "
          f"{loaded_on_cpu} models warned that they were fitted on cuda and loaded on the CPU")
    print("| model | device after loading | largest relative difference | within rtol |")
    print("|---|---|---|---|")
    all_within = True
    for name, model in saved["models"].items():
        expected = saved["expected"][name]
        got = predictions(model, saved["X_test"])
        difference = np.max(np.abs(got - expected) / np.maximum(np.abs(expected), 1e-12))
        within = bool(np.allclose(got, expected, rtol=rtol, atol=1e-12))
        all_within &= within
        print(f"| {name} | {model._device} | {difference:.2e} | {'yes' if within else 'NO'} |")
    print("every model predicts on the CPU as it did on the GPU" if all_within else "SOME MODELS DIFFER")
    return 0 if all_within else 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    side = parser.add_mutually_exclusive_group(required=True)
    side.add_argument("--save", metavar="PATH", help="fit on the GPU and pickle to PATH")
    side.add_argument("--load", metavar="PATH", help="load PATH on this CPU-only machine and compare")
    parser.add_argument("--rtol", type=float, default=1e-9)
    args = parser.parse_args(argv)
    if args.save:
        save(args.save)
        return 0
    return load(args.load, args.rtol)


if __name__ == "__main__":
    sys.exit(main())
