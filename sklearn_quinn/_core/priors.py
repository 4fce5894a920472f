"""Priors over the flat weight vector, batched over rows of ``Theta``.

Every prior gives the normalised log density of each row and, for the
samplers, its gradient in closed form, and can draw rows. :class:`StatePrior`
puts a weight prior and, when the noise is sampled, a prior on the log noise
std together over the rows of a sampler's state.
"""

import math

import torch
from torch.nn.functional import softplus

#: Prior of the log noise std when it is part of a sampler's state (network
#: units, where the standardised target has std 1): N(0, 1).
LOG_NOISE_PRIOR_STD = 1.0


class GaussianPrior:
    """Gaussian prior ``N(0, diag(std**2))`` on the ``K`` weights.

    Parameters
    ----------
    std : float or tensor of shape (K,)
        Prior standard deviation of every weight, or of each weight (a
        learned prior has one per group of weights).
    """

    def __init__(self, std):
        self.std = std.detach() if isinstance(std, torch.Tensor) else float(std)
        self._take_constants()

    def _take_constants(self):
        # A sampler evaluates the density at every step: what depends on the stds alone is taken
        # here, once, so that a step neither recomputes it nor reads a float off the device (a
        # host sync, and a graph break where the step is compiled). A prior is therefore not
        # changed after it is made (the package makes a new one for new stds).
        self._variance = self.std**2
        if isinstance(self.std, torch.Tensor):
            self._precision = self.precision
            self._log_std_sum = float(self.std.log().sum())

    def __setstate__(self, state):
        """A prior pickled by a version that kept only ``std`` takes its constants on loading."""
        self.__dict__.update(state)
        if "_variance" not in state:
            self._take_constants()

    @property
    def precision(self):
        """``std**-2``, a new tensor at each call (callers train under it and may keep it)."""
        return self.std**-2

    def log_prob(self, theta):
        """Log density of each row of ``theta (S, K)``, shape ``(S,)``."""
        n_params = theta.shape[-1]
        if isinstance(self.std, torch.Tensor):
            return (
                -0.5 * (theta.square() * self._precision).sum(-1)
                - self._log_std_sum
                - 0.5 * n_params * math.log(2 * math.pi)
            )
        return (
            -0.5 * theta.square().sum(-1) / self._variance
            - n_params * math.log(self.std)
            - 0.5 * n_params * math.log(2 * math.pi)
        )

    def value_and_grad(self, theta):
        """:meth:`log_prob` and its gradient ``-theta / std**2``."""
        return self.log_prob(theta), -theta / self._variance

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


class LogisticPrior:
    """Independent logistic distributions on every weight, location 0.

    ``scale = std * sqrt(3) / pi`` so that each weight has standard deviation
    ``std``, as under :class:`GaussianPrior` (heavier tails than the Gaussian).

    Parameters
    ----------
    std : float
        Standard deviation of every weight.
    """

    def __init__(self, std):
        self.std = float(std)
        self.scale = self.std * math.sqrt(3) / math.pi

    def log_prob(self, theta):
        """Log density of each row of ``theta (S, K)``, shape ``(S,)``."""
        z = theta / self.scale
        return (-z - 2 * softplus(-z)).sum(-1) - theta.shape[-1] * math.log(self.scale)

    def value_and_grad(self, theta):
        return self.log_prob(theta), -torch.tanh(0.5 * theta / self.scale) / self.scale

    def sample(self, n, n_params, generator=None, dtype=torch.float64, device="cpu"):
        """Draw ``n`` weight vectors, shape ``(n, K)``, by inverting the CDF."""
        u = torch.rand(n, n_params, generator=generator, dtype=dtype, device=device)
        u = u.clamp(torch.finfo(dtype).tiny, 1 - torch.finfo(dtype).eps)
        return self.scale * torch.logit(u)


class StatePrior:
    """The prior over state rows: ``weight_prior`` on the first ``n_params``
    columns and, with ``log_noise=True``, ``N(0, LOG_NOISE_PRIOR_STD**2)`` on
    the log noise std in the last column.

    Parameters
    ----------
    weight_prior : GaussianPrior or LogisticPrior
    n_params : int
    log_noise : bool, default=False
    """

    def __init__(self, weight_prior, n_params, log_noise=False):
        self.weight_prior = weight_prior
        self.n_params = n_params
        self.noise_prior = GaussianPrior(LOG_NOISE_PRIOR_STD) if log_noise else None

    def _blocks(self, rows):
        yield self.weight_prior, rows[:, : self.n_params]
        if self.noise_prior is not None:
            yield self.noise_prior, rows[:, self.n_params :]

    def __call__(self, rows):
        return sum(prior.log_prob(block) for prior, block in self._blocks(rows))

    def value_and_grad(self, rows):
        values, gradients = zip(*(prior.value_and_grad(block) for prior, block in self._blocks(rows)))
        return sum(values), torch.cat(gradients, dim=1)

    def sample(self, n, generator=None, dtype=torch.float64, device="cpu"):
        """Draw ``n`` rows from the prior, shape ``(n, P)``."""
        blocks = [self.weight_prior.sample(n, self.n_params, generator, dtype, device)]
        if self.noise_prior is not None:
            blocks.append(self.noise_prior.sample(n, 1, generator, dtype, device))
        return torch.cat(blocks, dim=1)
