"""The tasks a Dask worker runs: a job (:func:`run_job`, through the same
:func:`~fedviz.runner.execute.execute` a Run click uses, so a cell computes exactly what ``fedviz run``
computes with the same data, algorithm and seed) and a setting's optimum (:func:`optimum_of`).

A worker builds a data set from its spec (deterministic in the seed) and keeps it in its
process-wide cache (:mod:`fedviz.runner.cache`), so a data set is built once per worker, not once per
cell.  A run's stop is a named :class:`distributed.Event`, watched from a thread that requests the
local :class:`~fedviz.runner.execute.Stop`, which the iteration loop polls between node batches.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from dataclasses import replace
from typing import Callable, Mapping

from ...errors import FedvizError
from ..execute import Stop, describe, execute
from ..job import ProblemSpec, RunJob
from .stream import Recorder

log = logging.getLogger(__name__)

#: How often a task looks at its stop event (seconds): the bound on Stop's latency on a worker.
STOP_POLL = 0.5


def _with_uploads(problem: ProblemSpec, uploads: Mapping[str, bytes] | None) -> ProblemSpec:
    if not uploads:
        return problem
    return replace(problem, data=replace(problem.data, **dict(uploads)))


def run_job(job: RunJob, *, topic: str | None = None, stop_event: str | None = None,
            optimum: tuple[float, float] | None = None, uploads: Mapping[str, bytes] | None = None,
            tag: str = "") -> dict:
    """Run ``job`` on this worker (the Dask task); returns every sink call and where it ran.

    ``optimum`` is (f*, its test error) when the caller computed it once for many cells (a
    Dask dependency); ``uploads`` the bytes :func:`scatter_uploads` took out of the job;
    ``tag`` names the job in its streamed events (an experiment's cell key).
    """
    _pin_threads()
    worker, emit = _worker()
    problem = job.make_problem
    if isinstance(problem, ProblemSpec):
        job = replace(job, make_problem=_with_uploads(problem, uploads))
    if optimum is not None and optimum[0] is not None and job.f_star is None:
        job = replace(job, f_star=float(optimum[0]))
    recorder = Recorder(topic, uuid.uuid4().hex, emit, tag, iterations=job.iterations)
    stop = Stop()
    watcher = _watch(stop_event, stop)
    began = time.perf_counter()
    try:
        try:
            valid = job.validate()
        except FedvizError as e:  # a job the caller validated cannot fail here; say so if it does
            for spec in job.algorithms:
                label = spec.label if hasattr(spec, "label") else str(spec[0])
                recorder.end(label, "failed", describe(e))
        else:
            execute(valid, recorder, stop)
    finally:
        if watcher is not None:
            watcher.set()
            watcher.thread.join(2 * STOP_POLL + 1)
    recorder.flush()
    return {"calls": recorder.calls, "worker": worker, "seconds": time.perf_counter() - began,
            "optimum": optimum, "attempt": recorder.attempt}


def optimum_of(problem: ProblemSpec, uploads: Mapping[str, bytes] | None = None) -> tuple[float | None, float | None]:
    """(f*, its test error) of ``problem`` on this worker (cached there with the problem): the
    Dask task that computes f* once per setting for all its cells."""
    _pin_threads()
    try:
        opt = _with_uploads(problem, uploads).optimum()
    except FedvizError as e:
        log.warning("f* unavailable: %s", e)
        return None, None
    return float(opt.objective), float(opt.test_error)


def _pin_threads() -> None:
    """One thread for numba and BLAS in this task, whatever the worker was started with."""
    import numba
    from numba.core import config

    from ...problems._cores import single_threaded_blas

    # The nanny sets PINNED in the worker's environment after the worker may already have
    # imported numba (its config then says one thread per core).  Every later compile
    # re-reads the environment and refuses a thread count other than the pool's, so
    # bring numba's config in line with the environment before its pool starts, or, if
    # the pool has started, the environment in line with the pool.
    try:
        config.reload_config()
    except RuntimeError:
        os.environ["NUMBA_NUM_THREADS"] = str(config.NUMBA_NUM_THREADS)
    numba.set_num_threads(1)
    single_threaded_blas()


def _worker() -> tuple[str, Callable | None]:
    try:
        from distributed import get_worker

        w = get_worker()
    except ValueError:  # called outside a worker (a test calling the task directly)
        return "in-process", None
    return w.address, w.log_event


def _watch(name: str | None, stop: Stop) -> threading.Event | None:
    """Request ``stop`` when the Dask event ``name`` is set; returns the watcher's own end signal."""
    if not name:
        return None
    from distributed import Event, get_client

    event = Event(name, client=get_client())
    finished = threading.Event()

    def watch():
        # Ask, then sleep on a local event: the task's end wakes the watcher at once (a blocking
        # Event.wait on the scheduler would hold the task's end up to STOP_POLL).
        while not finished.wait(STOP_POLL):
            try:
                if event.is_set():
                    stop.request()
                    return
            except Exception:  # noqa: BLE001 - a scheduler gone: the task is lost anyway
                return

    thread = threading.Thread(target=watch, daemon=True, name="fedviz-stop-watch")
    thread.start()
    finished.thread = thread  # joined by the task, so no question to the scheduler outlives it
    return finished
