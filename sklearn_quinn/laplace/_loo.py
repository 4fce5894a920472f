"""Leave-one-out cavities of a linearised softmax Laplace posterior, in closed form (pure torch).

In the linearised model the logits of training row ``i`` are ``N(m_i, V_i)``,
``V_i = J_i Sigma J_i^T``. Row ``i``'s likelihood entered the posterior as the
Gaussian site ``s * (g_i^T (f - m_i) - (f - m_i)^T Lambda_i (f - m_i) / 2)``,
the second-order expansion of ``log softmax(f)[y_i]`` at the MAP, with
``g_i = onehot(y_i) - p_i`` and ``Lambda_i = diag(p_i) - p_i p_i^T`` (``s``
the cov_scale, which tempers the whole posterior). Removing the site gives
the cavity, the posterior of the logits without row ``i``:

    V_-i = (I - s V_i Lambda_i)^-1 V_i,    m_-i = m_i - s V_-i g_i,

the leave-one-out of Vehtari et al. (2016) for a Laplace approximation, with
no refit: a prediction on the training rows.
"""

import torch


def softmax_cavities(mean, covariance, labels, cov_scale):
    """The logits' leave-one-out mean and covariance of every training row.

    Parameters
    ----------
    mean : tensor of shape (N, C)
        The MAP's logits of the training rows.
    covariance : tensor of shape (N, C, C)
        Their covariance ``J_i Sigma J_i^T`` under the posterior at this ``cov_scale``.
    labels : tensor of shape (N,)
        The class index of each row.
    cov_scale : float
        The ``s`` the posterior ``Sigma = (s H)^-1`` was tempered with.

    Returns
    -------
    cavity_mean : tensor of shape (N, C)
    cavity_covariance : tensor of shape (N, C, C)

    References
    ----------
    A. Vehtari, T. Mononen, V. Tolvanen, T. Sivula and O. Winther, "Bayesian
    leave-one-out cross-validation approximations for Gaussian latent variable
    models", JMLR 17(103), 2016.
    """
    probabilities = torch.softmax(mean, dim=-1)
    site_precision = torch.diag_embed(probabilities) - probabilities.unsqueeze(-1) * probabilities.unsqueeze(-2)
    site_gradient = torch.nn.functional.one_hot(labels, mean.shape[-1]).to(mean.dtype) - probabilities
    eye = torch.eye(mean.shape[-1], dtype=mean.dtype, device=mean.device)
    cavity = torch.linalg.solve(eye - cov_scale * covariance @ site_precision, covariance)
    cavity = 0.5 * (cavity + cavity.mT)
    return mean - cov_scale * (cavity @ site_gradient.unsqueeze(-1)).squeeze(-1), cavity
