"""Likelihoods and priors over the flat weight vector, batched over rows of ``Theta``."""

import math

import torch


def gaussian_log_likelihood(outputs, y, noise_std):
    """Log density of ``y`` under ``N(outputs, noise_std**2)``, summed over outputs.

    Parameters
    ----------
    outputs : tensor of shape (..., N, O)
        Network outputs; leading axes (chains, samples) broadcast.
    y : tensor of shape (N, O)
        Targets.
    noise_std : float or tensor broadcastable to (O,)
        Observation noise standard deviation, per output or shared.

    Returns
    -------
    tensor of shape (..., N)
    """
    noise_std = torch.as_tensor(noise_std, dtype=outputs.dtype, device=outputs.device)
    z = (y - outputs) / noise_std
    per_output = -0.5 * z.square() - torch.log(noise_std) - 0.5 * math.log(2 * math.pi)
    return per_output.sum(-1)


class GaussianPrior:
    """Isotropic Gaussian prior ``N(0, std**2 I)`` on the ``K`` weights.

    Parameters
    ----------
    std : float
        Prior standard deviation of every weight.
    """

    def __init__(self, std):
        self.std = float(std)

    @property
    def precision(self):
        return self.std**-2

    def log_prob(self, theta):
        """Log density of each row of ``theta (S, K)``, shape ``(S,)``."""
        n_params = theta.shape[-1]
        return (
            -0.5 * theta.square().sum(-1) / self.std**2
            - n_params * math.log(self.std)
            - 0.5 * n_params * math.log(2 * math.pi)
        )

    def value_and_grad(self, theta):
        """:meth:`log_prob` and its gradient ``-theta / std**2``."""
        return self.log_prob(theta), -theta / self.std**2

    def sample(self, n, n_params, generator=None, dtype=torch.float64, device="cpu"):
        """Draw ``n`` weight vectors, shape ``(n, K)``."""
        z = torch.randn(n, n_params, generator=generator, dtype=dtype, device=device)
        return self.std * z


class ScaleMixturePrior:
    """Blundell et al.'s scale-mixture prior on every weight:
    ``pi N(0, sigma1**2) + (1 - pi) N(0, sigma2**2)``.

    Parameters
    ----------
    pi : float in [0, 1]
    sigma1, sigma2 : float > 0
    """

    def __init__(self, pi, sigma1, sigma2):
        self.pi, self.sigma1, self.sigma2 = float(pi), float(sigma1), float(sigma2)

    @property
    def gaussian_std(self):
        """The std when the mixture is a single Gaussian, else None."""
        if self.pi == 1.0 or self.sigma1 == self.sigma2:
            return self.sigma1
        if self.pi == 0.0:
            return self.sigma2
        return None

    def log_prob(self, theta):
        """Log density of each row of ``theta (S, K)``, shape ``(S,)``."""
        std = self.gaussian_std
        if std is not None:
            return GaussianPrior(std).log_prob(theta)
        components = torch.stack(
            [
                math.log(self.pi) - 0.5 * (theta / self.sigma1).square() - math.log(self.sigma1),
                math.log1p(-self.pi) - 0.5 * (theta / self.sigma2).square() - math.log(self.sigma2),
            ]
        )
        per_weight = torch.logsumexp(components, dim=0) - 0.5 * math.log(2 * math.pi)
        return per_weight.sum(-1)
