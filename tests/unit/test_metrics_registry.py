"""The registry of per-node metrics (issue 29, point 4), walked: every registered metric flows from the
evaluator (its summaries against numpy on its own per-node vector) to the history (bit for bit), both
exports, the cluster's stream, the Run page's choice and band figure and ``fedviz run``'s line; so next
month's metric is covered by these tests the day it is registered.  And the claim itself: a metric added
as one entry, in a fresh process, is recorded, stored, exported and drawn with no other change (no
schema change either)."""

import csv
import io
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from fedviz.data.build import DataSpec, build
from fedviz.problems.objective import Problem
from fedviz.problems import metrics
from fedviz.runner import iterate
from fedviz.runner.cluster import decode_calls, encode_calls, node_stride
from fedviz.runner.history.store import SCHEMA_VERSION, RunStore

ROOT = Path(__file__).resolve().parents[2]
PRESET = "preset:google-plus-small?nodes=40&words_per_example=20"


@pytest.fixture(scope="module")
def run():
    """Ditto on a data set with unseen nodes and a target: every scope of the registry is measured."""
    ds = build(DataSpec(PRESET, seed=3, unseen=0.25))
    p = Problem(ds)
    target = np.random.default_rng(0).normal(size=(ds.n_nodes, p.d)) / 10
    recs = list(iterate(p, "ditto", iterations=3, seed=1, personal_target=target))
    return p, recs


def _oracle(metric, v: np.ndarray) -> dict:
    """The summaries of a per-node vector from their definitions (numpy's percentile, a sort)."""
    f = v[np.isfinite(v)]
    worst = np.sort(f)[::-1] if metric.direction == "lower" else np.sort(f)
    m = max(1, math.ceil(f.size / 10))
    return {"mean": f.mean(), "std": f.std(), "p10": np.percentile(f, 10), "p50": np.percentile(f, 50),
            "p90": np.percentile(f, 90), "worst10": worst[:m].mean(), "min": f.min(), "max": f.max(),
            "untested": np.count_nonzero(~np.isfinite(v)), "rms": np.sqrt(np.mean(v.astype(float) ** 2))}


def _same(x: float, y: float) -> bool:
    return np.float64(x).tobytes() == np.float64(y).tobytes() or (math.isnan(x) and math.isnan(y))


@pytest.mark.parametrize("metric", metrics.METRICS, ids=lambda m: m.name)
def test_the_evaluator_records_every_summary_of_its_vector(run, metric):
    p, recs = run
    K = {"unseen": p.data.unseen.n_nodes}.get(metric.scope, p.data.n_nodes)
    for rec in recs:
        v = rec.nodes[metric.name].astype(np.float64)        # the record's float32 vector
        assert v.shape == (K,)
        want = _oracle(metric, v)
        for s in metric.summaries:
            got = getattr(rec, metric.key(s))
            if s in ("pooled",):
                lo, hi = np.nanmin(v), np.nanmax(v)          # a mean over rows lies among the nodes' values
                assert lo - 1e-6 <= got <= hi + 1e-6, (metric.name, got)
            elif s == "nodes":
                assert got == K
            else:                                            # from float32 values: their rounding, 2⁻²⁴
                assert got == pytest.approx(want[s], rel=1e-6, abs=1e-7), (metric.name, s, rec.iteration)
        if metric.pooled_key in metrics.CORE_KEYS:           # the pooled value is a field of the record
            assert math.isfinite(getattr(rec, metric.pooled_key))


def test_every_key_flows_through_the_history_and_both_exports_bit_for_bit(run, tmp_path):
    _, recs = run
    with RunStore(tmp_path / "h.sqlite") as s:
        rid = s.create_run(label="ditto", algorithm="ditto")
        s.append_records(rid, recs)
        back, cols = s.records(rid), s.columns(rid)
        (new,) = s.import_json(s.export_json([rid]))
        imported = s.records(new)
        rows = list(csv.DictReader(io.StringIO(s.export_csv([rid]))))
        doc = json.loads(s.export_json([rid]))["runs"][0]["records"]
    for key in metrics.KEYS:
        for i, rec in enumerate(recs):
            want = getattr(rec, key)
            for got in (getattr(back[i], key), float(cols[key][i]), getattr(imported[i], key), float(rows[i][key])):
                assert _same(got, want), (key, i, got, want)
            assert doc[key][i] == (None if math.isnan(want) else want)


