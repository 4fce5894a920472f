"""HMC efficiency: sampler overhead, chain batching, and mixing on UCI data.

1x50 ReLU MLP, float64, standardised data, one torch thread (``--threads``).

1. Overhead (concrete): seconds per gradient evaluation inside HMC (a fixed
   step size and mass, no adaptation) divided by the seconds of the same
   batched log-posterior gradient called bare, for 1 and 4 chains. Target <= 1.2.
2. Batching (yacht): wall time of 4 (and 16) chains / 1 chain for the same
   number of HMC steps. Target (4 chains) <= 2.5.
3. Mixing (concrete): HMC with burn-in adaptation from the MAP; acceptance per
   quarter of the sampling phase, R-hat (max and median over parameters),
   bulk ESS per second.

    python benchmarks/bench_mcmc_efficiency.py [--data-dir ../shared/data/uci]
"""

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.preprocessing import StandardScaler
from timing import median_seconds

from sklearn_quinn import MCMCRegressor
from sklearn_quinn._core import log_posterior as posterior
from sklearn_quinn._core.likelihoods import GaussianLikelihood
from sklearn_quinn._core.network import FunctionalModel, build_mlp
from sklearn_quinn._core.priors import GaussianPrior
from sklearn_quinn.datasets import load_uci_split
from sklearn_quinn.mcmc._kernels import value_and_grad
from sklearn_quinn.mcmc._sampling import acceptance_by_quarter, run_chains

ROOT = Path(__file__).resolve().parents[1]


def standardised(data_dir, name):
    X, _, y, _ = load_uci_split(data_dir, name, 0)
    X = StandardScaler().fit_transform(X)
    y = (y - y.mean()) / y.std()
    return torch.tensor(X), torch.tensor(y[:, None])


def log_posterior(X, Y, seed=0):
    torch.manual_seed(seed)
    model = FunctionalModel(build_mlp(X.shape[1], 1, (50,), "relu").double())
    noise = torch.tensor([0.3], dtype=torch.float64)
    return model, posterior.log_posterior(model, X, Y, GaussianLikelihood(noise), GaussianPrior(1.0))


def hmc_run(log_density, start, n_steps, n_leapfrog, step_size=1e-3):
    """A function running ``n_steps`` HMC steps with a fixed step size (no adaptation)."""
    generator = torch.Generator().manual_seed(0)
    return lambda: run_chains(log_density, start, sampler="hmc", n_samples=n_steps, n_burnin=0,
                              step_size=step_size, n_leapfrog=n_leapfrog, adapt_step_size=False,
                              generator=generator)


def hmc_seconds(log_density, start, n_steps, n_leapfrog):
    """Median wall seconds of ``n_steps`` HMC steps."""
    return median_seconds(hmc_run(log_density, start, n_steps, n_leapfrog), repeats=3)


def overhead(data_dir, n_steps=50, n_leapfrog=10, repeats=11):
    """Bare gradients and HMC timed alternately, ``repeats`` times each, so that a change of
    machine load hits both sides; the ratio is the median of the per-repeat ratios."""
    X, Y = standardised(data_dir, "concrete")
    model, log_density = log_posterior(X, Y)
    print(f"## 1. Overhead: concrete ({len(X)} rows), K = {model.n_params}, {n_steps} HMC steps "
          f"x {n_leapfrog} leapfrog; {repeats} alternating repeats, medians\n")
    print("| chains | bare gradient (ms) | per gradient inside HMC (ms) | ratio (target <= 1.2) |")
    print("|---|---|---|---|")
    n_bare, n_inside = 200, n_steps * n_leapfrog + 1
    for n_chains in (1, 4):
        start = model.flatten().repeat(n_chains, 1)
        value_and_grad(log_density, start)
        run = hmc_run(log_density, start, n_steps, n_leapfrog)
        bare, inside = [], []
        for _ in range(repeats):
            bare.append(median_seconds(lambda: [value_and_grad(log_density, start) for _ in range(n_bare)],
                                       repeats=1) / n_bare)
            inside.append(median_seconds(run, repeats=1) / n_inside)
        ratio = statistics.median(i / b for i, b in zip(inside, bare))
        print(f"| {n_chains} | {statistics.median(bare) * 1e3:.3f} | {statistics.median(inside) * 1e3:.3f} | "
              f"{ratio:.2f} |")


def batching(data_dir, n_steps=50, n_leapfrog=10):
    X, Y = standardised(data_dir, "yacht")
    model, log_density = log_posterior(X, Y)
    print(f"\n## 2. Batching: yacht ({len(X)} rows), {n_steps} HMC steps x {n_leapfrog} leapfrog\n")
    print("| chains | seconds | / 1 chain |")
    print("|---|---|---|")
    one = None
    for n_chains in (1, 4, 16):
        seconds = hmc_seconds(log_density, model.flatten().repeat(n_chains, 1), n_steps, n_leapfrog)
        one = one or seconds
        target = " (target <= 2.5)" if n_chains == 4 else ""
        print(f"| {n_chains} | {seconds:.3f} | {seconds / one:.2f}{target} |")


def mixing(data_dir, n_burnin, n_samples, n_leapfrog):
    X, _, y, _ = load_uci_split(data_dir, "concrete", 0)
    X = StandardScaler().fit_transform(X)
    reg = MCMCRegressor(hidden_layer_sizes=(50,), sampler="hmc", n_chains=4, n_burnin=n_burnin,
                        n_samples=n_samples, n_leapfrog=n_leapfrog, max_epochs=300, lr=1e-2, random_state=0)
    start = time.perf_counter()
    reg.fit(X, y)
    seconds = time.perf_counter() - start
    quarters = np.array([acceptance_by_quarter(chain[None]) for chain in reg._acceptance])
    print(f"\n## 3. Mixing: concrete, HMC, 4 chains from the MAP, {n_burnin} burn-in + {n_samples} draws, "
          f"{n_leapfrog} leapfrog, noise sampled\n")
    print("| chain | step size | acceptance by quarter of sampling |")
    print("|---|---|---|")
    for index, (step, row) in enumerate(zip(reg.step_size_, quarters)):
        print(f"| {index} | {step:.4g} | {' / '.join(f'{q:.2f}' for q in row)} |")
    print(f"\nR-hat: max {np.nanmax(reg.rhat_):.3f}, median {np.nanmedian(reg.rhat_):.3f}; "
          f"bulk ESS median {np.nanmedian(reg.ess_):.0f} (min {np.nanmin(reg.ess_):.0f}); "
          f"divergent {reg.n_divergent_}; fit {seconds:.1f} s; "
          f"median ESS / s {np.nanmedian(reg.ess_) / seconds:.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data" / "uci"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--burnin", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--leapfrog", type=int, default=10)
    parser.add_argument("--parts", nargs="+", default=["overhead", "batching", "mixing"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)\n")
    if "overhead" in args.parts:
        overhead(args.data_dir)
    if "batching" in args.parts:
        batching(args.data_dir)
    if "mixing" in args.parts:
        mixing(args.data_dir, args.burnin, args.samples, args.leapfrog)


if __name__ == "__main__":
    main()
