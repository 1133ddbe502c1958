"""Running algorithms: the iteration loop and its records (:mod:`.loop`), the background
run manager with its queue and sessions (:mod:`.manager`), and the SQLite history (:mod:`.store`)."""

from .loop import FIELDS, IterationRecord, iterate
from .manager import RunHandle, RunJob, RunManager, RunSnapshot, get_manager
from .store import RunInfo, RunStore

__all__ = ["FIELDS", "IterationRecord", "iterate", "RunHandle", "RunJob", "RunManager", "RunSnapshot",
           "get_manager", "RunInfo", "RunStore"]
