"""The background run manager: a server-wide FIFO queue of runs, one worker thread per run.

This module owns :class:`RunJob` (what to run), :class:`RunHandle` (a submitted run, as
the UI sees it), :class:`RunSnapshot` (an immutable picture of a run for one redraw),
:class:`RunManager` (the queue, the sessions and their reaper) and :func:`get_manager`
(the process-wide manager of the dashboard).

It is pure Python and never imports Streamlit: worker threads must not call ``st.*``.
The UI polls :meth:`RunHandle.snapshot` (e.g. from ``st.fragment(run_every=0.5)``),
heartbeats with :meth:`RunManager.touch` and supplies the liveness probe (see Sessions).

Sessions
--------
A run belongs to a browser session and stops soon after that session is gone.  The
manager learns it from a *liveness probe* that the UI supplies (a callable
``session_id -> True | False | None``, here asking Streamlit's runtime whether the
session's websocket is connected): a session reported gone for ``disconnect_grace``
seconds (time for the browser's automatic reconnect) has its runs stopped.  Heartbeats
are only the fallback, for sessions the probe cannot judge (None, or no probe): a
timer in a page is a poor sign of life, because browsers throttle the timers of
background tabs, and a connected user who switched tabs must not lose a run.

Threads and locks
-----------------
Each running run has one daemon thread, ``fedviz-run-<id>``, scheduled below the server's
own threads so that pages stay responsive; at most ``max_concurrent`` run at once and the
rest wait in FIFO order.  A run advances its algorithms round-robin, one iteration of
each in turn, so all curves grow together.  The manager lock guards the queue and the
sessions; each handle's lock guards its buffers.  The manager lock may be taken before a
handle lock, never the other way round.

Snapshots are O(number of algorithms), whatever the number of records: a handle's
buffers are append-only numpy arrays and lists, and a snapshot holds read-only views of
their filled part.  The one in-place change, the final record that re-reports the last
iteration (the loop's 'stopped'/'failed' record), copies the buffers first, so a
snapshot never changes after it was taken.

Durability
----------
Records reach the store in batches at most ``flush_interval`` (0.5 s) apart, and an
algorithm's last records are committed together with its end state.  A SIGKILL
therefore loses at most the last half second of a live run, never a finished one, and
the store never holds a finished run without all its records.  Committing every
iteration instead would cost one transaction per iteration, and a small problem runs
thousands of iterations per second.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sqlite3
import sys
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Callable, Mapping

import numpy as np

from ..algorithms import get_algorithm
from ..algorithms.base import Algorithm
from ..errors import FedvizError, ParameterError
from ..problems.objective import Problem
from ..problems.optimum import solve
from ..validation import check_int, check_real, env_int
from .loop import IterationRecord, iterate
from .store import INT_FIELDS, NUMERIC_FIELDS, RunStore, to_json

log = logging.getLogger(__name__)

#: Seconds between two commits of a live run's records.
FLUSH_INTERVAL = 0.5

#: Step durations kept per algorithm for the ETA (a recent window follows changes in speed).
ETA_WINDOW = 256

#: The overall states of a run: waiting, running, and the three ways it ends.
RUN_STATES = ("queued", "running", "done", "stopped", "failed")

#: Seconds a session may stay disconnected before its runs stop: the browser reconnects by
#: itself after a network blip, retrying with growing pauses (four or five tries in 15 s).
DISCONNECT_GRACE = 15.0

#: How much lower than the server's threads the run workers are scheduled (Linux nice steps).
WORKER_NICE = 10

#: Why a run stopped (the loop's own 'stopped' message uses the first).
STOPPED_BY_USER = "stopped by the user"
STOPPED_SESSION_CLOSED = "stopped: the browser session closed"
STOPPED_SHUTDOWN = "stopped: the server is shutting down"


#: Between a tuned algorithm's note and the criterion its pilots were judged by (the UI shows the
#: criterion once for all algorithms; the history keeps the whole note).
CRITERION = ". Criterion: "


# -- what to run --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunJob:
    """One Run click: several algorithms on one problem, for the same iterations and seed.

    Parameters
    ----------
    make_problem : callable () -> Problem
        Builds (or fetches from a cache) the problem; called in the worker thread.
    algorithms : tuple of (label, algorithm, hyper)
        ``label`` names the curve (unique within the job); ``algorithm`` is a registry
        name or an :class:`~fedviz.algorithms.base.Algorithm` subclass; ``hyper`` maps
        hyperparameter names to values (missing ones take their defaults).
    iterations : int
        Outer iterations per algorithm.
    seed : int
    config : mapping
        The frozen setup (data spec, loss, λ, ...), JSON-serialisable; stored with each
        run, completed with ``iterations`` and ``seed``.
    f_star : float or None
        The optimal value, if known; else computed by Newton-CG in the worker.
    tune : bool
        Choose each algorithm's step-like hyperparameters by pilot runs first
        (:func:`fedviz.runner.tune.tune`), in the worker, under the run cap.  The chosen
        value joins the label, the stored hyperparameters and the algorithm's note; the
        pilots' time is reported apart from the run's.
    """

    make_problem: Callable[[], Problem]
    algorithms: tuple[tuple[str, str | type[Algorithm], Mapping[str, Any]], ...]
    iterations: int
    seed: int = 0
    config: Mapping[str, Any] = field(default_factory=dict)
    f_star: float | None = None
    tune: bool = False


@dataclass(frozen=True)
class _Entry:
    label: str
    cls: type[Algorithm]
    hyper: Mapping[str, Any]       # as given: what the algorithm is constructed with
    resolved: Mapping[str, Any]    # defaults filled in: what the history records

    @property
    def name(self) -> str:
        return self.cls.name or self.cls.__name__


def _validate_job(job: RunJob) -> tuple[tuple[_Entry, ...], dict]:
    """Refuse a bad job before anything starts: every error names the offending parameter."""
    if not isinstance(job, RunJob):
        raise ParameterError("job", type(job).__name__, "a RunJob")
    if not callable(job.make_problem):
        raise ParameterError("make_problem", job.make_problem, "a callable returning a Problem")
    iterations = check_int("iterations", job.iterations, low=0)
    seed = check_int("seed", job.seed, low=0, high=2**63 - 1)
    if job.f_star is not None:
        check_real("f_star", job.f_star)
    algos = tuple(job.algorithms)
    if not algos:
        raise ParameterError("algorithms", algos, "at least one (label, algorithm, hyper) triple")
    entries, seen = [], set()
    for k, item in enumerate(algos):
        if not (isinstance(item, (tuple, list)) and len(item) == 3):
            raise ParameterError(f"algorithms[{k}]", item, "a (label, algorithm, hyper) triple")
        label, algo, hyper = item
        if not isinstance(label, str) or not label.strip():
            raise ParameterError(f"algorithms[{k}].label", label, "a non-empty string")
        if label in seen:
            raise ParameterError(f"algorithms[{k}].label", label, "a label not used by another algorithm")
        seen.add(label)
        if isinstance(algo, str):
            cls = get_algorithm(algo)
        elif isinstance(algo, type) and issubclass(algo, Algorithm):
            cls = algo
        else:
            raise ParameterError(f"algorithms[{k}].algorithm", algo,
                                 "a registered algorithm name or an Algorithm subclass")
        if hyper is None:
            hyper = {}
        if not isinstance(hyper, Mapping):
            raise ParameterError(f"algorithms[{k}].hyper", hyper, "a mapping of hyperparameters")
        hyper = dict(hyper)
        resolved = cls.validate(hyper)
        entries.append(_Entry(label, cls, MappingProxyType(hyper), MappingProxyType(resolved)))
    config = {**dict(job.config or {}), "iterations": iterations, "seed": seed}
    try:
        to_json(config)
    except (TypeError, ValueError) as e:
        raise ParameterError("config", type(job.config).__name__,
                             f"a JSON-serialisable mapping ({e})") from None
    return tuple(entries), config


# -- what the UI sees -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunSnapshot:
    """Everything the UI draws for one run, frozen at one instant.

    Attributes
    ----------
    run_id : str
        The handle's id, also the ``group_id`` of its stored runs.
    status : str
        'queued', 'running', 'done', 'stopped' or 'failed' (see :data:`RUN_STATES`).
    phase : str
        'queued', 'preparing' (building the problem, computing f*), 'iterating' or 'finished'.
    message : str
        What is happening (while preparing) or how the run ended.
    labels : tuple of str
        The algorithms' labels, in submission order.
    statuses, messages : mapping label → str
        Each algorithm's state ('queued', 'running' or the loop's end states) and message.
    notes : mapping label → str
        What was decided for an algorithm before its run (the tuned stepsize, its criterion
        and the pilots' time); '' for most.
    columns : mapping label → mapping field → read-only ndarray
        The numeric record fields (``store.NUMERIC_FIELDS``) as arrays: ready to plot.
    last : mapping label → IterationRecord or None
        The latest record of each algorithm.
    store_ids : mapping label → int
        The run ids in the store (empty without a store).
    progress : float
        The fraction of all iterations done, in [0, 1]; an algorithm that ended early counts as done.
    eta_seconds : float or None
        Remaining time from the median recent iteration time of each running algorithm;
        None until every running algorithm has finished an iteration.
    queue_position : int
        0 unless queued; k for the k-th run in line.
    compiling : bool
        True while some algorithm has not finished its first iteration (the first numba
        compilation can take seconds).
    f_star : float or None
        The optimum's value once known.
    version : int
        Grows with every change; equal versions mean equal contents.
    """

    run_id: str
    session_id: str
    status: str
    phase: str
    message: str
    labels: tuple[str, ...]
    algorithms: Mapping[str, str]
    statuses: Mapping[str, str]
    messages: Mapping[str, str]
    notes: Mapping[str, str]
    columns: Mapping[str, Mapping[str, np.ndarray]]
    last: Mapping[str, IterationRecord | None]
    store_ids: Mapping[str, int]
    iterations: int
    progress: float
    eta_seconds: float | None
    queue_position: int
    compiling: bool
    f_star: float | None
    version: int
    _records: Mapping[str, tuple[list, int]] = field(repr=False, compare=False)

    @property
    def finished(self) -> bool:
        return self.status not in ("queued", "running")

    def records(self, label: str) -> tuple[IterationRecord, ...]:
        """The records of one algorithm at the instant of the snapshot (O(records))."""
        buf, n = self._records[label]
        return tuple(buf[:n])


class _Series:
    """One algorithm's records: an append-only list plus growable numeric columns."""

    def __init__(self):
        self.records: list[IterationRecord] = []
        self.cols = {f: np.empty(64, dtype=np.int64 if f in INT_FIELDS else np.float64)
                     for f in NUMERIC_FIELDS}
        self.durations: deque[float] = deque(maxlen=ETA_WINDOW)
        self.status = "queued"
        self.message = ""
        self.seconds = 0.0  # this algorithm's own compute time so far
        self.note = ""      # decided before the run (tuning), shown beside the status

    @property
    def n(self) -> int:
        return len(self.records)

    def add(self, rec: IterationRecord) -> None:
        n = self.n
        if n and rec.iteration == self.records[-1].iteration:
            # Copy on write: snapshots hold views of the old buffers, which must not change.
            self.records = self.records[:-1]
            self.cols = {f: a.copy() for f, a in self.cols.items()}
            n -= 1
        elif n == len(self.cols["iteration"]):
            self.cols = {f: np.concatenate([a, np.empty_like(a)]) for f, a in self.cols.items()}
        for f, a in self.cols.items():
            a[n] = getattr(rec, f)
        self.records.append(rec)

    def views(self) -> Mapping[str, np.ndarray]:
        out = {}
        for f, a in self.cols.items():
            v = a[: self.n]
            v.flags.writeable = False
            out[f] = v
        return MappingProxyType(out)


class RunHandle:
    """A submitted run: poll :meth:`snapshot`, call :meth:`stop`; created by :meth:`RunManager.submit`.

    Keep it in the session state: it stays valid (and its records in memory) after the
    run ended.
    """

    def __init__(self, manager: "RunManager", job: RunJob, entries: tuple[_Entry, ...],
                 config: dict, session_id: str):
        self.id = uuid.uuid4().hex
        self.session_id = session_id
        self.job = job
        self.config = config
        self.labels = tuple(e.label for e in entries)
        self.store_ids: Mapping[str, int] = MappingProxyType({})
        self._entries = entries
        self._manager = manager
        self._lock = threading.Lock()
        self._series = {e.label: _Series() for e in entries}
        self._status = "queued"
        self._phase = "queued"
        self._message = ""
        self._warning = ""
        self._f_star: float | None = None
        self._version = 0
        self._snapshot: RunSnapshot | None = None
        self._stop = threading.Event()
        self._stop_reason = ""
        self._done = threading.Event()

    def __repr__(self) -> str:
        return f"<RunHandle {self.id[:8]} {self._status} {', '.join(self.labels)}>"

    # -- public ------------------------------------------------------------------------------------
    @property
    def status(self) -> str:
        return self._status

    @property
    def done(self) -> bool:
        """True once the run ended (its thread is finishing or gone)."""
        return self._done.is_set()

    def stop(self, reason: str = STOPPED_BY_USER) -> None:
        """Ask the run to stop; it ends within one node batch with status 'stopped'.

        Completed iterations stay.  A queued run is taken out of the queue at once.
        Stopping a finished run does nothing.
        """
        with self._lock:
            if self._done.is_set() or self._stop.is_set():
                return
            self._stop_reason = reason
            self._stop.set()
        self._manager._cancel_queued(self)

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run ended (True) or ``timeout`` seconds passed (False)."""
        return self._done.wait(timeout)

    def queue_position(self) -> int:
        """0 when running or finished, k when k-th in the queue."""
        return self._manager._queue_position(self)

    def records(self, label: str) -> list[IterationRecord]:
        """A copy of one algorithm's records so far."""
        with self._lock:
            return list(self._series[label].records)

    def snapshot(self) -> RunSnapshot:
        """An immutable picture of the run; cached, so polling an idle run costs nothing."""
        pos = self.queue_position()
        with self._lock:
            snap = self._snapshot
            if snap is not None and snap.version == self._version and snap.queue_position == pos:
                return snap
            snap = self._snapshot = self._build_snapshot(pos)
            return snap

    # -- worker side (called with the handle lock not held) -------------------------------------------
    def _changed(self) -> None:
        self._version += 1

    def _set(self, *, status: str | None = None, phase: str | None = None, message: str | None = None,
             f_star: float | None = None) -> None:
        with self._lock:
            if status is not None:
                self._status = status
            if phase is not None:
                self._phase = phase
            if message is not None:
                self._message = message
            if f_star is not None:
                self._f_star = f_star
            self._changed()

    def _warn(self, text: str) -> None:
        with self._lock:
            self._warning = text
            self._changed()

    def _relabel(self, old: str, entry: "_Entry", note: str) -> None:
        """Replace an algorithm that has no records yet by ``entry`` (its tuned version), in place."""
        with self._lock:
            self._entries = tuple(entry if e.label == old else e for e in self._entries)
            self.labels = tuple(e.label for e in self._entries)
            self._series = {(entry.label if k == old else k): s for k, s in self._series.items()}
            self._series[entry.label].note = note
            if old in self.store_ids:
                self.store_ids = MappingProxyType({(entry.label if k == old else k): v
                                                   for k, v in self.store_ids.items()})
            self._changed()

    def _label_start(self) -> None:
        with self._lock:
            for s in self._series.values():
                s.status = "running"
            self._changed()

    def _add(self, label: str, rec: IterationRecord, duration: float | None) -> None:
        with self._lock:
            s = self._series[label]
            s.add(rec)
            if duration is not None:
                s.durations.append(duration)
            self._changed()

    def _label_end(self, label: str, status: str, message: str) -> None:
        with self._lock:
            s = self._series[label]
            s.status, s.message = status, message
            self._changed()

    def _end_unfinished(self, status: str, message: str) -> list[str]:
        """End every algorithm still queued or running; return their labels."""
        with self._lock:
            ended = []
            for label, s in self._series.items():
                if s.status in ("queued", "running"):
                    s.status, s.message = status, message
                    ended.append(label)
            self._changed()
            return ended

    def _finish(self) -> None:
        """Set the overall end state from the algorithms' states, then release waiters."""
        with self._lock:
            states = [s.status for s in self._series.values()]
            if "stopped" in states:
                status, message = "stopped", self._stop_reason or "stopped"
            elif all(st == "failed" for st in states):
                status = "failed"
                message = "; ".join(dict.fromkeys(s.message for s in self._series.values() if s.message))
            else:
                status = "done"
                message = "; ".join(f"{label}: {s.message}" for label, s in self._series.items()
                                    if s.message)
            if self._warning:
                message = f"{message}; {self._warning}" if message else self._warning
            self._status, self._phase, self._message = status, "finished", message
            self._changed()
        self._done.set()

    def _build_snapshot(self, pos: int) -> RunSnapshot:
        iters = self.job.iterations
        done = total = 0
        eta: float | None = 0.0
        compiling = False
        for s in self._series.values():
            total += iters
            last = s.records[-1].iteration if s.records else 0
            if s.status in ("queued", "running"):
                done += last
                if self._phase == "iterating" and last < 1 and iters > 0:
                    compiling = True
                if eta is not None:
                    eta = None if not s.durations else eta + float(np.median(s.durations)) * (iters - last)
            else:
                done += iters
        if self._phase != "iterating":
            eta = None if self._status in ("queued", "running") else 0.0
        progress = 1.0 if total == 0 and self._phase == "finished" else (done / total if total else 0.0)
        message = self._message
        if self._warning and self._status == "running":
            message = f"{message}; {self._warning}" if message else self._warning
        series = self._series
        return RunSnapshot(
            run_id=self.id, session_id=self.session_id, status=self._status, phase=self._phase,
            message=message, labels=self.labels,
            algorithms=MappingProxyType({e.label: e.name for e in self._entries}),
            statuses=MappingProxyType({k: s.status for k, s in series.items()}),
            messages=MappingProxyType({k: s.message for k, s in series.items()}),
            notes=MappingProxyType({k: s.note for k, s in series.items()}),
            columns=MappingProxyType({k: s.views() for k, s in series.items()}),
            last=MappingProxyType({k: (s.records[-1] if s.records else None) for k, s in series.items()}),
            store_ids=self.store_ids, iterations=iters, progress=progress, eta_seconds=eta,
            queue_position=pos, compiling=compiling, f_star=self._f_star, version=self._version,
            _records=MappingProxyType({k: (s.records, s.n) for k, s in series.items()}))


# -- persistence of one run ---------------------------------------------------------------------------
class _Journal:
    """Writes one handle's records to the store in batches; a failing store degrades to memory only."""

    def __init__(self, store: RunStore | None, handle: RunHandle, interval: float):
        self.store = store
        self.handle = handle
        self.interval = interval
        self.pending: dict[int, list[IterationRecord]] = {}
        self.last_flush = time.monotonic()

    def _guard(self, action: Callable[[], None]) -> None:
        if self.store is None:
            return
        try:
            action()
        except (sqlite3.Error, FedvizError, OSError) as e:
            log.warning("run %s: the history could not be saved: %s", self.handle.id, e)
            self.handle._warn(f"the run history could not be saved ({e})")
            self.store = None

    def start(self, fingerprint: str, summary: Mapping, f_star: float | None) -> None:
        def action():
            for run_id in self.handle.store_ids.values():
                self.store.start_run(run_id, dataset_fingerprint=fingerprint, dataset_summary=summary,
                                     f_star=f_star)
        self._guard(action)

    def add(self, label: str, rec: IterationRecord) -> None:
        run_id = self.handle.store_ids.get(label)
        if run_id is not None and self.store is not None:
            self.pending.setdefault(run_id, []).append(rec)

    def flush(self, force: bool = False) -> None:
        if not self.pending or not (force or time.monotonic() - self.last_flush >= self.interval):
            return
        batch, self.pending = self.pending, {}
        self._guard(lambda: self.store.append_batch(batch))
        self.last_flush = time.monotonic()

    def finish(self, label: str, status: str, message: str) -> None:
        run_id = self.handle.store_ids.get(label)
        if run_id is None:
            return
        recs = self.pending.pop(run_id, [])
        self._guard(lambda: self.store.finish_run(run_id, status, message, records=recs))


# -- the manager ----------------------------------------------------------------------------------------
class RunManager:
    """Runs jobs in background threads, at most ``max_concurrent`` at once, the rest in FIFO order.

    Parameters
    ----------
    max_concurrent : int or None
        The server-wide cap on running runs (default: the number of CPUs).
    store : RunStore or None
        Where runs are recorded; None keeps them in memory only.
    session_timeout : float
        Seconds without :meth:`touch` after which the runs of a session that the liveness
        probe cannot judge are stopped (a closed browser tab stops heartbeating).
    flush_interval : float
        Seconds between commits of a live run's records (see the module docstring).
    clock : callable
        Monotonic seconds for session timeouts; tests pass a fake clock.
    reaper : bool
        Start a background thread that checks session timeouts every second or so; with
        False they are checked on :meth:`submit`, :meth:`touch` and :meth:`reap` only.
    liveness : callable (session_id) -> bool or None, optional
        Whether a session is still connected: True keeps its runs (however old its last
        heartbeat), False stops them once it has said so for ``disconnect_grace`` seconds,
        None (or an error) leaves the session to the heartbeat timeout.  Also settable
        later as the :attr:`liveness` attribute.  Called without the manager's lock.
    disconnect_grace : float
        See :data:`DISCONNECT_GRACE`.
    """

    def __init__(self, max_concurrent: int | None = None, store: RunStore | None = None,
                 session_timeout: float = 30.0, *, flush_interval: float = FLUSH_INTERVAL,
                 clock: Callable[[], float] = time.monotonic, reaper: bool = True,
                 liveness: Callable[[str], bool | None] | None = None,
                 disconnect_grace: float = DISCONNECT_GRACE):
        self.max_concurrent = check_int("max_concurrent", max_concurrent or os.cpu_count() or 1, low=1)
        self.session_timeout = check_real("session_timeout", session_timeout, low=0, low_open=True)
        self.flush_interval = check_real("flush_interval", flush_interval, low=0)
        self.disconnect_grace = check_real("disconnect_grace", disconnect_grace, low=0)
        self.liveness = liveness
        self.store = store
        #: Why the history is disabled (set by :func:`get_manager` when the store cannot open).
        self.store_problem = ""
        self._clock = clock
        self._lock = threading.Lock()
        self._queue: deque[RunHandle] = deque()
        self._running: dict[str, tuple[RunHandle, threading.Thread]] = {}
        self._sessions: dict[str, float] = {}  # session → its last sign of life
        self._gone: dict[str, float] = {}  # session → when the probe first reported it gone
        self._closed = threading.Event()
        self._use_reaper = reaper
        self._reaper: threading.Thread | None = None

    def __repr__(self) -> str:
        running, queued = self.counts()
        return f"<RunManager {running} running, {queued} queued, cap {self.max_concurrent}>"

    # -- submitting ----------------------------------------------------------------------------------
    def submit(self, job: RunJob, session_id: str) -> RunHandle:
        """Validate ``job`` and start it, or queue it behind the runs already started.

        Raises
        ------
        ParameterError
            For a bad hyperparameter, label, iteration count, seed or config: nothing is started.
        FedvizError
            If the manager is closed.
        """
        session_id = str(session_id)
        entries, config = _validate_job(job)
        if self._closed.is_set():
            raise FedvizError("the run manager is closed")
        handle = RunHandle(self, job, entries, config, session_id)
        if self.store is not None:
            self._create_store_runs(handle)
        with self._lock:
            if self._closed.is_set():  # closed while the stored runs were being created
                raise FedvizError("the run manager is closed")
            self._sessions[session_id] = self._clock()
            if len(self._running) < self.max_concurrent:
                self._start_locked(handle)
            else:
                self._queue.append(handle)
        self._ensure_reaper()
        self.reap()
        return handle

    def _create_store_runs(self, handle: RunHandle) -> None:
        """One stored run per algorithm, 'queued' until the worker starts; a failing store
        leaves the run in memory only (with a warning), it does not refuse it."""
        ids: dict[str, int] = {}
        try:
            for e in handle._entries:
                ids[e.label] = self.store.create_run(
                    label=e.label, algorithm=e.name, hyper=dict(e.resolved), config=handle.config,
                    group_id=handle.id, f_star=handle.job.f_star, status="queued")
        except (sqlite3.Error, FedvizError, OSError) as e:
            log.warning("run %s will not be saved: %s", handle.id, e)
            handle._warn(f"the run history could not be saved ({e})")
            for run_id in ids.values():
                try:
                    self.store.delete_run(run_id)
                except (sqlite3.Error, FedvizError, OSError):
                    pass
            ids = {}
        handle.store_ids = MappingProxyType(ids)

    def _start_locked(self, handle: RunHandle) -> None:
        handle._set(status="running", phase="preparing", message="waiting for the worker")
        thread = threading.Thread(target=self._work, args=(handle,), daemon=True,
                                  name=f"fedviz-run-{handle.id[:8]}")
        self._running[handle.id] = (handle, thread)
        thread.start()

    def _release(self, handle: RunHandle) -> None:
        """A run ended: free its slot and start the next queued runs."""
        with self._lock:
            self._running.pop(handle.id, None)
            while self._queue and len(self._running) < self.max_concurrent and not self._closed.is_set():
                self._start_locked(self._queue.popleft())

    def _cancel_queued(self, handle: RunHandle) -> None:
        with self._lock:
            try:
                self._queue.remove(handle)
            except ValueError:
                return  # running (its thread sees the stop event) or finished
        message = f"{handle._stop_reason} (before it started)"
        journal = _Journal(self.store, handle, self.flush_interval)
        for label in handle._end_unfinished("stopped", message):
            journal.finish(label, "stopped", message)
        handle._finish()

    def _queue_position(self, handle: RunHandle) -> int:
        with self._lock:
            try:
                return self._queue.index(handle) + 1
            except ValueError:
                return 0

    def counts(self) -> tuple[int, int]:
        """(running, queued) runs, server-wide."""
        with self._lock:
            return len(self._running), len(self._queue)

    def active(self, session_id: str | None = None) -> list[RunHandle]:
        """The running and queued runs (of one session), running first, then in queue order."""
        with self._lock:
            handles = [h for h, _ in self._running.values()] + list(self._queue)
        return [h for h in handles if session_id is None or h.session_id == session_id]

    # -- sessions -----------------------------------------------------------------------------------
    def touch(self, session_id: str) -> None:
        """A heartbeat from a browser session: its runs live while it keeps touching."""
        with self._lock:
            self._sessions[str(session_id)] = self._clock()
        self.reap()

    def close_session(self, session_id: str, reason: str = STOPPED_SESSION_CLOSED) -> int:
        """Stop every run of a session and forget it; returns how many runs were stopped."""
        session_id = str(session_id)
        with self._lock:
            self._sessions.pop(session_id, None)
            self._gone.pop(session_id, None)
        return self._stop_runs(self.active(session_id), {session_id: reason})

    @staticmethod
    def _stop_runs(handles: list[RunHandle], reasons: Mapping[str, str]) -> int:
        """Stop runs, the queued ones first: a stopped running run frees its slot for the next
        in line, which must not start only to be stopped too."""
        handles = sorted(handles, key=lambda h: h.status != "queued")  # stable: keeps queue order
        for h in handles:
            h.stop(reasons[h.session_id])
        return len(handles)

    def reap(self) -> int:
        """Stop the runs of sessions that are gone; returns how many runs were stopped.

        A session is gone when the liveness probe has reported it disconnected for longer
        than ``disconnect_grace``, or, when the probe cannot tell, when it sent no
        heartbeat for longer than ``session_timeout``.
        """
        with self._lock:
            sessions = list(self._sessions)
        verdicts = {sid: self._probe(sid) for sid in sessions}  # outside the lock: the probe is foreign code
        now = self._clock()
        stale: dict[str, str] = {}
        with self._lock:
            for sid, last in list(self._sessions.items()):
                alive = verdicts.get(sid)  # None too for a session that arrived meanwhile
                if alive is True:
                    self._sessions[sid] = now
                    self._gone.pop(sid, None)
                elif alive is False:
                    if now - self._gone.setdefault(sid, now) > self.disconnect_grace:
                        stale[sid] = STOPPED_SESSION_CLOSED
                elif now - last > self.session_timeout:
                    stale[sid] = f"stopped: the browser session sent no heartbeat for {self.session_timeout:g} s"
            for sid in stale:
                del self._sessions[sid]
                self._gone.pop(sid, None)
        return self._stop_runs([h for h in self.active() if h.session_id in stale], stale)

    def _probe(self, session_id: str) -> bool | None:
        """The liveness probe's verdict: only a real True or False counts, anything else is 'unknown'."""
        probe = self.liveness
        if probe is None:
            return None
        try:
            alive = probe(session_id)
        except Exception:  # noqa: BLE001 - a broken probe leaves sessions to the heartbeat
            log.exception("session liveness probe")
            return None
        return alive if isinstance(alive, bool) else None

    def _ensure_reaper(self) -> None:
        if not self._use_reaper or self._reaper is not None:
            return
        with self._lock:
            if self._reaper is None:
                self._reaper = threading.Thread(target=self._reap_loop, daemon=True, name="fedviz-reaper")
                self._reaper.start()

    def _reap_loop(self) -> None:
        _background_os_thread(threading.current_thread().name)
        interval = min(1.0, max(0.05, min(self.session_timeout, self.disconnect_grace) / 4))
        while not self._closed.wait(interval):
            try:
                self.reap()
            except Exception:  # noqa: BLE001 - the reaper must outlive any bug in one pass
                log.exception("session reaper")

    def close(self, timeout: float = 30.0) -> bool:
        """Stop every run, refuse new ones and wait up to ``timeout`` s; True if all threads ended."""
        self._closed.set()
        for h in self.active():
            h.stop(STOPPED_SHUTDOWN)
        deadline = time.monotonic() + timeout
        with self._lock:
            threads = [t for _, t in self._running.values()]
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in threads)

    # -- the worker --------------------------------------------------------------------------------------
    def _work(self, handle: RunHandle) -> None:
        _background_os_thread(threading.current_thread().name)
        journal = _Journal(self.store, handle, self.flush_interval)
        try:
            self._execute(handle, journal)
        except BaseException as e:  # noqa: BLE001 - nothing may escape a worker thread
            log.exception("run %s failed", handle.id)
            message = _describe(e)
            if handle.stop_requested:
                status, message = "stopped", f"{handle._stop_reason} ({message})"
            else:
                status = "failed"
            for label in handle._end_unfinished(status, message):
                journal.finish(label, status, message)
        finally:
            try:
                journal.flush(force=True)
            finally:
                # Free the slot first, so that once wait() returns the next queued run has started.
                self._release(handle)
                handle._finish()

    def _execute(self, handle: RunHandle, journal: _Journal) -> None:
        job = handle.job
        if self._stopped_before_start(handle, journal):
            return
        handle._set(phase="preparing", message="building the problem")
        problem = job.make_problem()
        if not isinstance(problem, Problem):
            raise FedvizError(f"make_problem returned a {type(problem).__name__}, not a Problem")
        if self._stopped_before_start(handle, journal):
            return
        f_star = job.f_star
        if f_star is None:
            handle._set(message="computing the optimum f* (Newton-CG)")
            try:
                f_star = solve(problem).objective
            except FedvizError as e:
                # Not fatal: the curves are still worth seeing, without suboptimality.
                handle._warn(f"f* unavailable, suboptimality is NaN ({e})")
                f_star = None
        if self._stopped_before_start(handle, journal):
            return
        if job.tune:
            self._tune(handle, problem, f_star)
            if self._stopped_before_start(handle, journal):
                return
        data = problem.data
        summary = {**data.stats.summary(), "loss": problem.loss.name, "lam": problem.lam}
        journal.start(data.fingerprint, summary, f_star)
        handle._set(phase="iterating", message="", f_star=f_star)
        handle._label_start()
        self._round_robin(handle, journal, problem, f_star)

    def _tune(self, handle: RunHandle, problem: Problem, f_star: float | None) -> None:
        """Choose each algorithm's stepsize by pilot runs (see :func:`fedviz.runner.tune.tune`).

        The pilots rank by f − f*, which ranks as f does: without f* they rank by f.
        """
        from .tune import tune

        job = handle.job
        for e in handle._entries:
            if handle.stop_requested:
                return
            handle._set(message=f"tuning {e.label}: pilot runs")
            result = tune(problem, e.name, dict(e.hyper), iterations=job.iterations, seed=job.seed,
                          f_star=0.0 if f_star is None else f_star, stop=handle._stop.is_set)
            if result.param is None:
                continue
            label = result.label(e.label)
            if label in handle.labels and label != e.label:
                label = f"{label} [{e.label}]"
            hyper = dict(result.hyper)
            entry = _Entry(label, e.cls, MappingProxyType(hyper), MappingProxyType(e.cls.validate(hyper)))
            note = (f"tuned {result.param} = {result.value:.4g} by {len(result.pilots)} pilot runs in "
                    f"{result.seconds:.1f} s (apart from the run's time)"
                    + ("; the best value sits at the edge of the widest grid tried" if result.edge else "")
                    + f"{CRITERION}{result.criterion}")
            run_id = handle.store_ids.get(e.label)
            handle._relabel(e.label, entry, note)
            if run_id is not None and self.store is not None:
                try:
                    self.store.retune_run(run_id, label=label, hyper=dict(entry.resolved), note=note)
                except (sqlite3.Error, FedvizError, OSError) as err:
                    log.warning("run %s: the tuned label was not saved: %s", handle.id, err)

    def _stopped_before_start(self, handle: RunHandle, journal: _Journal) -> bool:
        if not handle.stop_requested:
            return False
        message = f"{handle._stop_reason} (before the first iteration)"
        for label in handle._end_unfinished("stopped", message):
            journal.finish(label, "stopped", message)
        return True

    def _round_robin(self, handle: RunHandle, journal: _Journal, problem: Problem,
                     f_star: float | None) -> None:
        """One iteration of each algorithm in turn, so all curves grow together.

        The loop's ``seconds`` is wall time since the algorithm started, which under
        interleaving would include the other algorithms' iterations; it is replaced by
        the algorithm's own compute time (its first record's setup-free time plus the
        time spent inside each later iteration).
        """
        job = handle.job
        stop = handle._stop.is_set
        gens = {e.label: iterate(problem, e.cls, iterations=job.iterations, hyper=e.hyper, seed=job.seed,
                                 f_star=f_star, stop=stop, label=e.label) for e in handle._entries}
        series = handle._series
        active = list(gens)
        while active:
            for label in tuple(active):
                t0 = time.perf_counter()
                try:
                    rec = next(gens[label])
                except StopIteration:
                    active.remove(label)
                    continue
                except Exception as e:  # noqa: BLE001 - raised before the first record (hyper vs problem)
                    active.remove(label)
                    message = _describe(e)
                    handle._label_end(label, "failed", message)
                    journal.finish(label, "failed", message)
                    continue
                dt = time.perf_counter() - t0
                s = series[label]
                previous = s.records[-1].iteration if s.records else None
                s.seconds = rec.seconds if previous is None else s.seconds + dt
                rec = replace(rec, seconds=s.seconds)
                if rec.status == "stopped" and handle._stop_reason != STOPPED_BY_USER:
                    # The loop says 'by the user'; say what really stopped it (a timeout, a shutdown).
                    rec = replace(rec, message=f"{handle._stop_reason} (after {rec.iteration} iterations)")
                stepped = previous is not None and rec.iteration > previous
                handle._add(label, rec, dt if stepped else None)
                journal.add(label, rec)
                if rec.status != "running":
                    active.remove(label)
                    handle._label_end(label, rec.status, rec.message)
                    journal.finish(label, rec.status, rec.message)
            journal.flush()


