"""Every classifier family at the package's defaults against LogisticRegression and its own MAP network.

Data: scikit-learn's iris, wine, breast cancer and digits. Splits: ``compare``'s
(stratified random 80/20, ``random_state`` = split index 0, 1, ...; split 0 is
``sklearn-quinn compare <data set>``'s), 20 by default and the same for every
method, so that differences are paired. ``wide``: the wide regression table of
``bench_defaults_regression.py`` (150 training and 1000 test rows of 40
features), its targets' signs as two classes, drawn afresh from each split's
seed. ``frequencies``: twelve classes of unequal frequencies that ten inputs barely move
(:func:`frequency_classes`); ``rare``: two classes, 15% positive, that ten inputs move a little
(:func:`rare_positives`); both drawn afresh from each split's seed. Each split runs ``compare``'s own code
(``split_table``, ``candidates``, ``fit_and_score``): every estimator in
``Pipeline([StandardScaler(), estimator])``, seeded with the split's
``random_state``, scored on the test rows (NLL, accuracy, ECE over 15
equal-width bins). The families are the command line's registry (``METHODS``),
at the package's defaults, as ``compare`` runs them (``--quick``: ``compare --quick``'s smaller budgets;
``--set NAME=VALUE``: a parameter of every family away from them); the
reference is ``compare``'s ``LogisticRegression(max_iter=1000)``, beside the class-frequency
predictor (the training rows' frequencies for every test row), which any classifier should beat.

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
issue 17: each difference at most one standard error, and how many splits each
row has. Per-fit lines go to stderr, the tables to stdout.

    python benchmarks/bench_defaults_classification.py \\
        [--datasets iris wine breast_cancer digits wide frequencies rare] [--methods laplace de ...] \\
        [--splits 20] [--quick] [--max-epochs N] [--device cpu] [--threads 1] \\
        [--out classification-defaults.jsonl] [--n-jobs 1] [--set NAME=VALUE ...]
"""

import argparse
import sys

import numpy as np
from bench_defaults_regression import wide_split
from defaults_options import add_defaults_options, add_set_option, pin_threads, set_arguments
from joblib import delayed
from records import append_as_they_end, matches, read_lines
from scipy.special import softmax
from uci_protocol import fmt, mean_se

from sklearn_quinn import LaplaceClassifier
from sklearn_quinn._cli.compare import candidates, classification_scores, fit_and_score, split_table
from sklearn_quinn._cli.data import load_table
from sklearn_quinn._cli.methods import METHODS

DATASETS = ("iris", "wine", "breast_cancer", "digits", "wide", "frequencies", "rare")
REFERENCE = "sklearn-logistic"
FREQUENCIES = "class frequencies"
MAP_NETWORK = "MAP network"
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


def map_key(params):
    """The text that names the records of the MAP network trained with ``params``
    (on every split: its ``random_state``, the split's, is left out)."""
    return repr(sorted((key, value) for key, value in params.items() if key != "random_state"))


def settings(args):
    """What makes two runs of a (data set, method, split) the same: a resumed run skips only these."""
    return {"quick": args.quick, "max_epochs": args.max_epochs, "device": args.device, "params": dict(args.set)}


def identity(record):
    """A record's fit: its data set, split, method and (for a family or a MAP network) MAP network."""
    return record["dataset"], record["split"], record["method"], record["map"]


