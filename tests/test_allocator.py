"""glibc's malloc thresholds pinned once per process, before a fit (sklearn_quinn._core.allocator)."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from joblib import parallel_config

from sklearn_quinn import DeepEnsembleRegressor, LaplaceRegressor, MCMCRegressor, base
from sklearn_quinn._core import allocator

_ENVIRONMENT = (*allocator._MALLOC_ENVIRONMENT, "GLIBC_TUNABLES", allocator.PIN_MALLOC_VARIABLE)


class RecordingMallopt:
    """glibc's ``mallopt`` that records its calls, answering ``result``."""

    def __init__(self, result=1):
        self.calls, self.result = [], result

    def __call__(self, parameter, value):
        self.calls.append((parameter, value))
        return self.result


@pytest.fixture
def mallopt(monkeypatch):
    """A recording ``mallopt`` in glibc's place, in a process whose thresholds are not yet pinned
    and whose environment leaves glibc's malloc to the pin."""
    recording = RecordingMallopt()
    monkeypatch.setattr(allocator, "_glibc", lambda: recording)
    monkeypatch.setattr(allocator, "_pinned", False)
    for name in _ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    return recording


PINNED = [(allocator.M_MMAP_THRESHOLD, 32 * 2**20), (allocator.M_TRIM_THRESHOLD, 64 * 2**20)]


def test_thresholds_are_pinned_at_glibcs_ceiling_once(mallopt):
    allocator.pin_malloc_thresholds()
    allocator.pin_malloc_thresholds()
    assert mallopt.calls == PINNED


def test_a_refused_mmap_threshold_leaves_the_trim_threshold(mallopt):
    """The trim threshold alone would turn glibc's dynamic mmap threshold off at 128 KiB."""
    mallopt.result = 0
    allocator.pin_malloc_thresholds()
    assert mallopt.calls == PINNED[:1]


def test_a_fit_on_the_cpu_pins_them(mallopt):
    rng = np.random.RandomState(0)
    LaplaceRegressor(hidden_layer_sizes=(3,), max_epochs=2, random_state=0).fit(rng.randn(10, 2), rng.randn(10))
    assert mallopt.calls == PINNED


def test_a_fit_on_another_device_leaves_them(mallopt):
    estimator = LaplaceRegressor()
    estimator._device = torch.device("cuda")  # a device object needs no GPU
    estimator._pin_malloc()
    assert mallopt.calls == []


@pytest.mark.parametrize("estimator", [
    MCMCRegressor(hidden_layer_sizes=(3,), n_samples=4, n_burnin=4, n_chains=2, n_jobs=2, max_epochs=2),
    DeepEnsembleRegressor(hidden_layer_sizes=(3,), n_estimators=2, n_jobs=2, max_epochs=2),
], ids=["mcmc", "deep ensemble"])
def test_every_worker_of_n_jobs_pins_them(monkeypatch, estimator):
    """A worker process of ``n_jobs`` is a process of its own: its group pins its thresholds
    (here threads, which count the calls)."""
    calls = []
    monkeypatch.setattr(base, "pin_malloc_thresholds", lambda: calls.append(1))
    rng = np.random.RandomState(0)
    with parallel_config(backend="threading"):
        estimator.set_params(random_state=0).fit(rng.randn(10, 2), rng.randn(10))
    assert len(calls) == 3  # the fit's own and one per group


@pytest.mark.parametrize("name, value", [
    ("MALLOC_TRIM_THRESHOLD_", "131072"),
    ("MALLOC_MMAP_THRESHOLD_", "131072"),
    ("MALLOC_TOP_PAD_", "0"),
    ("MALLOC_MMAP_MAX_", "0"),
    ("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=131072"),
    ("GLIBC_TUNABLES", "glibc.cpu.hwcaps=-AVX512F:glibc.malloc.mmap_threshold=131072"),
    ("SKLEARN_QUINN_PIN_MALLOC", "0"),
])
def test_a_process_that_sets_glibcs_malloc_keeps_its_settings(mallopt, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    allocator.pin_malloc_thresholds()
    assert mallopt.calls == []


@pytest.mark.parametrize("name, value", [("GLIBC_TUNABLES", "glibc.cpu.hwcaps=-AVX512F"),
                                         ("GLIBC_TUNABLES", "glibc.malloc.arena_max=2"),
                                         ("SKLEARN_QUINN_PIN_MALLOC", "1")])
def test_other_settings_leave_the_pin(mallopt, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    allocator.pin_malloc_thresholds()
    assert mallopt.calls == PINNED


def _raises(error):
    def confstr(name):
        raise error

    return confstr


@pytest.mark.parametrize("confstr", [
    pytest.param(_raises(OSError(22, "Invalid argument")), id="musl: EINVAL"),
    pytest.param(_raises(ValueError("unrecognized configuration name")), id="macOS: no such name"),
    pytest.param(None, id="Windows: no confstr"),
    pytest.param(lambda name: None, id="no answer"),
])
def test_another_c_library_is_left_alone(monkeypatch, confstr):
    if confstr is None:
        monkeypatch.delattr(os, "confstr")
    else:
        monkeypatch.setattr(os, "confstr", confstr)
    assert allocator._glibc() is None


def test_a_32_bit_glibc_is_left_alone(monkeypatch):
    """Its ceiling is 512 KiB, not 32 MiB."""
    monkeypatch.setattr(os, "confstr", lambda name: "glibc 2.36")
    monkeypatch.setattr(allocator.sys, "maxsize", 2**31 - 1)
    assert allocator._glibc() is None


# Run in a fresh interpreter, after the pin or without it: allocate 16 MiB and print whether glibc
# mapped it afresh (a block of mallinfo2's hblks: the mmap threshold), then free 20 MiB of 64 KiB
# blocks, below either mmap threshold, and print whether the heap kept 16 MiB of them at its top
# (mallinfo2's keepcost: the trim threshold). The module is loaded from its file alone.
_MAPPED = """
import ctypes, importlib.util, sys
spec = importlib.util.spec_from_file_location("allocator", sys.argv[1])
allocator = importlib.util.module_from_spec(spec)
spec.loader.exec_module(allocator)
if sys.argv[2] == "pin":
    allocator.pin_malloc_thresholds()
class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype, libc.malloc.restype = MallInfo2, ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
before = libc.mallinfo2().hblks
block = libc.malloc(16 * 2**20)
blocks = [libc.malloc(2**16) for _ in range(320)]
for small in reversed(blocks):
    libc.free(small)
print(libc.mallinfo2().hblks - before, int(libc.mallinfo2().keepcost >= 16 * 2**20))
"""


def _has_mallinfo2():
    import ctypes

    return allocator._glibc() is not None and hasattr(ctypes.CDLL(None), "mallinfo2")


@pytest.mark.skipif(not _has_mallinfo2(), reason="a 64-bit glibc of 2.33 or later (mallinfo2)")
def test_glibc_keeps_blocks_and_free_memory_on_its_heap_once_pinned():
    environment = {name: value for name, value in os.environ.items() if name not in _ENVIRONMENT}

    def mapped_and_kept(mode):
        command = [sys.executable, "-c", _MAPPED, allocator.__file__, mode]
        return subprocess.run(command, env=environment, capture_output=True, text=True, check=True).stdout.split()

    assert (mapped_and_kept("glibc's own"), mapped_and_kept("pin")) == (["1", "0"], ["0", "1"])
