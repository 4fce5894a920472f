"""How the learned per-layer prior precisions move along a ReLU network's scale symmetry.

The default backbone's hidden layer is ReLU, positively homogeneous:
``(W1, b1, W2) -> (c W1, c b1, W2 / c)`` leaves the function unchanged, and
with the precisions ``(delta_W1 / c**2, delta_b1 / c**2, delta_W2 c**2)`` the
model too, so the Laplace evidence is flat along that orbit
(``tests/test_evidence.py``, ``test_evidence_is_invariant_along_the_relu_scale_symmetry``).
Only what the orbit leaves unchanged is identified by the data:
``delta_W1 * delta_W2`` and ``delta_b1 / delta_W1`` (and the output bias's and
the linear skip's precisions). This script fits the default MAP training
(``_fit_map``, the step every optimisation family runs) at several training
lengths and prints every evidence update: the identified products beside the
ratio ``delta_W1 / delta_W2``, which only says where along the orbit the
training happens to be, and the log evidence (network units; the 'training'
updates may be Kronecker-factored, the 'final' one is exact up to 5,000
weights).

    python benchmarks/bench_precision_drift.py [--tables digits diabetes] [--max-epochs 250 500 1000] [--seed 0]
"""

import argparse

import torch
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
from sklearn.preprocessing import StandardScaler

from sklearn_quinn import LaplaceClassifier, LaplaceRegressor

TABLES = {
    "digits": (load_digits, LaplaceClassifier),
    "breast_cancer": (load_breast_cancer, LaplaceClassifier),
    "diabetes": (load_diabetes, LaplaceRegressor),
}


def rows(history):
    """One printed row per evidence update."""
    for entry in history:
        w1, b1, w2 = (float(entry[name]) for name in ("mlp.0.weight", "mlp.0.bias", "mlp.2.weight"))
        yield (f"| {entry['epoch']} | {entry['stage']} | {entry['log_evidence']:.1f} | {w1:.3g} | {w2:.3g} | "
               f"{w1 / w2:.3g} | {w1 * w2:.3g} | {b1 / w1:.3g} | {float(entry['linear.weight']):.3g} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", nargs="+", default=["digits", "diabetes"], choices=sorted(TABLES))
    parser.add_argument("--max-epochs", nargs="+", type=int, default=[250, 500, 1000])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for table in args.tables:
        load, estimator_class = TABLES[table]
        X, y = load(return_X_y=True)
        X = StandardScaler().fit_transform(X)
        for max_epochs in args.max_epochs:
            estimator = estimator_class(max_epochs=max_epochs, random_state=args.seed)
            estimator._fit_map(*estimator._begin_fit(X, y))
            print(f"\n{table}, {estimator_class.__name__} defaults, max_epochs={max_epochs}, random_state={args.seed}")
            print("| epoch | stage | log evidence | d_W1 | d_W2 | d_W1 / d_W2 (orbit) | d_W1 d_W2 | d_b1 / d_W1 "
                  "| d_skip |")
            print("|---|---|---|---|---|---|---|---|---|")
            for row in rows(estimator.evidence_history_):
                print(row, flush=True)


if __name__ == "__main__":
    main()
