"""MCMCRegressor: posterior draws of the weights from batched chains."""

from functools import partial
from numbers import Integral, Real

import numpy as np
import torch
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.utils._param_validation import Interval, StrOptions

from .._core.compiling import compile_pays
from .._core.curvature import curvature
from .._core.evidence import ParameterGroups
from .._core.log_posterior import log_posterior
from .._core.posterior import SamplePosterior
from .._core.priors import GaussianPrior
from .._core.rng import standard_normal
from .._draws import DrawsMixin
from .._inference_data import InferenceDataMixin
from .._members import MemberTrainingMixin
from .._regressor_base import BaseBayesianRegressor
from .._warnings import warn
from ..base import DTYPES, MAP_TRAINING_CONSTRAINTS
from ._diagnostics import effective_sample_size, split_rhat
from ._hierarchical import (
    DEFAULT_HYPERPRIOR_RATE,
    DEFAULT_HYPERPRIOR_SHAPE,
    HYPERPRIOR_CONSTRAINTS,
    HyperpriorMixin,
)
from ._sampling import SAMPLERS, ChainResult, run_chains
from ._sgmcmc import SG_SAMPLERS, MinibatchLogPosterior, auto_step_size, check_cycles, run_sg_chains

#: ``step_size='auto'`` for the full-data samplers: the start of the step size's
#: adaptation (HMC, NUTS, MALA) or the random walk's std (adaptive Metropolis).
FULL_DATA_INITIAL_STEP = 0.01


