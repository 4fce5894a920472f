"""A user's ``module``: its outputs must be what the likelihood reads, else the fit refuses it before training."""

import numpy as np
import pytest
import torch
from torch import nn

import sklearn_quinn
from sklearn_quinn import LaplaceClassifier, LaplaceRegressor

REGRESSORS = [getattr(sklearn_quinn, name) for name in sklearn_quinn.__all__ if name.endswith("Regressor")]
CLASSIFIERS = [getattr(sklearn_quinn, name) for name in sklearn_quinn.__all__ if name.endswith("Classifier")]


def network(n_outputs):
    return nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, n_outputs))


class Pair(nn.Module):
    """Returns its outputs with its inputs, as a tuple."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 1)

    def forward(self, X):
        return self.linear(X), X


class Flat(nn.Module):
    """One output as a vector ``(n,)``, not a column."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 1)

    def forward(self, X):
        return self.linear(X)[:, 0]


def refused(estimator, X, y, message):
    with pytest.raises(ValueError, match=message):
        estimator.fit(X, y)


@pytest.mark.parametrize("estimator", REGRESSORS, ids=lambda estimator: estimator.__name__)
def test_every_regressor_refuses_a_module_of_the_wrong_width(estimator):
    """Three outputs for one target were trained and read in part (the first), or failed in a broadcast."""
    X = np.random.RandomState(0).randn(20, 3)
    refused(estimator(module=network(3), max_epochs=2), X, X[:, 0],
            r"module must return a tensor of shape \(n_samples, 1\), one mean per target.*returned shape \(2, 3\)")
    refused(estimator(module=network(1), likelihood="heteroscedastic", max_epochs=2), X, X[:, 0],
            r"shape \(n_samples, 2\), a mean and a log noise std per target.*returned shape \(2, 1\)")


@pytest.mark.parametrize("estimator", CLASSIFIERS, ids=lambda estimator: estimator.__name__)
def test_every_classifier_refuses_a_module_of_the_wrong_width(estimator):
    """One logit for a binary problem failed with an index error deep in the likelihood; five for three
    classes predicted probabilities of five columns."""
    X = np.random.RandomState(0).randn(30, 3)
    refused(estimator(module=network(1), max_epochs=2), X, X[:, 0] > 0,
            r"\(n_samples, 2\), one logit per class in classes_ \(2; a binary problem takes two")
    refused(estimator(module=network(5), max_epochs=2), X, np.arange(30) % 3, r"\(n_samples, 3\).*shape \(2, 5\)")


def test_a_module_returning_a_tuple_is_refused():
    X = np.random.RandomState(0).randn(20, 3)
    refused(LaplaceRegressor(module=Pair()), X, X[:, 0], "on 2 rows it returned tuple")
    refused(LaplaceClassifier(module=lambda n_features, n_outputs: Pair()), X, X[:, 0] > 0, "returned tuple")


def test_the_outputs_check_leaves_the_module_it_trains_untouched():
    """A layer that sets itself up on its first call (as ActNorm does) must see the training data, not
    the check's two rows of zeros."""

    class FirstCallRecorded(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(3, 1)
            self.register_buffer("first_rows", torch.tensor(0))

        def forward(self, X):
            if not self.first_rows:
                self.first_rows.fill_(len(X))
            return self.linear(X)

    X = np.random.RandomState(0).randn(20, 3)
    reg = LaplaceRegressor(module=FirstCallRecorded(), max_epochs=2).fit(X, X[:, 0])
    assert int(reg.net_.module_.first_rows) == 20


def test_a_module_with_frozen_parameters_is_refused():
    """A frozen layer's weights were put in the posterior and moved by every family but Laplace."""
    module = network(1)
    module[0].requires_grad_(False)
    X = np.random.RandomState(0).randn(20, 3)
    refused(LaplaceRegressor(module=module), X, X[:, 0], r"'0.weight', '0.bias' do not require gradients.*buffer")


def test_a_module_built_for_other_features_is_named():
    X = np.random.RandomState(0).randn(20, 3)
    refused(LaplaceRegressor(module=nn.Linear(5, 1)), X, X[:, 0], "module failed on 2 rows of the data's 3 features")


def test_a_module_with_one_flat_output_fits_one_target():
    X = np.random.RandomState(0).randn(20, 3)
    mean, std = LaplaceRegressor(module=Flat(), max_epochs=5).fit(X, X[:, 0]).predict(X, return_std=True)
    assert mean.shape == std.shape == (20,) and np.all(np.isfinite(std))
