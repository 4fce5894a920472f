"""``torch.compile`` with a fallback to eager execution, and when compiling pays."""

import torch

from .._warnings import warn

#: What compiling saves on a batched gradient of the default MLP (float64, one
#: CPU thread): the matrix products run in the same BLAS either way, so the
#: saving is torch's dispatch of some twenty small operations a call, and the
#: element-wise passes over the activations (chains x rows x the layers'
#: output units) that the compiled kernels fuse; the inputs' width hardly
#: matters. Fitted to HMC steps of 4 chains of the one-output network on
#: tables of 300 to 7373 rows (``benchmarks/bench_mcmc_compile.py --steps``
#: prints the model beside the measured savings), after the eager pass began
#: running its activations and their backward passes in place: a network of
#: several outputs saves more a point than this (10 outputs, about 1.7 times),
#: and the model leaves it eager where compiling might just pay.
SAVED_SECONDS_PER_CALL = 2.9e-4
SAVED_SECONDS_PER_ACTIVATION = 8.5e-10

#: What compiling an HMC or NUTS leapfrog step is taken to cost: compiling pays
#: where it saves more. Measured (the same benchmark, ``--compile-seconds``), the
#: compiler's start-up takes 10-12 s the first time in a process and the default
#: network's step graph 4 s more with an empty compiler cache, 4-6 s together
#: with a warm one. The savings above were fitted when a whole trajectory was
#: one graph (then 20-50 s to compile), which saved more a gradient than a
#: compiled step does between eager ones; the cost is kept at its old value,
#: which leaves a table near the threshold eager.
COMPILE_SECONDS = 30.0

#: ``torch.compile`` of a likelihood's gradient over one block of weight rows
#: (a forward and a backward pass of the network, no trajectory) costs 10-12 s
#: on a CPU in a fresh process with an empty compiler cache (one graph with a
#: dynamic number of rows; ``benchmarks/bench_smc_speed.py --only compile``).
BLOCK_COMPILE_SECONDS = 12.0


def saved_seconds(n_calls, activations):
    """The cost model's seconds saved by compiling ``n_calls`` batched gradient
    calls over ``activations`` activations in all (weight rows x points x the
    layers' output units, summed over the calls)."""
    return n_calls * SAVED_SECONDS_PER_CALL + SAVED_SECONDS_PER_ACTIVATION * activations


def compiled_savings(n_gradients, activations):
    """The cost model's seconds saved by compiling ``n_gradients`` batched
    gradient evaluations, each over ``activations`` activations (chains x rows
    x the layers' output units)."""
    return saved_seconds(n_gradients, n_gradients * activations)


def compile_pays(n_gradients, activations):
    """Whether compiling a run of ``n_gradients`` batched gradient evaluations,
    each over ``activations`` activations, saves more than it costs.

    A cost model rather than a stopwatch, so that the choice, and with it the
    results of a seeded run, do not depend on the machine's load.
    """
    return compiled_savings(n_gradients, activations) > COMPILE_SECONDS


def compiled_or_eager(function, dynamic=None):
    """``function`` compiled by ``torch.compile`` on its first call, or eager if that fails.

    Compilation needs a working backend (on a CPU, a C++ compiler); when it
    fails, a ``UserWarning`` names the error and every call, this one
    included, runs ``function`` eagerly. Any exception counts as a failure,
    not only ``torch._dynamo``'s own: the compiler's internal errors escape
    as plain ones (torch 2.11 raised an ``IndexError`` from its frame check
    after a graph break). An error of ``function`` itself is raised again by
    the eager call. With
    ``dynamic=None`` shapes, dtypes and Python constants of the first call are
    specialised on, and a later call that differs recompiles (with dynamic
    shapes from the second shape on); ``dynamic=True`` compiles for any sizes
    from the first call.
    """
    fast = torch.compile(function, dynamic=dynamic)
    failed = False

    def call(*args, **kwargs):
        nonlocal failed
        if not failed:
            try:
                return fast(*args, **kwargs)
            except Exception as error:
                failed = True
                warn(
                    f"torch.compile failed ({type(error).__name__}: {str(error).splitlines()[0]}); "
                    f"running {function.__name__} eagerly."
                )
        return function(*args, **kwargs)

    return call
