"""Every classifier family at the package's defaults against LogisticRegression and its own MAP network.

Data: scikit-learn's iris, wine, breast cancer and digits. Splits: ``compare``'s
(stratified random 80/20, ``random_state`` = split index 0, 1, ...; split 0 is
``sklearn-quinn compare <data set>``'s), 20 by default and the same for every
method, so that differences are paired. Each split runs ``compare``'s own code
(``split_table``, ``candidates``, ``fit_and_score``): every estimator in
``Pipeline([StandardScaler(), estimator])``, seeded with the split's
``random_state``, scored on the test rows (NLL, accuracy, ECE over 15
equal-width bins). The families are the command line's registry (``METHODS``),
at the package's defaults (``--quick``: ``compare``'s smaller budgets;
``--set NAME=VALUE``: a parameter of every family away from them); the
reference is ``compare``'s ``LogisticRegression(max_iter=1000)``.

A family's own MAP network is the MAP of its backbone under its own MAP training:
the package's MAP trainer run with the family estimator's backbone and training
parameters (``hidden_layer_sizes``, ``activation``, ``module``, ``prior_std``,
``lr``, ``lr_schedule``, ``max_epochs``, ``batch_size``, ``optimizer``,
``callbacks``, ``dtype``, ``device``, ``random_state``; a family without some of
them, SMC, which trains no network, gets the package's defaults for those), on
all the training rows; its probabilities are the softmax of that network's
logits. It is the ``net_`` of a ``LaplaceClassifier`` with those parameters (a
public attribute: the skorch net of MAP training), and is bit for bit the
``net_`` that ``SWAGClassifier`` and ``MCMCClassifier`` (and
``LaplaceClassifier`` without a held-out prior search) train before their
posterior; for deep ensembles and RMS it is one MAP from the split's seed, for
MC dropout the same network trained without dropout, for BBB and SMC the MAP of
the backbone they put a posterior on. Families with the same parameters share
one MAP fit per split.

Prints, per data set and method, mean ± s.e. over the splits of the test NLL,
accuracy, ECE and fit seconds, and the paired differences of NLL (mean ± s.e.
over the splits of the row's NLL minus the reference's on the same split) against
LogisticRegression and against the family's own MAP network, with the target of
issue 17: each difference at most one standard error. Per-fit lines go to stderr,
the tables to stdout.

    python benchmarks/bench_defaults_classification.py [--datasets iris wine breast_cancer digits] \\
        [--methods laplace de ...] [--splits 20] [--quick] [--max-epochs N] [--device cpu] [--threads 1] \\
        [--set NAME=VALUE ...]
"""

import argparse
import sys

import numpy as np
from defaults_options import add_defaults_options, add_set_option, pin_threads, set_arguments
from scipy.special import softmax
from uci_protocol import fmt, mean_se

from sklearn_quinn import LaplaceClassifier
from sklearn_quinn._cli.compare import candidates, classification_scores, fit_and_score, split_table
from sklearn_quinn._cli.data import load_table
from sklearn_quinn._cli.methods import METHODS

DATASETS = ("iris", "wine", "breast_cancer", "digits")
REFERENCE = "sklearn-logistic"
# The parameters that make a family's MAP network: its backbone and its MAP training.
MAP_PARAMETERS = ("hidden_layer_sizes", "activation", "module", "prior_std", "lr", "lr_schedule", "max_epochs",
                  "batch_size", "optimizer", "callbacks", "dtype", "device", "random_state")


def map_parameters(estimator):
    """The MAP-making parameters of the family ``estimator``, the package's defaults for those it lacks."""
    params = estimator.get_params()
    defaults = LaplaceClassifier().get_params()
    return {key: params.get(key, defaults[key]) for key in MAP_PARAMETERS}


def map_network_scores(params, X_train, y_train, X_test, y_test):
    """Test scores of the softmax of the MAP network trained with ``params``, and the fit seconds."""
    # prior_precision=None: no rows held out for a prior search; 'diag': the cheapest
    # curvature (the posterior is not used, only the MAP network net_).
    scored = fit_and_score(LaplaceClassifier(**params, prior_precision=None, hessian_structure="diag"),
                           X_train, y_train, X_test, y_test, True)
    scale, laplace = scored.model[:-1], scored.model[-1]
    # The skorch net's predict_proba is the module's forward output: the logits.
    logits = laplace.net_.predict_proba(scale.transform(X_test).astype(laplace.dtype))
    return {**classification_scores(y_test, softmax(logits, axis=1), laplace.classes_),
            "fit s": scored.scores["fit s"]}


