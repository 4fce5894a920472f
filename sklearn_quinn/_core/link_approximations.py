"""Class probabilities from a Gaussian over the logits: approximations of E[softmax(z)].

For each of N points the logits are ``z ~ N(mean, cov)`` with ``mean`` of shape
``(N, C)`` and ``cov`` either full covariances ``(N, C, C)`` or the diagonal
variances ``(N, C)``. Every predictive returns probabilities ``(N, C)`` that
are non-negative and sum to one, in the dtype of ``mean``, and equals
``softmax(mean)`` exactly (up to rounding) where the covariance is zero; with
``log=True`` their logarithms, computed as such, so that a probability that
underflows to zero keeps its finite log.

- :func:`mc_bridge`: Monte Carlo average of ``softmax(z_s)``, asymptotically exact.
- :func:`laplace_bridge`: the mean of the Dirichlet of the Laplace bridge
  (Hobbhahn, Kristiadi & Hennig, UAI 2022), uses only the variances after a
  sum-to-zero correction.
- :func:`mean_field_0`, :func:`mean_field_1`, :func:`mean_field_2`: the
  mean-field approximations of Lu, Ie & Sha (2020), from the variances alone
  to all pairwise covariances.
"""

import math

import torch

from .rng import standard_normal

#: ``lambda_0 = pi / 8``, the probit-matching constant of sigmoid(x) ~ Phi(sqrt(lambda_0) x).
LAMBDA_0 = math.pi / 8

#: Largest block of logit draws ``(points, C, n_samples)`` that mc_bridge holds at
#: once: 2 MiB, so that the logits and their softmax stay in a core's cache
#: rather than stream through main memory at each pass (benchmarks/bench_predict_tiles.py).
MC_BLOCK_BYTES = 2**21


def _variances(cov):
    """The diagonal ``(N, C)`` of full covariances ``(N, C, C)``, or ``cov`` itself if it is one."""
    return cov if cov.ndim == 2 else torch.diagonal(cov, dim1=-2, dim2=-1)


def _full_covariance(cov):
    """Full covariances ``(N, C, C)`` from either accepted form of ``cov``."""
    return torch.diag_embed(cov) if cov.ndim == 2 else cov


# ------------------------------------------------------------------ Monte Carlo
def _covariance_root(cov):
    """The symmetric square root ``R = V sqrt(max(lambda, 0)) V^T`` of PSD, possibly singular, ``cov``.

    It is the one PSD matrix with ``R R = cov``, so the draws ``R eps`` do not
    depend on how the eigendecomposition orients its eigenvectors (their signs,
    a basis of a repeated eigenvalue's space), which differs between LAPACK on
    a CPU and cuSOLVER on a GPU. It needs no jitter: a zero covariance gives
    ``R = 0`` exactly, and eigenvalues below zero by rounding are set to zero.
    Variances ``(N, C)`` take the same path, so they give the same draws as
    their diagonal covariances.
    """
    eigenvalues, eigenvectors = torch.linalg.eigh(_full_covariance(cov))
    return (eigenvectors * eigenvalues.clamp(min=0).sqrt().unsqueeze(-2)) @ eigenvectors.mT


def _average_softmax_of_draws(mean, root, noise, log):
    """``(1/S) sum_s softmax(mean + root @ eps_s)`` for one block of points (its log with ``log``)."""
    logits = mean.unsqueeze(-1) + root @ noise
    if log:
        return torch.logsumexp(torch.log_softmax(logits, dim=1), dim=-1) - math.log(noise.shape[-1])
    return torch.softmax(logits, dim=1).mean(-1)


def _softmax(logits, log):
    """``softmax`` over the last axis, or its log (``log_softmax``, finite where it underflows)."""
    return torch.log_softmax(logits, dim=-1) if log else torch.softmax(logits, dim=-1)


