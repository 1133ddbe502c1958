"""The live state of a run as a page reads it: :class:`RunHandle` (status, :meth:`~RunHandle.snapshot`,
:meth:`~RunHandle.stop`) and :class:`RunSnapshot` (an immutable picture of it for one redraw).

A handle is a :class:`~fedviz.runner.execute.Sink`: the worker reports to it (with the
handle's lock not held), pages read it.  It knows nothing of the manager but two callables
the manager gives it: where the run stands in the queue, and what to do when it is asked
to stop (take it out of the queue).

Snapshots are O(number of algorithms), whatever the number of records: a handle's
buffers are append-only numpy arrays and lists, and a snapshot holds read-only views of
their filled part.  The one in-place change, the final record that re-reports the last
iteration (the loop's 'stopped'/'failed' record), copies the buffers first, so a
snapshot never changes after it was taken.
"""

from __future__ import annotations

import threading
import uuid
from collections import deque
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Callable, Mapping

import numpy as np

from ..execute import STOPPED_BY_USER, Stop
from ..job import Entry, Job
from ..loop import IterationRecord
from ...problems.pernode import NodeHistory, NodeTrack
from ..history.store import INT_FIELDS, NUMERIC_FIELDS

#: Step durations kept per algorithm for the ETA (a recent window follows changes in speed).
ETA_WINDOW = 256

#: The overall states of a run: waiting, running, and the three ways it ends.
RUN_STATES = ("queued", "running", "done", "stopped", "failed")


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
        'queued', 'preparing' (building the problem, computing f*, tuning), 'iterating' or 'finished'.
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
        Remaining time from the median recent iteration time (differences of the records'
        ``seconds``) of each running algorithm; None until every running algorithm has
        finished an iteration.
    queue_position : int
        0 unless queued; k for the k-th run in line.
    compiling : bool
        True while some algorithm has not finished its first iteration (the first numba
        compilation can take seconds).
    f_star : float or None
        The optimum's value once known.
    optimum_test_error : float or None
        The optimum's test error, when the run computed f* itself (None when it was given).
    summary : mapping
        The data set's summary (n, d, nodes, …) with the loss and λ, once the problem is built.
    version : int
        Grows with every change; equal versions mean equal contents.
    nodes : mapping label → :class:`~fedviz.problems.pernode.NodeTrack`
        Every node's value of each per-node metric at the latest record, and of the metrics with a
        history (the test error and own loss) a bounded history for the node picker
        (:data:`~fedviz.problems.pernode.NODE_HISTORY_VALUES`).
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
    optimum_test_error: float | None
    summary: Mapping[str, Any]
    version: int
    _records: Mapping[str, tuple[list, int]] = field(repr=False, compare=False)
    nodes: Mapping[str, NodeTrack] = field(default_factory=dict, repr=False, compare=False)

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
        self.note = ""      # decided before the run (tuning), shown beside the status
        self.nodes = NodeHistory()

    @property
    def n(self) -> int:
        return len(self.records)

    def add(self, rec: IterationRecord) -> None:
        if rec.nodes is not None:
            # The per-node vectors go to the bounded history, not into every kept record.
            self.nodes.add(rec.nodes)
            rec = replace(rec, nodes=None)
        n = self.n
        if n and rec.iteration > self.records[-1].iteration:
            # The loop's seconds are the algorithm's own time: their difference is this step's.
            self.durations.append(rec.seconds - self.records[-1].seconds)
        if n and rec.iteration == self.records[-1].iteration:
            # Copy on write: snapshots hold views of the old buffers, which must not change.
            self.records = self.records[:-1]
            self.cols = {f: a.copy() for f, a in self.cols.items()}
            n -= 1
        elif n == len(self.cols["iteration"]):
            self.cols = {f: np.concatenate([a, np.empty_like(a)]) for f, a in self.cols.items()}
        summaries = rec.summaries
        for f, a in self.cols.items():
            a[n] = summaries[f] if f in summaries else getattr(rec, f)  # a summary the record lacks: NaN
        self.records.append(rec)

    def views(self) -> Mapping[str, np.ndarray]:
        out = {}
        for f, a in self.cols.items():
            v = a[: self.n]
            v.flags.writeable = False
            out[f] = v
        return MappingProxyType(out)


