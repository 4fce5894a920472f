"""Leave-one-out cavities of a linearised Laplace posterior, in closed form (pure torch).

In the linearised model the outputs of training row ``i`` are ``N(m_i, V_i)``,
``V_i = J_i Sigma J_i^T``. Row ``i``'s likelihood entered the posterior as the
Gaussian site ``-s * (g_i^T (f - m_i) + (f - m_i)^T Lambda_i (f - m_i) / 2)``,
the second-order expansion of ``log p(y_i | f)`` at the MAP, with ``g_i`` and
``Lambda_i`` the gradient and Hessian of ``-log p(y_i | f)`` in the outputs
(for a softmax, ``p_i - onehot(y_i)`` and ``diag(p_i) - p_i p_i^T``) and
``s`` the cov_scale, which tempers the whole posterior. Removing the site
gives the cavity, the posterior of the outputs without row ``i``:

    V_-i = (I - s V_i Lambda_i)^-1 V_i,    m_-i = m_i + s V_-i g_i,

the leave-one-out of Vehtari et al. (2016) for a Laplace approximation, with
no refit: a prediction on the training rows. At ``s`` the cavity's mean is
that at ``s = 1`` and its covariance that at ``s = 1`` divided by ``s``, so
the cavities are taken once, at ``s = 1``.
"""

import math

import torch


def site_cavities(mean, covariance, gradient, hessian):
    """The outputs' leave-one-out mean and covariance of every training row, at ``s = 1``.

    Parameters
    ----------
    mean : tensor of shape (N, O)
        The MAP's outputs on the training rows.
    covariance : tensor of shape (N, O, O)
        Their covariance ``J_i Sigma J_i^T`` under the untempered posterior ``Sigma = H^-1``.
    gradient : tensor of shape (N, O)
        ``d(-log p(y_i | f)) / df`` at the MAP's outputs.
    hessian : tensor of shape (N, O, O)
        The precision of each row's site in the outputs (for the GGN the likelihood's
        ``d^2(-log p(y_i | f)) / df^2`` there).

    Returns
    -------
    cavity_mean : tensor of shape (N, O)
    cavity_covariance : tensor of shape (N, O, O)
        NaN, with the row's mean, where the cavity is improper in floating point: ``I - V_i
        Lambda_i`` singular, or a cavity variance below zero by more than rounding. A GGN's or
        empirical Fisher's cavities are proper in exact arithmetic (the precision without a row's
        term is at least the prior's), but a posterior as badly conditioned as that of weights far
        from a mode (eigenvalues spanning twelve orders) loses them to rounding.

    References
    ----------
    A. Vehtari, T. Mononen, V. Tolvanen, T. Sivula and O. Winther, "Bayesian
    leave-one-out cross-validation approximations for Gaussian latent variable
    models", JMLR 17(103), 2016.
    """
    eye = torch.eye(mean.shape[-1], dtype=mean.dtype, device=mean.device)
    cavity, singular = torch.linalg.solve_ex(eye - covariance @ hessian, covariance)
    cavity = 0.5 * (cavity + cavity.mT)
    solved = (singular == 0) & torch.isfinite(cavity).all(-1).all(-1)
    eigenvalues = torch.linalg.eigvalsh(torch.where(solved[:, None, None], cavity, eye))
    # A variance below zero by more than rounding.
    proper = solved & (eigenvalues[:, 0] >= -math.sqrt(torch.finfo(cavity.dtype).eps) * eigenvalues[:, -1].abs())
    cavity = torch.where(proper[:, None, None], cavity, torch.nan)
    return mean + (cavity @ gradient.unsqueeze(-1)).squeeze(-1), cavity