def test_every_key_and_vector_flows_through_the_clusters_stream(run):
    _, recs = run
    decoded = [rec for _, (_, rec) in decode_calls(encode_calls([("record", ("ditto", r)) for r in recs]))]
    for rec, back in zip(recs, decoded):
        for key in metrics.KEYS:
            assert _same(getattr(back, key), getattr(rec, key)), key
        assert set(back.nodes.values) == {m.name for m in metrics.METRICS}
        for name, v in rec.nodes.values.items():
            np.testing.assert_array_equal(back.nodes[name], v)    # float32, every bit


@pytest.mark.parametrize("metric", metrics.METRICS, ids=lambda m: m.name)
def test_every_metric_reaches_the_page_or_the_command_line(run, metric):
    from fedviz.plots.pernode import band_figure
    from fedviz.ui.pernode import metric_options

    _, recs = run
    cols = {k: np.array([getattr(r, k) for r in recs]) for k in ("iteration", *metrics.KEYS, "test_error",
                                                                 "objective")}
    assert metric.band or metric.headline, f"{metric.name}: neither drawn as a band nor printed by fedviz run"
    if metric.band:
        fig = band_figure({"D": cols}, metric=metric.name)
        (median,) = [t for t in fig.data if t.name == "D: median node (band 10th–90th)"]
        np.testing.assert_array_equal(median.y, cols[metric.key("p50")])
        assert fig.layout.title.text == metric.title
        if metric.choice and metric.scope in ("seen", "unseen"):
            assert metric.name in metric_options(untested=0, K=40, unseen=True)
    if metric.headline:
        text = metrics.format_value(metric, getattr(recs[-1], metric.key(metric.headline)))
        assert "nan" not in text and text.strip()


