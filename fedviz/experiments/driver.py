"""Launching an experiment on the cluster, watching it, stopping it and resuming it.

:func:`launch` opens (or reopens) the experiment in the history, leaves out the cells it
already holds complete, and hands the rest to Dask: one task per setting computes f* once
(:func:`~fedviz.runner.cluster.optimum_of`), one task per cell runs it
(:func:`~fedviz.runner.cluster.run_job`) with that f* as a dependency.  A driver thread
in this process then stores each cell, with its run and records, in one transaction the
moment its task returns (so the history is the experiment's progress, and a killed server
loses only the cells in flight), and keeps a :class:`ExperimentSnapshot` for pages: cells
done, running, queued, and the live records of the running cells, streamed from the
workers.

What happens when:

* a worker dies: Dask runs its cells again on another worker; a cell is stored once, from
  the task's result, so a cell run twice is counted once;
* Stop: the tasks not started are cancelled, the running ones are told through a Dask event
  and end within seconds; their 'stopped' cells are stored, and run again on resume;
* resume (launch the same name again): only cells without a complete (done or diverged)
  result run;
* a stored name launched with another grid (its :func:`~fedviz.experiments.spec.content_hash`
  differs): refused with :class:`NameTaken`, which says how to proceed, unless ``replace`` —
  then the stored experiment and its cells are deleted first.  Refused rather than stored apart
  under a made-up name, so that a name always means one grid and a user finds their experiment
  under the name they gave it; cells are reused only within one grid.

Who may act on an experiment: the browser session that launched it last (``session``; the
history keeps it as :func:`~fedviz.runner.history.stamps.session_token`).  A launch from a browser
session is refused with :class:`NotYours` for a name another visitor holds (running, stopped or
done: resuming costs the cluster time and is theirs to decide, replacing deletes their cells),
and for a name another process (the command line, a second server on the same history) is
running now.  An experiment no visitor holds (:func:`held`) — launched from the command line,
stored before sessions were, left by a server that is gone or by a tab that has closed — may be
resumed by any visitor, within the dashboard's cell bound, and is theirs from then on; only its
launcher may replace it.  The command line (no session) is the operator and may do everything.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from dataclasses import dataclass, replace
from typing import Callable, Mapping

from ..errors import FedvizError, ParameterError
from ..runner import cluster
from ..runner.execute import STOPPED_BY_USER, describe
from ..runner.history.experiment_store import COMPLETE_CELL_STATUSES, ExperimentInfo
from ..runner.job import Entry
from ..runner.loop import IterationRecord
from ..runner.history.stamps import session_token
from ..runner.history.store import RunStore
from .results import failure_text
from .spec import Cell, Experiment, content_hash, differences

log = logging.getLogger(__name__)

#: How often the driver looks at its futures and events (seconds).
POLL = 0.1
#: How often the driver asks workers that joined since the last look which fedviz they run (seconds).
CHECK_EVERY = 2.0


@dataclass(frozen=True)
class CellProgress:
    """A cell in flight: what a page shows of it."""

    key: str
    label: str
    arm: str
    setting: tuple[int, ...]
    seed: int
    state: str                 # 'queued', 'running'
    iteration: int = 0
    suboptimality: float = float("nan")
    records: tuple[IterationRecord, ...] = ()


@dataclass(frozen=True)
class ExperimentSnapshot:
    """An experiment's progress at one moment (immutable: a page reads it without locks)."""

    name: str
    experiment_id: int | None
    status: str                # 'starting', 'running', 'stopping', 'done', 'stopped', 'failed'
    message: str
    total: int                 # cells in the grid
    reused: int                # complete before this launch (resume)
    stored: int                # stored complete (done or diverged) by this launch
    failed: int                # stored by this launch as failed or diverged
    stopped: int               # stored by this launch as stopped (run again on resume)
    cancelled: int             # cancelled before they started (by Stop)
    lost: int                  # cancelled by the cluster (the scheduler went away): run again on resume
    running: tuple[CellProgress, ...]
    queued: int
    cluster: str
    seconds: float
    version: int

    @property
    def finished(self) -> bool:
        return self.status in ("done", "stopped", "failed")

    @property
    def complete(self) -> int:
        return self.reused + self.stored


