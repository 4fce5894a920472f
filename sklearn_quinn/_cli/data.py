"""Reading the table ``compare`` works on: a bundled data set, a CSV or a Parquet file.

A CSV is read with the standard library (no pandas needed); Parquet needs
pandas and pyarrow. Features must be numeric (encode categories first); the
target may be anything for a classification, and must have no missing values
(an empty cell, or what R, pandas and spreadsheets write for one: NA, NaN,
null, ...).
"""

import csv
import math
from pathlib import Path

import numpy as np
from sklearn import datasets

from .._warnings import warn

BUNDLED = {
    "diabetes": datasets.load_diabetes,
    "iris": datasets.load_iris,
    "wine": datasets.load_wine,
    "breast_cancer": datasets.load_breast_cancer,
    "digits": datasets.load_digits,
}
MAX_CLASSES = 20  # an integer-valued target with at most this many values is a classification
# The cells that mean "missing" (compared in lower case): the empty cell and what R, pandas and
# spreadsheets write for one.
_MISSING = frozenset({"", "na", "n/a", "nan", "nat", "null", "none", "<na>", "#n/a"})


def load_table(data, target=None):
    """Features, target and feature names of ``data``.

    Parameters
    ----------
    data : str
        A key of ``BUNDLED``, or the path of a ``.csv`` (header row first) or
        ``.parquet`` file.
    target : str, default=None
        The target column of a file (required there); bundled data sets know
        theirs.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64
    y : ndarray of shape (n_samples,)
        Floats where every value parses as a number, else strings.
    feature_names : list of str
    """
    if data in BUNDLED:
        if target is not None:
            raise ValueError(f"--target names a column of a file; the bundled data set {data!r} has its own target")
        bunch = BUNDLED[data]()
        return bunch.data.astype(np.float64), bunch.target, [str(name) for name in bunch.feature_names]
    path = Path(data)
    if not path.is_file():
        raise ValueError(f"{data!r} is neither a file nor a bundled data set ({', '.join(BUNDLED)})")
    if target is None:
        raise ValueError(f"--target COLUMN is required for a file ({path.name})")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        columns = _read_csv(path)
    elif suffix == ".parquet":
        columns = _read_parquet(path)
    else:
        raise ValueError(f"cannot read {path.name}: expected a .csv or .parquet file")
    if target not in columns:
        raise ValueError(f"no column {target!r} in {path.name}; columns: {', '.join(columns)}")
    y = columns.pop(target)
    if not columns:
        raise ValueError(f"{path.name} has no feature columns besides the target {target!r}")
    numeric = {name: _as_float(values) for name, values in columns.items()}
    text = {name: _first_text(columns[name]) for name, values in numeric.items() if values is None}
    if text:
        listed = ", ".join(f"{name!r} ({value!r} in row {row})" for name, (row, value) in text.items())
        raise ValueError(f"non-numeric feature column(s) {listed} of {path.name}: write numbers without "
                         "thousands separators or units, and encode categories and dates as numbers first "
                         "(e.g. one column per category)")
    missing = {name: int(np.isnan(values).sum()) for name, values in numeric.items() if np.isnan(values).any()}
    if missing:
        listed = ", ".join(f"{name!r} ({count} row{'s' * (count > 1)})" for name, count in missing.items())
        raise ValueError(f"missing values (NaN, empty or NA) in feature column(s) {listed} of {path.name}: "
                         "fill them in (e.g. with sklearn.impute.SimpleImputer) or drop those rows first")
    infinite = [name for name, values in numeric.items() if np.isinf(values).any()]
    if infinite:
        raise ValueError(f"infinite values in feature column(s) {', '.join(map(repr, infinite))} of {path.name}")
    y_float = _as_float(y)
    if y_float is not None and np.isinf(y_float).any():
        raise ValueError(f"infinite values in the target column {target!r}")
    if y_float is None and _numbers_with_separators(y):
        row, value = _first_text(y)
        raise ValueError(f"the target column {target!r} holds numbers written as text ({value!r} in row {row}): "
                         "write them without thousands separators")
    # Class labels keep the spelled-out markers: 'NA' may be North America, 'None' a level of damage.
    missing = np.isnan(y_float) if y_float is not None else _is_missing(y, markers=False)
    if missing.any():
        raise ValueError(f"the target column {target!r} has missing values (NaN, empty or NA): drop those rows first")
    if y_float is None:
        y = np.array([str(value).strip() for value in y])
        markers = sorted({label for label in y.tolist() if label.lower() in _MISSING})
        if markers:
            warn(f"the target column {target!r} has the label(s) {', '.join(map(repr, markers))}, which R, pandas "
                 "and spreadsheets write for a missing value: kept as a class of its own")
    return np.column_stack(list(numeric.values())), y_float if y_float is not None else y, list(numeric)