def _background_os_thread(name: str) -> None:
    """Mark the calling thread, for the kernel, as a named background thread (Linux only).

    The name (Python 3.11 does not pass it on) lets ``top -H``, ``ps -L`` and
    ``/proc/<pid>/task/*/comm`` tell run workers apart; the kernel keeps 15 bytes,
    ``fedviz-run-1a2b``.  The lower priority (nice + :data:`WORKER_NICE`) keeps the
    server responsive while runs use every core: the event loop and the script threads
    that draw pages preempt the computation.  Both are inherited by the threads this
    thread creates (numba's OpenMP team of this worker), and both are per thread on
    Linux only; on other systems (where ``setpriority`` would reach the whole process)
    this does nothing.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None).prctl(15, name.encode()[:15], 0, 0, 0)  # 15 = PR_SET_NAME
    except (OSError, AttributeError):
        pass
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + WORKER_NICE))
    except OSError:
        pass


def _describe(e: BaseException) -> str:
    """A user-facing message: fedviz errors say it all; others get their type name."""
    return str(e) if isinstance(e, FedvizError) else f"{type(e).__name__}: {e}"


# -- the process-wide manager -----------------------------------------------------------------------------
_MANAGER: RunManager | None = None
_MANAGER_LOCK = threading.Lock()


def get_manager() -> RunManager:
    """The dashboard's manager: created on first use, shared by every session of the process.

    ``FEDVIZ_MAX_RUNS`` caps concurrent runs (default: the number of CPUs); the store is
    :class:`RunStore` at ``FEDVIZ_DB`` or the per-user default.  On creation, runs a
    previous server left 'running' are marked 'interrupted'.  If the history cannot be
    opened, runs still work in memory and ``store_problem`` says why.
    """
    global _MANAGER
    with _MANAGER_LOCK:
        if _MANAGER is None:
            max_runs = env_int("FEDVIZ_MAX_RUNS", None, low=1)
            problem = ""
            try:
                store = RunStore()
                store.mark_interrupted()
            except (FedvizError, OSError, sqlite3.Error) as e:
                log.warning("run history disabled: %s", e)
                store, problem = None, f"the run history is disabled: {e}"
            _MANAGER = RunManager(max_runs, store=store)
            _MANAGER.store_problem = problem
        return _MANAGER


__all__ = ["RUN_STATES", "RunHandle", "RunJob", "RunManager", "RunSnapshot", "get_manager"]
