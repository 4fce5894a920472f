"""Why the SWAG classifier matches its MAP network: how far its snapshots spread.

SWAG's Gaussian is the spread of constant-rate SGD around the MAP, which the
per-example gradient noise drives; where the training data are fitted with
confidence that noise is small. For each stratified 70/30 split (as
``bench_classifiers.py``, 1x50 ReLU, package defaults otherwise) this prints:

- the MAP network's test NLL, and the median logit std at the test points of
  the Laplace posterior (full GGN, the MAP's own prior), the reference width;
- ``tr C``, the trace of the per-example gradient covariance at the MAP (from
  the empirical Fisher), and the constant rate at which SGD's stationary
  covariance would match the posterior's scale, ``2 B K / (N tr C)`` (Mandt,
  Hoffman and Blei, 2017, with ``B`` the batch size, ``K`` the weights, ``N``
  the rows);
- SWAG around the MAP alone (``n_estimators=1``: the spread of one
  trajectory is the point here) at each ``--rates`` x ``--batch-sizes``: the rate it kept
  (``lr_swag_``, after the tenfold cuts of a diverged trajectory), the median
  logit std over its draws at the test points, and its test NLL minus the
  MAP's (mean ± s.e. over splits, and on how many splits it is lower).

    python benchmarks/bench_swag_spread.py [--datasets iris breast_cancer] [--splits 5]
"""

import argparse
import warnings

import numpy as np
import torch
from bench_classifiers import LOADERS, split
from sklearn.exceptions import ConvergenceWarning
from uci_protocol import fmt

from sklearn_quinn import LaplaceClassifier, SWAGClassifier
from sklearn_quinn._core.curvature import curvature
from sklearn_quinn.metrics import categorical_nll


def logits_at(estimator, X):
    """The fitted estimator's distribution of the logits at ``X`` (Gaussian or draws)."""
    with torch.no_grad():
        return estimator._outputs(torch.as_tensor(X))


def median_std(logits):
    """Median over points and classes of the logits' std."""
    return float(logits.variance.sqrt().median())


def map_reference(X_train, y_train, X_test, y_test, seed, batch_size):
    """MAP test NLL, the Laplace posterior's median logit std, tr C and the matching SGD rate.

    The Laplace's linearised logits are centred on the MAP network's: their
    mean is that network's output.
    """
    laplace = LaplaceClassifier(random_state=seed).fit(X_train, y_train)
    logits = logits_at(laplace, X_test)
    map_nll = categorical_nll(y_test, torch.softmax(logits.mean, -1).numpy(), labels=laplace.classes_)
    theta = laplace.posterior_.mean
    X, Y = torch.as_tensor(X_train), torch.as_tensor(np.searchsorted(laplace.classes_, y_train), dtype=theta.dtype)
    fisher = curvature(laplace._model, theta, X, Y[:, None], laplace._likelihood(None), "ef", "diag")
    trace_c = float(fisher.sum()) / len(X)
    rate = 2 * batch_size * len(theta) / (len(X) * trace_c)
    return map_nll, median_std(logits), trace_c, rate


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", choices=sorted(LOADERS), default=["iris", "breast_cancer"])
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--rates", nargs="+", type=float, default=[0.05, 0.5, 5.0])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[32, 1])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore", ConvergenceWarning)  # the kept rate is printed

    for data in args.datasets:
        reference, rows = [], {}
        for seed in range(args.splits):
            X_train, X_test, y_train, y_test = split(data, seed)
            reference.append(map_reference(X_train, y_train, X_test, y_test, seed, 32))
            for rate in args.rates:
                for batch_size in args.batch_sizes:
                    swag = SWAGClassifier(n_estimators=1, lr_swag=rate, batch_size_swag=batch_size,
                                          random_state=seed)
                    swag.fit(X_train, y_train)
                    nll = categorical_nll(y_test, swag.predict_proba(X_test), labels=swag.classes_)
                    spread = median_std(logits_at(swag, X_test))
                    rows.setdefault((rate, batch_size), []).append((swag.lr_swag_, spread, nll))
        map_nll, laplace_std, trace_c, matching_rate = (np.array(column) for column in zip(*reference))
        print(f"\n{data}, {args.splits} splits: MAP test NLL {fmt(map_nll)}; Laplace median logit std "
              f"{fmt(laplace_std)}; tr C {fmt(trace_c)}; matching rate at B = 32: {fmt(matching_rate, 0)}\n")
        print("| lr_swag | batch | kept lr_swag_ (per split) | median logit std | NLL - MAP's | lower |")
        print("|---|---|---|---|---|---|")
        for (rate, batch_size), values in rows.items():
            kept, logit_std, nll = (np.array(column) for column in zip(*values))
            difference = nll - map_nll
            print(f"| {rate:g} | {batch_size} | {' '.join(f'{value:g}' for value in kept)} | {fmt(logit_std, 4)} | "
                  f"{fmt(difference, 4)} | {int((difference < 0).sum())}/{len(difference)} |", flush=True)


if __name__ == "__main__":
    main()
