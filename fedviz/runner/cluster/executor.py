"""The caller's side: :class:`DaskExecutor` hands an ordinary run to the cluster as one task and
applies the streamed calls to the run's sink; :func:`scatter_uploads` sends an upload's bytes once."""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import replace
from typing import Any, Callable

from ...errors import FedvizError
from ..execute import Executor, Sink, Stop, Task, describe
from ..job import Job, ProblemSpec, RunJob
from .client import get_client
from .check import check_cluster
from .stream import Replay, decode_calls, subscribe, unsubscribe
from .worker import run_job

log = logging.getLogger(__name__)


def scatter_uploads(client, problem: ProblemSpec) -> tuple[ProblemSpec, dict[str, Any]]:
    """Replace an upload's bytes in ``problem`` by Dask futures, sent once to the cluster.

    Returns the problem without the bytes and ``{"source": future, "test": future}`` for
    :func:`run_job`'s ``uploads``; a problem without uploads comes back unchanged.
    """
    uploads = {}
    data = problem.data
    for name in ("source", "test"):
        value = getattr(data, name)
        if isinstance(value, bytes):
            uploads[name] = client.scatter(value, hash=True, broadcast=False)
    if not uploads:
        return problem, {}
    data = replace(data, **{name: "" for name in uploads})
    return replace(problem, data=data), uploads


def to_run_job(job: Job) -> RunJob:
    """A validated job back as the picklable value a worker validates again."""
    return RunJob(make_problem=job.make_problem, algorithms=tuple(e.spec for e in job.entries),
                  iterations=job.iterations, seed=job.seed, config=dict(job.config), f_star=job.f_star,
                  tune=job.tune, scales=dict(job.scales), dissimilarity=job.dissimilarity,
                  personal_targets=job.personal_targets)


class DaskExecutor(Executor):
    """Runs each job as one Dask task on the cluster of :func:`get_client`, streaming the sink's
    calls back to this process, where a thread ``fedviz-run-<id>`` applies them to ``sink``."""

    in_process = False

    def __init__(self, address: str | None = None):
        self.address = address
        #: Runs the cluster takes at once (the manager's default cap; set from the cluster's threads).
        self.slots = 1

    def start(self, run_id: str, job: Job, sink: Sink, stop: Stop, done: Callable[[], None]) -> Task:
        thread = threading.Thread(target=self._drive, args=(run_id, job, sink, stop, done), daemon=True,
                                  name=f"fedviz-run-{run_id[:8]}")
        thread.start()
        return thread

    def _drive(self, run_id: str, job: Job, sink: Sink, stop: Stop, done: Callable[[], None]) -> None:
        replay = Replay(sink, job.labels)
        try:
            client = get_client(self.address)
            check_cluster(client)  # the run's record says why a cluster cannot run it, not 'deserialization'
            topic, event_name = f"fedviz-run-{run_id}", f"fedviz-stop-{run_id}"
            events: queue.Queue = queue.Queue()
            subscribe(client, topic, events)
            problem, uploads = (scatter_uploads(client, job.make_problem) if isinstance(job.make_problem, ProblemSpec)
                                else (job.make_problem, {}))
            remote = replace(to_run_job(job), make_problem=problem)
            future = client.submit(run_job, remote, topic=topic, stop_event=event_name, uploads=uploads or None,
                                   pure=False, key=f"fedviz-run-{run_id}")
            stop_sent = False
            try:
                while not future.done():
                    _drain(events, replay)
                    if stop() and not stop_sent:
                        stop_sent = True
                        if not replay.started:
                            future.cancel()
                            break
                        from distributed import Event

                        Event(event_name, client=client).set()
                    time.sleep(0.05)
                _drain(events, replay)
                if future.status == "finished":
                    result = future.result()
                    replay.apply(0, result["calls"])
                elif future.status == "error":
                    raise future.exception()
            finally:
                unsubscribe(client, topic)
        except BaseException as e:  # noqa: BLE001 - nothing may escape a run: its record says why
            log.exception("cluster run %s failed", run_id)
            _end_open(sink, replay, stop, describe(e))
        else:
            _end_open(sink, replay, stop, "the cluster cancelled the run")
        finally:
            done()


def _drain(events: "queue.Queue", replay: Replay) -> None:
    while True:
        try:
            msg = events.get_nowait()
        except queue.Empty:
            return
        try:
            first, calls = int(msg["first"]), decode_calls(msg["calls"])
        except (FedvizError, KeyError, TypeError, ValueError) as e:  # not our Recorder's: the result still has all
            log.warning("ignored a malformed event on a run's topic: %s", e)
            continue
        replay.apply(first, calls)


def _end_open(sink: Sink, replay: Replay, stop: Stop, message: str) -> None:
    """End the labels the replayed calls left open: 'stopped' when a stop was asked, else 'failed'."""
    for label in tuple(replay.open):
        replay.open.remove(label)
        if stop():
            sink.end(label, "stopped", stop.reason + ("" if replay.started else " (before the first iteration)"))
        else:
            sink.end(label, "failed", message)
