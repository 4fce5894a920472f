"""glibc's malloc thresholds pinned once per process, before a fit (sklearn_quinn._core.allocator)."""

import platform

import numpy as np
import pytest

from sklearn_quinn import LaplaceRegressor
from sklearn_quinn._core import allocator


class RecordingLibc:
    """A C library that records its ``mallopt`` calls."""

    def __init__(self):
        self.calls = []

    def mallopt(self, parameter, value):
        self.calls.append((parameter, value))
        return 1


@pytest.fixture
def libc(monkeypatch):
    """A recording C library in glibc's place, in a process whose thresholds are not yet pinned
    and whose environment does not set glibc's malloc."""
    recording = RecordingLibc()
    monkeypatch.setattr(allocator, "_glibc", lambda: recording)
    monkeypatch.setattr(allocator, "_pinned", False)
    for name in (*allocator._USER_SETTINGS, "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)
    return recording


PINNED = [(allocator.M_MMAP_THRESHOLD, 32 * 2**20), (allocator.M_TRIM_THRESHOLD, 64 * 2**20)]


def test_thresholds_are_pinned_at_glibcs_ceiling_once(libc):
    allocator.pin_malloc_thresholds()
    allocator.pin_malloc_thresholds()
    assert libc.calls == PINNED


def test_a_fit_pins_them(libc):
    rng = np.random.RandomState(0)
    LaplaceRegressor(hidden_layer_sizes=(3,), max_epochs=2, random_state=0).fit(rng.randn(10, 2), rng.randn(10))
    assert libc.calls == PINNED


@pytest.mark.parametrize("name, value", [
    ("MALLOC_TRIM_THRESHOLD_", "131072"),
    ("MALLOC_MMAP_THRESHOLD_", "131072"),
    ("MALLOC_TOP_PAD_", "0"),
    ("MALLOC_MMAP_MAX_", "0"),
    ("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=131072"),
])
def test_a_process_that_sets_glibcs_malloc_keeps_its_settings(libc, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    allocator.pin_malloc_thresholds()
    assert libc.calls == []


def test_tunables_of_other_parts_of_glibc_leave_the_pin(libc, monkeypatch):
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.cpu.hwcaps=-AVX512F")
    allocator.pin_malloc_thresholds()
    assert libc.calls == PINNED


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")
def test_glibc_accepts_the_thresholds():
    libc = allocator._glibc()
    assert libc.mallopt(allocator.M_MMAP_THRESHOLD, allocator.MMAP_THRESHOLD) == 1
    assert libc.mallopt(allocator.M_TRIM_THRESHOLD, allocator.TRIM_THRESHOLD) == 1


def test_another_c_library_is_left_alone(monkeypatch):
    monkeypatch.setattr(platform, "libc_ver", lambda: ("", ""))
    assert allocator._glibc() is None
