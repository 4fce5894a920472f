"""Shared fixtures."""

import os
import re

import numpy as np
import pytest
import torch


def pytest_configure(config):
    # Under pytest-xdist each worker is a process of its own: one thread apiece,
    # so that the workers share the cores instead of oversubscribing them.
    if os.environ.get("PYTEST_XDIST_WORKER"):
        torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def seeded_torch():
    """Every test starts from one state of torch's global generator. A module a test builds
    (``nn.Linear(3, 2)``) takes its initial weights from it, and an estimator fits from a deep
    copy of them: unseeded, a fit to a tolerance of 1e-6 passed or failed by the run (and by
    which tests an xdist worker had run before it)."""
    torch.manual_seed(0)


@pytest.fixture(
    params=["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA"))]
)
def device(request):
    """Each device the test runs on: the CPU, and CUDA where the machine has it."""
    return request.param


@pytest.fixture
def linear_data():
    rng = np.random.RandomState(0)
    X = rng.randn(40, 3)
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.5 + 0.3 * rng.randn(40)
    return X, y


@pytest.fixture
def wave_data():
    rng = np.random.RandomState(1)
    X = rng.uniform(-2, 2, size=(80, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.randn(80)
    return X, y


@pytest.fixture(
    params=[
        torch._dynamo.exc.TorchDynamoException("no C++ compiler\nmore detail"),
        # What torch 2.11's frame check raised after a graph break: an internal error, not dynamo's own.
        IndexError("tuple index out of range"),
    ],
    ids=["no-backend", "internal-error"],
)
def no_compiler(request, monkeypatch):
    """``torch.compile`` as it fails on the compiled function's first call: on a machine
    without a C++ compiler, or by an internal error of the compiler. Gives the warning's
    text of the error, as a pattern."""
    from sklearn_quinn._core import compiling

    def failing_compile(function, dynamic=None, fullgraph=False, options=None):
        def call(*args, **kwargs):
            raise request.param

        return call

    monkeypatch.setattr(compiling.torch, "compile", failing_compile)
    return re.escape(f"{type(request.param).__name__}: {str(request.param).splitlines()[0]}")


@pytest.fixture
def float32_kicks(monkeypatch):
    """The row counts of the float32 gradients a sampler's leapfrog steps took (a state
    likelihood's ``surrogate`` after ``set_surrogate_dtype(torch.float32)``), call by call."""
    from sklearn_quinn._core.likelihoods import CastLikelihood

    rows, cheaper = [], CastLikelihood.value_and_grad
    monkeypatch.setattr(CastLikelihood, "value_and_grad",
                        lambda self, moved: rows.append(len(moved)) or cheaper(self, moved))
    return rows
