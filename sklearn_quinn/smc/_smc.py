"""SMCRegressor: weighted particles from adaptive annealed SMC, with the model evidence."""

from numbers import Integral, Real

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions

from .._core.compiling import BLOCK_COMPILE_SECONDS, saved_seconds
from .._core.log_posterior import state_prior
from .._core.priors import GaussianPrior, LogisticPrior
from .._draws import DrawsMixin
from .._inference_data import InferenceDataMixin
from .._regressor_base import BaseBayesianRegressor
from .._warnings import warn
from ..base import DTYPES, MAP_TRAINING_CONSTRAINTS
from ..mcmc._hierarchical import (
    DEFAULT_HYPERPRIOR_RATE,
    DEFAULT_HYPERPRIOR_SHAPE,
    HYPERPRIOR_CONSTRAINTS,
    HyperpriorMixin,
)
from ._engine import gibbs_mutation, hmc_mutation, run_smc

PRIORS = {"gaussian": GaussianPrior, "logistic": LogisticPrior}


class SMCMixin(HyperpriorMixin, InferenceDataMixin, DrawsMixin):
    """Particles from the prior annealed to the posterior; the fitted attributes they give.

    Its ``_fit`` serves :class:`SMCRegressor` and :class:`SMCClassifier`. No
    network is trained (unless ``hyperprior='empirical'`` asks for the MAP's
    learned prior): the backbone only gives the architecture, and the
    particles start from the prior.
    """

    _smc_constraints: dict = {
        **HYPERPRIOR_CONSTRAINTS,
        **MAP_TRAINING_CONSTRAINTS,
        "prior": [StrOptions(set(PRIORS))],
        "n_particles": [Interval(Integral, 2, None, closed="left")],
        "target_ess": [Interval(Real, 0, 1, closed="neither")],
        "resample_threshold": [Interval(Real, 0, 1, closed="right")],
        "n_mcmc_steps": [Interval(Integral, 1, None, closed="left")],
        "step_size": [Interval(Real, 0, None, closed="neither")],
        "n_leapfrog": [Interval(Integral, 1, None, closed="left")],
        "waste_free": ["boolean"],
        "compile": ["boolean", StrOptions({"auto"})],
        "leapfrog_dtype": [StrOptions(set(DTYPES))],
    }

    @property
    def _fits_in_unit_scale(self):
        """No MAP and no hyperparameter where the prior and the noise are both fixed."""
        return not self._fixes_prior_and_noise

    def _fit(self, X, Y):
        """Anneal the particles from the prior to the posterior: the family's part of ``fit``."""
        if self._empirical_hyperparameters:
            _, likelihood, weight_prior, _ = self._fit_map(X, Y)
            likelihood = likelihood.frozen(Y.shape[1])  # the MAP's learned noise, fixed
        else:
            likelihood = self._likelihood(Y)
            if likelihood.learn_noise and Y.shape[1] > 1:
                # Several targets share one sampled noise scale, each output's noise std a fixed ratio
                # of it (GaussianStateLikelihood's noise_ratio): the ratios that the Laplace evidence
                # learns with a MAP network, as MCMC's chains start from them. Without, the targets
                # shared one noise std in the units they are fitted in, and a quiet one took a noisy one's.
                _, likelihood, _, _ = self._fit_map(X, Y)
            else:
                self._build_model(X, Y)
            weight_prior = None if self.prior_std is None else PRIORS[self.prior](self.prior_std)
        X, Y = self._tensor(X), self._tensor(Y)
        mutation = hmc_mutation
        if self._samples_hyperparameters:
            log_posterior, gibbs = self._hierarchical_posterior(X, Y, likelihood)
            log_likelihood, log_prior = log_posterior.log_likelihood, log_posterior.log_prior
            state_likelihood = log_likelihood.density
            mutation = gibbs_mutation(gibbs)
        else:
            state_likelihood = log_likelihood = likelihood.state_log_likelihood(self._model, X, Y)
            log_prior = state_prior(weight_prior, self._model, likelihood)
        state_likelihood.set_surrogate_dtype(DTYPES[self.leapfrog_dtype])
        if self.compile != "auto" and self.compile:  # True, or numpy's True ('boolean' admits numpy.bool_)
            state_likelihood.compile_gradient()
        particles, weights, log_evidence = self._anneal(log_likelihood, log_prior, mutation, state_likelihood)
        self.compiled_ = state_likelihood.gradient_compiled
        self.log_evidence_ = log_evidence - self._log_y_scale_total(len(X))
        n_params = self._model.n_params
        n_likelihood = n_params + likelihood.n_state_columns
        self._keep_draws(
            particles[:, :n_params], likelihood.noise_from_state(particles[:, n_params:n_likelihood], Y.shape[1]),
            weights,
        )
        if self._samples_hyperparameters:
            self.prior_precision_samples_ = self._keep_precisions(gibbs.prior, particles, weights)

    def _anneal(self, log_likelihood, log_prior, mutation, state_likelihood):
        """Run the SMC from prior draws; set the history attributes.

        ``state_likelihood`` is the likelihood whose gradient ``compile='auto'``
        compiles once it pays (:meth:`_compile_if_paid`, after each stage).

        Returns
        -------
        particles : tensor of shape (n_particles, P)
        weights : tensor of shape (n_particles,)
        log_evidence : float
            In the network's units.
        """
        generator = self._generator(self._sample_seed)
        particles = log_prior.sample(self.n_particles, generator, self._dtype, self._device)
        bar = None
        if self.verbose:
            from tqdm.auto import tqdm

            bar = tqdm(total=1.0, desc="SMC", leave=False, bar_format="{l_bar}{bar}| lambda {n:.3f} {postfix}")

        def after_stage(stage, lam, ess):
            self._compile_if_paid(state_likelihood)
            if bar is not None:
                bar.update(lam - bar.n)
                bar.set_postfix(stage=stage, ess=f"{ess:.0f}")

        result = run_smc(
            log_likelihood,
            log_prior,
            particles,
            target_ess=self.target_ess,
            resample_threshold=self.resample_threshold,
            n_mcmc_steps=self.n_mcmc_steps,
            step_size=self.step_size,
            n_leapfrog=self.n_leapfrog,
            mutation=mutation,
            waste_free=self.waste_free,
            generator=generator,
            progress=after_stage,
        )
        if bar is not None:
            bar.close()
        self.lambdas_ = np.array(result.lambdas)
        self.ess_history_ = np.array(result.ess)
        if result.collapsed_stage is not None:
            warn(
                f"SMC's tempering left one particle the weight at stage {result.collapsed_stage} of "
                f"{len(result.ess)}, however small its step: the posterior and log_evidence_ rest on that "
                "particle's copies. The likelihood is finite at that particle alone, or the prior puts next to "
                "no mass where the data are: give a narrower prior (prior_std=None learns one) or more particles.",
                ConvergenceWarning,
            )
        self.acceptance_history_ = np.array(result.acceptance)
        self.n_stages_ = len(result.ess)
        self.step_size_ = self._to_numpy(result.step_size)
        self.n_leapfrog_ = result.n_leapfrog.cpu().numpy()
        self.particles_ = self._to_numpy(result.particles)
        weights = result.log_weights.exp()
        self.weights_ = self._to_numpy(weights)
        return result.particles, weights, result.log_evidence

    def _compile_if_paid(self, state_likelihood):
        """For ``compile='auto'`` on a CPU: compile the likelihood's gradient once the eager
        gradients so far would have saved, compiled, what a compilation costs.

        That is the break-even rule of ski rental (Karlin, Manasse, Rudolph &
        Sleator 1988, "Competitive snoopy caching"): SMC does not know in
        advance how many stages it will take, and the rule never spends more
        than twice what knowing would have. The savings are the cost model's
        (:func:`~sklearn_quinn._core.compiling.saved_seconds`) of the counted
        blocks and rows, not a stopwatch's, so a seeded fit repeats whatever
        the machine's load.
        """
        if self.compile != "auto" or state_likelihood.gradient_compiled or self._device.type != "cpu":
            return
        activations = state_likelihood.n_gradient_rows * len(state_likelihood.X) * self._model.total_width
        if saved_seconds(state_likelihood.n_gradient_blocks, activations) >= BLOCK_COMPILE_SECONDS:
            state_likelihood.compile_gradient()

    def _chain_shape(self):
        """The particles are one chain of draws, each with its weight."""
        return 1, len(self.weights_)

    def _sample_stats(self):
        """Per particle: its weight and its last mutation's step size and
        leapfrog steps; the stages (tempering exponents, ESS, acceptance) and
        the log evidence as attributes."""
        stats = {"weight": self.weights_, "step_size": self.step_size_, "n_steps": self.n_leapfrog_}
        stages = {"lambdas": self.lambdas_, "ess_history": self.ess_history_,
                  "acceptance_history": self.acceptance_history_, "log_evidence": self.log_evidence_}
        return {name: value[None] for name, value in stats.items()}, stages


