"""Compare's What-if on many classes (issue 22, point 7), in AppTest: on dna.scale (3 classes) the Run
page's algorithms that take softmax run, softmax regression, on both partitionings; the one that does
not (CoCoA+) is left out with the registry's sentence; each side's test-error chart carries its own
baselines — the majority class overall and per node — recomputed here with NumPy on the side's data.
A file has no groups of its own, so reshuffle and natural are not offered there; a preset keeps them."""

import json
import time

import numpy as np
import pytest

from fedviz.algorithms import ALGORITHMS, get_algorithm
from fedviz.data.build import DataSpec, build
from fedviz.problems.objective import Problem
from fedviz.runner.config import RunConfig

from apptest import long_sessions, open_page  # noqa: F401 - a fixture
from conftest import DATA


def _wait(at, keys=("whatif-run-a", "whatif-run-b"), timeout=300.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if all(at.session_state[k].done for k in keys):
            at.run()
            return [at.session_state[k].snapshot() for k in keys]
        time.sleep(0.3)
    pytest.fail("the What-if runs did not finish in time")


def _majorities(ds) -> tuple[float, float]:
    """Predict the training majority class, and each test row's node's majority (ties: the class with
    more training rows overall, then the lower class), as test errors: plain loops over the nodes."""
    classes, total = np.unique(ds.y, return_counts=True)
    overall = classes[np.argmax(total)]
    majority = float(np.mean(ds.y_test != overall))
    wrong = known = 0
    for k in range(ds.n_nodes):
        y = ds.y[ds.offsets[k]:ds.offsets[k + 1]]
        mine = np.array([np.sum(y == c) for c in classes])
        tied = np.flatnonzero(mine == mine.max())
        pick = classes[max(tied, key=lambda i: (total[i], -i))]
        rows = ds.y_test[ds.test_nodes == k]
        wrong += int(np.sum(rows != pick))
        known += rows.size
    return majority, wrong / known


def _baseline_lines(at) -> list[set[float]]:
    """The y of the horizontal lines of each chart that has them (the test-error charts, A then B)."""
    out = []
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        lines = {round(s["y0"], 12) for s in spec["layout"].get("shapes", []) if s.get("y0") == s.get("y1")}
        if lines:
            out.append(lines)
    return out


def test_dna_scale_runs_both_sides_softmax_without_cocoa_plus_and_with_its_class_baselines(long_sessions):  # noqa: F811
    data = DataSpec(source=str(DATA / "dna.scale"))
    config = RunConfig(data=data, algorithms=(("fsvrg", ()), ("gd", ()), ("cocoa-plus", ())), iterations=2)
    at = open_page("pages/compare.py", config)
    assert not at.error
    captions = [c.value for c in at.caption]
    why = ALGORITHMS["cocoa-plus"].softmax_refusal()
    assert f"Left out on these 3 classes: {why}." in captions, captions
    assert any(c.startswith("Runs FSVRG, GD on ") and "softmax loss" in c for c in captions), captions
    assert any(c.startswith("Natural groups and Reshuffled") for c in captions), captions
    assert at.selectbox(key="whatif-b").value == "dirichlet" and "reshuffle" not in at.selectbox(key="whatif-b").options
    next(b for b in at.button if b.label.endswith("Run both")).click().run()
    snaps = _wait(at)
    assert not at.exception and not at.error
    for snap in snaps:
        assert snap.summary["loss"] == "softmax" and set(snap.labels) == {"FSVRG", "GD"}
        assert all(status == "done" for status in snap.statuses.values()), snap.statuses
    # GD's test error on A is the argmax error of its iterate: GD run again here, its X_test W compared with NumPy.
    gd = get_algorithm("gd")(Problem(build(data), "softmax"), seed=0)
    for _ in range(2):
        gd.step()
    W = np.asarray(gd.w).reshape(gd.problem.d, 3)
    ds = gd.problem.data
    argmax_error = np.mean(np.argmax(ds.X_test @ W, axis=1) != ds.y_test)
    assert snaps[0].last["GD"].test_error == pytest.approx(argmax_error, abs=1e-12)
    # Each side's chart: its own data's majority baselines (the other partition, other per-node majorities).
    sides = [build(data), build(DataSpec(source=str(DATA / "dna.scale"), partition=at.session_state["whatif-specs"][1],
                                         nodes=100))]
    lines = _baseline_lines(at)
    assert len(lines) == 2, lines
    for side, ds in zip(lines, sides):
        majority, node_majority = _majorities(ds)
        assert round(majority, 12) in side and round(node_majority, 12) in side, (side, majority, node_majority)


def test_the_ten_class_preset_keeps_reshuffle_and_refuses_nothing_it_runs(long_sessions):  # noqa: F811
    data = DataSpec(source="preset:fedprox-synthetic?nodes=6")
    config = RunConfig(data=data, algorithms=(("gd", ()), ("dane", (("solver", "svrg"),))), iterations=2)
    at = open_page("pages/compare.py", config)
    assert not at.error
    why = ALGORITHMS["dane"].softmax_refusal({"solver": "svrg"})
    assert why and f"Left out on these 10 classes: {why}." in [c.value for c in at.caption]
    assert at.selectbox(key="whatif-b").value == "reshuffle"
    next(b for b in at.button if b.label.endswith("Run both")).click().run()
    snaps = _wait(at)
    assert not at.error and all(s.summary["loss"] == "softmax" and tuple(s.labels) == ("GD",) for s in snaps)


def test_no_algorithm_left_disables_the_run_and_says_so():
    config = RunConfig(data=DataSpec(source=str(DATA / "dna.scale")), algorithms=(("cocoa-plus", ()), ("cocoa", ())))
    at = open_page("pages/compare.py", config)
    assert "None of the Run page's algorithms runs on these data: choose others on the Run page." in \
        [i.value for i in at.info]
    assert next(b for b in at.button if b.label.endswith("Run both")).disabled
