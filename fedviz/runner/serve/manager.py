"""The run manager: a server-wide FIFO queue of runs, at most ``max_concurrent`` at once, the
browser sessions they belong to, and the process-wide manager of the dashboard (:func:`get_manager`).

The runner in pieces, each using the others' public methods only:

* :mod:`.job` — what to run: :class:`RunJob` as submitted, validated into a frozen
  :class:`~fedviz.runner.job.Job`; a :class:`~fedviz.runner.job.ProblemSpec` lets the worker
  build the problem (:mod:`.cache`), under the cap;
* :mod:`.handle` — the live state a page reads: :class:`RunHandle` (status, snapshot,
  stop) and :class:`RunSnapshot`;
* :mod:`.execute` — :func:`~fedviz.runner.execute.execute` ``(job, sink, stop)``, which
  prepares and runs a job and reports to a sink (the handle and the :mod:`.journal` are
  sinks), and the seam :class:`~fedviz.runner.execute.Executor` that runs it somewhere
  (:class:`~fedviz.runner.execute.ThreadExecutor`: one thread per run);
* this module — the queue, the cap, the sessions and their reaper, the singleton.

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
The executor runs each started run (with the default :class:`ThreadExecutor`, one daemon
thread ``fedviz-run-<id>`` scheduled below the server's own threads); at most
``max_concurrent`` run at once and the rest wait in FIFO order.  The manager lock guards
the queue and the sessions; each handle's lock guards its buffers.  The manager lock may
be taken before a handle lock, never the other way round.  Durability: see :mod:`.journal`.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Mapping

from ...errors import FedvizError
from ...validation import check_int, check_real, env_int
from ..execute import (CRITERION, STOPPED_BY_USER, WORKER_NICE, Executor, Task, Tee, ThreadExecutor,
                      background_os_thread)
from .handle import ETA_WINDOW, RUN_STATES, RunHandle, RunSnapshot
from ..job import Job, ProblemSpec, RunJob
from ..history.journal import FLUSH_INTERVAL, Journal
from ..history.store import RunStore

log = logging.getLogger(__name__)

#: Seconds a session may stay disconnected before its runs stop: the browser reconnects by
#: itself after a network blip, retrying with growing pauses (four or five tries in 15 s).
DISCONNECT_GRACE = 15.0

#: Why a run stopped (besides :data:`STOPPED_BY_USER`).
STOPPED_SESSION_CLOSED = "stopped: the browser session closed"
STOPPED_SHUTDOWN = "stopped: the server is shutting down"

#: The old private name, for callers not yet moved to :func:`fedviz.runner.execute.background_os_thread`.
_background_os_thread = background_os_thread


@dataclass
class _Run:
    """A submitted run as the manager keeps it: its handle, its journal and, once started, its task."""

    handle: RunHandle
    journal: Journal
    task: Task | None = None


class Slot:
    """A page's claim on one of the run cap's slots, for work it does itself (building a data set
    a link or a form asked for, solving for its optimum): queued in FIFO order with the runs, so
    that a visitor's expensive link waits its turn instead of competing with every run for the
    server's cores and memory.  From :meth:`RunManager.slot`; :meth:`release` it when done (or
    abandoned while still queued)."""

    handle = None  # not a run: the queue's run lookups pass it by
    task = None

    def __init__(self, manager: "RunManager", session_id: str):
        self.session_id = session_id
        self._manager = manager
        self._ready = threading.Event()
        self.released = False

    def start(self) -> None:
        self._ready.set()

    def wait(self, timeout: float | None = None) -> bool:
        """True once the slot is this page's (at once when a slot was free)."""
        return self._ready.wait(timeout)

    @property
    def position(self) -> int:
        """0 once granted, k while k-th in the queue."""
        return self._manager._position(self)

    def release(self) -> None:
        if not self.released:
            self.released = True
            self._manager._release(self)

    def __enter__(self) -> "Slot":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


