"""``sklearn-quinn compare``: every method on one table, side by side.

Each method is fitted in ``Pipeline([StandardScaler(), estimator])`` on a
random train split and scored on the test split with ``sklearn_quinn.metrics``:
regression by RMSE, Gaussian NLL, CRPS and the coverage of the central 95%
interval; classification by accuracy, categorical NLL and ECE; both with the
fit seconds. The scikit-learn references of the task (``references.py``) are
fitted and scored the same way, in the same table.

The pieces (the split, the candidates, fitting and scoring one) are also what
the benchmark scripts under ``benchmarks/`` run, so that their first split is
this command's.
"""

import time
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from tqdm.auto import tqdm

from .. import metrics
from . import report
from .data import detected_task, load_table
from .methods import METHODS, check_methods, make_estimator
from .references import REFERENCES, make_reference, references_for, subsample_note


class Candidate(NamedTuple):
    """One row of the table before it is fitted."""

    name: str  # the table's method column and the name of its PNG
    title: str  # the title of its plot
    estimator: object
    note: str | None = None  # a line for the report (a reference fitted on a subset of the rows)


class Scored(NamedTuple):
    """A fitted candidate: the pipeline, the table's columns and the test predictions."""

    model: Pipeline
    scores: dict
    prediction: tuple  # (mean, std) for a regression, (proba,) for a classification


def split_table(X, y, classification, *, test_size=0.2, random_state=0):
    """``X_train, X_test, y_train, y_test``: the random split of ``compare``, stratified by class for a
    classification."""
    if classification:
        classes, counts = np.unique(y, return_counts=True)
        single = classes[counts < 2]
        if len(single):
            shown = ", ".join(map(repr, single[:3].tolist())) + (" ..." if len(single) > 3 else "")
            raise ValueError(f"a classification's split is stratified and needs 2 rows of every class; "
                             f"{len(single)} of the {len(classes)} classes have one ({shown}): drop those rows, "
                             "or pass --task regression for a numeric target")
    return train_test_split(X, y, test_size=test_size, random_state=random_state,
                            stratify=y if classification else None)


def pay_one_time_costs():
    """Pay the process's one-time costs before any fit is timed, so that they do not land on the first
    row's 'fit s': torch's optimizers import its compiler's modules when the first is made."""
    torch.optim.Adam([torch.zeros(1, requires_grad=True)])


def candidates(methods, classification, X_train, *, references=True, quick=False, max_epochs=None, random_state=0,
               device="cpu", params=None):
    """The networks of ``methods``, then the scikit-learn references of the task.

    Parameters
    ----------
    methods : list of str
        Keys of ``METHODS``.
    classification : bool
    X_train : ndarray of shape (n_samples, n_features)
        The training rows (the references' sizes and notes depend on them).
    references : bool, default=True
        Add the task's references (``REFERENCES``) after the networks.
    quick : bool, default=False
        The methods' smaller budgets (``compare --quick``), else the package's defaults.
    max_epochs, random_state, device
        See :func:`~sklearn_quinn._cli.methods.make_estimator`; ``random_state``
        also seeds the references.
    params : dict, default=None
        Parameters of every method's estimator away from its settings (the
        benchmarks' ``--set``); not the references'.

    Returns
    -------
    list of Candidate
    """
    n_rows, n_features = X_train.shape
    rows = [Candidate(name, f"{METHODS[name].label} ({name})",
                      make_estimator(name, classification, quick=quick, max_epochs=max_epochs,
                                     random_state=random_state, n_rows=n_rows, device=device, **(params or {})))
            for name in methods]
    if references:
        rows += [Candidate(name, f"scikit-learn {REFERENCES[name].label}",
                           make_reference(name, n_features, random_state=random_state),
                           subsample_note(name, n_rows))
                 for name in references_for(classification)]
    return rows


def regression_scores(y_test, mean, std):
    """The regression columns of the table (without the fit seconds)."""
    return {"RMSE": metrics.root_mean_squared_error(y_test, mean), "NLL": metrics.gaussian_nll(y_test, mean, std),
            "CRPS": metrics.crps_gaussian(y_test, mean, std),
            "95% coverage": metrics.interval_coverage(y_test, mean, std, 0.95)}


def classification_scores(y_test, proba, classes):
    """The classification columns of the table (without the fit seconds); ECE over 15 bins."""
    return {"accuracy": metrics.accuracy(y_test, proba, labels=classes),
            "NLL": metrics.categorical_nll(y_test, proba, labels=classes),
            "ECE": metrics.expected_calibration_error(y_test, proba, n_bins=15, labels=classes)}


