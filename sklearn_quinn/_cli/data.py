"""Reading the table ``compare`` works on: a bundled data set, a CSV or a Parquet file.

A CSV is read with the standard library (no pandas needed); Parquet needs
pandas and pyarrow. Features must be numeric (encode categories first); the
target may be anything for a classification, and must have no missing values.
"""

import csv
from pathlib import Path

import numpy as np
from sklearn import datasets

BUNDLED = {
    "diabetes": datasets.load_diabetes,
    "iris": datasets.load_iris,
    "wine": datasets.load_wine,
    "breast_cancer": datasets.load_breast_cancer,
    "digits": datasets.load_digits,
}
_MAX_CLASSES = 20  # an integer-valued target with at most this many values is a classification


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
    text = [name for name, values in numeric.items() if values is None]
    if text:
        raise ValueError(f"non-numeric feature column(s) {', '.join(map(repr, text))} in {path.name}: "
                         "encode them as numbers first (e.g. one column per category)")
    missing = {name: int(np.isnan(values).sum()) for name, values in numeric.items() if np.isnan(values).any()}
    if missing:
        listed = ", ".join(f"{name!r} ({count} row{'s' * (count > 1)})" for name, count in missing.items())
        raise ValueError(f"missing values (NaN or empty) in feature column(s) {listed} of {path.name}: "
                         "fill them in (e.g. with sklearn.impute.SimpleImputer) or drop those rows first")
    y_float = _as_float(y)
    y = y_float if y_float is not None else np.asarray(y, dtype=str)
    if (y_float is not None and np.isnan(y_float).any()) or (y_float is None and np.isin(y, ["", "nan", "NaN"]).any()):
        raise ValueError(f"the target column {target!r} has missing values (NaN or empty): drop those rows first")
    return np.column_stack(list(numeric.values())), y, list(numeric)


def is_classification(y):
    """A text target, or an integer-valued one with at most 20 distinct values."""
    if y.dtype.kind not in "fiu":
        return True
    return bool(np.all(np.mod(y, 1) == 0) and len(np.unique(y)) <= _MAX_CLASSES)


def _read_csv(path):
    with open(path, newline="") as file:
        rows = list(csv.reader(file))
    if len(rows) < 2:
        raise ValueError(f"{path.name} needs a header row and at least one data row")
    header, body = rows[0], rows[1:]
    ragged = [i + 2 for i, row in enumerate(body) if len(row) != len(header)]
    if ragged:
        raise ValueError(f"{path.name}: line {ragged[0]} has a different number of fields than the header")
    return {name.strip(): [row[i].strip() for row in body] for i, name in enumerate(header)}


def _read_parquet(path):
    try:
        import pandas as pd

        frame = pd.read_parquet(path)
    except ImportError as error:
        raise ValueError(f"reading Parquet needs pandas and pyarrow: pip install pandas pyarrow ({error})") from None
    return {str(name): frame[name].to_numpy() for name in frame.columns}


def _as_float(values):
    """``values`` as float64 (empty strings as NaN), or None when some value is not a number."""
    try:
        return np.array([np.nan if isinstance(v, str) and v == "" else v for v in values], dtype=np.float64)
    except (TypeError, ValueError):
        return None
