"""A ReLU network's scale symmetry: the balanced coordinates, and a polish that does not depend on the drift."""

import copy

import numpy as np
import pytest
import torch
from torch import nn

from sklearn_quinn import _map as map_module
from sklearn_quinn._core.network import build_mlp
from sklearn_quinn._core.scale_symmetry import balancing_scales, homogeneous_chains, rescale
from sklearn_quinn._map import fit_map, gaussian_likelihood


def penalty(module, precision):
    return sum(float(delta * p.detach().square().sum()) for delta, p in zip(precision, module.parameters()))


def test_chains_end_at_an_activation_that_is_not_homogeneous():
    layers = [nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 5), nn.Identity(), nn.Linear(5, 2)]
    chains = homogeneous_chains(nn.Sequential(*layers))
    assert [[layers.index(layer) for layer in chain] for chain in chains] == [[0, 2], [4, 6]]
    assert homogeneous_chains(build_mlp(3, 2, (5,), "tanh", linear_skip=True)) == []
    assert homogeneous_chains(nn.Linear(3, 2)) == []


@pytest.mark.parametrize("linear_skip", [True, False])
def test_balancing_keeps_the_function_and_the_prior_and_equalises_the_precision_per_input(linear_skip):
    """Three layers joined by ReLUs: after the move every layer's weight precision over its
    fan-in is the same, the network's outputs and the prior's quadratic term are those of
    before, and the last layer's bias and the skip path are untouched."""
    torch.manual_seed(0)
    module = build_mlp(3, 2, (5, 4), "relu", linear_skip=linear_skip).double()
    precision = torch.as_tensor(np.exp(np.random.RandomState(0).randn(len(list(module.parameters())) )) * 10)
    X = torch.randn(20, 3, dtype=torch.float64)
    before, moved_module = module(X), copy.deepcopy(module)
    scales = balancing_scales(module, precision)
    moved = rescale(moved_module, precision, scales)
    torch.testing.assert_close(moved_module(X), before, rtol=1e-12, atol=1e-12)
    assert penalty(moved_module, moved) == pytest.approx(penalty(module, precision), rel=1e-12)
    names = [name for name, _ in module.named_parameters()]
    prefix = "mlp." if linear_skip else ""
    per_input = [float(moved[names.index(f"{prefix}{index}.weight")]) / fan_in
                 for index, fan_in in [(0, 3), (2, 5), (4, 4)]]
    np.testing.assert_allclose(per_input, per_input[0], rtol=1e-12)
    untouched = [f"{prefix}4.bias"] + (["linear.weight"] if linear_skip else [])
    assert all(scales[names.index(name)] == 1.0 for name in untouched)
    rescale(moved_module, moved, [1 / scale for scale in scales])
    for original, returned in zip(module.parameters(), moved_module.parameters()):
        torch.testing.assert_close(returned, original, rtol=1e-13, atol=1e-15)


def test_nothing_to_balance_under_one_shared_precision_or_without_a_chain():
    assert balancing_scales(build_mlp(3, 1, (4,), "relu"), torch.tensor(2.0)) is None
    assert balancing_scales(build_mlp(3, 1, (4,), "tanh"), torch.ones(4)) is None


def test_the_polish_ends_at_the_same_mode_wherever_the_layers_have_drifted(monkeypatch):
    """The same network and prior in two coordinates along the symmetry, one with the
    hidden layer 100 times smaller and the output layer 100 times larger (as the
    evidence's updates drift them): the polish takes both to the same loss, within
    1e-3 (it stops where its line search meets a ReLU kink, which rounding moves).
    Without the balanced coordinates L-BFGS stalls on the drifted network, 0.1 and
    more per point above."""
    rng = np.random.RandomState(0)
    X = rng.randn(80, 3)
    Y = np.sin(X @ rng.randn(3, 1)) + 0.1 * rng.randn(80, 1)
    torch.manual_seed(0)
    module = build_mlp(3, 1, (10,), "relu", linear_skip=True).double()
    precision = torch.ones(5, dtype=torch.float64)

    def polished_loss(drift):
        network = copy.deepcopy(module)
        prior_precision = rescale(network, precision, [drift, drift, 1 / drift, 1.0, 1.0])
        # One epoch at a vanishing rate: the polish starts where the weights are.
        net = fit_map(network, X, Y, prior_precision=prior_precision,
                      likelihood=gaussian_likelihood(Y, 0.1, torch.float64, "cpu"), lr=1e-12,
                      lr_schedule="constant", max_epochs=1, batch_size=80, optimizer=torch.optim.SGD,
                      callbacks=None, device="cpu", seed=0, verbose=0)
        inputs = torch.as_tensor(X)
        return float(net.criterion_(network(inputs), torch.as_tensor(Y), network).detach())

    balanced = polished_loss(1.0)
    assert polished_loss(0.01) == pytest.approx(balanced, rel=1e-3)
    monkeypatch.setattr(map_module, "balancing_scales", lambda module, precision: None)
    assert polished_loss(0.01) > balanced + 0.1
