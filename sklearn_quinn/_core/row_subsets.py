"""A uniform random subset of a big table's rows, for what is read from sums over all of them.

The Laplace evidence's updates during training, and SWAG's SGD rate and
covariance scale, are sums or means over the training rows of per-row terms
(a curvature, a squared residual, a gradient's square): a uniform random
subset of ``SUBSET_ROWS`` rows, each standing for ``n_rows / SUBSET_ROWS`` of
the table, estimates each sum without bias, with a relative standard error
of ``cv / sqrt(SUBSET_ROWS)`` (0.7% of the terms' coefficient of variation),
and what is computed from the sums (the evidence's maximisers, the largest
eigenvalue of the curvature) consistently. On a million rows the passes over
every row had taken two thirds of a SWAG fit and most of a MAP training
(docs: scale).
"""

import numpy as np

#: Training rows, at most, that the sums over the rows are read from.
SUBSET_ROWS = 20_000


def random_rows(n_rows, n_chosen, seed):
    """Sorted indices of ``n_chosen`` of ``n_rows`` rows, seeded, without replacement (every row
    in order when ``n_chosen == n_rows``): the rows of a random subset, or of an ensemble
    member's share of the data."""
    if n_chosen == n_rows:
        return np.arange(n_rows)
    return np.sort(np.random.RandomState(seed).choice(n_rows, n_chosen, replace=False))


def random_subset(X, Y, seed):
    """A seeded uniform random ``SUBSET_ROWS`` of the rows of ``X`` and ``Y``, and the table's rows each stands for.

    Parameters
    ----------
    X, Y : ndarray or tensor of shape (N, D) and (N, O)
    seed : int

    Returns
    -------
    X, Y : ndarray or tensor of shape (n, D) and (n, O)
        The rows in their order; ``X`` and ``Y`` themselves at or below
        ``SUBSET_ROWS`` rows.
    row_weight : float
        ``N / SUBSET_ROWS``, or 1.0 for every row.
    """
    n_rows = len(X)
    if n_rows <= SUBSET_ROWS:
        return X, Y, 1.0
    rows = random_rows(n_rows, SUBSET_ROWS, seed)
    return X[rows], Y[rows], n_rows / SUBSET_ROWS
