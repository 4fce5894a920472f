"""What the hyperpriors cost HMC's steps at the defaults: the prior's part of a kick, and a whole fit.

With ``prior_std=None`` (the default) a sampler's state carries the log prior
precisions, the log layer means and the log noise std beside the weights, and
every kick of a leapfrog step needs the prior's gradient in the weights
alone (the hyperparameters are Gibbs-drawn, never kicked). Per table
(``ROWSxFEATURES``, standard-normal features, one output; the default 1x50
network with its linear skip, 4 chains, float32 kicks as ``MCMCRegressor``
takes them), in one process of one thread, alternating, the median of 5 runs
of 200 calls:

1. the likelihood's force alone (its float32 surrogate's gradient);
2. a kick with the prior's whole ``value_and_grad`` (its value and its
   gradient in every column), as the kicks took it before 2026-12-04;
3. a kick with the force of the posterior with the hyperparameters held
   (``given_hyperparameters``; the prior's gradient in the weights), as now;
4. the log posterior's float64 ``value_and_grad`` (what NUTS's and MALA's
   steps take), the prior's terms all evaluated;
5. the same with the hyperparameters held, their terms computed once per
   Gibbs draw, as the kernels within Gibbs take it;

and the ratios of 2 to 3 and of 4 to 5. ``--fit`` then times ``MCMCRegressor()`` fits on
diabetes (inputs standardised, ``random_state=0``, median of ``--repeats``), and their
sampling apart from the MAP training (the chains, and the diagnostics read from them):
run it under two versions of the package side by side (``PYTHONPATH`` set to each
checkout) to compare them.

    python benchmarks/bench_hyperprior_overhead.py [--tables 442x10 927x8 7373x8] [--fit] [--repeats 3]
"""

import argparse
import statistics
import time

import torch

from sklearn_quinn import MCMCRegressor
from sklearn_quinn._core.hyperpriors import GammaHyperprior
from sklearn_quinn._core.log_posterior import hierarchical_log_posterior


def kick_times(n_rows, n_features, n_chains=4, n_calls=200, n_runs=5):
    """Milliseconds a call of each of the module docstring's five evaluations, by name."""
    generator = torch.Generator().manual_seed(0)
    X = torch.randn(n_rows, n_features, generator=generator, dtype=torch.float64)
    y = X[:, 0] + 0.5 * torch.randn(n_rows, generator=generator, dtype=torch.float64)
    # A fit of two steps builds the default network, its parameter groups and likelihood.
    est = MCMCRegressor(n_samples=2, n_burnin=2, max_epochs=5, random_state=0).fit(X.numpy(), y.numpy())
    hyperprior = GammaHyperprior(est.hyperprior_shape, est.hyperprior_rate)
    log_density, _ = hierarchical_log_posterior(est._model, est._groups, X, y[:, None].clone(),
                                                est._likelihood(y[:, None].numpy()), hyperprior)
    log_density.set_surrogate_dtype(torch.float32)
    prior, likelihood_surrogate = log_density.log_prior, log_density.log_likelihood.surrogate
    rows = prior.sample(n_chains, generator)
    held = log_density.given_hyperparameters()
    held.hold(rows)
    held_surrogate = held.surrogate

    def likelihood_force(rows):
        return likelihood_surrogate.value_and_grad(rows)[1]

    calls = {
        "likelihood force": lambda: likelihood_force(rows),
        "kick, prior value_and_grad": lambda: prior.value_and_grad(rows)[1] + likelihood_force(rows),
        "kick, prior force": lambda: held_surrogate.value_and_grad(rows)[1],
        "float64 value_and_grad": lambda: log_density.value_and_grad(rows),
        "float64 value_and_grad, held": lambda: held.value_and_grad(rows),
    }
    times = {name: [] for name in calls}
    for _ in range(n_runs):
        for name, call in calls.items():
            start = time.perf_counter()
            for _ in range(n_calls):
                call()
            times[name].append((time.perf_counter() - start) / n_calls * 1e3)
    return {name: statistics.median(values) for name, values in times.items()}


def fit_seconds(repeats):
    """Seconds of each of ``repeats`` ``MCMCRegressor()`` fits on diabetes, and of their sampling
    alone (the chains after the MAP training, with their diagnostics)."""
    from sklearn.datasets import load_diabetes
    from sklearn.preprocessing import StandardScaler

    X, y = load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    fits, sampling = [], []
    sample_chains = MCMCRegressor._sample_chains

    def timed(self, *args, **kwargs):
        start = time.perf_counter()
        result = sample_chains(self, *args, **kwargs)
        sampling.append(time.perf_counter() - start)
        return result

    MCMCRegressor._sample_chains = timed
    try:
        for _ in range(repeats):
            start = time.perf_counter()
            MCMCRegressor(random_state=0).fit(X, y)
            fits.append(time.perf_counter() - start)
    finally:
        MCMCRegressor._sample_chains = sample_chains
    return fits, sampling


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", nargs="*", default=["442x10", "927x8", "7373x8"])
    parser.add_argument("--fit", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    for table in args.tables:
        n_rows, n_features = map(int, table.split("x"))
        ms = kick_times(n_rows, n_features)
        print(f"{table}: " + ", ".join(f"{name} {value:.3f} ms" for name, value in ms.items())
              + f"; kicks {ms['kick, prior value_and_grad'] / ms['kick, prior force']:.2f}x, value_and_grad "
              f"{ms['float64 value_and_grad'] / ms['float64 value_and_grad, held']:.2f}x less",
              flush=True)
    if args.fit:
        fits, sampling = fit_seconds(args.repeats)
        print("MCMCRegressor() on diabetes: " + ", ".join(f"{s:.1f}" for s in fits)
              + f" s (median {statistics.median(fits):.1f} s); its sampling " + ", ".join(f"{s:.1f}" for s in sampling)
              + f" s (median {statistics.median(sampling):.1f} s)")


if __name__ == "__main__":
    main()
