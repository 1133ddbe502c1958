"""Process-wide caches of data sets, problems and optima, keyed by content, for every run and page.

A data set is built once per :class:`~fedviz.data.build.DataSpec`, a problem once per
(spec, loss, λ), and shared: they are read-only (frozen arrays nobody writes), and what
a problem derives lazily (row blocks, row norms, the smoothness) is then computed once for
all the runs that share it.  Optima are cached by :func:`fedviz.problems.optimum.solve`
itself, per (data fingerprint, loss, λ).

Thread-safe, and pure Python (no Streamlit): run workers call it to prepare their job under
the run cap (:class:`~fedviz.runner.job.ProblemSpec`), and the dashboard's loaders call it
so that a page and a run hold one copy.  Two threads asking for the same key at once build
it once: the second waits for the first.

Owners: the dashboard names the browser session that asked for a data set (``owner=``).
When that session ends, :func:`release` forgets it, and a data set no remaining session
asked for leaves the caches with its problems, optimum and baselines: on a shared server a
visitor's upload (hundreds of MB once parsed) must not outlive the visitor.  Entries that
were never owned (runs, the command line) stay until the LRU bound pushes them out.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Hashable, TypeVar

from ..data.baselines import majority_test_error, node_majority_test_error
from ..data.build import DataSpec, build
from ..data.dataset import FederatedDataset
from ..problems.objective import Problem
from ..problems.optimum import Optimum, solve
from ..problems.optimum import forget as forget_optima

#: Entries kept (least recently used first out), as the dashboard's own loaders kept.
MAX_DATASETS = 8
MAX_PROBLEMS = 16
MAX_OPTIMA = 8

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

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._values

    def items(self) -> list[tuple[Hashable, object]]:
        with self._lock:
            return list(self._values.items())

    def drop(self, keep: Callable[[Hashable], bool]) -> int:
        """Forget every entry whose key ``keep`` refuses; returns how many."""
        with self._lock:
            gone = [k for k in self._values if not keep(k)]
            for k in gone:
                del self._values[k]
            return len(gone)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


_DATASETS = _LRU(MAX_DATASETS)
_PROBLEMS = _LRU(MAX_PROBLEMS)
_OPTIMA = _LRU(MAX_OPTIMA)
_BASELINES = _LRU(MAX_PROBLEMS)
_OWNERS: dict[DataSpec, set[str]] = {}  # spec → the sessions that asked for it (see the module docstring)
_OWNERS_LOCK = threading.Lock()


def _own(spec: DataSpec, owner: str | None) -> None:
    if owner is not None:
        with _OWNERS_LOCK:
            _OWNERS.setdefault(spec, set()).add(str(owner))


def dataset(spec: DataSpec, owner: str | None = None) -> FederatedDataset:
    """The data set of ``spec``: one shared object per spec (its statistics computed before sharing);
    ``owner``: the session asking (see :func:`release`)."""
    _own(spec, owner)

    def make():
        ds = build(spec)
        ds.stats  # computed here, before the object is shared
        return ds

    return _DATASETS.get(spec, make)


def problem(spec: DataSpec, loss: str = "logistic", lam: float | None = None, owner: str | None = None) -> Problem:
    """The problem of (data set, loss, λ) on the shared data set of ``spec``.

    The two caches stay coherent, so one spec has one data set in memory: a problem whose data set
    was evicted (problems outnumber data sets) puts it back, and a problem built on a copy since
    replaced is rebuilt on the shared one."""
    _own(spec, owner)
    key = (spec, loss, lam)
    p = _PROBLEMS.get(key, lambda: Problem(dataset(spec), loss, lam))
    shared = _DATASETS.setdefault(spec, p.data)
    if shared is not p.data:
        p = Problem(shared, loss, lam)
        _PROBLEMS.put(key, p)
    return p


def optimum(spec: DataSpec, loss: str = "logistic", lam: float | None = None, owner: str | None = None) -> Optimum:
    """w*, f* and the optimum's errors for (data set, loss, λ) (Newton-CG, by ``solve``), kept here
    so that they leave with their data set (:func:`release`)."""
    _own(spec, owner)
    return _OPTIMA.get((spec, loss, lam), lambda: solve(problem(spec, loss, lam)))  # shared with the runs' f*


def baselines(spec: DataSpec, owner: str | None = None) -> dict:
    """The data set's trivial predictors' test errors (Section 4.1): ``majority`` and ``node_majority``
    for classification, nothing for regression."""

    def make():
        ds = dataset(spec)
        if ds.task != "classification":
            return {}
        return {"majority": majority_test_error(ds), "node_majority": node_majority_test_error(ds)}

    _own(spec, owner)
    return dict(_BASELINES.get(spec, make))


def built(spec: DataSpec, loss: str | None = None, lam: float | None = None, *, baselines: bool = False) -> bool:
    """Whether what asking for ``spec`` costs is at hand: its data set, or given a loss its optimum,
    or with ``baselines`` its baselines (each kept on its own)."""
    if baselines:
        return spec in _BASELINES
    if loss is not None:
        return (spec, loss, lam) in _OPTIMA
    return spec in _DATASETS


def release(owner: str) -> list[DataSpec]:
    """Forget that the session ``owner`` asked for anything; every data set no other session asked
    for leaves the caches with its problems, optima and baselines (runs still using them keep
    their own references).  Returns the specs let go."""
    owner = str(owner)
    with _OWNERS_LOCK:
        gone = []
        for spec, owners in list(_OWNERS.items()):
            owners.discard(owner)
            if not owners:
                del _OWNERS[spec]
                gone.append(spec)
    if gone:
        let_go = set(gone)
        prints = {ds.fingerprint for spec, ds in _DATASETS.items() if spec in let_go}
        prints |= {p.data.fingerprint for key, p in _PROBLEMS.items() if key[0] in let_go}
        for fingerprint in prints:
            forget_optima(fingerprint)  # solve's own cache: w* is d floats per problem
        _DATASETS.drop(lambda spec: spec not in let_go)
        _BASELINES.drop(lambda spec: spec not in let_go)
        _PROBLEMS.drop(lambda key: key[0] not in let_go)
        _OPTIMA.drop(lambda key: key[0] not in let_go)
    return gone


def owners(spec: DataSpec) -> frozenset[str]:
    """The sessions holding ``spec`` (tests, diagnostics)."""
    with _OWNERS_LOCK:
        return frozenset(_OWNERS.get(spec, ()))


def clear() -> None:
    """Forget every cached data set and problem (tests; memory pressure)."""
    for lru in (_DATASETS, _PROBLEMS, _OPTIMA, _BASELINES):
        lru.clear()
    with _OWNERS_LOCK:
        _OWNERS.clear()


__all__ = ["baselines", "built", "clear", "dataset", "optimum", "owners", "problem", "release",
           "MAX_DATASETS", "MAX_OPTIMA", "MAX_PROBLEMS"]
