"""Loaders for benchmark data, and a generator of heteroscedastic toy data.

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
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, validate_params

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
    data = np.loadtxt(folder / "data.txt", ndmin=2)
    # ndmin=1: a one-line index file (one input column, one test row) would read as a scalar index,
    # which drops the array's axis.
    features = np.loadtxt(folder / "index_features.txt", dtype=int, ndmin=1)
    target = int(np.loadtxt(folder / "index_target.txt"))
    train = np.loadtxt(folder / f"index_train_{split}.txt", dtype=int, ndmin=1)
    test = np.loadtxt(folder / f"index_test_{split}.txt", dtype=int, ndmin=1)
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


@validate_params(
    {"n_samples": [Interval(Integral, 1, None, closed="left")], "random_state": ["random_state"],
     "return_noise_std": ["boolean"]},
    prefer_skip_nested_validation=True,
)
def make_heteroscedastic_wave(n_samples=300, *, random_state=None, return_noise_std=False):
    """One input, a sine wave, and a noise that grows with the input's size.

    ``x`` is uniform on ``[-3, 3]`` and ``y = sin(x) + (0.1 + 0.4 |x|) eps`` with
    ``eps`` standard normal: the noise std runs from 0.1 at the centre to 1.3
    at the ends, so that a predictive with one noise std for every input is
    too wide in the middle and too narrow at the edges, and a
    ``likelihood='heteroscedastic'`` fit is not. The true mean is ``sin(x)``.

    Parameters
    ----------
    n_samples : int, default=300
        The number of rows.
    random_state : int, RandomState instance or None, default=None
        Seeds the inputs and the noise.
    return_noise_std : bool, default=False
        Also return each row's noise std.

    Returns
    -------
    X : ndarray of shape (n_samples, 1)
        The inputs, uniform on ``[-3, 3]``.
    y : ndarray of shape (n_samples,)
        The noisy targets.
    noise_std : ndarray of shape (n_samples,)
        Only with ``return_noise_std=True``: each row's noise std, ``0.1 + 0.4 |x|``.

    Examples
    --------
    >>> from sklearn_quinn.datasets import make_heteroscedastic_wave
    >>> X, y, noise_std = make_heteroscedastic_wave(5, random_state=0, return_noise_std=True)
    >>> X.shape, y.shape, bool((noise_std >= 0.1).all())
    ((5, 1), (5,), True)
    """
    rng = check_random_state(random_state)
    x = rng.uniform(-3, 3, n_samples)
    noise_std = 0.1 + 0.4 * np.abs(x)
    y = np.sin(x) + noise_std * rng.randn(n_samples)
    return (x[:, None], y, noise_std) if return_noise_std else (x[:, None], y)
