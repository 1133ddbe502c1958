"""The Run page's "Every node" section (issue 23, point 1) in AppTest: its sentence is the run's,
the node picker lists every node worst first with its sizes, and choosing a node draws its curve."""

import time

import numpy as np
import pytest

from fedviz.data.build import DataSpec
from fedviz.data.presets import make_preset
from fedviz.plots.pernode import caption
from fedviz.runner.config import RunConfig

from apptest import long_sessions, open_page  # noqa: F401 - a fixture

TINY = DataSpec(source="preset:identical-nodes")


def _wait(at, key="run", timeout=120.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if at.session_state[key].done:
            at.run()
            return at.session_state[key].snapshot()
        time.sleep(0.2)
    pytest.fail("the run did not finish in time")


def test_every_node_section_says_and_draws_the_runs_nodes(long_sessions):  # noqa: F811
    at = open_page("pages/run.py", RunConfig(data=TINY, algorithms=(("gd", ()), ("fsvrg", ())), iterations=4))
    next(b for b in at.button if b.label.endswith(" Run")).click().run()
    snap = _wait(at)
    assert not at.exception
    ds = make_preset("identical-nodes")
    want = caption({label: snap.last[label] for label in snap.labels}, K=ds.n_nodes, untested=0)
    assert want.startswith("GD at iteration 4: the worst 10% of nodes (1 of 10) average")
    assert any(c.value == want for c in at.caption), [c.value for c in at.caption]
    picker = next(s for s in at.selectbox if s.label == "Node (the worst first)")
    algo = next(s for s in at.selectbox if s.label == "Algorithm")
    final = snap.nodes[algo.value].latest.error.astype(float)
    tested = np.bincount(ds.test_nodes, minlength=ds.n_nodes)
    order = [int(k) for k in np.argsort(-final, kind="stable")]
    assert picker.options == [f"node {k}: n_k = {ds.node_sizes[k]:,}, {tested[k]:,} test rows, "
                              f"error {100 * final[k]:.1f}%" for k in order]
    k = order[3]
    picker.set_value(k).run()
    assert not at.exception
    # Five figures: f − f*, the test error, the band, the histogram, and the chosen node's curve.
    charts = at.get("plotly_chart")
    assert len(charts) == 5
    assert f"Node {k}: its test error against the pooled one" in charts[4].proto.spec


def test_a_separate_test_file_is_said_and_the_band_shows_the_own_losses(long_sessions):  # noqa: F811
    from conftest import DATA

    data = DataSpec(source=str(DATA / "dna.scale"), test=str(DATA / "dna.scale.t"), partition="iid", nodes=20,
                    positive=1.0)
    at = open_page("pages/run.py", RunConfig(data=data, algorithms=(("gd", ()),), iterations=3))
    next(b for b in at.button if b.label.endswith(" Run")).click().run()
    snap = _wait(at)
    assert not at.exception and snap.statuses == {"GD": "done"}
    from fedviz.data.build import build
    n_test = len(build(data).y_test)
    said = [c.value for c in at.caption if c.value.startswith("No node has test rows")]
    assert said == [f"No node has test rows (the test set's {n_test:,} rows belong to no node (a separate test "
                    f"file, or a preset split into other nodes)): the per-node test error is undefined; the band "
                    f"shows the own losses F_k. To score every node, tick 'Deal the test rows to the nodes' on Data "
                    f"(fedviz --deal-test): each test row goes to a node drawn by the nodes' shares of its class, "
                    f"and the pooled test error stays as it is."]
    charts = at.get("plotly_chart")
    assert len(charts) == 3 and "Own loss F_k(w) per node" in charts[2].proto.spec   # no histogram, no picker
    assert not [s for s in at.selectbox if s.label == "Node (the worst first)"]


def test_while_running_the_band_is_live_and_the_picker_waits_for_the_end(long_sessions):  # noqa: F811
    at = open_page("pages/run.py", RunConfig(data=TINY, algorithms=(("fsvrg", ()),), iterations=10_000))
    next(b for b in at.button if b.label.endswith(" Run")).click().run()
    handle = at.session_state["run"]
    try:
        deadline = time.time() + 60
        while not len(handle.snapshot().columns["FSVRG"]["iteration"]) and time.time() < deadline:
            time.sleep(0.1)
        at.run()
        assert not handle.done
        assert "The histogram of the nodes' errors and the node picker appear when the run ends." in [
            c.value for c in at.caption]
        assert not [s for s in at.selectbox if s.label == "Node (the worst first)"]
        assert len(at.get("plotly_chart")) == 3
    finally:
        handle.stop()
        handle.wait(30)
    at.run()
    assert [s for s in at.selectbox if s.label == "Node (the worst first)"]