def fit_split(data, seed, args, done):
    """The records of split ``seed`` of ``data`` not yet in ``done``: each
    family and the reference, then the MAP network of every family's MAP parameters."""
    pin_threads(args.threads)
    drawn = {"wide": wide_classes, "frequencies": frequency_classes, "rare": rare_positives}  # from the seed
    if data in drawn:
        X_train, X_test, y_train, y_test = drawn[data](seed)
    else:
        X, y, _ = load_table(data)
        X_train, X_test, y_train, y_test = split_table(X, y, True, test_size=0.2, random_state=seed)
    todo = candidates(args.methods, True, X_train, quick=args.quick, max_epochs=args.max_epochs,
                      random_state=seed, device=args.device, params=dict(args.set))
    base = {"dataset": data, "split": seed, **settings(args), "threads": args.threads}
    records, networks = [], {}
    for candidate in todo:
        key = None
        if candidate.name in METHODS:
            params = map_parameters(candidate.estimator)
            key = map_key(params)
            networks[key] = params
        record = {**base, "method": candidate.name, "map": key}
        if identity(record) not in done:
            record.update(fit_and_score(candidate.estimator, X_train, y_train, X_test, y_test, True).scores)
            records.append(record)
    record = {**base, "method": FREQUENCIES, "map": None}
    if identity(record) not in done:
        classes = np.unique(y_train)
        frequencies = (y_train[:, None] == classes).mean(0)
        records.append({**record, **classification_scores(y_test, np.tile(frequencies, (len(y_test), 1)), classes),
                        "fit s": 0.0})
    for key, params in networks.items():
        record = {**base, "method": MAP_NETWORK, "map": key}
        if identity(record) not in done:
            records.append({**record, **map_network_scores(params, X_train, y_train, X_test, y_test)})
    return records


def wide_classes(seed):
    """``bench_defaults_regression.py``'s wide table (40 features, 5 with a linear signal and the first a
    ``sin(2 x)`` too, unit noise; 150 training and 1000 test rows, drawn from ``seed``), its targets'
    signs as two classes: a probit model, where a third of a training row a feature is little to learn from."""
    X_train, X_test, y_train, y_test = wide_split(seed)
    return X_train, X_test, (y_train > 0).astype(int), (y_test > 0).astype(int)


def frequency_classes(seed, n_classes=12, effect=0.05):
    """``n_classes`` classes of unequal frequencies (drawn from a Dirichlet(3) distribution) that the
    inputs barely move (:func:`weak_signal_classes`, weights of standard deviation ``effect``), drawn
    from ``seed``: a table whose inputs say little about the labels, where the class frequencies are
    most of what there is to learn."""
    rng = np.random.RandomState(seed)
    return weak_signal_classes(rng, rng.dirichlet(np.full(n_classes, 3.0)), effect)


def rare_positives(seed, positives=0.15, effect=0.1):
    """Two classes, a fraction ``positives`` of them positive, that the inputs move a little
    (:func:`weak_signal_classes`, weights of standard deviation ``effect``), drawn from ``seed``: the
    imbalanced, weakly predictable binary table of churn or default prediction, where a linear
    logit is all there is to learn."""
    return weak_signal_classes(np.random.RandomState(seed), np.array([1 - positives, positives]), effect)


def weak_signal_classes(rng, frequencies, effect, n_train=400, n_test=2000, n_features=10):
    """Training and test rows of ``n_features`` standard-normal inputs and labels drawn from the
    softmax of ``X @ W + log(frequencies)``, ``W`` of standard deviation ``effect``, all drawn from ``rng``."""
    effects = effect * rng.randn(n_features, len(frequencies))
    X = rng.randn(n_train + n_test, n_features)
    probabilities = softmax(X @ effects + np.log(frequencies), axis=1)
    y = (probabilities.cumsum(1) > rng.rand(len(X), 1)).argmax(1)
    return X[:n_train], X[n_train:], y[:n_train], y[n_train:]


def paired(values, baseline):
    """``'mean ± s.e.'`` of the differences over the splits both dicts (split -> value) hold,
    and whether the mean is at most one s.e. (n/a on one split)."""
    splits = sorted(values.keys() & baseline.keys())
    difference = np.array([values[split] - baseline[split] for split in splits])
    mean, se = mean_se(difference)
    return fmt(difference), "n/a" if np.isnan(se) else ("yes" if mean <= se else "NO")


