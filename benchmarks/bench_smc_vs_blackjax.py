"""SMC against BlackJAX's adaptive tempered SMC: the log evidence, its error and the time a run.

``--only linear`` (part of the default): the problem of ``bench_smc_speed.py
--only evidence`` and tests/test_smc.py, 50 rows x 2 features, ``y = X [1,
-0.5] + 0.3 + 0.4 eps``, a linear model with a fixed N(0, 1) prior on the
weights and the bias and the true noise std 0.4, whose log evidence has the
closed form ``log N(y; 0, 0.4^2 I + X X^T)`` (``X`` with a column of ones).
500 particles from the prior, over ``--seeds`` seeds:

* ours: ``SMCRegressor(hidden_layer_sizes=(), prior_std=1.0, noise_std=0.4,
  normalize_y=False, n_particles=500)`` at the engine settings of the exact
  test (``target_ess=0.8``, 5 HMC moves a stage of at most 10 leapfrog steps,
  initial steps up to 0.5, each particle's step size and length then tuned by
  the engine, a diagonal mass from the particles' variance);
* BlackJAX: ``blackjax.inner_kernel_tuning`` around
  ``blackjax.adaptive_tempered_smc`` (the same ``target_ess``, systematic
  resampling, 5 HMC moves a stage of 10 leapfrog steps of size 0.5), the
  HMC's diagonal inverse mass set after every stage to the particles'
  variance (``blackjax.smc.tuning.from_particles``), as its SMC tuning
  examples do; a whole run is one ``jax.jit``-compiled ``lax.while_loop``,
  compiled once (timed apart) and called with each seed's key. The log
  evidence is the sum of the stages' ``log_likelihood_increment``.

``--only iris`` (the other part): the model selection of
``bench_smc_iris.py``, its split (80:20, ``random_state=0``, stratified) with
the inputs standardised, its 10 architectures as the package builds them (the
MLP and a linear skip path from the inputs to the logits), a logistic prior of
scale 1 on every weight, 200 particles, ``target_ess=0.5``, 5 HMC moves a
stage: ours ``SMCClassifier(prior='logistic', ...)`` as there, BlackJAX as
above (its softmax likelihood and logistic prior written in JAX, particles
drawn from the prior). There is no exact answer: the two should agree within
their spread, and rank the architectures alike.

Both in float64 on one thread (``torch.set_num_threads(1)``; XLA's flags for
one thread and the process pinned to one core, as in
``bench_mcmc_vs_numpyro.py``). Prints each side's log evidence (or error)
per seed, their mean and spread, the stages, and the median seconds a run
(BlackJAX's without its compilation); issue 18's target: every error of ours
on the linear model within 0.2 nats.

Needs ``jax`` and ``blackjax`` (the benchmark environment, benchmarks/README.md).

    .venv-bench/bin/python benchmarks/bench_smc_vs_blackjax.py [--seeds 5] [--cpu 0] [--only linear iris] \\
        [--iris-step 0.5] [--iris-leapfrog 10]
"""

import argparse
import math
import os
import statistics
import time

import numpy as np
from bench_smc_iris import ARCHITECTURES, LOGISTIC_SCALE_ONE, iris_split
from bench_smc_speed import EVIDENCE_TARGET_NATS, EXACT_TEST_SETTINGS, linear_evidence_table

NOISE_STD = 0.4
MOVES = {name: EXACT_TEST_SETTINGS[name] for name in ("n_mcmc_steps", "step_size", "n_leapfrog")}
LINEAR = dict(n_particles=500, target_ess=EXACT_TEST_SETTINGS["target_ess"])
IRIS = dict(n_particles=200, target_ess=0.5)


def iris_table():
    from sklearn.preprocessing import StandardScaler

    X_train, _, y_train, _ = iris_split()
    return StandardScaler().fit_transform(X_train), y_train


def linear_model(X, y):
    """``(log prior, log likelihood, draw from the prior, number of weights)`` in JAX."""
    import jax
    import jax.numpy as jnp

    design, targets = jnp.asarray(np.c_[X, np.ones(len(X))]), jnp.asarray(y)

    def log_prior(theta):
        return jax.scipy.stats.norm.logpdf(theta).sum()

    def log_likelihood(theta):
        return jax.scipy.stats.norm.logpdf(targets, design @ theta, NOISE_STD).sum()

    def draw(key, shape):
        return jax.random.normal(key, shape, dtype=jnp.float64)

    return log_prior, log_likelihood, draw, design.shape[1]


