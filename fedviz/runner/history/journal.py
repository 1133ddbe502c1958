"""The journal: a :class:`~fedviz.runner.execute.Sink` that writes one run to the history.

Durability.  Records reach the store in batches at most ``interval`` (0.5 s,
:data:`FLUSH_INTERVAL`) apart, and an algorithm's last records are committed together with
its end state.  A SIGKILL therefore loses at most the last half second of a live run, never
a finished one, and the store never holds a finished run without all its records.
Committing every iteration instead would cost one transaction per iteration, and a small
problem runs thousands of iterations per second.

A failing store degrades the run to memory only: the journal says so once, through its
``warn`` callback (the handle's), and writes nothing more.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from types import MappingProxyType
from typing import Callable, Mapping

from ...errors import FedvizError
from ..job import Entry, Job
from ..loop import IterationRecord
from .store import RunStore

log = logging.getLogger(__name__)

#: Seconds between two commits of a live run's records.
FLUSH_INTERVAL = 0.5

_STORE_ERRORS = (sqlite3.Error, FedvizError, OSError)


class Journal:
    """Writes one run's records to ``store`` (None: nowhere) in batches; see the module docstring.

    Create it with :meth:`create`, which inserts one stored run per algorithm ('queued').
    """

    def __init__(self, store: RunStore | None, run_ids: Mapping[str, int] | None = None, *,
                 interval: float = FLUSH_INTERVAL, warn: Callable[[str], None] = lambda text: None,
                 name: str = ""):
        self.store = store
        self.interval = interval
        self.name = name
        self._warn = warn
        self._ids: dict[str, int] = dict(run_ids or {})
        self._pending: dict[int, list[IterationRecord]] = {}
        self._last_flush = time.monotonic()

    @classmethod
    def create(cls, store: RunStore | None, job: Job, group_id: str, *, interval: float = FLUSH_INTERVAL,
               warn: Callable[[str], None] = lambda text: None, session: str | None = None) -> "Journal":
        """One stored run per algorithm, 'queued' until the worker starts, carrying the browser
        ``session`` that launched it (None: no browser); a failing store leaves the run in memory
        only (with a warning), it does not refuse it."""
        ids: dict[str, int] = {}
        if store is not None:
            try:
                for e in job.entries:
                    ids[e.label] = store.create_run(
                        label=e.label, algorithm=e.name, hyper=dict(e.resolved), config=dict(job.config),
                        group_id=group_id, f_star=job.f_star, status="queued", session=session)
            except _STORE_ERRORS as err:
                log.warning("run %s will not be saved: %s", group_id, err)
                warn(f"the run history could not be saved ({err})")
                for run_id in ids.values():
                    try:
                        store.delete_run(run_id)
                    except _STORE_ERRORS:
                        pass
                ids, store = {}, None
        return cls(store, ids, interval=interval, warn=warn, name=group_id)

    @property
    def run_ids(self) -> Mapping[str, int]:
        """label → stored run id (empty without a store)."""
        return MappingProxyType(dict(self._ids))

    def _guard(self, action: Callable[[], None]) -> None:
        if self.store is None:
            return
        try:
            action()
        except _STORE_ERRORS as e:
            log.warning("run %s: the history could not be saved: %s", self.name, e)
            self._warn(f"the run history could not be saved ({e})")
            self.store = None

    # -- the sink ------------------------------------------------------------------------------------
    def preparing(self, message: str) -> None:
        pass

    def warn(self, text: str) -> None:
        pass

    def tuned(self, label: str, result) -> None:
        pass  # the history keeps the choice as retuned's note

    def retuned(self, old: str, entry: Entry, note: str) -> None:
        run_id = self._ids.pop(old, None)
        if run_id is None:
            return
        self._ids[entry.label] = run_id
        if self.store is not None:
            try:
                self.store.retune_run(run_id, label=entry.label, hyper=dict(entry.resolved), note=note)
            except _STORE_ERRORS as err:
                log.warning("run %s: the tuned label was not saved: %s", self.name, err)

    def started(self, *, fingerprint: str, summary: Mapping, f_star: float | None,
                optimum_test_error: float | None = None) -> None:
        def action():
            for run_id in self._ids.values():
                self.store.start_run(run_id, dataset_fingerprint=fingerprint, dataset_summary=summary,
                                     f_star=f_star)
        self._guard(action)

    def record(self, label: str, rec: IterationRecord) -> None:
        run_id = self._ids.get(label)
        if run_id is not None and self.store is not None:
            self._pending.setdefault(run_id, []).append(rec)

    def end(self, label: str, status: str, message: str) -> None:
        run_id = self._ids.get(label)
        if run_id is None:
            return
        recs = self._pending.pop(run_id, [])
        self._guard(lambda: self.store.finish_run(run_id, status, message, records=recs))

    def tick(self) -> None:
        self.flush()

    # -- committing ------------------------------------------------------------------------------------
    def flush(self, force: bool = False) -> None:
        """Commit the pending records if ``interval`` passed since the last commit (or ``force``)."""
        if not self._pending or not (force or time.monotonic() - self._last_flush >= self.interval):
            return
        batch, self._pending = self._pending, {}
        self._guard(lambda: self.store.append_batch(batch))
        self._last_flush = time.monotonic()

    def close(self) -> None:
        """Commit whatever is pending (the run's last records)."""
        self.flush(force=True)


__all__ = ["FLUSH_INTERVAL", "Journal"]
