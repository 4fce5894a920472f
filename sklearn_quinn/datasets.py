"""Loaders for benchmark data.

The UCI regression benchmark (Hernandez-Lobato & Adams 2015) is read from a
directory given at run time, one folder per data set holding ``data.txt``,
``index_features.txt``, ``index_target.txt``, ``index_train_{i}.txt``,
``index_test_{i}.txt`` and ``n_splits.txt``.
"""

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
    if not 0 <= split < n_splits:
        raise ValueError(f"split must be in [0, {n_splits - 1}] for {name!r}, got {split}.")
    data = np.loadtxt(folder / "data.txt")
    features = np.loadtxt(folder / "index_features.txt", dtype=int)
    target = int(np.loadtxt(folder / "index_target.txt"))
    train = np.loadtxt(folder / f"index_train_{split}.txt", dtype=int)
    test = np.loadtxt(folder / f"index_test_{split}.txt", dtype=int)
    X, y = data[:, features], data[:, target]
    return X[train], X[test], y[train], y[test]
