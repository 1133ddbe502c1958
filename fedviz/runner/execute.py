"""Running one job: :func:`execute` (a pure function of a job, a sink and a stop signal) and
the seam that runs it somewhere (:class:`Executor`; here :class:`ThreadExecutor`).

:func:`execute` prepares the job (builds the problem, computes f*, tunes the stepsizes
when asked), then advances its algorithms round-robin, one iteration of each in turn, so
all curves grow together, and reports everything to a :class:`Sink`: the live
:class:`~fedviz.runner.serve.handle.RunHandle` a page reads and the
:class:`~fedviz.runner.history.journal.Journal` that writes the history both are sinks, joined
by :class:`Tee`.  It reads nothing back from the sink and never raises: every algorithm
ends with a status.

Time is measured once, by the iteration loop (:func:`fedviz.runner.loop.iterate`): a
record's ``seconds`` is the algorithm's own compute time since its setup, which leaves
out the time its generator spends suspended (the other algorithms' turns), so it is
right under interleaving as it is.  Sinks derive step durations (the ETA) from it.

The seam.  An :class:`Executor` takes a job, a sink, a stop signal and a callback for the
end, and runs :func:`execute` somewhere: :class:`ThreadExecutor` in a named, low-priority
thread of this process; a cluster executor (Dask) would run it on a worker and stream the
sink's calls back.  The manager (queue, cap, sessions) knows nothing else about it.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading
from abc import ABC, abstractmethod
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Mapping, Protocol, runtime_checkable

from ..algorithms.base import StopRequested
from ..errors import FedvizError
from ..problems.objective import Problem
from ..problems.optimum import solve
from .job import Entry, Job, ProblemSpec
from .loop import IterationRecord, iterate

if TYPE_CHECKING:
    from .tune import TuneResult

log = logging.getLogger(__name__)

#: Why a run stopped, when a user pressed Stop (the loop's own 'stopped' message says so too).
STOPPED_BY_USER = "stopped by the user"

#: Between a tuned algorithm's note and the criterion its pilots were judged by (the UI shows the
#: criterion once for all algorithms; the history keeps the whole note).
CRITERION = ". Criterion: "

#: How much lower than the server's threads the run workers are scheduled (Linux nice steps).
WORKER_NICE = 10


# -- the stop signal ------------------------------------------------------------------------------------
class Stop:
    """A request to stop a run, with its reason: false until :meth:`request`, then true for good.

    Call it (``stop()``) to ask whether a stop was requested: the loop and the algorithms
    poll it between node batches.  The first reason given wins.
    """

    def __init__(self):
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._reason = ""

    def request(self, reason: str = STOPPED_BY_USER) -> bool:
        """Ask for the stop; False if it had been asked already."""
        with self._lock:
            if self._event.is_set():
                return False
            self._reason = reason
            self._event.set()
            return True

    def __call__(self) -> bool:
        return self._event.is_set()

    @property
    def reason(self) -> str:
        return self._reason


# -- the sink -------------------------------------------------------------------------------------------
@runtime_checkable
class Sink(Protocol):
    """Where :func:`execute` reports a run; called from the worker, in this order:

    ``preparing`` and ``warn`` any number of times, ``tuned`` once per algorithm of a tuned job,
    ``retuned`` once per algorithm tuning or a scale changed, ``started`` once, then ``record``
    per record and ``end`` once per algorithm, with ``tick`` after every round; ``end`` may come
    without ``started`` (a run stopped or failed while preparing).  Closing is the caller's
    business, not :func:`execute`'s.
    """

    def preparing(self, message: str) -> None:
        """What the worker is doing before the first iteration (building, computing f*, tuning)."""

    def warn(self, text: str) -> None:
        """Something the user should know that does not end the run."""

    def tuned(self, label: str, result: TuneResult) -> None:
        """The pilots' verdict on the algorithm labelled ``label``, whether a value was chosen or not
        (the command line prints it; the pages read the choice from ``retuned``'s note)."""

    def retuned(self, old: str, entry: Entry, note: str) -> None:
        """Tuning replaced the algorithm labelled ``old`` by ``entry`` (new label and hyperparameters)."""

    def started(self, *, fingerprint: str, summary: Mapping, f_star: float | None,
                optimum_test_error: float | None) -> None:
        """The problem is ready: every algorithm starts iterating."""

    def record(self, label: str, rec: IterationRecord) -> None:
        """One record of one algorithm (a final record may re-report the last iteration)."""

    def end(self, label: str, status: str, message: str) -> None:
        """An algorithm ended ('done', 'diverged', 'stopped' or 'failed'), after its last record."""

    def tick(self) -> None:
        """A round of the round-robin is over (a chance to commit)."""


class Tee:
    """A sink that forwards every call to several sinks, in the order given."""

    def __init__(self, *sinks: Sink):
        self.sinks = sinks

    def preparing(self, message: str) -> None:
        for s in self.sinks:
            s.preparing(message)

    def warn(self, text: str) -> None:
        for s in self.sinks:
            s.warn(text)

    def tuned(self, label: str, result: TuneResult) -> None:
        for s in self.sinks:
            s.tuned(label, result)

    def retuned(self, old: str, entry: Entry, note: str) -> None:
        for s in self.sinks:
            s.retuned(old, entry, note)

    def started(self, **info) -> None:
        for s in self.sinks:
            s.started(**info)

    def record(self, label: str, rec: IterationRecord) -> None:
        for s in self.sinks:
            s.record(label, rec)

    def end(self, label: str, status: str, message: str) -> None:
        for s in self.sinks:
            s.end(label, status, message)

    def tick(self) -> None:
        for s in self.sinks:
            s.tick()


# -- execute --------------------------------------------------------------------------------------------
def execute(job: Job, sink: Sink, stop: Stop) -> None:
    """Run ``job``, reporting to ``sink``, until done or ``stop()``; never raises.

    Preparing (the phase before the first iteration) builds the problem (``job.make_problem``),
    computes f* by Newton-CG unless the job gives it (a failure there is a warning, the
    suboptimality then NaN), with ``job.tune`` tunes each algorithm
    (:func:`fedviz.runner.tune.tune`), and with ``job.personal_targets`` solves the exact personal
    models each Ditto run measures its distance to (:mod:`fedviz.personal.target`; a failure there
    is a warning).  Every path hands its job here (a Run click through an :class:`Executor`, an
    experiment's cell through :func:`fedviz.runner.cluster.run_job`, ``fedviz run`` directly), so
    what a job computes depends on the job alone.  A stop during preparation ends every algorithm
    'stopped'; an exception ends the algorithms still open 'failed' (or 'stopped', when a
    stop was requested meanwhile); an algorithm whose construction fails (a hyperparameter
    the problem refuses) ends 'failed' alone.
    """
    run = _Run(job, sink, stop)
    try:
        run.run()
    except BaseException as e:  # noqa: BLE001 - nothing may escape: the record of the run says why
        # No fault to log: Ctrl-C in `fedviz run` (the seam in its main thread), or a stop that a phase of the
        # preparation (tuning's pilots) answered by raising StopRequested.
        if not isinstance(e, KeyboardInterrupt) and not (isinstance(e, StopRequested) and stop()):
            log.exception("run of %s failed", ", ".join(run.open))
        message = "while preparing the run" if isinstance(e, StopRequested) else describe(e)
        if stop():
            status, message = "stopped", f"{stop.reason} ({message})"
        else:
            status = "failed"
        run.end_open(status, message)


class _Run:
    """The state of one :func:`execute` call: the entries (renamed by tuning) and the open labels."""

    def __init__(self, job: Job, sink: Sink, stop: Stop):
        self.job, self.sink, self.stop = job, sink, stop
        self.entries = list(job.entries)
        self.open = list(job.labels)  # not ended yet, in order

    def end(self, label: str, status: str, message: str) -> None:
        self.open.remove(label)
        self.sink.end(label, status, message)

    def end_open(self, status: str, message: str) -> None:
        for label in tuple(self.open):
            self.end(label, status, message)

    def stopped_before_start(self) -> bool:
        if not self.stop():
            return False
        self.end_open("stopped", f"{self.stop.reason} (before the first iteration)")
        return True

    def run(self) -> None:
        job, sink = self.job, self.sink
        if self.stopped_before_start():
            return
        sink.preparing("building the problem")
        problem = job.make_problem()
        if not isinstance(problem, Problem):
            raise FedvizError(f"make_problem returned a {type(problem).__name__}, not a Problem")
        if self.stopped_before_start():
            return
        f_star, optimum_test_error, opt = job.f_star, None, None
        if f_star is None:
            sink.preparing("computing the optimum f* (Newton-CG)")
            try:
                opt = solve(problem)
                f_star, optimum_test_error = opt.objective, opt.test_error
            except FedvizError as e:
                # Not fatal: the curves are still worth seeing, without suboptimality.
                sink.warn(f"f* unavailable, suboptimality is NaN ({e})")
        if self.stopped_before_start():
            return
        if job.scales:
            self.rescale(problem)
        if job.tune:
            self.tune(problem, f_star)
            if self.stopped_before_start():
                return
        targets = self.targets(problem, opt) if job.personal_targets else {}
        if self.stopped_before_start():
            return
        data = problem.data
        summary = {**data.stats.summary(), "task": data.task, "loss": problem.loss.name, "lam": problem.lam,
                   "error_metric": problem.error_metric}
        if getattr(data, "unseen", None) is not None:  # the held-out nodes (issue 23, point 2), beside the seen K
            summary["unseen_nodes"] = data.unseen.n_nodes
        if problem.n_classes > 1:  # the classes a softmax run's argmax error counts, by their names (issue 22)
            summary["classes"] = list(data.class_names)
        if targets:  # the λ_D of each run given its exact Ditto models (the page says what they are)
            summary["personal_targets"] = {label: lam for label, (lam, _) in targets.items()}
        sink.started(fingerprint=data.fingerprint, summary=summary, f_star=f_star,
                     optimum_test_error=optimum_test_error)
        self.round_robin(problem, f_star, {label: V for label, (_, V) in targets.items()})

    def targets(self, problem: Problem, opt) -> dict:
        """label → (λ_D, the K × d exact Ditto models v_k(λ_D)) for every entry that has an exact
        personal target (:mod:`fedviz.personal.target`), one Newton solve per λ_D; w* is
        ``opt``'s, else the runner cache's.  A failure is a warning (no distance), not the run's end;
        a stop leaves the rest unsolved (the caller sees the stop)."""
        from ..personal.target import exact_target, target_lambda

        wanted = [e for e in self.entries if target_lambda(e.cls, e.hp) is not None]
        out, solved = {}, {}

        def check_stop():
            if self.stop():
                raise StopRequested()

        try:
            for e in wanted:
                lam_d = target_lambda(e.cls, e.hp)
                if lam_d not in solved:
                    if opt is None:
                        self.sink.preparing("computing the optimum w* (Newton-CG) for the exact Ditto models")
                        make = self.job.make_problem
                        opt = make.optimum() if isinstance(make, ProblemSpec) else solve(problem)
                    self.sink.preparing(f"computing the exact Ditto models v_k(λ_D = {lam_d:.4g}): Newton per node")
                    solved[lam_d] = exact_target(problem, e.cls, e.hp, opt.w, check_stop)
                if solved[lam_d] is not None:
                    out[e.label] = (lam_d, solved[lam_d])
        except StopRequested:
            pass
        except FedvizError as e:
            self.sink.warn(f"the exact Ditto models are unavailable: no distance to them is drawn ({e})")
        return out

    def rescale(self, problem: Problem) -> None:
        """Set each scaled hyperparameter (``job.scales``) to its factor × the derived default on
        this problem: a sweep's variants, planned without the problem, resolved here."""
        from .tune import resolved_default

        for k, e in enumerate(tuple(self.entries)):
            if e.label not in self.job.scales:
                continue
            param, factor = self.job.scales[e.label]
            base = resolved_default(e.cls, problem, e.spec.hp, param, self.job.seed)
            entry = Entry.of(e.spec.with_hyper({param: base * factor}, label=e.label))
            self.entries[k] = entry
            self.sink.retuned(e.label, entry, f"{param} = {factor:g} × the derived {base:.4g}")

    def tune(self, problem: Problem, f_star: float | None) -> None:
        """Choose each algorithm's stepsize by pilot runs (see :func:`fedviz.runner.tune.tune`).

        The pilots rank by f − f*, which ranks as f does: without f* they rank by f.
        """
        from .tune import tune

        job = self.job
        for k, e in enumerate(tuple(self.entries)):
            if self.stop():
                return
            self.sink.preparing(f"tuning {e.label}: pilot runs")
            result = tune(problem, e.spec, iterations=job.iterations, seed=job.seed,
                          f_star=0.0 if f_star is None else f_star, stop=self.stop)
            self.sink.tuned(e.label, result)
            if result.param is None:
                continue
            spec = result.apply(e.spec)
            if spec.label in self.open and spec.label != e.label:
                spec = spec.with_hyper(label=f"{spec.label} [{e.label}]")
            label = spec.label
            entry = Entry.of(spec)
            note = (f"tuned {result.param} = {result.value:.4g}"
                    + (f" over the grid {result.grid}" if result.grid else "")
                    + f" by {result.cost()} (the pilots' rounds and seconds are apart from the run's)"
                    + ("; the best value sits at the edge of the widest grid tried" if result.edge else "")
                    + f"{CRITERION}{result.rule or result.criterion}")  # the rule: one for every algorithm
            self.entries[k] = entry
            self.open[self.open.index(e.label)] = label
            self.sink.retuned(e.label, entry, note)

    def round_robin(self, problem: Problem, f_star: float | None, targets: Mapping | None = None) -> None:
        """One iteration of each algorithm in turn, so all curves grow together; ``targets``: label →
        the exact personal models its records measure the distance to (:meth:`targets`)."""
        job, stop, targets = self.job, self.stop, targets or {}
        gens = {e.label: iterate(problem, e.cls, iterations=job.iterations, hyper=e.hp, seed=job.seed,
                                 f_star=f_star, stop=stop, label=e.label, dissimilarity=job.dissimilarity,
                                 personal_target=targets.get(e.label))
                for e in self.entries}
        active = list(gens)
        while active:
            for label in tuple(active):
                try:
                    rec = next(gens[label])
                except StopIteration:
                    active.remove(label)
                    continue
                except Exception as e:  # noqa: BLE001 - raised before the first record (hyper vs problem)
                    active.remove(label)
                    self.end(label, "failed", describe(e))
                    continue
                if rec.status == "stopped" and stop.reason != STOPPED_BY_USER:
                    # The loop says 'by the user'; say what really stopped it (a timeout, a shutdown).
                    rec = replace(rec, message=f"{stop.reason} (after {rec.iteration} iterations)")
                self.sink.record(label, rec)
                if rec.status != "running":
                    active.remove(label)
                    self.end(label, rec.status, rec.message)
            self.sink.tick()


def describe(e: BaseException) -> str:
    """A user-facing message: fedviz errors say it all; others get their type name."""
    return str(e) if isinstance(e, FedvizError) else f"{type(e).__name__}: {e}"


# -- the seam: where execute runs -------------------------------------------------------------------------
class Task(Protocol):
    """A job handed to an executor: joinable, like a thread."""

    def join(self, timeout: float | None = None) -> None: ...

    def is_alive(self) -> bool: ...


class Executor(ABC):
    """Runs :func:`execute` for the manager, somewhere.

    :meth:`start` must return at once (the manager calls it holding its lock); the run then
    reports only through ``sink`` and must call ``done()`` exactly once, from another thread,
    after the sink's last call, however it ends.  The
    manager closes the sinks in ``done``, frees the run's slot and starts the next in line.
    """

    #: Whether runs execute in this process (False: another process, which sees only registered algorithms).
    in_process: bool = True

    @abstractmethod
    def start(self, run_id: str, job: Job, sink: Sink, stop: Stop, done: Callable[[], None]) -> Task:
        """Start running ``job``; ``run_id`` names the run (its thread, its log lines)."""


class ThreadExecutor(Executor):
    """One daemon thread per run, ``fedviz-run-<first 8 characters of the run id>``, scheduled
    below the server's own threads (:func:`background_os_thread`) so that pages stay responsive."""

    def start(self, run_id: str, job: Job, sink: Sink, stop: Stop, done: Callable[[], None]) -> Task:
        def work():
            background_os_thread(threading.current_thread().name)
            try:
                execute(job, sink, stop)
            finally:
                done()

        thread = threading.Thread(target=work, daemon=True, name=f"fedviz-run-{run_id[:8]}")
        thread.start()
        return thread


def background_os_thread(name: str) -> None:
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


__all__ = ["CRITERION", "STOPPED_BY_USER", "WORKER_NICE", "Executor", "Sink", "Stop", "Task", "Tee",
           "ThreadExecutor", "background_os_thread", "describe", "execute"]