class MCMCMixin(HyperpriorMixin, MemberTrainingMixin, InferenceDataMixin, DrawsMixin):
    """Batched chains from the log posterior: starts, joblib groups, diagnostics.

    Its ``_fit`` serves :class:`MCMCRegressor` and :class:`MCMCClassifier`; the
    task base supplies the likelihood, whose sampled parameters (a learned
    noise) are the last columns of the chains' state.
    """

    _mcmc_constraints: dict = {
        **MAP_TRAINING_CONSTRAINTS,
        **HYPERPRIOR_CONSTRAINTS,
        "sampler": [StrOptions({*SAMPLERS, *SG_SAMPLERS})],
        "n_cycles": [Interval(Integral, 1, None, closed="left")],
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "n_burnin": [Interval(Integral, 0, None, closed="left")],
        "thin": [Interval(Integral, 1, None, closed="left")],
        "n_chains": [Interval(Integral, 1, None, closed="left")],
        "step_size": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "n_leapfrog": [Interval(Integral, 1, None, closed="left")],
        "max_tree_depth": [Interval(Integral, 1, None, closed="left")],
        "target_acceptance": [None, Interval(Real, 0, 1, closed="neither")],
        "adapt_step_size": ["boolean"],
        "gamma": [Interval(Real, 0, None, closed="neither")],
        "adapt_start": [Interval(Integral, 0, None, closed="left")],
        "adapt_every": [Interval(Integral, 1, None, closed="left")],
        "init": [StrOptions({"ensemble", "map", "prior"})],
        "compile": ["boolean", StrOptions({"auto"})],
        "leapfrog_dtype": [StrOptions(set(DTYPES))],
        "n_jobs": [None, Integral],
    }

    @property
    def _fits_in_unit_scale(self):
        """No MAP and no hyperparameter where the chains start from a fixed prior with a fixed noise."""
        return not (self.init == "prior" and self._fixes_prior_and_noise)

    def _check_parameters(self):
        """n_jobs=0 (by the chain groups), more cycles than draws, minibatch samplers with sampled
        hyperparameters."""
        super()._check_parameters()
        self._chain_groups()
        if self.sampler in SG_SAMPLERS:
            check_cycles(self.n_cycles, self.n_samples)
        if self.sampler in SG_SAMPLERS and self._samples_hyperparameters:
            raise ValueError(
                f"sampler={self.sampler!r} moves the weights by minibatch gradients, but hyperprior='gamma' "
                "draws the prior precisions and the noise from full passes over the data at every step: use "
                "hyperprior='empirical' (the precisions and noise the MAP learns) or a float prior_std."
            )

    def _fit(self, X, Y):
        """Run the chains: the family's part of ``fit``."""
        prior = centres = None
        if self.init != "prior" or self._empirical_hyperparameters:
            theta, likelihood, prior, targets = self._fit_map(X, Y)
            if self.init != "prior":
                centres = self._chain_centres(X, Y, theta, likelihood, prior, targets)
        else:
            theta, likelihood = self._build_model(X, Y), self._likelihood(Y)
        X, Y = self._tensor(X), self._tensor(Y)
        n_params, gibbs, inverse_mass = self._model.n_params, None, None
        if self._samples_hyperparameters:
            log_density, gibbs = self._hierarchical_posterior(X, Y, likelihood)
            start = self._hierarchical_start(theta, centres, likelihood, prior, log_density.log_prior)
        else:
            if self._empirical_hyperparameters:
                likelihood = likelihood.frozen(Y.shape[1])  # the MAP's learned noise, fixed
            else:
                prior = GaussianPrior(self.prior_std)
            start = self._starting_points(theta, centres, prior)
            if likelihood.n_state_columns:
                start = torch.cat([start, likelihood.initial_state(self.n_chains)], dim=1)
            log_density = log_posterior(self._model, X, Y, likelihood, prior)
            if self.sampler in SG_SAMPLERS:
                log_density = MinibatchLogPosterior(likelihood.state_log_likelihood, self._model, X, Y,
                                                    log_density.log_prior, self._batch_size(len(X)))
                inverse_mass = self._preconditioner(start, X, Y, likelihood, prior)
        if self.sampler in ("hmc", "nuts"):  # the kernels that take a surrogate; no copy of the data for the others
            log_density.set_surrogate_dtype(DTYPES[self.leapfrog_dtype])
        rows = self._sample_chains(log_density, start, gibbs, inverse_mass, n_rows=len(X))
        n_likelihood = n_params + likelihood.n_state_columns
        self._keep_draws(rows[:, :n_params], likelihood.noise_from_state(rows[:, n_params:n_likelihood], Y.shape[1]))
        if gibbs is not None:
            self.prior_precision_samples_ = self._keep_precisions(gibbs.prior, rows)

    def _preconditioner(self, start, X, Y, likelihood, prior):
        """SG-MCMC's diagonal ``M^-1 (C, P)``: per chain, the inverse of the diagonal
        posterior precision at its start (the GGN's diagonal plus the prior
        precision; ``2 N O`` for a sampled log noise std, its Fisher information).

        A weight's GGN entry is raised to at least the mean of its parameter
        tensor's: the weights of a hidden unit that no training row activates
        at the start have no curvature, but they start to have a tensor's worth
        of it as soon as the chain moves the unit into the data, and a step
        scaled by the prior alone then throws the chain off to infinity.
        """
        n_params = self._model.n_params
        frozen = likelihood.frozen(Y.shape[1])
        groups = ParameterGroups.of(self._model).tied()
        sizes = groups.sizes.to(start)

        def floored_curvature(row):
            diagonal = curvature(self._model, row[:n_params], X, Y, frozen, "ggn", "diag")
            return torch.maximum(diagonal, groups.expand(groups.sums(diagonal) / sizes))

        precision = torch.stack([floored_curvature(row) for row in start]) + prior.precision
        if likelihood.n_state_columns:
            precision = torch.nn.functional.pad(precision, (0, likelihood.n_state_columns), value=2.0 * Y.numel())
        return precision.reciprocal()

    def _chain_centres(self, X, Y, theta, likelihood, prior, targets):
        """Where the chains start, before their jitter, ``(n_chains, K)``: the MAP ``theta`` for
        every chain (``init='map'``), or for the first chain, and for each other one a network
        trained beside it from its own initial weights under the MAP's learned prior and noise
        (``'ensemble'``)."""
        centres = theta.expand(self.n_chains, -1)
        if self.init != "ensemble":
            return centres
        # Chains started in one basin stay there: a network's posterior has many basins that
        # predict differently, and a chain crosses none of them in a run (Izmailov, Vikram, Hoffman
        # & Wilson 2021, "What are Bayesian neural network posteriors really like?"). Starting each
        # chain in a basin of its own mixes them, as MultiSWAG mixes its members' Gaussians.
        seeds = self._seed_table(self._map_seed, (self.n_chains - 1, 2))
        noise_std = likelihood.output_noise_std(Y.shape[1])
        others = self._train_members(X, Y, targets, prior, noise_std, seeds, "MCMC chain starts")
        return torch.cat([theta[None], others])

    def _starting_points(self, theta, centres, prior):
        """Chain starts ``(n_chains, K)``: the ``centres`` with a small jitter, or draws of
        ``prior`` (``init='prior'``, no centres)."""
        generator = self._generator(self._map_seed)
        n_params = theta.shape[0]
        if centres is not None:
            jitter = standard_normal(generator, theta, (self.n_chains, n_params))
            # A thousandth of the prior's std, at most a hundredth: a network's weights on standardised
            # data are of order one, and a flat prior's (prior_std=1e4) would start the chains 10 away.
            std = torch.as_tensor(prior.std, dtype=theta.dtype, device=theta.device)
            return centres + torch.clamp(1e-3 * std, max=1e-2) * jitter
        return prior.sample(self.n_chains, n_params, generator, theta.dtype, theta.device)

    def _hierarchical_start(self, theta, centres, likelihood, prior, hierarchical_prior):
        """Chain starts ``(n_chains, P)`` with hyperparameter columns: the ``centres`` (jittered)
        with the MAP's learned hyperparameters, or draws of the hierarchical prior."""
        if centres is None:
            generator = self._generator(self._map_seed)
            return hierarchical_prior.sample(self.n_chains, generator, theta.dtype, theta.device)
        weights = self._starting_points(theta, centres, prior)
        return torch.cat([weights, self._empirical_state(likelihood, self.n_chains)], dim=1)

    def _sample_chains(self, log_density, start, gibbs=None, inverse_mass=None, *, n_rows):
        """Run the chains from ``start`` in joblib groups (with the Gibbs updates
        ``gibbs`` of hyperparameter columns, if any; with SG-MCMC's
        preconditioner ``inverse_mass (C, P)``; over ``n_rows`` training rows,
        for ``compile='auto'``); set ``chains_`` and the diagnostics, and return
        every kept row ``(n_chains * n_samples, P)``."""
        groups = self._chain_groups()
        seeds = self._seed_table(self._split_seed, len(groups))
        results = Parallel(n_jobs=len(groups) if len(groups) > 1 else None)(
            delayed(self._run_group)(log_density, start[group], seed, gibbs, show=index == 0,
                                     inverse_mass=None if inverse_mass is None else inverse_mass[group],
                                     n_rows=n_rows)
            for index, (group, seed) in enumerate(zip(groups, seeds))
        )
        return self._record(results)

    def _chain_groups(self):
        """The chains' indices in one batch per joblib worker (``n_jobs`` as joblib reads it: -1 is
        every core)."""
        n_groups = 1 if self.n_jobs is None else effective_n_jobs(self.n_jobs)  # None: one batch, in any joblib context
        return np.array_split(np.arange(self.n_chains), min(n_groups, self.n_chains))

    def _run_group(self, log_density, start, seed, gibbs, show, *, inverse_mass, n_rows):
        self._pin_malloc()  # in a worker process of n_jobs, its first fit
        bar = None
        if self.verbose and show:
            from tqdm.auto import tqdm

            sampling_steps = self.n_samples * self.thin * (2 if self.sampler in SG_SAMPLERS else 1)
            bar = tqdm(total=self.n_burnin + sampling_steps, desc=f"MCMC {self.sampler}", leave=False)

        def progress(done, acceptance):
            bar.update(1)
            if done % 10 == 0:
                bar.set_postfix(acceptance=f"{acceptance:.2f}")

        report = progress if bar is not None else None
        if self.sampler in SG_SAMPLERS:
            step_size = self.step_size
            if step_size == "auto":
                step_size = auto_step_size(self.sampler, log_density.batch_size, len(log_density.X))
            draws, divergent = run_sg_chains(
                log_density, start, inverse_mass, sampler=self.sampler, n_samples=self.n_samples,
                n_burnin=self.n_burnin, thin=self.thin, step_size=step_size, n_cycles=self.n_cycles,
                generator=self._generator(seed),
                progress=report,
            )
            result = ChainResult(draws, torch.ones(divergent.shape, dtype=draws.dtype), divergent,
                                 torch.full((len(start),), step_size, dtype=draws.dtype), None)
        else:
            result = run_chains(
                log_density,
                start,
                sampler=self.sampler,
                n_samples=self.n_samples,
                n_burnin=self.n_burnin,
                thin=self.thin,
                step_size=FULL_DATA_INITIAL_STEP if self.step_size == "auto" else self.step_size,
                n_leapfrog=self.n_leapfrog,
                max_tree_depth=self.max_tree_depth,
                target_acceptance=self.target_acceptance,
                adapt_step_size=self.adapt_step_size,
                gamma=self.gamma,
                adapt_start=self.adapt_start,
                adapt_every=self.adapt_every,
                compile=self._compile_choice(len(start) * n_rows * self._model.total_width),
                gibbs=gibbs,
                generator=self._generator(seed),
                progress=report,
            )
        if bar is not None:
            bar.close()
        return result

    def _compile_choice(self, activations):
        """``run_chains``'s ``compile``: the parameter itself, or for 'auto' the
        decision whether compiling a run of batched gradients, each over
        ``activations`` (chains x rows x the layers' output units), pays
        (:func:`compile_pays`)."""
        if self.compile != "auto":
            return self.compile
        return partial(compile_pays, activations=activations)

    def _record(self, results):
        draws = torch.cat([result.draws for result in results])
        # What the draws were sampled with, for to_inference_data: set_params may change them after fit.
        self._sampling = {"sampler": self.sampler, "n_burnin": self.n_burnin, "thin": self.thin}
        self.compiled_ = any(result.compiled for result in results)
        self.chains_ = self._to_numpy(draws)
        self.acceptance_rate_ = self._to_numpy(torch.cat([r.acceptance.mean(1) for r in results]))
        self._acceptance = torch.cat([r.acceptance for r in results])
        self._divergent = torch.cat([r.divergent for r in results])
        self.n_divergent_ = int(self._divergent.sum())
        # A kernel without a step size (adaptive Metropolis) reports None.
        self.step_size_ = (
            None if results[0].step_size is None else self._to_numpy(torch.cat([r.step_size for r in results]))
        )
        self.trajectory_length_ = self._n_leapfrog = None
        if results[0].n_leapfrog is not None:
            self._n_leapfrog = torch.cat([r.n_leapfrog for r in results])
            self.trajectory_length_ = self._to_numpy(self._n_leapfrog.mean(1))
            self._warn_at_max_depth(self._n_leapfrog)
        if self.n_samples >= 4:
            self.rhat_ = split_rhat(self.chains_)
            self.ess_ = effective_sample_size(self.chains_)
        else:
            self.rhat_ = self.ess_ = np.full(self.chains_.shape[-1], np.nan)
        return draws.flatten(0, 1)

    def _chain_shape(self):
        return self.chains_.shape[:2]

    def _state_to_save(self, state):
        """Without the posterior's draws, the weights' columns of ``chains_`` (the pickle's one copy)."""
        posterior = state.get("posterior_")
        if isinstance(posterior, SamplePosterior):
            rebuilt = SamplePosterior(_draws_of(state, posterior.samples.device))
            if torch.equal(posterior.samples, rebuilt.samples) and torch.equal(posterior.weights, rebuilt.weights):
                state = dict(state, posterior_=None, _posterior_in_chains=True)
        return super()._state_to_save(state)

    def _state_loaded(self, state):
        state = super()._state_loaded(state)
        if "chains_" in state:  # fitted before the sampling's settings were recorded: those of the parameters
            state.setdefault("_sampling", {name: state[name] for name in ("sampler", "n_burnin", "thin")})
        if state.pop("_posterior_in_chains", False):
            state["posterior_"] = SamplePosterior(_draws_of(state, state["_device"]))
        return state

    def _sample_stats(self):
        """Per draw: its thinning block's mean acceptance probability, whether
        any step of it diverged, the step size and (NUTS) its leapfrog steps."""
        n_chains, n_draws = self._chain_shape()

        def by_draw(per_step):
            return per_step.reshape(n_chains, n_draws, self._sampling["thin"])

        stats = {
            "acceptance_rate": self._to_numpy(by_draw(self._acceptance).mean(-1)),
            "diverging": by_draw(self._divergent).any(-1).cpu().numpy(),
        }
        if self.step_size_ is not None:
            stats["step_size"] = np.repeat(self.step_size_[:, None], n_draws, axis=1)
        if self._n_leapfrog is not None:
            stats["n_steps"] = by_draw(self._n_leapfrog).sum(-1).cpu().numpy()
        return stats, dict(self._sampling)

    def _warn_at_max_depth(self, n_leapfrog):
        """Warn, as Stan does, when NUTS trajectories were cut at ``max_tree_depth``."""
        longest = 2**self.max_tree_depth - 1
        share = float((n_leapfrog >= longest).to(torch.float64).mean())
        if share > 0:
            warn(
                f"{share:.0%} of the NUTS trajectories after burn-in reached max_tree_depth="
                f"{self.max_tree_depth} ({longest} leapfrog steps) before turning back: the step size the "
                "adaptation found is small against the posterior's widest directions, so those steps cost "
                "the most they may. Raise max_tree_depth for longer trajectories, or use sampler='hmc' "
                "with a fixed n_leapfrog for a fixed cost."
            )


