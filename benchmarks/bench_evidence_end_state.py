"""Where the evidence-driven MAP training ends, against a fixed prior's MAP with the evidence maximised after it.

For a classification set and ``compare``'s splits (stratified 80/20, inputs
standardised on the training rows), two ``LaplaceClassifier`` fits at the
package's defaults otherwise: the evidence-driven one (``prior_std=None``) and
one under a fixed ``N(0, prior_std**2)`` prior for each ``--fixed-prior-std``
(default 1). For each it prints the MAP network's and the Laplace predictive's
test NLL, and the Laplace log evidence of its MAP (the curvature structure the
training's own evidence takes, ``LaplaceEvidence.structure``) at the learned
precisions, at the fixed prior's, and maximised over the per-group precisions
at those weights (MacKay's fixed point), with the maximiser. ``--exact`` adds
each fit's log evidence at its own prior (the only one of these at a mode of
its own posterior) taken with the full GGN, where the training's updates take
the Kronecker factors. ``--history`` prints the evidence-driven training's
updates: epoch, log evidence and each group's precision.

The question it answers: does the training end at the evidence's best state,
and does the evidence rank the states as their test scores do? Only "log Z at
its own" compares fits: each is the Laplace evidence at a mode of its own
posterior. "Maximised at its weights" is not the evidence of any fit: the
weights are not the mode under the maximiser, and the MAP re-found under it
has another evidence (on digits, hundreds of nats lower). The
Laplace evidence is invariant along the rescaling symmetry of a ReLU layer
and the next (for ``a > 0``: its weights and bias times ``a``, the next
weights over ``a``, their precisions over and times ``a**2``), so a drift of
the learned precisions in opposite directions on consecutive layers, with the
weights rescaled to match, changes nothing the evidence sees, only the
optimiser's conditioning. (The fixed prior's "log Z at learned" evaluates the
other fit's precisions, which depends on how its MAP splits the scale between
its layers.)

    python benchmarks/bench_evidence_end_state.py [--dataset digits] [--splits 1] [--fixed-prior-std 1 ...] \
        [--exact] [--history]
"""

import argparse

import numpy as np
import torch
from defaults_options import pin_threads
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.metrics import log_loss
from sklearn.preprocessing import StandardScaler

from sklearn_quinn import LaplaceClassifier
from sklearn_quinn._cli.compare import split_table
from sklearn_quinn._core.curvature import AUTO_MAX_FULL_PARAMS
from sklearn_quinn._core.evidence import LaplaceEvidence, ParameterGroups

DATASETS = {"iris": load_iris, "wine": load_wine, "breast_cancer": load_breast_cancer, "digits": load_digits}


def evidence_at(estimator, X, y, max_full_params=None):
    """The Laplace evidence of ``estimator``'s MAP on the training rows, as a function of the precisions
    (``max_full_params`` as for ``LaplaceEvidence``)."""
    model = estimator._model
    labels = torch.as_tensor(np.searchsorted(estimator.classes_, y)[:, None])
    likelihood = estimator.net_.criterion_.likelihood.frozen(1)
    inputs = torch.as_tensor(X, dtype=torch.float64)
    return LaplaceEvidence(model, model.flatten().detach(), inputs, labels, likelihood, ParameterGroups.of(model),
                           max_full_params=max_full_params)


def test_nlls(estimator, X, y):
    """The test NLL of the MAP network's softmax and of the Laplace predictive."""
    with torch.no_grad():
        logits = estimator.net_.module_(torch.as_tensor(X, dtype=torch.float64))
    network = torch.softmax(logits, -1).numpy()
    return (log_loss(y, network, labels=estimator.classes_),
            log_loss(y, estimator.predict_proba(X), labels=estimator.classes_))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", choices=list(DATASETS), default="digits")
    parser.add_argument("--splits", type=int, default=1)
    parser.add_argument("--fixed-prior-std", type=float, nargs="+", default=[1.0])
    parser.add_argument("--exact", action="store_true", help="each fit's log evidence with the full GGN too")
    parser.add_argument("--history", action="store_true", help="print the evidence-driven training's updates")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    pin_threads(args.threads)
    X, y = DATASETS[args.dataset](return_X_y=True)
    stds = ", ".join(f"{std:g}" for std in args.fixed_prior_std)
    print(f"{args.dataset}, LaplaceClassifier at the defaults (learned prior) and with prior_std in ({stds}); "
          "log evidence of each MAP at the learned precisions, at its own, and maximised at its weights\n")
    exact = " | exact log Z at its own" if args.exact else ""
    print("| split | prior | MAP NLL | Laplace NLL | structure | log Z at learned | log Z at its own | "
          f"log Z maximised | its precisions{exact} |")
    print("|---|---|---|---|---|---|---|---|---|" + ("---|" if args.exact else ""))
    for split in range(args.splits):
        X_train, X_test, y_train, y_test = split_table(X, y, True, random_state=split)
        scaler = StandardScaler().fit(X_train)
        X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
        learned = LaplaceClassifier(random_state=split).fit(X_train, y_train)
        precisions = torch.as_tensor(list(learned.prior_precisions_.values()), dtype=torch.float64)
        fits = [("learned", learned, precisions)] + [
            (f"N(0, {std:g}^2)", LaplaceClassifier(prior_std=std, random_state=split).fit(X_train, y_train),
             torch.full_like(precisions, std**-2))
            for std in args.fixed_prior_std
        ]
        for name, estimator, own in fits:
            evidence = evidence_at(estimator, X_train, y_train)
            maximiser, _, maximum = evidence.maximise(np.ones(len(precisions)))
            network, laplace = test_nlls(estimator, X_test, y_test)
            row = (f"| {split} | {name} | {network:.4f} | {laplace:.4f} | {evidence.structure} | "
                   f"{float(evidence.log_evidence(precisions)):.1f} | {float(evidence.log_evidence(own)):.1f} | "
                   f"{maximum:.1f} | {', '.join(f'{value:.3g}' for value in maximiser)} |")
            if args.exact:
                full = evidence_at(estimator, X_train, y_train, max_full_params=AUTO_MAX_FULL_PARAMS)
                row += f" {float(full.log_evidence(own)):.1f} ({full.structure}) |"
            print(row, flush=True)
        if args.history:
            print(f"\nSplit {split}, the evidence-driven training's updates (groups: "
                  f"{', '.join(learned.prior_precisions_)}):\n")
            print("| epoch | stage | log evidence | precisions |")
            print("|---|---|---|---|")
            for record in learned.evidence_history_:
                values = [float(np.mean(record[group])) for group in learned.prior_precisions_]
                print(f"| {record['epoch']} | {record['stage']} | {record['log_evidence']:.1f} | "
                      f"{', '.join(f'{value:.3g}' for value in values)} |")
            print()


if __name__ == "__main__":
    main()
