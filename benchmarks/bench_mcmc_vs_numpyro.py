"""HMC and NUTS speed against NumPyro: seconds per gradient evaluation inside each sampler.

Same model, data, start, fixed step size, 10 leapfrog steps, float64, one
thread each, one chain; no adaptation on either side:

* data: UCI concrete, split 0, training rows; X and y standardised with their
  own mean / std;
* model: 8 -> 50 ReLU -> 1 MLP, every weight and bias ~ N(0, 1), Gaussian
  likelihood with a fixed noise std of 0.3 (standardised units);
* start: the MAP, found once (torch L-BFGS) and given to both samplers.

Ours: ``sklearn_quinn.mcmc._sampling.run_chains(sampler="hmc")`` on
``log_posterior``, timed from the end of each run's first step to its end
(``(n_samples - 1) * 10`` gradients; a compiled run's first step compiles
its kernel's graph, and every run builds its kernel anew). NumPyro: its
HMC kernel, ``hmc(potential_fn)`` with ``step_size=eps, num_steps=10,
trajectory_length=None`` (else NumPyro replaces the step size by
``trajectory_length / num_steps``; the step size used is read back from the
state and checked), no step-size or mass adaptation, ``potential_fn`` the one
``initialize_model`` builds from the NumPyro model; ``n_samples`` calls of
``sample_kernel`` in one ``jax.jit(lax.scan)`` keeping ``z`` at every step,
AOT-compiled once (``.lower().compile()``, the compile seconds reported
apart), then called with fresh keys: what ``MCMC.run(progress_bar=False)``
does (``fori_collect``: one jitted loop), compiled once (``n_samples * 10``
gradients a run). The repeats of the two sides are interleaved, so a change
of machine load hits both. ``MCMC(HMC(model, ...), num_warmup=0).run`` itself
is timed twice as a cross-check: with NumPyro 0.22 / JAX 0.10 it retraces and
recompiles its loop on every call, so the compile seconds JAX records inside a
run (trace, lowering, XLA compile; these may overlap) are subtracted.

Ours three times: eager (``compile=False``) with the exact float64 gradient,
eager with the kicks' gradient in float32 (the estimators' default
``leapfrog_dtype='float32'``: each trajectory's leapfrog steps take the float32
gradient, its end the float64 log density for the accept step, which NumPyro
takes in float64 too), and with ``compile=True`` (the HMC transition through
``torch.compile``, its leapfrog steps one ``torch.while_loop`` in the graph, as
NumPyro's are one ``fori_loop``; its compile seconds, from the first run,
reported apart as NumPyro's are), with the exact gradient and with the float32
kicks.

NUTS (``--nuts-depth``, default 8; 0 skips it): both samplers from the same
start with the same fixed step size and maximum tree depth, identity mass, one
chain, no adaptation; NumPyro's NUTS kernel in an AOT-compiled ``lax.scan``
as for HMC. Seconds per leapfrog step (each side's tree building included),
from the leapfrog steps each side reports (NumPyro's ``num_steps``; ours
the steps' ``n_leapfrog`` record, plus one gradient at init). Ours eager and compiled on the
exact density, and compiled with its float32 surrogate, as the estimators'
default ``leapfrog_dtype`` runs NUTS: the trees built on the float32 density,
each step's point then tested against the float64 one (one gradient more a
step, at the tree's start, counted).

Context: the bare gradient of each side (our hand-written batched gradient,
eager; ``jax.jit(jax.value_and_grad(potential_fn))`` called from Python, and
inside a compiled ``fori_loop``).

One thread: ``torch.set_num_threads(1)``; for JAX, before it is imported,
``XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"``
and ``OMP_NUM_THREADS=1``. XLA's CPU runtime keeps a thread pool sized from the
process's CPU affinity whatever the flags say (jax-ml/jax#743, #1539: the
affinity mask is the one reliable limit), so by default the whole process is
pinned to one core (``--cpu``; ``--cpu -1`` leaves it unpinned). Both wall and
process-CPU seconds are reported; the CPU-time ratio is less sensitive to
other processes sharing the machine.

    .venv-bench/bin/python benchmarks/bench_mcmc_vs_numpyro.py [--data-dir /work/shared/data/uci]
"""

