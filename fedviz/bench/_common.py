"""What every benchmark of :mod:`fedviz.bench` shares: the scales of the google-plus preset, the clock
(the median of a few runs), the process's peak memory, numba's thread count and where the real files are."""

from __future__ import annotations

import os
import resource
import statistics
import time
from pathlib import Path

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


def default_data() -> str:
    """$FEDVIZ_DATA, else the checkout's tests/data (the real files the tests use, with their sources)."""
    return os.environ.get("FEDVIZ_DATA", str(Path(__file__).resolve().parents[2] / "tests" / "data"))
