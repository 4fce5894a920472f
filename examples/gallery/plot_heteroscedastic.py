"""
=======================================================
Noise that grows with the input: the two sources split
=======================================================

Three hundred points of ``sin(x)`` whose noise standard deviation grows
from 0.1 at ``x = 0`` to 1.3 at ``|x| = 3``. The Laplace regressor and a deep
ensemble, each fitted twice: with the default Gaussian likelihood (one noise
level for every input) and with ``likelihood='heteroscedastic'`` (the network
outputs a mean and a log noise scale per input).

Each panel shows the band ``mean ± 2 std`` of the total predictive standard
deviation and, darker inside it, ``mean ± 2 epistemic_std``: the uncertainty
about the network's mean, which :meth:`predict_uncertainty` separates from
the observation noise (``aleatoric_std``). What to look for: the Gaussian fits
spread one noise level over all inputs, too wide at the centre and too narrow
at the edges; the heteroscedastic fits follow the true noise (dashed), and the
epistemic band widens beyond the data, where the noise head itself is a guess.

With ``SKLEARN_QUINN_QUICK=1`` in the environment (the test suite and the
documentation build set it) the networks train for fewer epochs.
"""

# %%
# Data
# ----
import os

import matplotlib.pyplot as plt
import numpy as np

from sklearn_quinn import DeepEnsembleRegressor, LaplaceRegressor
from sklearn_quinn.datasets import make_heteroscedastic_wave
from sklearn_quinn.plotting import PredictiveBandDisplay

QUICK = os.environ.get("SKLEARN_QUINN_QUICK", "0") not in ("", "0")

X, y = make_heteroscedastic_wave(300, random_state=0)
grid = np.linspace(-4.5, 4.5, 200)
common = {"random_state": 0, "max_epochs": 400 if QUICK else 1000}

# %%
# Fit each family under each likelihood
# --------------------------------------
fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True, sharey=True, layout="constrained")
for row, family in zip(axes, (LaplaceRegressor, DeepEnsembleRegressor)):
    for ax, likelihood in zip(row, ("gaussian", "heteroscedastic")):
        regressor = family(likelihood=likelihood, **common).fit(X, y)
        PredictiveBandDisplay.from_estimator(regressor, X, y, grid=grid, ax=ax)
        truth = np.sin(grid)
        for sign in (-2, 2):
            ax.plot(grid, truth + sign * (0.1 + 0.4 * np.abs(grid)), "k--", linewidth=0.8)
        ax.set_title(f"{family.__name__}, likelihood='{likelihood}'")
        ax.set_ylim(-6, 6)
        ax.legend().remove()
        parts = regressor.predict_uncertainty([[0.0], [2.5]])
        print(
            f"{family.__name__:22s} {likelihood:16s} aleatoric std at x=0: "
            f"{parts.aleatoric_std[0]:.2f} (true 0.10), at x=2.5: {parts.aleatoric_std[1]:.2f} "
            "(true 1.10)"
        )
axes[0, 0].legend(loc="lower left", fontsize="small")
plt.show()
