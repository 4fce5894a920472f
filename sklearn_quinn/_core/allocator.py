"""glibc's malloc thresholds pinned at the top of their own dynamic range.

Torch takes a CPU tensor's memory from the C library's ``malloc``. glibc's
serves a request of at least its *mmap threshold* with a fresh ``mmap`` and
unmaps it on ``free``, and gives the free memory at the top of a heap back
to the system once it exceeds its *trim threshold*; either way the next
tensor of that size faults its pages in again, and zeroes them. Both
thresholds start at 128 KiB; freeing a mapped block raises the mmap
threshold to its size and the trim threshold to twice that, up to 32 MiB
and 64 MiB on a 64-bit machine (mallopt(3)). The samplers' hot loops (a
leapfrog step's gradient over a block of weight rows, whose activations are
a few MiB, the blocks' sizes changing as trajectories end) free more than
the trim threshold reached by then at every step, and fault it back in at
the next (``benchmarks/bench_smc_speed.py --only malloc`` measures what that
costs an SMC fit).

:func:`pin_malloc_thresholds` sets the two thresholds to that ceiling once
per process, before a fit on the CPU: the state glibc's own thresholds reach
after a 32 MiB block is freed, without waiting for one. Blocks of up to
32 MiB then come from malloc's heaps, and up to 64 MiB of free memory stays
at the top of each heap, as glibc keeps them once at the ceiling; freed
blocks below a heap's top stay with the process, as they do in any heap.

It leaves the allocator alone where the process sets glibc's malloc
thresholds itself (the environment variables of ``_MALLOC_ENVIRONMENT``, or
their tunables in ``GLIBC_TUNABLES``, ``_MALLOC_TUNABLES``; setting any of
them turns glibc's dynamic thresholds off), where
``SKLEARN_QUINN_PIN_MALLOC=0`` asks it to, off glibc, and on a 32-bit
machine, whose ceiling is another. An allocator preloaded in glibc's place
(jemalloc, tcmalloc) does not read glibc's thresholds: the pin changes
nothing there.
"""

import os
import sys

#: ``mallopt``'s parameter numbers (glibc's malloc.h).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3

#: glibc's ceiling of its dynamic mmap threshold on a 64-bit machine
#: (``DEFAULT_MMAP_THRESHOLD_MAX``), and the trim threshold that it sets with it, twice as large.
MMAP_THRESHOLD = 32 * 2**20
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD

#: The environment variables by which a process sets glibc's malloc thresholds itself, and the
#: same settings as tunables of ``GLIBC_TUNABLES`` (glibc's others, ``arena_max`` say, leave the pin).
_MALLOC_ENVIRONMENT = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")
_MALLOC_TUNABLES = ("glibc.malloc.mmap_threshold", "glibc.malloc.trim_threshold", "glibc.malloc.top_pad",
                    "glibc.malloc.mmap_max")

#: The environment variable that, set to "0", leaves glibc's malloc as it is.
PIN_MALLOC_VARIABLE = "SKLEARN_QUINN_PIN_MALLOC"

# Once per process: a pin that could not be made is not tried again at every fit.
_pinned = False


def _glibc():
    """The C library's ``mallopt`` where the library is a 64-bit glibc, else None."""
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc") or sys.maxsize < 2**32:
            return None
        import ctypes  # here: a Python built without ctypes still fits

        return getattr(ctypes.CDLL(None), "mallopt", None)
    except (AttributeError, ValueError, OSError, ImportError):  # no confstr (Windows), no such name (macOS), ...
        return None


def _left_as_it_is():
    """Whether the process asks for glibc's malloc to be left as it is (the module's docstring)."""
    tunables = [setting.split("=")[0] for setting in os.environ.get("GLIBC_TUNABLES", "").split(":")]
    return (os.environ.get(PIN_MALLOC_VARIABLE) == "0" or any(name in os.environ for name in _MALLOC_ENVIRONMENT)
            or any(name in tunables for name in _MALLOC_TUNABLES))


def pin_malloc_thresholds():
    """Set glibc's mmap and trim thresholds to their dynamic ceiling, once per process
    (see the module's docstring); a no-op after the first call, where the process leaves
    the allocator as it is, and off a 64-bit glibc. Never raises: the pin is for speed."""
    global _pinned
    if _pinned:
        return
    _pinned = True
    mallopt = None if _left_as_it_is() else _glibc()
    # The trim threshold only with the mmap one: setting it alone would turn the dynamic mmap
    # threshold off at 128 KiB, where every activation would be mapped afresh.
    if mallopt is not None and mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1:
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
