"""RMSClassifier's members one by one: the anchors' spread per layer and each member's test NLL.

Randomized MAP sampling (Pearce et al. 2020, "Uncertainty in neural networks:
approximately Bayesian ensembling") anchors each member to its own draw from
the prior, whose per-layer precisions the Laplace evidence of one MAP network
learns. Per data set and split (``compare``'s stratified 80/20 splits,
``random_state`` the split index, inputs scaled as by ``Pipeline([StandardScaler(),
estimator])``) this prints the prior std of each group of weights (the
anchors' spread), the test NLL of every member's own softmax (min, median,
max), the ensemble's, and the MAP network's (``LaplaceClassifier``'s ``net_``
with the same seed: the MAP of the same training, which also sets the
learned prior).

    python benchmarks/bench_rms_members.py [--datasets digits] [--splits 3] [--threads 1]
"""

import argparse

import numpy as np
import torch
from defaults_options import pin_threads
from scipy.special import softmax
from sklearn.metrics import log_loss
from sklearn.preprocessing import StandardScaler
from uci_protocol import print_summary

from sklearn_quinn import LaplaceClassifier, RMSClassifier
from sklearn_quinn._cli.compare import split_table
from sklearn_quinn._cli.data import load_table
from sklearn_quinn._core.network import FunctionalModel

DATASETS = ("iris", "wine", "breast_cancer", "digits")


def member_nlls(rms, X, y):
    """Each member's test NLL: the softmax of its own logits."""
    model = FunctionalModel(rms.net_[0].module_.model.module)
    with torch.no_grad():
        X = torch.as_tensor(X, dtype=rms.posterior_.samples.dtype)
        logits = model(rms.posterior_.samples, X).numpy()
    return np.array([log_loss(y, softmax(member, axis=1), labels=np.arange(logits.shape[-1])) for member in logits])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=["digits"])
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    pin_threads(args.threads)
    print("| data set | split | prior std per group | members' NLL (min / median / max) | ensemble NLL | MAP NLL |")
    print("|---|---|---|---|---|---|")
    summary = {}
    for data in args.datasets:
        X, y, _ = load_table(data)
        for seed in range(args.splits):
            X_train, X_test, y_train, y_test = split_table(X, y, True, test_size=0.2, random_state=seed)
            scaler = StandardScaler().fit(X_train)
            X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
            codes = np.searchsorted(np.unique(y_train), y_test)
            rms = RMSClassifier(random_state=seed).fit(X_train, y_train)
            ensemble = log_loss(y_test, rms.predict_proba(X_test), labels=rms.classes_)
            laplace = LaplaceClassifier(random_state=seed).fit(X_train, y_train)
            network = log_loss(y_test, softmax(laplace.net_.predict_proba(X_test.astype(laplace.dtype)), axis=1),
                               labels=laplace.classes_)
            members = member_nlls(rms, X_test, codes)
            stds = ", ".join(f"{name} {precision ** -0.5:.3g}" for name, precision in rms.prior_precisions_.items())
            print(f"| {data} | {seed} | {stds} | {members.min():.3f} / {np.median(members):.3f} / "
                  f"{members.max():.3f} | {ensemble:.3f} | {network:.3f} |", flush=True)
            summary.setdefault(data, []).append((np.median(members), ensemble, network))
    print_summary(summary, ["members' median NLL", "ensemble NLL", "MAP NLL"])


if __name__ == "__main__":
    main()
