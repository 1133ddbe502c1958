"""The Learn pages 'Efficiency paradigm' and 'Client drift' through Streamlit's AppTest: they compute
from fedviz (the history's records, the traced algorithms), never from stored numbers."""

import base64
import json
import time

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from fedviz.learn.drift import DriftSettings, drift_view
from fedviz.runner.loop import IterationRecord
from fedviz.runner.history.store import RunStore

from apptest import open_page



@pytest.fixture
def store(monkeypatch, tmp_path):
    """A fresh history for the page (and for the runs it starts); no heartbeat timeout (AppTest has
    no browser to send one while the test waits)."""
    from fedviz.runner import get_manager

    fresh = RunStore(tmp_path / "runs.sqlite")
    monkeypatch.setattr(get_manager(), "store", fresh)
    monkeypatch.setattr(get_manager(), "session_timeout", 24 * 3600.0)
    yield fresh
    fresh.close()


def _page(page: str) -> AppTest:
    return open_page(page)


def _figure(at: AppTest, i: int = 0) -> dict:
    return json.loads(at.get("plotly_chart")[i].proto.spec)


def _array(v) -> np.ndarray:
    """A figure's array: a list, or Plotly's typed-array form {"dtype", "bdata"} (base64)."""
    if isinstance(v, dict) and "bdata" in v:
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
    return np.asarray(v)


def _add_run(store, group, label, algorithm, rounds, seconds, subs, config=None):
    """A finished run whose records do 10⁶ examples of work a second of their clock, on one node a round (so
    that T_A, counted from the work at the runs' average cost of an example, is the clock's)."""
    rid = store.create_run(label=label, algorithm=algorithm, group_id=group, f_star=0.5, dataset_fingerprint="fp",
                           config=config or {"iterations": len(subs) - 1})
    store.append_records(rid, [IterationRecord(
        algorithm=label, iteration=i, objective=0.5 + f, suboptimality=f, test_error=0.3, train_error=0.3,
        grad_norm=1.0, rounds=int(r), vectors_up=int(r), vectors_down=int(r), grad_evals=round(s * 1e6),
        passes=float(i),
        seconds=float(s), status="running") for i, (r, s, f) in enumerate(zip(rounds, seconds, subs))])
    store.finish_run(rid, "done")


def _finished(handle):
    """``handle`` once its run has ended (within 180 s), checked done."""
    deadline = time.time() + 180
    while not handle.done and time.time() < deadline:
        time.sleep(0.3)
    assert handle.status == "done", handle.status
    return handle


def test_efficiency_offers_a_run_on_an_empty_history_and_then_compares_its_runs(store):
    at = _page("pages/learn_efficiency.py")
    assert any("no finished runs" in i.value for i in at.info)
    assert not at.get("plotly_chart")
    at.button(key="eff-start").click().run()
    handle = _finished(at.session_state["eff-run"])
    at.run()
    assert not at.exception and not at.error, (at.exception, at.error)
    # Four runs, read back from the history, and the oracle: I(ε) by a plain loop over their records.
    groups = {r.group_id for r in store.list_runs()}
    assert len(groups) == 1 and len(store.list_runs()) == 3  # the settings in force: FSVRG, GD, CoCoA+
    eps = at.select_slider[0].value
    table = at.table[0].value
    for run in store.list_runs():
        cols = store.columns(run.id)
        hit = next((i for i, f in enumerate(cols["suboptimality"]) if f <= eps), None)
        row = table[table["run"] == run.label].iloc[0]
        assert row["I(ε): rounds"] == ("not reached" if hit is None else str(cols["rounds"][hit]))
    fig = _figure(at)
    assert fig["layout"]["xaxis"]["type"] == "log"
    lines = [t for t in fig["data"] if t.get("mode") == "lines+markers"]
    assert len(lines) == sum(v != "not reached" for v in table["I(ε): rounds"]) >= 2
    assert any("fastest" in m.value for m in at.markdown)