class _Collect:
    """A sink that keeps what a stored cell needs: its label, hyperparameters, records and end."""

    def __init__(self, cell: Cell):
        spec = cell.job.algorithms[0]
        self.label, self.algorithm, self.hyper = spec.label, spec.name, spec.resolved
        self.records: list[IterationRecord] = []
        self.status, self.message = "failed", "the cell ended without a status"
        self.info: dict = {}
        self.notes: list[str] = []

    def preparing(self, message: str) -> None:
        pass

    def warn(self, text: str) -> None:
        self.notes.append(text)

    def tuned(self, label: str, result) -> None:
        pass  # the cell keeps the choice as retuned's note

    def retuned(self, old: str, entry: Entry, note: str) -> None:
        self.label, self.hyper = entry.label, dict(entry.resolved)
        self.notes.append(note)

    def started(self, **info) -> None:
        self.info = info

    def record(self, label: str, rec: IterationRecord) -> None:
        self.records.append(rec)

    def end(self, label: str, status: str, message: str) -> None:
        self.status, self.message = status, message

    def tick(self) -> None:
        pass


class ExperimentHandle:
    """A launched experiment: :meth:`snapshot` for pages, :meth:`stop`, :meth:`wait`."""

    def __init__(self, experiment: Experiment, store: RunStore, address: str | None = None,
                 session: str | None = None):
        self.experiment, self.store, self.address = experiment, store, address
        # The launching browser session's id (None: the command line): compared, stored hashed, never shown.
        self._session = None if session is None else str(session)
        self.uid = uuid.uuid4().hex[:12]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stop_reason = STOPPED_BY_USER
        self._done = threading.Event()
        self._version = 0
        self._started = time.monotonic()
        self._ended: float | None = None  # when the driver finished: the clock stops there
        self._state = dict(experiment_id=None, status="starting", message="starting the cluster", total=experiment.size,
                           reused=0, stored=0, failed=0, stopped=0, cancelled=0, lost=0, queued=0, cluster="")
        self._running: dict[str, CellProgress] = {}
        self._failures: list[str] = []  # the messages of the cells this launch stored as failed
        self._thread = threading.Thread(target=self._drive, daemon=True, name=f"fedviz-exp-{self.uid[:8]}")

    # -- for callers ---------------------------------------------------------------------------------
    def launched_in(self, session_id: str | None) -> bool:
        """Whether the browser session ``session_id`` launched this experiment (never for None)."""
        return session_id is not None and self._session == str(session_id)

    def start(self) -> "ExperimentHandle":
        self._thread.start()
        return self

    def stop(self, reason: str = STOPPED_BY_USER) -> None:
        self._stop_reason = reason
        self._stop.set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def snapshot(self) -> ExperimentSnapshot:
        with self._lock:
            return ExperimentSnapshot(name=self.experiment.name, running=tuple(
                c for c in self._running.values() if c.state == "running"),
                seconds=(self._ended or time.monotonic()) - self._started, version=self._version,
                **self._state)

    # -- the driver thread -----------------------------------------------------------------------------
    def _update(self, **changes) -> None:
        with self._lock:
            self._state.update(changes)
            self._version += 1

    def _drive(self) -> None:
        try:
            self._run()
        except BaseException as e:  # noqa: BLE001 - the page shows why; the log keeps the traceback
            if isinstance(e, FedvizError):  # a refusal that says it all (a cluster without this fedviz)
                log.info("experiment %s failed: %s", self.experiment.name, e)
            else:
                log.exception("experiment %s failed", self.experiment.name)
            self._update(status="failed", message=describe(e))
            exp_id = self._state.get("experiment_id")
            if exp_id is not None:
                try:
                    self.store.finish_experiment(exp_id, "failed", describe(e))
                except FedvizError:
                    pass
        finally:
            _RUNNING.pop(self.experiment.name, None)
            with self._lock:
                self._ended = time.monotonic()
                self._version += 1
            self._done.set()

    def _run(self) -> None:
        exp, store = self.experiment, self.store
        info = store.open_experiment(exp.name, exp.as_json(), session=self._session)
        complete = store.complete_cells(info.id)
        cells = [c for c in exp.cells() if c.key not in complete]
        self._update(experiment_id=info.id, reused=exp.size - len(cells), queued=len(cells))
        if not cells:
            store.finish_experiment(info.id, "done", "every cell was already complete")
            self._update(status="done", message="every cell was already complete")
            return
        client = cluster.get_client(self.address)
        # Before the first cell: a scheduler or worker without this fedviz would fail every cell with
        # nothing but a deserialisation error; refuse it with one sentence instead.
        cluster.check_cluster(client)
        self._update(status="running", message="", cluster=cluster.describe_cluster(client))
        topic, event_name = f"fedviz-exp-{self.uid}", f"fedviz-exp-stop-{self.uid}"
        events: queue.Queue = queue.Queue()
        cluster.subscribe(client, topic, events)
        try:
            pending = self._submit(client, cells, topic, event_name)
            self._watch(client, pending, events, event_name, info.id)
        finally:
            cluster.unsubscribe(client, topic)

    def _submit(self, client, cells: list[Cell], topic: str, event_name: str) -> dict:
        """One f* task per problem, then one task per cell (in grid order: earlier first)."""
        optima, problems = {}, {}
        for cell in cells:
            p = cell.job.make_problem
            if p not in problems:
                remote, uploads = cluster.scatter_uploads(client, p)
                problems[p] = (remote, uploads)
                optima[p] = client.submit(cluster.optimum_of, remote, uploads or None, pure=False,
                                          key=f"fedviz-optimum-{self.uid}-{len(optima)}", priority=len(cells) + 1)
        pending = {}
        for i, cell in enumerate(cells):
            remote, uploads = problems[cell.job.make_problem]
            job = replace(cell.job, make_problem=remote)
            fut = client.submit(cluster.run_job, job, topic=topic, stop_event=event_name,
                                optimum=optima[cell.job.make_problem], uploads=uploads or None, tag=cell.key,
                                pure=False, key=f"fedviz-cell-{self.uid}-{cell.key}", priority=len(cells) - i)
            pending[fut] = cell
            self._running[cell.key] = CellProgress(cell.key, cell.label, cell.arm, cell.setting, cell.seed, "queued")
        return pending

    def _watch(self, client, pending: dict, events: "queue.Queue", event_name: str, exp_id: int) -> None:
        replays: dict[str, "cluster.Replay"] = {}
        lives: dict[str, _Live] = {}
        attempts: dict[str, set] = {}
        stopping = False
        refused = ""  # why a worker that joined meanwhile cannot run this experiment's cells
        checked = time.monotonic()
        while pending:
            if not stopping and time.monotonic() - checked >= CHECK_EVERY:
                checked = time.monotonic()
                try:
                    cluster.check_cluster(client)
                except cluster.ClusterMismatch as e:  # stop as Stop does: what is stored stays, the rest resumes
                    refused = str(e)
                    self.stop(refused)
                except Exception as e:  # noqa: BLE001 - a scheduler gone: the futures' states say so
                    log.debug("cannot check the cluster's new workers: %s", e)
            self._drain(events, pending, replays, lives, attempts)
            for fut in [f for f in pending if f.done()]:
                cell = pending.pop(fut)
                self._finish(fut, cell, exp_id, attempts.get(cell.key, set()))
            if self._stop.is_set() and not stopping:
                stopping = True
                self._update(status="stopping", message=self._stop_reason)
                from distributed import Event

                Event(event_name, client=client).set()
                not_started = [f for f, c in pending.items() if c.key not in lives]
                client.cancel(not_started)
            time.sleep(POLL)
        self._drain(events, {}, replays, lives, attempts)
        st = self._state
        if refused:
            status = "failed"
            message = (f"{refused}; stopped at {st['reused'] + st['stored']} of {st['total']} cells "
                       "(launch it again to resume)")
        elif st["lost"]:
            status = "failed"
            message = (f"lost the Dask cluster ({st['cluster']}): {st['lost']} cells did not run; "
                       "launch the experiment again to resume")
        elif stopping:
            status, message = "stopped", f"{self._stop_reason}: {st['reused'] + st['stored']} of {st['total']} cells"
        else:
            status = "done"
            diverged = st["failed"] - len(self._failures)
            message = "; ".join(x for x in (failure_text(self._failures),
                                            f"{diverged} diverged" if diverged else "") if x)
        self.store.finish_experiment(exp_id, status, message)
        self._update(status=status, message=message, queued=0)

    def _drain(self, events, pending, replays, lives, attempts) -> None:
        changed = False
        while True:
            try:
                msg = events.get_nowait()
            except queue.Empty:
                break
            key = msg.get("tag", "")
            if key not in self._running:
                continue
            attempts.setdefault(key, set()).add(msg["attempt"])
            live = lives.setdefault(key, _Live())
            replay = replays.setdefault(key, cluster.Replay(live))
            replay.apply(int(msg["first"]), cluster.decode_calls(msg["calls"]))
            c = self._running[key]
            last = live.records[-1] if live.records else None
            self._running[key] = replace(c, state="running", label=live.label or c.label,
                                         iteration=last.iteration if last else 0,
                                         suboptimality=last.suboptimality if last else float("nan"),
                                         records=tuple(live.records))
            changed = True
        if changed:
            with self._lock:
                self._version += 1
                self._state["queued"] = sum(1 for c in self._running.values() if c.state == "queued")

    def _finish(self, fut, cell: Cell, exp_id: int, attempts: set) -> None:
        self._running.pop(cell.key, None)
        if fut.status == "cancelled":
            if self._stop.is_set():
                self._update(cancelled=self._state["cancelled"] + 1)
            else:  # nobody asked: the scheduler (or the connection to it) went away
                self._update(lost=self._state["lost"] + 1)
            return
        collect = _Collect(cell)
        worker = ""
        if fut.status == "finished":
            result = fut.result()
            worker = result.get("worker", "")
            cluster.Replay(collect, (cell.label,)).apply(0, result["calls"])
            attempts = attempts | {result.get("attempt")}
        else:
            collect.status, collect.message = "failed", describe(fut.exception())
        info = collect.info
        config = {**dict(cell.job.config), "iterations": cell.job.iterations, "seed": cell.seed,
                  "data": _data_json(cell), "loss": cell.job.make_problem.loss, "lam": cell.job.make_problem.lam}
        if collect.notes:
            config["tuning" if cell.job.tune else "notes"] = " ".join(collect.notes)
        optimum = fut.result().get("optimum") if fut.status == "finished" else None
        if optimum and optimum[1] is not None:
            config["optimum_test_error"] = optimum[1]
        self.store.save_cell(exp_id, key=cell.key, setting=cell.setting, arm=cell.arm, step=cell.step,
                             seed=cell.seed, label=collect.label, algorithm=collect.algorithm, hyper=collect.hyper,
                             config=config, status=collect.status, message=collect.message,
                             records=collect.records, dataset_fingerprint=info.get("fingerprint", ""),
                             dataset_summary=info.get("summary"), f_star=info.get("f_star"), worker=worker,
                             attempts=max(1, len(attempts - {None})))
        if collect.status == "failed":
            self._failures.append(collect.message)
        st = self._state
        complete = collect.status in COMPLETE_CELL_STATUSES
        self._update(stored=st["stored"] + complete, failed=st["failed"] + (collect.status in ("failed", "diverged")),
                     stopped=st["stopped"] + (collect.status == "stopped"),
                     queued=sum(1 for c in self._running.values() if c.state == "queued"))


