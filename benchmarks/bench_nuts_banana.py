"""NUTS's divergences on the banana, ours against NumPyro's at the same settings.

The target: ``x1 ~ N(0, 1)``, ``x2 | x1 ~ N(x1**2, 0.5**2)``, whose curvature
grows as ``x1**2`` in the tails, so that a step tuned on the bulk diverges
where long trajectories reach them. Both sides: 8 chains from the origin,
``--burnin`` adaptation steps (dual averaging of the step size toward
``--target-acceptance`` and a diagonal mass in Stan's windows, per chain),
2000 draws a chain, float64; the divergences of the sampling phase (an
energy error over 1000 nats), each chain's adapted step size and the mean
acceptance statistic, per seed. Ours runs its 8 chains as rows of one batch
(``run_chains(sampler='nuts')``; ``--sampler hmc`` for HMC's 8-step
trajectories instead); NumPyro runs each chain on its own
(``MCMC(NUTS(potential_fn=...))``), skipped when it is not installed.

``--fixed-steps 0.2 0.3 0.4`` compares the kernels alone instead: no
adaptation, the given step sizes and the inverse mass ``(1, 2.25)`` (the
target's variances), 16 chains x 4000 draws from exact draws of the target;
divergences per draw (mean ± s.e. over the chains: a chain's excursions to the
tails make its count), mean acceptance statistic and leapfrog steps per draw.

    python benchmarks/bench_nuts_banana.py [--seeds 3] [--burnin 500] [--target-acceptance 0.8]
    python benchmarks/bench_nuts_banana.py --fixed-steps 0.2 0.3 0.4
"""

import argparse

import numpy as np
import torch

from sklearn_quinn.mcmc import nuts
from sklearn_quinn.mcmc._sampling import run_chains

N_CHAINS, N_DRAWS = 8, 2000
FIXED_CHAINS, FIXED_DRAWS, INVERSE_MASS = 16, 4000, (1.0, 2.25)


def banana_log_density(x):
    return -0.5 * x[..., 0] ** 2 - 0.5 * ((x[..., 1] - x[..., 0] ** 2) / 0.5) ** 2


def ours(seed, burnin, target_acceptance, sampler):
    result = run_chains(banana_log_density, torch.zeros(N_CHAINS, 2, dtype=torch.float64), sampler=sampler,
                        n_samples=N_DRAWS, n_burnin=burnin, step_size=0.3, n_leapfrog=8,
                        target_acceptance=target_acceptance, generator=torch.Generator().manual_seed(seed))
    return (int(result.divergent.sum()), result.step_size.numpy(), float(result.acceptance.mean()))


def numpyro_nuts(seed, burnin, target_acceptance):
    import jax
    import jax.numpy as jnp
    from numpyro.infer import MCMC, NUTS

    divergences, step_sizes, acceptance = 0, [], []
    for chain in range(N_CHAINS):
        mcmc = MCMC(NUTS(potential_fn=lambda z: -banana_log_density(z), target_accept_prob=target_acceptance),
                    num_warmup=burnin, num_samples=N_DRAWS, progress_bar=False)
        mcmc.run(jax.random.PRNGKey(1000 * seed + chain), init_params=jnp.zeros(2),
                 extra_fields=("diverging", "accept_prob"))
        fields = mcmc.get_extra_fields()
        divergences += int(fields["diverging"].sum())
        acceptance.append(float(fields["accept_prob"].mean()))
        step_sizes.append(float(mcmc.last_state.adapt_state.step_size))
    return divergences, np.array(step_sizes), float(np.mean(acceptance))


def exact_draws(n, seed):
    """``n`` independent draws of the banana, shape ``(n, 2)``."""
    rng = np.random.default_rng(seed)
    x1 = rng.standard_normal(n)
    return np.stack([x1, x1**2 + 0.5 * rng.standard_normal(n)], axis=1)