def network_model(X, y, sizes, activation):
    """The package's default classifier network (an MLP plus a linear map of the inputs to the
    logits, without a bias) with a softmax likelihood and a logistic prior of scale 1, in JAX."""
    import jax
    import jax.numpy as jnp

    inputs, labels = jnp.asarray(X), jnp.asarray(y)
    widths = (X.shape[1], *sizes, int(y.max()) + 1)
    shapes = [shape for fan_in, fan_out in zip(widths[:-1], widths[1:]) for shape in ((fan_out, fan_in), (fan_out,))]
    shapes.append((widths[-1], widths[0]))  # the skip path
    sizes_flat = [math.prod(shape) for shape in shapes]
    nonlinearity = jax.nn.relu if activation == "relu" else jax.nn.sigmoid

    def logits(theta):
        tensors, start = [], 0
        for shape, size in zip(shapes, sizes_flat):
            tensors.append(theta[start:start + size].reshape(shape))
            start += size
        hidden = inputs
        layers = list(zip(tensors[:-1:2], tensors[1:-1:2]))
        for index, (weight, bias) in enumerate(layers):
            hidden = hidden @ weight.T + bias
            if index < len(layers) - 1:
                hidden = nonlinearity(hidden)
        return hidden + inputs @ tensors[-1].T

    def log_prior(theta):
        return (jax.nn.log_sigmoid(theta) + jax.nn.log_sigmoid(-theta)).sum()

    def log_likelihood(theta):
        return jnp.take_along_axis(jax.nn.log_softmax(logits(theta)), labels[:, None], axis=1).sum()

    def draw(key, shape):
        return jax.random.logistic(key, shape, dtype=jnp.float64)

    return log_prior, log_likelihood, draw, sum(sizes_flat)


def blackjax_runner(log_prior, log_likelihood, draw, n_params, n_particles, target_ess, step_size=MOVES["step_size"],
                    n_leapfrog=MOVES["n_leapfrog"]):
    """A compiled function ``key -> (log evidence, stages)`` (the module's docstring says which
    SMC; HMC moves of ``n_leapfrog`` steps of ``step_size``) and its compilation's seconds."""
    import blackjax
    import jax
    import jax.numpy as jnp
    from blackjax.smc import extend_params
    from blackjax.smc.resampling import systematic
    from blackjax.smc.tuning.from_particles import particles_stds

    def parameters(inverse_mass):
        return extend_params({"step_size": step_size, "inverse_mass_matrix": inverse_mass,
                              "num_integration_steps": n_leapfrog})

    algorithm = blackjax.inner_kernel_tuning(
        smc_algorithm=blackjax.adaptive_tempered_smc,
        logprior_fn=log_prior,
        loglikelihood_fn=log_likelihood,
        mcmc_step_fn=blackjax.hmc.build_kernel(),
        mcmc_init_fn=blackjax.hmc.init,
        resampling_fn=systematic,
        mcmc_parameter_update_fn=lambda key, state, info: parameters(particles_stds(state.particles) ** 2),
        initial_parameter_value=parameters(jnp.ones(n_params)),
        num_mcmc_steps=MOVES["n_mcmc_steps"],
        target_ess=target_ess,
    )

    def run(key):
        init_key, key = jax.random.split(key)
        state = algorithm.init(draw(init_key, (n_particles, n_params)))

        def unfinished(carry):
            return carry[1].sampler_state.tempering_param < 1

        def stage(carry):
            key, state, log_evidence, n_stages = carry
            key, step_key = jax.random.split(key)
            state, info = algorithm.step(step_key, state)
            return key, state, log_evidence + info.log_likelihood_increment, n_stages + 1

        carry = jax.lax.while_loop(unfinished, stage, (key, state, jnp.zeros((), jnp.float64), 0))
        return carry[2], carry[3]

    start = time.perf_counter()
    compiled = jax.jit(run).lower(jax.random.key(0)).compile()
    return compiled, time.perf_counter() - start


def timed_blackjax(compiled, seed):
    import jax

    start = time.perf_counter()
    log_evidence, stages = compiled(jax.random.key(seed))
    log_evidence = float(log_evidence)  # waits for the result
    return log_evidence, int(stages), time.perf_counter() - start


def timed_fit(estimator, X, y):
    start = time.perf_counter()
    estimator.fit(X, y)
    return estimator.log_evidence_, estimator.n_stages_, time.perf_counter() - start


def compare_linear(seeds):
    from sklearn_quinn import SMCRegressor

    X, y, exact = linear_evidence_table(NOISE_STD)
    compiled, compile_seconds = blackjax_runner(*linear_model(X, y), **LINEAR)
    print(f"Linear model (50 x 2, N(0, 1) prior, noise std 0.4), exact log evidence {exact:.3f}; "
          f"{LINEAR['n_particles']} particles, target_ess {LINEAR['target_ess']}, {seeds} seeds; "
          f"BlackJAX compiled in {compile_seconds:.1f} s\n")
    print("| seed | ours: error (nats), stages, s | BlackJAX: error (nats), stages, s |")
    print("|---|---|---|")
    errors, seconds = {"ours": [], "BlackJAX": []}, {"ours": [], "BlackJAX": []}
    for seed in range(seeds):
        ours = timed_fit(SMCRegressor(hidden_layer_sizes=(), prior_std=1.0, noise_std=NOISE_STD, normalize_y=False,
                                      random_state=seed, **LINEAR, **MOVES), X, y)
        theirs = timed_blackjax(compiled, seed)
        for side, (log_evidence, _, fit_seconds) in (("ours", ours), ("BlackJAX", theirs)):
            errors[side].append(log_evidence - exact)
            seconds[side].append(fit_seconds)
        print(f"| {seed} | {ours[0] - exact:+.3f}, {ours[1]}, {ours[2]:.2f} | "
              f"{theirs[0] - exact:+.3f}, {theirs[1]}, {theirs[2]:.2f} |", flush=True)
    print()
    for side, side_errors in errors.items():
        side_errors = np.asarray(side_errors)
        print(f"{side}: errors mean {side_errors.mean():+.3f}, sd {side_errors.std(ddof=1):.3f}, RMS "
              f"{np.sqrt(np.mean(side_errors**2)):.3f}, largest {np.abs(side_errors).max():.3f}; median "
              f"{statistics.median(seconds[side]):.2f} s a run")
    worst = np.abs(errors["ours"]).max()
    verdict = "yes" if worst <= EVIDENCE_TARGET_NATS else "NO"
    print(f"ours: every error within {EVIDENCE_TARGET_NATS} nats (issue 18): {verdict}")
    print(f"RATIO median seconds ours / BlackJAX (without its compilation): "
          f"{statistics.median(seconds['ours']) / statistics.median(seconds['BlackJAX']):.2f}\n")


