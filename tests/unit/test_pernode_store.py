"""The per-node summaries (issue 23) in the run history: stored, exported, imported, and read as NaN
from a history or an export written before them."""

import csv
import io
import json
import math
import sqlite3

import numpy as np

from fedviz.runner import store as store_mod
from fedviz.runner.loop import IterationRecord
from fedviz.runner.pernode import FIELDS as PERNODE_FIELDS
from fedviz.runner.store import RunStore


def _rec(i):
    extra = {f: (j + 1) / 7 + i for j, f in enumerate(PERNODE_FIELDS)}
    extra["node_error_p10"] = math.nan
    return IterationRecord(algorithm="gd", iteration=i, objective=1.0, suboptimality=0.5, test_error=0.25,
                           train_error=0.125, grad_norm=1.0, rounds=i, vectors_up=i, vectors_down=i,
                           grad_evals=i, passes=float(i), seconds=0.0, status="running", **extra)


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


def test_a_version_4_history_gains_the_columns_and_reads_nan(tmp_path):
    path = tmp_path / "v4.sqlite"
    con = sqlite3.connect(path)
    for v in (1, 2, 3, 4):
        for statement in store_mod._MIGRATIONS[v].split(";"):
            if statement.strip():
                con.execute(statement)
    con.execute("PRAGMA user_version = 4")
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
