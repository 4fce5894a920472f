"""``torch.compile`` with a fallback to eager execution, and when compiling pays."""

import types

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

#: What compiling HMC's transition or a NUTS half (each one graph, its leapfrog
#: steps a ``while_loop``: :func:`repeat`) is taken to cost: compiling pays where
#: it saves more. Measured (the same benchmark, ``--compile-seconds``), the
#: compiler's start-up takes 10-12 s the first time in a process and the default
#: network's HMC transition 8-9 s more with an empty compiler cache, 6-7 s
#: together with a warm one: 30 s is a first compilation on a machine about
#: half as fast. The savings above were fitted with float64 kicks; the float32
#: ones of the default ``leapfrog_dtype`` save less near the threshold.
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


def compiled_or_eager(function, dynamic=False):
    """``function`` compiled by ``torch.compile`` on its first call, or eager if that fails.

    Compilation needs a working backend (on a CPU, a C++ compiler); when it
    fails, a ``UserWarning`` names the error and every call, this one
    included, runs ``function`` eagerly. Any exception counts as a failure,
    not only ``torch._dynamo``'s own: the compiler's internal errors escape
    as plain ones (torch 2.11 raised an ``IndexError`` from its frame check
    after a graph break). A graph break is a failure too (``fullgraph=True``):
    where torch would otherwise run the function's frame eagerly and compile
    the pieces around the break, each on its own guards, silently (a
    ``torch.while_loop`` of :func:`repeat` cannot be split at all). An error
    of ``function`` itself is raised again by the eager call. With
    ``dynamic=False`` shapes, dtypes and Python constants of the first call are
    specialised on, and a later call that differs compiles anew for its own
    (torch's default, dynamic shapes from the second shape on, failed to lower
    the ``torch.while_loop`` of :func:`repeat` in torch 2.13: ``KeyError:
    'unbacked_bindings'``); ``dynamic=True`` compiles for any sizes from the
    first call. ``function`` is compiled with a code object of its own
    (:func:`_with_own_code`).
    """
    # Without inductor's size asserts: they check each generated call's outputs against the
    # shapes the graph was compiled for, at every call, a debugging aid that cost HMC's compiled
    # trajectory 7% of its time on the default network.
    options = {"size_asserts": False}
    if not dynamic:
        # With static shapes, only the tensors' guards (dtype, device, shape, strides) are checked
        # at each call, not the identities, types and Python values of the objects the function
        # reads (about 170 on an MCMC density: another 7% of HMC's time). The function, with its
        # own code object, serves one sampler's kernel over one density for the kernel's life, and
        # no fit changes what those guards check (no recompilation in an MCMC fit with Gibbs draws
        # of the hyperparameters: tested, and the compiled draws follow the eager ones).
        options["guard_filter_fn"] = torch.compiler.keep_tensor_guards_unsafe
    fast = torch.compile(_with_own_code(function), dynamic=dynamic, fullgraph=True, options=options)
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


def _with_own_code(function):
    """``function`` (or a bound method) with a code object of its own.

    ``torch.compile`` keeps its graphs, and counts its recompilations, per code object: the
    closures every fit builds (a sampler's kernel over its density, a likelihood's bound
    gradient) share their function's code, so each fit recompiled on the one before's
    entries, and the ninth in a process met the recompilation limit and ran eagerly. Each
    compiled function now starts its own count. (The compiler's on-disk cache of generated
    code is keyed by the graph, and still serves a like fit.)"""
    if isinstance(function, types.MethodType):
        return types.MethodType(_with_own_code(function.__func__), function.__self__)
    own = types.FunctionType(function.__code__.replace(), function.__globals__, function.__name__,
                             function.__defaults__, function.__closure__)
    own.__kwdefaults__, own.__qualname__ = function.__kwdefaults__, function.__qualname__
    return own


def repeat(body, carried, n_steps, until=None):
    """``carried = body(step, *carried)`` for ``step`` in ``range(n_steps)``, ending early at
    the first ``carried`` for which ``until(*carried)`` is True; returns the last ``carried``.

    Eagerly a Python loop (``step`` an int). Traced by ``torch.compile``, one
    ``torch.while_loop`` (``step`` a 0-d tensor, ``n_steps`` an int or a 0-d tensor), whose
    graph holds ``body`` once: an unrolled loop compiles each step apart (an HMC trajectory
    of 40 steps took 40 times as long to compile as one step), and one compiled step called
    from an eager loop pays the compiled call's overhead at every step. ``body`` returns new
    tensors of the shapes and dtypes it was given (``torch.while_loop``'s restrictions), and
    reads any per-step input with :func:`row`.
    """
    if torch.compiler.is_compiling():
        def going(step, *carried):
            within = step < n_steps
            return within if until is None else within & ~until(*carried)

        def counted_body(step, *carried):
            return step + 1, *body(step, *carried)

        start = torch.zeros((), dtype=torch.int64)  # a CPU scalar: the loop's control runs on the host
        return tuple(torch.while_loop(going, counted_body, (start, *carried))[1:])
    for step in range(int(n_steps)):
        carried = tuple(body(step, *carried))
        if until is not None and bool(until(*carried)):
            break
    return carried


def row(tensor, step):
    """``tensor[step]`` at a step of :func:`repeat`: ``step`` an int eagerly, a 0-d tensor in a
    compiled loop, where indexing by it would read its value out of the graph."""
    return tensor[step] if isinstance(step, int) else tensor.index_select(0, step.reshape(1)).squeeze(0)
