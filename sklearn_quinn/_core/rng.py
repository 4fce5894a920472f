"""Prediction-time random draws that are the same numbers on every device.

A fitted model draws its predictive samples (weight vectors, dropout masks,
a Gaussian's Monte Carlo link, the noise of ``sample_y``) from a generator
seeded at fit time. Torch's CPU and CUDA generators give different numbers
for one seed, so those draws come from a CPU generator and are moved to the
model's device: a model fitted on a GPU predicts the same there and,
unpickled, on a CPU-only machine. Given a generator on the tensors' own
device (a fit's), the functions below draw there, without a copy.
"""

import torch


def prediction_generator(seed):
    """The seeded CPU generator of a prediction's draws."""
    return torch.Generator().manual_seed(int(seed))


def _drawing_device(generator, tensor):
    return tensor.device if generator is None else generator.device


def normal(shape, generator, like):
    """Standard normal draws of ``shape``, made by ``generator`` on its device, in ``like``'s dtype and device."""
    draws = torch.randn(shape, generator=generator, dtype=like.dtype, device=_drawing_device(generator, like))
    return draws.to(like.device)


def bernoulli(probability, generator):
    """0 / 1 draws with ``probability``, made by ``generator`` on its device, on ``probability``'s device."""
    device = _drawing_device(generator, probability)
    return torch.bernoulli(probability.to(device), generator=generator).to(probability.device)


def choice(weights, n, generator):
    """``n`` indices drawn with replacement in proportion to ``weights``, on their device."""
    device = _drawing_device(generator, weights)
    return torch.multinomial(weights.to(device), n, replacement=True, generator=generator).to(weights.device)
