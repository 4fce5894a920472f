"""The MAP's closing L-BFGS polish: the flat weights' hand-differentiated loss against autograd.

Every MAP training that ends at a mode does it with ``_map.polish`` (and a
classifier's evidence climbs its prior's scale through about five of them).
For a module on ``FunctionalModel``'s fast path (the package's MLPs) the polish
evaluates the loss and its gradient as a function of one flat weight row with
the hand-written backward pass (``FlatPosteriorLoss``); any other module goes
through the module's autograd pass. Here one network per table is trained for
30 epochs under a fixed prior, and from that state the polish runs alternately
on the network itself and on the same network inside a module of its own (the
autograd closure), the state restored before each run: the median wall seconds
of each, their ratio (flat / autograd), and the loss each ends at. The members
of a deep ensemble and of randomized MAP sampling end the same way, all in one
polish of their stacked weights (``ensemble._engine.finish_members``): the last
rows stack the diabetes network's weights, perturbed, as 5 and 20 members (the
latter anchored and with perturbed targets, as RMS's), each with its own
trained noise, and compare their flat loss with the same criterion inside a
module of its own, which has no flat loss. One thread.

    python benchmarks/bench_polish.py [--repeats 7]
"""

import argparse
import copy
import time

import numpy as np
import torch
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris, make_blobs
from sklearn.preprocessing import StandardScaler
from torch import nn

from sklearn_quinn import LaplaceClassifier, LaplaceRegressor
from sklearn_quinn._core.network import FunctionalModel
from sklearn_quinn._map import gaussian_likelihood, polish
from sklearn_quinn.ensemble._engine import (
    AnchoredNegativeLogPosterior,
    StackedMembers,
    member_targets,
    padded_perturbations,
)


class Wrapped(nn.Module):
    """The same network as a module of its own, which the polish differentiates by autograd."""

    def __init__(self, network):
        super().__init__()
        self.network = network

    def forward(self, X):
        return self.network(X)


class AutogradCriterion(nn.Module):
    """A criterion as a module of its own, without its flat loss: the polish differentiates it by autograd."""

    def __init__(self, criterion):
        super().__init__()
        self.criterion = criterion

    def forward(self, y_pred, y_true, module):
        return self.criterion(y_pred, y_true, module)


def tables():
    yield "blobs (300 x 2, 3 classes), 1x16", LaplaceClassifier(hidden_layer_sizes=(16,)), make_blobs(
        n_samples=300, random_state=0, cluster_std=1.0)
    yield "iris (150 x 4, 3 classes), 1x50", LaplaceClassifier(), load_iris(return_X_y=True)
    yield "breast cancer (569 x 30, 2 classes), 1x50", LaplaceClassifier(), load_breast_cancer(return_X_y=True)
    yield "diabetes (442 x 10), 1x50, trained noise", LaplaceRegressor(), load_diabetes(return_X_y=True)


def trained(estimator, X, y):
    """The network, criterion and data of a 30-epoch MAP training under a fixed prior, before its polish."""
    estimator.set_params(prior_std=1.0, max_epochs=30, random_state=0)
    X, Y = estimator._begin_fit(StandardScaler().fit_transform(X), y)
    estimator._fit_map(X, Y)  # polished too: restart from a state before the polish
    net = estimator.net_
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in net.module_.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    return net.module_, net.criterion_, torch.as_tensor(X), torch.as_tensor(Y)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("| table | autograd (ms) | flat (ms) | flat / autograd | loss autograd | loss flat |")
    print("|---|---|---|---|---|---|")
    for name, estimator, (X, y) in tables():
        module, criterion, X, Y = trained(estimator, X, y)
        compare(name, module, criterion, X, Y, (Wrapped(module), criterion), (module, criterion), args.repeats)
    _, _, (X, y) = list(tables())[-1]
    network, criterion, X, Y = trained(LaplaceRegressor(), X, y)
    for n_members, anchored in ((5, False), (20, True)):
        module, members, X_rows, Y_rows = stacked(network, criterion, X, Y, n_members, anchored)
        name = f"diabetes, {n_members} members stacked{', anchored, perturbed' if anchored else ''}"
        compare(name, module, members, X_rows, Y_rows, (module, AutogradCriterion(members)), (module, members),
                args.repeats)


def stacked(network, criterion, X, Y, n_members, anchored):
    """``n_members`` perturbed copies of ``network``'s weights as :class:`StackedMembers`, under
    the anchored criterion of its prior, each with its own trained noise, on every row."""
    model = FunctionalModel(network)
    precision = criterion.weight_precisions(list(network.parameters()))
    generator = torch.Generator().manual_seed(1)
    theta = model.flatten() + 0.05 * torch.randn(n_members, model.n_params, generator=generator, dtype=X.dtype)
    anchors = torch.randn(n_members, model.n_params, generator=generator, dtype=X.dtype) / precision.sqrt()
    perturbations = torch.randn(n_members, *Y.shape, generator=generator, dtype=X.dtype) if anchored else None
    likelihood = gaussian_likelihood(Y, None, X.dtype, "cpu", leading_shape=(n_members, 1))
    members = AnchoredNegativeLogPosterior(len(X), precision, anchors if anchored else torch.zeros_like(anchors),
                                           likelihood, anchored)
    rows = torch.arange(len(X)).expand(n_members, -1)
    return (StackedMembers(model, theta), members, X[rows],
            member_targets(Y, padded_perturbations(perturbations, n_members, Y), rows))


def compare(name, module, criterion, X, Y, autograd, flat, repeats):
    """Print one row: the polish of ``autograd`` and of ``flat`` (module, criterion), alternated
    from the state of ``module`` and ``criterion`` now."""
    start = copy.deepcopy((module.state_dict(), criterion.state_dict()))
    seconds, losses = {"autograd": [], "flat": []}, {}
    for _ in range(repeats):
        for kind, (polished, loss) in (("autograd", autograd), ("flat", flat)):
            module.load_state_dict(start[0])
            criterion.load_state_dict(start[1])
            begin = time.perf_counter()
            polish(polished, loss, X, Y)
            seconds[kind].append(time.perf_counter() - begin)
            with torch.no_grad():
                losses[kind] = float(criterion(module(X), Y, module))
    autograd_ms, flat_ms = (1e3 * np.median(seconds[kind]) for kind in ("autograd", "flat"))
    print(f"| {name} | {autograd_ms:.0f} | {flat_ms:.0f} | {flat_ms / autograd_ms:.2f} | {losses['autograd']:.10f} | "
          f"{losses['flat']:.10f} |", flush=True)


if __name__ == "__main__":
    main()
