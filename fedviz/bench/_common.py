"""What every benchmark of :mod:`fedviz.bench` shares: the scales of the google-plus preset, the clock
(the median of a few runs), the process's peak memory and numba's thread count."""

from __future__ import annotations

import resource
import statistics
import time

#: Scale → nodes of the google-plus preset (about 216.7 training rows per node).
SCALES = {"small": 231, "medium": 923, "paper": 10_000}


def _rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # KiB on Linux → GB


def _median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _threads() -> int:
    import numba
    return numba.get_num_threads()
