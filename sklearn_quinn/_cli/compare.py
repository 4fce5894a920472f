"""``sklearn-quinn compare``: every method on one table, side by side.

Each method is fitted in ``Pipeline([StandardScaler(), estimator])`` on a
random train split and scored on the test split with ``sklearn_quinn.metrics``:
regression by RMSE, Gaussian NLL, CRPS and the coverage of the central 95%
interval; classification by accuracy, categorical NLL and ECE; both with the
fit seconds.
"""

import time
from pathlib import Path

from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from tqdm.auto import tqdm

from .. import metrics
from . import report
from .data import is_classification, load_table
from .methods import METHODS, check_methods, make_estimator


def run_compare(data, target, methods, *, task="auto", test_size=0.2, out="sklearn-quinn-report",
                random_state=0, max_epochs=None, device="cpu", log=None):
    """Fit and score every method; write the report to ``out``; return the table rows.

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
    random_state : int
        Seeds the split and every estimator.
    max_epochs : int, default=None
        Overrides every method's training epochs.
    device : str, default='cpu'
        Torch device of every fit ('cuda', ...).
    log : file, default=None
        Where the progress bar goes (None: stderr).

    Returns
    -------
    rows : list of dict
        One per method, the columns of the table.
    """
    check_methods(methods)
    if not 0 < test_size < 1:
        raise ValueError(f"--test-size must be in (0, 1), got {test_size}")
    X, y, _ = load_table(data, target)
    classification = is_classification(y) if task == "auto" else task == "classification"
    if not classification and y.dtype.kind not in "fiu":
        raise ValueError("a regression needs a numeric target; the target holds text")
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=test_size, random_state=random_state, stratify=y if classification else None
    )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    bar = tqdm(methods, desc="fitting", unit="method", file=log)
    for name in bar:
        bar.set_postfix_str(name)
        estimator = make_estimator(name, classification, quick=True, max_epochs=max_epochs, random_state=random_state,
                                   device=device)
        model = Pipeline([("scale", StandardScaler()), ("model", estimator)])
        start = time.perf_counter()
        model.fit(X_train, y_train)
        seconds = time.perf_counter() - start
        title = f"{METHODS[name].label} ({name})"
        if classification:
            classes = model.classes_
            proba = model.predict_proba(X_test)
            rows.append({"method": name, "accuracy": metrics.accuracy(y_test, proba, labels=classes),
                         "NLL": metrics.categorical_nll(y_test, proba, labels=classes),
                         "ECE": metrics.expected_calibration_error(y_test, proba, labels=classes),
                         "fit s": seconds})
            report.plot_classification(out / f"{name}.png", title, y_test, proba, classes)
        else:
            mean, std = model.predict(X_test, return_std=True)
            rows.append({"method": name, "RMSE": metrics.root_mean_squared_error(y_test, mean),
                         "NLL": metrics.gaussian_nll(y_test, mean, std),
                         "CRPS": metrics.crps_gaussian(y_test, mean, std),
                         "95% coverage": metrics.interval_coverage(y_test, mean, std, 0.95),
                         "fit s": seconds})
            report.plot_regression(out / f"{name}.png", title, y_test, mean, std)
    report.write_tables(rows, out)
    return rows