import argparse
import math
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default="/work/shared/data/uci")
    parser.add_argument("--step-size", type=float, default=2e-3)
    parser.add_argument("--n-leapfrog", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="target sampling seconds per timed run and side")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--nuts-depth", type=int, default=8,
                        help="max_tree_depth of both NUTS runs (0: skip the NUTS comparison)")
    parser.add_argument("--cpu", type=int, default=0,
                        help="pin the process to this core (-1: no pinning)")
    return parser.parse_args()


ARGS = parse_args()
if ARGS.cpu >= 0:
    os.sched_setaffinity(0, {ARGS.cpu})
# Single-threaded XLA CPU: set before jax is imported.
os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)

import numpyro  # noqa: E402
import numpyro.distributions as dist  # noqa: E402
from numpyro.infer import HMC, MCMC  # noqa: E402
from numpyro.infer.hmc import hmc as numpyro_hmc  # noqa: E402
from numpyro.infer.util import initialize_model  # noqa: E402

sys.path.insert(0, ROOT)
from timing import AfterFirstStep  # noqa: E402

from sklearn_quinn._core.likelihoods import GaussianLikelihood  # noqa: E402
from sklearn_quinn._core.log_posterior import log_posterior  # noqa: E402
from sklearn_quinn._core.network import FunctionalModel, build_mlp  # noqa: E402
from sklearn_quinn._core.priors import GaussianPrior  # noqa: E402
from sklearn_quinn.datasets import load_uci_split  # noqa: E402
from sklearn_quinn.mcmc._kernels import value_and_grad  # noqa: E402
from sklearn_quinn.mcmc._sampling import run_chains  # noqa: E402

NOISE_STD = 0.3
HIDDEN = 50
#: Issue 18: a gradient inside HMC, and a leapfrog step inside NUTS, at most NumPyro's time.
TARGET_RATIO = 1.0

# JAX's own records of tracing, lowering and XLA compilation.
COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)
_compile_seconds = [0.0]


def _on_duration(event, duration, **kwargs):
    if event in COMPILE_EVENTS:
        _compile_seconds[0] += duration


jax.monitoring.register_event_duration_secs_listener(_on_duration)


