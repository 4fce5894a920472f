"""Every family's training loop against a bare torch loop doing the same optimizer steps.

Every family that trains a network does it through ``_map.train_net`` (skorch:
the net is what a user reads as ``net_``). Here each family is fitted once at
its defaults (``Pipeline``-free, on standardised inputs) with every call of
``train_net`` intercepted: the MAP, the ensembles' stacked members, SWAG's SGD
phase, BBB's ELBO, MC dropout's Concrete training. At each call, from the
module's and criterion's starting state and the minibatch generators'
starting seeds, the same training is run alternately through ``train_net``
and through a bare loop (``zero_grad``, loss, ``backward``, ``step`` per
batch, the cosine schedule's step per epoch, nothing else) with the same
module, criterion, optimizer class and learning rate, and the same
minibatches from the family's own iterator; the starting state is restored
before each run, and the family's fit then goes on from its own training.
Both runs leave out the call's callbacks: they are the family's work between
epochs (the evidence updates, SWAG's snapshots), the same code in either loop
(the evidence's cost is ``bench_evidence_cost.py``'s); the MAP's closing
L-BFGS polish runs after ``train_net``, plain torch, and is not timed either.

Table: 800 x 8 rows of a linear model with Gaussian noise, one thread, the
ratio the median over the pairs of ours / bare. Target of issue 18: at most
1.15 for every training. ``--batch-size 32 --max-epochs 100`` times
minibatch training (25 steps an epoch) instead of the defaults' full batch.

    python benchmarks/bench_training_overhead.py [--methods laplace de ...] [--repeats 5] \
        [--batch-size N] [--max-epochs N]
"""

import argparse
import statistics
import sys
import time
from contextlib import contextmanager

import numpy as np
import torch
from defaults_options import pin_threads
from skorch.dataset import Dataset

from sklearn_quinn import _map
from sklearn_quinn._cli.methods import METHODS, make_estimator

N_ROWS, N_FEATURES = 800, 8
TARGET = 1.15
TRAINING_METHODS = [name for name in METHODS if name != "smc"]  # SMC trains no network at its defaults


def table():
    rng = np.random.RandomState(0)
    X = rng.randn(N_ROWS, N_FEATURES)
    return X, X @ rng.randn(N_FEATURES) + rng.randn(N_ROWS)


def bare_loop(module, criterion, X, Y, *, lr, lr_schedule, max_epochs, optimizer, iterator, **iterator_params):
    """The same optimizer steps as ``train_net``, with nothing around them."""
    module.train(), criterion.train()
    steps = optimizer([*module.parameters(), *criterion.parameters()], lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(steps, T_max=max_epochs) if lr_schedule == "cosine" else None
    batches = iterator(Dataset(X, Y), **iterator_params)
    for _ in range(max_epochs):
        for X_batch, Y_batch in batches:
            steps.zero_grad()
            criterion(module(X_batch), Y_batch, module).backward()
            steps.step()
        if schedule is not None:
            schedule.step()


def generators_in(params):
    """The torch generators among a call's iterator parameters (alone or in lists)."""
    found = []
    for value in params.values():
        values = value if isinstance(value, (list, tuple)) else [value]
        found += [g for g in values if isinstance(g, torch.Generator)]
    return found


def timed_pairs(train_net, repeats, records, label):
    """A stand-in for ``train_net`` that first times ``repeats`` alternating
    pairs (ours, bare) from the call's starting state, then runs the call."""

    def timing_train_net(module, criterion, X, Y, **params):
        start = {"module": _copy_state(module), "criterion": _copy_state(criterion),
                 "generators": [g.get_state() for g in generators_in(params)]}

        def restart():
            module.load_state_dict(start["module"])
            criterion.load_state_dict(start["criterion"])
            for generator, state in zip(generators_in(params), start["generators"]):
                generator.set_state(state)

        bare_params = {name: value for name, value in params.items()
                       if name not in ("callbacks", "device", "verbose", "desc", "warm_up")}
        bare_params.setdefault("iterator", _map.TensorBatches)
        times = {"ours": [], "bare": []}
        for _ in range(repeats):
            for name, run in (("ours", lambda: train_net(module, criterion, X, Y, **{**params, "callbacks": None})),
                              ("bare", lambda: bare_loop(module, criterion, torch.as_tensor(X), torch.as_tensor(Y),
                                                         **bare_params))):
                restart()
                begin = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - begin)
        restart()
        records.append({"training": f"{label}: {params.get('desc', 'MAP')}", "epochs": params["max_epochs"],
                        "batch_size": params.get("batch_size"), **times})
        return train_net(module, criterion, X, Y, **params)

    return timing_train_net


def _copy_state(module):
    return {name: value.detach().clone() for name, value in module.state_dict().items()}


@contextmanager
def intercepted(repeats, records, label):
    """Replace ``train_net`` in every module of the package that calls it."""
    original = _map.train_net
    stand_in = timed_pairs(original, repeats, records, label)
    holders = [module for name, module in list(sys.modules.items())
               if name.startswith("sklearn_quinn") and getattr(module, "train_net", None) is original]
    for module in holders:
        module.train_net = stand_in
    try:
        yield
    finally:
        for module in holders:
            module.train_net = original


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", choices=TRAINING_METHODS, default=TRAINING_METHODS)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-size", type=int, help="every family's batch_size (default: the family's)")
    parser.add_argument("--max-epochs", type=int, help="every family's max_epochs (default: the family's)")
    args = parser.parse_args()
    pin_threads(1)
    X, y = table()
    X = (X - X.mean(0)) / X.std(0)
    print(f"one thread, {N_ROWS} x {N_FEATURES} rows, median of {args.repeats} alternating pairs\n")
    print(f"| training | epochs | batch | ours s | bare torch s | ours / bare | target <= {TARGET} |")
    print("|---|---|---|---|---|---|---|")
    for name in args.methods:
        settings = {"batch_size": args.batch_size} if args.batch_size else {}
        estimator = make_estimator(name, False, quick=False, max_epochs=args.max_epochs, **settings)
        records = []
        with intercepted(args.repeats, records, name):
            estimator.fit(X, y)
        for record in records:
            ratio = statistics.median(a / b for a, b in zip(record["ours"], record["bare"]))
            print(f"| {record['training']} | {record['epochs']} | {record['batch_size']} | "
                  f"{statistics.median(record['ours']):.2f} | {statistics.median(record['bare']):.2f} | "
                  f"{ratio:.2f} | {'yes' if ratio <= TARGET else 'no'} |", flush=True)


if __name__ == "__main__":
    main()
