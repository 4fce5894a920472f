"""Loaders for benchmark data.

The UCI regression benchmark is read from a directory given at run time, one
folder per data set holding ``data.txt``, ``index_features.txt``,
``index_target.txt``, ``index_train_{i}.txt``, ``index_test_{i}.txt`` and
``n_splits.txt``.

References
----------
J. M. Hernández-Lobato and R. P. Adams, "Probabilistic backpropagation for
scalable learning of Bayesian neural networks", ICML 2015.
"""

import re
from numbers import Integral
from pathlib import Path

import numpy as np

UCI_DATASETS = {
    "boston": "bostonHousing",
    "concrete": "concrete",
    "energy": "energy",
    "kin8nm": "kin8nm",
    "naval": "naval-propulsion-plant",
    "power": "power-plant",
    "protein": "protein-tertiary-structure",
    "wine": "wine-quality-red",
    "yacht": "yacht",
}


def _uci_folder(data_dir, name):
    if name not in UCI_DATASETS:
        raise ValueError(f"Unknown UCI data set {name!r}; expected one of {sorted(UCI_DATASETS)}.")
    folder = Path(data_dir) / UCI_DATASETS[name]
    if not (folder / "data.txt").is_file():
        raise ValueError(f"No UCI data for {name!r} under {folder}: data.txt is missing.")
    return folder


def uci_n_splits(data_dir, name):
    """Number of standard train/test splits of a UCI data set."""
    return int(np.loadtxt(_uci_folder(data_dir, name) / "n_splits.txt"))


def load_uci_split(data_dir, name, split):
    """One standard train/test split of a UCI regression data set.

    Parameters
    ----------
    data_dir : str or Path
        Directory holding one folder per data set.
    name : str
        Short name: one of ``UCI_DATASETS`` ('concrete', 'yacht', ...).
    split : int
        Split index, from 0 to ``uci_n_splits(data_dir, name) - 1``.

    Returns
    -------
    X_train, X_test, y_train, y_test : ndarray
        Raw (unscaled) features and target.
    """
    folder = _uci_folder(data_dir, name)
    n_splits = uci_n_splits(data_dir, name)
    if isinstance(split, bool) or not isinstance(split, Integral) or not 0 <= split < n_splits:
        raise ValueError(f"split must be in [0, {n_splits - 1}] for {name!r}, got {split}.")
    data = np.loadtxt(folder / "data.txt")
    features = np.loadtxt(folder / "index_features.txt", dtype=int)
    target = int(np.loadtxt(folder / "index_target.txt"))
    train = np.loadtxt(folder / f"index_train_{split}.txt", dtype=int)
    test = np.loadtxt(folder / f"index_test_{split}.txt", dtype=int)
    X, y = data[:, features], data[:, target]
    return X[train], X[test], y[train], y[test]


def load_uci_reference(data_dir):
    """The published reference figures of the UCI benchmark, read from its README.

    The README beside the data sets (``README.md`` in ``data_dir``) holds two
    Markdown tables: test log-likelihood per point and test RMSE, one row per
    data set, one column per published method, cells ``mean ± error``.

    Returns
    -------
    dict
        ``{"log_likelihood": table, "rmse": table}`` where a table maps a data
        set's short name to ``{method: (mean, error)}``. Method names are
        the column titles without parentheses and "re-run" ("PBP", "MC
        dropout", "MC dropout 2018", "Deep ensembles", ...), so both tables
        use the same names.
    """
    path = Path(data_dir) / "README.md"
    if not path.is_file():
        raise ValueError(f"No reference figures: {path} is missing.")
    tables, current = [], None
    for line in path.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells is None:
            current = None
            continue
        if current is None:
            current = {"columns": [_method_name(cell) for cell in cells[1:]], "rows": {}}
            tables.append(current)
        elif not set("".join(cells)) <= set("-: "):
            values = [re.match(r"(-?[\d.]+)\s*±\s*([\d.]+)", cell) for cell in cells[1:]]
            if all(values):
                current["rows"][cells[0]] = {
                    column: (float(m.group(1)), float(m.group(2))) for column, m in zip(current["columns"], values)
                }
    figures = [table for table in tables if table["rows"]]
    if len(figures) != 2:
        raise ValueError(f"Expected two reference tables (log-likelihood, RMSE) in {path}, found {len(figures)}.")
    return {"log_likelihood": figures[0]["rows"], "rmse": figures[1]["rows"]}


def _method_name(title):
    """'MC dropout, 2018 re-run' -> 'MC dropout 2018'; 'PBP (H-L&A 2015)' -> 'PBP'."""
    title = re.sub(r"\([^)]*\)", "", title).replace("re-run", "").replace(",", " ")
    return " ".join(title.split())
