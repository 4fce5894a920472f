"""Every family at its defaults on tables with the quirks of real data, beside scikit-learn's references.

A user's own table is rarely the clean one of a paper: a column that never
varies, one that varies on a single training row, columns that repeat
others, a target in the millions, integer targets, a few dozen rows, one-hot
categories, outliers, float32 inputs, a heavy-tailed column; labels that are
strings or floats, a class of two rows, pandas input, one feature, classes a
hyperplane separates; and, for both tasks, columns as a user's table may hold
them (scales 1 to 10,000, nearly all positive) fitted without a scaler, and
the clean table with a row at 1e4 in every column (a copy that draws no
random numbers of its own: the tables before it are as they were); for
regression, the clean table with each of a quarter of its training rows
four times over (likewise drawn from nothing new). Each
table is drawn from a seed, split 75/25 (the small one: 25 training rows,
1000 test rows), and fitted in ``Pipeline([StandardScaler(), estimator])``
(the unscaled tables: the estimator alone) at the package's defaults
(``compare``'s registry, ``METHODS``); the reference is ``BayesianRidge`` for
regression, ``LogisticRegression(max_iter=1000)`` for classification.

The regression tables share one signal, ``X w + sin(2 x_0)`` plus unit noise
(400 rows, 8 columns), so a network should be at or below the linear
reference. Prints, per table, the reference's test NLL, then each family's
test NLL (and for regression its 95% coverage) and fit seconds, and flags: an
exception, a non-finite output, a predicted label not among the training
labels, or a warning other than a DeprecationWarning (torch raises some from
its own internals). With ``--seeds N`` the NLLs are means over N draws of each
table, and the flags are any draw's.

    python benchmarks/bench_table_quirks.py [--methods laplace de ...] [--seeds 1] [--tasks regression classification]
        [--tables TEXT ...]

``--tables``: only the tables whose names contain one of these texts.
"""

import argparse
import re
import time
import warnings

import numpy as np
import pandas as pd
from defaults_options import add_defaults_options, pin_threads
from scipy.stats import norm
from sklearn.linear_model import BayesianRidge, LogisticRegression
from sklearn.metrics import log_loss
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_quinn._cli.methods import make_estimator

TRAIN_SHARE = 0.75
SMALL_TRAIN = 25  # the training rows of the small table; the rest of its draw is for testing


def signal_table(rng, n=400, d=8):
    """``X w + sin(2 x_0)`` plus unit noise: a linear part and a bend a network can find."""
    X = rng.randn(n, d)
    return X, X @ rng.randn(d) + np.sin(2 * X[:, 0]) + rng.randn(n)


def table(name, X, y, n_train=None, scaled=True):
    """(name, X, y, training rows, scaled): the first ``n_train`` rows train (default: ``TRAIN_SHARE`` of
    them); ``scaled``: fitted behind a ``StandardScaler``, else as they are."""
    return name, X, y, n_train or int(TRAIN_SHARE * len(X)), scaled


def glitched(X):
    """A copy of ``X`` with its first row, a training row, at 1e4 in every column: a sensor's
    glitch or a sentinel for a missing value, which leaves the other rows within about a
    hundredth of a standard deviation of each other once the columns are standardised."""
    X = np.array(X, dtype=float)
    X[0] = 1e4
    return X


GLITCHED = "a row at 1e4 in every column"


def repeated(X, y, n_train, times=4):
    """The first ``n_train / times`` training rows ``times`` times over, then the test rows as they
    were: a table whose rows were copied to weigh them, or joined twice; the fit sees ``n_train``
    rows of which a quarter are distinct. Returns ``X, y, n_train``."""
    distinct = n_train // times
    rows = np.r_[np.tile(np.arange(distinct), times), np.arange(n_train, len(y))]
    return X[rows], y[rows], distinct * times


REPEATED = "each training row four times"


def unscaled(X):
    """``X``'s columns as a user's table may hold them: shifted by 3 (nearly all positive) and of scales
    1, 10, ..., 10,000 in turn."""
    scales = 10.0 ** (np.arange(X.shape[1]) % 5)
    return (X + 3.0) * scales


UNSCALED = "columns of scales 1 to 1e4, no scaler"