class MCMCRegressor(MCMCMixin, BaseBayesianRegressor):
    """Neural-network regressor with weight-posterior draws from Markov chains.

    ``n_chains`` chains sample the posterior of the weights under a Gaussian
    prior and a Gaussian likelihood; by default (``prior_std=None``) the
    prior precision of each parameter tensor (each input column's about its
    layer's mean, for the layers that read the inputs) and the noise are
    sampled too, under Gamma hyperpriors (Neal 1996), by exact Gibbs draws
    between the sampler's moves of the weights. All chains advance together,
    one batched log-posterior (and gradient) call per step. Predictions average the
    network over the kept draws, each with its own noise. Asymptotically
    exact; the cost is ``n_burnin + n_samples * thin`` full-data gradient
    evaluations per chain (times ``n_leapfrog`` for HMC, times each
    trajectory's length, at most ``2**max_tree_depth``, for NUTS), plus one forward
    pass per step for the noise's Gibbs draw.

    Samplers: 'hmc' (Hamiltonian Monte Carlo with a diagonal mass matrix and
    step size adapted in burn-in), 'nuts' (the No-U-Turn sampler: HMC whose
    trajectory length each step sets itself, stopping at a U-turn, with the
    same adaptation), 'mala' (Metropolis-adjusted Langevin, step
    size adapted in burn-in), 'amcmc' (Haario's adaptive random-walk
    Metropolis); for big tables, 'sgld' and 'sghmc' (stochastic-gradient
    Langevin dynamics and Hamiltonian Monte Carlo: a minibatch of
    ``batch_size`` rows per step, no Metropolis correction, a cyclical step
    size; approximate, see :mod:`~sklearn_quinn.mcmc._sgmcmc`).

    Parameters
    ----------
    hidden_layer_sizes, activation, linear_skip, module, lr, lr_schedule, max_epochs, batch_size, optimizer, \
callbacks, normalize_X, normalize_y, dtype, device, random_state, verbose
        As for :class:`~sklearn_quinn.LaplaceRegressor` (the MAP settings
        apply to ``init='ensemble'``, ``'map'`` and ``hyperprior='empirical'``).
    prior_std : float or None, default=None
        None: one prior precision per parameter tensor (each layer's weights
        and biases apart) and per input column of the layers that read the
        inputs, sampled or fixed as ``hyperprior`` says. A float:
        a fixed ``N(0, prior_std**2)`` prior on every weight (of the network
        that fits the standardised target when ``normalize_y``).
    noise_std : float or None, default=None
        The observation noise std in the units of y. None samples it: its
        precision ``1 / noise_std**2`` under the hyperprior
        (``hyperprior='gamma'``), fixed at the noise the MAP learns
        (``'empirical'``), or, with a float ``prior_std``, its log under a
        ``N(0, 1)`` prior in the units of the standardised target, moved by
        the sampler with the weights.
    likelihood : {'gaussian', 'heteroscedastic'}, default='gaussian'
        As for :class:`~sklearn_quinn.LaplaceRegressor`.
    hyperprior : {'gamma', 'empirical'}, default='gamma'
        With ``prior_std=None``: 'gamma' samples each group's precision and
        the noise precision under ``Gamma(hyperprior_shape,
        hyperprior_rate)`` priors (an input column's about its layer's mean
        precision, which has that prior), by exact Gibbs draws after every
        step of the sampler, which moves the weights given them;
        'empirical' fixes them at the values the evidence-driven MAP learns
        (empirical Bayes, as the optimisation families do). Unused with a
        float ``prior_std``.
    hyperprior_shape : float, default=0.5
        Shape of the Gamma hyperprior on every precision (on a layer's mean
        for its input columns').
    hyperprior_rate : float, default=0.01
        Rate of the Gamma hyperprior on every precision (on a layer's mean
        for its input columns'), in the network's
        units. With the default shape, each prior std (and the noise std) is
        ``0.14 / |z|``, ``z`` standard normal: median 0.21, the central 90% of
        the mass on ``[0.07, 2.3]``, weak but proper, for standardised inputs and
        targets.
    sampler : {'hmc', 'nuts', 'mala', 'amcmc', 'sgld', 'sghmc'}, default='hmc'
        'sgld' and 'sghmc' need hyperparameters that are not sampled
        (``hyperprior='empirical'`` or a float ``prior_std``); their cost is
        ``n_burnin + 2 n_samples thin`` minibatch gradients per chain, plus
        one full pass per chain for the preconditioner.
    n_samples : int, default=500
        Draws kept per chain.
    n_burnin : int, default=500
        Steps discarded per chain (adaptation happens here).
    thin : int, default=1
        Keep every ``thin``-th draw.
    n_chains : int, default=4
    step_size : float or 'auto', default='auto'
        Initial step size (HMC, NUTS, MALA) or initial random-walk std
        (AMCMC); 'auto' is 0.01. For SGLD and SGHMC, the fixed step size of
        burn-in and the peak of each cycle, in units of each weight's
        posterior std (the steps are preconditioned by the diagonal posterior
        precision at the start); 'auto' shrinks it as ``sqrt(batch_size /
        n)``, so that the minibatch noise stays below the injected noise:
        ``min(0.2, 2 sqrt(B / n))`` for SGLD, ``min(0.05, 0.5 sqrt(B / n))``
        for SGHMC.
    n_leapfrog : int, default=40
        Leapfrog steps per HMC proposal. A network's posterior has
        directions far wider than the step its narrowest allow, and a short
        trajectory stays near where it started; Neal (1996) and Izmailov et
        al. (2021, "What are Bayesian neural network posteriors really
        like?") run long ones.
    max_tree_depth : int, default=10
        NUTS doubles a trajectory at most this many times (at most
        ``2**max_tree_depth`` leapfrog steps a step).
    n_cycles : int, default=4
        SGLD and SGHMC: cycles of the step size over the sampling phase
        (Zhang et al. 2020); each runs as many steps at its larger step
        sizes as it then samples, ``thin`` steps per kept draw.
    target_acceptance : float, default=None
        Target of the step-size search; None gives 0.8 (HMC, NUTS) or 0.574 (MALA).
    adapt_step_size : bool, default=True
        Adapt the step size (and HMC's and NUTS's mass matrix) during burn-in.
    gamma : float, default=1.0
        Scale of AMCMC's adapted proposal, ``gamma * 2.4**2 / K``.
    adapt_start : int, default=100
        AMCMC step at which the covariance adaptation starts (``t0``).
    adapt_every : int, default=10
        AMCMC steps between covariance refreshes.
    init : {'map', 'ensemble', 'prior'}, default='map'
        Where the chains start. 'map': every chain at the MAP (trained
        through skorch, with a small per-chain jitter; sampled
        hyperparameters start at the values it learned). 'ensemble': the
        first chain there, and each other chain at a network trained beside
        it from its own initial weights under the MAP's learned prior and
        noise (as MultiSWAG's members; ``n_chains - 1`` more trainings, run
        stacked as one), so that the chains explore different basins of the
        posterior, which no chain crosses in a run; the draws weigh the
        chains equally (see the MCMC page of the docs for where that helps
        and where it hurts). 'prior': at prior draws (of the
        hyperparameters too, when they are sampled).
    compile : bool or 'auto', default='auto'
        Run HMC's and NUTS's leapfrog steps through ``torch.compile``: HMC's
        whole transition (the trajectory, its energies and the accept step)
        and each new half of a NUTS tree (its points' bookkeeping and U-turn
        checks included) is one compiled graph whose leapfrog steps are one
        ``torch.while_loop``, so that compiling takes the same time whatever
        the trajectory's length (8-9 s for HMC's graph of a 1x50 network
        with an empty compiler cache, 3-3.5 s with a warm one, after the
        compiler's own start-up of 10-12 s the first time in a process; it
        needs a C++ compiler; each joblib worker compiles its own). The
        random draws and NUTS's doublings stay eager.
        'auto' compiles where it pays: the first 10
        steps run eagerly, counting the gradient evaluations, and the rest
        compile if a cost model of what compiling saves a gradient (a fixed
        part, and one per activation: chains x rows x the layers' output
        units; :func:`~sklearn_quinn._core.compiling.compile_pays`) puts the
        remaining steps' saving above a compilation's cost. The choice
        depends on the data's size and the settings, never on the machine's
        load, so a seeded fit repeats on a machine; compiled and eager steps
        agree to rounding only, so ``compile=False`` reproduces an eager
        fit's draws exactly. At the defaults (4 chains, 1000 steps of 40
        leapfrog steps, the 1x50 network, one target) HMC compiles from about
        2,650 training rows on, whatever the number of features; NUTS, whose
        trajectories on a network often take hundreds of leapfrog steps,
        wherever they do. Falls back to eager execution, with a warning, when
        compiling fails. No effect on MALA, AMCMC and the stochastic-gradient
        samplers.
    leapfrog_dtype : {'float32', 'float64'}, default='float32'
        The dtype in which HMC's and NUTS's leapfrog steps evaluate the
        likelihood, from a copy of the data and the network in it; the accept
        steps take the log density in ``dtype``, so the chains target the
        exact posterior either way. HMC's kicks take the float32 gradient (a
        leapfrog step is a reversible, volume-preserving map whatever force
        its kicks take; a float32 gradient's rounding, a relative error near
        1e-6, costs acceptance only). NUTS builds its trees on the float32
        log density and tests the point they choose against the exact one
        (:func:`~sklearn_quinn.mcmc.nuts`; the test passes but for rounding).
        'float64' (with the default ``dtype``) takes the exact density
        throughout. No effect on the other samplers.
    n_jobs : int, default=None
        Split the chains into this many groups run by joblib workers (each
        group batched; -1: as many as there are cores, as joblib reads it);
        None or 1 runs all chains in one batch. A group's chains draw from
        one seeded generator, so a seeded fit repeats at the same ``n_jobs``
        but not across values of it.

    Attributes
    ----------
    posterior_ : SamplePosterior
        The kept draws of the weights, ``(n_chains * n_samples, K)``.
    chains_ : ndarray of shape (n_chains, n_samples, n_columns)
        The kept draws per chain: the weights, then the log noise std when
        sampled, then the log prior precisions and the log means of the
        layers that read the inputs when sampled.
    compiled_ : bool
        Whether the chains' steps were handed to ``torch.compile`` (for
        ``compile='auto'``, from the eleventh step on; by any joblib group of
        chains, each of which decides for itself). A compilation that fails
        still counts: it warns, and the steps run eagerly.
    acceptance_rate_ : ndarray of shape (n_chains,)
        Mean acceptance probability of each chain while sampling (1 for
        SGLD and SGHMC, which accept every step).
    rhat_ : ndarray of shape (n_columns,)
        Rank-normalised split R-hat per column of ``chains_``.
    ess_ : ndarray of shape (n_columns,)
        Bulk effective sample size per column of ``chains_``.
    prior_precisions_ : dict of str to float
        The prior precision of each group of weights, by name, in the
        network's units: the posterior mean over the draws
        (``hyperprior='gamma'``), else the one the
        MAP was trained under (learned with ``prior_std=None``, the input
        columns of the first layer and the skip apart as in
        :class:`~sklearn_quinn.LaplaceRegressor`; ``1 / prior_std**2``
        otherwise; only when a MAP is trained).
    prior_precision_samples_ : ndarray of shape (n_chains * n_samples, n_groups)
        Each draw's prior precisions, in the order of ``prior_precisions_``
        (``prior_std=None`` and ``hyperprior='gamma'`` only).
    evidence_history_ : list of dict
        The evidence updates of the MAP training, when a MAP is trained.
    n_divergent_ : int
        Divergent transitions after burn-in: proposals rejected for a
        non-finite energy or density, and HMC and NUTS trajectories whose
        energy error passed 1000 nats; for SGLD and SGHMC, the steps of the
        cycles' second halves (those the draws come from) whose gradient was
        not finite.
    step_size_ : ndarray of shape (n_chains,) or None
        Step size used while sampling (None for AMCMC); for SGLD and SGHMC,
        that of burn-in and the peak of each cycle.
    trajectory_length_ : ndarray of shape (n_chains,) or None
        NUTS: each chain's mean number of leapfrog steps a step while
        sampling (the cost of a draw, in gradients); None for the other
        samplers.
    noise_std_ : float, ndarray of shape (n_targets,) or None
        Root mean square of the noise std over the draws, in the units of y
        (the predictive variance adds its square; ``sample_y`` uses each
        draw's own noise).
        None under ``likelihood='heteroscedastic'``, whose noise is per input (``predict_uncertainty``).
    net_ : skorch.NeuralNet or None
        The MAP net, when a MAP is trained.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string column names.

    See Also
    --------
    MCMCClassifier, SMCRegressor

    References
    ----------
    R. M. Neal, "Bayesian Learning for Neural Networks", Lecture Notes in
    Statistics 118, Springer, 1996.
    R. M. Neal, "MCMC using Hamiltonian dynamics", Handbook of MCMC, 2011.
    H. Haario, E. Saksman and J. Tamminen, "An adaptive Metropolis
    algorithm", Bernoulli 7(2), 2001.
    M. Girolami and B. Calderhead, "Riemann manifold Langevin and Hamiltonian
    Monte Carlo methods", JRSS B 73(2), 2011.
    M. D. Hoffman and A. Gelman, "The No-U-Turn sampler", JMLR 15, 2014.
    T. Chen, E. Fox and C. Guestrin, "Stochastic gradient Hamiltonian Monte
    Carlo", ICML 2014.
    R. Zhang, C. Li, J. Zhang, C. Chen and A. G. Wilson, "Cyclical
    stochastic gradient MCMC for Bayesian deep learning", ICLR 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_quinn import MCMCRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-2, 2, size=(40, 1))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.randn(40)
    >>> reg = MCMCRegressor(hidden_layer_sizes=(10,), n_samples=50, n_burnin=50,
    ...                     n_leapfrog=5, max_epochs=300, lr=0.01, random_state=0).fit(X, y)
    >>> reg.chains_.shape  # 31 MLP and 1 linear-skip weights, the log noise std, 5 log prior precisions
    (4, 50, 38)
    >>> sorted(reg.prior_precisions_)
    ['linear.weight[:, 0]', 'mlp.0.bias', 'mlp.0.weight[:, 0]', 'mlp.2.bias', 'mlp.2.weight']
    >>> mean, std = reg.predict(X[:3], return_std=True)
    >>> mean.shape, bool((std > 0).all())
    ((3,), True)
    """

    _parameter_constraints: dict = {
        **BaseBayesianRegressor._parameter_constraints,
        **MCMCMixin._mcmc_constraints,
    }

    def __init__(
        self,
        hidden_layer_sizes=(50,),
        activation="relu",
        *,
        linear_skip=True,
        module=None,
        prior_std=None,
        noise_std=None,
        likelihood="gaussian",
        hyperprior="gamma",
        hyperprior_shape=DEFAULT_HYPERPRIOR_SHAPE,
        hyperprior_rate=DEFAULT_HYPERPRIOR_RATE,
        sampler="hmc",
        n_samples=500,
        n_burnin=500,
        thin=1,
        n_chains=4,
        step_size="auto",
        n_leapfrog=40,
        max_tree_depth=10,
        n_cycles=4,
        target_acceptance=None,
        adapt_step_size=True,
        gamma=1.0,
        adapt_start=100,
        adapt_every=10,
        init="map",
        lr=0.01,
        lr_schedule="cosine",
        max_epochs="auto",
        batch_size="auto",
        optimizer=torch.optim.Adam,
        callbacks=None,
        normalize_X=True,
        normalize_y=True,
        dtype="float64",
        device="cpu",
        compile="auto",
        leapfrog_dtype="float32",
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.linear_skip = linear_skip
        self.module = module
        self.prior_std = prior_std
        self.noise_std = noise_std
        self.likelihood = likelihood
        self.hyperprior = hyperprior
        self.hyperprior_shape = hyperprior_shape
        self.hyperprior_rate = hyperprior_rate
        self.sampler = sampler
        self.n_samples = n_samples
        self.n_burnin = n_burnin
        self.thin = thin
        self.n_chains = n_chains
        self.step_size = step_size
        self.n_leapfrog = n_leapfrog
        self.max_tree_depth = max_tree_depth
        self.n_cycles = n_cycles
        self.target_acceptance = target_acceptance
        self.adapt_step_size = adapt_step_size
        self.gamma = gamma
        self.adapt_start = adapt_start
        self.adapt_every = adapt_every
        self.init = init
        self.lr = lr
        self.lr_schedule = lr_schedule
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.optimizer = optimizer
        self.callbacks = callbacks
        self.normalize_X = normalize_X
        self.normalize_y = normalize_y
        self.dtype = dtype
        self.device = device
        self.compile = compile
        self.leapfrog_dtype = leapfrog_dtype
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose


def _draws_of(state, device):
    """The weight draws ``(S, K)`` in a fitted state's ``chains_``, as ``_record`` hands them to the
    posterior: a view of the chains' rows in the network's dtype, on ``device``, with the same strides."""
    chains = torch.as_tensor(state["chains_"], dtype=state["_dtype"], device=device)
    return chains.flatten(0, 1)[:, : state["_model"].n_params]
