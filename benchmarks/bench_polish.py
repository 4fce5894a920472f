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
of each, their ratio (flat / autograd), and the loss each ends at. One thread.

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
from sklearn_quinn._map import polish


class Wrapped(nn.Module):
    """The same network as a module of its own, which the polish differentiates by autograd."""

    def __init__(self, network):
        super().__init__()
        self.network = network

    def forward(self, X):
        return self.network(X)


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
        start = copy.deepcopy((module.state_dict(), criterion.state_dict()))
        seconds, losses = {"autograd": [], "flat": []}, {}
        for _ in range(args.repeats):
            for kind, polished in (("autograd", Wrapped(module)), ("flat", module)):
                module.load_state_dict(start[0])
                criterion.load_state_dict(start[1])
                begin = time.perf_counter()
                polish(polished, criterion, X, Y)
                seconds[kind].append(time.perf_counter() - begin)
                with torch.no_grad():
                    losses[kind] = float(criterion(module(X), Y, module))
        autograd, flat = (1e3 * np.median(seconds[kind]) for kind in ("autograd", "flat"))
        print(f"| {name} | {autograd:.0f} | {flat:.0f} | {flat / autograd:.2f} | {losses['autograd']:.10f} | "
              f"{losses['flat']:.10f} |", flush=True)


if __name__ == "__main__":
    main()
