"""
====================================
Every regressor on a 1-D toy problem
====================================

The six regressors of the package, fitted to the same 200 noisy points of
``sin(2x)`` with a gap between ``x = -0.5`` and ``x = 1`` and nothing beyond
``|x| = 3``. Each panel shows the data, the predictive mean and the band
``mean ± 2 std`` of the *total* predictive standard deviation (weight
uncertainty plus the estimated observation noise), as returned by
``predict(X, return_std=True)``; the darker band inside it is ``mean ± 2
epistemic_std``, the weight uncertainty alone, from ``predict_uncertainty``.

What to look for: inside the data the methods recover the curve and a band
about as wide as the noise (std 0.2); Bayes by backprop with its default
scale-mixture prior underfits data this small and takes the misfit for noise
(``prior_pi=1.0`` with ``prior_sigma1=1.0``, one Gaussian prior, fits it
better). In the gap and outside the data the
methods disagree: the band widens by as much as the posterior over the weights
lets the network's functions spread there, which is where the families differ
(see :doc:`/comparison`).

With ``SKLEARN_QUINN_QUICK=1`` in the environment (the test suite and the
documentation build set it) the networks train for fewer epochs and MCMC draws
fewer samples; the figure below may come from that quick run.
"""

# %%
# Data and settings
# -----------------
import os

import matplotlib.pyplot as plt
import numpy as np

from sklearn_quinn import (
    BBBRegressor,
    DeepEnsembleRegressor,
    LaplaceRegressor,
    MCMCRegressor,
    RMSRegressor,
    SWAGRegressor,
)
from sklearn_quinn.plotting import PredictiveBandDisplay

QUICK = os.environ.get("SKLEARN_QUINN_QUICK", "0") not in ("", "0")

rng = np.random.RandomState(0)
x = rng.uniform(-3, 3, size=300)
x = np.sort(x[(x < -0.5) | (x > 1.0)])[:200]
X = x[:, None]
y = np.sin(2 * x) + 0.2 * rng.randn(len(x))
grid = np.linspace(-5, 5, 200)

# Every estimator: one hidden layer of 50 ReLU units (the default backbone),
# the same prior std and seed; the MAP trains for 1000 epochs by default.
common = {"hidden_layer_sizes": (50,), "random_state": 0}
if QUICK:
    common["max_epochs"] = 400

# %%
# The six posteriors
# ------------------
# Laplace tunes its prior precision by the evidence; MCMC runs HMC chains from
# the MAP; the ensembles train five members together; SWAG collects the SGD
# trajectory after the MAP; BBB fits a factored Gaussian by the ELBO.
regressors = {
    "Laplace (full GGN, evidence)": LaplaceRegressor(prior_precision="marglik", **common),
    "MCMC (HMC, 4 chains)": MCMCRegressor(
        sampler="hmc",
        n_chains=4,
        n_burnin=100 if QUICK else 500,
        n_samples=100 if QUICK else 500,
        **common,
    ),
    "Deep ensemble (5)": DeepEnsembleRegressor(n_estimators=5, **common),
    "RMS (5 anchored members)": RMSRegressor(n_estimators=5, **common),
    "SWAG (low rank)": SWAGRegressor(swag_epochs=50 if QUICK else 100, **common),
    "Bayes by backprop": BBBRegressor(**common),
}

# %%
# Fit each and draw its predictive
# --------------------------------
fig, axes = plt.subplots(
    2, 3, figsize=(13, 7), sharex=True, sharey=True, layout="constrained"
)
for ax, (name, regressor) in zip(axes.ravel(), regressors.items()):
    regressor.fit(X, y)
    display = PredictiveBandDisplay.from_estimator(regressor, X, y, grid=grid, ax=ax)
    ax.plot(grid, np.sin(2 * grid), "k--", linewidth=0.8, label="sin(2x)")
    ax.set_title(f"{name}\nnoise std {np.ravel(regressor.noise_std_)[0]:.2f}")
    ax.set_ylim(-3.5, 3.5)
    ax.legend().remove()
axes[0, 0].legend(loc="lower left", fontsize="small")

# %%
# The band at the centre of the gap and far outside the data
# ----------------------------------------------------------
points = np.array([[0.25], [4.5]])
for name, regressor in regressors.items():
    mean, std = regressor.predict(points, return_std=True)
    print(f"{name:30s} std at x=0.25: {std[0]:5.2f}   at x=4.5: {std[1]:5.2f}")

plt.show()
