"""MCMCRegressor at its defaults with ``compile=False`` and ``compile='auto'``: fit seconds, the choice, the scores.

Each fit runs in a process of its own, one torch thread, so that it pays what
a user's first fit in a fresh Python session pays: torch's compiler starts up
once per process. Per table (a UCI split, inputs standardised, the package's
defaults: 4 chains of 500 burn-in + 500 draws of 40 leapfrog steps from the
evidence-trained MAP, hyperpriors on the precisions and the noise):

1. ``compile=False``;
2. ``compile='auto'`` with an empty compiler cache (``TORCHINDUCTOR_CACHE_DIR``
   a fresh folder): the first fit on a machine;
3. ``compile='auto'`` again with that cache: every later fit.

Printed: fit + predict seconds, whether the chains compiled (``compiled_``),
the ratio to the eager fit, and the test log-likelihood and 95% coverage
(the compiled steps agree with the eager ones to rounding, and the chains
part once rounding flips an accept decision: the scores agree within the
chains' Monte Carlo error, not to the digit). Below about 2,650 training
rows the defaults stay eager (the first rows must match); above, they compile.

``--steps`` first measures what ``compile='auto'``'s cost model rests on, in
one process per table ``ROWSxFEATURESxOUTPUTS`` (standard-normal features,
a Gaussian likelihood): HMC steps (``--leapfrog`` leapfrog steps, the default's 40, 4 chains, the default
1x50 network) eager and compiled, side by side (median of 3 alternating runs
of 101 steps, the 100 after each run's first timed: a compiled run's first
step compiles its own kernel's graph), the compile seconds (the first compiled run, in a process
whose compiler cache is empty), the milliseconds a step compiling saved, and
the cost model's (:func:`sklearn_quinn._core.compiling.compiled_savings`);
then the same steps with the kicks' gradient in float32 (the estimators'
default ``leapfrog_dtype``), eager and compiled, and the eager steps' ratio.
The fits at the defaults (``--datasets``) take the float32 kicks.

``--compile-seconds`` splits a first compilation into the compiler's own
start-up (the first call of a one-line element-wise function compiled in a
fresh process) and the HMC step's graph after it (the whole transition, its
leapfrog steps one ``torch.while_loop``; float64 and float32 kicks), once with
an empty compiler cache and once with the cache that run left.

    python benchmarks/bench_mcmc_compile.py [--datasets concrete kin8nm] [--split 0]
        [--steps 300x8x1 927x8x1 7373x8x1 1437x64x10] [--compile-seconds 927x8x1] [--leapfrog 40]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

from uci_protocol import DEFAULT_DATA_DIR

BENCHMARKS = os.path.dirname(os.path.abspath(__file__))

WORKER = """
import json, sys
sys.path.insert(0, {benchmarks!r})
from defaults_options import pin_threads
from uci_protocol import run_split
from sklearn_quinn import MCMCRegressor
pin_threads(1)
run = run_split(MCMCRegressor(compile={compile!r}), {data_dir!r}, {name!r}, {split})
print(json.dumps(dict(seconds=run["seconds"], ll=run["ll"], coverage=run["coverage_95"], n_train=run["n_train"],
                      compiled=run["estimator"].compiled_)))
"""


CHAINS_SETUP = """
import json, statistics, sys, time
import torch
sys.path.insert(0, {benchmarks!r})
from defaults_options import pin_threads
from timing import AfterFirstStep
from sklearn_quinn._core.compiling import compiled_savings
from sklearn_quinn._core.likelihoods import GaussianLikelihood
from sklearn_quinn._core.log_posterior import log_posterior
from sklearn_quinn._core.network import FunctionalModel, build_mlp
from sklearn_quinn._core.priors import GaussianPrior
from sklearn_quinn.mcmc._sampling import run_chains
pin_threads(1)
generator = torch.Generator().manual_seed(0)
X = torch.randn({rows}, {features}, generator=generator, dtype=torch.float64)
y = X[:, :{outputs}] + torch.randn({rows}, {outputs}, generator=generator, dtype=torch.float64)
torch.manual_seed(0)
model = FunctionalModel(build_mlp({features}, {outputs}, (50,), "relu", linear_skip=True).double())
noise = torch.full(({outputs},), 0.3, dtype=torch.float64)
densities = {{dtype: log_posterior(model, X, y, GaussianLikelihood(noise), GaussianPrior(1.0))
             for dtype in (torch.float64, torch.float32)}}
densities[torch.float32].set_surrogate_dtype(torch.float32)  # the kicks' gradient in float32 (leapfrog_dtype)
start = model.flatten()[None].repeat(4, 1)

def seconds(compile, n_steps, kicks=torch.float64):
    # Seconds a step after the first (AfterFirstStep), and the whole run's seconds.
    steps, begin = AfterFirstStep(), time.perf_counter()
    run_chains(densities[kicks], start, sampler="hmc", n_samples=n_steps, n_burnin=0, step_size=1e-3,
               n_leapfrog={leapfrog}, adapt_step_size=False, compile=compile,
               generator=torch.Generator().manual_seed(0), progress=steps)
    return steps.stop().wall / max(n_steps - 1, 1), time.perf_counter() - begin
"""

STEPS_WORKER = CHAINS_SETUP + """
compile_seconds = seconds(True, 1)[1]
settings = [(False, torch.float64), (True, torch.float64), (False, torch.float32), (True, torch.float32)]
runs = {{setting: [] for setting in settings}}
for _ in range(3):
    for compile, kicks in settings:
        runs[compile, kicks].append(seconds(compile, 101, kicks)[0])