class _Live(_Collect):
    """The streamed calls of a running cell: its records so far (for the live curves)."""

    def __init__(self):
        self.label, self.records, self.notes, self.info = "", [], [], {}
        self.status, self.message = "running", ""

    def retuned(self, old: str, entry: Entry, note: str) -> None:
        self.label = entry.label


def _data_json(cell: Cell) -> dict:
    data = cell.job.make_problem.data
    return {k: v for k, v in vars(data).items() if k != "loader_options" and v is not None and not isinstance(v, bytes)}


# -- the process's experiments ----------------------------------------------------------------------------
_RUNNING: dict[str, ExperimentHandle] = {}
_RUNNING_LOCK = threading.Lock()


class NameTaken(FedvizError):
    """A stored experiment has this name and another grid (see the module docstring)."""

    def __init__(self, name: str, stored, new: Experiment):
        self.name, self.stored = name, stored
        what = ", ".join(differences(stored.spec, new.as_json())) or "its grid"
        super().__init__(
            f"an experiment named {name!r} is already in the history with a different grid (it differs in "
            f"{what}; {stored.n_complete} of its cells are complete), and one name holds one grid: give this "
            "one another name, or replace the stored one (on the command line --replace; on the page, "
            "Replace), which deletes its cells")


#: session_token → session id, for every browser session that launched an experiment in this process:
#: the history keeps only the token, and :func:`held` asks whether that session is still connected.
_LAUNCHERS: dict[str, str] = {}


