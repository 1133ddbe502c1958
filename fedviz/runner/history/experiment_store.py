"""The experiments' tables of the run history: ``experiments`` and ``cells``.

An experiment (:mod:`fedviz.experiments`) is a row of ``experiments``, and one row of ``cells`` per
finished cell, each pointing at the ordinary run that holds its records (the cells of one
experiment share its group).  A cell row is written once, with its run and records, in one
transaction, when the cell has finished: a cell is either wholly stored or absent, so a resumed
experiment runs exactly the cells without a finished row.

:class:`ExperimentTables` holds the queries; :class:`~fedviz.runner.history.store.RunStore` inherits them,
so the history stays one SQLite file behind one connection and one lock, and a caller reaches
everything through one object.  The tables' schema is in :mod:`.store` with every other table's,
since one chain of migrations brings a file up to date.
"""

from __future__ import annotations

import hmac
import uuid
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from ...errors import ParameterError
from ..codec import from_json, to_json
from .describe import INTERRUPTED_MESSAGE
from ..loop import IterationRecord
from .stamps import now, session_token

#: The statuses of an experiment: running, then done / stopped / failed, or interrupted
#: (the server stopped while it ran).
EXPERIMENT_STATUSES = ("running", "done", "stopped", "failed", "interrupted")
#: A cell in one of these ends is complete: a resumed experiment does not run it again.
COMPLETE_CELL_STATUSES = ("done", "diverged")

_SELECT_EXPERIMENTS = (
    "SELECT e.id, e.name, e.created, e.updated, e.group_id, e.spec_json, e.status, e.message, e.finished, "
    "(SELECT COUNT(*) FROM cells c WHERE c.experiment_id = e.id), "
    "(SELECT COUNT(*) FROM cells c WHERE c.experiment_id = e.id AND c.status IN ('done', 'diverged')), "
    "e.session, e.owner IN (SELECT id FROM owners) "
    "FROM experiments e")


@dataclass(frozen=True)
class ExperimentInfo:
    """One stored experiment: its definition (``spec``, :meth:`Experiment.as_json`) and state."""

    id: int
    name: str
    created: str
    updated: str
    group_id: str
    spec_json: str
    status: str
    message: str
    finished: str | None
    n_cells: int          # finished cells stored
    n_complete: int       # of which complete (done or diverged)
    #: :func:`session_token` of the browser session that last launched it; None: no browser.
    session: str | None = field(default=None, repr=False)
    #: Whether the process (store) that last launched it is still registered (:mod:`.store`, Owners).
    owner_live: bool = field(default=False, repr=False)

    @property
    def spec(self) -> dict:
        return from_json(self.spec_json)

    def launched_in(self, session_id: str | None) -> bool:
        """Whether the browser session ``session_id`` launched it last (never for None)."""
        return session_id is not None and self.session is not None and hmac.compare_digest(
            self.session, session_token(session_id))

    @property
    def ownerless(self) -> bool:
        """No visitor holds it: launched from the command line, stored before sessions were, or
        launched in a session of a server that is gone (whose session can never come back)."""
        return self.session is None or not self.owner_live


@dataclass(frozen=True)
class CellInfo:
    """One stored cell of an experiment and the run that holds its records."""

    key: str
    run_id: int
    setting: tuple[int, ...]
    arm: str
    step: float | None
    seed: int
    status: str
    worker: str
    attempts: int
    finished: str
    label: str            # the run's label (a tuned cell's names its chosen value)
    hyper: dict
    message: str


