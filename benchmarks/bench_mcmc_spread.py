"""Why HMC's classifier is less confident than its MAP network: where its draws sit, and how far they spread.

On ``compare``'s stratified 80/20 splits (``random_state`` = split index,
inputs standardised on the training rows), ``MCMCClassifier`` at the package's
defaults and at each ``--variants`` (one ``NAME=VALUE`` away from them, e.g.
``hyperprior='empirical'``: the precisions the MAP learns, held fixed;
``n_burnin=2500``: chains five times as long; ``prior_std=1.0``: a fixed
N(0, 1) prior). For each, mean over the splits of:

- the test NLL, accuracy and mean confidence (the predictive's largest
  probability) of HMC's predictive, and of its MAP network (``net_``, the
  chains' start);
- the largest split R-hat over the weights (not the sampled precisions);
- the training NLL (summed over the rows) of single draws, averaged over the
  first and the last tenth of every chain's kept draws, against the MAP's: how
  far above the mode the chains sit, and whether they are still moving.

    python benchmarks/bench_mcmc_spread.py [--dataset digits] [--splits 1] \\
        [--variants "hyperprior='empirical'" n_burnin=2500 prior_std=1.0] [--threads 1]
"""

import argparse

import numpy as np
import torch
from defaults_options import parameter, pin_threads
from sklearn.preprocessing import StandardScaler
from uci_protocol import fmt

from sklearn_quinn import MCMCClassifier
from sklearn_quinn._cli.compare import split_table
from sklearn_quinn._cli.data import load_table
from sklearn_quinn.metrics import categorical_nll


def scores(proba, y, classes):
    """Test NLL, accuracy and mean confidence of the class probabilities ``proba``."""
    return (categorical_nll(y, proba, labels=classes), float(np.mean(classes[proba.argmax(1)] == y)),
            float(proba.max(1).mean()))


def training_nll(model, weights, X, labels):
    """The training NLL (summed over the rows) of each row of ``weights (S, K)``."""
    with torch.no_grad():
        log_proba = torch.log_softmax(model(weights, X), -1)
    return -log_proba[:, torch.arange(len(labels)), labels].sum(-1)


def fit_variant(params, X_train, X_test, y_train, y_test, seed):
    """One fit's row: HMC's and its MAP network's test scores, the largest R-hat,
    and the draws' training NLL early and late in the chains, and the MAP's."""
    estimator = MCMCClassifier(random_state=seed, **params).fit(X_train, y_train)
    classes = estimator.classes_
    hmc = scores(estimator.predict_proba(X_test), y_test, classes)
    map_logits = torch.as_tensor(estimator.net_.predict_proba(X_test.astype(estimator.dtype)))
    map_network = scores(torch.softmax(map_logits, -1).numpy(), y_test, classes)
    model = estimator._model
    X = torch.as_tensor(X_train, dtype=torch.float64)
    labels = torch.as_tensor(np.searchsorted(classes, y_train))
    chains = torch.as_tensor(estimator.chains_[..., :model.n_params])
    tenth = max(1, chains.shape[1] // 10)
    early = float(training_nll(model, chains[:, :tenth].flatten(0, 1), X, labels).mean())
    late = float(training_nll(model, chains[:, -tenth:].flatten(0, 1), X, labels).mean())
    at_map = float(training_nll(model, model.flatten()[None], X, labels)[0])
    # chains_ holds the sampled log precisions after the weights: R-hat of the weights alone.
    return (*hmc, *map_network, float(np.nanmax(estimator.rhat_[:model.n_params])), early, late, at_map)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="digits", choices=["iris", "wine", "breast_cancer", "digits"])
    parser.add_argument("--splits", type=int, default=1)
    parser.add_argument("--variants", nargs="*", type=parameter,
                        default=[parameter("hyperprior='empirical'"), ("n_burnin", 2500), ("prior_std", 1.0)])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    pin_threads(args.threads)

    X, y, _ = load_table(args.dataset)
    variants = [("defaults", {})] + [(f"{name}={value!r}", {name: value}) for name, value in args.variants]
    rows = {label: [] for label, _ in variants}
    for seed in range(args.splits):
        X_train, X_test, y_train, y_test = split_table(X, y, True, test_size=0.2, random_state=seed)
        scale = StandardScaler().fit(X_train)
        X_train, X_test = scale.transform(X_train), scale.transform(X_test)
        for label, params in variants:
            rows[label].append(fit_variant(params, X_train, X_test, y_train, y_test, seed))
            print(f"{args.dataset} split {seed} {label}: {np.round(rows[label][-1], 4).tolist()}", flush=True)

    print(f"\n{args.dataset}, {args.splits} split(s) of compare's, MCMCClassifier (HMC) and its MAP network "
          "(net_); mean ± s.e. over the splits\n")
    print("| variant | HMC test NLL | accuracy | confidence | MAP test NLL | accuracy | confidence | max R-hat | "
          "draws' training NLL, first tenth | last tenth | MAP's |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for label, values in rows.items():
        columns = [fmt(column, 4 if index in (0, 3) else 3) for index, column in enumerate(zip(*values))]
        print(f"| {label} | {' | '.join(columns)} |")


if __name__ == "__main__":
    main()