class RunHandle:
    """A submitted run: poll :meth:`snapshot`, call :meth:`stop`; created by
    :meth:`RunManager.submit <fedviz.runner.serve.manager.RunManager.submit>`.

    Keep it in the session state: it stays valid (and its records in memory) after the
    run ended.

    Parameters
    ----------
    job : Job
        The validated job.
    session_id : str
        The browser session the run belongs to.
    position : callable (handle) -> int
        The handle's place in the queue (0: not queued).
    on_stop : callable (handle) -> None
        Called once when a stop is requested (after :attr:`stop_signal` is set).
    """

    def __init__(self, job: Job, session_id: str, *, position: Callable[["RunHandle"], int] = lambda h: 0,
                 on_stop: Callable[["RunHandle"], None] = lambda h: None, run_id: str | None = None):
        self.id = run_id or uuid.uuid4().hex
        self.session_id = session_id
        self.job = job
        self.config = job.config
        self.labels = job.labels
        #: label → stored run id (empty without a store); set by the manager when it creates them.
        self.store_ids: Mapping[str, int] = MappingProxyType({})
        #: The stop signal the worker polls (:meth:`stop` sets it).
        self.stop_signal = Stop()
        self._entries = job.entries
        self._position = position
        self._on_stop = on_stop
        self._lock = threading.Lock()
        self._series = {e.label: _Series() for e in job.entries}
        self._status = "queued"
        self._phase = "queued"
        self._message = ""
        self._warning = ""
        self._f_star: float | None = None
        self._optimum_test_error: float | None = None
        self._summary: Mapping[str, Any] = MappingProxyType({})
        self._version = 0
        self._snapshot: RunSnapshot | None = None
        self._done = threading.Event()

    def __repr__(self) -> str:
        return f"<RunHandle {self.id[:8]} {self._status} {', '.join(self.labels)}>"

    # -- what a page reads and does ----------------------------------------------------------------------
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
            if self._done.is_set() or not self.stop_signal.request(reason):
                return
        self._on_stop(self)

    @property
    def stop_requested(self) -> bool:
        return self.stop_signal()

    @property
    def stop_reason(self) -> str:
        return self.stop_signal.reason

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run ended (True) or ``timeout`` seconds passed (False)."""
        return self._done.wait(timeout)

    def queue_position(self) -> int:
        """0 when running or finished, k when k-th in the queue."""
        return self._position(self)

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

    # -- what the manager does -----------------------------------------------------------------------------
    def begin(self) -> None:
        """The run got a slot: it is running, waiting for its worker."""
        self._update(status="running", phase="preparing", message="waiting for the worker")

    def finish(self) -> None:
        """Set the overall end state from the algorithms' states, then release waiters."""
        with self._lock:
            states = [s.status for s in self._series.values()]
            if "stopped" in states:
                status, message = "stopped", self.stop_signal.reason or "stopped"
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
            self._version += 1
        self._done.set()

    # -- the sink (called by the worker, with the handle lock not held) -----------------------------------
    def preparing(self, message: str) -> None:
        self._update(phase="preparing", message=message)

    def warn(self, text: str) -> None:
        with self._lock:
            self._warning = text
            self._version += 1

    def tuned(self, label: str, result) -> None:
        """Nothing: the page shows the choice from :meth:`retuned`'s note."""

    def retuned(self, old: str, entry: Entry, note: str) -> None:
        """Replace an algorithm that has no records yet by ``entry`` (its tuned version), in place."""
        with self._lock:
            self._entries = tuple(entry if e.label == old else e for e in self._entries)
            self.labels = tuple(e.label for e in self._entries)
            self._series = {(entry.label if k == old else k): s for k, s in self._series.items()}
            self._series[entry.label].note = note
            if old in self.store_ids:
                self.store_ids = MappingProxyType({(entry.label if k == old else k): v
                                                   for k, v in self.store_ids.items()})
            self._version += 1

    def started(self, *, fingerprint: str, summary: Mapping, f_star: float | None,
                optimum_test_error: float | None = None) -> None:
        with self._lock:
            self._phase, self._message = "iterating", ""
            self._f_star, self._optimum_test_error = f_star, optimum_test_error
            self._summary = MappingProxyType(dict(summary))
            for s in self._series.values():
                s.status = "running"
            self._version += 1

    def record(self, label: str, rec: IterationRecord) -> None:
        with self._lock:
            self._series[label].add(rec)
            self._version += 1

    def end(self, label: str, status: str, message: str) -> None:
        with self._lock:
            s = self._series[label]
            s.status, s.message = status, message
            self._version += 1

    def tick(self) -> None:
        pass

    # -- inside ---------------------------------------------------------------------------------------------
    def _update(self, *, status: str | None = None, phase: str | None = None, message: str | None = None) -> None:
        with self._lock:
            if status is not None:
                self._status = status
            if phase is not None:
                self._phase = phase
            if message is not None:
                self._message = message
            self._version += 1

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
            queue_position=pos, compiling=compiling, f_star=self._f_star,
            optimum_test_error=self._optimum_test_error, summary=self._summary, version=self._version,
            _records=MappingProxyType({k: (s.records, s.n) for k, s in series.items()}),
            nodes=MappingProxyType({k: s.nodes.track() for k, s in series.items()}))


__all__ = ["ETA_WINDOW", "RUN_STATES", "RunHandle", "RunSnapshot"]
