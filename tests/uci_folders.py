"""A UCI data set's folder written by a test, in the layout ``sklearn_quinn.datasets`` reads."""

import numpy as np


def write_uci_set(folder, data, splits, n_hidden=None):
    """Write ``data`` (rows, the last column the target) and its ``splits``, a list of ``(train rows,
    test rows)``, to ``folder``; ``n_hidden``: the hidden units of ``n_hidden.txt`` (None: no file)."""
    folder.mkdir(parents=True)
    np.savetxt(folder / "data.txt", data)
    np.savetxt(folder / "index_features.txt", np.arange(data.shape[1] - 1), fmt="%d")
    np.savetxt(folder / "index_target.txt", [data.shape[1] - 1], fmt="%d")
    np.savetxt(folder / "n_splits.txt", [len(splits)], fmt="%d")
    for split, (train, test) in enumerate(splits):
        np.savetxt(folder / f"index_train_{split}.txt", train, fmt="%d")
        np.savetxt(folder / f"index_test_{split}.txt", test, fmt="%d")
    if n_hidden is not None:
        np.savetxt(folder / "n_hidden.txt", [n_hidden], fmt="%d")