def test_efficiency_finds_the_crossover_of_runs_in_the_history(store):
    """100 rounds of 1 ms against 5 rounds of 100 ms: they meet at c = 0.4/95 s, below which the
    cheap rounds win; without the dear run, the cheap one wins everywhere."""
    cheap = (np.arange(101), np.arange(101) * 1e-3, np.r_[np.linspace(1, 0.02, 100), 0.009])
    dear = (np.arange(6), np.arange(6) * 0.1, [1, 0.5, 0.2, 0.1, 0.05, 0.009])
    _add_run(store, "g", "cheap", "gd", *cheap)
    _add_run(store, "g", "dear", "fsvrg", *dear)
    at = _page("pages/learn_efficiency.py")
    assert at.selectbox(key="eff-group").value is None  # not this page's setup: nothing chosen for the user
    at.selectbox(key="eff-group").set_value("g").run()
    at.select_slider[0].set_value(0.01).run()
    assert not at.exception
    assert any("cheap is fastest below c = 4.21 ms, dear above" in m.value for m in at.markdown)
    fig = _figure(at)
    switch = [s["x0"] for s in fig["layout"]["shapes"] if s["type"] == "line"]
    assert switch == [pytest.approx(0.4 / 95)]
    at.multiselect[0].set_value(["cheap"]).run()
    assert not at.exception
    assert any("cheap is fastest to f − f\\* ≤ 0.01 at every round cost" in m.value for m in at.markdown)  # * escaped


CHEAP = (np.arange(101), np.arange(101) * 1e-3, np.r_[np.linspace(1, 0.02, 100), 0.009])
DEAR = (np.arange(6), np.arange(6) * 0.1, [1, 0.5, 0.2, 0.1, 0.05, 0.009])


def test_the_efficiency_lesson_opens_its_own_group_not_the_newest(store):
    """Issue 20: after the rare-features lesson, the newest group was six FSVRG variants, and the efficiency
    lesson opened on them.  The lesson's own group is the one started with its settings, however old."""
    from fedviz.learn.rare_features import VARIANTS, AblationConfig
    from fedviz.learn.tour import lesson

    item = lesson("efficiency")
    for label, algorithm in (("FSVRG", "fsvrg"), ("GD", "gd"), ("CoCoA+", "cocoa-plus"), ("FedAvg", "fedavg")):
        _add_run(store, "own", label, algorithm, *CHEAP, config=item.config.as_json())
    for v in VARIANTS.values():  # newer: the ablation, as the lesson before leaves it
        _add_run(store, "ablation", v.label, v.algorithm, *DEAR, config=AblationConfig().as_json())
    at = open_page("pages/learn_efficiency.py", item.config)
    assert not at.exception and not at.error, (at.exception, at.error)
    assert at.selectbox(key="eff-group").value == "own"
    names = [t["name"].split(":")[0] for t in _figure(at)["data"] if t.get("mode") == "lines+markers"]
    assert names == ["FSVRG", "GD", "CoCoA+", "FedAvg"]
    # Each run its own colour, also for runs of one algorithm (the ablation's six FSVRG variants).
    at.selectbox(key="eff-group").set_value("ablation").run()
    lines = [t for t in _figure(at)["data"] if t.get("mode") == "lines+markers"]
    colours = [t["line"]["color"] for t in lines]
    assert len(lines) == len(VARIANTS) and len(set(colours)) == len(colours), colours


def test_the_efficiency_lesson_shows_its_crossover_on_its_own_defaults(store):
    """Issue 31: lesson 6 said "FSVRG is fastest at every round cost".  Opened from its link and run with
    its own settings, the page now opens at an ε where the fastest run changes with c, and the lesson's
    words hold on the runs: DANE takes fewer rounds and more work a round than CoCoA+, whose round is one
    pass over a node's examples (n/K of them on average: Algorithm 3 with H = n_k), and the run with the
    fewest rounds is the one fastest above the crossover."""
    from fedviz.data.build import build
    from fedviz.learn.tour import lesson

    item = lesson("efficiency")
    at = open_page("pages/learn_efficiency.py", item.config)
    at.button(key="eff-start").click().run()
    _finished(at.session_state["eff-run"])
    at.run()
    assert not at.exception and not at.error, (at.exception, at.error)
    sentence = next(m.value for m in at.markdown if m.value.startswith("**To f"))
    assert "is fastest below c = " in sentence and " above" in sentence, sentence
    table = at.table[0].value.set_index("run")
    rounds = {run: int(table.loc[run, "I(ε): rounds"]) for run in ("DANE", "CoCoA+")}
    work = {run: float(table.loc[run, "examples per node per round"].replace(",", "")) for run in ("DANE", "CoCoA+")}
    assert rounds["DANE"] < rounds["CoCoA+"] and work["DANE"] > work["CoCoA+"], (rounds, work)
    ds = build(item.config.data)  # docs/learn-efficiency-drift.md: ten copies of 300 examples, DANE in 2 rounds
    assert (ds.n_nodes, ds.y.size, rounds["DANE"]) == (10, 3000, 2)
    assert work["CoCoA+"] == pytest.approx(ds.y.size / ds.n_nodes, abs=0.5)  # one pass a round
    assert sentence.startswith("**To f") and "CoCoA+ is fastest below c = " in sentence and "DANE above" in sentence


