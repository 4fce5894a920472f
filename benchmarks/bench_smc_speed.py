"""SMC at its defaults: fit time, the evidence error on an exact linear model, and the cache blocking.

Thirteen measurements, one thread throughout (the first three by default):

1. ``SMCRegressor()`` (every default: 200 particles, hyperpriors on the
   precisions and the noise) in ``Pipeline([StandardScaler(), ...])`` on 300
   training rows x 8 features of a smooth non-linear function with unit noise,
   with standard and with waste-free moves (``waste_free``); wall seconds,
   stages and test log-likelihood per seed (1000 test rows), beside
   ``BayesianRidge``. Target of issue 18: within 60 s.
2. The log evidence of a linear model (``hidden_layer_sizes=()``, a fixed
   ``N(0, 1)`` prior and the true noise, the 50 x 2 table of
   tests/test_smc.py) at 500 particles against the closed form ``log N(y; 0,
   s^2 I + X X^T)``, over 5 seeds, with the engine settings of that test and
   with the estimator's defaults, each with standard and waste-free moves:
   the errors, their mean, standard deviation and root mean square. Target:
   every error within 0.2 nats.
3. One batched log-likelihood gradient of 200 particles of the default
   network, rows in cache-sized blocks (:data:`CPU_BLOCK_BYTES`) against
   all rows at once, side by side (median of 7 alternating pairs), on 300
   and on 927 points (a UCI concrete training split).
4. ``--only protein``: what an SMC fit on UCI protein would take at least.
   ``SMCRegressor()`` on concrete's split 0 (927 x 8, 50 hidden units),
   counting the particle gradients its moves take (rows of the batched
   log-likelihood gradients); then one batched gradient of 200 particles on
   protein's split 0 (41,157 x 9, 100 hidden units, its protocol's) and on
   concrete's, exact and in float32 (the moves' kicks), alternating (median of
   5 rounds); the projection takes the float32 one. A protein fit takes at
   least concrete's count of particle gradients at protein's time each: its
   posterior, on 44 times the rows, is narrower, and tempering to it takes
   more stages, not fewer. Issue 20 asks for 15 minutes.

5. ``--only compile``: what ``compile`` buys. One batched log-likelihood
   gradient of 200 particles on a concrete-sized table (927 x 8, the default
   network), eager and through ``torch.compile`` (the first call's seconds,
   then the median of 7 alternating pairs), beside the cost model's saving
   (:func:`sklearn_quinn._core.compiling.saved_seconds`) that
   ``compile='auto'`` weighs against a compilation. Then ``SMCRegressor()``
   on UCI concrete (``--splits``, 0 by default) with ``compile=False`` and
   with the default ``'auto'``, each split's two fits side by side in two
   fresh processes of one thread each, the compiling one with an empty
   compiler cache: wall seconds, stages, test log-likelihood and coverage.
   Target of issue 18: a concrete split within 2 minutes.
6. ``--only kicks``: what the float32 kicks buy (``leapfrog_dtype``: the HMC
   moves' gradient in float32, their accept steps and the evidence in float64):
   ``SMCRegressor()`` on UCI concrete (``--splits``) with
   ``leapfrog_dtype='float64'`` and with the default ``'float32'``, side by
   side as ``--only compile`` runs its two: wall and CPU seconds, stages,
   particle gradients, test log-likelihood and coverage.
7. ``--only stops``: what stopping diverged trajectories saves (a move's
   trajectory stops where its estimated energy has risen 1000 nats above its
   start's, :func:`sklearn_quinn.mcmc._kernels.leapfrog`): ``SMCRegressor()``
   on UCI concrete (``--splits``) with every trajectory run to its length (the
   densities' ``select`` taken away, so that no row can leave the batch) and
   with the default stops, side by side as ``--only compile`` runs its two,
   both with ``compile=False`` (``'auto'`` decides on the gradients counted,
   which the stops change). The two fits reject the same trajectories, but
   once rows have stopped the others take their gradients in other batches,
   whose float32 rounding differs, and the two runs of the sampler part from
   there: their stages and test log-likelihoods differ as two seeds' do, and
   the particle gradients and seconds are what the stops save.
8. ``--only retry``: what retrying the diverged trajectories buys (delayed
   rejection on steps half the size, :func:`sklearn_quinn.mcmc._kernels.retry_diverged`):
   ``SMCRegressor()`` on UCI concrete (``--splits``) without the retry and
   with it (the default), side by side as ``--only compile`` runs its two:
   seconds, stages, particle gradients, log evidence, test log-likelihood and
   coverage.
9. ``--only mass``: what the data's curvature in the moves' diagonal mass buys
   (:func:`sklearn_quinn.smc._tuning.inverse_mass`): ``SMCRegressor()`` on UCI
   concrete (``--splits``) with the inverse mass the particles' variance
   alone and with the default, side by side as ``--only compile`` runs its
   two: the same columns as ``--only retry``.
10. ``--only length``: what the moves' trajectory lengths buy. The tuning
    draws each particle's ``L`` within one step of a parent particle's, so
    the lengths stay near where the initial ``U{1, ..., n_leapfrog}`` and the
    first stages' selection among them left them:
    ``SMCRegressor()`` on UCI concrete (``--splits``) with ``n_leapfrog=25``
    and with the default 50, side by side as ``--only compile`` runs its two:
    the same columns as ``--only retry``.
11. ``--only malloc``: what pinning glibc's malloc thresholds buys
    (:mod:`sklearn_quinn._core.allocator`): ``SMCRegressor()`` on UCI concrete
    (``--splits``) under glibc's own dynamic thresholds and pinned (the
    default), side by side as ``--only compile`` runs its two. The allocator
    does not touch the numbers: the particles' SHA-1 shows both fits the same
    to the last bit.
12. ``--only blocks``: what sizing the blocks of weight rows in bytes buys
    (:data:`~sklearn_quinn._core.network.CPU_BLOCK_BYTES`): the float32 kicks'
    blocks with as many rows as a float64 block's and with twice as many (the
    default), side by side as ``--only compile`` runs its two. A block's rows
    round their gradients as another batch size does, so the two fits part as
    ``--only stops`` describes; and ``compile='auto'`` counts the blocks, so
    the default compiles a few stages later.
13. ``--only tempering``: what finer tempering steps with fewer moves each
    buy: ``target_ess=0.8, n_mcmc_steps=3`` (twice the stages at about the
    defaults' particle gradients) against the defaults, on the exact linear
    model's evidence (``--evidence-seeds``), on the 300 x 8 table
    (``--seeds``) and on UCI concrete (``--splits``, side by side as
    ``--only compile`` runs its two).

    python benchmarks/bench_smc_speed.py [--seeds 3] [--evidence-seeds 5] [--threads 1] [--only evidence ...]
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import torch
from defaults_options import pin_threads
from records import side_by_side
from scipy.stats import multivariate_normal, norm
from sklearn.linear_model import BayesianRidge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from timing import median_seconds
from uci_protocol import DEFAULT_DATA_DIR

from sklearn_quinn import SMCRegressor
from sklearn_quinn._cli.benchmark import n_hidden
from sklearn_quinn._core import allocator, network
from sklearn_quinn._core.compiling import saved_seconds
from sklearn_quinn._core.likelihoods import GaussianStateLikelihood, RowBlockLikelihood
from sklearn_quinn._core.log_posterior import LogPosterior
from sklearn_quinn._core.network import FunctionalModel, build_mlp
from sklearn_quinn.datasets import load_uci_split
from sklearn_quinn.mcmc._gibbs import ConditionalDensity
from sklearn_quinn.smc import _engine as smc_engine
from sklearn_quinn.smc._tuning import particle_variance

SPEED_TARGET_SECONDS = 60
EVIDENCE_TARGET_NATS = 0.2
# The engine settings of tests/test_smc.py's exact linear test, and the estimator's defaults.
EXACT_TEST_SETTINGS = dict(target_ess=0.8, n_mcmc_steps=5, step_size=0.5, n_leapfrog=10)
EVIDENCE_SETTINGS = {
    "the exact test's (target_ess=0.8, n_mcmc_steps=5, step_size=0.5, n_leapfrog=10)": EXACT_TEST_SETTINGS,
    "the exact test's, waste-free": dict(EXACT_TEST_SETTINGS, waste_free=True),
    "SMCRegressor's defaults, standard moves": dict(waste_free=False),
    "SMCRegressor's defaults, standard moves, exact kicks (leapfrog_dtype='float64')":
        dict(waste_free=False, leapfrog_dtype="float64"),
    "SMCRegressor's defaults, waste-free": dict(waste_free=True),
}


def nonlinear_table(seed, n_train=300, n_test=1000, n_features=8):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_train + n_test, n_features))
    coefficients = rng.normal(size=n_features)
    f = X @ coefficients + 2 * np.sin(X[:, 0]) + X[:, 1] * X[:, 2]
    y = f + rng.normal(size=len(f))
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def test_log_likelihood(estimator, X, y):
    mean, std = estimator.predict(X, return_std=True)
    return float(norm.logpdf(y, mean, std).mean())


#: The moves of measurement 1: the estimator's defaults, standard and waste-free.
SPEED_SETTINGS = {"standard": {}, "waste-free": dict(waste_free=True)}
#: Measurement 13: finer tempering steps with fewer moves each, against the defaults.
TEMPERING_SETTINGS = {"defaults (target_ess=0.5, n_mcmc_steps=5)": {},
                      "target_ess=0.8, n_mcmc_steps=3": dict(target_ess=0.8, n_mcmc_steps=3)}


def speed(seeds, settings=SPEED_SETTINGS):
    """``SMCRegressor`` at ``settings`` (name -> parameters set) on the 300 x 8 table of each seed."""
    print("| seed | setting | SMCRegressor() s | stages | test LL | BayesianRidge test LL |")
    print("|---|---|---|---|---|---|")
    seconds = {name: [] for name in settings}
    for seed in range(seeds):
        X, y, X_test, y_test = nonlinear_table(seed)
        ridge = make_pipeline(StandardScaler(), BayesianRidge()).fit(X, y)
        for name, params in settings.items():
            smc = make_pipeline(StandardScaler(), SMCRegressor(random_state=seed, **params))
            start = time.perf_counter()
            smc.fit(X, y)
            seconds[name].append(time.perf_counter() - start)
            print(f"| {seed} | {name} | {seconds[name][-1]:.1f} | "
                  f"{smc[-1].n_stages_} | {test_log_likelihood(smc, X_test, y_test):.3f} | "
                  f"{test_log_likelihood(ridge, X_test, y_test):.3f} |", flush=True)
    for name, times in seconds.items():
        median = float(np.median(times))
        verdict = "yes" if median <= SPEED_TARGET_SECONDS else "NO"
        print(f"\nMedian fit, {name}: {median:.1f} s on 300 x 8 (target <= {SPEED_TARGET_SECONDS} s): {verdict}")
    print()


def linear_evidence_table(noise_std=0.4):
    """The linear data of tests/test_smc.py (50 x 2) and the closed-form log evidence of a linear
    model on it under a unit-variance prior on the weights and the bias and the noise ``noise_std``."""
    rng = np.random.RandomState(0)
    X = rng.randn(50, 2)
    y = X @ [1.0, -0.5] + 0.3 + noise_std * rng.randn(50)
    design = np.c_[X, np.ones(len(X))]
    exact = multivariate_normal(np.zeros(len(y)), noise_std**2 * np.eye(len(y)) + design @ design.T).logpdf(y)
    return X, y, exact


def evidence(seeds, settings=EVIDENCE_SETTINGS, noise_std=0.4):
    """The log evidence of a linear model against its closed form, at 500 particles, at each of
    ``settings`` (name -> parameters set)."""
    X, y, exact = linear_evidence_table(noise_std)
    print(f"Linear model (50 x 2, fixed N(0, 1) prior and noise), exact log evidence {exact:.3f}; "
          f"SMC at 500 particles, {seeds} seeds:\n")
    print(f"| settings | errors (nats) | mean | sd | RMS | max abs error | at most {EVIDENCE_TARGET_NATS} | s a fit |")
    print("|---|---|---|---|---|---|---|---|")
    for name, params in settings.items():
        errors, seconds = [], []
        for seed in range(seeds):
            smc = SMCRegressor(hidden_layer_sizes=(), prior_std=1.0, noise_std=noise_std, normalize_y=False,
                               n_particles=500, random_state=seed, **params)
            start = time.perf_counter()
            smc.fit(X, y)
            seconds.append(time.perf_counter() - start)
            errors.append(smc.log_evidence_ - exact)
        worst = max(map(abs, errors))
        print(f"| {name} | {', '.join(f'{e:+.3f}' for e in errors)} | {np.mean(errors):+.3f} | "
              f"{np.std(errors, ddof=1):.3f} | {np.sqrt(np.mean(np.square(errors))):.3f} | {worst:.3f} | "
              f"{'yes' if worst <= EVIDENCE_TARGET_NATS else 'NO'} | {np.median(seconds):.1f} |")
    print()


def blocking(n_particles=200):
    print("| points | all rows at once (ms) | cache blocks (ms) | ratio |")
    print("|---|---|---|---|")
    generator = torch.Generator().manual_seed(0)
    for n_points in (300, 927):
        model = FunctionalModel(build_mlp(8, 1, (50,), linear_skip=True).double())
        X = torch.randn(n_points, 8, generator=generator, dtype=torch.float64)
        likelihood = GaussianStateLikelihood(model, X, torch.randn(n_points, 1, generator=generator,
                                                                   dtype=torch.float64))
        rows = 0.3 * torch.randn(n_particles, model.n_params + 1, generator=generator, dtype=torch.float64)
        blocked = network.CPU_BLOCK_BYTES
        pairs = []
        for _ in range(7):
            network.CPU_BLOCK_BYTES = 2**62
            whole = median_seconds(lambda: likelihood.value_and_grad(rows), repeats=3)
            network.CPU_BLOCK_BYTES = blocked
            pairs.append((whole, median_seconds(lambda: likelihood.value_and_grad(rows), repeats=3)))
        whole, by_blocks = np.median(pairs, axis=0)
        print(f"| {n_points} | {1e3 * whole:.1f} | {1e3 * by_blocks:.1f} | {by_blocks / whole:.2f} |")


def fit_counting_gradients(estimator, X, y):
    """Fit ``estimator`` (an SMC pipeline); its wall seconds and the particle gradients
    (rows of the batched log-likelihood gradients, exact or the kicks' float32 ones) that its
    likelihood counted."""
    used = []
    count_gradient = RowBlockLikelihood._count_gradient

    def keeping(self, rows):
        used[:] = [self]
        return count_gradient(self, rows)

    RowBlockLikelihood._count_gradient = keeping
    start = time.perf_counter()
    try:
        estimator.fit(X, y)
    finally:
        RowBlockLikelihood._count_gradient = count_gradient
    return time.perf_counter() - start, used[0].n_gradient_rows


def protein_projection(data_dir, n_particles=200):
    training = {name: load_uci_split(data_dir, name, 0)[::2] for name in ("concrete", "protein")}  # X, y
    X, y = training["concrete"]
    smc = make_pipeline(StandardScaler(), SMCRegressor(random_state=0))
    seconds, n_gradients = fit_counting_gradients(smc, X, y)
    print(f"SMCRegressor() on concrete split 0: {seconds:.0f} s, {smc[-1].n_stages_} stages, "
          f"{n_gradients:,} particle gradients ({n_gradients / n_particles:,.0f} of all {n_particles})\n")
    generator = torch.Generator().manual_seed(0)
    likelihoods = {}
    for name, (X, _) in training.items():
        X = torch.as_tensor(StandardScaler().fit_transform(X))
        model = FunctionalModel(build_mlp(X.shape[1], 1, (n_hidden(data_dir, name),), linear_skip=True).double())
        Y = torch.randn(len(X), 1, generator=generator, dtype=torch.float64)
        rows = 0.3 * torch.randn(n_particles, model.n_params + 1, generator=generator, dtype=torch.float64)
        likelihood = GaussianStateLikelihood(model, X, Y)
        likelihood.set_surrogate_dtype(torch.float32)  # the moves' kicks at the default leapfrog_dtype
        likelihoods[name] = (likelihood, rows)

    def one_round():
        """Each table's exact gradient and its kicks' float32 one, in seconds."""
        return [[median_seconds(lambda: likelihood.value_and_grad(rows), repeats=1),
                 median_seconds(lambda: likelihood.surrogate.value_and_grad(rows), repeats=1)]
                for likelihood, rows in likelihoods.values()]

    seconds_each = np.median([one_round() for _ in range(5)], axis=0)
    print(f"| table | one gradient of {n_particles} particles (s), float64 | float32 (the kicks') |")
    print("|---|---|---|")
    for name, (exact, kicks) in zip(likelihoods, seconds_each):
        print(f"| {name} | {exact:.3f} | {kicks:.3f} |")
    projected = n_gradients / n_particles * seconds_each[1, 1]
    print(f"\nAn SMC fit on protein takes at least {n_gradients / n_particles:,.0f} x {seconds_each[1, 1]:.3f} s = "
          f"{projected:,.0f} s ({projected / 60:,.0f} minutes; target 15)\n")


def compile_gain(data_dir, splits, n_particles=200, n_points=927):
    generator = torch.Generator().manual_seed(0)
    model = FunctionalModel(build_mlp(8, 1, (50,), linear_skip=True).double())
    X = torch.randn(n_points, 8, generator=generator, dtype=torch.float64)
    Y = torch.randn(n_points, 1, generator=generator, dtype=torch.float64)
    eager, compiled = (GaussianStateLikelihood(model, X, Y) for _ in range(2))
    rows = 0.3 * torch.randn(n_particles, model.n_params + 1, generator=generator, dtype=torch.float64)
    compiled.compile_gradient()
    start = time.perf_counter()
    compiled.value_and_grad(rows)
    first = time.perf_counter() - start
    pairs = np.median([(median_seconds(lambda: eager.value_and_grad(rows), repeats=3),
                        median_seconds(lambda: compiled.value_and_grad(rows), repeats=3)) for _ in range(7)], axis=0)
    blocks = -(-n_particles // model.row_block_size(n_points, torch.float64))
    modelled = saved_seconds(blocks, n_particles * n_points * model.total_width)
    print(f"One gradient of {n_particles} particles on {n_points} x 8 points: first compiled call {first:.1f} s; "
          f"eager {1e3 * pairs[0]:.1f} ms, compiled {1e3 * pairs[1]:.1f} ms (ratio {pairs[1] / pairs[0]:.2f}); "
          f"saved {1e3 * (pairs[0] - pairs[1]):.1f} ms, the cost model's saving {1e3 * modelled:.1f} ms\n")
    concrete_side_by_side(data_dir, splits, {"compile=False": {"compile": False}, "compile='auto'": {}})


def concrete_side_by_side(data_dir, splits, settings):
    """``SMCRegressor()`` on concrete ``splits`` at each of ``settings`` (name -> parameters set),
    each split's fits side by side in fresh processes of the threads asked for, each with an
    empty compiler cache: a table row per fit."""
    print("| split | setting | seconds | CPU seconds | stages | particle gradients | us each | compiled "
          "| log evidence | test log-likelihood | 95% coverage | particles' SHA-1 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for split in splits:
        records = side_by_side(
            {name: [sys.executable, __file__, "--fit-concrete", str(split), json.dumps(params),
                    "--data-dir", str(data_dir), "--threads", str(torch.get_num_threads())]
             for name, params in settings.items()})
        for name, record in records.items():
            each = 1e6 * record["seconds"] / record["particle_gradients"]
            print(f"| {split} | {name} | {record['seconds']:.0f} | {record['cpu_seconds']:.0f} | "
                  f"{record['stages']} | {record['particle_gradients']:,} | {each:.0f} | {record['compiled']} | "
                  f"{record['log_evidence']:.1f} | {record['log_likelihood']:.3f} | {record['coverage']:.3f} | "
                  f"{record['particles_sha1'][:12]} |",
                  flush=True)


def kicks_gain(data_dir, splits):
    """What the float32 kicks buy: ``leapfrog_dtype='float64'`` against the default, side by side."""
    concrete_side_by_side(data_dir, splits, {"leapfrog_dtype='float64'": {"leapfrog_dtype": "float64"},
                                             "leapfrog_dtype='float32'": {}})


def stops_gain(data_dir, splits):
    """What stopping diverged trajectories saves: every trajectory run to its length against the default."""
    concrete_side_by_side(data_dir, splits, {"full trajectories": {"full_trajectories": True, "compile": False},
                                             "diverged ones stopped": {"compile": False}})


def retry_gain(data_dir, splits):
    """What retrying the diverged trajectories buys: the moves without the retry against the default."""
    concrete_side_by_side(data_dir, splits, {"no retry": {"no_retry": True}, "diverged ones retried": {}})


def mass_gain(data_dir, splits):
    """What the data's curvature in the moves' mass buys: the particles' variance alone against the default."""
    concrete_side_by_side(data_dir, splits, {"the particles' variance": {"variance_mass": True},
                                             "with the data's curvature": {}})


def length_gain(data_dir, splits):
    """What the trajectories' length buys: initial lengths up to 25 steps against the default 50."""
    concrete_side_by_side(data_dir, splits, {"n_leapfrog=25": {"n_leapfrog": 25}, "n_leapfrog=50": {}})


def malloc_gain(data_dir, splits):
    """What pinning glibc's malloc thresholds buys (:mod:`sklearn_quinn._core.allocator`): glibc's own
    dynamic thresholds against the default, side by side. The fits are the same to the last bit."""
    concrete_side_by_side(data_dir, splits, {"glibc's own thresholds": {"glibc_thresholds": True},
                                             "thresholds pinned": {}})


def tempering_cost(data_dir, seeds, evidence_seeds, splits):
    """What finer tempering steps with fewer moves each buy (``target_ess=0.8, n_mcmc_steps=3``, about
    as many particle gradients as the defaults): the exact linear evidence, the 300 x 8 fits and
    concrete's ``splits``, each beside the defaults."""
    evidence(evidence_seeds, TEMPERING_SETTINGS)
    speed(seeds, TEMPERING_SETTINGS)
    concrete_side_by_side(data_dir, splits, TEMPERING_SETTINGS)


def blocks_gain(data_dir, splits):
    """What blocks of bytes rather than elements buy (:data:`~sklearn_quinn._core.network.CPU_BLOCK_BYTES`):
    the float32 kicks in blocks of as many rows as float64 against the default, twice the rows."""
    concrete_side_by_side(data_dir, splits, {"float32 blocks of float64's rows": {"float64_rows": True},
                                             "blocks of 2 MiB": {}})


def fit_concrete(data_dir, split, params):
    """One SMCRegressor() fit on a concrete split with ``params`` set, in this (fresh) process: a JSON line.
    ``full_trajectories`` (not a parameter) takes the densities' ``select`` away: no trajectory stops;
    ``no_retry`` (not a parameter) leaves the diverged trajectories rejected, not retried;
    ``variance_mass`` (not a parameter) takes the moves' inverse mass from the particles' variance alone;
    ``glibc_thresholds`` (not a parameter) leaves glibc's malloc thresholds to glibc;
    ``float64_rows`` (not a parameter) sizes every block of rows as a float64 one."""
    if params.pop("glibc_thresholds", False):
        os.environ[allocator.PIN_MALLOC_VARIABLE] = "0"
    # A compiler cache of this fit's own, empty: the inductor reads the variable when it compiles.
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp()
    if params.pop("float64_rows", False):
        row_block_size = FunctionalModel.row_block_size
        FunctionalModel.row_block_size = lambda self, n_points, dtype: row_block_size(self, n_points, torch.float64)
    if params.pop("full_trajectories", False):
        ConditionalDensity.select = LogPosterior.select = None
    if params.pop("no_retry", False):
        smc_engine.RETRY_FACTOR = None
    if params.pop("variance_mass", False):
        smc_engine.inverse_mass = lambda likelihood, particles, log_weights, *_: particle_variance(particles,
                                                                                                    log_weights)
    X_train, X_test, y_train, y_test = load_uci_split(data_dir, "concrete", split)
    smc = make_pipeline(StandardScaler(), SMCRegressor(random_state=split, **params))
    cpu_start = time.process_time()
    seconds, particle_gradients = fit_counting_gradients(smc, X_train, y_train)
    mean, std = smc.predict(X_test, return_std=True)
    shutil.rmtree(os.environ["TORCHINDUCTOR_CACHE_DIR"])
    print(json.dumps(dict(seconds=seconds, cpu_seconds=time.process_time() - cpu_start, stages=smc[-1].n_stages_,
                          log_evidence=float(smc[-1].log_evidence_),
                          compiled=bool(smc[-1].compiled_), particle_gradients=particle_gradients,
                          particles_sha1=hashlib.sha1(smc[-1].particles_.tobytes()).hexdigest(),
                          log_likelihood=float(norm.logpdf(y_test, mean, std).mean()),
                          coverage=float(np.mean(np.abs(y_test - mean) <= norm.ppf(0.975) * std)))))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--evidence-seeds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", nargs="+",
                        choices=["blocking", "evidence", "speed", "protein", "compile", "kicks", "stops", "retry",
                                 "mass", "length", "malloc", "blocks", "tempering"],
                        default=["blocking", "evidence", "speed"], help="the measurements to run")
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR,
                        help="the UCI sets (for --only protein and the side-by-side fits)")
    parser.add_argument("--splits", type=int, nargs="+", default=[0],
                        help="the concrete splits of the side-by-side fits (compile, kicks, stops, retry, mass, "
                             "length, malloc, blocks, tempering)")
    parser.add_argument("--fit-concrete", nargs=2, metavar=("SPLIT", "PARAMS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    pin_threads(args.threads)
    if args.fit_concrete:
        return fit_concrete(args.data_dir, int(args.fit_concrete[0]), json.loads(args.fit_concrete[1]))
    if "blocking" in args.only:
        blocking()
        print()
    if "evidence" in args.only:
        evidence(args.evidence_seeds)
    if "speed" in args.only:
        speed(args.seeds)
    if "protein" in args.only:
        protein_projection(args.data_dir)
    if "compile" in args.only:
        compile_gain(args.data_dir, args.splits)
    if "kicks" in args.only:
        kicks_gain(args.data_dir, args.splits)
    if "stops" in args.only:
        stops_gain(args.data_dir, args.splits)
    if "retry" in args.only:
        retry_gain(args.data_dir, args.splits)
    if "mass" in args.only:
        mass_gain(args.data_dir, args.splits)
    if "length" in args.only:
        length_gain(args.data_dir, args.splits)
    if "malloc" in args.only:
        malloc_gain(args.data_dir, args.splits)
    if "blocks" in args.only:
        blocks_gain(args.data_dir, args.splits)
    if "tempering" in args.only:
        tempering_cost(args.data_dir, args.seeds, args.evidence_seeds, args.splits)


if __name__ == "__main__":
    main()