def mc_bridge(mean, cov, n_samples=1000, generator=None, log=False):
    """Monte Carlo predictive: ``(1/S) sum_s softmax(z_s)``, ``z_s ~ N(mean, cov)``.

    Draws use the symmetric square root of each covariance, from its
    eigendecomposition, so singular (PSD) covariances need no jitter, and a
    CPU generator gives the same draws whatever the tensors' device. Every
    point uses the same standard-normal draws ``eps_s`` (common random
    numbers), so a point's probabilities do not depend on which other points
    share the call. Points are processed in blocks of at most
    :data:`MC_BLOCK_BYTES` of draws.

    Parameters
    ----------
    mean : torch.Tensor of shape (N, C)
        Means of the logits.
    cov : torch.Tensor of shape (N, C, C) or (N, C)
        Covariances of the logits, or their variances (independent logits).
    n_samples : int, default=1000
        Draws ``S`` per point.
    generator : torch.Generator or None, default=None
        Source of the draws (None: torch's global generator).
    log : bool, default=False
        Return the log probabilities.

    Returns
    -------
    probabilities : torch.Tensor of shape (N, C)
    """
    if not len(mean):  # no points: nothing to average (torch.cat takes no empty list)
        return torch.empty_like(mean)
    root = _covariance_root(cov)
    n_classes = mean.shape[-1]
    noise = standard_normal(generator, mean, (n_classes, n_samples))
    block = max(1, MC_BLOCK_BYTES // (n_samples * n_classes * mean.element_size()))
    return torch.cat(
        [
            _average_softmax_of_draws(mean[start : start + block], root[start : start + block], noise, log)
            for start in range(0, mean.shape[0], block)
        ]
    )


# -------------------------------------------------------------- Laplace bridge
def _condition_on_zero_sum(mean, cov):
    """Mean and variances of ``z | 1^T z = 0`` for ``z ~ N(mean, cov)``.

    With row sums ``r = cov 1`` and ``t = 1^T cov 1``: ``mean - r (1^T mean) / t``
    and ``diag(cov) - r^2 / t``. Where ``t`` is zero (to rounding) the sum of
    the logits is already deterministic and the Gaussian is left unchanged.
    Variances that the conditioning removes up to rounding are set to exactly zero.
    """
    variances = _variances(cov)
    row_sums = cov.sum(-1) if cov.ndim == 3 else cov
    total = row_sums.sum(-1, keepdim=True)
    n_classes = mean.shape[-1]
    rounding = 8 * n_classes * torch.finfo(mean.dtype).eps
    conditioned = total > rounding * variances.sum(-1, keepdim=True)
    safe_total = torch.where(conditioned, total, torch.ones_like(total))
    mean = torch.where(conditioned, mean - row_sums * mean.sum(-1, keepdim=True) / safe_total, mean)
    # row_sums * (row_sums / total), not row_sums**2 / total: the square overflows at variances near
    # 1e154 (1e19 in float32), and the point then read as certain.
    reduced = torch.where(conditioned, variances - row_sums * (row_sums / safe_total), variances)
    reduced = torch.where(reduced <= rounding * variances, torch.zeros_like(reduced), reduced)
    return mean, reduced


def _log_dirichlet_concentration(mean, variances):
    """``log alpha`` of the Laplace bridge, up to a constant per point.

    ``alpha_c = (1 - 2/C + exp(mean_c) / C^2 * sum_c' exp(-mean_c')) / variances_c``,
    in log space: ``exp(mean_c) sum_c' exp(-mean_c') = exp(mean_c + logsumexp(-mean))``.
    Where some variances are zero their ``alpha`` are infinite; the limit of
    ``alpha / sum(alpha)`` as those variances vanish together puts all mass on
    them, in proportion to their numerators, which is what this returns.
    """
    n_classes = mean.shape[-1]
    constant = torch.tensor(1 - 2 / n_classes, dtype=mean.dtype, device=mean.device).log()
    log_numerator = torch.logaddexp(
        constant, mean + torch.logsumexp(-mean, dim=-1, keepdim=True) - 2 * math.log(n_classes)
    )
    deterministic = variances == 0
    only_deterministic = log_numerator.masked_fill(~deterministic, -math.inf)
    return torch.where(deterministic.any(-1, keepdim=True), only_deterministic, log_numerator - variances.log())


def laplace_bridge(mean, cov, log=False):
    r"""Mean of the Dirichlet that the Laplace bridge maps ``N(mean, cov)`` to.

    Hobbhahn, Kristiadi & Hennig (UAI 2022) with their corrections, per point:

    1. Zero-sum correction (as ``link_approx='bridge'`` / ``'bridge_norm'`` of
       laplace-torch, ``laplace/baselaplace.py``, the code behind the paper's
       experiments): condition on ``1^T z = 0``,
       :math:`\mu \leftarrow \mu - \Sigma 1 \, (1^T\mu) / (1^T \Sigma 1)`,
       :math:`\sigma^2 \leftarrow \operatorname{diag}(\Sigma) - (\Sigma 1)^2 / (1^T \Sigma 1)`.
    2. Variance normalisation (the paper's correction):
       :math:`\tilde\mu = \mu \sqrt{\sqrt{C/2} / \sum_c \sigma_c^2}`,
       :math:`\tilde\sigma^2 = \sigma^2 \sqrt{C/2} / \sum_c \sigma_c^2`.
    3. The bridge (MacKay's Dirichlet in the softmax basis):
       :math:`\alpha_c = \tilde\sigma_c^{-2} (1 - 2/C + e^{\tilde\mu_c} C^{-2} \sum_{c'} e^{-\tilde\mu_{c'}})`,
       and the predictive is the Dirichlet mean :math:`\alpha / \sum_c \alpha_c`.

    Step 2 defines :math:`\tilde\mu` (a scaling of :math:`\mu` by the
    square root of the variance scaling), as in laplax and in the ``probit``
    package of the same group. laplace-torch's ``'bridge_norm'`` divides by
    the *mean* of the variances instead of their sum, i.e. a normalisation
    ``C`` times larger; we follow the paper's sum. Only the variances after
    step 1 enter; the covariances do only through step 1.

    The bridge is not continuous at a zero covariance (as the covariance
    shrinks, step 2 scales the means up and the result tends to the argmax);
    a point whose variances are all zero after step 1 is a point mass, and
    gets its exact predictive ``softmax(mean)``. Where only some variances are
    zero, their infinite ``alpha`` take all the mass (see
    :func:`_log_dirichlet_concentration`).

    Parameters
    ----------
    mean : torch.Tensor of shape (N, C)
        Means of the logits.
    cov : torch.Tensor of shape (N, C, C) or (N, C)
        Covariances of the logits, or their variances (independent logits).
    log : bool, default=False
        Return the log probabilities.

    Returns
    -------
    probabilities : torch.Tensor of shape (N, C)

    References
    ----------
    M. Hobbhahn, A. Kristiadi and P. Hennig, "Fast predictive uncertainty for
    classification with Bayesian deep networks", UAI 2022.
    """
    mean, variances = _condition_on_zero_sum(mean, cov)
    n_classes = mean.shape[-1]
    total = variances.sum(-1, keepdim=True)
    point_mass = total == 0
    scale = torch.where(point_mass, torch.ones_like(total), total / math.sqrt(n_classes / 2))
    log_alpha = _log_dirichlet_concentration(mean / scale.sqrt(), variances / scale)
    return torch.where(point_mass, _softmax(mean, log), _softmax(log_alpha, log))


# ------------------------------------------------------------------ mean field
def mean_field_0(mean, cov, log=False):
    r"""Zeroth-order mean field: :math:`\operatorname{softmax}_i(\mu / \sqrt{1 + \lambda_0 \operatorname{diag}\Sigma})`.

    Each mean logit is shrunk by its own variance (the probit approximation
    applied per logit), :math:`\lambda_0 = \pi/8`.

    Parameters
    ----------
    mean : torch.Tensor of shape (N, C)
        Means of the logits.
    cov : torch.Tensor of shape (N, C, C) or (N, C)
        Covariances of the logits (only the diagonal is used), or their variances.
    log : bool, default=False
        Return the log probabilities.

    Returns
    -------
    probabilities : torch.Tensor of shape (N, C)

    References
    ----------
    Z. Lu, E. Ie and F. Sha, "Mean-field approximation to Gaussian-softmax
    integral with application to uncertainty estimation", arXiv:2006.07584, 2020.
    """
    return _softmax(mean / (1 + LAMBDA_0 * _variances(cov)).sqrt(), log)


def _pairwise_mean_field(mean, difference_variances, log):
    """Renormalised ``1 / sum_k exp(-(mu_i - mu_k) / sqrt(1 + lambda_0 v_ik))`` over ``(N, C, C)`` ``v``.

    The ``k = i`` term is ``exp(0) = 1`` whatever ``v_ii``, so each unnormalised
    probability is ``exp(-logsumexp_k(...))`` and the renormalised ones are the
    softmax of ``-logsumexp_k(...)`` over ``i`` (its log with ``log``).
    """
    differences = mean.unsqueeze(-1) - mean.unsqueeze(-2)
    scaled = -differences / (1 + LAMBDA_0 * difference_variances).sqrt()
    return _softmax(-torch.logsumexp(scaled, dim=-1), log)


def mean_field_1(mean, cov, log=False):
    r"""First-order mean field over pairs of independent logits, renormalised.

    :math:`p_i \propto 1 / \big(1 + \sum_{k \ne i}
    \exp(-(\mu_i - \mu_k) / \sqrt{1 + \lambda_0 (\Sigma_{ii} + \Sigma_{kk})})\big)`,
    :math:`\lambda_0 = \pi/8`. The sign is that of Lu, Ie & Sha: with
    :math:`\Sigma = 0` it is :math:`\operatorname{softmax}(\mu)` (the opposite
    sign, :math:`\mu_k - \mu_i`, would give :math:`\operatorname{softmax}(-\mu)`).
    The :math:`p_i` do not sum to one exactly, so they are divided by their sum.

    Parameters
    ----------
    mean : torch.Tensor of shape (N, C)
        Means of the logits.
    cov : torch.Tensor of shape (N, C, C) or (N, C)
        Covariances of the logits (only the diagonal is used), or their variances.
    log : bool, default=False
        Return the log probabilities.

    Returns
    -------
    probabilities : torch.Tensor of shape (N, C)

    References
    ----------
    Z. Lu, E. Ie and F. Sha, "Mean-field approximation to Gaussian-softmax
    integral with application to uncertainty estimation", arXiv:2006.07584, 2020.
    """
    variances = _variances(cov)
    return _pairwise_mean_field(mean, variances.unsqueeze(-1) + variances.unsqueeze(-2), log)


def mean_field_2(mean, cov, log=False):
    r"""Second-order mean field with the full covariance, renormalised.

    As :func:`mean_field_1` with :math:`\operatorname{Var}(z_i - z_k) =
    \Sigma_{ii} + \Sigma_{kk} - 2\Sigma_{ik}` in place of
    :math:`\Sigma_{ii} + \Sigma_{kk}`; equal to it for a diagonal covariance.
    For two classes it is the probit approximation of the integral over the
    logit difference.

    Parameters
    ----------
    mean : torch.Tensor of shape (N, C)
        Means of the logits.
    cov : torch.Tensor of shape (N, C, C) or (N, C)
        Covariances of the logits, or their variances (independent logits).
    log : bool, default=False
        Return the log probabilities.

    Returns
    -------
    probabilities : torch.Tensor of shape (N, C)

    References
    ----------
    Z. Lu, E. Ie and F. Sha, "Mean-field approximation to Gaussian-softmax
    integral with application to uncertainty estimation", arXiv:2006.07584, 2020.
    """
    cov = _full_covariance(cov)
    variances = _variances(cov)
    # Clamped at zero: rounding can leave Var(z_i - z_k) of a degenerate pair slightly negative.
    difference_variances = (variances.unsqueeze(-1) + variances.unsqueeze(-2) - 2 * cov).clamp(min=0)
    return _pairwise_mean_field(mean, difference_variances, log)


PREDICTIVES = {
    "mc_bridge": mc_bridge,
    "laplace_bridge": laplace_bridge,
    "mean_field_0": mean_field_0,
    "mean_field_1": mean_field_1,
    "mean_field_2": mean_field_2,
}


def predictive_probabilities(name, mean, cov, generator=None, n_samples=1000, log=False):
    """Class probabilities ``(N, C)`` from ``N(mean, cov)`` over the logits with predictive ``name``.

    Parameters
    ----------
    name : {'mc_bridge', 'laplace_bridge', 'mean_field_0', 'mean_field_1', 'mean_field_2'}
        The predictive, a key of :data:`PREDICTIVES`.
    mean : torch.Tensor of shape (N, C)
        Means of the logits.
    cov : torch.Tensor of shape (N, C, C) or (N, C)
        Covariances of the logits, or their variances (independent logits).
    generator : torch.Generator or None, default=None
        Source of the draws of ``'mc_bridge'``; unused by the others.
    n_samples : int, default=1000
        Draws per point of ``'mc_bridge'``; unused by the others.
    log : bool, default=False
        Return the log probabilities.

    Returns
    -------
    probabilities : torch.Tensor of shape (N, C)
    """
    if name not in PREDICTIVES:
        raise ValueError(f"Unknown predictive {name!r}; expected one of {sorted(PREDICTIVES)}.")
    if name == "mc_bridge":
        return mc_bridge(mean, cov, n_samples=n_samples, generator=generator, log=log)
    return PREDICTIVES[name](mean, cov, log=log)
