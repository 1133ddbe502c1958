"""Users apart (issue 21, point 4): runs and experiments carry the browser session that launched them.

A visitor is listed its own runs and the runs no browser launched, never another visitor's; the
stored token is a keyed hash, so the file never holds a session's id; a history from before
sessions (schema 3) opens with every old row belonging to no visitor.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

from fedviz.algorithms.spec import AlgorithmSpec
from fedviz.data.build import DataSpec
from fedviz.runner.history import store as store_mod
from fedviz.runner.serve.manager import ProblemSpec, RunJob, RunManager
from fedviz.runner.history.stamps import session_token
from fedviz.runner.history.store import RunStore

from conftest import ROOT

A, B = "a0c1e0f2-session-of-visitor-a", "b7d3a9e4-session-of-visitor-b"


def _v3_file(path) -> None:
    """A history as version 3 wrote it: a run and an experiment (with a cell) and their owner columns."""
    conn = sqlite3.connect(path, isolation_level=None)
    for v in (1, 2, 3):
        for statement in store_mod._MIGRATIONS[v].split(";"):
            if statement.strip():
                conn.execute(statement)
    conn.execute("PRAGMA user_version = 3")
    conn.execute("INSERT INTO runs (created, group_id, label, algorithm, hyper_json, config_json, status, "
                 "owner) VALUES ('2026-01-01', 'g', 'old run', 'gd', '{}', '{}', 'done', 'gone')")
    conn.execute("INSERT INTO experiments (name, created, updated, group_id, spec_json, status, owner) "
                 "VALUES ('old exp', '2026-01-01', '2026-01-01', 'e', '{}', 'stopped', 'gone')")
    conn.close()


def test_a_version_3_history_opens_and_its_rows_belong_to_no_visitor(tmp_path):
    path = tmp_path / "runs.sqlite"
    _v3_file(path)
    with RunStore(path) as s:
        assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == store_mod.SCHEMA_VERSION
        (old,) = s.list_runs()
        assert old.label == "old run" and old.session is None
        assert [r.label for r in s.list_runs(visible_to=A)] == ["old run"]  # no owner: every visitor sees it
        exp = s.get_experiment("old exp")
        assert exp.session is None and exp.ownerless and not exp.launched_in(A)
        mine = s.create_run(label="new", algorithm="gd", session=A)
        assert [r.id for r in s.list_runs(visible_to=B)] == [old.id]
        assert [r.id for r in s.list_runs(visible_to=A)] == [mine, old.id]


def test_a_visitor_is_listed_its_own_runs_and_the_command_lines_never_anothers(tmp_path):
    with RunStore(tmp_path / "runs.sqlite") as s:
        cli = s.create_run(label="cli", algorithm="gd")
        a1 = s.create_run(label="a1", algorithm="gd", session=A, config={"data": {"source": "upload:a-secret.svm"}})
        b1 = s.create_run(label="b1", algorithm="gd", session=B)
        a2 = s.create_run(label="a2", algorithm="gd", session=A, group_id="ga")
        assert [r.id for r in s.list_runs(visible_to=A)] == [a2, a1, cli]
        assert [r.id for r in s.list_runs(visible_to=B)] == [b1, cli]
        assert [r.id for r in s.list_runs(visible_to="someone else")] == [cli]
        assert [r.id for r in s.list_runs()] == [a2, b1, a1, cli]  # the operator sees everything
        assert [r.id for r in s.list_runs(group_id="ga", visible_to=B)] == []
        assert [r.id for r in s.list_runs(limit=1, visible_to=B)] == [b1]  # the limit counts visible runs only


def test_the_file_and_the_exports_never_hold_a_session_id(tmp_path):
    path = tmp_path / "runs.sqlite"
    with RunStore(path) as s:
        rid = s.create_run(label="a", algorithm="gd", session=A)
        s.open_experiment("e", {}, session=A)
        token = s.get_run(rid).session
        assert token and A not in token and len(token) == 32
        exported = s.export_json([rid]) + s.export_csv([rid])
        assert token not in exported and A not in exported
        assert "session" not in json.loads(s.export_json([rid]))["runs"][0]
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())  # the database, its WAL and shared memory
    assert A.encode() not in raw and token.encode() in raw


def test_the_token_is_keyed_per_process(tmp_path):
    """Another process computes another token for the same id: a token means nothing outside its server."""
    assert session_token(A) == session_token(A) != session_token(B)
    assert session_token(None) is None
    code = f"from fedviz.runner.history.stamps import session_token; print(session_token({A!r}))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, check=True).stdout.strip()
    assert len(other) == 32 and other != session_token(A)


def _cell(s: RunStore, exp_id: int, key: str) -> int:
    return s.save_cell(exp_id, key=key, setting=(0,), arm="gd", step=None, seed=0, label="GD", algorithm="gd",
                       hyper={}, config={}, status="done")


def test_an_experiment_and_its_cells_belong_to_whoever_launched_it_last(tmp_path):
    with RunStore(tmp_path / "runs.sqlite") as s:
        info = s.open_experiment("grid", {"name": "grid"}, session=A)
        assert info.launched_in(A) and not info.launched_in(B) and not info.launched_in(None)
        assert not info.ownerless  # its server (this store) is alive
        cell_a = _cell(s, info.id, "k1")
        assert [r.id for r in s.list_runs(visible_to=B)] == []
        assert [r.id for r in s.list_runs(visible_to=A)] == [cell_a]
        # The command line resumes it: from now on it is nobody's, and so are the cells it stores.
        again = s.open_experiment("grid", {"name": "grid"})
        assert again.ownerless and not again.launched_in(A)
        cell_cli = _cell(s, info.id, "k2")
        assert [r.id for r in s.list_runs(visible_to=B)] == [cell_cli]
        assert [r.id for r in s.list_runs(visible_to=A)] == [cell_cli, cell_a]


def test_an_experiment_of_a_server_that_is_gone_has_no_owner(tmp_path):
    """Its session lived in that server and can never come back: no visitor holds it any more."""
    path = tmp_path / "runs.sqlite"
    first = RunStore(path)
    first.open_experiment("left behind", {}, session=A)
    with RunStore(path) as second:
        assert not second.get_experiment("left behind").ownerless  # the first server still runs
        first.close()
        exp = second.get_experiment("left behind")
        assert exp.ownerless and exp.session is not None


def test_the_manager_stores_the_session_of_each_run(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite")
    m = RunManager(2, store=store, reaper=False)
    try:
        job = RunJob(ProblemSpec(DataSpec("preset:identical-nodes"), "logistic", 1e-3),
                     (AlgorithmSpec.of("gd", label="GD"),), iterations=2)
        ha, hb = m.submit(job, A), m.submit(job, B)
        assert ha.wait(120) and hb.wait(120)
        (ra,), (rb,) = ha.store_ids.values(), hb.store_ids.values()
        assert [r.id for r in store.list_runs(visible_to=A)] == [ra]
        assert [r.id for r in store.list_runs(visible_to=B)] == [rb]
    finally:
        m.close()
        store.close()


def test_the_efficiency_lesson_lists_a_visitors_own_groups_only(tmp_path):
    """Learn › Efficiency's "runs started together" are history runs too: another visitor's are not listed."""
    from fedviz.learn.efficiency import history_groups
    from fedviz.runner.loop import IterationRecord

    with RunStore(tmp_path / "runs.sqlite") as s:
        for group, session in (("mine", A), ("theirs", B), ("cli", None)):
            for algorithm in ("gd", "fsvrg"):
                rid = s.create_run(label=algorithm, algorithm=algorithm, group_id=group, f_star=0.0,
                                   dataset_fingerprint="fp", session=session,
                                   config={"data": {"source": f"upload:{group}.svm"}})
                s.append_records(rid, [IterationRecord(algorithm, t, 1.0, 1.0 / (t + 1), 0.1, 0.1, 1.0, t, t, t, t,
                                                       float(t), 0.0, "running", "") for t in range(3)])
                s.finish_run(rid, "done")
        assert {g.group_id for g in history_groups(s, visible_to=A)} == {"mine", "cli"}
        assert not any("theirs" in g.title() for g in history_groups(s, visible_to=A))
        assert {g.group_id for g in history_groups(s)} == {"mine", "theirs", "cli"}
