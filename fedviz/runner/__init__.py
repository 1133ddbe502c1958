"""Running algorithms, in four rooms (docs/architecture.md, "The rooms of a unit"), each importing only
the ones before it:

- execution, this package's own modules: the iteration loop and its records (:mod:`.loop`), what to run
  (:mod:`.job`), running a job (:mod:`.execute`, with its executor seam), the process-wide cache of data
  sets, problems and optima (:mod:`.cache`), tuning and the sweep, the JSON codec (:mod:`.codec`);
- :mod:`.history`: the SQLite history of runs and experiments and the journal that writes a run into it;
- :mod:`.cluster`: the Dask cluster and the second executor;
- :mod:`.serve`: the queue and sessions (:mod:`.serve.manager`), the live state of a run
  (:mod:`.serve.handle`), the kernels' warm-up.

This ``__init__`` is the front door: it re-exports what a front end needs, and no room imports it."""

from .execute import Executor, Sink, Stop, ThreadExecutor, execute
from .job import Job, ProblemSpec, RunJob
from .serve.handle import RunHandle, RunSnapshot
from .loop import FIELDS, IterationRecord, iterate
from .serve.manager import RunManager, get_manager
from .history.store import RunInfo, RunStore

__all__ = ["FIELDS", "IterationRecord", "iterate", "Executor", "Job", "ProblemSpec", "RunHandle", "RunJob",
           "RunManager", "RunSnapshot", "Sink", "Stop", "ThreadExecutor", "execute", "get_manager", "RunInfo",
           "RunStore"]
