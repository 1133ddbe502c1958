"""The run history: an embedded SQLite database of runs and their iteration records.

This module owns the database file, its schema and migrations (every table's, in one chain),
the runs and records, the owners and their heartbeats, the sessions, and the CSV / JSON exports.
One row of ``runs`` is one algorithm run (runs started together by one Run click share a
``group_id``); ``records`` holds one row per :class:`~fedviz.runner.loop.IterationRecord`.
Beside it: the experiments' tables and queries in :mod:`.experiment_store` (which
:class:`RunStore` inherits: one file, one connection), the words a person reads in
:mod:`.describe`, the JSON codec in :mod:`.codec`, the row stamps (time, session token) in
:mod:`.stamps`.

Durability
----------
The database runs in WAL mode with ``synchronous=NORMAL``.  In WAL mode a commit is
complete once its frames are written to the log, so a killed process (SIGKILL, a
crash) loses no committed transaction and never leaves a torn database; only an
operating-system crash or power loss can roll back the last few commits (never
corrupting the file).  ``FULL`` would add an fsync to every commit, which on a slow
disk (a network home directory holding ``user_data_dir``) stalls the run threads that
commit; the history of a visualisation tool does not need power-loss durability.

Non-finite numbers
------------------
SQLite stores NaN as NULL.  Every float column of ``records`` is NOT NULL in meaning
(the loop always produces a number, NaN for "undefined"), so NULL reads back as NaN
unambiguously; ±inf are stored as SQLite's ±Inf reals.  The JSON export writes NaN as
``null`` and ±inf as the strings ``"Infinity"`` / ``"-Infinity"`` (the protobuf JSON
convention, :mod:`.codec`), so it is strict JSON and still round-trips through
:meth:`RunStore.import_json`.

Per-node summaries
------------------
A record's per-node summaries (the registry :mod:`.metrics`: ``node_error_p50``, ``nodes_untested``,
``personal_distance``, …) are one JSON object in the column ``summaries`` (schema version 9), written
by the codec (every digit, ±inf as ``"Infinity"``), a NaN summary left out and read back as NaN.  A new
metric is a new key, not a new column: no migration.  The exports spread the keys out, one column each,
as they were before version 9; an export that lacks a key (written before its metric) imports as NaN.

Owners
------
Several processes may share one history (two dashboards, a dashboard and the CLI).  Each
:class:`RunStore` registers itself as an *owner* (host, pid, the pid's start time and a
heartbeat) and stamps the runs and experiments it creates.  :meth:`RunStore.mark_interrupted`
marks a run 'interrupted' only when its owner is gone: closed, its process dead (same host:
the pid no longer runs that process), or silent for :data:`STALE_SECONDS` (another host or
container).  So a second server never takes the first one's live runs for dead.

Sessions
--------
A run or experiment launched from a dashboard also carries the browser session that launched it
(schema version 4), so that on a shared server a visitor sees the runs of its own tab and acts
on its own experiments only.  The session id is never stored: only
:func:`~fedviz.runner.history.stamps.session_token`, a keyed
hash (HMAC-SHA256 with a key drawn once per process), so neither the file nor an export gives
away a live session's id, and a token means nothing to another server.  NULL: launched without
a browser (the command line, the benchmarks) or written before version 4; such rows belong to no
visitor.  The exports leave the token out.

Thread safety
-------------
One connection, shared by all threads behind a lock (``check_same_thread=False``).
Every statement is parameterised; only identifiers from this module's own constants
are ever placed into SQL text.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import socket
import sqlite3
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np

from ...errors import FedvizError, ParameterError
from ..codec import decode_float, from_json, to_json
from .describe import INTERRUPTED_MESSAGE, describe_run
from .experiment_store import ExperimentTables
from ..loop import CORE_FIELDS, FIELDS, IterationRecord
from ...problems.metrics import KEYS as SUMMARY_KEYS
from .stamps import now, session_token

#: Bumped by every schema change; :data:`_MIGRATIONS` brings older files up to date.  Version 9 holds
#: every per-node summary in one JSON column: a new metric (:mod:`fedviz.problems.metrics`) needs no new one.
SCHEMA_VERSION = 9

#: How often a store tells the others it is alive, and how long a silence (from another host,
#: where its pid cannot be checked) makes it dead.  Long enough that a store busy writing
#: records, or a machine under load, is never taken for dead.
HEARTBEAT_SECONDS = 10.0
STALE_SECONDS = 120.0

#: Every status a stored run can have: the loop's end states plus the manager's
#: 'queued' and the store's 'interrupted' (the server stopped during the run).
RUN_STATUSES = ("queued", "running", "done", "diverged", "stopped", "failed", "interrupted")

#: The record fields that are floats (NaN where undefined) and integers; the per-node summaries
#: (:data:`fedviz.problems.metrics.KEYS`) are floats, stored in the JSON column ``summaries``.
FLOAT_FIELDS = ("objective", "suboptimality", "test_error", "train_error", "grad_norm", "passes",
                "seconds", "dissimilarity", *SUMMARY_KEYS)
INT_FIELDS = ("iteration", "rounds", "vectors_up", "vectors_down", "grad_evals")
#: The numeric record fields, in record order: the columns of :meth:`RunStore.columns`.
NUMERIC_FIELDS = tuple(f for f in FIELDS if f in FLOAT_FIELDS or f in INT_FIELDS)
_SUMMARY_SET = frozenset(SUMMARY_KEYS)

_SCHEMA_V1 = """
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created TEXT NOT NULL,
    group_id TEXT NOT NULL,
    label TEXT NOT NULL,
    algorithm TEXT NOT NULL,
    hyper_json TEXT NOT NULL,
    config_json TEXT NOT NULL,
    dataset_fingerprint TEXT NOT NULL DEFAULT '',
    dataset_summary_json TEXT NOT NULL DEFAULT '{}',
    f_star REAL,
    status TEXT NOT NULL,
    message TEXT NOT NULL DEFAULT '',
    finished TEXT
);
CREATE INDEX runs_group ON runs (group_id);
CREATE INDEX runs_status ON runs (status);
CREATE TABLE records (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    iteration INTEGER NOT NULL,
    algorithm TEXT NOT NULL,
    objective REAL,
    suboptimality REAL,
    test_error REAL,
    train_error REAL,
    grad_norm REAL,
    rounds INTEGER NOT NULL,
    vectors_up INTEGER NOT NULL,
    vectors_down INTEGER NOT NULL,
    grad_evals INTEGER NOT NULL,
    passes REAL,
    seconds REAL,
    status TEXT NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (run_id, iteration)
) WITHOUT ROWID;
"""

# Version 2: experiments and their cells.  A cell row is written once, with its run and records,
# in one transaction, when the cell has finished: a cell is either wholly stored or absent, so
# a resumed experiment runs exactly the cells without a finished row.
_SCHEMA_V2 = """
CREATE TABLE experiments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    created TEXT NOT NULL,
    updated TEXT NOT NULL,
    group_id TEXT NOT NULL,
    spec_json TEXT NOT NULL,
    status TEXT NOT NULL,
    message TEXT NOT NULL DEFAULT '',
    finished TEXT
);
CREATE TABLE cells (
    experiment_id INTEGER NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    setting_json TEXT NOT NULL,
    arm TEXT NOT NULL,
    step REAL,
    seed INTEGER NOT NULL,
    status TEXT NOT NULL,
    worker TEXT NOT NULL DEFAULT '',
    attempts INTEGER NOT NULL DEFAULT 1,
    finished TEXT NOT NULL,
    PRIMARY KEY (experiment_id, key)
) WITHOUT ROWID;
CREATE INDEX cells_run ON cells (run_id);
"""

# Version 3: owners.  A run or experiment row names the store (process) that created it, so a
# run is marked interrupted only when that owner is gone.  NULL: written before version 3.
_SCHEMA_V3 = """
CREATE TABLE owners (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    pid_start TEXT NOT NULL DEFAULT '',
    started TEXT NOT NULL,
    heartbeat REAL NOT NULL
) WITHOUT ROWID;
ALTER TABLE runs ADD COLUMN owner TEXT;
ALTER TABLE experiments ADD COLUMN owner TEXT;
"""

# Version 4: sessions.  The browser session that launched a run or experiment, as session_token();
# NULL: no browser (the command line, the benchmarks) or written before version 4.
_SCHEMA_V4 = """
ALTER TABLE runs ADD COLUMN session TEXT;
ALTER TABLE experiments ADD COLUMN session TEXT;
CREATE INDEX runs_session ON runs (session);
"""

# Versions 5, 6 and 8 added the per-node summaries as columns, one group per version (their names frozen
# here: the registry of metrics now grows without a schema change); version 9 moved them into ``summaries``.
_STATS_V5 = ("mean", "std", "p10", "p50", "p90", "worst10", "min", "max")
# Version 5: the per-node summaries of every record (issue 23), NULL (read as NaN) in the records written before.
_COLUMNS_V5 = (*(f"node_error_{s}" for s in _STATS_V5), *(f"node_loss_{s}" for s in _STATS_V5), "nodes_untested")
# Version 6: the unseen nodes' fields (issue 23, point 2), NULL (NaN) before.
_COLUMNS_V6 = ("nodes_unseen", "unseen_test_error", *(f"unseen_error_{s}" for s in _STATS_V5), "unseen_untested")
# Version 8 (below, after 7): the personal models' fields (issue 23, point 3), NULL (NaN) before, and in the
# records of an algorithm without personal models.
_COLUMNS_V8 = ("personal_test_error", *(f"personal_error_{s}" for s in ("mean", "p10", "p50", "p90", "worst10")),
               "personal_distance")
_SCHEMA_V5 = "".join(f"ALTER TABLE records ADD COLUMN {f} REAL;\n" for f in _COLUMNS_V5)
_SCHEMA_V6 = "".join(f"ALTER TABLE records ADD COLUMN {f} REAL;\n" for f in _COLUMNS_V6)
_SCHEMA_V8 = "".join(f"ALTER TABLE records ADD COLUMN {f} REAL;\n" for f in _COLUMNS_V8)

#: (old, new) in order; see :func:`_renamed`.
_PRESET_RENAMES = (('"preset:fedprox-synthetic"', '"preset:fedprox-synthetic-binary"'),
                   ('"preset:fedprox-synthetic?', '"preset:fedprox-synthetic-binary?'),
                   ('"preset:fedprox-synthetic-10"', '"preset:fedprox-synthetic"'),
                   ('"preset:fedprox-synthetic-10?', '"preset:fedprox-synthetic?'))


def _renamed(table: str, column: str) -> str:
    """SQL that renames the FedProx presets inside the JSON of ``column`` (issue 22, point 6): the
    binarised draw, stored as ``preset:fedprox-synthetic``, is now ``fedprox-synthetic-binary``, and the
    ten-class one, stored as ``preset:fedprox-synthetic-10``, now has the plain name.  Binary first (its
    patterns, the name followed by a quote or '?', never match the '-10' name).  A renamed experiment's
    results read as before; its stored cell keys hashed the old name, so a resume runs its cells again."""
    expr = column
    for old, new in _PRESET_RENAMES:
        expr = f"replace({expr}, '{old}', '{new}')"
    return f"UPDATE {table} SET {column} = {expr}"


def _rename_presets(text: str) -> str:
    """:func:`_renamed` on a JSON text (an export written before version 7, imported)."""
    for old, new in _PRESET_RENAMES:
        text = text.replace(old, new)
    return text


# Version 7: FedProx's gradient dissimilarity in every record (NULL, read as NaN, where not
# measured), and the FedProx presets' new names in the stored runs and experiments.
_SCHEMA_V7 = ("ALTER TABLE records ADD COLUMN dissimilarity REAL;\n"
              f"{_renamed('runs', 'config_json')};\n{_renamed('experiments', 'spec_json')};\n")

# The record columns of every version from 9 on: the record's own fields, then the per-node summaries of the
# registry (fedviz.problems.metrics) as one JSON object, key → value, a NaN summary left out (read back as NaN).
_RECORD_COLUMNS = ("algorithm", "iteration", "objective", "suboptimality", "test_error", "train_error",
                   "grad_norm", "rounds", "vectors_up", "vectors_down", "grad_evals", "passes", "seconds",
                   "status", "message", "dissimilarity", "summaries")
_LEGACY_COLUMNS = _COLUMNS_V5 + _COLUMNS_V6 + _COLUMNS_V8
_RECORDS_V9 = """
CREATE TABLE records_v9 (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    iteration INTEGER NOT NULL,
    algorithm TEXT NOT NULL,
    objective REAL,
    suboptimality REAL,
    test_error REAL,
    train_error REAL,
    grad_norm REAL,
    rounds INTEGER NOT NULL,
    vectors_up INTEGER NOT NULL,
    vectors_down INTEGER NOT NULL,
    grad_evals INTEGER NOT NULL,
    passes REAL,
    seconds REAL,
    status TEXT NOT NULL,
    message TEXT NOT NULL,
    dissimilarity REAL,
    summaries TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (run_id, iteration)
) WITHOUT ROWID
"""


def _summaries_json(summaries: Mapping[str, float]) -> str:
    """The ``summaries`` column of a record: its per-node summaries as strict JSON in the codec's convention
    (:mod:`.codec`: every digit, ±inf as "Infinity" / "-Infinity"), the NaN ones left out.  Written here
    rather than by the codec's general walk, which costs a record's writing five times over."""
    out = {}
    for k, v in summaries.items():
        v = float(v)
        if v - v == 0.0:
            out[k] = v
        elif v == v:  # ±inf (NaN, the other non-finite value, is left out)
            out[k] = "Infinity" if v > 0 else "-Infinity"
    return json.dumps(out, allow_nan=False, separators=(",", ":"))


def _migrate_v9(c: sqlite3.Connection) -> None:
    """Version 9: the per-node summary columns of versions 5, 6 and 8 become one JSON object per record
    (``summaries``, under the same names: the exports' columns and the registry's keys), the table rebuilt
    once; NULL (NaN) values are left out of the object, as a record written from 9 on leaves them."""
    def pack(*values):
        return _summaries_json({k: v for k, v in zip(_LEGACY_COLUMNS, values) if v is not None})

    c.create_function("fedviz_summaries_v9", len(_LEGACY_COLUMNS), pack, deterministic=True)
    own = ", ".join(_RECORD_COLUMNS[:-1])
    c.execute(_RECORDS_V9)
    c.execute(f"INSERT INTO records_v9 (run_id, {own}, summaries) SELECT run_id, {own}, "
              f"fedviz_summaries_v9({', '.join(_LEGACY_COLUMNS)}) FROM records")
    c.execute("DROP TABLE records")
    c.execute("ALTER TABLE records_v9 RENAME TO records")


#: version → the script (or the function of the connection) that brings a database from version - 1 to version.
_MIGRATIONS = {1: _SCHEMA_V1, 2: _SCHEMA_V2, 3: _SCHEMA_V3, 4: _SCHEMA_V4, 5: _SCHEMA_V5, 6: _SCHEMA_V6,
               7: _SCHEMA_V7, 8: _SCHEMA_V8, 9: _migrate_v9}

# A record that repeats an iteration (the loop's final 'stopped'/'failed' record re-reports
# the last completed iteration) replaces the stored one: the last word on an iteration wins.
_INSERT_RECORD = (
    f"INSERT INTO records (run_id, {', '.join(_RECORD_COLUMNS)}) "
    f"VALUES (?{', ?' * len(_RECORD_COLUMNS)}) "
    f"ON CONFLICT (run_id, iteration) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _RECORD_COLUMNS if c != "iteration"))
_SELECT_RECORDS = f"SELECT {', '.join(_RECORD_COLUMNS)} FROM records WHERE run_id = ? ORDER BY iteration"
_RUN_COLUMNS = ("id", "created", "group_id", "label", "algorithm", "hyper_json", "config_json",
                "dataset_fingerprint", "dataset_summary_json", "f_star", "status", "message", "finished")
_SELECT_RUNS = (f"SELECT {', '.join(_RUN_COLUMNS)}, "
                f"(SELECT COUNT(*) FROM records r WHERE r.run_id = runs.id), session FROM runs")
_FLOAT_POS = tuple(_RECORD_COLUMNS.index(f) for f in FLOAT_FIELDS if f in _RECORD_COLUMNS)
#: The columns of the exports: the record's fields with the summaries spread out (one per key).
_EXPORT_COLUMNS = CORE_FIELDS + SUMMARY_KEYS

EXPORT_FORMAT = "fedviz-runs"
EXPORT_VERSION = 1


@dataclass(frozen=True)
class RunInfo:
    """One stored run (without its records).

    ``hyper``, ``config`` and ``dataset_summary`` parse the stored JSON afresh on every
    access, so a caller can modify what it gets without touching the store or this object.
    ``f_star`` is NaN when unknown; ``n_records`` counts the stored iteration records.
    """

    id: int
    created: str
    group_id: str
    label: str
    algorithm: str
    hyper_json: str
    config_json: str
    dataset_fingerprint: str
    dataset_summary_json: str
    f_star: float
    status: str
    message: str
    finished: str | None
    n_records: int
    #: :func:`session_token` of the browser session that launched the run; None: no browser.
    session: str | None = field(default=None, repr=False)

    @property
    def hyper(self) -> dict:
        return from_json(self.hyper_json)

    @property
    def config(self) -> dict:
        return from_json(self.config_json)

    @property
    def dataset_summary(self) -> dict:
        return from_json(self.dataset_summary_json)

    @property
    def active(self) -> bool:
        """True while the run is queued or running."""
        return self.status in ("queued", "running")


def default_path() -> Path:
    """``$FEDVIZ_DB`` if set, else ``runs.sqlite`` in the platform's per-user data directory."""
    env = os.environ.get("FEDVIZ_DB")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("fedviz")) / "runs.sqlite"


