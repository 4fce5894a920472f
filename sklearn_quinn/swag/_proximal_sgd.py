"""Constant-rate SGD whose Gaussian-prior shrinkage is an implicit (proximal) step."""

import torch


class ProximalSGD(torch.optim.SGD):
    """SGD on the loss, then each weight shrunk by ``1 / (1 + lr * decay)``.

    For a loss plus ``decay * ||theta||^2 / 2`` the explicit step
    ``theta - lr * (g + decay * theta)`` diverges once ``lr * decay > 2``, which
    a prior precision learned by the evidence reaches: a group the data do not
    need is switched off with a precision of 1e5 or more. The proximal step
    ``(theta - lr * g) / (1 + lr * decay)`` solves the quadratic exactly and is
    stable at any precision; for ``lr * decay`` small it is the explicit step
    to first order (N. Parikh and S. Boyd, "Proximal algorithms", Foundations
    and Trends in Optimization 1(3), 2014).

    Parameters
    ----------
    params : iterable of tensors or of parameter groups
    lr : float
    decay : float or tensor
        The shrinkage rate of every parameter's elements (``delta / N`` for a
        per-point loss), broadcast against each parameter: one value per
        weight ``(K,)`` serves stacked members ``(J, K)``.
    """

    def __init__(self, params, lr, decay):
        super().__init__(params, lr=lr)
        self.decay = decay

    @torch.no_grad()
    def step(self, closure=None):
        loss = super().step(closure)
        for group in self.param_groups:
            for param in group["params"]:
                param.div_(1.0 + group["lr"] * self.decay)
        return loss