def test_a_centralised_run_is_drawn_as_a_reference_and_never_ranked(store):
    """Eq. (3) ranks distributed methods (Section 2.3.1); SGD (centralised) has no rounds to pay c for: it
    is drawn, labelled, and left out of who-is-fastest, even where its computation alone is the least."""
    _add_run(store, "g", "FSVRG", "fsvrg", *DEAR)
    _add_run(store, "g", "GD", "gd", *CHEAP)
    _add_run(store, "g", "SGD (centralised)", "sgd", np.arange(6) * 50, np.arange(6) * 1e-5,
             [1, 0.5, 0.2, 0.1, 0.05, 0.001])
    at = _page("pages/learn_efficiency.py")
    at.selectbox(key="eff-group").set_value("g").run()
    at.select_slider[0].set_value(0.01).run()
    assert not at.exception and not at.error
    sentence = next(m.value for m in at.markdown if m.value.startswith("**To f"))
    assert "GD is fastest below c = 4.21 ms, FSVRG above" in sentence  # the two federated lines' crossover
    assert "SGD (centralised) is centralised, drawn for reference and not ranked" in sentence
    assert "SGD (centralised) is fastest" not in sentence and "SGD (centralised) up to" not in sentence
    table = at.table[0].value
    assert "SGD (centralised) (centralised, not ranked)" in list(table["run"])
    fig = _figure(at)
    sgd = next(t for t in fig["data"] if t.get("name", "").startswith("SGD (centralised)"))
    assert "not ranked" in sgd["name"] and sgd["line"]["dash"] == "dash"
    assert np.ptp(_array(sgd["y"])) == 0  # eq. (2): its computation, whatever c
    assert not any("SGD" in a["text"] for a in fig["layout"]["annotations"] if "fastest" in a["text"])


def test_the_efficiency_page_follows_the_group_its_own_run_started(store, monkeypatch):
    """Issue 20: after its Run finished, the page still showed the group chosen before."""
    from fedviz.runner.config import RunConfig

    setup = RunConfig(algorithms=(("fsvrg", ()), ("gd", ())), iterations=3)
    _add_run(store, "old", "FSVRG", "fsvrg", *DEAR, config=setup.as_json())
    _add_run(store, "old", "GD", "gd", *CHEAP, config=setup.as_json())
    at = open_page("pages/learn_efficiency.py", setup)
    assert at.selectbox(key="eff-group").value == "old"
    at.button(key="eff-start").click().run()
    handle = _finished(at.session_state["eff-run"])
    at.run()
    assert not at.exception and not at.error, (at.exception, at.error)
    assert at.selectbox(key="eff-group").value == handle.id != "old"
    eps, table = at.select_slider[0].value, at.table[0].value
    for run in store.list_runs(group_id=handle.id):  # the table reads the new runs' records
        cols = store.columns(run.id)
        hit = next((i for i, f in enumerate(cols["suboptimality"]) if f <= eps), None)
        row = table[table["run"] == run.label].iloc[0]
        assert row["I(ε): rounds"] == ("not reached" if hit is None else str(cols["rounds"][hit]))


def test_drift_traces_the_three_algorithms_on_both_splits(store):
    at = _page("pages/learn_drift.py")
    assert not at.error
    fig = _figure(at)
    assert len(fig["frames"]) == 8 + 1 and len(fig["layout"]["sliders"][0]["steps"]) == 9
    # The table is computed: the same numbers as fedviz's own view, and the drift it claims.
    table = at.table[0].value
    view = drift_view("non-iid", DriftSettings())
    assert table["FedAvg"].iloc[1] == f"{view.final_distances()['FedAvg']:.3g}"
    assert float(table["FedAvg"].iloc[1]) > 20 * float(table["SCAFFOLD"].iloc[1])
    at.number_input(key="drift-rounds").set_value(3).run()
    at.number_input(key="drift-nodes").set_value(6).run()
    assert not at.exception and not at.error
    fig = _figure(at)
    assert len(fig["frames"]) == 3 + 1
    local = [t for t in fig["frames"][1]["data"] if t["name"].startswith("local iterates")]
    assert [_array(t["x"]).size for t in local] == [6] * 6
