"""The FedProx presets' swap of names (issue 22, point 6) in histories and exports written before it: a
stored ``preset:fedprox-synthetic`` was the binarised draw and reads back as ``fedprox-synthetic-binary``;
a stored ``preset:fedprox-synthetic-10`` was the ten classes and reads back under the plain name; other
names that merely start alike are untouched.  The oracle is the data each stored source builds now:
the binarised rows are ±1, the ten-class rows codes 0–9, as they were when stored."""

from __future__ import annotations

import json
import math
import sqlite3

import numpy as np

import fedviz.runner.history.store as store_mod
from fedviz.data.build import DataSpec, build
from fedviz.experiments.builtin import BUILTINS
from fedviz.runner.history.store import RunStore

OLD_BINARY = "preset:fedprox-synthetic?nodes=4&alpha=0.5"
OLD_TEN = "preset:fedprox-synthetic-10?nodes=4"


def _version_5(path):
    con = sqlite3.connect(path)
    for v in range(1, 6):
        for statement in store_mod._MIGRATIONS[v].split(";"):
            if statement.strip():
                con.execute(statement)
    con.execute("PRAGMA user_version = 5")
    for rid, source in ((1, OLD_BINARY), (2, OLD_TEN), (3, "preset:fedprox-synthetic"), (4, "preset:iid")):
        con.execute("INSERT INTO runs (id, created, group_id, label, algorithm, hyper_json, config_json, status) "
                    "VALUES (?, '2026-01-01', 'g', 'gd', 'gd', '{}', ?, 'done')",
                    (rid, json.dumps({"data": {"source": source}, "loss": "logistic"})))
    con.execute("INSERT INTO records (run_id, iteration, algorithm, objective, suboptimality, test_error, "
                "train_error, grad_norm, rounds, vectors_up, vectors_down, grad_evals, passes, seconds, status, "
                "message) VALUES (1, 0, 'gd', 0.5, 0.1, 0.2, 0.2, 1.0, 0, 0, 0, 0, 0.0, 0.0, 'done', '')")
    old_builtin = BUILTINS["fedprox-figure2"].experiment("small").as_json()
    old_builtin["data"]["source"] = "preset:fedprox-synthetic-10"
    del old_builtin["dissimilarity"]
    con.execute("INSERT INTO experiments (name, created, updated, group_id, spec_json, status) "
                "VALUES ('fedprox-figure2-small', '2026-01-01', '2026-01-01', 'g', ?, 'done')",
                (json.dumps(old_builtin),))
    con.commit()
    con.close()


def test_a_version_5_history_reads_its_fedprox_runs_as_what_they_ran(tmp_path):
    path = tmp_path / "v5.sqlite"
    _version_5(path)
    with RunStore(path) as s:
        sources = {r: s.get_run(r).config["data"]["source"] for r in (1, 2, 3, 4)}
        assert sources == {1: "preset:fedprox-synthetic-binary?nodes=4&alpha=0.5",
                           2: "preset:fedprox-synthetic?nodes=4", 3: "preset:fedprox-synthetic-binary", 4: "preset:iid"}
        # what each renamed source builds now is what it built when stored
        assert set(np.unique(build(DataSpec(sources[1])).y)) == {-1.0, 1.0}
        assert build(DataSpec(sources[2])).n_classes == 10
        (rec,) = s.records(1)
        assert rec.objective == 0.5 and math.isnan(rec.dissimilarity)
        # the built-in stored under the ten-class name is the built-in's grid again (its verdict applies)
        info = s.get_experiment("fedprox-figure2-small")
        from fedviz.experiments.spec import content_hash

        assert content_hash(info.spec) == BUILTINS["fedprox-figure2"].experiment("small").content_hash
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == store_mod.SCHEMA_VERSION


def test_an_export_written_before_the_swap_imports_under_the_new_names(tmp_path):
    with RunStore(tmp_path / "a.sqlite") as s:
        rid = s.create_run(label="gd", algorithm="gd", group_id="g", config={"data": {"source": OLD_BINARY}})
        from fedviz.runner.loop import IterationRecord

        s.append_records(rid, [IterationRecord("gd", 0, 1.0, 0.5, 0.2, 0.2, 1.0, 0, 0, 0, 0, 0.0, 0.0, "done", "")])
        new_export = s.export_json([rid])
        old = json.loads(new_export)
        del old["runs"][0]["records"]["dissimilarity"]  # what an export before schema 7 looks like
        (before,) = s.import_json(json.dumps(old))
        (after,) = s.import_json(new_export)
        assert s.get_run(before).config["data"]["source"] == "preset:fedprox-synthetic-binary?nodes=4&alpha=0.5"
        assert s.get_run(after).config["data"]["source"] == OLD_BINARY  # written now: the name means now
        assert math.isnan(s.records(before)[0].dissimilarity)