class ExperimentTables:
    """The experiments' queries, for :class:`~fedviz.runner.history.store.RunStore` to inherit.

    They run on the host's connection through what it provides for its own tables:
    ``_transaction()`` and ``_query()``, ``owner``, ``_check_status(status)`` (a run's status),
    ``_insert_run(c, ...)``, ``_insert_records(c, run_id, records)`` and ``_delete_run_rows(c, run_id)``.
    """

    def open_experiment(self, name: str, spec: Mapping, *, session: str | None = None) -> ExperimentInfo:
        """Create the experiment ``name``, or reopen it to resume (its definition is updated, its
        cells kept: a cell's key says what it computed, so cells still in the grid are reused).

        ``session``: the browser session launching it (None: no browser); it becomes the
        experiment's, and so do the cells stored from now on.  Who may reopen whose experiment
        is the caller's to decide (:func:`fedviz.experiments.driver.launch`)."""
        token = session_token(session)
        with self._transaction() as c:
            row = c.execute("SELECT id FROM experiments WHERE name = ?", (str(name),)).fetchone()
            stamp = now()
            if row is None:
                c.execute("INSERT INTO experiments (name, created, updated, group_id, spec_json, status, owner, "
                          "session) VALUES (?, ?, ?, ?, ?, 'running', ?, ?)",
                          (str(name), stamp, stamp, uuid.uuid4().hex, to_json(spec), self.owner, token))
            else:
                c.execute("UPDATE experiments SET updated = ?, spec_json = ?, status = 'running', message = '', "
                          "finished = NULL, owner = ?, session = ? WHERE id = ?",
                          (stamp, to_json(spec), self.owner, token, int(row[0])))
        return self.get_experiment(name)

    def save_cell(self, experiment_id: int, *, key: str, setting: Sequence[int], arm: str, step: float | None,
                  seed: int, label: str, algorithm: str, hyper: Mapping, config: Mapping, status: str,
                  message: str = "", records: Iterable[IterationRecord] = (), dataset_fingerprint: str = "",
                  dataset_summary: Mapping | None = None, f_star: float | None = None, worker: str = "",
                  attempts: int = 1) -> int:
        """Store a finished cell: its run, its records and its cell row, in one transaction.

        A cell stored before under the same key (stopped, failed) is replaced, its old run
        deleted: an experiment holds one result per cell, never two.  The cell's run carries the
        experiment's session (the one that launched it last).  Returns the run's id.
        """
        self._check_status(status)
        with self._transaction() as c:
            exp = c.execute("SELECT group_id, session FROM experiments WHERE id = ?",
                            (int(experiment_id),)).fetchone()
            if exp is None:
                raise ParameterError("experiment_id", experiment_id, "the id of a stored experiment")
            old = c.execute("SELECT run_id FROM cells WHERE experiment_id = ? AND key = ?",
                            (int(experiment_id), str(key))).fetchone()
            if old is not None:
                c.execute("DELETE FROM cells WHERE experiment_id = ? AND key = ?", (int(experiment_id), str(key)))
                self._delete_run_rows(c, int(old[0]))
            stamp = now()
            run_id = self._insert_run(c, label=label, algorithm=algorithm, hyper=hyper, config=config,
                                      group_id=exp[0], dataset_fingerprint=dataset_fingerprint,
                                      dataset_summary=dataset_summary, f_star=f_star, status=status,
                                      message=message, created=None, finished=stamp,
                                      token=exp[1])  # a cell's run is the experiment's launcher's
            self._insert_records(c, run_id, records)
            c.execute("INSERT INTO cells (experiment_id, key, run_id, setting_json, arm, step, seed, status, "
                      "worker, attempts, finished) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      (int(experiment_id), str(key), run_id, to_json(list(setting)), str(arm),
                       None if step is None else float(step), int(seed), status, str(worker), int(attempts),
                       stamp))
            c.execute("UPDATE experiments SET updated = ? WHERE id = ?", (stamp, int(experiment_id)))
        return run_id

    def complete_cells(self, experiment_id: int) -> set[str]:
        """The keys of the cells a resumed experiment does not run again."""
        marks = ", ".join("?" * len(COMPLETE_CELL_STATUSES))
        rows = self._query(f"SELECT key FROM cells WHERE experiment_id = ? AND status IN ({marks})",
                           (int(experiment_id), *COMPLETE_CELL_STATUSES))
        return {r[0] for r in rows}

    def finish_experiment(self, experiment_id: int, status: str, message: str = "") -> None:
        if status not in EXPERIMENT_STATUSES:
            raise ParameterError("status", status, "one of " + ", ".join(EXPERIMENT_STATUSES))
        with self._transaction() as c:
            stamp = now()
            c.execute("UPDATE experiments SET status = ?, message = ?, updated = ?, finished = ? WHERE id = ?",
                      (status, str(message), stamp, None if status == "running" else stamp, int(experiment_id)))

    def get_experiment(self, name_or_id: str | int) -> ExperimentInfo | None:
        column = "id" if isinstance(name_or_id, int) else "name"
        rows = self._query(f"{_SELECT_EXPERIMENTS} WHERE e.{column} = ?", (name_or_id,))
        return _experiment_info(rows[0]) if rows else None

    def list_experiments(self, limit: int | None = 100) -> list[ExperimentInfo]:
        """The most recently updated experiments first."""
        sql = _SELECT_EXPERIMENTS + " ORDER BY e.updated DESC, e.id DESC"
        params: list = []
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [_experiment_info(row) for row in self._query(sql, params)]

    def experiment_cells(self, experiment_id: int) -> list[CellInfo]:
        """The stored cells of an experiment, in the order they finished."""
        rows = self._query(
            "SELECT c.key, c.run_id, c.setting_json, c.arm, c.step, c.seed, c.status, c.worker, c.attempts, "
            "c.finished, r.label, r.hyper_json, r.message FROM cells c JOIN runs r ON r.id = c.run_id "
            "WHERE c.experiment_id = ? ORDER BY c.finished, c.run_id", (int(experiment_id),))
        return [CellInfo(key, run_id, tuple(from_json(setting)), arm, step, seed, status, worker, attempts,
                         finished, label, from_json(hyper), message)
                for key, run_id, setting, arm, step, seed, status, worker, attempts, finished, label, hyper, message
                in rows]

    def delete_experiment(self, experiment_id: int) -> bool:
        """Delete an experiment, its cells and their runs."""
        with self._transaction() as c:
            runs = [r[0] for r in c.execute("SELECT run_id FROM cells WHERE experiment_id = ?",
                                            (int(experiment_id),)).fetchall()]
            c.execute("DELETE FROM cells WHERE experiment_id = ?", (int(experiment_id),))
            for run_id in runs:
                self._delete_run_rows(c, run_id)
            return c.execute("DELETE FROM experiments WHERE id = ?", (int(experiment_id),)).rowcount > 0

    def _interrupt_experiments(self, c, live: Sequence[str]) -> None:
        """In the host's transaction ``c``: experiments left 'running' by an owner not in ``live``
        (or by none: written before owners were) become 'interrupted'."""
        marks = ",".join("?" * len(live))
        c.execute(f"UPDATE experiments SET status = 'interrupted', message = ?, finished = ? "
                  f"WHERE status = 'running' AND (owner IS NULL OR owner NOT IN ({marks}))",
                  (INTERRUPTED_MESSAGE, now(), *live))


def _experiment_info(row: tuple) -> ExperimentInfo:
    values = list(row)
    values[-1] = bool(values[-1])  # owner IN (...): 0, 1, or NULL for a row without an owner
    return ExperimentInfo(*values)
