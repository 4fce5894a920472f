"""
=======================================================
Conformal intervals with MAPIE from ``return_std=True``
=======================================================

A Bayesian predictive band ``mean ± z std`` covers 95% of new targets only if
the model is right. Split conformal prediction turns it into an interval with a
*guaranteed* marginal coverage, whatever the model, from a held-out
calibration set: with the normalised score

.. math::

    s_i = \\frac{|y_i - \\mu(x_i)|}{\\sigma(x_i)}

on the ``n`` calibration rows, and ``q`` the ``ceil((n + 1)(1 - alpha)) / n``
empirical quantile of the scores, the interval ``mu(x) ± q sigma(x)`` covers a
new target with probability at least ``1 - alpha``. It keeps the shape of the
model's band (wide where the model is unsure) and only re-scales it.

`MAPIE <https://mapie.readthedocs.io>`_ (``pip install mapie``; version 1.6 or
later) has exactly this score, ``conformity_score="std_normalized"``
(:class:`mapie.conformity_scores.StdConformityScore`): it calls the
estimator's ``predict(X, return_std=True)``, which every regressor of this
package provides. Below MAPIE's interval is checked against the same
computation by hand.
"""

# %%
# Data: noise that grows with ``|x|``
# -----------------------------------
import os

import matplotlib.pyplot as plt
import numpy as np
from mapie.regression import SplitConformalRegressor
from scipy.stats import norm

from sklearn_quinn import DeepEnsembleRegressor

QUICK = os.environ.get("SKLEARN_QUINN_QUICK", "0") not in ("", "0")
CONFIDENCE = 0.9

rng = np.random.RandomState(0)


def make_data(n):
    x = rng.uniform(-3, 3, size=n)
    y = np.sin(x) + (0.1 + 0.15 * np.abs(x)) * rng.randn(n)
    return x[:, None], y


X_train, y_train = make_data(300)
X_cal, y_cal = make_data(300)
X_test, y_test = make_data(2000)

# %%
# A deep ensemble, trained on the training rows only
# --------------------------------------------------
# Each member learns one noise level for the whole input range, while the
# true noise std grows from 0.1 to 0.55.
model = DeepEnsembleRegressor(
    n_estimators=5,
    hidden_layer_sizes=(50,),
    max_epochs=200 if QUICK else 1000,
    random_state=0,
).fit(X_train, y_train)

mean, std = model.predict(X_test, return_std=True)
z = norm.ppf(0.5 + CONFIDENCE / 2)
model_covered = np.abs(y_test - mean) <= z * std
print(f"model's own {CONFIDENCE:.0%} band: coverage {model_covered.mean():.3f}")

# %%
# MAPIE: split conformal with the std-normalised score
# ----------------------------------------------------
# ``prefit=True``: the model is already fitted; ``conformalize`` only scores
# the calibration rows.
mapie = SplitConformalRegressor(
    model,
    confidence_level=CONFIDENCE,
    conformity_score="std_normalized",
    prefit=True,
)
mapie.conformalize(X_cal, y_cal)
point, intervals = mapie.predict_interval(X_test)
lower, upper = intervals[:, 0, 0], intervals[:, 1, 0]
covered = (y_test >= lower) & (y_test <= upper)
width = np.mean(upper - lower)
print(f"MAPIE {CONFIDENCE:.0%} interval: coverage {covered.mean():.3f}, mean width {width:.3f}")

# %%
# The same interval by hand
# -------------------------
# The score of each calibration row; ``q`` is the ``k``-th smallest, with
# ``k = ceil((n + 1) * confidence)``.
mean_cal, std_cal = model.predict(X_cal, return_std=True)
scores = np.abs(y_cal - mean_cal) / std_cal
n = len(scores)
k = int(np.ceil((n + 1) * CONFIDENCE))
q = np.sort(scores)[k - 1]
print(f"conformal quantile q = {q:.3f} (the Gaussian band uses z = {z:.3f})")
gap = np.max(np.abs(mean + q * std - upper))
print(f"upper bound, mean + q std vs MAPIE: largest difference {gap:.1e}")

# %%
# MAPIE 1.6 computes the two bounds of a symmetric score separately, and its
# rounding for the lower bound lands on the next smaller score, the
# ``(k - 1)``-th: its intervals are narrower below by one order statistic
# (here a few thousandths of a std). By hand:
q_lower = np.sort(scores)[k - 2]
gap = np.max(np.abs(mean - q_lower * std - lower))
print(f"lower bound, mean - q' std vs MAPIE: largest difference {gap:.1e}")

# %%
# Marginal, not conditional, coverage
# -----------------------------------
# The guarantee is over all test points together. Re-scaling keeps the shape
# of the model's band, so where that shape is wrong the coverage stays wrong:
# compare the rows with small and with large noise.
inner, outer = np.abs(X_test[:, 0]) < 1, np.abs(X_test[:, 0]) > 2
for label, rows in [("|x| < 1", inner), ("|x| > 2", outer)]:
    print(
        f"{label}: model band {model_covered[rows].mean():.3f}, "
        f"conformal {covered[rows].mean():.3f}"
    )

# %%
# The band before and after
# -------------------------
order = np.argsort(X_test[:, 0])
x = X_test[order, 0]
fig, ax = plt.subplots(figsize=(7, 4))
ax.scatter(X_test[:, 0], y_test, s=2, color="0.6", label="test data")
ax.plot(x, mean[order], color="C0", label="predictive mean")
ax.plot(x, (mean - z * std)[order], "C0--", linewidth=1, label=f"mean ± {z:.2f} std (model)")
ax.plot(x, (mean + z * std)[order], "C0--", linewidth=1)
ax.fill_between(x, lower[order], upper[order], color="C1", alpha=0.3, label="MAPIE conformal")
ax.set_title(f"{CONFIDENCE:.0%} intervals")
ax.legend(loc="upper left", fontsize="small")
fig.tight_layout()

plt.show()
