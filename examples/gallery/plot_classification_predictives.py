"""
===============================================
Five predictives for a Gaussian over the logits
===============================================

A :class:`~sklearn_quinn.LaplaceClassifier` with the linear pushforward gives,
at each input, a Gaussian ``N(mu, Sigma)`` over the logits. The class
probabilities are ``E[softmax(z)]`` under that Gaussian, which has no closed
form; ``predictive`` chooses how to approximate it:

* ``'mc_bridge'``: the softmax averaged over 1000 logit draws (the reference);
* ``'laplace_bridge'``: the mean of the Dirichlet the Gaussian is mapped to
  (Hobbhahn, Kristiadi & Hennig, 2022);
* ``'mean_field_0'``: each mean logit shrunk by its own variance, a probit-style
  approximation;
* ``'mean_field_1'``, ``'mean_field_2'``: pairwise approximations with the
  diagonal, then the full covariance (Lu, Ie & Sha, 2020).

One network is fitted on the two moons; ``predictive`` only acts at predict
time, so the other four are obtained with ``set_params`` on the same fitted
estimator. The panels show the probability of class 1 (red); the last one
is the softmax of the MAP network alone, without weight uncertainty.
"""

# %%
# Data and the fitted classifier
# ------------------------------
import os

import matplotlib.pyplot as plt
import numpy as np
from scipy.special import softmax
from sklearn.datasets import make_moons
from sklearn.model_selection import train_test_split

from sklearn_quinn import LaplaceClassifier
from sklearn_quinn.metrics import accuracy, categorical_nll, expected_calibration_error

QUICK = os.environ.get("SKLEARN_QUINN_QUICK", "0") not in ("", "0")

X, y = make_moons(n_samples=300, noise=0.25, random_state=0)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.5, random_state=0)

clf = LaplaceClassifier(
    hidden_layer_sizes=(50,),
    prior_precision="marglik",
    max_epochs=200 if QUICK else 1000,
    random_state=0,
)
clf.fit(X_train, y_train)

# %%
# Each predictive on the test rows
# --------------------------------
# Beside them, the MAP network's own softmax: the same network without its
# weight uncertainty.
predictives = ["mc_bridge", "laplace_bridge", "mean_field_0", "mean_field_1", "mean_field_2"]
xx, yy = np.meshgrid(np.linspace(-2, 3, 80), np.linspace(-1.5, 2, 60))
surface = np.c_[xx.ravel(), yy.ravel()]

probabilities = {}
for predictive in predictives:
    clf.set_params(predictive=predictive)
    proba = clf.predict_proba(X_test)
    probabilities[predictive] = clf.predict_proba(surface)[:, 1]
    print(
        f"{predictive:15s} NLL {categorical_nll(y_test, proba):.3f}   "
        f"accuracy {accuracy(y_test, proba):.3f}   "
        f"ECE {expected_calibration_error(y_test, proba):.3f}"
    )


def map_softmax(X):
    """Softmax of the MAP network's logits (``net_`` is the trained backbone)."""
    return softmax(clf.net_.forward(np.asarray(X, dtype=np.float64)).numpy(), axis=1)


proba = map_softmax(X_test)
probabilities["MAP softmax"] = map_softmax(surface)[:, 1]
print(
    f"{'MAP softmax':15s} NLL {categorical_nll(y_test, proba):.3f}   "
    f"accuracy {accuracy(y_test, proba):.3f}   "
    f"ECE {expected_calibration_error(y_test, proba):.3f}"
)

# %%
# Probability of class 1
# -----------------------
# Far from the data the weight uncertainty pulls every predictive towards 1/2;
# how far, and how smoothly, is where they differ.
fig, axes = plt.subplots(
    2, 3, figsize=(13, 7), sharex=True, sharey=True, layout="constrained"
)
for ax, (name, p) in zip(axes.ravel(), probabilities.items()):
    contour = ax.contourf(xx, yy, p.reshape(xx.shape), levels=np.linspace(0, 1, 11), cmap="RdBu_r")
    ax.scatter(*X_train.T, c=y_train, cmap="RdBu_r", edgecolors="k", s=15)
    ax.set_title(name)
fig.colorbar(contour, ax=axes, shrink=0.8, label="P(class 1)")

plt.show()
