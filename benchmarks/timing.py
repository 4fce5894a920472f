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


class AfterFirstStep:
    """Wall and process-CPU seconds of a sampler run's steps after its first, as
    ``run_chains``' ``progress`` callback: every run builds its kernel anew, and a compiled
    kernel compiles its graph at its first step, which a per-step time leaves out. Call
    :meth:`stop` as the run returns; ``wall`` and ``cpu`` then hold the seconds."""

    def __call__(self, n_steps_done, _acceptance):
        if n_steps_done == 1:
            self.wall, self.cpu = time.perf_counter(), time.process_time()

    def stop(self):
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu
        return self