def _check_status(status: str) -> None:
    """Refuse a status a run cannot have (:data:`RUN_STATUSES`)."""
    if status not in RUN_STATUSES:
        raise ParameterError("status", status, "one of " + ", ".join(RUN_STATUSES))


class RunStore(ExperimentTables):
    """The SQLite history of runs and (inherited from :class:`ExperimentTables`) experiments;
    safe to share between threads.

    Parameters
    ----------
    path : str, os.PathLike or None
        The database file (created with its parent directories if missing); None means
        :func:`default_path`.  ``":memory:"`` gives a private in-memory store.

    Raises
    ------
    FedvizError
        If the file was written by a newer fedviz (a higher schema version) or is not a
        SQLite database.
    """

    def __init__(self, path: str | os.PathLike | None = None):
        if path is None:
            path = default_path()
        self.path = str(path) if str(path) == ":memory:" else Path(path).expanduser()
        if isinstance(self.path, Path):
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        # isolation_level=None: no implicit transactions; _transaction() opens them explicitly.
        self._conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None,
                                     timeout=30.0)
        #: This store's owner id, stamped on the runs and experiments it creates.
        self.owner = uuid.uuid4().hex
        try:
            self._configure()
            self._migrate()
            self._register()
        except BaseException as e:
            self._conn.close()
            if isinstance(e, sqlite3.DatabaseError):
                raise FedvizError(f"{self.path}: not a usable fedviz run history ({e})") from e
            raise
        self._closed = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, name="fedviz-store-heartbeat", daemon=True)
        self._beat.start()

    # -- connection --------------------------------------------------------------------------------
    def _configure(self) -> None:
        c = self._conn
        mode = c.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode.lower() not in ("wal", "memory"):
            raise FedvizError(f"{self.path}: cannot switch the database to WAL mode (got {mode!r})")
        c.execute("PRAGMA synchronous=NORMAL")
        c.execute("PRAGMA foreign_keys=ON")

    def _migrate(self) -> None:
        with self._transaction() as c:
            version = c.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise FedvizError(f"{self.path} was written by a newer fedviz (schema version {version}, "
                                  f"this version reads up to {SCHEMA_VERSION}); upgrade fedviz")
            for v in range(version + 1, SCHEMA_VERSION + 1):
                step = _MIGRATIONS[v]
                if callable(step):
                    step(c)
                    continue
                for statement in step.split(";"):
                    if statement.strip():
                        c.execute(statement)
            if version != SCHEMA_VERSION:
                # PRAGMA takes no parameters; the value is this module's own integer constant.
                c.execute(f"PRAGMA user_version = {int(SCHEMA_VERSION)}")

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """Hold the lock and run the block in one write transaction (committed or rolled back)."""
        with self._lock:
            c = self._conn
            c.execute("BEGIN IMMEDIATE")
            try:
                yield c
                c.execute("COMMIT")
            except BaseException:
                # Also after a failed COMMIT (e.g. a full disk), so the next BEGIN starts clean.
                if c.in_transaction:
                    c.execute("ROLLBACK")
                raise

    def _query(self, sql: str, params: Sequence = ()) -> list[tuple]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def close(self) -> None:
        """Unregister (this store's unfinished runs become another store's to mark) and close."""
        if self._closed.is_set():
            return
        self._closed.set()
        with self._lock:
            try:
                with self._transaction() as c:
                    c.execute("DELETE FROM owners WHERE id = ?", (self.owner,))
            except sqlite3.Error:  # a full disk or a broken file must not keep the store open
                pass
            self._conn.close()

    # -- owners ------------------------------------------------------------------------------------
    def _register(self) -> None:
        with self._transaction() as c:
            c.execute("INSERT INTO owners (id, host, pid, pid_start, started, heartbeat) VALUES (?, ?, ?, ?, ?, ?)",
                      (self.owner, _HOST, os.getpid(), _pid_start(os.getpid()), now(), time.time()))

    def _heartbeat(self) -> None:
        """Every HEARTBEAT_SECONDS: say this store is alive, and mark what dead owners left running."""
        while not self._closed.wait(HEARTBEAT_SECONDS):
            try:
                with self._lock:
                    if self._closed.is_set():
                        return
                    with self._transaction() as c:
                        c.execute("UPDATE owners SET heartbeat = ? WHERE id = ?", (time.time(), self.owner))
                self.mark_interrupted()
            except (sqlite3.Error, FedvizError):  # a busy or vanished file: try again next beat
                continue

    def _dead_owners(self, c) -> list[str]:
        """The registered owners that are gone (never this store)."""
        now, dead = time.time(), []
        for owner, host, pid, pid_start, beat in c.execute(
                "SELECT id, host, pid, pid_start, heartbeat FROM owners WHERE id != ?", (self.owner,)):
            if host == _HOST:
                alive = _pid_alive(int(pid), str(pid_start))
            else:
                alive = now - float(beat) < STALE_SECONDS
            if not alive:
                dead.append(owner)
        return dead

    def __enter__(self) -> "RunStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RunStore({str(self.path)!r})"

    _check_status = staticmethod(_check_status)  # for the experiments' queries

    # -- writing -----------------------------------------------------------------------------------
    def create_run(self, *, label: str, algorithm: str, hyper: Mapping | None = None,
                   config: Mapping | None = None, group_id: str | None = None,
                   dataset_fingerprint: str = "", dataset_summary: Mapping | None = None,
                   f_star: float | None = None, status: str = "running", message: str = "",
                   created: str | None = None, finished: str | None = None, session: str | None = None) -> int:
        """Insert a run and return its id.

        ``group_id`` defaults to a fresh UUID; ``created`` to now (UTC, ISO 8601).  ``session``
        is the id of the browser session that launched it (stored as :func:`session_token`;
        None: no browser).
        ``hyper``, ``config`` and ``dataset_summary`` must be JSON-serialisable (numpy
        scalars and arrays are converted).
        """
        with self._transaction() as c:
            return self._insert_run(c, label=label, algorithm=algorithm, hyper=hyper, config=config,
                                    group_id=group_id, dataset_fingerprint=dataset_fingerprint,
                                    dataset_summary=dataset_summary, f_star=f_star, status=status,
                                    message=message, created=created, finished=finished,
                                    token=session_token(session))

    def _insert_run(self, c, *, label, algorithm, hyper, config, group_id, dataset_fingerprint,
                    dataset_summary, f_star, status, message, created, finished, token=None) -> int:
        _check_status(status)
        cur = c.execute(
            "INSERT INTO runs (created, group_id, label, algorithm, hyper_json, config_json, "
            "dataset_fingerprint, dataset_summary_json, f_star, status, message, finished, owner, session) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (created or now(), group_id or uuid.uuid4().hex, str(label), str(algorithm),
             to_json(hyper or {}), to_json(config or {}), str(dataset_fingerprint),
             to_json(dataset_summary or {}), _opt_float(f_star), status, str(message), finished,
             self.owner, token))
        return int(cur.lastrowid)

    def start_run(self, run_id: int, *, dataset_fingerprint: str = "",
                  dataset_summary: Mapping | None = None, f_star: float | None = None) -> None:
        """Mark a queued run 'running' and record what it runs on (known only once the data are built)."""
        with self._transaction() as c:
            c.execute("UPDATE runs SET status = 'running', dataset_fingerprint = ?, "
                      "dataset_summary_json = ?, f_star = ? WHERE id = ?",
                      (str(dataset_fingerprint), to_json(dataset_summary or {}), _opt_float(f_star),
                       int(run_id)))

    def retune_run(self, run_id: int, *, label: str, hyper: Mapping, note: str) -> None:
        """Record what tuning chose before a run's first iteration: its label (which names the
        chosen value), its hyperparameters, and under the config's ``"tuning"`` key how and at
        what cost (the pilots' seconds, apart from the run's)."""
        with self._transaction() as c:
            row = c.execute("SELECT config_json FROM runs WHERE id = ?", (int(run_id),)).fetchone()
            if row is None:
                raise FedvizError(f"no run {run_id} in the history")
            config = {**from_json(row[0]), "tuning": str(note)}
            c.execute("UPDATE runs SET label = ?, hyper_json = ?, config_json = ? WHERE id = ?",
                      (str(label), to_json(hyper or {}), to_json(config), int(run_id)))

    def append_records(self, run_id: int, records: Iterable[IterationRecord]) -> None:
        """Store records of one run in one transaction (a repeated iteration replaces the stored one)."""
        self.append_batch({run_id: records})

    def append_batch(self, batch: Mapping[int, Iterable[IterationRecord]]) -> None:
        """Store records of several runs in one transaction: all or nothing."""
        rows = [_record_row(run_id, r) for run_id, recs in batch.items() for r in recs]
        if not rows:
            return
        with self._transaction() as c:
            c.executemany(_INSERT_RECORD, rows)

    def finish_run(self, run_id: int, status: str, message: str = "",
                   records: Iterable[IterationRecord] = ()) -> None:
        """Store the last ``records`` and the run's end state in one transaction.

        Doing both at once means a crash can never leave a run 'running' with all its
        records, nor 'done' without them.
        """
        _check_status(status)
        rows = [_record_row(run_id, r) for r in records]
        with self._transaction() as c:
            if rows:
                c.executemany(_INSERT_RECORD, rows)
            c.execute("UPDATE runs SET status = ?, message = ?, finished = ? WHERE id = ?",
                      (status, str(message), now(), int(run_id)))

    def delete_run(self, run_id: int) -> bool:
        """Delete a run and its records; False if there was no such run."""
        with self._transaction() as c:
            return self._delete_run_rows(c, int(run_id))

    def _delete_run_rows(self, c, run_id: int) -> bool:
        """In transaction ``c``: delete a run's records and its row; whether there was the row."""
        c.execute("DELETE FROM records WHERE run_id = ?", (int(run_id),))
        return c.execute("DELETE FROM runs WHERE id = ?", (int(run_id),)).rowcount > 0

    def _insert_records(self, c, run_id: int, records: Iterable[IterationRecord]) -> None:
        """In transaction ``c``: store records of one run (a repeated iteration replaces the stored one)."""
        c.executemany(_INSERT_RECORD, [_record_row(run_id, r) for r in records])

    def mark_interrupted(self) -> int:
        """Runs left 'running' or 'queued' by an owner that is gone become 'interrupted'.

        Gone: closed, its process dead, or (another host) silent for ``STALE_SECONDS``;
        rows written before owners existed (owner NULL) count as gone.  Runs of live
        owners, this store's included, are left alone, so another server sharing the file
        keeps its runs.  Their records up to the last committed iteration stay.  Called at
        server start and on every heartbeat.  Returns how many runs were marked.
        """
        with self._transaction() as c:
            dead = self._dead_owners(c)
            live = [self.owner] + [o for (o,) in c.execute("SELECT id FROM owners") if o not in dead]
            marks = ",".join("?" * len(live))
            self._interrupt_experiments(c, live)
            n = c.execute(f"UPDATE runs SET status = 'interrupted', message = ?, finished = ? "
                          f"WHERE status IN ('running', 'queued') AND (owner IS NULL OR owner NOT IN ({marks}))",
                          (INTERRUPTED_MESSAGE, now(), *live)).rowcount
            c.executemany("DELETE FROM owners WHERE id = ?", [(o,) for o in dead])
            return n

    # -- reading -----------------------------------------------------------------------------------
    def list_runs(self, limit: int | None = 100, group_id: str | None = None, *,
                  visible_to: str | None = None) -> list[RunInfo]:
        """The newest runs first (all of them if ``limit`` is None), optionally of one group.

        ``visible_to``: a browser session's id, to list only what that visitor may see: the
        runs its session launched and the runs no browser launched (the command line's, and
        those stored before sessions were); never another visitor's.  None lists every run
        (the command line is the operator).
        """
        sql, params, where = _SELECT_RUNS, [], []
        if group_id is not None:
            where.append("group_id = ?")
            params.append(str(group_id))
        if visible_to is not None:
            where.append("(session IS NULL OR session = ?)")
            params.append(session_token(visible_to))
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [_run_info(row) for row in self._query(sql, params)]

    def get_run(self, run_id: int) -> RunInfo | None:
        rows = self._query(_SELECT_RUNS + " WHERE id = ?", (int(run_id),))
        return _run_info(rows[0]) if rows else None

    def records(self, run_id: int) -> list[IterationRecord]:
        """The run's records in iteration order (NaN where SQLite holds NULL)."""
        return [_row_record(row) for row in self._query(_SELECT_RECORDS, (int(run_id),))]

    def columns(self, run_id: int) -> dict[str, np.ndarray]:
        """The numeric record fields as arrays (float64 with NaN, or int64), in iteration order: the record's
        own, then every per-node key of the registry (NaN where a record lacks it)."""
        own = [f for f in NUMERIC_FIELDS if f not in _SUMMARY_SET]
        rows = self._query(f"SELECT {', '.join(own)}, summaries FROM records WHERE run_id = ? ORDER BY iteration",
                           (int(run_id),))
        out = {}
        for j, name in enumerate(own):
            values = [row[j] for row in rows]
            # None → NaN is numpy's own conversion for a float dtype.
            out[name] = np.array(values, dtype=np.int64 if name in INT_FIELDS else np.float64)
        parsed = [json.loads(row[-1]) for row in rows]
        for name in SUMMARY_KEYS:
            # Absent → None → NaN; "Infinity" / "-Infinity" → ±inf (numpy reads them as float does).
            out[name] = np.array([p.get(name) for p in parsed], dtype=np.float64)
        return {name: out[name] for name in NUMERIC_FIELDS}

    # -- export / import -------------------------------------------------------------------------
    def export_json(self, run_ids: Iterable[int]) -> str:
        """Strict JSON of the runs (metadata, config, records by column) for :meth:`import_json`."""
        runs = []
        for run_id in run_ids:
            info = self._require(run_id)
            cols = {name: [] for name in _EXPORT_COLUMNS}
            for rec in self.records(run_id):
                for name in cols:
                    cols[name].append(getattr(rec, name))
            runs.append({
                "id": info.id, "created": info.created, "group_id": info.group_id, "label": info.label,
                "algorithm": info.algorithm, "hyper": info.hyper, "config": info.config,
                "settings": describe_run(info.config, algorithm=info.algorithm, hyper=info.hyper),
                "dataset_fingerprint": info.dataset_fingerprint, "dataset_summary": info.dataset_summary,
                "f_star": info.f_star, "status": info.status, "message": info.message,
                "finished": info.finished, "records": cols,
            })
        return to_json({"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "runs": runs}, indent=1)

    def import_json(self, text: str) -> list[int]:
        """Add the runs of an :meth:`export_json` text (with new ids) and return their ids.

        Everything is inserted in one transaction: a malformed export adds nothing.
        """
        try:
            doc = from_json(text)
        except json.JSONDecodeError as e:
            raise FedvizError(f"not a fedviz run export: invalid JSON at line {e.lineno} ({e.msg})") from e
        if not isinstance(doc, dict) or doc.get("format") != EXPORT_FORMAT:
            raise FedvizError(f"not a fedviz run export: the 'format' field is not {EXPORT_FORMAT!r}")
        version = doc.get("version")
        if not isinstance(version, int) or version > EXPORT_VERSION:
            raise FedvizError(f"the export has version {version!r}; this fedviz reads versions 1 to "
                              f"{EXPORT_VERSION}")
        ids = []
        with self._transaction() as c:
            for k, run in enumerate(doc.get("runs", [])):
                try:
                    config = run.get("config")
                    if "dissimilarity" not in run.get("records", {}) and config is not None:
                        # exported before schema 7: its preset names are the old ones (as the migration)
                        config = from_json(_rename_presets(to_json(config)))
                    run_id = self._insert_run(
                        c, label=run["label"], algorithm=run["algorithm"], hyper=run.get("hyper"),
                        config=config, group_id=run.get("group_id"),
                        dataset_fingerprint=run.get("dataset_fingerprint", ""),
                        dataset_summary=run.get("dataset_summary"),
                        f_star=decode_float(run.get("f_star")),
                        status=run["status"], message=run.get("message", ""), created=run.get("created"),
                        finished=run.get("finished"))
                    cols = dict(run.get("records", {}))
                    n = len(cols["iteration"])
                    for name in ("dissimilarity", *SUMMARY_KEYS):  # absent from exports written before them: NaN
                        cols.setdefault(name, [None] * n)
                    for name in FLOAT_FIELDS:
                        cols[name] = [decode_float(v) for v in cols[name]]
                    recs = [IterationRecord(*(cols[name][i] for name in CORE_FIELDS),
                                            summaries={k: cols[k][i] for k in SUMMARY_KEYS}) for i in range(n)]
                except (KeyError, TypeError, IndexError, ValueError, AttributeError) as e:
                    raise FedvizError(f"run {k} of the export is malformed ({type(e).__name__}: {e})") from e
                self._insert_records(c, run_id, recs)
                ids.append(run_id)
        return ids

    def export_csv(self, run_ids: Iterable[int]) -> str:
        """One CSV row per record, with the run's id, group, label, algorithm and hyperparameters,
        its settings in words (:func:`describe_run`), its partition spec and its whole config
        (JSON), so a row says what was run without the database.

        Floats are written at full precision; NaN and ±inf as ``nan``, ``inf``, ``-inf``
        (what Python's ``float`` and pandas read back).
        """
        fields = [f for f in FIELDS if f != "algorithm"]
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["run_id", "group_id", "label", "algorithm", "hyper", "settings", "partition", "config",
                    *fields])
        for run_id in run_ids:
            info = self._require(run_id)
            config = info.config
            partition = (config.get("data") or {}).get("partition") if isinstance(config, dict) else None
            head = [info.id, info.group_id, info.label, info.algorithm, info.hyper_json,
                    describe_run(config, algorithm=info.algorithm, hyper=info.hyper),
                    partition or "", info.config_json]
            for rec in self.records(run_id):
                w.writerow(head + [_csv_value(getattr(rec, f)) for f in fields])
        return buf.getvalue()

    def _require(self, run_id: int) -> RunInfo:
        info = self.get_run(run_id)
        if info is None:
            raise ParameterError("run_id", run_id, "the id of a stored run")
        return info


# -- helpers ----------------------------------------------------------------------------------------
_HOST = socket.gethostname()


def _pid_start(pid: int) -> str:
    """When process ``pid`` started (clock ticks since boot, /proc/PID/stat field 22), or '' where
    there is no /proc: with the pid it tells a process from a later one that reuses its pid.
    A zombie (killed, not yet reaped) reads as 'Z', which matches no start time."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return ""
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = stat.rsplit(b")", 1)[1].split()
    return "Z" if fields[0] in (b"Z", b"X") else fields[19].decode()


def _pid_alive(pid: int, pid_start: str) -> bool:
    """Whether ``pid`` on this host is still the process that registered (its start time unchanged)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive, and its start time still readable
        pass
    except OSError:
        return False
    started = _pid_start(pid)
    return started != "Z" and (not pid_start or started in ("", pid_start))


def _opt_float(x) -> float | None:
    return None if x is None else float(x)


def _record_row(run_id: int, r: IterationRecord) -> tuple:
    # int() / float() turn numpy scalars into types sqlite3 can bind (np.int64 is not an int).
    return (int(run_id), str(r.algorithm), int(r.iteration), float(r.objective), float(r.suboptimality),
            float(r.test_error), float(r.train_error), float(r.grad_norm), int(r.rounds),
            int(r.vectors_up), int(r.vectors_down), int(r.grad_evals), float(r.passes),
            float(r.seconds), str(r.status), str(r.message), float(r.dissimilarity),
            _summaries_json({k: v for k, v in r.summaries.items() if k in _SUMMARY_SET}))


def _row_record(row: tuple) -> IterationRecord:
    values = list(row[:-1])
    for j in _FLOAT_POS:
        if values[j] is None:
            values[j] = math.nan
    stored = json.loads(row[-1])
    return IterationRecord(*values, summaries={k: decode_float(stored.get(k)) for k in SUMMARY_KEYS})


def _run_info(row: tuple) -> RunInfo:
    values = list(row)
    f_star = values[_RUN_COLUMNS.index("f_star")]
    values[_RUN_COLUMNS.index("f_star")] = math.nan if f_star is None else f_star
    return RunInfo(*values)


def _csv_value(x):
    return repr(x) if isinstance(x, float) else x
