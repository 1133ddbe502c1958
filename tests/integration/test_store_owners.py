"""One history, many servers (issue 21, point 6): a run is marked interrupted only when its owner is gone.

Real processes share one ``FEDVIZ_DB``: a writer that keeps appending records to a running run
stands in for the first server, and ``get_manager()`` in a fresh interpreter is exactly what a
second server's first page does.  Before owners existed, that call marked the writer's live
run 'interrupted' while records kept arriving.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from fedviz.runner.history import store as store_mod
from fedviz.runner.history.describe import INTERRUPTED_MESSAGE
from fedviz.runner.history.store import RunStore

from conftest import ROOT

WRITER = textwrap.dedent("""
    import sys, time
    from fedviz.runner.loop import IterationRecord
    from fedviz.runner.history.store import RunStore
    s = RunStore(sys.argv[1])
    rid = s.create_run(label="live", algorithm="gd")
    print(rid, flush=True)
    k = 0
    while True:
        s.append_records(rid, [IterationRecord(algorithm="gd", iteration=k, rounds=k, vectors_up=0, vectors_down=0,
                                               grad_evals=0, passes=0.0, objective=1.0, suboptimality=1.0,
                                               test_error=0.5, train_error=0.5, grad_norm=1.0, seconds=0.0,
                                               status="running")])
        k += 1
        time.sleep(0.05)
""")

SECOND_SERVER = ("from fedviz.runner.serve.manager import get_manager; import sys; m = get_manager(); "
                 "print(m.store.get_run(int(sys.argv[1])).status); m.close(timeout=10); m.store.close()")


def _env(db) -> dict:
    return {**os.environ, "FEDVIZ_DB": str(db), "PYTHONPATH": str(ROOT)}


def _second_server(db, rid: int) -> str:
    r = subprocess.run([sys.executable, "-c", SECOND_SERVER, str(rid)], env=_env(db), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()[-1]


def _n_records(db, rid: int) -> int:
    with RunStore(db) as s:
        return s.get_run(rid).n_records


def test_a_second_server_leaves_the_first_servers_live_run_alone(tmp_path):
    db = tmp_path / "runs.sqlite"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db)], env=_env(db), stdout=subprocess.PIPE,
                              text=True)
    try:
        rid = int(writer.stdout.readline())
        assert _second_server(db, rid) == "running"
        before = _n_records(db, rid)
        deadline = time.monotonic() + 60
        while _n_records(db, rid) <= before and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _n_records(db, rid) > before  # the first server's run goes on, and is still 'running'
        with RunStore(db) as s:
            assert s.get_run(rid).status == "running"
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=60)
    # Its owner dead, the next server start marks it, keeping its records.
    n = _n_records(db, rid)
    assert _second_server(db, rid) == "interrupted"
    with RunStore(db) as s:
        info = s.get_run(rid)
        assert (info.status, info.message, info.n_records) == ("interrupted", INTERRUPTED_MESSAGE, n)


def _foreign_owner(store: RunStore, *, host: str, pid: int, pid_start: str, age: float) -> int:
    """A running run owned by a registered owner described by hand (another host, a reused pid)."""
    with store._transaction() as c:
        c.execute("INSERT INTO owners (id, host, pid, pid_start, started, heartbeat) VALUES (?, ?, ?, ?, '', ?)",
                  (f"{host}-{pid}-{pid_start}-{age}", host, pid, pid_start, time.time() - age))
    rid = store.create_run(label="foreign", algorithm="gd")
    with store._transaction() as c:
        c.execute("UPDATE runs SET owner = ? WHERE id = ?", (f"{host}-{pid}-{pid_start}-{age}", rid))
    return rid


def test_another_hosts_owner_is_dead_only_after_its_heartbeat_goes_stale(tmp_path):
    with RunStore(tmp_path / "runs.sqlite") as s:
        fresh = _foreign_owner(s, host="elsewhere", pid=1, pid_start="", age=store_mod.STALE_SECONDS / 4)
        stale = _foreign_owner(s, host="elsewhere", pid=2, pid_start="", age=store_mod.STALE_SECONDS + 1)
        assert s.mark_interrupted() == 1
        assert (s.get_run(fresh).status, s.get_run(stale).status) == ("running", "interrupted")


def test_a_reused_pid_is_not_its_old_owner(tmp_path):
    """Same host, a pid that runs (ours) but started at another time: the registered process is gone."""
    with RunStore(tmp_path / "runs.sqlite") as s:
        reused = _foreign_owner(s, host=store_mod._HOST, pid=os.getpid(), pid_start="1", age=0)
        same = _foreign_owner(s, host=store_mod._HOST, pid=os.getpid(),
                              pid_start=store_mod._pid_start(os.getpid()), age=0)
        assert s.mark_interrupted() == 1
        assert (s.get_run(reused).status, s.get_run(same).status) == ("interrupted", "running")


def test_the_heartbeat_marks_what_a_closed_store_left(tmp_path, monkeypatch):
    """A server that stays up notices, on its own, the runs another one left when it went away."""
    monkeypatch.setattr(store_mod, "HEARTBEAT_SECONDS", 0.05)
    path = tmp_path / "runs.sqlite"
    with RunStore(path) as watcher:
        other = RunStore(path)
        rid = other.create_run(label="left", algorithm="gd")
        other.close()
        deadline = time.monotonic() + 60
        while watcher.get_run(rid).status == "running" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert watcher.get_run(rid).status == "interrupted"


def test_a_store_from_before_owners_is_migrated_and_its_unfinished_runs_marked(tmp_path):
    """A version-2 file (no owners): its running runs have no owner, so the first new store marks them."""
    import sqlite3
    path = tmp_path / "runs.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    for v in (1, 2):
        for statement in store_mod._MIGRATIONS[v].split(";"):
            if statement.strip():
                conn.execute(statement)
    conn.execute("PRAGMA user_version = 2")
    conn.execute("INSERT INTO runs (created, group_id, label, algorithm, hyper_json, config_json, "
                 "dataset_fingerprint, dataset_summary_json, status, message) "
                 "VALUES ('2026-01-01', 'g', 'old', 'gd', '{}', '{}', '', '{}', 'running', '')")
    conn.close()
    with RunStore(path) as s:
        assert s.mark_interrupted() == 1
        assert s.list_runs()[0].status == "interrupted"
