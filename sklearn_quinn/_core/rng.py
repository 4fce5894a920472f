"""Random draws made on the generator's device and delivered on the tensors'.

A fitted model draws its predictive samples (weight vectors, dropout masks,
a Gaussian's Monte Carlo link, the noise of ``sample_y``) from a generator
seeded at fit time. Torch's CPU and CUDA generators give different numbers
for one seed, so those draws come from a CPU generator
(:func:`prediction_generator`) and are moved to the model's device: a model
fitted on a GPU predicts the same there and, unpickled, on a CPU-only
machine. A fit's generators live on the model's device (the samplers' moves),
where the same functions draw without a copy. ``generator=None`` draws from
torch's global generator of ``like``'s device.
"""

import torch


def prediction_generator(seed):
    """The seeded CPU generator of a prediction's draws."""
    return torch.Generator().manual_seed(int(seed))


def _drawing_device(generator, like):
    return like.device if generator is None else generator.device


def standard_normal(generator, like, shape=None):
    """Standard normal draws of ``shape`` (default ``like``'s), in ``like``'s dtype and on its device."""
    shape = like.shape if shape is None else shape
    draws = torch.randn(shape, generator=generator, dtype=like.dtype, device=_drawing_device(generator, like))
    return draws.to(like.device)


def gaussian_draws(generator, mean, std):
    """One draw of ``N(mean, std**2)`` per element of ``mean`` (``std`` broadcast to it). Where the
    mean and the spread are both infinite with opposite signs (a std past the floating-point range
    about a mean past it), the draw is the spread's infinity, not ``inf - inf``'s NaN."""
    spread = std * standard_normal(generator, mean)
    return torch.where(torch.isinf(mean) & torch.isinf(spread), spread, mean + spread)


def standard_uniform(generator, like, shape=None):
    """Uniform draws on [0, 1) of ``shape`` (default ``like``'s), in ``like``'s dtype and on its device."""
    shape = like.shape if shape is None else shape
    draws = torch.rand(shape, generator=generator, dtype=like.dtype, device=_drawing_device(generator, like))
    return draws.to(like.device)


def bernoulli(generator, like, shape, probability):
    """0 / 1 draws of ``shape`` that are 1 with ``probability``, in ``like``'s dtype and on its device."""
    device = _drawing_device(generator, like)
    chance = torch.full(shape, probability, dtype=like.dtype, device=device)
    return torch.bernoulli(chance, generator=generator).to(like.device)


def permutation(generator, n, like):
    """A random permutation of ``range(n)``, on ``like``'s device."""
    return torch.randperm(n, generator=generator, device=_drawing_device(generator, like)).to(like.device)


def choice(generator, weights, n):
    """``n`` indices drawn with replacement in proportion to ``weights``, on their device."""
    device = _drawing_device(generator, weights)
    return torch.multinomial(weights.to(device), n, replacement=True, generator=generator).to(weights.device)