def held(info: ExperimentInfo, alive: Callable[[str], bool | None] | None = None) -> bool:
    """Whether a visitor still holds the stored experiment ``info``: a browser session launched it
    last, on a server that is alive, and (when ``alive``, a session-id → connected probe such as
    :func:`fedviz.ui.session_connected`, says so) that session has not closed.  A session of another
    live server, or a probe that cannot tell (None), counts as holding it."""
    if info.ownerless:
        return False
    sid = _LAUNCHERS.get(info.session or "")
    return alive is None or sid is None or alive(sid) is not False


class NotYours(FedvizError):
    """A browser session asked to launch (resume, replace) an experiment another visitor holds, or one
    another process is running (see the module docstring)."""


def launch(experiment: Experiment, store: RunStore, *, address: str | None = None,
           replace: bool = False, max_cells: int | None = None, session: str | None = None,
           alive: Callable[[str], bool | None] | None = None) -> ExperimentHandle:
    """Start (or resume) ``experiment`` in a driver thread; refuses a name already running here, and a
    name stored with another grid (:class:`NameTaken`) unless ``replace`` (the stored one is deleted).

    ``max_cells`` bounds the grid (the dashboard's ``FEDVIZ_MAX_CELLS``: one click must not take a
    shared cluster for hours), and with a ``session`` the cells of every experiment that session
    has running; None, as on the command line, leaves it unbounded.

    ``session``: the browser session launching it, which the experiment then belongs to; a session
    may not launch a name another visitor holds (:func:`held`, with the probe ``alive``) or another
    process runs (:class:`NotYours`), nor replace a grid it did not launch.  None (the command line)
    may do everything."""
    if not isinstance(experiment, Experiment):
        raise ParameterError("experiment", type(experiment).__name__, "an Experiment")
    experiment.check()
    if max_cells is not None and experiment.size > max_cells:
        raise ParameterError("cells", experiment.size, f"at most {max_cells:,} cells from the dashboard",
                             hint="fewer seeds, stepsizes or axis values; the command line "
                                  "(`python -m fedviz experiment`) takes larger grids, and FEDVIZ_MAX_CELLS sets "
                                  "this server's bound")
    name = experiment.name
    with _RUNNING_LOCK:
        current = _RUNNING.get(name)
        if current is not None and not current.done:
            ours = session is None or current.launched_in(session)
            raise ParameterError("name", name, "the name of an experiment that is not running now",
                                 hint="stop it first, or give this one another name" if ours else
                                 "another visitor (or the command line) launched it: its cells appear under "
                                 "Results as they finish; give yours another name to run it yourself")
        if max_cells is not None and session is not None:
            # The bound is the tab's, not one click's: two grids of 400 from one tab are 800 cells.
            busy = sum(h.experiment.size for h in _RUNNING.values() if not h.done and h.launched_in(session))
            if busy + experiment.size > max_cells:
                raise ParameterError("cells", experiment.size,
                                     f"at most {max_cells - busy:,} more cells from this browser tab, whose "
                                     f"running experiments hold {busy:,} of its {max_cells:,}",
                                     hint="stop one of them, or wait for it to end; FEDVIZ_MAX_CELLS sets this "
                                          "server's bound")
        stored = store.get_experiment(name)
        if stored is not None and session is not None and not stored.launched_in(session):
            if held(stored, alive):
                raise NotYours(f"the experiment {name!r} was launched by another visitor of this server: its "
                               "results are under Results, but only that visitor (or the command line) may "
                               "resume or replace it; to run this grid yourself, give it another name")
            if stored.status == "running" and stored.owner_live:
                raise NotYours(f"the experiment {name!r} is running in another process on this history (the "
                               "command line, or another server): its cells appear under Results as they "
                               "finish; launch it again once it has ended, or give yours another name")
        if stored is not None and content_hash(stored.spec) != experiment.content_hash:
            if not replace:
                raise NameTaken(name, stored, experiment)
            if session is not None and not stored.launched_in(session):
                raise NotYours(f"the stored experiment {name!r} was not launched from this browser tab, so "
                               "the page does not delete its cells; give yours another name (the command "
                               "line's --replace can replace it)")
            store.delete_experiment(stored.id)
        handle = ExperimentHandle(experiment, store, address, session)
        if session is not None:
            _LAUNCHERS[session_token(session)] = str(session)
        _RUNNING[experiment.name] = handle
    return handle.start()


def running(name: str | None = None) -> ExperimentHandle | Mapping[str, ExperimentHandle] | None:
    """The handle of the experiment ``name`` running in this process (all of them without a name)."""
    with _RUNNING_LOCK:
        return _RUNNING.get(name) if name is not None else dict(_RUNNING)


__all__ = ["CellProgress", "ExperimentHandle", "ExperimentSnapshot", "NameTaken", "NotYours", "held", "launch", "running"]
