"""Process-wide caches of data sets, problems and optima, keyed by content, for every run and page.

A data set is built once per :class:`~fedviz.data.build.DataSpec`, a problem once per
(spec, loss, λ), and shared: they are read-only (frozen arrays nobody writes), and what
a problem derives lazily (row blocks, row norms, the smoothness) is then computed once for
all the runs that share it.  Optima are cached by :func:`fedviz.problems.optimum.solve`
itself, per (data fingerprint, loss, λ).

Thread-safe, and pure Python (no Streamlit): run workers call it to prepare their job under
the run cap (:class:`~fedviz.runner.job.ProblemSpec`), and the dashboard's cached loaders
can call it so that a page and a run hold one copy.  Two threads asking for the same key
at once build it once: the second waits for the first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Hashable, TypeVar

from ..data.build import DataSpec, build
from ..data.dataset import FederatedDataset
from ..problems.objective import Problem
from ..problems.optimum import Optimum, solve

#: Entries kept (least recently used first out), as the dashboard's own loaders kept.
MAX_DATASETS = 8
MAX_PROBLEMS = 16

T = TypeVar("T")


class _LRU:
    """A small LRU cache whose values are built outside its lock, once per key."""

    def __init__(self, size: int):
        self.size = size
        self._lock = threading.Lock()
        self._values: OrderedDict[Hashable, object] = OrderedDict()
        self._building: dict[Hashable, threading.Lock] = {}

    def get(self, key: Hashable, make: Callable[[], T]) -> T:
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
            gate = self._building.setdefault(key, threading.Lock())
        with gate:  # one builder per key; the others wait here, then find it built
            with self._lock:
                if key in self._values:
                    self._values.move_to_end(key)
                    return self._values[key]
            try:
                value = make()
            finally:
                with self._lock:
                    self._building.pop(key, None)
            with self._lock:
                self._values[key] = value
                while len(self._values) > self.size:
                    self._values.popitem(last=False)
            return value

    def setdefault(self, key: Hashable, value: T) -> T:
        """The value kept for ``key``, or ``value`` kept from now on (most recently used either way)."""
        with self._lock:
            kept = self._values.setdefault(key, value)
            self._values.move_to_end(key)
            while len(self._values) > self.size:
                self._values.popitem(last=False)
            return kept

    def put(self, key: Hashable, value: T) -> None:
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > self.size:
                self._values.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


_DATASETS = _LRU(MAX_DATASETS)
_PROBLEMS = _LRU(MAX_PROBLEMS)


def dataset(spec: DataSpec) -> FederatedDataset:
    """The data set of ``spec``: one shared object per spec (its statistics computed before sharing)."""

    def make():
        ds = build(spec)
        ds.stats  # computed here, before the object is shared
        return ds

    return _DATASETS.get(spec, make)


def problem(spec: DataSpec, loss: str = "logistic", lam: float | None = None) -> Problem:
    """The problem of (data set, loss, λ) on the shared data set of ``spec``.

    The two caches stay coherent, so one spec has one data set in memory: a problem whose data set
    was evicted (problems outnumber data sets) puts it back, and a problem built on a copy since
    replaced is rebuilt on the shared one."""
    key = (spec, loss, lam)
    p = _PROBLEMS.get(key, lambda: Problem(dataset(spec), loss, lam))
    shared = _DATASETS.setdefault(spec, p.data)
    if shared is not p.data:
        p = Problem(shared, loss, lam)
        _PROBLEMS.put(key, p)
    return p


def optimum(spec: DataSpec, loss: str = "logistic", lam: float | None = None) -> Optimum:
    """w*, f* and the optimum's errors for (data set, loss, λ) (Newton-CG, cached by ``solve``)."""
    return solve(problem(spec, loss, lam))


def clear() -> None:
    """Forget every cached data set and problem (tests; memory pressure)."""
    _DATASETS.clear()
    _PROBLEMS.clear()


__all__ = ["dataset", "problem", "optimum", "clear", "MAX_DATASETS", "MAX_PROBLEMS"]
