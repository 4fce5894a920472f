"""What MCDropoutClassifier's learned rates do to its network: which path of the backbone survives.

The default backbone is a one-hidden-layer ReLU network beside a linear skip
path (``linear_skip``). With ``dropout_rate='auto'`` the rate of each layer's
inputs is learned as in Concrete dropout (Gal, Hron and Kendall 2017), whose
entropy term pulls every rate towards one half with a weight of the layer's
inputs over the training rows. This prints, per data set and split (``compare``'s
stratified 80/20 splits, ``random_state`` the split index, inputs scaled as by
``Pipeline([StandardScaler(), estimator])``): the learned rates (input layer,
hidden layer), the hidden path's share of the logits on the test rows
(``||mlp(x)|| / (||mlp(x)|| + ||linear(x)||)`` over all test rows and classes,
from the trained weights without masks: 0 when training pruned the path), the
test NLL and accuracy of the MC-dropout predictive, and the same for the
network trained without dropout (``dropout_rate=0``: the family's MAP network).
``--dropout-rate 0.05`` fixes the rate instead of learning it; ``--prior-learning
joint`` updates the learned prior during the dropout training (the regressor's
default) instead of taking the MAP network's (``'evidence'``, the classifier's).

    python benchmarks/bench_dropout_paths.py [--datasets wine digits] [--splits 3] [--dropout-rate auto] \\
        [--prior-learning evidence] [--threads 1]
"""

import argparse

import torch
from defaults_options import pin_threads
from sklearn.metrics import accuracy_score, log_loss
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from uci_protocol import print_summary

from sklearn_quinn import MCDropoutClassifier
from sklearn_quinn._cli.compare import split_table
from sklearn_quinn._cli.data import load_table

DATASETS = ("iris", "wine", "breast_cancer", "digits")


def hidden_share(model, X):
    """The hidden path's share of the logits of a ``LinearSkipMLP`` at rows ``X``."""
    trained = model.net_.module_
    backbone = trained.module if model.dropout_rate else trained  # at rate 0, the MAP network without dropout layers
    with torch.no_grad():
        X = torch.as_tensor(X, dtype=backbone.linear.weight.dtype)
        hidden, skip = backbone.mlp(X).norm(), backbone.linear(X).norm()
    return float(hidden / (hidden + skip))


def fit_and_score(rate, prior_learning, seed, X_train, X_test, y_train, y_test):
    estimator = MCDropoutClassifier(dropout_rate=rate, prior_learning=prior_learning, random_state=seed)
    pipeline = make_pipeline(StandardScaler(), estimator)
    pipeline.fit(X_train, y_train)
    proba = pipeline.predict_proba(X_test)
    model = pipeline[-1]
    return {"rates": model.dropout_rates_, "share": hidden_share(model, pipeline[0].transform(X_test)),
            "nll": log_loss(y_test, proba, labels=model.classes_), "accuracy": accuracy_score(y_test, proba.argmax(1))}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--dropout-rate", default="auto", help="'auto' (learned) or a fixed rate")
    parser.add_argument("--prior-learning", choices=["evidence", "joint"], default="evidence")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    pin_threads(args.threads)
    rate = args.dropout_rate if args.dropout_rate == "auto" else float(args.dropout_rate)
    print(f"MCDropoutClassifier(dropout_rate={rate!r}, prior_learning={args.prior_learning!r}) against "
          f"dropout_rate=0, {args.splits} split(s)\n")
    print("| data set | split | rates | hidden share | NLL | accuracy | MAP hidden share | MAP NLL |")
    print("|---|---|---|---|---|---|---|---|")
    summary = {}
    for data in args.datasets:
        X, y, _ = load_table(data)
        for seed in range(args.splits):
            split = split_table(X, y, True, test_size=0.2, random_state=seed)
            dropout, network = (fit_and_score(r, args.prior_learning, seed, *split) for r in (rate, 0.0))
            rates = " / ".join(f"{r:.3f}" for r in dropout["rates"])
            print(f"| {data} | {seed} | {rates} | {dropout['share']:.3f} | {dropout['nll']:.3f} | "
                  f"{dropout['accuracy']:.3f} | {network['share']:.3f} | {network['nll']:.3f} |", flush=True)
            summary.setdefault(data, []).append((dropout["nll"], network["nll"], dropout["nll"] - network["nll"]))
    print_summary(summary, ["NLL", "MAP NLL", "NLL - MAP's"])


if __name__ == "__main__":
    main()
