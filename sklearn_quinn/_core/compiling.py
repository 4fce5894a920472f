"""``torch.compile`` with a fallback to eager execution, and when compiling pays."""

import warnings

import torch

#: The cost model of an eager batched gradient of the default MLP (float64, one
#: CPU thread): a fixed cost per call (torch's dispatch of some twenty small
#: operations) plus one per multiply-add of the forward pass (chains x rows x
#: weights), fitted to HMC steps of 4 chains on 300 to 7373 rows
#: (``benchmarks/bench_mcmc_compile.py --steps`` prints the model beside the
#: measured times).
EAGER_SECONDS_PER_CALL = 2.2e-4
EAGER_SECONDS_PER_MULTIPLY_ADD = 5.3e-10

#: ``torch.compile`` of an HMC or NUTS step costs tens of seconds on a CPU the
#: first time in a process, and the compiled steps take about half the eager
#: time (the same benchmark): compiling pays once it saves about half of the
#: eager time, where the eager run would take more than this.
COMPILE_PAYS_AFTER_SECONDS = 60.0


def eager_seconds(n_gradients, multiply_adds):
    """The cost model's eager seconds of ``n_gradients`` batched gradient
    evaluations, each of ``multiply_adds`` in its forward pass."""
    return n_gradients * (EAGER_SECONDS_PER_CALL + EAGER_SECONDS_PER_MULTIPLY_ADD * multiply_adds)


def compile_pays(n_gradients, multiply_adds):
    """Whether compiling a run of ``n_gradients`` batched gradient evaluations
    (each of ``multiply_adds`` in its forward pass) saves more than it costs.

    A cost model rather than a stopwatch, so that the choice, and with it the
    results of a seeded run, do not depend on the machine's load.
    """
    return eager_seconds(n_gradients, multiply_adds) > COMPILE_PAYS_AFTER_SECONDS


def compiled_or_eager(function):
    """``function`` compiled by ``torch.compile`` on its first call, or eager if that fails.

    Compilation needs a working backend (on a CPU, a C++ compiler); when it
    fails (``torch._dynamo`` raises), a ``UserWarning`` names the error and
    every call, this one included, runs ``function`` eagerly. Shapes, dtypes
    and Python constants of the first call are specialised on; a later call
    that differs recompiles (with dynamic shapes from the second shape on).
    """
    fast = torch.compile(function)
    failed = False

    def call(*args, **kwargs):
        nonlocal failed
        if not failed:
            try:
                return fast(*args, **kwargs)
            except torch._dynamo.exc.TorchDynamoException as error:
                failed = True
                warnings.warn(
                    f"torch.compile failed ({type(error).__name__}: {str(error).splitlines()[0]}); "
                    f"running {function.__name__} eagerly.",
                    UserWarning,
                    stacklevel=2,
                )
        return function(*args, **kwargs)

    return call
