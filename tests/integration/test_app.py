"""Every page through Streamlit's AppTest: widgets render, a tiny run completes, bad input shows
a message (never a traceback)."""

import time

import pytest
from streamlit.testing.v1 import AppTest

from fedviz.data.build import DataSpec
from fedviz.runner.config import RunConfig

from apptest import open_page
from conftest import DATA, ROOT, plain

APP = str(ROOT / "app.py")
TINY = DataSpec(source="preset:identical-nodes")


@pytest.fixture(autouse=True)
def _no_heartbeat_timeout(monkeypatch):
    """AppTest has no browser to heartbeat while a test waits, and a first run that compiles
    every kernel on a loaded machine can outlast the 30 s timeout; the reaper has its own
    tests (test_manager.py), so here it must not stop a run the test is waiting for."""
    from fedviz.runner import get_manager

    monkeypatch.setattr(get_manager(), "session_timeout", 24 * 3600.0)


def _app(config: RunConfig | None = None, page: str | None = None) -> AppTest:
    return open_page(page, config)


def _wait_for_run(at: AppTest, key: str = "run", timeout: float = 120.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        handle = at.session_state[key]
        if handle.done:
            at.run()
            return handle.snapshot()
        time.sleep(0.2)
    pytest.fail("the run did not finish in time")


def test_home_explains_and_offers_the_one_click_experiment():
    at = _app()
    assert "federated optimization" in at.markdown[0].value
    assert "Reproduce the paper's experiment" in at.button[0].label


def test_home_button_runs_fsvrg_gd_and_cocoa_on_google_plus_small():
    at = _app()
    at.button[0].click().run()
    assert not at.exception
    snap = _wait_for_run(at)
    assert set(snap.statuses) == {"FSVRG", "GD", "CoCoA+"}
    assert all(s == "done" for s in snap.statuses.values()), snap.messages
    assert all(len(c["iteration"]) == 31 for c in snap.columns.values())
    assert not at.exception and not at.error


def test_data_page_shows_statistics_of_a_preset():
    at = _app(RunConfig(data=TINY, algorithms=(("gd", ()),), iterations=2), "pages/data.py")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["nodes K"] == "10" and metrics["examples n"] == "3,000"
    assert not at.error


def test_data_page_generator_knobs_are_bounded_by_the_generators_range():
    """A knob's input takes its bounds, help and label from the generator's Param: label noise is at most 0.5,
    so the page never holds 2.0 (a browser refuses it at the input), and the help says the range."""
    at = _app(page="pages/data.py")
    knob = at.number_input(key="data-google-plus-small-knob-label_noise")
    assert (knob.min, knob.max) == (0.0, 0.5) and knob.label == "label noise"
    assert "Allowed: number in [0, 0.5]." in knob.help
    knob.set_value(2.0).run()
    assert not at.exception and not at.error
    assert at.number_input(key="data-google-plus-small-knob-label_noise").value <= 0.5
    assert "label_noise=2" not in at.query_params.get("data", "")


def test_data_page_bad_knob_is_a_message():
    """A knob typed as text (α of the Dirichlet split spans orders of magnitude) is checked by its Param: a value out
    of range is a message naming it, and the session keeps its data set."""
    at = _app(page="pages/data.py")
    at.selectbox(key="data-partition").set_value("dirichlet").run()
    before = at.session_state["config"]
    at.text_input(key="part-dirichlet-alpha").set_value("-1").run()
    assert not at.exception
    assert any("dirichlet.alpha" in plain(e.value) and "number > 0" in plain(e.value) for e in at.error), [plain(e.value) for e in at.error]
    assert at.session_state["config"] == before


def test_data_page_upload_shows_statistics():
    at = _app(page="pages/data.py")
    at.radio[0].set_value("Upload a LIBSVM file").run()
    at.file_uploader(key="upload-train").set_value(
        ("heart_scale", (DATA / "heart_scale").read_bytes(), "application/octet-stream")).run()
    assert not at.exception and not at.error
    metrics = {m.label: m.value for m in at.metric}
    # 270 rows, 25% of each node's rows held out for testing, on 13 nodes of about 20 rows.
    assert metrics["features d"] == "13" and metrics["nodes K"] == "13"
    assert int(metrics["examples n"].replace(",", "")) + int(metrics["test examples"].replace(",", "")) == 270
    assert any("random 25% of each node's rows, stratified by label" in c.value for c in at.caption)


def test_data_page_says_the_label_mapping_and_draws_each_nodes_share_of_plus_one():
    """dna.scale's class 2 against the rest: the caption says so (fedviz.data.labels' sentence) and the
    label heatmap's +1 row is the nodes' shares of +1, computed here node by node on the same data set."""
    import base64
    import json

    import numpy as np
    from fedviz.data.build import build

    at = _app(page="pages/data.py")
    at.radio[0].set_value("Upload a LIBSVM file").run()
    at.file_uploader(key="upload-train").set_value(
        ("dna.scale", (DATA / "dna.scale").read_bytes(), "application/octet-stream")).run()
    at.text_input(key="upload-positive").set_value("2").run()
    assert not at.exception and not at.error
    assert any(c.value.endswith("label 2 became +1, labels 1, 3 became -1") for c in at.caption)
    heat = next(t for c in at.get("plotly_chart") for t in json.loads(c.proto.spec)["data"]
                if t["type"] == "heatmap" and t["y"] == ["−1", "+1"])
    z = heat["z"]
    if isinstance(z, dict):  # plotly's typed-array encoding
        z = np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"]).reshape(2, -1)
    ds = build(DataSpec(source=str(DATA / "dna.scale"), positive=2))  # the page's defaults: 100 iid nodes, seed 0
    shares = [np.mean(ds.y[ds.node_slice(k)] == 1) for k in heat["meta"]]
    np.testing.assert_allclose(np.asarray(z, dtype=float)[1], shares, rtol=1e-12)


def test_a_file_without_its_final_line_end_is_flagged_on_the_data_page():
    """A real copy of a9a cut short (here: after its 1,000th row's fourth feature) loads, with a warning that
    names its last line and compares its length with the file's typical row."""
    lines = (DATA / "a9a").read_bytes().split(b"\n")
    cut = b"\n".join(lines[:999]) + b"\n" + b" ".join(lines[999].split()[:5])
    at = _app(page="pages/data.py")
    at.radio[0].set_value("Upload a LIBSVM file").run()
    at.file_uploader(key="upload-train").set_value(("a9a-cut", cut, "application/octet-stream")).run()
    assert not at.exception and not at.error
    warnings = " ".join(w.value for w in at.warning)
    assert "line 1,000 has no line end" in warnings and "4 nonzero features" in warnings, warnings


@pytest.mark.parametrize("content, expected", [
    (b"", "empty"),
    (b"a,b,c\n1,2,3\n", "line 1"),
    (b"+1 1:0.5 2:nan\n", "line 1"),
    (b"\x00\x01\x02binary", "line 1"),
])
def test_data_page_bad_upload_is_a_message_naming_the_line(content, expected):
    at = _app(page="pages/data.py")
    at.radio[0].set_value("Upload a LIBSVM file").run()
    at.file_uploader(key="upload-train").set_value(("bad.txt", content, "text/plain")).run()
    assert not at.exception
    assert any(expected in plain(e.value) for e in at.error), [plain(e.value) for e in at.error]


def test_run_page_tiny_run_to_completion():
    config = RunConfig(data=TINY, algorithms=(("gd", ()), ("fsvrg", ())), iterations=3)
    at = _app(config, "pages/run.py")
    run = next(b for b in at.button if b.label.endswith(" Run"))
    run.click().run()
    assert not at.exception
    snap = _wait_for_run(at)
    assert snap.statuses == {"GD": "done", "FSVRG": "done"}
    assert not at.error


def test_run_page_refuses_a_bad_hyperparameter_before_running():
    config = RunConfig(data=TINY, algorithms=(("gd", ()),), iterations=3)
    at = _app(config, "pages/run.py")
    at.expander[0]  # the GD expander exists
    at.text_input(key="hp-gd-stepsize").set_value("-1").run()
    assert not at.exception
    assert any("gd.stepsize" in plain(e.value) and "> 0" in plain(e.value) for e in at.error)
    run = next(b for b in at.button if b.label.endswith(" Run"))
    assert run.disabled


def test_run_page_says_beside_a_kept_default_why_it_is_kept():
    """Issue 30: where a default is kept on purpose (``Algorithm.kept_defaults``, walked from the registry),
    the sentence stands in the algorithm's expander, beside the parameter; GD, which keeps none, shows none."""
    from fedviz.algorithms import ALGORITHMS

    kept = [name for name, cls in ALGORITHMS.items() if cls.kept_defaults]
    assert kept
    config = RunConfig(data=TINY, algorithms=tuple((name, ()) for name in ("gd", *kept)), iterations=3)
    at = _app(config, "pages/run.py")
    assert not at.exception
    shown = [plain(c.value) for c in at.caption]
    for name in kept:
        for why in ALGORITHMS[name].kept_defaults.values():
            assert shown.count(why) == 1, (name, why)
    gd = next(e for e in at.expander if e.label.startswith(ALGORITHMS["gd"].title + " —"))
    assert not any("kept on purpose" in plain(c.value) for c in gd.caption)


def test_a_diverging_run_ends_as_diverged_with_its_curves():
    # GD with fixed steps: the default's safeguard drops a rising step and halves it, so it cannot diverge
    config = RunConfig(data=TINY, algorithms=(("gd", (("stepsize", 1e6), ("steps", "fixed"))),), iterations=20)
    at = _app(config, "pages/run.py")
    next(b for b in at.button if b.label.endswith(" Run")).click().run()
    snap = _wait_for_run(at)
    assert snap.statuses["GD"] == "diverged" and "lower stepsize" in snap.messages["GD"]
    assert len(snap.columns["GD"]["iteration"]) >= 2
    assert not at.exception


def test_compare_page_lists_history_and_exports():
    at = _app(page="pages/compare.py")
    assert not at.exception
    assert at.tabs[0].label == "History"


def test_bad_query_string_values_are_reported_and_ignored():
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["iterations"] = "-5"
    at.query_params["gd.stepsize"] = "abc"
    at.query_params["algorithms"] = "gd"
    at.run()
    at.switch_page("pages/run.py")
    at.run()
    assert not at.exception
    texts = " ".join(w.value for w in at.warning)
    assert "iterations" in texts and "gd.stepsize" in texts
    assert at.session_state["config"].iterations == 30


def test_stepsize_sweep_keeps_the_best_variant():
    config = RunConfig(data=TINY, algorithms=(("gd", ()),), iterations=5)
    at = _app(config, "pages/run.py")
    at.checkbox(key="run-sweep").check().run()
    next(b for b in at.button if b.label.endswith(" Run")).click().run()
    snap = _wait_for_run(at)
    assert len(snap.statuses) == 5 and all(label.startswith("GD ×") for label in snap.statuses)
    final = {label: cols["suboptimality"][-1] for label, cols in snap.columns.items()}
    # The table marks exactly one kept variant, the one with the lowest final f − f*.
    table = at.table[0].value
    kept = [v for v, k in zip(table["variant"], table["kept"]) if k == "✓"]
    assert kept == [min(final, key=final.get)]


def test_compare_what_if_runs_two_partitionings_side_by_side():
    config = RunConfig(data=DataSpec(source="preset:google-plus-small?nodes=20"),
                       algorithms=(("fsvrg", ()),), iterations=3)
    at = _app(config, "pages/compare.py")
    next(b for b in at.button if b.label.endswith("Run both")).click().run()
    a = _wait_for_run(at, "whatif-run-a")
    b = _wait_for_run(at, "whatif-run-b")
    assert a.statuses == {"FSVRG": "done"} and b.statuses == {"FSVRG": "done"}
    # Same rows, same f*: only the split differs, so the curves start at the same point.
    assert a.columns["FSVRG"]["objective"][0] == b.columns["FSVRG"]["objective"][0]
    assert a.columns["FSVRG"]["objective"][-1] != b.columns["FSVRG"]["objective"][-1]
    assert not at.exception


def test_tune_stepsizes_relabels_the_curve_and_keeps_the_choice_in_the_history():
    config = RunConfig(data=TINY, algorithms=(("gd", ()), ("one-shot", ())), iterations=5)
    at = _app(config, "pages/run.py")
    at.checkbox(key="run-tune").check().run()
    assert at.query_params["tune"] == "1"
    next(b for b in at.button if b.label.endswith(" Run")).click().run()
    snap = _wait_for_run(at)
    (gd,) = [label for label in snap.labels if label.startswith("GD")]
    assert "tuned" in gd and "stepsize" in gd, snap.labels
    assert "One-shot" in " ".join(snap.labels) and snap.notes[gd].startswith("tuned stepsize = ")
    assert "pilot runs" in snap.notes[gd] and "seconds are apart from the run's" in snap.notes[gd]
    assert "against the run's 5 rounds" in snap.notes[gd]  # GD: one round per iteration
    # The value in the label is the one the run used, and the history says so too.
    from fedviz.runner import get_manager

    run = get_manager().store.get_run(snap.store_ids[gd])
    assert run.label == gd and f"{run.hyper['stepsize']:.3g}" in gd
    assert run.config["tuning"] == snap.notes[gd]
    assert any(gd in m.value for m in at.markdown)


def test_after_stop_the_progress_bar_says_where_the_run_stopped():
    config = RunConfig(data=DataSpec(source="preset:google-plus-small?nodes=40"), algorithms=(("gd", ()),),
                       iterations=10_000)
    at = _app(config, "pages/run.py")
    next(b for b in at.button if b.label.endswith(" Run")).click().run()
    handle = at.session_state["run"]
    deadline = time.time() + 60
    while time.time() < deadline and (handle.snapshot().last.get("GD") is None
                                      or handle.snapshot().last["GD"].iteration < 3):
        time.sleep(0.1)
    next(b for b in at.button if b.label.endswith(" Stop")).click().run()
    snap = _wait_for_run(at)
    done = snap.last["GD"].iteration
    assert snap.status == "stopped" and 3 <= done < 10_000
    (bar,) = [p for p in at.get("progress")]
    assert f"stopped after {done:,} of 10,000 iterations" in bar.proto.text
    assert bar.proto.value < 100


def test_run_says_where_runs_execute_when_a_cluster_is_configured(monkeypatch):
    from fedviz.runner import get_manager

    config = RunConfig(data=TINY, algorithms=(("gd", ()),), iterations=2)
    at = _app(config, "pages/run.py")
    assert not any("Dask cluster" in c.value for c in at.caption)
    monkeypatch.setattr(get_manager(), "cluster_note", "runs execute on the Dask cluster (tcp://h:8786, 4 workers)")
    at.run()
    assert any("Runs execute on the Dask cluster (tcp://h:8786, 4 workers)." in c.value for c in at.caption)


def test_a_file_of_three_classes_shows_them_on_data_and_runs_softmax_on_run():
    """Issue 22's acceptance: dna.scale uploaded on Data shows its 3 classes; Run offers only the algorithms
    that take softmax, says which it left out and why, and draws FSVRG, GD and FedAvg to the end, with a
    finite f − f* and the argmax test error (at w = 0 every margin ties: the first class is predicted)."""
    import math

    import numpy as np
    from fedviz.algorithms import ALGORITHMS
    from fedviz.data.build import build

    at = _app(page="pages/data.py")
    at.radio[0].set_value("Upload a LIBSVM file").run()
    at.file_uploader(key="upload-train").set_value(
        ("dna.scale", (DATA / "dna.scale").read_bytes(), "application/octet-stream")).run()
    assert not at.exception and not at.error, [plain(e.value) for e in at.error]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["classes"] == "3"
    assert any("3 classes: labels 1, 2, 3 became classes 0, 1, 2" in c.value for c in at.caption)

    at.switch_page("pages/run.py")
    at.run()
    assert not at.exception and not at.error, [plain(e.value) for e in at.error]
    picker = at.multiselect(key="run-algorithms-softmax")
    offered = set(picker.options)
    for name in ("cocoa-plus", "cocoa", "dual-method", "primal-method"):
        cls = ALGORITHMS[name]
        assert name not in offered
        assert any(cls.title in c.value and cls.multiclass_reason in c.value for c in at.caption)
    assert any(ALGORITHMS["dane"].softmax_refusal({"solver": "svrg"})[1:] in c.value for c in at.caption)
    assert any("Loss: softmax" in c.value for c in at.caption)
    # The paper's line-up is named with why it cannot be run here (CoCoA+ is among those left out).
    assert any("line-up is FSVRG, GD and CoCoA+" in c.value and "CoCoA+ takes no softmax" in c.value
               for c in at.caption)
    picker.set_value(["fsvrg", "gd", "fedavg"]).run()
    at.number_input(key="run-iterations").set_value(3).run()
    assert at.session_state["config"].loss == "softmax"
    next(b for b in at.button if b.label.endswith(" Run")).click().run()
    assert not at.exception
    snap = _wait_for_run(at)
    assert snap.statuses == {"FSVRG": "done", "GD": "done", "FedAvg": "done"}, snap.messages
    ds = build(at.session_state["config"].data)
    for label, cols in snap.columns.items():
        assert len(cols["iteration"]) == 4
        assert all(math.isfinite(v) and v >= 0 for v in cols["suboptimality"])
        assert cols["suboptimality"][-1] < cols["suboptimality"][0]
        assert cols["test_error"][0] == np.mean(ds.y_test != 0)
    assert not at.exception and not at.error