def ours_fixed(step_size):
    generator = torch.Generator().manual_seed(0)
    init, step = nuts(banana_log_density)
    state = init(torch.as_tensor(exact_draws(FIXED_CHAINS, 0)), step_size,
                 torch.tensor(INVERSE_MASS, dtype=torch.float64).expand(FIXED_CHAINS, 2))
    divergences, acceptance, leapfrog = torch.zeros(FIXED_CHAINS, dtype=torch.float64), 0.0, 0.0
    for _ in range(FIXED_DRAWS):
        state, info = step(generator, state)
        divergences += info.is_divergent
        acceptance += float(info.acceptance_probability.sum())
        leapfrog += float(info.n_leapfrog.sum())
    return divergences.numpy(), acceptance, leapfrog


def numpyro_fixed(step_size):
    import jax
    import jax.numpy as jnp
    from numpyro.infer import MCMC, NUTS

    divergences, acceptance, leapfrog = [], 0.0, 0.0
    for chain, start in enumerate(exact_draws(FIXED_CHAINS, 0)):
        kernel = NUTS(potential_fn=lambda z: -banana_log_density(z), step_size=step_size, adapt_step_size=False,
                      adapt_mass_matrix=False, inverse_mass_matrix=jnp.array(INVERSE_MASS))
        mcmc = MCMC(kernel, num_warmup=0, num_samples=FIXED_DRAWS, progress_bar=False)
        mcmc.run(jax.random.PRNGKey(chain), init_params=jnp.array(start),
                 extra_fields=("diverging", "accept_prob", "num_steps"))
        fields = mcmc.get_extra_fields()
        divergences.append(float(fields["diverging"].sum()))
        acceptance += float(fields["accept_prob"].sum())
        leapfrog += float(fields["num_steps"].sum())
    return np.array(divergences), acceptance, leapfrog


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--burnin", type=int, default=500)
    parser.add_argument("--target-acceptance", type=float, default=0.8)
    parser.add_argument("--sampler", choices=("nuts", "hmc"), default="nuts")
    parser.add_argument("--fixed-steps", type=float, nargs="+", metavar="STEP",
                        help="compare the NUTS kernels at these fixed step sizes instead")
    args = parser.parse_args()
    torch.set_num_threads(1)
    sides = {f"ours ({args.sampler})": lambda seed: ours(seed, args.burnin, args.target_acceptance, args.sampler)}
    fixed = {"ours (nuts)": ours_fixed}
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        sides["NumPyro (nuts)"] = lambda seed: numpyro_nuts(seed, args.burnin, args.target_acceptance)
        fixed["NumPyro (nuts)"] = numpyro_fixed
    except ImportError:
        print("NumPyro is not installed: ours only.")
    if args.fixed_steps:
        draws = FIXED_CHAINS * FIXED_DRAWS
        print(f"{FIXED_CHAINS} chains x {FIXED_DRAWS} draws from exact draws, inverse mass {INVERSE_MASS}\n")
        print("| sampler | step size | divergences per draw (± s.e. over chains) | mean acceptance "
              "| leapfrog steps per draw |")
        print("|---|---|---|---|---|")
        for name, run in fixed.items():
            for step_size in args.fixed_steps:
                divergences, acceptance, leapfrog = run(step_size)
                rates = divergences / FIXED_DRAWS
                print(f"| {name} | {step_size} | {rates.mean():.4f} ± {rates.std(ddof=1) / np.sqrt(len(rates)):.4f} "
                      f"| {acceptance / draws:.3f} | {leapfrog / draws:.2f} |", flush=True)
        return
    print(f"{N_CHAINS} chains x {N_DRAWS} draws, burn-in {args.burnin}, target acceptance "
          f"{args.target_acceptance}\n")
    print("| sampler | seed | divergences | step sizes (min - max) | mean acceptance |")
    print("|---|---|---|---|---|")
    for name, run in sides.items():
        for seed in range(args.seeds):
            divergences, step_sizes, acceptance = run(seed)
            print(f"| {name} | {seed} | {divergences} | {step_sizes.min():.3f} - {step_sizes.max():.3f} "
                  f"| {acceptance:.3f} |", flush=True)


if __name__ == "__main__":
    main()
