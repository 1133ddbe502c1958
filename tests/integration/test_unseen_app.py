"""Unseen nodes (issue 23, point 2) as a user meets them: the Data page's option changed three times in
a row (link, caption, counts), the Run page's sentence and unseen band, and the command line."""

import json
import subprocess
import sys
import time

import numpy as np
import pytest

from apptest import long_sessions, open_page  # noqa: F401 - a fixture
from conftest import DATA
from fedviz.data.build import DataSpec, build
from fedviz.data.unseen import unseen_sentence
from fedviz.plots.pernode import unseen_caption
from fedviz.runner.config import RunConfig, from_query

PRESET = DataSpec(source="preset:google-plus-small?nodes=40")


def _link(at) -> RunConfig:
    config, problems = from_query(dict(at.query_params))
    assert not problems, problems
    return config


def test_the_data_page_option_keeps_three_changes_in_a_row(long_sessions):  # noqa: F811
    at = open_page("pages/data.py", RunConfig(data=PRESET), timeout=180)
    for share, held in ((0.2, 8), (0.1, 4), (0.25, 10)):
        at.number_input(key="data-unseen").set_value(share).run()
        assert not at.exception, at.exception
        assert at.number_input(key="data-unseen").value == share
        assert _link(at).data.unseen == share and at.session_state["config"].data.unseen == share
        ds = build(_link(at).data)
        assert ds.unseen.n_nodes == held  # ⌊share · 40 + ½⌋
        assert any(c.value == unseen_sentence(ds) + " The figures on this page are the seen nodes'."
                   for c in at.caption), [c.value for c in at.caption]
        nodes = next(m for m in at.metric if m.label == "nodes K")
        assert nodes.value == f"{40 - held} + {held} unseen"
        table = at.table[0].value
        assert list(table.columns) == ["predictor", "test error, seen nodes", "test error, unseen nodes"]
    at.number_input(key="data-unseen").set_value(0.0).run()
    assert "unseen" not in dict(at.query_params) and _link(at).data.unseen == 0.0
    assert next(m for m in at.metric if m.label == "nodes K").value == "40"


def _wait(at, key="run", timeout=120.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if at.session_state[key].done:
            at.run()
            return at.session_state[key].snapshot()
        time.sleep(0.2)
    pytest.fail("the run did not finish in time")


def test_the_run_page_says_and_draws_the_unseen_nodes(long_sessions):  # noqa: F811
    data = DataSpec(source="preset:identical-nodes", unseen=0.2)
    at = open_page("pages/run.py", RunConfig(data=data, algorithms=(("gd", ()),), iterations=3))
    next(b for b in at.button if b.label.endswith(" Run")).click().run()
    snap = _wait(at)
    assert not at.exception and snap.statuses == {"GD": "done"}
    assert (snap.summary["nodes"], snap.summary["unseen_nodes"]) == (8, 2)
    ds = build(data)
    want = unseen_caption({"GD": snap.last["GD"]}, K=2, seen=8, test_rows=int(ds.unseen.y_test.size))
    assert want.startswith("2 of the 10 nodes are unseen")
    assert any(c.value == want for c in at.caption), [c.value for c in at.caption]
    at.radio(key="run-node-metric").set_value("unseen_error").run()
    assert not at.exception
    specs = [c.proto.spec for c in at.get("plotly_chart")]
    assert any("Test error per unseen node" in s for s in specs)
    assert any("Unseen nodes by test error at the last iteration" in s for s in specs)
    assert not [s for s in at.selectbox if s.label == "Node (the worst first)"]  # the picker is the seen nodes'


def test_the_command_line_holds_out_and_scores_the_unseen_nodes():
    def fedviz(*args):
        r = subprocess.run([sys.executable, "-m", "fedviz", *map(str, args)], capture_output=True, text=True,
                           timeout=300)
        return r
    r = fedviz("inspect", DATA / "heart_scale", "--nodes", "10", "--unseen", "0.2", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    # 10 balanced nodes of 27 rows, ⌊0.25 · 27⌋ = 6 test rows each; 2 of them held out.
    assert (out["nodes"], out["n"], out["n_test"]) == (8, 8 * 21, 8 * 6)
    assert (out["unseen_nodes"], out["unseen_n"], out["unseen_n_test"]) == (2, 2 * 21, 2 * 6)
    r = fedviz("run", DATA / "heart_scale", "--nodes", "10", "--unseen", "0.2", "--algorithms", "gd",
               "--iterations", "0", "--json")
    assert r.returncode == 0, r.stderr
    (rec,) = [json.loads(line) for line in r.stdout.splitlines()]
    # At w = 0 every margin is 0 and predicts -1: the error is the share of +1 among the unseen test rows.
    y = build(DataSpec(str(DATA / "heart_scale"), nodes=10, unseen=0.2)).unseen.y_test
    assert rec["nodes_unseen"] == 2 and rec["unseen_test_error"] == pytest.approx(np.mean(y > 0), abs=1e-15)
    r = fedviz("inspect", DATA / "heart_scale", "--unseen", "1")
    assert r.returncode != 0 and "unseen=1.0 is out of range: allowed number in [0, 1)" in r.stderr


def test_a_share_that_leaves_no_node_is_refused_on_the_page_and_a_link_out_of_range_is_said(
        long_sessions):  # noqa: F811
    from conftest import plain

    at = open_page("pages/data.py", RunConfig(data=DataSpec(source="preset:identical-nodes?nodes=2")), timeout=180)
    at.number_input(key="data-unseen").set_value(0.8).run()  # ⌊0.8 · 2 + ½⌋ = 2 of 2 nodes
    assert not at.exception, at.exception
    errors = [plain(e.value) for e in at.error]
    assert any("unseen=0.8 is out of range: allowed a share in [0, 0.75) with 2 nodes" in e for e in errors), errors
    assert at.session_state["config"].data.unseen == 0.0  # the session keeps its data set
    assert any(c.value == "The current data set is unchanged." for c in at.caption)
    config, problems = from_query({"unseen": "1"})  # the input's range, the link's and the command line's: [0, 1)
    assert config.data.unseen == 0.0 and problems == ["unseen: parameter unseen=1.0 is out of range: allowed number "
                                                      "in [0, 1)"]
