"""glibc's malloc thresholds pinned at the top of their own dynamic range.

Torch takes a CPU tensor's memory from the C library's ``malloc``. glibc's
serves a request of at least its *mmap threshold* with a fresh ``mmap`` and
unmaps it on ``free``, and gives the free memory at the top of its heap back
to the system once it exceeds its *trim threshold*; either way the next
tensor of that size faults its pages in again, and zeroes them. Both
thresholds start at 128 KiB and rise with the largest mapped block freed so
far, up to 32 MiB and 64 MiB on a 64-bit machine (mallopt(3)). The samplers'
hot loops (a leapfrog step's gradient over a block of weight rows, whose
activations are a few MiB, the blocks' sizes changing as trajectories end)
free more than the trim threshold reached by then at every step, and fault
it back in at the next (benchmarks/bench_malloc_thresholds.py measures what
that costs an SMC fit).

:func:`pin_malloc_thresholds` sets the two thresholds to that ceiling once
per process, before a fit: what glibc would itself adapt to after freeing one
32 MiB block, without waiting for it. It costs at most 64 MiB of freed memory
kept for reuse. It leaves the allocator alone where the process sets
glibc's malloc itself (``MALLOC_*_`` variables or ``GLIBC_TUNABLES``), and on
a C library other than glibc, whose allocators differ.
"""

import ctypes
import os
import platform

#: ``mallopt``'s parameter numbers (glibc's malloc.h).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3

#: glibc's ceiling of its dynamic mmap threshold on a 64-bit machine
#: (``DEFAULT_MMAP_THRESHOLD_MAX``), and the trim threshold that it sets with it, twice as large.
MMAP_THRESHOLD = 32 * 2**20
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD

#: The environment variables by which a process sets glibc's malloc itself.
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")

_pinned = False


def _glibc():
    """The C library where it is glibc, else None."""
    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def _set_by_user():
    return any(name in os.environ for name in _USER_SETTINGS) or "glibc.malloc." in os.environ.get(
        "GLIBC_TUNABLES", "")


def pin_malloc_thresholds():
    """Set glibc's mmap and trim thresholds to their dynamic ceiling, once per process
    (see the module's docstring); a no-op after the first call, where the process sets
    the allocator itself, and off glibc."""
    global _pinned
    if _pinned:
        return
    _pinned = True
    libc = None if _set_by_user() else _glibc()
    if libc is not None:
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