median = {{setting: statistics.median(times) for setting, times in runs.items()}}
print(json.dumps(dict(eager=median[False, torch.float64], compiled=median[True, torch.float64],
                      eager_kicks32=median[False, torch.float32], compiled_kicks32=median[True, torch.float32],
                      compile_seconds=compile_seconds,
                      model=compiled_savings({leapfrog}, 4 * {rows} * model.total_width))))
"""


# The compiler's own start-up (a one-line element-wise function compiled first), then an HMC step's
# trajectory (--leapfrog steps, 4 chains) with the kicks in {kicks}: the seconds of each first call.
COMPILE_WORKER = CHAINS_SETUP + """
begin = time.perf_counter()
torch.compile(lambda x: (x.relu() * 2).sum())(torch.randn(100, dtype=torch.float64))
start_up = time.perf_counter() - begin
step = seconds(True, 1, torch.{kicks})[1]
print(json.dumps(dict(start_up=start_up, step=step)))
"""


def run_in_process(code, cache_dir):
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache_dir, OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def fit_in_process(data_dir, name, split, compile, cache_dir):
    return run_in_process(WORKER.format(benchmarks=BENCHMARKS, data_dir=str(data_dir), name=name, split=split,
                                        compile=compile), cache_dir)


def step_times(shape, leapfrog):
    rows, features, outputs = map(int, shape.split("x"))
    with tempfile.TemporaryDirectory() as cache_dir:
        return run_in_process(STEPS_WORKER.format(benchmarks=BENCHMARKS, rows=rows, features=features,
                                                  outputs=outputs, leapfrog=leapfrog), cache_dir)


def compile_seconds(shape, leapfrog):
    """The compiler's start-up and an HMC step's own compilation, float64 and float32 kicks, each in a
    fresh process: first with an empty compiler cache, then with the cache that run left."""
    rows, features, outputs = map(int, shape.split("x"))
    runs = []
    for kicks in ("float64", "float32"):
        code = COMPILE_WORKER.format(benchmarks=BENCHMARKS, rows=rows, features=features, outputs=outputs,
                                     kicks=kicks, leapfrog=leapfrog)
        with tempfile.TemporaryDirectory() as cache_dir:
            runs += [(kicks, cache, run_in_process(code, cache_dir)) for cache in ("empty", "warm")]
    return runs


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    parser.add_argument("--datasets", nargs="*", default=["concrete", "kin8nm"],
                        help="UCI sets to fit at the defaults (none: only --steps)")
    parser.add_argument("--split", type=int, default=0)
    parser.add_argument("--steps", nargs="*", default=[], metavar="ROWSxFEATURESxOUTPUTS",
                        help="tables (e.g. 927x8x1) on which to time eager and compiled HMC steps against the "
                             "cost model")
    parser.add_argument("--compile-seconds", nargs="*", default=[], metavar="ROWSxFEATURESxOUTPUTS",
                        help="tables on which to time the compiler's start-up and an HMC step's compilation")
    parser.add_argument("--leapfrog", type=int, default=40,
                        help="leapfrog steps of the HMC steps of --steps and --compile-seconds (the default's)")
    args = parser.parse_args()

    if args.compile_seconds:
        print("| rows x features x outputs | kicks | compiler cache | start-up s (a one-line function) | "
              "HMC step's compilation s | together s |")
        print("|---|---|---|---|---|---|")
        for shape in args.compile_seconds:
            for kicks, cache, run in compile_seconds(shape, args.leapfrog):
                print(f"| {shape} | {kicks} | {cache} | {run['start_up']:.1f} | {run['step']:.1f} | "
                      f"{run['start_up'] + run['step']:.1f} |", flush=True)
        print()

    if args.steps:
        print("| rows x features x outputs | eager ms a step | compiled ms a step | eager / compiled | "
              "saved ms a step | cost model's saving | compile s | eager, float32 kicks | compiled, float32 kicks "
              "| eager / eager with float32 kicks |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for shape in args.steps:
            times = step_times(shape, args.leapfrog)
            print(f"| {shape} | {1e3 * times['eager']:.2f} | {1e3 * times['compiled']:.2f} | "
                  f"{times['eager'] / times['compiled']:.2f} | {1e3 * (times['eager'] - times['compiled']):.2f} | "
                  f"{1e3 * times['model']:.2f} | {times['compile_seconds']:.1f} | "
                  f"{1e3 * times['eager_kicks32']:.2f} | {1e3 * times['compiled_kicks32']:.2f} | "
                  f"{times['eager'] / times['eager_kicks32']:.2f} |", flush=True)
        print()

    if args.datasets:
        print("| data set | training rows | compile | fit + predict s | compiled_ | / eager | test LL | 95% coverage |")
        print("|---|---|---|---|---|---|---|---|")
    for name in args.datasets:
        with tempfile.TemporaryDirectory() as cache_dir:
            eager = fit_in_process(args.data_dir, name, args.split, False, cache_dir)
            runs = [("False", eager),
                    ("'auto', cold cache", fit_in_process(args.data_dir, name, args.split, "auto", cache_dir)),
                    ("'auto', warm cache", fit_in_process(args.data_dir, name, args.split, "auto", cache_dir))]
        for label, run in runs:
            print(f"| {name} | {run['n_train']} | {label} | {run['seconds']:.1f} | {run['compiled']} | "
                  f"{run['seconds'] / eager['seconds']:.2f} | {run['ll']:.3f} | {run['coverage']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
