"""Class probabilities from a Gaussian over the logits, for numpy arrays.

:func:`predict_proba_from_gaussian` approximates ``E[softmax(z)]`` for
``z ~ N(mean, cov)`` at each of n points with one of five predictives; the
torch functions behind it (:func:`mc_bridge`, :func:`laplace_bridge`,
:func:`mean_field_0`, :func:`mean_field_1`, :func:`mean_field_2`) are
re-exported for tensors.
"""

import numpy as np
import torch
from sklearn.utils import check_random_state

from ._core.link_approximations import (
    PREDICTIVES,
    laplace_bridge,
    mc_bridge,
    mean_field_0,
    mean_field_1,
    mean_field_2,
    predictive_probabilities,
)
from ._core.rng import prediction_generator
from ._validation import check_count
from .base import _MAX_SEED

__all__ = [
    "predict_proba_from_gaussian",
    "mc_bridge",
    "laplace_bridge",
    "mean_field_0",
    "mean_field_1",
    "mean_field_2",
]


def _check_finite(name, array):
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or infinity.")


def _check_mean(mean):
    mean = np.ascontiguousarray(mean, dtype=np.float64)  # a reversed view too, which torch cannot wrap
    if mean.ndim != 2 or mean.shape[1] < 2:
        raise ValueError(f"mean must have shape (n_points, n_classes) with n_classes >= 2, got shape {mean.shape}.")
    _check_finite("mean", mean)
    return mean


def _check_cov(cov, n_points, n_classes):
    """``cov`` as float64 ``(n, C, C)`` symmetric PSD covariances or ``(n, C)`` non-negative variances."""
    cov = np.ascontiguousarray(cov, dtype=np.float64)
    if cov.shape not in [(n_points, n_classes, n_classes), (n_points, n_classes)]:
        raise ValueError(
            f"cov must have shape {(n_points, n_classes, n_classes)} (covariances) or "
            f"{(n_points, n_classes)} (variances) to match mean, got shape {cov.shape}."
        )
    _check_finite("cov", cov)
    variances = cov if cov.ndim == 2 else np.diagonal(cov, axis1=1, axis2=2)
    if np.any(variances < 0):
        raise ValueError(f"cov has negative variances (smallest {variances.min():.3g}).")
    if cov.ndim == 3:
        _check_positive_semidefinite(cov)
    return cov


def _check_positive_semidefinite(cov):
    """Symmetric, with no eigenvalue below zero beyond rounding (1e-8 of the largest)."""
    if not np.allclose(cov, cov.transpose(0, 2, 1), rtol=1e-10, atol=0):
        raise ValueError("cov must be symmetric.")
    eigenvalues = np.linalg.eigvalsh(cov)
    tolerance = 1e-8 * np.abs(eigenvalues).max(axis=1)
    if np.any(eigenvalues.min(axis=1) < -tolerance):
        raise ValueError(f"cov must be positive semi-definite (smallest eigenvalue {eigenvalues.min():.3g}).")


def predict_proba_from_gaussian(mean, cov, predictive="mc_bridge", n_samples=1000, random_state=0):
    """Class probabilities ``E[softmax(z)]`` for ``z ~ N(mean, cov)`` over the logits of each point.

    The expectation has no closed form. ``'mc_bridge'`` averages the softmax
    over ``n_samples`` draws (error ``O(1/sqrt(n_samples))``, cost
    ``O(n_samples C^2)`` per point); the four analytic predictives cost
    ``O(C^2)`` per point or less and are biased: ``'mean_field_1'`` and
    ``'mean_field_2'`` are the most accurate, ``'laplace_bridge'`` the least
    (see :mod:`sklearn_quinn._core.link_approximations` for the formulas). All are
    exactly ``softmax(mean)`` where the covariance is zero. Computed in float64.

    Parameters
    ----------
    mean : array-like of shape (n_points, n_classes)
        Means of the logits, ``n_classes >= 2``.
    cov : array-like of shape (n_points, n_classes, n_classes) or (n_points, n_classes)
        Covariances of the logits (symmetric, positive semi-definite), or
        their variances when the logits are independent.
    predictive : {'mc_bridge', 'laplace_bridge', 'mean_field_0', 'mean_field_1', \
'mean_field_2'}, default='mc_bridge'
        How the expectation is approximated.
    n_samples : int, default=1000
        Draws per point for ``'mc_bridge'``; unused by the others.
    random_state : int, RandomState instance or None, default=0
        Seeds the draws of ``'mc_bridge'``.

    Returns
    -------
    proba : ndarray of shape (n_points, n_classes)
        Non-negative, each row summing to one.

    Raises
    ------
    ValueError
        For an unknown ``predictive``, a non-positive ``n_samples``, shapes that
        do not match, NaN or infinite entries, negative variances, or a
        covariance that is not symmetric positive semi-definite.

    See Also
    --------
    sklearn_quinn._core.link_approximations.predictive_probabilities : The same on torch tensors.

    References
    ----------
    M. Hobbhahn, A. Kristiadi and P. Hennig, "Fast predictive uncertainty for
    classification with Bayesian deep networks", UAI 2022.

    Z. Lu, E. Ie and F. Sha, "Mean-field approximation to Gaussian-softmax
    integral with application to uncertainty estimation", arXiv:2006.07584, 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_quinn.predictives import predict_proba_from_gaussian
    >>> mean = np.array([[2.0, 0.0, -1.0], [0.0, 0.0, 0.0]])
    >>> variances = np.array([[4.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
    >>> predict_proba_from_gaussian(mean, variances, n_samples=10000).round(2)
    array([[0.71, 0.2 , 0.09],
           [0.34, 0.33, 0.33]])
    >>> predict_proba_from_gaussian(mean, variances, predictive="mean_field_1").round(3)
    array([[0.672, 0.214, 0.113],
           [0.333, 0.333, 0.333]])
    """
    if predictive not in PREDICTIVES:
        raise ValueError(f"Unknown predictive {predictive!r}; expected one of {sorted(PREDICTIVES)}.")
    check_count(n_samples, "n_samples")
    mean = _check_mean(mean)
    cov = _check_cov(cov, *mean.shape)
    generator = prediction_generator(check_random_state(random_state).randint(_MAX_SEED))
    # Copies: torch.from_numpy warns of a read-only array (a covariance's np.diagonal).
    proba = predictive_probabilities(
        predictive, torch.tensor(mean), torch.tensor(cov), generator=generator, n_samples=n_samples
    )
    return proba.numpy()
