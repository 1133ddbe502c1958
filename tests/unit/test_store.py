"""The SQLite run history: exact round trips (NaN and ±inf included), WAL mode, hostile text
stored verbatim, strict-JSON and CSV exports, schema versioning, thread safety.  A SIGKILL'd
writer losing nothing it committed: tests/integration/test_store_sigkill.py."""

import csv
import io
import json
import math
import sqlite3
import threading
from pathlib import Path

import numpy as np
import platformdirs
import pytest

from fedviz.errors import FedvizError, ParameterError
from fedviz.runner.history import store as store_mod
from fedviz.runner.history.describe import INTERRUPTED_MESSAGE, describe_run
from fedviz.problems import metrics
from fedviz.runner.loop import CORE_FIELDS, FIELDS, IterationRecord
from fedviz.runner.history.store import NUMERIC_FIELDS, SCHEMA_VERSION, RunStore, default_path

NAN, INF = math.nan, math.inf


def _rec(i, label="gd", **kw):
    base = dict(algorithm=label, iteration=i, objective=1.0 / (i + 1), suboptimality=0.5 / (i + 1),
                test_error=0.25, train_error=0.125, grad_norm=2.0 ** -i, rounds=i, vectors_up=4 * i,
                vectors_down=4 * i, grad_evals=40 * i, passes=float(i), seconds=0.001 * i,
                status="running", message="")
    base.update(kw)
    return IterationRecord(**base)


def _same(a: IterationRecord, b: IterationRecord) -> bool:
    """Field-wise equality in which NaN equals NaN."""
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        if isinstance(x, float) and math.isnan(x):
            if not (isinstance(y, float) and math.isnan(y)):
                return False
        elif x != y or type(x) is not type(y):
            return False
    return True


@pytest.fixture
def store(tmp_path):
    s = RunStore(tmp_path / "runs.sqlite")
    yield s
    s.close()


def _hostile_records():
    return [
        _rec(0),
        _rec(1, objective=NAN, suboptimality=NAN, test_error=NAN, message="ünïcödé — ∇f"),
        _rec(2, objective=INF, suboptimality=-INF, grad_norm=INF, passes=1e-300, seconds=5e-324),
        _rec(3, rounds=2**62, vectors_up=2**62 + 1, grad_evals=-1, status="diverged",
             message="GD diverged; lower stepsize"),
    ]


def test_record_columns_follow_the_record_fields(store):
    # The record's own fields are columns; every per-node summary lives in the one JSON column.
    assert store_mod._RECORD_COLUMNS == CORE_FIELDS + ("summaries",)
    assert store_mod._EXPORT_COLUMNS == FIELDS == CORE_FIELDS + metrics.KEYS
    cols = [row[1] for row in store._query("PRAGMA table_info(records)")]
    assert sorted(cols) == sorted(["run_id", *CORE_FIELDS, "summaries"])
    assert set(NUMERIC_FIELDS) == set(store_mod.FLOAT_FIELDS) | set(store_mod.INT_FIELDS)


def test_records_round_trip_exactly_including_non_finite_values(store):
    recs = _hostile_records()
    rid = store.create_run(label="gd", algorithm="gd", hyper={"stepsize": None}, config={"lam": 0.1})
    store.append_records(rid, recs[:2])
    store.append_records(rid, recs[2:])
    back = store.records(rid)
    assert len(back) == len(recs)
    assert all(_same(a, b) for a, b in zip(recs, back))
    # The same values by column, with NaN for SQLite's NULL and int64 for counters.
    cols = store.columns(rid)
    assert tuple(cols) == NUMERIC_FIELDS
    for f in NUMERIC_FIELDS:
        expected = np.array([getattr(r, f) for r in recs])
        assert cols[f].dtype == (np.int64 if f in store_mod.INT_FIELDS else np.float64)
        np.testing.assert_array_equal(cols[f], expected)
    assert np.isnan(cols["objective"][1]) and cols["objective"][2] == INF
    assert cols["suboptimality"][2] == -INF


def test_numpy_scalars_are_stored_as_numbers(store):
    rid = store.create_run(label="a", algorithm="gd", hyper={"h": np.float64(0.5), "k": np.int64(3)})
    rec = _rec(0, objective=np.float64(0.25), rounds=np.int64(7))
    store.append_records(rid, [rec])
    (back,) = store.records(rid)
    assert back.objective == 0.25 and type(back.objective) is float
    assert back.rounds == 7 and type(back.rounds) is int
    assert store.get_run(rid).hyper == {"h": 0.5, "k": 3}