class SMCRegressor(SMCMixin, BaseBayesianRegressor):
    """Neural-network regressor from adaptive annealed SMC, with the model evidence.

    ``n_particles`` weight vectors drawn from the prior are carried to the
    posterior through tempered targets ``p(theta) p(y | theta)**lambda``,
    ``0 = lambda_0 < ... < lambda_T = 1``: each step of ``lambda`` keeps an
    effective sample size of ``target_ess * n_particles``, the particles are
    resampled when their ESS falls below ``resample_threshold *
    n_particles`` and moved by HMC (diagonal mass from the particles' spread and the data's curvature,
    per-particle step size and trajectory length tuned from the previous
    move's jumps). The product of the weight normalisers is an unbiased
    estimate of the evidence ``p(y | X)``, kept on the log scale in
    ``log_evidence_``; use it to compare architectures and priors
    (:class:`~sklearn_quinn.model_selection.EvidenceSearch`). By default
    (``prior_std=None``) each particle also carries a prior precision per
    parameter tensor and, with ``noise_std=None``, a noise, drawn from Gamma
    hyperpriors at the start and updated by exact Gibbs draws between the
    HMC moves, so that the evidence is the one with the hyperparameters
    integrated out (Neal 1996). Cost: about ``n_stages * n_mcmc_steps *
    mean(L)`` batched gradient evaluations of all particles (each leapfrog
    step moves only the particles whose trajectories have not ended); no MAP is
    trained, except for ``hyperprior='empirical'`` and for several targets
    with a sampled noise, whose ratios a MAP's evidence learns.

    Parameters
    ----------
    hidden_layer_sizes, activation, linear_skip, module, normalize_X, normalize_y, dtype, device, random_state, verbose
        As for :class:`~sklearn_quinn.LaplaceRegressor`.
    prior_std : float or None, default=None
        None: one prior precision per parameter tensor (each layer's weights
        and biases apart) and per input column of the layers that read the
        inputs, sampled or fixed as ``hyperprior`` says. A float: the
        standard deviation of a fixed prior on every weight.
    noise_std : float or None, default=None
        The observation noise std in the units of y. None samples it: its
        precision ``1 / noise_std**2`` under the hyperprior
        (``hyperprior='gamma'``), fixed at the noise the MAP learns
        (``'empirical'``), or, with a float ``prior_std``, its log under a
        ``N(0, 1)`` prior in the units of the standardised target, moved by
        HMC with the weights. Several targets share one sampled noise scale,
        in the ratios of their noise stds that the Laplace evidence learns
        with a MAP network (trained first, for them alone).
    likelihood : {'gaussian', 'heteroscedastic'}, default='gaussian'
        As for :class:`~sklearn_quinn.LaplaceRegressor`.
    prior : {'gaussian', 'logistic'}, default='gaussian'
        Family of the prior: Gaussian, or independent logistic distributions
        with the same standard deviation (heavier tails; needs a float
        ``prior_std``).
    hyperprior : {'gamma', 'empirical'}, default='gamma'
        With ``prior_std=None``: 'gamma' samples each group's precision and
        the noise precision under ``Gamma(hyperprior_shape,
        hyperprior_rate)`` priors (an input column's about its layer's mean
        precision, which has that prior); 'empirical' first trains the MAP that
        learns them by maximising the Laplace evidence (empirical Bayes) and
        fixes them there, so that ``log_evidence_`` is the evidence at those
        values. Unused with a float ``prior_std``.
    hyperprior_shape : float, default=0.5
        Shape of the Gamma hyperprior on every precision (on a layer's mean
        for its input columns').
    hyperprior_rate : float, default=0.01
        Rate of the Gamma hyperprior on every precision (on a layer's mean
        for its input columns'), in the network's
        units (see :class:`~sklearn_quinn.MCMCRegressor`).
    n_particles : int, default=200
    target_ess : float in (0, 1), default=0.5
        Fraction of the particles' ESS each tempering step keeps (``alpha``);
        closer to 1 means more, smaller steps and a less variable evidence.
    resample_threshold : float in (0, 1], default=0.5
        Resample when the ESS falls below this fraction of ``n_particles``.
    n_mcmc_steps : int, default=5
        HMC steps per particle at each stage (per chain with ``waste_free``).
    step_size : float, default=0.5
        Initial step sizes are uniform on ``(0, step_size)``, in units of the
        particles' standard deviations. The moves' tuning picks among them by
        their jumps, which narrows the range to a network's small steps within
        a few stages but widens it only slowly (by perturbations of 0.015 a
        stage): the range must reach the large steps a small model takes.
    n_leapfrog : int, default=50
        Initial trajectory lengths are uniform on ``{1, ..., n_leapfrog}``.
        The tuning draws each particle's length within one step of a parent's,
        so the lengths stay near where the first stages' selection among these
        left them, and trajectory steps are most of a fit's gradients: a
        smaller value shortens a fit about in proportion, and on a network's
        posterior costs evidence and test log-likelihood; a larger one lets
        that selection keep longer trajectories where their jumps per
        gradient are longer, which need not pay (docs: smc, "What the
        trajectories' length buys").
    waste_free : bool, default=False
        Waste-free SMC (Dau & Chopin 2022): each stage resamples
        ``ceil(n_particles / (n_mcmc_steps + 1))`` particles and runs a chain
        of ``n_mcmc_steps`` HMC steps from each, and every state of every
        chain is a particle of the next stage. A stage then costs
        ``n_mcmc_steps + 1`` times fewer gradient evaluations; the particles
        are correlated within a chain, so ``log_evidence_`` varies more at a
        given ``n_particles`` (use more of them, at the same cost). Unused:
        ``resample_threshold``.
    leapfrog_dtype : {'float32', 'float64'}, default='float32'
        The dtype in which the moves' leapfrog steps evaluate the likelihood's
        gradient, from a copy of the data and the network in it; the accept
        steps and the tempering weights take the log density in ``dtype``, so
        the particles target the exact tempered posteriors either way (see
        :class:`~sklearn_quinn.MCMCRegressor`). 'float64' (with the default
        ``dtype``) takes the exact gradient.
    compile : bool or 'auto', default='auto'
        Run the likelihood's gradient (the network's forward and backward
        pass over a block of particles) through ``torch.compile``, which fuses
        its element-wise passes; it needs a C++ compiler on a CPU and falls
        back to eager, with a warning, without one. 'auto' compiles on a CPU
        once the gradients taken eagerly would have saved, compiled, what a
        compilation costs (a cost model of the particles, points and layer
        widths, not a stopwatch, so a seeded fit repeats): from a few stages
        in on a UCI table, never on a small problem; on a GPU it does not
        compile. Compiled and eager gradients agree to rounding only, so
        ``compile=False`` reproduces an eager fit.
    lr, lr_schedule, max_epochs, batch_size, optimizer, callbacks
        The MAP training of ``hyperprior='empirical'`` and of several targets'
        noise ratios, as for :class:`~sklearn_quinn.LaplaceRegressor`;
        unused otherwise.

    Attributes
    ----------
    posterior_ : SamplePosterior
        The weighted particles (network weights only).
    particles_ : ndarray of shape (n_particles, n_columns)
        The final particles: the weights, then the log noise std when
        sampled, then the log prior precisions and the log means of the
        layers that read the inputs when sampled.
    weights_ : ndarray of shape (n_particles,)
        Their normalised weights.
    log_evidence_ : float
        Estimate of ``log p(y | X)`` in the units of y.
    lambdas_ : ndarray of shape (n_stages + 1,)
        The tempering exponents, from 0 to 1.
    ess_history_ : ndarray of shape (n_stages,)
        ESS after each stage's reweighting.
    acceptance_history_ : ndarray of shape (n_stages,)
        Mean HMC acceptance probability at each stage.
    n_stages_ : int
    step_size_, n_leapfrog_ : ndarray of shape (n_particles,)
        Each particle's HMC parameters at the last stage.
    compiled_ : bool
        Whether the likelihood's gradient was handed to ``torch.compile``
        (for ``compile='auto'``, from the stage where it paid on).
    noise_std_ : float, ndarray of shape (n_targets,) or None
        Root mean square noise std over the weighted particles, in the units of y.
        None under ``likelihood='heteroscedastic'``, whose noise is per input (``predict_uncertainty``).
    prior_precisions_ : dict of str to float
        The prior precision of each group of weights, by name, in the
        network's units: the weighted mean over the particles
        (``hyperprior='gamma'``) or the MAP's
        (``'empirical'``, the input columns apart as
        :class:`~sklearn_quinn.LaplaceRegressor`'s);
        ``prior_std=None`` only, but for several targets with a learned
        noise, where it is the MAP's of the noise ratios' training (below).
    prior_precision_samples_ : ndarray of shape (n_particles, n_groups)
        Each particle's prior precisions (weighted by ``weights_``), in
        the order of ``prior_precisions_`` (``prior_std=None`` and
        ``hyperprior='gamma'`` only).
    net_ : skorch.NeuralNet or None
        The MAP net of ``hyperprior='empirical'``, and of several targets
        with a learned noise, whose ratios it learns.
    evidence_history_ : list of dict
        The MAP's evidence updates (where there is a MAP: ``net_``), as
        :class:`~sklearn_quinn.LaplaceRegressor`'s.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string column names.

    See Also
    --------
    SMCClassifier, MCMCRegressor, sklearn_quinn.model_selection.EvidenceSearch

    References
    ----------
    P. Del Moral, A. Doucet and A. Jasra, "Sequential Monte Carlo samplers",
    JRSS B 68(3), 2006.
    R. M. Neal, "Bayesian Learning for Neural Networks", Lecture Notes in
    Statistics 118, Springer, 1996.
    A. Buchholz, N. Chopin and P. E. Jacob, "Adaptive tuning of Hamiltonian
    Monte Carlo within sequential Monte Carlo", Bayesian Analysis 16(3), 2021.
    S. Arora, "Uncertainty quantification and model selection in neural
    networks using adaptive annealed SMC", 2025.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_quinn import SMCRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-2, 2, size=(40, 1))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.randn(40)
    >>> reg = SMCRegressor(hidden_layer_sizes=(5,), n_particles=50, n_leapfrog=10,
    ...                    random_state=0).fit(X, y)
    >>> print(reg.lambdas_[0], reg.lambdas_[-1])
    0.0 1.0
    >>> sorted(reg.prior_precisions_)
    ['linear.weight[:, 0]', 'mlp.0.bias', 'mlp.0.weight[:, 0]', 'mlp.2.bias', 'mlp.2.weight']
    >>> mean, std = reg.predict(X[:3], return_std=True)
    >>> mean.shape, bool((std > 0).all())
    ((3,), True)
    """

    _parameter_constraints: dict = {
        **BaseBayesianRegressor._parameter_constraints,
        **SMCMixin._smc_constraints,
    }

    def __init__(
        self,
        hidden_layer_sizes=(50,),
        activation="relu",
        *,
        linear_skip=True,
        module=None,
        prior_std=None,
        prior="gaussian",
        noise_std=None,
        likelihood="gaussian",
        hyperprior="gamma",
        hyperprior_shape=DEFAULT_HYPERPRIOR_SHAPE,
        hyperprior_rate=DEFAULT_HYPERPRIOR_RATE,
        n_particles=200,
        target_ess=0.5,
        resample_threshold=0.5,
        n_mcmc_steps=5,
        step_size=0.5,
        n_leapfrog=50,
        waste_free=False,
        compile="auto",
        leapfrog_dtype="float32",
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
        random_state=None,
        verbose=0,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.linear_skip = linear_skip
        self.module = module
        self.prior_std = prior_std
        self.prior = prior
        self.noise_std = noise_std
        self.likelihood = likelihood
        self.hyperprior = hyperprior
        self.hyperprior_shape = hyperprior_shape
        self.hyperprior_rate = hyperprior_rate
        self.n_particles = n_particles
        self.target_ess = target_ess
        self.resample_threshold = resample_threshold
        self.n_mcmc_steps = n_mcmc_steps
        self.step_size = step_size
        self.n_leapfrog = n_leapfrog
        self.waste_free = waste_free
        self.compile = compile
        self.leapfrog_dtype = leapfrog_dtype
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
        self.random_state = random_state
        self.verbose = verbose