def print_table(records, datasets, methods):
    """One row per data set and method of ``records``, then the targets missed."""
    rows = {}  # (data set, method, map) -> split -> record
    for record in records:
        rows.setdefault((record["dataset"], record["method"], record["map"]), {})[record["split"]] = record
    print("| data set | method | splits | test NLL | accuracy | ECE (15 bins) | fit s | NLL - LogReg's | <= LogReg | "
          "NLL - own MAP's | <= own MAP |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    failures, unchecked = [], False

    def nll(key):
        return {split: record["NLL"] for split, record in rows.get(key, {}).items()}

    for data in datasets:
        logistic = nll((data, REFERENCE, None))
        families = {method: key[2] for key in rows for method in methods
                    if key[:2] == (data, method) and method in METHODS}
        networks = {}  # map -> the families that train it
        for method, key in families.items():
            networks.setdefault(key, []).append(method)
        labels = {key: MAP_NETWORK if len(networks) == 1 else f"{MAP_NETWORK} ({', '.join(names)})"
                  for key, names in networks.items()}
        table = [(method, (data, method, families.get(method))) for method in methods]
        table += [(label, (data, MAP_NETWORK, key)) for key, label in labels.items()]
        for label, key in table + [(REFERENCE, (data, REFERENCE, None)), (FREQUENCIES, (data, FREQUENCIES, None))]:
            if key not in rows:
                continue
            results = list(rows[key].values())
            versus_logistic, logistic_ok = paired(nll(key), logistic) if label != REFERENCE else ("", "")
            versus_map, map_ok = ("", "")
            if label in families:
                versus_map, map_ok = paired(nll(key), nll((data, MAP_NETWORK, families[label])))
                failures += [f"{data} {label} vs LogReg"] * (logistic_ok == "NO")
                failures += [f"{data} {label} vs its MAP"] * (map_ok == "NO")
                unchecked |= "n/a" in (logistic_ok, map_ok)
            print(f"| {data} | {label} | {len(results)} | {fmt([r['NLL'] for r in results])} | "
                  f"{fmt([r['accuracy'] for r in results])} | {fmt([r['ECE'] for r in results])} | "
                  f"{np.mean([r['fit s'] for r in results]):.1f} | {versus_logistic} | {logistic_ok} | "
                  f"{versus_map} | {map_ok} |", flush=True)
    if failures:
        print(f"\nTargets missed: {', '.join(failures)}.")
    else:
        print("\nNo target missed; one split has no s.e. to check against." if unchecked else "\nAll targets hold.")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--splits", type=int, default=20, help="paired splits, random_state 0 to SPLITS - 1")
    parser.add_argument("--out", default="classification-defaults.jsonl",
                        help="JSON-lines results, appended as each split ends and read back to resume "
                             "(default: classification-defaults.jsonl)")
    parser.add_argument("--n-jobs", type=int, default=1, help="splits fitted at once, in separate processes")
    add_defaults_options(parser, threads_help="torch and BLAS threads per process (default: 1)")
    add_set_option(parser)
    args = parser.parse_args(argv)
    pin_threads(args.threads)

    run_settings = settings(args)
    done = {identity(r) for r in read_lines(args.out) if matches(r, run_settings)}
    tasks = [delayed(fit_split)(data, seed, args, done) for data in args.datasets for seed in range(args.splits)]
    print(f"{len(done)} fit(s) under these settings already in {args.out}, not fitted again",
          file=sys.stderr, flush=True)
    append_as_they_end(args.out, tasks, args.n_jobs, lambda record: (
        f"{record['dataset']} split {record['split']} {record['method']}: NLL {record['NLL']:.3f}  "
        f"{record['fit s']:.1f} s"))
    records = [r for r in read_lines(args.out) if matches(r, run_settings) and r["dataset"] in args.datasets
               and r["split"] < args.splits and r["method"] in [*args.methods, MAP_NETWORK, REFERENCE, FREQUENCIES]]

    budget = "compare --quick's budgets" if args.quick else "the package's defaults"
    epochs = f", max_epochs {args.max_epochs}" if args.max_epochs else ""
    epochs += "".join(f", {text}" for text in set_arguments(args.set))
    print(f"{args.splits} paired stratified 80/20 splits per data set (random_state 0 = compare's), {budget}"
          f"{epochs}, {args.threads} thread(s) per fit; results in {args.out}. Mean ± s.e. over the splits; "
          "'NLL - X' is paired by split, '<= X' is whether its mean is at most one s.e.\n")
    print_table(records, args.datasets, args.methods)


if __name__ == "__main__":
    main()
