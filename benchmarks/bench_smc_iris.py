"""An iris model-selection experiment: log evidence of 10 architectures, the chosen
model and the Bayesian-model-averaged test accuracy.

Iris, an 80:20 train/test split, the 10 architectures below,
a logistic prior with location 0 and scale 1 on every weight (standard
deviation pi / sqrt(3); ``prior='logistic'``). Inputs standardised with the
training split's statistics. Each architecture is fitted with 5 seeds of the
sampler (the split stays fixed) to show the estimator's spread; the model
average of each seed uses ``EvidenceSearch``. Prints mean ± std of the log
evidence per architecture, the stages and wall seconds per run, the chosen
model, and the BMA test accuracy per seed.

    python benchmarks/bench_smc_iris.py [--particles 200] [--seeds 5] [--threads 1]
"""

import argparse
import math
import time

import numpy as np
import torch
from sklearn.datasets import load_iris
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_quinn import SMCClassifier
from sklearn_quinn.model_selection import EvidenceSearch

ARCHITECTURES = [
    ((1,), "relu"), ((2,), "relu"), ((3,), "relu"), ((4,), "relu"), ((5,), "relu"),
    ((1, 1), "relu"), ((2, 2), "relu"), ((3, 3), "relu"), ((4, 4), "relu"), ((2, 2), "logistic"),
]
LOGISTIC_SCALE_ONE = math.pi / math.sqrt(3)


def iris_split():
    """The experiment's split: ``X_train, X_test, y_train, y_test``, 80:20, stratified."""
    X, y = load_iris(return_X_y=True)
    return train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--particles", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--target-ess", type=float, default=0.5)
    parser.add_argument("--mcmc-steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    X_train, X_test, y_train, y_test = iris_split()
    grid = [{"smcclassifier__hidden_layer_sizes": [sizes], "smcclassifier__activation": [activation]}
            for sizes, activation in ARCHITECTURES]
    evidence, seconds, stages, accuracy, chosen = [], [], [], [], []
    for seed in range(args.seeds):
        classifier = SMCClassifier(prior="logistic", prior_std=LOGISTIC_SCALE_ONE, n_particles=args.particles,
                                   target_ess=args.target_ess, n_mcmc_steps=args.mcmc_steps, random_state=seed)
        start = time.perf_counter()
        search = EvidenceSearch(make_pipeline(StandardScaler(), classifier), grid).fit(X_train, y_train)
        seconds.append((time.perf_counter() - start) / len(ARCHITECTURES))
        evidence.append(search.results_["log_evidence"])
        stages.append([pipeline[-1].n_stages_ for pipeline in search.estimators_])
        accuracy.append(search.score(X_test, y_test))
        chosen.append(search.best_index_)
        print(f"seed {seed}: chosen {_name(*ARCHITECTURES[search.best_index_])}, BMA test accuracy "
              f"{accuracy[-1]:.4f}, best-model accuracy {search.best_estimator_.score(X_test, y_test):.4f}, "
              f"{seconds[-1]:.1f} s per architecture", flush=True)

    evidence, stages = np.array(evidence), np.array(stages)
    print(f"\n{args.particles} particles, target ESS {args.target_ess}, {args.mcmc_steps} HMC steps per stage, "
          f"{args.threads} thread(s), {args.seeds} seeds\n")
    print("| architecture | parameters | log evidence (mean ± std) | stages | chosen (seeds) |")
    print("|---|---|---|---|---|")
    for index, (sizes, activation) in enumerate(ARCHITECTURES):
        n_params = search.estimators_[index][-1]._model.n_params  # the linear skip path's weights included
        print(f"| {_name(sizes, activation)} | {n_params} | {evidence[:, index].mean():.2f} ± "
              f"{evidence[:, index].std(ddof=1) if args.seeds > 1 else float('nan'):.2f} | "
              f"{stages[:, index].mean():.1f} | {chosen.count(index)} |")
    print(f"\nBMA test accuracy: {np.mean(accuracy):.4f} (per seed {np.round(accuracy, 4).tolist()})")
    print(f"wall seconds per SMC run: {np.mean(seconds):.1f}")


def _name(sizes, activation):
    return f"{sizes} {activation}"


if __name__ == "__main__":
    main()