def fit_and_score(estimator, X_train, y_train, X_test, y_test, classification):
    """Fit ``Pipeline([StandardScaler(), estimator])`` and score it on the test rows.

    The scores are the table's columns, the fit seconds last ('fit s').
    """
    model = Pipeline([("scale", StandardScaler()), ("model", estimator)])
    start = time.perf_counter()
    model.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    if classification:
        prediction = (model.predict_proba(X_test),)
        scores = classification_scores(y_test, *prediction, model.classes_)
    else:
        prediction = model.predict(X_test, return_std=True)
        scores = regression_scores(y_test, *prediction)
    return Scored(model, {**scores, "fit s": seconds}, tuple(prediction))


def run_compare(data, target, methods, *, task="auto", test_size=0.2, out="sklearn-quinn-report", references=True,
                random_state=0, quick=False, max_epochs=None, device="cpu", log=None):
    """Fit and score every method and reference; write the report to ``out``; return the table rows and notes.

    Parameters
    ----------
    data, target : str
        See :func:`sklearn_quinn._cli.data.load_table`.
    methods : list of str
        Keys of ``METHODS``.
    task : {'auto', 'regression', 'classification'}
        'auto' detects a classification from the target.
    test_size : float
        Fraction of the rows held out for scoring.
    out : str or Path
        Report folder, made if absent; files in it are overwritten.
    references : bool, default=True
        Add the scikit-learn references of the task (``REFERENCES``).
    random_state : int
        Seeds the split and every estimator.
    quick : bool, default=False
        Fit the methods with their smaller budgets (``METHODS``' ``quick``
        settings) instead of the package's defaults.
    max_epochs : int, default=None
        Overrides every method's training epochs.
    device : str, default='cpu'
        Torch device of every fit ('cuda', ...).
    log : file, default=None
        Where the progress bar goes (None: stderr).

    Returns
    -------
    rows : list of dict
        One per method, then one per reference: the columns of the table.
    notes : list of str
        Lines printed below the table (what the reference rows are, a reference
        fitted on a subset of the rows).
    """
    check_methods(methods)
    if not 0 < test_size < 1:
        raise ValueError(f"--test-size must be in (0, 1), got {test_size}")
    with warnings.catch_warnings(record=True) as caught:  # what reading the table says goes to the notes
        X, y, _ = load_table(data, target)
    read = _warning_notes("the table", caught)
    if task == "auto":
        classification, task_note = detected_task(y)
    else:
        classification, task_note = task == "classification", None
    if not classification and y.dtype.kind not in "fiu":
        raise ValueError("a regression needs a numeric target; the target holds text")
    X_train, X_test, y_train, y_test = split_table(X, y, classification, test_size=test_size,
                                                   random_state=random_state)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    todo = candidates(methods, classification, X_train, references=references, quick=quick, max_epochs=max_epochs,
                      random_state=random_state, device=device)
    pay_one_time_costs()
    warned = []
    bar = tqdm(todo, desc="fitting", unit="method", file=log)
    for candidate in bar:
        bar.set_postfix_str(candidate.name)
        # A fit's warnings go to the report's notes, not through the progress bar; the filters in
        # force (the user's, Python's own) still decide which are shown, or raised.
        with warnings.catch_warnings(record=True) as caught:
            scored = fit_and_score(candidate.estimator, X_train, y_train, X_test, y_test, classification)
        warned += _warning_notes(f"{candidate.name} warned", caught)
        rows.append({"method": candidate.name, **scored.scores})
        path = out / f"{candidate.name}.png"
        if classification:
            report.plot_classification(path, candidate.title, y_test, *scored.prediction, scored.model.classes_)
        else:
            report.plot_regression(path, candidate.title, y_test, *scored.prediction)
    notes = read + [candidate.note for candidate in todo if candidate.note]
    notes += _size_notes(len(y_train), len(y_test)) + warned
    if references:
        labels = "; ".join(f"{name}: {REFERENCES[name].label}" for name in references_for(classification))
        notes.insert(0, f"sklearn-* rows are scikit-learn references, fitted and scored as the networks are ({labels})")
    if task_note:
        notes.insert(0, task_note)
    report.write_tables(rows, out, notes)
    return rows, notes


def _warning_notes(source, caught):
    """One line per distinct warning ``caught`` while ``source`` ran (reading the table, a fit), each
    message on one line."""
    messages = (" ".join(str(warning.message).split()).rstrip(".") for warning in caught)
    return [f"{source}: {message}" for message in dict.fromkeys(messages)]


def _size_notes(n_train, n_test, few=10):
    """Lines saying that the split left fewer than ``few`` rows on a side: its scores are noise, or its
    fits have next to nothing to learn from."""
    notes = []
    if n_test < few:
        notes.append(f"only {n_test} test row{'s' * (n_test > 1)}: the scores are those of a handful of rows "
                     "(a larger --test-size scores more)")
    if n_train < few:
        notes.append(f"only {n_train} training row{'s' * (n_train > 1)} (a smaller --test-size trains on more)")
    return notes