def compare_iris(seeds, step_size, n_leapfrog):
    from sklearn_quinn import SMCClassifier

    X, y = iris_table()
    print(f"Iris ({len(X)} training rows, inputs standardised), logistic prior of scale 1, "
          f"{IRIS['n_particles']} particles, target_ess {IRIS['target_ess']}, {seeds} seeds; BlackJAX's HMC "
          f"moves {n_leapfrog} steps of {step_size}\n")
    print("| architecture | weights | ours: log evidence, stages | BlackJAX: log evidence, stages | "
          "BlackJAX compile s |")
    print("|---|---|---|---|---|")
    means, seconds = {"ours": [], "BlackJAX": []}, {"ours": [], "BlackJAX": []}
    for sizes, activation in ARCHITECTURES:
        log_prior, log_likelihood, draw, n_params = network_model(X, y, sizes, activation)
        compiled, compile_seconds = blackjax_runner(log_prior, log_likelihood, draw, n_params, **IRIS,
                                                    step_size=step_size, n_leapfrog=n_leapfrog)
        runs = {"ours": [], "BlackJAX": []}
        for seed in range(seeds):
            runs["ours"].append(timed_fit(SMCClassifier(
                hidden_layer_sizes=sizes, activation=activation, prior="logistic", prior_std=LOGISTIC_SCALE_ONE,
                random_state=seed, n_particles=IRIS["n_particles"], target_ess=IRIS["target_ess"],
                n_mcmc_steps=MOVES["n_mcmc_steps"]), X, y))
            runs["BlackJAX"].append(timed_blackjax(compiled, seed))
        cells = []
        for side, side_runs in runs.items():
            evidence = np.array([run[0] for run in side_runs])
            means[side].append(evidence.mean())
            seconds[side].extend(run[2] for run in side_runs)
            spread = evidence.std(ddof=1) if seeds > 1 else float("nan")
            cells.append(f"{evidence.mean():.2f} ± {spread:.2f}, {np.mean([run[1] for run in side_runs]):.1f}")
        print(f"| {sizes} {activation} | {n_params} | {cells[0]} | {cells[1]} | {compile_seconds:.1f} |", flush=True)
    ranks = {side: np.argsort(np.argsort(-np.asarray(values))) for side, values in means.items()}
    agree = np.corrcoef(ranks["ours"], ranks["BlackJAX"])[0, 1]
    best = {side: ARCHITECTURES[int(np.argmax(values))] for side, values in means.items()}
    print(f"\nrank correlation of the mean log evidences (Spearman): {agree:.2f}; best architecture: ours "
          f"{best['ours']}, BlackJAX {best['BlackJAX']}")
    for side, side_seconds in seconds.items():
        print(f"{side}: median {statistics.median(side_seconds):.2f} s a run")
    print(f"RATIO median seconds ours / BlackJAX (without its compilations): "
          f"{statistics.median(seconds['ours']) / statistics.median(seconds['BlackJAX']):.2f}\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--cpu", type=int, default=0, help="pin the process to this core (-1: no pinning)")
    parser.add_argument("--only", nargs="+", choices=["linear", "iris"], default=["linear", "iris"])
    parser.add_argument("--iris-step", type=float, default=MOVES["step_size"],
                        help="BlackJAX's HMC step size on iris (in the particles' standard deviations)")
    parser.add_argument("--iris-leapfrog", type=int, default=MOVES["n_leapfrog"],
                        help="BlackJAX's leapfrog steps a move on iris")
    args = parser.parse_args()
    if args.cpu >= 0:
        os.sched_setaffinity(0, {args.cpu})
    os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    os.environ["OMP_NUM_THREADS"] = "1"
    import jax
    import torch

    jax.config.update("jax_enable_x64", True)
    torch.set_num_threads(1)
    if "linear" in args.only:
        compare_linear(args.seeds)
    if "iris" in args.only:
        compare_iris(args.seeds, args.iris_step, args.iris_leapfrog)


if __name__ == "__main__":
    main()