class Clock:
    """Wall and process-CPU seconds of a block."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu



# ------------------------------------------------------------------- data
def load_data(data_dir):
    X, _, y, _ = load_uci_split(data_dir, "concrete", 0)
    X = (X - X.mean(0)) / X.std(0)
    y = (y - y.mean()) / y.std()
    return X, y


# ------------------------------------------------------------------- ours
def our_log_density(X, y):
    torch.manual_seed(0)
    model = FunctionalModel(build_mlp(X.shape[1], 1, (HIDDEN,), "relu").double())
    noise = torch.tensor([NOISE_STD], dtype=torch.float64)
    log_density = log_posterior(
        model, torch.tensor(X), torch.tensor(y[:, None]), GaussianLikelihood(noise), GaussianPrior(1.0))
    return model, log_density


def find_map(model, log_density):
    """MAP by full-batch L-BFGS from torch's default init, shape ``(1, K)``."""
    theta = model.flatten()[None].clone().requires_grad_(True)
    optimizer = torch.optim.LBFGS([theta], lr=1.0, max_iter=2000, tolerance_grad=1e-9,
                                  tolerance_change=1e-12, history_size=50,
                                  line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = -log_density(theta).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    return theta.detach()


def run_ours(log_density, start, n_samples, step_size, n_leapfrog, seed, compile=False):
    """The run's :class:`AfterFirstStep` clock (``n_samples - 1`` HMC steps), its acceptance and
    divergences, and a clock of the whole run (for a compiled run, its compilation included)."""
    generator, steps = torch.Generator().manual_seed(seed), AfterFirstStep()
    with Clock() as whole:
        result = run_chains(log_density, start, sampler="hmc", n_samples=n_samples, n_burnin=0,
                            step_size=step_size, n_leapfrog=n_leapfrog, adapt_step_size=False,
                            compile=compile, generator=generator, progress=steps)
        steps.stop()
    return steps, float(result.acceptance.mean()), int(result.divergent.sum()), whole


# ---------------------------------------------------------------- NumPyro
def numpyro_model(X, y):
    n_features = X.shape[1]
    W1 = numpyro.sample("W1", dist.Normal(0.0, 1.0).expand([HIDDEN, n_features]).to_event(2))
    b1 = numpyro.sample("b1", dist.Normal(0.0, 1.0).expand([HIDDEN]).to_event(1))
    W2 = numpyro.sample("W2", dist.Normal(0.0, 1.0).expand([1, HIDDEN]).to_event(2))
    b2 = numpyro.sample("b2", dist.Normal(0.0, 1.0).expand([1]).to_event(1))
    hidden = jax.nn.relu(X @ W1.T + b1)
    mean = (hidden @ W2.T + b2)[:, 0]
    numpyro.sample("y", dist.Normal(mean, NOISE_STD), obs=y)


def to_sites(theta, n_features):
    """Our flat ``(K,)`` vector (torch parameter order) as NumPyro's site dict."""
    theta = np.asarray(theta, dtype=np.float64)
    sizes = {"W1": (HIDDEN, n_features), "b1": (HIDDEN,), "W2": (1, HIDDEN), "b2": (1,)}
    sites, offset = {}, 0
    for name, shape in sizes.items():
        size = int(np.prod(shape))
        sites[name] = jnp.asarray(theta[offset:offset + size].reshape(shape))
        offset += size
    assert offset == theta.size
    return sites


def from_sites(sites):
    return np.concatenate([np.asarray(sites[name]).ravel() for name in ("W1", "b1", "W2", "b2")])


def make_numpyro(step_size, n_leapfrog, n_samples):
    kernel = HMC(numpyro_model, step_size=step_size, num_steps=n_leapfrog, trajectory_length=None,
                 adapt_step_size=False, adapt_mass_matrix=False, dense_mass=False)
    return MCMC(kernel, num_warmup=0, num_samples=n_samples, num_chains=1, progress_bar=False)


def run_numpyro_mcmc(mcmc, Xj, yj, init_sites, seed):
    """One ``MCMC.run``: wall seconds, JAX compile seconds inside it, acceptance, step size used."""
    _compile_seconds[0] = 0.0
    with Clock() as clock:
        mcmc.run(jax.random.key(seed), Xj, yj, init_params=init_sites,
                 extra_fields=("accept_prob", "num_steps"))
        jax.block_until_ready((mcmc.get_samples(), mcmc.last_state))
    extra = mcmc.get_extra_fields()
    return (clock, _compile_seconds[0], float(extra["accept_prob"].mean()),
            float(mcmc.last_state.adapt_state.step_size), np.unique(np.asarray(extra["num_steps"])))


def numpyro_compiled_chain(potential_fn, init_sites, step_size, n_leapfrog, n_samples):
    """NumPyro's HMC kernel (functional API) in one AOT-compiled ``lax.scan`` of ``n_samples`` steps.

    This is what ``MCMC.run`` does with ``progress_bar=False`` (``fori_collect``: one jitted
    loop over ``sample_kernel`` keeping ``z`` at every step), compiled once. Returns the
    compiled loop, the initial state and the compile seconds.
    """
    init_kernel, sample_kernel = numpyro_hmc(potential_fn=potential_fn, algo="HMC")
    state = init_kernel(init_sites, num_warmup=0, step_size=step_size, adapt_step_size=False,
                        adapt_mass_matrix=False, dense_mass=False, num_steps=n_leapfrog,
                        trajectory_length=None, rng_key=jax.random.key(0))

    def chain(state):
        def body(state, _):
            state = sample_kernel(state)
            return state, (state.z, state.accept_prob, state.diverging, state.num_steps)
        return jax.lax.scan(body, state, None, length=n_samples)

    with Clock() as clock:
        compiled = jax.jit(chain).lower(state).compile()
    return compiled, state, clock.wall


def run_numpyro_compiled(compiled, state, seed):
    state = state._replace(rng_key=jax.random.key(seed))
    with Clock() as clock:
        last, (draws, accept, diverging, num_steps) = compiled(state)
        jax.block_until_ready((last, draws))
    return (clock, float(accept.mean()), int(diverging.sum()),
            float(last.adapt_state.step_size), np.unique(np.asarray(num_steps)))


# ------------------------------------------------------------------ NUTS
def run_ours_nuts(log_density, start, n_samples, step_size, depth, seed, compile=False):
    """The :class:`AfterFirstStep` clock of ``n_samples - 1`` NUTS steps, their gradients and the
    run's acceptance, and a clock of the whole run."""
    steps = AfterFirstStep()
    with Clock() as whole:
        result = run_chains(log_density, start, sampler="nuts", n_samples=n_samples, n_burnin=0,
                            step_size=step_size, max_tree_depth=depth, adapt_step_size=False, compile=compile,
                            generator=torch.Generator().manual_seed(seed), progress=steps)
        steps.stop()
    # The steps' gradients: one per leapfrog step, and on a surrogate one more a step, at its tree's start
    # (counted from the steps' record: a compiled half's loop runs no Python to count in).
    surrogate = getattr(log_density, "surrogate", None) is not None
    n_gradients = int(result.n_leapfrog[:, 1:].sum()) + (n_samples - 1 if surrogate else 0)
    return steps, n_gradients, float(result.acceptance.mean()), whole


def numpyro_compiled_nuts(potential_fn, init_sites, step_size, depth, n_samples):
    """NumPyro's NUTS kernel in one AOT-compiled ``lax.scan`` of ``n_samples`` steps (as for HMC)."""
    init_kernel, sample_kernel = numpyro_hmc(potential_fn=potential_fn, algo="NUTS")
    state = init_kernel(init_sites, num_warmup=0, step_size=step_size, adapt_step_size=False,
                        adapt_mass_matrix=False, dense_mass=False, max_tree_depth=depth, rng_key=jax.random.key(0))

    def chain(state):
        def body(state, _):
            state = sample_kernel(state)
            return state, (state.accept_prob, state.num_steps)
        return jax.lax.scan(body, state, None, length=n_samples)

    compiled = jax.jit(chain).lower(state).compile()
    return compiled, state


def run_numpyro_nuts(compiled, state, seed):
    with Clock() as clock:
        last, (accept, num_steps) = compiled(state._replace(rng_key=jax.random.key(seed)))
        jax.block_until_ready((last, accept))
    return clock, int(np.asarray(num_steps).sum()), float(accept.mean())


def nuts_comparison(log_density, kicked, start, potential_fn, init_sites, step_size, depth, seconds, repeats,
                    bare_ours, bare_jax_graph):
    """Seconds per leapfrog step (gradient) inside NUTS, each side's own tree building included;
    ours compiled also on ``kicked``, the density with its float32 surrogate (the estimators'
    default ``leapfrog_dtype``: the trees built on it, each step's point tested in float64)."""
    n_ours = max(5, int(seconds / (2**depth * bare_ours[0])))
    n_numpyro = max(5, int(seconds / (2**depth * bare_jax_graph[0])))
    compiled, state = numpyro_compiled_nuts(potential_fn, init_sites, step_size, depth, n_numpyro)
    run_numpyro_nuts(compiled, state, seed=0)
    *_, compile_ours = run_ours_nuts(log_density, start, 1, step_size, depth, seed=0, compile=True)
    *_, compile_float32 = run_ours_nuts(kicked, start, 1, step_size, depth, seed=0, compile=True)
    ours, ours_compiled, ours_float32, theirs = [], [], [], []
    for repeat in range(repeats):
        ours.append(run_ours_nuts(log_density, start, n_ours, step_size, depth, seed=repeat))
        ours_compiled.append(run_ours_nuts(log_density, start, n_ours, step_size, depth, seed=repeat,
                                           compile=True))
        ours_float32.append(run_ours_nuts(kicked, start, n_ours, step_size, depth, seed=repeat, compile=True))
        theirs.append(run_numpyro_nuts(compiled, state, seed=repeat + 1))
    per_ours = statistics.median(clock.wall / n for clock, n, *_ in ours)
    per_compiled = statistics.median(clock.wall / n for clock, n, *_ in ours_compiled)
    per_float32 = statistics.median(clock.wall / n for clock, n, *_ in ours_float32)
    per_theirs = statistics.median(clock.wall / n for clock, n, _ in theirs)
    print()
    print(f"NUTS: step size {step_size:g}, max_tree_depth {depth}, identity mass, 1 chain, no adaptation; "
          f"ours {n_ours} steps, NumPyro {n_numpyro} steps a run, {repeats} interleaved repeats, median")
    print(f"{'ours: per leapfrog step in NUTS':36s}{fmt_us(per_ours):>11s}   leapfrog steps a NUTS step "
          + ", ".join(f"{n / (n_ours - 1):.0f}" for _, n, *_ in ours))
    print(f"{'ours (compile=True): per step':36s}{fmt_us(per_compiled):>11s}   (its first run, compiling: "
          f"{compile_ours.wall:.1f} s)")
    print(f"{'ours (compiled, float32 trees): per':36s}{fmt_us(per_float32):>11s}   (its first run, compiling: "
          f"{compile_float32.wall:.1f} s); acceptance {statistics.mean(a for _, _, a, _ in ours_float32):.3f}")
    print(f"{'NumPyro: per leapfrog step in NUTS':36s}{fmt_us(per_theirs):>11s}   leapfrog steps a NUTS step "
          + ", ".join(f"{n / n_numpyro:.0f}" for _, n, _ in theirs))
    print(f"{'RATIO ours (compile=True) / NumPyro':36s}{per_compiled / per_theirs:>10.2f}x   target <= {TARGET_RATIO}: "
          f"{'MET' if per_compiled <= TARGET_RATIO * per_theirs else 'NOT MET'}")
    print(f"{'RATIO ours (float32 trees) / NumPyro':36s}{per_float32 / per_theirs:>10.2f}x   target <= "
          f"{TARGET_RATIO}: {'MET' if per_float32 <= TARGET_RATIO * per_theirs else 'NOT MET'}")
    print(f"{'RATIO ours / NumPyro (NUTS)':36s}{per_ours / per_theirs:>10.2f}x   target <= {TARGET_RATIO}: "
          f"{'MET' if per_ours <= TARGET_RATIO * per_theirs else 'NOT MET'}; acceptance ours "
          f"{statistics.mean(a for _, _, a, _ in ours):.3f}, NumPyro {statistics.mean(a for *_, a in theirs):.3f}")


# ------------------------------------------------------------ bare grads
def median_per_call(function, n_calls, repeats=3):
    walls, cpus = [], []
    for _ in range(repeats):
        with Clock() as clock:
            function(n_calls)
        walls.append(clock.wall / n_calls)
        cpus.append(clock.cpu / n_calls)
    return statistics.median(walls), statistics.median(cpus)


def fmt_us(seconds):
    return f"{seconds * 1e6:8.1f} us"


def main():
    args = ARGS
    eps, n_leapfrog = args.step_size, args.n_leapfrog
    print("== HMC per-gradient time: sklearn_quinn (torch) vs NumPyro (JAX) ==")
    print(f"torch {torch.__version__} | jax {jax.__version__} | numpyro {numpyro.__version__} "
          f"| python {sys.version.split()[0]}")
    print(f"affinity: {sorted(os.sched_getaffinity(0))} (machine: {os.cpu_count()} cores) | "
          f"torch threads {torch.get_num_threads()} | XLA_FLAGS={os.environ['XLA_FLAGS']!r} "
          f"| OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}")
    print(f"load average at start: {os.getloadavg()}")

    X, y = load_data(args.data_dir)
    n_features = X.shape[1]
    model, log_density = our_log_density(X, y)
    _, kicked = our_log_density(X, y)
    kicked.set_surrogate_dtype(torch.float32)  # the estimators' default leapfrog_dtype
    K = model.n_params
    print(f"data: concrete split 0 train, N={X.shape[0]}, D={n_features}; MLP {n_features}-{HIDDEN}-1 "
          f"ReLU, K={K}; prior N(0,1); noise std {NOISE_STD}; float64")

    with Clock() as clock:
        start = find_map(model, log_density)
    print(f"start: MAP by torch L-BFGS ({clock.wall:.1f} s), log posterior {float(log_density(start)):.3f}")

    # Both sides compute the same log density and gradient at the start.
    Xj, yj = jnp.asarray(X), jnp.asarray(y)
    init_sites = to_sites(start[0], n_features)
    info = initialize_model(jax.random.key(0), numpyro_model, model_args=(Xj, yj))
    potential_fn = info.potential_fn
    jax_value_and_grad = jax.jit(jax.value_and_grad(potential_fn))
    pe, pe_grad = jax_value_and_grad(init_sites)
    value, gradient = value_and_grad(log_density, start)
    print(f"check at start: ours log p {float(value[0]):.6f}, NumPyro -U {-float(pe):.6f}, "
          f"max |grad diff| {np.abs(gradient[0].numpy() + from_sites(pe_grad)).max():.2e}")


    # ---------------------------------------------------- bare gradients
    def ours_bare(n):
        for _ in range(n):
            value_and_grad(log_density, start)

    def jax_bare(n):
        out = None
        for _ in range(n):
            out = jax_value_and_grad(init_sites)
        jax.block_until_ready(out)

    @jax.jit
    def jax_in_graph(z, n):
        # n dependent gradient evaluations inside one compiled loop
        def body(_, carry):
            z, acc = carry
            u, g = jax.value_and_grad(potential_fn)(z)
            z = jax.tree.map(lambda a, b: a - 1e-30 * b, z, g)
            return z, acc + u
        return jax.lax.fori_loop(0, n, body, (z, 0.0))[1]

    jax.block_until_ready(jax_in_graph(init_sites, 10))
    ours_bare(20)
    bare_ours = median_per_call(ours_bare, 500)
    bare_jax = median_per_call(jax_bare, 2000)
    bare_jax_graph = median_per_call(lambda n: jax.block_until_ready(jax_in_graph(init_sites, n)), 2000)

    # ------------------------------------------------ size the runs
    # ~args.seconds of sampling per run, from the bare gradient wall times.
    n_ours = max(50, int(args.seconds / (n_leapfrog * bare_ours[0])))
    n_numpyro = max(50, int(args.seconds / (n_leapfrog * bare_jax_graph[0])))

    # ------------------------------------------------ NumPyro: compile
    compiled, state0, compile_aot = numpyro_compiled_chain(potential_fn, init_sites, eps, n_leapfrog,
                                                           n_numpyro)
    run_numpyro_compiled(compiled, state0, seed=0)  # first call: allocations, caches

    # ------------------------------------------------ ours, compile=True: compile
    # A compiled run compiles its transition at its first step (every run builds its kernel, and
    # each kernel compiles its own graph; the compiler's on-disk cache serves the later ones).
    *_, compile_ours = run_ours(log_density, start, 2, eps, n_leapfrog, seed=0, compile=True)
    *_, compile_kicked = run_ours(kicked, start, 2, eps, n_leapfrog, seed=0, compile=True)
    steps, *_ = run_ours(log_density, start, 11, eps, n_leapfrog, seed=0, compile=True)
    n_compiled = max(50, int(args.seconds / (n_leapfrog * 3 * max(steps.wall / (10 * n_leapfrog), 1e-6))))

    # ------------------------------------------------ timed, interleaved
    ours_runs, numpyro_runs, compiled_runs, kicked_runs, compiled_kicked_runs = [], [], [], [], []
    for repeat in range(args.repeats):
        ours_runs.append(run_ours(log_density, start, n_ours, eps, n_leapfrog, seed=repeat))
        kicked_runs.append(run_ours(kicked, start, n_ours, eps, n_leapfrog, seed=repeat))
        numpyro_runs.append(run_numpyro_compiled(compiled, state0, seed=repeat + 1))
        compiled_runs.append(run_ours(log_density, start, n_compiled, eps, n_leapfrog, seed=repeat,
                                      compile=True))
        compiled_kicked_runs.append(run_ours(kicked, start, n_compiled, eps, n_leapfrog, seed=repeat,
                                             compile=True))

    # ------------------------------------------------ NumPyro's MCMC.run, as a cross-check
    # Each MCMC.run traces and compiles its loop again (see the note printed below); the
    # compile seconds JAX records inside the run are subtracted.
    mcmc = make_numpyro(eps, n_leapfrog, n_numpyro)
    mcmc_runs = [run_numpyro_mcmc(mcmc, Xj, yj, init_sites, seed=seed) for seed in (0, 1)]

    grads_ours = (n_ours - 1) * n_leapfrog  # the steps after the first (AfterFirstStep)
    grads_numpyro = n_numpyro * n_leapfrog  # the compiled loop only (init is outside it)
    grads_mcmc = n_numpyro * n_leapfrog + 1
    grads_compiled = (n_compiled - 1) * n_leapfrog
    per_grad = {
        "ours": [(r[0].wall / grads_ours, r[0].cpu / grads_ours) for r in ours_runs],
        "kicked": [(r[0].wall / grads_ours, r[0].cpu / grads_ours) for r in kicked_runs],
        "numpyro": [(r[0].wall / grads_numpyro, r[0].cpu / grads_numpyro) for r in numpyro_runs],
        "compiled": [(r[0].wall / grads_compiled, r[0].cpu / grads_compiled) for r in compiled_runs],
        "compiled_kicked": [(r[0].wall / grads_compiled, r[0].cpu / grads_compiled) for r in compiled_kicked_runs],
    }
    med = {side: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
           for side, v in per_grad.items()}
    used_step = {numpyro_runs[0][3], *(r[3] for r in mcmc_runs)}
    used_steps = sorted({int(n) for r in (*numpyro_runs, *mcmc_runs) for n in r[4]})
    step_ok = all(math.isclose(value, eps) for value in used_step)

    print()
    print(f"step size {eps:g}, {n_leapfrog} leapfrog steps, identity mass, 1 chain, no warm-up/adaptation")
    print(f"NumPyro step size actually used (state.adapt_state.step_size): {sorted(used_step)} -> "
          f"{'OK, equals eps' if step_ok else 'MISMATCH'}; leapfrog steps per iteration {used_steps}")
    print(f"runs: ours {n_ours} HMC steps ({grads_ours} gradients), ours compiled {n_compiled}, NumPyro "
          f"{n_numpyro} HMC steps ({grads_numpyro} gradients); {args.repeats} interleaved repeats, median")
    print()
    print(f"{'':36s}{'wall':>11s}{'cpu':>11s}")
    for side, name in (("ours", "ours (eager): per gradient in HMC"),
                       ("kicked", "ours (eager, float32 kicks)"),
                       ("compiled", "ours (compile=True): per gradient"),
                       ("compiled_kicked", "ours (compiled, float32 kicks)"),
                       ("numpyro", "NumPyro: per gradient inside HMC")):
        print(f"{name:36s}{fmt_us(med[side][0]):>11s}{fmt_us(med[side][1]):>11s}   repeats (wall, us): "
              + ", ".join(f"{w * 1e6:.1f}" for w, _ in per_grad[side]))
    for side, name in (("ours", "RATIO ours (eager) / NumPyro"), ("kicked", "RATIO ours (float32 kicks) / NumPyro"),
                       ("compiled", "RATIO ours (compile=True) / NumPyro"),
                       ("compiled_kicked", "RATIO compiled, float32 kicks")):
        ratio_wall = med[side][0] / med["numpyro"][0]
        ratio_cpu = med[side][1] / med["numpyro"][1]
        print(f"{name:36s}{ratio_wall:>10.2f}x{ratio_cpu:>10.2f}x   target <= {TARGET_RATIO} (issue 18): "
              f"{'MET' if ratio_wall <= TARGET_RATIO else 'NOT MET'}")
    print()
    print(f"{'bare gradient, ours (eager)':36s}{fmt_us(bare_ours[0]):>11s}{fmt_us(bare_ours[1]):>11s}")
    print(f"{'bare gradient, jax.jit, python loop':36s}{fmt_us(bare_jax[0]):>11s}{fmt_us(bare_jax[1]):>11s}"
          "   (one dispatch per call)")
    print(f"{'bare gradient, jax, in fori_loop':36s}{fmt_us(bare_jax_graph[0]):>11s}"
          f"{fmt_us(bare_jax_graph[1]):>11s}   (no dispatch)")
    print(f"{'HMC / bare: ours':36s}{med['ours'][0] / bare_ours[0]:>10.2f}x"
          f"{med['ours'][1] / bare_ours[1]:>10.2f}x")
    print(f"{'HMC / bare in-graph: NumPyro':36s}{med['numpyro'][0] / bare_jax_graph[0]:>10.2f}x"
          f"{med['numpyro'][1] / bare_jax_graph[1]:>10.2f}x")
    print(f"{'bare ours / bare jax in-graph':36s}{bare_ours[0] / bare_jax_graph[0]:>10.2f}x"
          f"{bare_ours[1] / bare_jax_graph[1]:>10.2f}x")
    print()
    print(f"NumPyro JIT compile (excluded above): {compile_aot:.2f} s, AOT jit(scan of sample_kernel)"
          ".lower().compile()")
    print(f"ours torch.compile, float32 kicks (excluded above): {compile_kicked.wall:.2f} s")
    print(f"ours torch.compile (excluded above): {compile_ours.wall:.2f} s, the first compile=True run "
          "(2 HMC steps; includes them; each later run compiles its own kernel, with a warm cache)")
    for label, (clock, compiled_s, accept, _, _) in zip(("1st", "2nd"), mcmc_runs):
        print(f"NumPyro MCMC.run {label} call: {clock.wall:.2f} s wall, of which {compiled_s:.2f} s "
              f"trace/lower/compile recorded by JAX -> {(clock.wall - compiled_s) / grads_mcmc * 1e6:.1f} us"
              f" per gradient without it (acceptance {accept:.3f})")
    print("  (MCMC.run recompiles its loop on every call here: fori_collect wraps its body in a new "
          "jit each call, a new static argument of the jitted loop)")
    print(f"acceptance: ours {statistics.mean(r[1] for r in ours_runs):.3f} "
          f"(repeats {', '.join(f'{r[1]:.3f}' for r in ours_runs)}; divergent "
          f"{sum(r[2] for r in ours_runs)}), float32 kicks {statistics.mean(r[1] for r in kicked_runs):.3f}, "
          f"NumPyro {statistics.mean(r[1] for r in numpyro_runs):.3f} "
          f"(repeats {', '.join(f'{r[1]:.3f}' for r in numpyro_runs)}; divergent "
          f"{sum(r[2] for r in numpyro_runs)}), ours compiled "
          f"{statistics.mean(r[1] for r in compiled_runs):.3f}")
    if args.nuts_depth:
        nuts_comparison(log_density, kicked, start, potential_fn, init_sites, eps, args.nuts_depth, args.seconds,
                        args.repeats, bare_ours, bare_jax_graph)
    print(f"load average at end: {os.getloadavg()}")

if __name__ == "__main__":
    main()
