"""The per-node summaries (issue 23) in the run history: stored, exported, imported, read as NaN from a
history or an export written before them, and carried bit for bit from the columns of a version 8 history
into the JSON column of version 9."""

import csv
import io
import json
import math
import sqlite3

import numpy as np

from fedviz.runner.history import store as store_mod
from fedviz.runner.loop import IterationRecord
from fedviz.problems.pernode import FIELDS as PERNODE_FIELDS
from fedviz.runner.history.store import RunStore


def _rec(i):
    extra = {f: (j + 1) / 7 + i for j, f in enumerate(PERNODE_FIELDS)}
    extra["node_error_p10"] = math.nan
    extra["node_loss_max"] = math.inf
    return IterationRecord(algorithm="gd", iteration=i, objective=1.0, suboptimality=0.5, test_error=0.25,
                           train_error=0.125, grad_norm=1.0, rounds=i, vectors_up=i, vectors_down=i,
                           grad_evals=i, passes=float(i), seconds=0.0, status="running", summaries=extra)


def _check(got, want):
    for f in PERNODE_FIELDS:
        x, y = getattr(got, f), getattr(want, f)
        assert x == y or (math.isnan(x) and math.isnan(y)), f


def test_the_summaries_round_trip_through_the_store_and_both_exports(tmp_path):
    with RunStore(tmp_path / "a.sqlite") as s:
        rid = s.create_run(label="gd", algorithm="gd")
        recs = [_rec(0), _rec(1)]
        s.append_records(rid, recs)
        for got, want in zip(s.records(rid), recs):
            _check(got, want)
        cols = s.columns(rid)
        assert cols["node_loss_worst10"].tolist() == [r.node_loss_worst10 for r in recs]
        rows = list(csv.DictReader(io.StringIO(s.export_csv([rid]))))
        assert [float(r["node_error_mean"]) for r in rows] == [r.node_error_mean for r in recs]
        assert rows[0]["node_error_p10"] == "nan"
        text = s.export_json([rid])
        (new,) = s.import_json(text)
        for got, want in zip(s.records(new), recs):
            _check(got, want)
        # An export written before the per-node fields imports with NaN in them.
        doc = json.loads(text)
        for f in PERNODE_FIELDS:
            del doc["runs"][0]["records"][f]
        (old,) = s.import_json(json.dumps(doc))
        assert all(math.isnan(getattr(r, f)) for r in s.records(old) for f in PERNODE_FIELDS)
        assert [r.objective for r in s.records(old)] == [1.0, 1.0]


def test_a_version_4_history_reads_nan_in_every_summary(tmp_path):
    path = tmp_path / "v4.sqlite"
    con = _history(path, 4)
    con.execute("INSERT INTO runs (id, created, group_id, label, algorithm, hyper_json, config_json, status) "
                "VALUES (1, '2026-01-01', 'g', 'gd', 'gd', '{}', '{}', 'done')")
    con.execute("INSERT INTO records (run_id, iteration, algorithm, objective, suboptimality, test_error, "
                "train_error, grad_norm, rounds, vectors_up, vectors_down, grad_evals, passes, seconds, status, "
                "message) VALUES (1, 0, 'gd', 0.5, 0.1, 0.2, 0.2, 1.0, 0, 0, 0, 0, 0.0, 0.0, 'done', '')")
    con.commit()
    con.close()
    with RunStore(path) as s:
        (rec,) = s.records(1)
        assert rec.objective == 0.5 and all(math.isnan(getattr(rec, f)) for f in PERNODE_FIELDS)
        assert np.isnan(s.columns(1)["nodes_untested"]).all()
        s.append_records(1, [_rec(1)])
        _check(s.records(1)[1], _rec(1))


def _history(path, version):
    """A history file at ``version``, made by the migrations as they stand for that version."""
    con = sqlite3.connect(path)
    for v in range(1, version + 1):
        for statement in store_mod._MIGRATIONS[v].split(";"):
            if statement.strip():
                con.execute(statement)
    con.execute(f"PRAGMA user_version = {version}")
    return con


def test_a_version_8_history_keeps_every_summary_bit_for_bit_in_the_json_column(tmp_path):
    # The columns as version 8 had them, filled with awkward values: NULL, ±inf, a subnormal, the
    # shortest and the longest decimal forms (an exact copy needs every digit of each).
    path = tmp_path / "v8.sqlite"
    con = _history(path, 8)
    legacy = [row[1] for row in con.execute("PRAGMA table_info(records)")][16:]
    legacy.remove("dissimilarity")  # version 7's, between versions 6 and 8
    assert legacy == list(store_mod._LEGACY_COLUMNS) and len(legacy) == 35
    rng = np.random.default_rng(8)
    special = [None, math.inf, -math.inf, 5e-324, 0.1, 1 / 3]
    rows = []
    for i in range(6):
        values = [special[(i + j) % len(special)] if j % 5 == 0 else float(rng.normal() * 10.0 ** rng.integers(-30, 30))
                  for j in range(len(legacy))]
        rows.append(values)
        con.execute("INSERT INTO runs (id, created, group_id, label, algorithm, hyper_json, config_json, status) "
                    "VALUES (?, '2026-01-01', 'g', 'gd', 'gd', '{}', '{}', 'done')", (i + 1,))
        con.execute(f"INSERT INTO records (run_id, iteration, algorithm, objective, suboptimality, test_error, "
                    f"train_error, grad_norm, rounds, vectors_up, vectors_down, grad_evals, passes, seconds, status, "
                    f"message, dissimilarity, {', '.join(legacy)}) VALUES (?, 3, 'gd', 0.5, 0.1, 0.2, 0.2, 1.0, 0, 0, "
                    f"0, 0, 0.0, 0.0, 'done', '', NULL{', ?' * len(legacy)})", (i + 1, *values))
    con.commit()
    con.close()
    with RunStore(path) as s:
        assert s._query("PRAGMA user_version")[0][0] == store_mod.SCHEMA_VERSION
        for i, values in enumerate(rows):
            (rec,) = s.records(i + 1)
            cols = s.columns(i + 1)
            for name, v in zip(legacy, values):
                want = math.nan if v is None else v
                for got in (getattr(rec, name), float(cols[name][0])):
                    assert np.float64(got).tobytes() == np.float64(want).tobytes() or \
                        (math.isnan(got) and math.isnan(want)), (name, got, want)
            assert rec.objective == 0.5 and math.isnan(rec.dissimilarity)
        # The table has no column of a summary any more: a new metric needs none.
        assert not set(legacy) & {row[1] for row in s._query("PRAGMA table_info(records)")}
