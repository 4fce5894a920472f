"""Every classifier with every predictive on scikit-learn's bundled data: NLL, accuracy, ECE.

Data: iris, wine, breast cancer, digits; ``--splits`` stratified 70/30 splits
(``random_state`` = split), inputs standardised on the training part. Backbone:
1x50 ReLU MLP, the package's default training (Adam 1e-2, cosine annealing,
1000 epochs). Rows: the MAP network alone (softmax of the MAP weights, the
baseline), then each classifier with its default predictive and with every
analytic predictive (Laplace: on its linearised Gaussian over the logits; the
families with weight draws: on the Gaussian moment-matched to the draws'
logits). Each fitted model is reused for all its predictives. Prints mean ±
s.e. over splits of test NLL, accuracy and ECE (15 bins), fit seconds, and
the paired comparison with the MAP network: mean ± s.e. over splits of the
row's NLL minus the MAP's on the same split, and on how many splits the
row's NLL is the lower.

A second table diagnoses the MAP network itself: its test NLL with the logits
divided by a temperature T. A best T below 1 means the MAP is under-confident
on that data set, and then no Gaussian centred on it (Laplace, SWAG, members
that all reach the same function) can lower its NLL: averaging over such a
Gaussian only spreads the logits further.

    python benchmarks/bench_classifiers.py [--datasets iris wine breast_cancer digits] [--splits 5]
"""

import argparse
import time

import numpy as np
import torch
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from uci_protocol import fmt

from sklearn_quinn import (
    BBBClassifier,
    DeepEnsembleClassifier,
    LaplaceClassifier,
    MCMCClassifier,
    RMSClassifier,
    SMCClassifier,
    SWAGClassifier,
)
from sklearn_quinn._core.link_approximations import PREDICTIVES
from sklearn_quinn.calibration import calibrate_cv
from sklearn_quinn.metrics import accuracy, categorical_nll, expected_calibration_error

CROSS_VALIDATED = {"Laplace (full GGN, 5-fold CV prior)"}  # fitted by calibrate_cv
TEMPERATURES = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
LOADERS = {"iris": load_iris, "wine": load_wine, "breast_cancer": load_breast_cancer, "digits": load_digits}
CLASSIFIERS = {
    "Laplace (full GGN, marglik)": (LaplaceClassifier(prior_precision="marglik"), "mc_bridge"),
    "Laplace (full GGN, held-out NLL grid)": (LaplaceClassifier(prior_precision="gridsearch"), "mc_bridge"),
    "Laplace (full GGN, 5-fold CV prior)": (LaplaceClassifier(), "mc_bridge"),
    "DeepEnsemble (5)": (DeepEnsembleClassifier(), None),
    "RMS (5)": (RMSClassifier(), None),
    "SWAG": (SWAGClassifier(), None),
    "BBB": (BBBClassifier(), None),
    "MCMC (HMC, 4 x 500)": (MCMCClassifier(), None),
    "SMC (200 particles)": (SMCClassifier(), None),
}


def split(name, seed):
    X, y = LOADERS[name](return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=seed, stratify=y)
    scaler = StandardScaler().fit(X_train)
    return scaler.transform(X_train), scaler.transform(X_test), y_train, y_test


def scores(y_test, proba, classes):
    return {
        "nll": categorical_nll(y_test, proba, labels=classes),
        "accuracy": accuracy(y_test, proba, labels=classes),
        "ece": expected_calibration_error(y_test, proba, labels=classes),
    }


def predictive_rows(estimator, default, X_test, y_test):
    """Scores of every predictive the fitted ``estimator`` offers, by row label."""
    proba = estimator.predict_proba(X_test)
    rows = {f"default ({default or 'softmax average'})": scores(y_test, proba, estimator.classes_)}
    gaussian = isinstance(estimator, LaplaceClassifier)
    for name in PREDICTIVES:
        if name == default:
            continue
        params = {"predictive": name} if gaussian else {"predictive": name, "moment_match": True}
        proba = estimator.set_params(**params).predict_proba(X_test)
        label = name if gaussian else f"{name} (moment-matched)"
        rows[label] = scores(y_test, proba, estimator.classes_)
    estimator.set_params(**({"predictive": default} if gaussian else {"predictive": None, "moment_match": False}))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", choices=sorted(LOADERS), default=list(LOADERS))
    parser.add_argument("--methods", nargs="+", default=list(CLASSIFIERS))
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    print(f"{args.splits} stratified 70/30 splits per data set, 1x50 ReLU MLP, {args.threads} thread(s)\n")
    print("| data set | method | predictive | test NLL | accuracy | ECE (15 bins) | fit s | NLL - MAP's | lower |")
    print("|---|---|---|---|---|---|---|---|---|")
    tempered = {}
    for data in args.datasets:
        results, seconds = {}, {}
        for seed in range(args.splits):
            X_train, X_test, y_train, y_test = split(data, seed)
            for method in ["MAP network"] + args.methods:
                if method == "MAP network":
                    estimator, default = LaplaceClassifier(random_state=seed), None
                else:
                    template, default = CLASSIFIERS[method]
                    estimator = template.set_params(random_state=seed)
                start = time.perf_counter()
                if method in CROSS_VALIDATED:
                    estimator, _ = calibrate_cv(estimator, X_train, y_train, param="prior_precision")
                else:
                    estimator.fit(X_train, y_train)
                seconds.setdefault(method, []).append(time.perf_counter() - start)
                if method == "MAP network":
                    with torch.no_grad():
                        logits = estimator._model.single(estimator.posterior_.mean, torch.as_tensor(X_test))
                    rows = {"softmax of the MAP": scores(y_test, torch.softmax(logits, -1).numpy(), estimator.classes_)}
                    for temperature in TEMPERATURES:
                        proba = torch.softmax(logits / temperature, -1).numpy()
                        nll = categorical_nll(y_test, proba, labels=estimator.classes_)
                        tempered.setdefault(data, {}).setdefault(temperature, []).append(nll)
                else:
                    rows = predictive_rows(estimator, default, X_test, y_test)
                for label, values in rows.items():
                    for metric, value in values.items():
                        results.setdefault((method, label), {}).setdefault(metric, []).append(value)
        map_nll = np.array(results[("MAP network", "softmax of the MAP")]["nll"])
        for (method, label), values in results.items():
            difference = np.array(values["nll"]) - map_nll
            print(
                f"| {data} | {method} | {label} | {fmt(values['nll'])} | {fmt(values['accuracy'])} | "
                f"{fmt(values['ece'])} | {np.mean(seconds[method]):.1f} | {fmt(difference)} | "
                f"{int((difference < 0).sum())}/{len(difference)} |",
                flush=True,
            )

    print("\nThe MAP network's test NLL with its logits divided by a temperature T (a diagnosis, not a method):\n")
    print("| data set | " + " | ".join(f"T = {t}" for t in TEMPERATURES) + " |")
    print("|---|" + "---|" * len(TEMPERATURES))
    for data, nlls in tempered.items():
        print(f"| {data} | " + " | ".join(fmt(nlls[t]) for t in TEMPERATURES) + " |")


if __name__ == "__main__":
    main()
