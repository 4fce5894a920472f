"""Wall-clock timing shared by the benchmark scripts."""

import statistics
import time


def median_seconds(function, repeats=7):
    """Median wall seconds of ``repeats`` calls of ``function()``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