def regression_tables(rng):
    """(name, X, y, training rows) of every regression quirk, from ``rng``."""
    X, y = signal_table(rng)
    cut = int(TRAIN_SHARE * len(X))
    yield table("a constant column", np.c_[X, np.ones(len(X))], y)
    rare = np.zeros(len(X))
    rare[[0, cut + 1, cut + 2]] = 1.0  # non-zero on one training row and two test rows
    yield table("a column non-zero on one training row", np.c_[X, rare], y)
    yield table("three columns repeated", np.c_[X, X[:, :3]], y)
    yield table("target 1e6 + 1e3 y", X, 1e6 + 1e3 * y)
    yield table("integer targets", X, np.round(y))
    yield table(f"{SMALL_TRAIN} training rows", *signal_table(rng, n=SMALL_TRAIN + 1000, d=5), SMALL_TRAIN)
    categories = np.eye(6)[rng.randint(0, 6, len(X))]
    effects = X[:, :3] @ rng.randn(3) + categories @ rng.randn(6)
    yield table("one-hot columns", np.c_[X[:, :3], categories], effects + rng.randn(len(X)))
    outliers = y.copy()
    rows = rng.choice(len(y), len(y) // 20, replace=False)
    outliers[rows] += 15 * rng.choice([-1.0, 1.0], len(rows))
    yield table("5% outliers in y", X, outliers)
    yield table("float32 inputs", X.astype(np.float32), y)
    yield table("a log-normal column", np.c_[X, np.exp(2 * rng.randn(len(X)))], y)
    yield table(UNSCALED, unscaled(X), y, scaled=False)
    yield table(GLITCHED, glitched(X), y)
    yield table(REPEATED, *repeated(X, y, cut))


def classification_tables(rng):
    """(name, X, y, training rows) of every classification quirk, from ``rng``."""
    X = rng.randn(400, 5)
    logits = X[:, 0] - X[:, 1]
    y = (logits + 0.5 * rng.randn(len(X)) > 0).astype(int)
    yield table("string labels", X, np.where(y == 1, "yes", "no"))
    yield table("7% positive", X, (logits + 0.5 * rng.randn(len(X)) > 2.2).astype(int))
    three = np.digitize(logits, [-1.0, 1.0])
    three[:2] = 3  # a fourth class of two training rows
    yield table("a class of two rows", X, three)
    yield table("pandas frame and series", pd.DataFrame(X, columns=list("abcde")), pd.Series(y))
    yield table("one feature", X[:, :1], y)
    yield table("labels 0.0 and 1.0", X, y.astype(float))
    yield table("separable by a hyperplane", X, (X[:, 0] > 0).astype(int))
    yield table(UNSCALED, unscaled(X), y, scaled=False)
    yield table(GLITCHED, glitched(X), y)


def split(X, y, n_train):
    """X_train, X_test, y_train, y_test: the first ``n_train`` rows, then the others."""
    rows = (slice(None, n_train), slice(n_train, None))
    if hasattr(X, "iloc"):
        return *(X.iloc[r] for r in rows), *(y.iloc[r] for r in rows)
    return *(X[r] for r in rows), *(y[r] for r in rows)


def score(estimator, classification, scaled, X_train, X_test, y_train, y_test):
    """(NLL, coverage (NaN for a classifier), seconds, flags) of ``estimator`` on one split, behind a
    ``StandardScaler`` where ``scaled``."""
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = (make_pipeline(StandardScaler(), estimator) if scaled else estimator).fit(X_train, y_train)
        if classification:
            proba, labels = model.predict_proba(X_test), model.predict(X_test)
        else:
            mean, std = model.predict(X_test, return_std=True)
    seconds = time.perf_counter() - start
    # A warning's text up to its first figure: one flag for the same warning on every draw.
    flags = {f"warns: {re.split(r'[0-9]', str(w.message))[0].strip()}" for w in caught
             if not issubclass(w.category, DeprecationWarning)}
    if classification:
        nll, coverage, outputs = log_loss(y_test, proba, labels=estimator.classes_), np.nan, proba
        if not set(np.unique(labels)) <= set(np.unique(y_train)):
            flags.add("predicts an unknown label")
    else:
        y_test = np.asarray(y_test, dtype=np.float64)
        nll = float(-norm.logpdf(y_test, mean, std).mean())
        coverage, outputs = float(np.mean(np.abs(y_test - mean) <= norm.ppf(0.975) * std)), np.c_[mean, std]
    if not np.all(np.isfinite(outputs)):
        flags.add("non-finite output")
    return nll, coverage, seconds, flags


def run_task(task, args):
    """Fit every table of ``task`` ('regression' or 'classification') with the reference and
    ``args.methods``, and print their table."""
    classification = task == "classification"
    tables = classification_tables if classification else regression_tables
    reference = "LogisticRegression" if classification else "BayesianRidge"
    methods = args.methods
    cell = "NLL" if classification else "NLL / 95% coverage"
    print(f"\n{task}: test {cell} (mean over {args.seeds} draw(s)), seconds a fit; the reference {reference}\n")
    print("| table | " + reference + " | " + " | ".join(methods) + " |")
    print("|---|" + "---|" * (len(methods) + 1))
    results = {}
    for seed in range(args.seeds):
        for name, X, y, n_train, scaled in tables(np.random.RandomState(seed)):
            if args.tables and not any(text in name for text in args.tables):
                continue
            parts = split(X, y, n_train)
            estimators = {reference: LogisticRegression(max_iter=1000) if classification else BayesianRidge(),
                          **{m: make_estimator(m, classification, quick=args.quick, max_epochs=args.max_epochs,
                                                random_state=seed, device=args.device) for m in methods}}
            for label, estimator in estimators.items():
                try:
                    outcome = score(estimator, classification, scaled, *parts)
                except Exception as error:  # a quirk's failure is what this benchmark looks for
                    outcome = (np.nan, np.nan, np.nan, {f"{type(error).__name__}: {str(error)[:80]}"})
                results.setdefault((name, label), []).append(outcome)
    for name in dict.fromkeys(name for name, _ in results):
        row = []
        for label in (reference, *methods):
            runs = results[(name, label)]
            nll, coverage, seconds = (np.mean([run[i] for run in runs]) for i in range(3))
            flags = set().union(*(run[3] for run in runs))
            cell = f"{nll:.3f}" + ("" if classification else f" / {coverage:.2f}") + f", {seconds:.1f} s"
            row.append(cell + "".join(f" **{flag}**" for flag in sorted(flags)))
        print(f"| {name} | " + " | ".join(row) + " |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=1, help="draws of every table (default: 1)")
    parser.add_argument("--tasks", nargs="+", choices=["regression", "classification"],
                        default=["regression", "classification"])
    parser.add_argument("--tables", nargs="+", metavar="TEXT", help="only the tables whose names contain a TEXT")
    add_defaults_options(parser)
    args = parser.parse_args()
    pin_threads(args.threads)
    for task in args.tasks:
        run_task(task, args)


if __name__ == "__main__":
    main()
