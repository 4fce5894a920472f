"""MCMCRegressor (HMC or NUTS) on UCI yacht, concrete and energy: test RMSE and log-likelihood.

Protocol in ``uci_protocol.py`` (1x50 ReLU MLP; ``--activation tanh`` for a smooth one). HMC (``--leapfrog`` steps a
proposal) or NUTS (``--sampler nuts``, trajectories of at most
``2**--max-tree-depth - 1`` steps) from the MAP, 4 chains, burn-in with step-size
and mass-matrix adaptation, the prior precisions and the noise sampled by
Gibbs draws (the package's default hyperpriors; ``--hyperprior empirical``: held at the MAP's evidence
maximisers). Prints mean ± s.e. over splits beside the published MC-dropout and PBP columns, the chains'
median adapted step size, their mean trajectory length (leapfrog steps a sampling step), the wall seconds per split
(the budget) and each split's test log-likelihood (each split's also to stderr as it ends).

    python benchmarks/bench_mcmc_uci.py [--datasets yacht concrete energy] [--splits 5] [--sampler nuts]
        [--max-tree-depth 10] [--hyperprior gamma] [--activation relu] [--burnin 500 --samples 500 --thin 1]
        [--leapfrog-dtype float32]
"""

import argparse
import sys

import numpy as np
import torch
from uci_protocol import DEFAULT_DATA_DIR, fmt, reference, run_split

from sklearn_quinn import MCMCRegressor


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    parser.add_argument("--datasets", nargs="+", default=["yacht", "concrete", "energy"])
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--burnin", type=int, default=500)
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--thin", type=int, default=1)
    parser.add_argument("--sampler", choices=["hmc", "nuts"], default="hmc")
    parser.add_argument("--leapfrog", type=int, default=MCMCRegressor().n_leapfrog)
    parser.add_argument("--max-tree-depth", type=int, default=10)
    parser.add_argument("--map-epochs", type=int, default=1000)
    parser.add_argument("--hyperprior", choices=["gamma", "empirical"], default="gamma")
    parser.add_argument("--activation", choices=["relu", "tanh"], default="relu")
    parser.add_argument("--leapfrog-dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    estimator = MCMCRegressor(
        hidden_layer_sizes=(50,), activation=args.activation, sampler=args.sampler, n_chains=args.chains,
        n_burnin=args.burnin, n_samples=args.samples, thin=args.thin, n_leapfrog=args.leapfrog,
        max_tree_depth=args.max_tree_depth, max_epochs=args.map_epochs, lr=1e-2, hyperprior=args.hyperprior,
        leapfrog_dtype=args.leapfrog_dtype,
    )
    steps = (f"{args.leapfrog} leapfrog" if args.sampler == "hmc"
             else f"trajectories of at most 2**{args.max_tree_depth} leapfrog steps")
    print(f"{args.sampler.upper()}: {args.chains} chains, {args.burnin} burn-in + {args.samples} x thin {args.thin} "
          f"draws, {steps}; {args.activation}; hyperprior={args.hyperprior!r}; leapfrog_dtype={args.leapfrog_dtype!r}; "
          f"MAP init {args.map_epochs} epochs; "
          f"{args.threads} thread(s)\n")
    print("| data set | splits | RMSE | test LL | MC dropout LL | PBP LL | R-hat (median) | accept | step size | "
          "trajectory | s / split | test LL of each split |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.datasets:
        runs = []
        for split in range(args.splits):  # each split as it ends, so that a run cut short keeps what it did
            runs.append(run_split(estimator, args.data_dir, name, split))
            print(f"{name} split {split}: test LL {runs[-1]['ll']:.3f}  {runs[-1]['seconds']:.0f} s",
                  file=sys.stderr, flush=True)
        rhat = np.median([np.nanmedian(run["estimator"].rhat_) for run in runs])
        accept = np.mean([run["estimator"].acceptance_rate_.mean() for run in runs])
        step_size = np.median([np.median(run["estimator"].step_size_) for run in runs])
        each_split = " ".join(f"{run['ll']:.3f}" for run in runs)
        # HMC's trajectories are n_leapfrog steps; NUTS reports its own.
        trajectory = (args.leapfrog if args.sampler == "hmc"
                      else np.mean([np.mean(run["estimator"].trajectory_length_) for run in runs]))
        print(f"| {name} | {len(runs)} | {fmt([r['rmse'] for r in runs])} | {fmt([r['ll'] for r in runs])} | "
              f"{reference(args.data_dir, name, 'log_likelihood', 'MC dropout')} | "
              f"{reference(args.data_dir, name, 'log_likelihood', 'PBP')} | {rhat:.3f} | {accept:.2f} | "
              f"{step_size:.2e} | {trajectory:.0f} | {np.mean([r['seconds'] for r in runs]):.0f} | "
              f"{each_split} |", flush=True)


if __name__ == "__main__":
    main()
