"""Every regressor at its defaults on the heteroscedastic test's table, under each likelihood.

The table of ``tests/test_heteroscedastic.py::test_heteroscedastic_fit_follows_noise_growing_with_x``:
300 training rows of ``sin(x) + (0.1 + 0.4 |x|) eps``, ``x`` uniform on [-3, 3] (seed 0), and 3000 test
rows (seed 1). For each family, fitted with ``likelihood='heteroscedastic'`` and with the Gaussian
likelihood: the test NLL, the 95% coverage of the lowest- and the highest-noise third of the test
inputs, and the fit's seconds. Beside them, two exact references:

- the best homoscedastic predictive: the true mean with the one std that fits the test rows best (the
  root mean square of their noise), the lowest test NLL that any predictive with one noise std for
  every input reaches, up to the chance of the test noise;
- the true predictive: the true mean with each input's true noise std.

The test holds every heteroscedastic fit 0.1 below the first; this prints how far below it each is,
and how far each family's own Gaussian fit lies above it.

    python benchmarks/bench_heteroscedastic_wave.py [--methods laplace smc ...] [--threads 1]
"""

import argparse
import time

import numpy as np
from defaults_options import pin_threads

from sklearn_quinn import (
    BBBRegressor,
    DeepEnsembleRegressor,
    LaplaceRegressor,
    MCDropoutRegressor,
    MCMCRegressor,
    RMSRegressor,
    SMCRegressor,
    SWAGRegressor,
    metrics,
)
from sklearn_quinn.datasets import make_heteroscedastic_wave

FAMILIES = {"laplace": LaplaceRegressor, "de": DeepEnsembleRegressor, "rms": RMSRegressor, "swag": SWAGRegressor,
            "bbb": BBBRegressor, "dropout": MCDropoutRegressor, "mcmc": MCMCRegressor, "smc": SMCRegressor}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    pin_threads(args.threads)
    X, y = make_heteroscedastic_wave(300, random_state=0)
    X_test, y_test, noise = make_heteroscedastic_wave(3000, random_state=1, return_noise_std=True)
    true_mean = np.sin(X_test[:, 0])
    root_mean_square = np.sqrt(np.mean((y_test - true_mean) ** 2))
    best_homoscedastic = metrics.gaussian_nll(y_test, true_mean, np.full_like(y_test, root_mean_square))
    print(f"best homoscedastic predictive: NLL {best_homoscedastic:.4f}; "
          f"true predictive: NLL {metrics.gaussian_nll(y_test, true_mean, noise):.4f}")
    thirds = np.digitize(noise, np.quantile(noise, [1 / 3, 2 / 3]))
    print(f"{'family':8s} {'likelihood':15s} {'NLL':>7s} {'- best homosc.':>15s} {'cov. low':>9s} {'cov. high':>9s} "
          f"{'fit s':>6s}")
    for name in args.methods:
        for likelihood in ("heteroscedastic", "gaussian"):
            start = time.perf_counter()
            model = FAMILIES[name](likelihood=likelihood, random_state=0).fit(X, y)
            seconds = time.perf_counter() - start
            mean, std = model.predict(X_test, return_std=True)
            nll = metrics.gaussian_nll(y_test, mean, std)
            low, high = (metrics.interval_coverage(y_test[thirds == third], mean[thirds == third],
                                                   std[thirds == third], 0.95) for third in (0, 2))
            print(f"{name:8s} {likelihood:15s} {nll:7.4f} {nll - best_homoscedastic:+15.4f} {low:9.3f} "
                  f"{high:9.3f} {seconds:6.1f}", flush=True)


if __name__ == "__main__":
    main()
