"""
==========================================================
Choosing an architecture by its evidence on iris, with SMC
==========================================================

:class:`~sklearn_quinn.SMCClassifier` anneals particles from the prior to the
posterior and estimates, along the way, the model evidence ``log p(y | X, M)``:
how probable the labels are under architecture ``M`` with its weights
integrated out against the prior. The evidence pays for flexibility, so it can
choose an architecture from the training data alone, without a validation
split.

:class:`~sklearn_quinn.model_selection.EvidenceSearch` fits every candidate of
a grid, turns the evidences into posterior model probabilities
``p(M | y) ∝ p(y | M)`` and predicts with the Bayesian model average: the
mixture of the candidates' predictive distributions.

This is the SMC talk's iris experiment in miniature (the full one, with its 10
architectures and 5 seeds, is ``benchmarks/bench_smc_iris.py``): a logistic
prior of scale 1 on every weight, an 80:20 split.
"""

# %%
# Candidates and their evidence
# -----------------------------
import math
import os

import matplotlib.pyplot as plt
from sklearn.datasets import load_iris
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_quinn import SMCClassifier
from sklearn_quinn.model_selection import EvidenceSearch

QUICK = os.environ.get("SKLEARN_QUINN_QUICK", "0") not in ("", "0")

X, y = load_iris(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)

classifier = SMCClassifier(
    prior="logistic",
    prior_std=math.pi / math.sqrt(3),  # a logistic of scale 1
    n_particles=20 if QUICK else 200,
    n_leapfrog=10 if QUICK else 50,
    random_state=0,
)
architectures = [(1,), (3,), (2, 2)] if QUICK else [(1,), (2,), (3,), (4,), (5,), (1, 1), (2, 2), (3, 3)]
search = EvidenceSearch(
    make_pipeline(StandardScaler(), classifier),
    {"smcclassifier__hidden_layer_sizes": architectures},
).fit(X_train, y_train)

for params, evidence, probability in zip(
    search.results_["params"], search.results_["log_evidence"], search.results_["probability"]
):
    sizes = str(params["smcclassifier__hidden_layer_sizes"])
    print(f"{sizes:8s} log evidence {evidence:8.2f}   p(M | y) {probability:.3f}")

# %%
# The chosen model and the model average
# --------------------------------------
# The average weighs each candidate's predictive distribution by ``p(M | y)``;
# when one candidate dominates it is close to that candidate alone.
print("chosen:", search.best_params_)
print(f"test accuracy, chosen model: {search.best_estimator_.score(X_test, y_test):.3f}")
print(f"test accuracy, model average: {search.score(X_test, y_test):.3f}")

names = [str(params["smcclassifier__hidden_layer_sizes"]) for params in search.results_["params"]]
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
left.bar(names, search.results_["log_evidence"])
left.set_ylabel("log evidence")
left.set_xlabel("hidden layers")
right.bar(names, search.results_["probability"])
right.set_ylabel("posterior model probability")
right.set_xlabel("hidden layers")
for axis in (left, right):
    axis.tick_params(axis="x", rotation=45)
fig.tight_layout()

# %%
# Stages of the annealing
# -----------------------
# Each candidate reached the posterior through its own sequence of tempering
# exponents, chosen so that every step keeps half of the particles' effective
# sample size.
fig, axis = plt.subplots(figsize=(5, 3.5))
for name, pipeline in zip(names, search.estimators_):
    axis.plot(pipeline[-1].lambdas_, marker=".", label=name)
axis.set_yscale("symlog", linthresh=1e-3)
axis.set_xlabel("stage")
axis.set_ylabel("tempering exponent")
axis.legend(fontsize="small")
fig.tight_layout()
plt.show()