def test_the_stream_keeps_the_vectors_of_a_bounded_set_of_iterations():
    assert node_stride(998, 100, budget=100_000) == 1                     # 0..998 and the last: 1,000 × 100
    assert node_stride(1000, 100, budget=100_000) == 2                    # 1,002 × 100 do not fit
    s = node_stride(10_000, 500, budget=100_000)
    assert (10_000 // s + 2) * 500 <= 100_000 < (10_000 // (s // 2) + 2) * 500   # the least power of two that fits
    assert node_stride(5, 10 ** 6, budget=100) == 8                        # too many nodes: the first and the last


def test_the_worker_sends_the_vectors_of_every_stride_th_record_and_of_the_last(run, monkeypatch):
    from fedviz.runner import cluster

    _, recs = run                                     # iterations 0..3, the last one 'done'
    K = recs[0].nodes["node_error"].size
    monkeypatch.setattr(cluster.stream, "NODE_STREAM_VALUES", 3 * K)   # (3 // 2 + 2) × K fit: every 2nd iteration
    recorder = cluster.Recorder(None, "a", None, iterations=3)
    for r in recs:
        recorder.record("ditto", r)
    sent = [args[1] for _, args in decode_calls(encode_calls(recorder.calls))]
    assert [r.nodes is not None for r in sent] == [True, False, True, True] and recs[-1].status == "done"
    np.testing.assert_array_equal(sent[-1].nodes["node_error"], recs[-1].nodes["node_error"])
    assert [r.objective for r in sent] == [r.objective for r in recs]   # the records themselves all go


def test_a_new_metric_is_one_entry(tmp_path):
    """In a fresh process, the registry's source with one more entry (the nodes' test accuracy, higher is
    better): the loop records it, the history of this schema stores it, the exports carry it, the page
    offers and draws it and fedviz run prints it."""
    source = (ROOT / "fedviz" / "problems" / "metrics.py").read_text()
    entry = textwrap.dedent('''
        Metric("node_accuracy", "seen", lambda s: Values(1.0 - s.test_errors()[0], 1.0 - s.test_errors()[1],
                                                         s.untested),
               ("pooled",) + STATS + ("untested",), title="Test accuracy per node", direction="higher",
               caption="The nodes' test accuracy.", choice="test accuracy", help="its test accuracy",
               headline="pooled", cli="accuracy"),
    ''')
    marker = "\n)\n\n#: The core fields of a record"
    assert source.count(marker) == 1
    script = textwrap.dedent(f'''
        import importlib.util, math, sys, json
        import numpy as np
        spec = importlib.util.spec_from_loader("fedviz.problems.metrics", loader=None)
        module = importlib.util.module_from_spec(spec)
        sys.modules["fedviz.problems.metrics"] = module
        exec(compile({source.replace(marker, entry + marker)!r}, "metrics.py", "exec"), module.__dict__)

        from fedviz.data.build import DataSpec, build
        from fedviz.plots.pernode import band_figure
        from fedviz.problems.objective import Problem
        from fedviz.problems import metrics
        from fedviz.runner import iterate
        from fedviz.runner.history.store import SCHEMA_VERSION, RunStore
        from fedviz.ui.pernode import metric_options

        p = Problem(build(DataSpec({PRESET!r}, seed=3)))
        recs = list(iterate(p, "gd", iterations=2))
        rec = recs[-1]
        acc = 1.0 - rec.nodes["node_error"].astype(float)
        assert np.array_equal(rec.nodes["node_accuracy"], (1.0 - rec.nodes["node_error"].astype(float)).astype(np.float32)) \\
            or np.allclose(rec.nodes["node_accuracy"], acc, rtol=1e-6)
        assert rec.node_accuracy_pooled == 1.0 - rec.test_error
        assert math.isclose(rec.node_accuracy_worst10, np.sort(acc)[:4].mean(), rel_tol=1e-6)
        assert math.isclose(rec.node_accuracy_p90, np.percentile(acc, 90), rel_tol=1e-6)
        with RunStore({str(tmp_path / "h.sqlite")!r}) as s:
            rid = s.create_run(label="gd", algorithm="gd")
            s.append_records(rid, recs)
            assert s.records(rid)[-1].node_accuracy_p50 == rec.node_accuracy_p50
            assert s.columns(rid)["node_accuracy_min"][-1] == rec.node_accuracy_min
            assert "node_accuracy_max" in s.export_csv([rid]).splitlines()[0].split(",")
            (new,) = s.import_json(s.export_json([rid]))
            assert s.records(new)[-1].node_accuracy_mean == rec.node_accuracy_mean
            cols = s.columns(rid)
        assert "node_accuracy" in metric_options(untested=0, K=40, unseen=False)
        fig = band_figure({{"GD": cols}}, metric="node_accuracy")
        assert fig.layout.title.text == "Test accuracy per node"
        print(SCHEMA_VERSION, metrics.format_value(metrics.get("node_accuracy"), rec.node_accuracy_pooled))
    ''')
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    version, _, text = out.stdout.strip().partition(" ")
    assert int(version) == SCHEMA_VERSION and text.startswith("err") and text.endswith("%")


def test_every_key_is_a_final_figure_of_an_experiment():
    """An experiment stored by hand (each cell's last record given every per-node key, drawn from a seeded
    generator): each key's median over seeds, as Results.summary and the axis figure read it, is numpy's."""
    from fedviz.experiments import Arm, Axis, Experiment
    from fedviz.experiments.results import load, per_node_title
    from fedviz.plots.experiments import axis_figure
    from fedviz.runner.loop import IterationRecord

    exp = Experiment("walk", DataSpec(source="preset:identical-nodes"), (Arm.of("gd"),), (Axis.of("nodes", (2, 5)),),
                     (0, 1, 2), iterations=1)
    store = RunStore(":memory:")
    info = store.open_experiment(exp.name, exp.as_json())
    truth = {}
    for s in range(2):
        for seed in (0, 1, 2):
            rng = np.random.default_rng([s, seed])
            values = {k: float(rng.uniform(0, 1)) for k in metrics.KEYS}
            truth[(s, seed)] = values
            recs = [IterationRecord("gd", t, 1.0, 0.5, 0.2, 0.2, 1.0, t, t, t, t, float(t), 0.0,
                                    "running" if t == 0 else "done", summaries=values if t else {}) for t in (0, 1)]
            store.save_cell(info.id, key=f"{s}-{seed}", setting=(s,), arm="GD", step=None, seed=seed, label="GD",
                            algorithm="gd", hyper={}, config={}, status="done", records=recs)
    store.finish_experiment(info.id, "done")
    results = load(store, exp.name)
    for key in metrics.KEYS:
        for s in range(2):
            want = np.median([truth[(s, seed)][key] for seed in (0, 1, 2)])
            assert results.summary("GD", (s,), key).median == want, key
        fig = axis_figure(results, key)
        assert per_node_title(key) in fig.layout.yaxis.title.text or per_node_title(key) in str(fig.layout.title.text)
    store.close()


@pytest.mark.parametrize("nodes", [{"iteration": 1, "values": {"no_such_metric": ""}},
                                   {"iteration": 1, "values": {"node_error": "not base64!"}},
                                   {"values": {}}, ["node_error"]])
def test_per_node_values_in_a_stream_that_are_not_a_records_are_refused(run, nodes):
    from fedviz.errors import FedvizError

    _, recs = run
    (call,) = json.loads(encode_calls([("record", ("ditto", recs[0]))]))
    call[1][1]["nodes"] = nodes
    with pytest.raises(FedvizError, match="per-node values that are not a record's"):
        decode_calls(json.dumps([call]))