def detected_task(y):
    """Whether ``y`` is a classification (a text target, or an integer-valued one of at most
    ``MAX_CLASSES`` values), and the line that says why (``compare --task auto``)."""
    if y.dtype.kind not in "fiu":
        classification, why = True, "its values are text"
    else:
        n_values, integers = len(np.unique(y)), bool(np.all(np.mod(y, 1) == 0))
        classification = integers and n_values <= MAX_CLASSES
        why = (f"{n_values} distinct {'integer ' if integers else ''}values"
               + (f", more than the {MAX_CLASSES} of a classification" if integers and not classification else ""))
    task, other = ("classification", "regression") if classification else ("regression", "classification")
    if y.dtype.kind not in "fiu":  # a regression needs numbers: no other task to offer
        return classification, f"task: {task}, detected from the target ({why})"
    return classification, f"task: {task}, detected from the target ({why}); --task {other} overrides it"


def _read_csv(path):
    """The columns of a comma-separated UTF-8 file (a spreadsheet's byte order mark read as such,
    blank lines skipped), by header name."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as file:
            lines = [(number, row) for number, row in enumerate(csv.reader(file), start=1)
                     if len(row) > 1 or (row and row[0].strip())]
    except UnicodeDecodeError as error:
        raise ValueError(f"{path.name} is not UTF-8 text ({error.reason} at byte {error.start}): save it as UTF-8 "
                         "(a spreadsheet's 'CSV UTF-8')") from None
    if len(lines) < 2:
        raise ValueError(f"{path.name} needs a header row and at least one data row")
    (_, header), body = lines[0], lines[1:]
    header = [name.strip() for name in header]
    if len(header) == 1 and (";" in header[0] or "\t" in header[0]):
        raise ValueError(f"{path.name} has one column, {header[0]!r}: it looks separated by semicolons or tabs; "
                         "save it comma-separated")
    ragged = [number for number, row in body if len(row) != len(header)]
    if ragged:
        raise ValueError(f"{path.name}: line {ragged[0]} has a different number of fields than the header")
    _check_names(header, path)
    return {name: [row[i].strip() for _, row in body] for i, name in enumerate(header)}


def _check_names(names, path):
    """Refuse a column without a name, or two of one name (a table keyed by name would drop one)."""
    if "" in names:
        raise ValueError(f"column {names.index('') + 1} of {path.name} has no name (a saved pandas index? write "
                         "the file with index=False, or name the column)")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"{path.name} has several columns named {', '.join(map(repr, repeated))}: rename them")


def _read_parquet(path):
    try:
        import pandas as pd

        frame = pd.read_parquet(path)
    except ImportError as error:
        raise ValueError(f"reading Parquet needs pandas and pyarrow: pip install pandas pyarrow ({error})") from None
    names = [str(name) for name in frame.columns]
    _check_names(names, path)
    dates = [name for name, column in zip(names, frame.columns) if frame[column].dtype.kind in "mM"]
    if dates:
        raise ValueError(f"date or time column(s) {', '.join(map(repr, dates))} in {path.name}: encode them as "
                         "numbers first (e.g. the year, or days since a start)")
    return {name: frame[column].to_numpy() for name, column in zip(names, frame.columns)}


def _is_missing(values, markers=True):
    """Which of ``values`` (an object or string array) is missing: None, a float NaN, pandas' NA, an empty
    cell and, with ``markers``, a cell of ``_MISSING`` ('NA', 'null', ...)."""
    def missing(value):
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return True
        text = str(value).strip()
        return text == "" or (not isinstance(value, str) and text == "<NA>") or (markers and text.lower() in _MISSING)

    return np.array([missing(value) for value in values], dtype=bool)


def _as_float(values):
    """``values`` as float64 (missing cells, ``_MISSING``, as NaN), or None when some value is not a number."""
    values = np.asarray(values, dtype=object)
    try:
        return np.where(_is_missing(values), np.nan, values).astype(np.float64)
    except (TypeError, ValueError):
        return None


def _parses(value):
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _first_text(values):
    """``(row, value)`` of the first value of a column that is neither a number nor missing (row 1: the
    first data row)."""
    missing = _is_missing(np.asarray(values, dtype=object))
    return next((row, value) for row, (value, gap) in enumerate(zip(values, missing), start=1)
                if not gap and not _parses(value))


def _numbers_with_separators(values):
    """Whether a column of text would be all numbers without its thousands separators (``'250,000'``):
    a numeric column written for reading, not class labels."""
    cells = [str(value).strip() for value, gap in zip(values, _is_missing(np.asarray(values, dtype=object)))
             if not gap]
    return all(_parses(cell.replace(",", "").replace("_", "").replace(" ", "")) for cell in cells)
