"""
=======================================================
Tuning ``cov_scale`` with GridSearchCV and the test NLL
=======================================================

``LaplaceRegressor(cov_scale=s)`` uses the posterior ``N(theta*, (s H)^-1)``:
``s > 1`` narrows the Gaussian over the weights, ``s < 1`` widens it. Its
best value is a question for held-out data, and ``GridSearchCV`` can answer it
like any other hyperparameter once it scores the *predictive distribution*
rather than the point prediction: :data:`sklearn_quinn.metrics.neg_nll_scorer`
calls ``predict(X, return_std=True)`` and returns minus the mean Gaussian
negative log-likelihood (``score`` itself stays R², which ``cov_scale`` does
not change at all).

Every grid value here refits the network on each fold. When only the posterior
scale changes, :func:`sklearn_quinn.calibration.calibrate` searches the same
grid on held-out rows from one fit, without retraining or recomputing the
curvature; the last section does that for comparison.
"""

# %%
# Data and model
# --------------
import os

import matplotlib.pyplot as plt
from sklearn.datasets import load_diabetes
from sklearn.model_selection import GridSearchCV, KFold, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_quinn import LaplaceRegressor
from sklearn_quinn.calibration import calibrate
from sklearn_quinn.metrics import (
    gaussian_nll,
    interval_coverage,
    neg_crps_scorer,
    neg_nll_scorer,
)

QUICK = os.environ.get("SKLEARN_QUINN_QUICK", "0") not in ("", "0")

X, y = load_diabetes(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)

# Diabetes is small and noisy: a prior std of 0.3 on the weights keeps the MAP
# from fitting the noise (as in the quick start). The prior precision and the
# noise stay those the MAP was trained with, so cov_scale alone moves the band.
model = make_pipeline(
    StandardScaler(),
    LaplaceRegressor(prior_std=0.3, max_epochs=100 if QUICK else 1000, random_state=0),
)

# %%
# The search
# ----------
# ``refit="nll"`` picks the best NLL; the CRPS is recorded beside it.
cov_scales = [0.1, 1.0, 10.0] if QUICK else [0.03, 0.1, 0.3, 1.0, 3.0, 10.0]
search = GridSearchCV(
    model,
    {"laplaceregressor__cov_scale": cov_scales},
    scoring={"nll": neg_nll_scorer, "crps": neg_crps_scorer},
    refit="nll",
    cv=KFold(n_splits=2 if QUICK else 3, shuffle=True, random_state=0),
)
search.fit(X_train, y_train)

best = search.best_params_["laplaceregressor__cov_scale"]
print(f"best cov_scale by cross-validated NLL: {best}")
for s, nll, crps in zip(
    cov_scales, -search.cv_results_["mean_test_nll"], -search.cv_results_["mean_test_crps"]
):
    print(f"  cov_scale {s:6.2f}   NLL {nll:7.3f}   CRPS {crps:7.3f}")

# %%
# Cross-validated NLL against ``cov_scale``
# -----------------------------------------
fig, ax = plt.subplots(figsize=(6, 4))
ax.errorbar(
    cov_scales,
    -search.cv_results_["mean_test_nll"],
    yerr=search.cv_results_["std_test_nll"],
    marker="o",
    capsize=3,
)
ax.set_xscale("log")
ax.set_xlabel("cov_scale")
ax.set_ylabel("cross-validated Gaussian NLL")
ax.axvline(best, color="C1", linestyle="--", label=f"best: {best}")
ax.legend()
fig.tight_layout()

# %%
# The refitted model on the test rows
# -----------------------------------
mean, std = search.best_estimator_.predict(X_test, return_std=True)
print(
    f"test NLL {gaussian_nll(y_test, mean, std):.3f}, "
    f"95% coverage {interval_coverage(y_test, mean, std, level=0.95):.3f}"
)

# %%
# The same grid without refitting: ``calibrate``
# ----------------------------------------------
# One fit on 75% of the training rows; the grid is scored on the other 25%,
# each value by re-scaling the fitted posterior (no new MAP, no new curvature).
X_fit, X_val, y_fit, y_val = train_test_split(X_train, y_train, test_size=0.25, random_state=0)
scaler = StandardScaler().fit(X_fit)
laplace = LaplaceRegressor(prior_std=0.3, max_epochs=100 if QUICK else 1000, random_state=0)
laplace.fit(scaler.transform(X_fit), y_fit)
result = calibrate(laplace, scaler.transform(X_val), y_val, param="cov_scale", grid=cov_scales)
print(f"best cov_scale by validation NLL: {result.best_value}")
mean, std = laplace.predict(scaler.transform(X_test), return_std=True)
print(
    f"test NLL {gaussian_nll(y_test, mean, std):.3f}, "
    f"95% coverage {interval_coverage(y_test, mean, std, level=0.95):.3f}"
)

plt.show()
