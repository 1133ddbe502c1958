"""Running algorithms: the iteration loop and its records (:mod:`.loop`); what to run (:mod:`.job`),
the live state of a run (:mod:`.handle`), running a job (:mod:`.execute`, with its executor seam),
its history (:mod:`.journal`, :mod:`.store` with :mod:`.experiment_store`; its words in
:mod:`.describe`, its JSON in :mod:`.codec`), the queue and sessions (:mod:`.manager`), the
process-wide cache of data sets, problems and optima (:mod:`.cache`), and the Dask cluster with
the second executor (:mod:`.cluster`)."""

from .execute import Executor, Sink, Stop, ThreadExecutor, execute
from .job import Job, ProblemSpec, RunJob
from .serve.handle import RunHandle, RunSnapshot
from .loop import FIELDS, IterationRecord, iterate
from .serve.manager import RunManager, get_manager
from .history.store import RunInfo, RunStore

__all__ = ["FIELDS", "IterationRecord", "iterate", "Executor", "Job", "ProblemSpec", "RunHandle", "RunJob",
           "RunManager", "RunSnapshot", "Sink", "Stop", "ThreadExecutor", "execute", "get_manager", "RunInfo",
           "RunStore"]