def test_wal_mode_normal_sync_and_schema_version(tmp_path):
    path = tmp_path / "runs.sqlite"
    s = RunStore(path)
    assert s._query("PRAGMA synchronous")[0][0] == 1  # NORMAL
    # Journal mode and version are properties of the file: read them with a separate connection.
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    con.close()
    s.close()
    RunStore(path).close()  # reopening an up-to-date file migrates nothing


def test_hostile_text_is_stored_verbatim(store):
    evil = "x'); DROP TABLE runs; --"
    quote = 'say "hi" \\ it\'s; DELETE FROM records'
    rid = store.create_run(label=evil, algorithm=quote, group_id=evil, hyper={evil: quote},
                           config={"name": evil}, message=quote)
    store.append_records(rid, [_rec(0, label=evil, message=evil)])
    info = store.get_run(rid)
    assert (info.label, info.algorithm, info.group_id, info.message) == (evil, quote, evil, quote)
    assert info.hyper == {evil: quote} and info.config == {"name": evil}
    assert [r.id for r in store.list_runs(group_id=evil)] == [rid]
    assert store.records(rid)[0].message == evil
    tables = {row[0] for row in store._query("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"runs", "records"} <= tables


def test_path_comes_from_the_environment_and_parents_are_created(tmp_path, monkeypatch):
    target = tmp_path / "a" / "b" / "history.sqlite"
    monkeypatch.setenv("FEDVIZ_DB", str(target))
    with RunStore() as s:
        assert Path(s.path) == target
    assert target.exists()


def test_default_path_is_the_per_user_data_directory(monkeypatch):
    monkeypatch.delenv("FEDVIZ_DB", raising=False)
    assert default_path() == Path(platformdirs.user_data_dir("fedviz")) / "runs.sqlite"


def test_list_get_and_delete(store):
    g1 = [store.create_run(label=f"a{k}", algorithm="gd", group_id="g1") for k in range(3)]
    g2 = store.create_run(label="b", algorithm="gd", group_id="g2")
    store.append_records(g1[0], [_rec(i) for i in range(4)])
    assert [r.id for r in store.list_runs()] == [g2, *reversed(g1)]  # newest first
    assert [r.id for r in store.list_runs(limit=2)] == [g2, g1[2]]
    assert [r.id for r in store.list_runs(group_id="g1")] == list(reversed(g1))
    info = store.get_run(g1[0])
    assert info.n_records == 4 and info.status == "running" and info.finished is None
    assert math.isnan(info.f_star)
    assert store.get_run(10**9) is None
    assert store.delete_run(g1[0]) is True
    assert store.delete_run(g1[0]) is False
    assert store.get_run(g1[0]) is None and store.records(g1[0]) == []
    # Ids are never reused after a delete (AUTOINCREMENT): an export's ids stay unambiguous.
    store.delete_run(g2)
    assert store.create_run(label="c", algorithm="gd") > g2


def test_start_and_finish_run(store):
    rid = store.create_run(label="a", algorithm="gd", status="queued")
    store.start_run(rid, dataset_fingerprint="abc", dataset_summary={"n": 10}, f_star=0.5)
    info = store.get_run(rid)
    assert (info.status, info.dataset_fingerprint, info.dataset_summary, info.f_star) == \
        ("running", "abc", {"n": 10}, 0.5)
    store.append_records(rid, [_rec(0), _rec(1)])
    # The loop's final 'stopped' record re-reports the last iteration: it replaces the stored one.
    final = _rec(1, status="stopped", message="stopped by the user after 1 iterations", seconds=9.0)
    store.finish_run(rid, "stopped", "stopped by the user", records=[final])
    info = store.get_run(rid)
    assert (info.status, info.message, info.n_records) == ("stopped", "stopped by the user", 2)
    assert info.finished is not None and info.finished >= info.created
    assert _same(store.records(rid)[-1], final)
    with pytest.raises(ParameterError, match="status"):
        store.finish_run(rid, "exploded")


def test_mark_interrupted_marks_only_live_runs(tmp_path):
    """Unfinished runs of a store that has closed are marked; its finished runs, and the runs of a
    store still open (this one's own included), are not."""
    path = tmp_path / "runs.sqlite"
    old = RunStore(path)
    done = old.create_run(label="done", algorithm="gd")
    old.append_records(done, [_rec(0), _rec(1, status="done")])
    old.finish_run(done, "done")
    running = old.create_run(label="running", algorithm="gd")
    old.append_records(running, [_rec(0), _rec(1)])
    queued = old.create_run(label="queued", algorithm="gd", status="queued")
    store = RunStore(path)
    mine = store.create_run(label="mine", algorithm="gd")
    assert store.mark_interrupted() == 0  # the old store is still open: its runs are live
    old.close()
    assert store.mark_interrupted() == 2
    assert store.mark_interrupted() == 0
    assert store.get_run(mine).status == "running"
    for rid in (running, queued):
        info = store.get_run(rid)
        assert (info.status, info.message) == ("interrupted", INTERRUPTED_MESSAGE)
    assert store.get_run(done).status == "done"
    assert len(store.records(running)) == 2
    store.close()


def test_json_export_is_strict_and_round_trips(store, tmp_path):
    recs = _hostile_records()
    rid = store.create_run(label="gd 'h'", algorithm="gd", hyper={"stepsize": 0.5},
                           config={"data": {"source": "synthetic", "seed": 3}, "lam": 1e-3},
                           group_id="g", dataset_fingerprint="f00d", dataset_summary={"n": 40},
                           f_star=None)
    store.finish_run(rid, "diverged", "lower stepsize", records=recs)
    other = store.create_run(label="b", algorithm="gd", f_star=-INF)
    text = store.export_json([rid, other])

    def refuse(token):
        raise AssertionError(f"non-standard JSON constant {token}")

    doc = json.loads(text, parse_constant=refuse)
    run = doc["runs"][0]
    assert run["records"]["objective"][1] is None and run["records"]["objective"][2] == "Infinity"
    assert run["f_star"] is None and doc["runs"][1]["f_star"] == "-Infinity"

    with RunStore(tmp_path / "copy.sqlite") as copy:
        new_ids = copy.import_json(text)
        assert len(new_ids) == 2
        for old, new in zip([rid, other], new_ids):
            a, b = store.get_run(old), copy.get_run(new)
            for f in ("created", "group_id", "label", "algorithm", "hyper", "config",
                      "dataset_fingerprint", "dataset_summary", "status", "message", "finished",
                      "n_records"):
                assert getattr(a, f) == getattr(b, f), f
            assert a.f_star == b.f_star or (math.isnan(a.f_star) and math.isnan(b.f_star))
            assert all(_same(x, y) for x, y in zip(store.records(old), copy.records(new)))
        assert copy.export_json(new_ids).replace(f'"id": {new_ids[0]}', f'"id": {rid}') \
            .replace(f'"id": {new_ids[1]}', f'"id": {other}') == text


def test_import_refuses_malformed_exports_and_adds_nothing(store):
    rid = store.create_run(label="a", algorithm="gd")
    store.append_records(rid, [_rec(0)])
    good = json.loads(store.export_json([rid]))
    with pytest.raises(FedvizError, match="invalid JSON"):
        store.import_json("{not json")
    with pytest.raises(FedvizError, match="format"):
        store.import_json(json.dumps({"runs": []}))
    bad = json.loads(json.dumps(good))
    bad["runs"].append({"label": "broken"})  # the second run lacks everything
    with pytest.raises(FedvizError, match="run 1"):
        store.import_json(json.dumps(bad))
    assert [r.id for r in store.list_runs()] == [rid]  # the first, valid run was rolled back too


def test_csv_export(store):
    recs = _hostile_records()
    rid = store.create_run(label="a,b \"c\"", algorithm="gd", hyper={"stepsize": 0.5}, group_id="g")
    store.append_records(rid, recs)
    rows = list(csv.DictReader(io.StringIO(store.export_csv([rid]))))
    assert len(rows) == len(recs)
    for row, rec in zip(rows, recs):
        assert row["run_id"] == str(rid) and row["label"] == "a,b \"c\"" and row["group_id"] == "g"
        assert json.loads(row["hyper"]) == {"stepsize": 0.5}
        assert int(row["iteration"]) == rec.iteration and int(row["rounds"]) == rec.rounds
        for f in store_mod.FLOAT_FIELDS:
            x = float(row[f])  # full precision, 'nan' / 'inf' / '-inf' included
            y = getattr(rec, f)
            assert x == y or (math.isnan(x) and math.isnan(y))
        assert row["status"] == rec.status and row["message"] == rec.message
    with pytest.raises(ParameterError, match="run_id"):
        store.export_csv([10**9])


def test_newer_schema_and_foreign_files_are_refused(tmp_path):
    newer = tmp_path / "newer.sqlite"
    con = sqlite3.connect(newer)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.close()
    with pytest.raises(FedvizError, match="newer fedviz"):
        RunStore(newer)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(FedvizError, match="not a usable"):
        RunStore(junk)


def test_concurrent_writers_and_readers(store):
    ids = [store.create_run(label=f"t{k}", algorithm="gd") for k in range(4)]
    errors = []

    def write(rid):
        try:
            for i in range(50):
                store.append_records(rid, [_rec(i)])
                store.list_runs()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(rid,)) for rid in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for rid in ids:
        assert [r.iteration for r in store.records(rid)] == list(range(50))


# -- describing runs ---------------------------------------------------------------------------
def _config(**changes):
    """A stored config (RunConfig.as_json) with the given settings changed."""
    import dataclasses

    from fedviz.data.build import DataSpec
    from fedviz.runner.config import RunConfig

    data = changes.pop("data", {})
    return dataclasses.replace(RunConfig(), data=DataSpec(**{"source": "preset:google-plus-small", **data}),
                               **changes).as_json()


def test_describe_run_of_the_default_config_names_only_data_and_partition():
    """A default run differs in nothing: its description is its data and its nodes."""
    assert describe_run(_config()) == "google-plus-small · the data's own nodes"


def test_describe_run_names_every_changed_setting_in_words():
    """Each setting changed from the default appears, in words (no raw keys such as
    'classes_per_node' or 'test_fraction'), and nothing else does."""
    config = _config(data=dict(source="preset:google-plus-small?nodes=200", partition="shards:classes_per_node=1",
                               nodes=50, seed=4, test_fraction=0.1),
                     loss="squared", lam=0.001, iterations=12, seed=7,
                     algorithms=(("fsvrg", (("stepsize", 20.0),)), ("gd", ())))
    text = describe_run(config)
    expected = ["google-plus-small (nodes = 200)", "shards (classes per node = 1)", "K = 50", "data seed 4",
                "test fraction 0.1", "squared loss", "λ = 0.001", "12 iterations", "seed 7",
                "FSVRG: stepsize = 20"]
    assert text.split(" · ") == expected
    assert "_" not in text


def test_describe_run_of_one_run_names_its_non_default_hyperparameters():
    """The history stores a run's hyperparameters with the defaults filled in; only the
    changed ones are named (stepsize: derived by default, so any value is a change)."""
    from fedviz.algorithms import get_algorithm

    resolved = get_algorithm("fsvrg").validate({"stepsize": 0.5})
    text = describe_run(_config(), algorithm="fsvrg", hyper=resolved)
    assert text == "google-plus-small · the data's own nodes · stepsize = 0.5"
    assert describe_run(_config(), algorithm="fsvrg",
                        hyper=get_algorithm("fsvrg").validate({})) == \
        "google-plus-small · the data's own nodes"


def test_describe_run_without_the_partition_for_the_what_if_view():
    """The what-if view sets partition and K itself: both are left out, the rest stays."""
    config = _config(data=dict(partition="iid", nodes=20, test_fraction=0.5), loss="squared")
    assert describe_run(config, partition=False) == \
        "google-plus-small · test fraction 0.5 · squared loss"


def test_exports_carry_the_partition_and_the_settings(store):
    """CSV rows and JSON runs say how the data were split and what differed from the defaults."""
    config = _config(data=dict(partition="dirichlet:alpha=0.1", nodes=200), iterations=5)
    rid = store.create_run(label="GD", algorithm="gd", hyper={}, config=config)
    store.append_records(rid, [_rec(0), _rec(1)])
    rows = list(csv.DictReader(io.StringIO(store.export_csv([rid]))))
    assert [r["partition"] for r in rows] == ["dirichlet:alpha=0.1"] * 2
    assert rows[0]["settings"] == "google-plus-small · dirichlet (α = 0.1) · K = 200 · 5 iterations"
    assert json.loads(rows[0]["config"]) == config
    run = json.loads(store.export_json([rid]))["runs"][0]
    assert run["config"] == config and run["settings"] == rows[0]["settings"]
    # An export with the extra field still imports.
    assert len(store.import_json(store.export_json([rid]))) == 1