# -- the manager ----------------------------------------------------------------------------------------
class RunManager:
    """Runs jobs through an executor (threads by default), at most ``max_concurrent`` at once, the rest in FIFO order.

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
    executor : Executor, optional
        Where started runs execute (:class:`~fedviz.runner.execute.Executor`); default a
        :class:`~fedviz.runner.execute.ThreadExecutor`, one thread per run.
    max_per_session : int or None
        The most runs one session may have running or queued at once (runs it asked to stop do
        not count); None: no limit.  On a shared server one visitor's clicks must not fill the
        queue every other visitor waits in (``FEDVIZ_SESSION_RUNS``, default 4, in
        :func:`get_manager`).
    """

    def __init__(self, max_concurrent: int | None = None, store: RunStore | None = None,
                 session_timeout: float = 30.0, *, flush_interval: float = FLUSH_INTERVAL,
                 clock: Callable[[], float] = time.monotonic, reaper: bool = True,
                 liveness: Callable[[str], bool | None] | None = None,
                 disconnect_grace: float = DISCONNECT_GRACE, executor: Executor | None = None,
                 max_per_session: int | None = None):
        self.max_concurrent = check_int("max_concurrent", max_concurrent or os.cpu_count() or 1, low=1)
        self.max_per_session = None if max_per_session is None else check_int("max_per_session", max_per_session,
                                                                               low=1)
        self.session_timeout = check_real("session_timeout", session_timeout, low=0, low_open=True)
        self.flush_interval = check_real("flush_interval", flush_interval, low=0)
        self.disconnect_grace = check_real("disconnect_grace", disconnect_grace, low=0)
        self.liveness = liveness
        self.store = store
        #: Where started runs execute (one thread each by default).
        self.executor = executor if executor is not None else ThreadExecutor()
        self._local = ThreadExecutor()  # for runs whose algorithms exist only in this process
        #: Why the history is disabled (set by :func:`get_manager` when the store cannot open).
        self.store_problem = ""
        #: Where runs execute when a cluster is configured, or why they do not (set by :func:`get_manager`).
        self.cluster_note = ""
        self._clock = clock
        self._lock = threading.Lock()
        self._queue: deque[_Run] = deque()
        self._running: dict[str, _Run] = {}
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

        Its stored runs carry ``session_id``: a visitor is listed its own runs only
        (:meth:`RunStore.list_runs` ``visible_to``).

        Raises
        ------
        ParameterError
            For a bad hyperparameter, label, iteration count, seed, config or problem spec:
            nothing is started.
        FedvizError
            If the manager is closed, or the session already has ``max_per_session`` runs
            running or queued.
        """
        session_id = str(session_id)
        valid = Job.of(job)
        if self._closed.is_set():
            raise FedvizError("the run manager is closed")
        self._check_session_cap(session_id)
        handle = RunHandle(valid, session_id, position=self.queue_position, on_stop=self._stopped)
        journal = Journal.create(self.store, valid, handle.id, interval=self.flush_interval, warn=handle.warn,
                                 session=session_id)
        handle.store_ids = journal.run_ids
        run = _Run(handle, journal)
        with self._lock:
            if self._closed.is_set():  # closed while the stored runs were being created
                raise FedvizError("the run manager is closed")
            self._sessions[session_id] = self._clock()
            if len(self._running) < self.max_concurrent:
                self._start_locked(run)
            else:
                self._queue.append(run)
        self._ensure_reaper()
        self.reap()
        return handle

    def _check_session_cap(self, session_id: str) -> None:
        if self.max_per_session is None:
            return
        live = [h for h in self.active(session_id) if not h.stop_signal()]
        if len(live) >= self.max_per_session:
            raise FedvizError(
                f"this browser session already has {len(live)} runs running or queued, the most one session may "
                f"have on this server (FEDVIZ_SESSION_RUNS={self.max_per_session}): stop one, or wait for one "
                "to end")

    def slot(self, session_id: str) -> Slot:
        """One of the ``max_concurrent`` slots for a page's own heavy work, granted now if one is free,
        else after the runs and slots queued before it (:class:`Slot`; release it when done)."""
        slot = Slot(self, str(session_id))
        with self._lock:
            if self._closed.is_set():
                raise FedvizError("the run manager is closed")
            if len(self._running) < self.max_concurrent:
                self._start_locked(slot)
            else:
                self._queue.append(slot)
        return slot

    def _release(self, slot: Slot) -> None:
        with self._lock:
            if slot in self._queue:
                self._queue.remove(slot)
            elif self._running.pop(id(slot), None) is not None:
                self._fill_locked()

    def _position(self, item) -> int:
        with self._lock:
            return next((k for k, queued in enumerate(self._queue, 1) if queued is item), 0)

    def _fill_locked(self) -> None:
        """Start queued runs and slots while the cap allows."""
        while self._queue and len(self._running) < self.max_concurrent and not self._closed.is_set():
            self._start_locked(self._queue.popleft())

    def _start_locked(self, run: "_Run | Slot") -> None:
        if isinstance(run, Slot):
            self._running[id(run)] = run
            run.start()
            return
        handle = run.handle
        handle.begin()
        self._running[handle.id] = run
        # An algorithm class outside the registry (a test's, or the Learn page's observed FSVRG that
        # reports its iterates to this session) exists only in this process: such a run stays here.
        local = any(e.spec.impl is not None for e in handle.job.entries)
        executor = self._local if local and not self.executor.in_process else self.executor
        run.task = executor.start(handle.id, handle.job, Tee(run.journal, handle), handle.stop_signal,
                                  lambda: self._ended(run))

    def _ended(self, run: _Run) -> None:
        """The executor is done with a run: commit its last records, free its slot (and start the
        next queued runs), then release its waiters — in that order, so that once
        :meth:`RunHandle.wait` returns the next queued run has started."""
        try:
            run.journal.close()
        finally:
            with self._lock:
                self._running.pop(run.handle.id, None)
                self._fill_locked()
            run.handle.finish()

    def _stopped(self, handle: RunHandle) -> None:
        """A stop was requested: a queued run leaves the queue and ends at once; a running one
        ends by itself (its worker polls the stop signal)."""
        with self._lock:
            run = next((r for r in self._queue if r.handle is handle), None)
            if run is None:
                return  # running or finished
            self._queue.remove(run)
        message = f"{handle.stop_reason} (before it started)"
        sink = Tee(run.journal, handle)
        for label in handle.job.labels:
            sink.end(label, "stopped", message)
        run.journal.close()
        handle.finish()

    def queue_position(self, handle: RunHandle) -> int:
        """0 when ``handle`` is running or finished, k when it is k-th in the queue."""
        with self._lock:
            for k, run in enumerate(self._queue, 1):
                if run.handle is handle:
                    return k
            return 0

    def counts(self) -> tuple[int, int]:
        """(running, queued) runs, server-wide."""
        with self._lock:
            return len(self._running), len(self._queue)

    def active(self, session_id: str | None = None) -> list[RunHandle]:
        """The running and queued runs (of one session), running first, then in queue order."""
        with self._lock:
            handles = [r.handle for r in self._running.values()] + [r.handle for r in self._queue]
        return [h for h in handles if h is not None and (session_id is None or h.session_id == session_id)]

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
        background_os_thread(threading.current_thread().name)
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
            threads = [r.task for r in self._running.values() if r.task is not None]
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in threads)

# -- the process-wide manager -----------------------------------------------------------------------------
_MANAGER: RunManager | None = None
_MANAGER_LOCK = threading.Lock()


def get_manager() -> RunManager:
    """The dashboard's manager: created on first use, shared by every session of the process.

    With ``FEDVIZ_DASK_SCHEDULER`` set, runs execute on that Dask cluster
    (:class:`~fedviz.runner.cluster.DaskExecutor`), so a classroom server hands its
    compute to the cluster; if it cannot be reached, runs stay in this process and
    ``cluster_note`` says why.
    ``FEDVIZ_MAX_RUNS`` caps concurrent runs (default: the number of CPUs, or the cluster's
    worker threads), ``FEDVIZ_SESSION_RUNS`` one session's running and queued runs (default 4); the store is
    :class:`RunStore` at ``FEDVIZ_DB`` or the per-user default.  On creation, runs a
    previous server left 'running' are marked 'interrupted'.  If the history cannot be
    opened, runs still work in memory and ``store_problem`` says why.
    """
    global _MANAGER
    with _MANAGER_LOCK:
        if _MANAGER is None:
            max_runs = env_int("FEDVIZ_MAX_RUNS", None, low=1)
            per_session = env_int("FEDVIZ_SESSION_RUNS", 4, low=1)
            problem = ""
            try:
                store = RunStore()
                store.mark_interrupted()
            except (FedvizError, OSError, sqlite3.Error) as e:
                log.warning("run history disabled: %s", e)
                store, problem = None, f"the run history is disabled: {e}"
            _MANAGER = RunManager(max_runs, store=store, max_per_session=per_session)
            _MANAGER.store_problem = problem
            address = os.environ.get("FEDVIZ_DASK_SCHEDULER")
            if address:
                # Connect on a thread of its own: no page waits for a cluster (or for a port that is
                # not one), and runs stay in this process until it answers.
                _MANAGER.cluster_note = f"runs execute in this server while it connects to the Dask cluster at {address}"
                threading.Thread(target=_use_cluster, args=(_MANAGER, max_runs is None), daemon=True,
                                 name="fedviz-cluster-connect").start()
        return _MANAGER


def _use_cluster(manager: "RunManager", size_from_cluster: bool) -> None:
    """Hand the manager's next runs to the Dask cluster once it answers (or say why not)."""
    executor, note = _executor()
    with manager._lock:
        if executor is not None:
            manager.executor = executor
            if size_from_cluster:
                manager.max_concurrent = executor.slots
            manager._fill_locked()  # the cluster's slots, filled now
        manager.cluster_note = note


def _executor():
    """(DaskExecutor, note) when ``FEDVIZ_DASK_SCHEDULER`` names a reachable cluster, else (None, why)."""
    if not os.environ.get("FEDVIZ_DASK_SCHEDULER"):
        return None, ""
    from ..cluster import DaskExecutor, describe_cluster, get_client

    try:
        client = get_client()
    except FedvizError as e:
        log.warning("runs stay in this process: %s", e)
        return None, f"runs execute in this server: {e}"
    executor = DaskExecutor()
    executor.slots = max(1, sum(w.get("nthreads", 1) for w in client.scheduler_info(n_workers=-1)["workers"].values()))
    return executor, f"runs execute on the Dask cluster ({describe_cluster(client)})"


__all__ = ["CRITERION", "DISCONNECT_GRACE", "ETA_WINDOW", "RUN_STATES", "STOPPED_BY_USER",
           "STOPPED_SESSION_CLOSED", "STOPPED_SHUTDOWN", "WORKER_NICE", "ProblemSpec", "RunHandle", "RunJob",
           "RunManager", "RunSnapshot", "get_manager"]
