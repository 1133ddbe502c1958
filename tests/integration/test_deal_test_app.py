"""DataSpec.deal_test on the Data page (issue 23, point 1): the checkbox ticked, unticked and ticked
again keeps the link, the caption and the per-node majority in step; it is not offered where every
test row has a node."""

import dataclasses

import numpy as np

from apptest import open_page
from fedviz.data.baselines import node_majority_test_error
from fedviz.data.build import DataSpec, build, deal_sentence
from fedviz.data.split import DEAL_LABEL, DEAL_REMEDY
from fedviz.runner.config import RunConfig, from_query

SPEC = DataSpec("preset:google-plus-small?nodes=40", partition="dirichlet:alpha=0.3", nodes=20)


def _link(at) -> RunConfig:
    config, problems = from_query(dict(at.query_params))
    assert not problems, problems
    return config


def _node_majority_cell(at) -> str:
    table = at.table[0].value
    return table["test error"][list(table["predictor"]).index("per-node majority")]


def test_the_checkbox_toggled_three_times_keeps_link_caption_and_baseline_in_step():
    at = open_page("pages/data.py", RunConfig(data=SPEC), timeout=180)
    box = at.checkbox(key="data-deal-test")
    assert box.label == DEAL_LABEL and box.value is False
    off = build(SPEC)
    assert np.all(off.test_nodes < 0)
    notes = [c.value for c in at.caption]
    assert _node_majority_cell(at) == "n/a"
    assert any(n.startswith("**per-node majority**: n/a") and n.endswith(DEAL_REMEDY) for n in notes), notes
    for deal in (True, False, True):
        at.checkbox(key="data-deal-test").set_value(deal).run()
        assert not at.exception, at.exception
        assert at.checkbox(key="data-deal-test").value is deal
        assert _link(at).data.deal_test is deal and at.session_state["config"].data.deal_test is deal
        assert ("deal_test" in dict(at.query_params)) is deal
        ds = build(_link(at).data)
        notes = [c.value for c in at.caption]
        if deal:
            assert deal_sentence(ds) in notes, notes
            assert _node_majority_cell(at) == f"{100 * node_majority_test_error(ds):.2f}%"
            assert not any(DEAL_REMEDY in n for n in notes)
        else:
            assert not any(n.startswith(f"{off.y_test.size:,} test rows that belonged") for n in notes)
            assert _node_majority_cell(at) == "n/a"
        # The same test rows either way: the test-examples count does not move.
        assert next(m for m in at.metric if m.label == "test examples").value == f"{off.y_test.size:,}"


def test_not_offered_where_every_test_row_has_a_node():
    at = open_page("pages/data.py", RunConfig(data=dataclasses.replace(SPEC, partition=None, nodes=None)),
                   timeout=180)
    assert not [c for c in at.checkbox if c.label == DEAL_LABEL]


def test_fedviz_personalise_names_the_option_and_scores_every_node_with_it():
    import json
    import subprocess
    import sys

    from conftest import DATA
    from fedviz.problems.objective import Problem
    from fedviz.problems.optimum import solve

    args = [sys.executable, "-m", "fedviz", "personalise", str(DATA / "dna.scale"), "--test", str(DATA / "dna.scale.t"),
            "--positive", "1", "--nodes", "5", "--partition", "dirichlet:alpha=0.5"]
    off = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert off.returncode == 0, off.stderr
    assert ("No node has test rows (the test set belongs to no node): every per-node test error is n/a. Add "
            "--deal-test to deal the test rows to the nodes by their shares of each class.") in off.stdout
    on = subprocess.run(args + ["--deal-test", "--json"], capture_output=True, text=True, timeout=300)
    assert on.returncode == 0, on.stderr
    report = json.loads(on.stdout)
    assert (report["untested"], report["unassigned_rows"]) == (0, 0)
    # The global model's pooled error: w*'s on the same test rows, recounted without the deal.
    spec = DataSpec(str(DATA / "dna.scale"), test=str(DATA / "dna.scale.t"), positive=1.0, nodes=5,
                    partition="dirichlet:alpha=0.5")
    ds = build(spec)
    w = np.asarray(solve(Problem(ds, "logistic")).w)
    wrong = np.where(ds.X_test @ w > 0, 1.0, -1.0) != ds.y_test
    assert report["summaries"]["global"]["pooled"] == np.mean(wrong)