def paired(values, baseline):
    """``'mean ± s.e.'`` of the differences and whether the mean is at most one s.e. (n/a on one split)."""
    difference = np.asarray(values) - np.asarray(baseline)
    mean, se = mean_se(difference)
    return fmt(difference), "n/a" if np.isnan(se) else ("yes" if mean <= se else "NO")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--splits", type=int, default=20, help="paired splits, random_state 0 to SPLITS - 1")
    add_defaults_options(parser)
    add_set_option(parser)
    args = parser.parse_args(argv)
    pin_threads(args.threads)

    budget = "compare's budgets (--quick)" if args.quick else "the package's defaults"
    epochs = f", max_epochs {args.max_epochs}" if args.max_epochs else ""
    epochs += "".join(f", {text}" for text in set_arguments(args.set))
    print(f"{args.splits} paired stratified 80/20 splits per data set (random_state 0 = compare's), {budget}"
          f"{epochs}, {args.threads} thread(s). Mean ± s.e. over the splits; 'NLL - X' is paired by split, "
          "'<= X' is whether its mean is at most one s.e.\n")
    print("| data set | method | test NLL | accuracy | ECE (15 bins) | fit s | NLL - LogReg's | <= LogReg | "
          "NLL - own MAP's | <= own MAP |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    failures, unchecked = [], False
    for data in args.datasets:
        X, y, _ = load_table(data)
        scores, own_map = {}, {}  # row label -> score dicts by split; family -> the label of its MAP's row
        for seed in range(args.splits):
            X_train, X_test, y_train, y_test = split_table(X, y, True, test_size=0.2, random_state=seed)
            todo = candidates(args.methods, True, X_train, quick=args.quick, max_epochs=args.max_epochs,
                              random_state=seed, device=args.device, params=dict(args.set))
            for candidate in todo:
                scored = fit_and_score(candidate.estimator, X_train, y_train, X_test, y_test, True).scores
                scores.setdefault(candidate.name, []).append(scored)
                print(f"{data} split {seed} {candidate.name}: NLL {scored['NLL']:.3f}  {scored['fit s']:.1f} s",
                      file=sys.stderr, flush=True)
            groups = {}  # the MAP parameters (as text) -> the families that train that MAP
            for candidate in todo:
                if candidate.name in METHODS:
                    params = map_parameters(candidate.estimator)
                    groups.setdefault(repr(sorted(params.items())), (params, []))[1].append(candidate.name)
            for params, families in groups.values():
                label = "MAP network" if len(groups) == 1 else f"MAP network ({', '.join(families)})"
                scores.setdefault(label, []).append(map_network_scores(params, X_train, y_train, X_test, y_test))
                own_map.update(dict.fromkeys(families, label))
        logistic = [result["NLL"] for result in scores[REFERENCE]]
        for label in [*args.methods, *dict.fromkeys(own_map.values()), REFERENCE]:
            results = scores[label]
            nll = [result["NLL"] for result in results]
            versus_logistic, logistic_ok = paired(nll, logistic) if label != REFERENCE else ("", "")
            versus_map, map_ok = ("", "")
            if label in own_map:
                versus_map, map_ok = paired(nll, [result["NLL"] for result in scores[own_map[label]]])
            if label in METHODS:
                failures += [f"{data} {label} vs LogReg"] * (logistic_ok == "NO")
                failures += [f"{data} {label} vs its MAP"] * (map_ok == "NO")
                unchecked |= "n/a" in (logistic_ok, map_ok)
            print(f"| {data} | {label} | {fmt(nll)} | {fmt([r['accuracy'] for r in results])} | "
                  f"{fmt([r['ECE'] for r in results])} | {np.mean([r['fit s'] for r in results]):.1f} | "
                  f"{versus_logistic} | {logistic_ok} | {versus_map} | {map_ok} |", flush=True)
    if failures:
        print(f"\nTargets missed: {', '.join(failures)}.")
    else:
        print("\nNo target missed; one split has no s.e. to check against." if unchecked else "\nAll targets hold.")


if __name__ == "__main__":
    main()
