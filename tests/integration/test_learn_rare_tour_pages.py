"""Learn › Start here and Learn › Rare features through Streamlit's AppTest, and the sentences under the Run and
Home charts: every lesson opens its page set up; the ablation runs and its chart is the data's ω^j, counted here
with SciPy; bad input is a message."""

import base64
import json
import re
import time
import types

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from fedviz.data.build import DataSpec
from fedviz.learn.rare_features import VARIANTS
from fedviz.learn.chart_notes import AXIS_NOTES, SUBOPTIMALITY_NOTES
from fedviz.learn.tour import LESSONS
from fedviz.runner import cache
from fedviz.runner.config import RunConfig

from apptest import long_sessions, open_page  # noqa: F401 - the fixture, used by pytestmark
from conftest import ROOT

SMALL = DataSpec(source="preset:google-plus-small?nodes=40")   # 40 authors, about 4,000 posts
TINY = DataSpec(source="preset:identical-nodes")


pytestmark = pytest.mark.usefixtures("long_sessions")


def _app(page: str, config: RunConfig | None = None) -> AppTest:
    return open_page(page, config, timeout=180)


def _wait(at: AppTest, key: str, timeout: float = 180.0):
    deadline = time.time() + timeout
    handle = at.session_state[key]
    while time.time() < deadline and not handle.done:
        time.sleep(0.2)
    assert handle.done, "the run did not end"
    at.run()
    return handle.snapshot()


def _charts(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def _array(v) -> np.ndarray:
    """A Plotly array, plain or in its typed base64 form."""
    if isinstance(v, dict) and "bdata" in v:
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
    return np.asarray(v)


def _captions(at: AppTest) -> str:
    return " ".join(c.value for c in at.caption)


# -- the tour ---------------------------------------------------------------------------------------------
def test_the_tour_lists_every_lesson_with_its_sentence_and_link():
    at = _app("pages/learn_tour.py")
    text = " ".join(m.value for m in at.markdown)
    for item in LESSONS:
        button = at.button(key=f"tour-{item.key}")
        assert button.disabled is not item.exists()
        assert item.title in text
        if item.exists():
            assert item.sentence in text and f"]({item.url()})" in text
    assert not at.error


@pytest.mark.parametrize("item", LESSONS, ids=[x.key for x in LESSONS])
def test_each_lesson_opens_its_page_set_up(item):
    if not item.exists():
        pytest.skip(f"{item.page} is not written yet")
    # The page's own title, read from its source: the page the lesson opens must be this one.
    expected = re.search(r'st\.title\("([^"]+)"\)', (ROOT / item.page).read_text()).group(1)
    # A session whose settings differ from the lesson's, its Run widgets drawn with them: the lesson replaces them
    # (a stale widget would write its value back into the settings on the next page).
    at = _app("pages/run.py", RunConfig(data=SMALL, algorithms=(("gd", ()),), iterations=7, seed=3))
    at.switch_page("pages/learn_tour.py")
    at.run()
    # An earlier run on the lesson's page (a finished one, from another setup): the lesson opens without it.
    for key in ("run", "rare-run", "eff-run"):
        at.session_state[key] = types.SimpleNamespace(done=True, status="done", id="earlier")
    at.button(key=f"tour-{item.key}").click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert at.title[0].value == expected
    assert at.session_state["config"] == item.config
    assert dict(at.query_params) == item.query
    shown = {"pages/run.py": "run", "pages/learn_rare_features.py": "rare-run", "pages/learn_efficiency.py": "eff-run"}
    if item.page in shown:
        assert shown[item.page] not in at.session_state
    if item.page == "pages/run.py":  # the widgets show the lesson's settings, not the session's old ones
        assert at.multiselect(key="run-algorithms").value == [name for name, _ in item.config.algorithms]
        assert at.number_input(key="run-iterations").value == item.config.iterations


# -- rare features -------------------------------------------------------------------------------------
def test_the_ablation_runs_every_variant_and_bins_the_data_s_own_omega():
    at = _app("pages/learn_rare_features.py", RunConfig(data=SMALL))
    # Before a run: Figure 1 binned, no curves yet.
    (before,) = _charts(at)
    # (the lower plot's empty placeholder, which keeps its axes before a run, draws nothing)
    assert [t["type"] for t in before["data"] if any(v is not None for v in t.get("y", []))] == ["bar"]
    at.number_input(key="rare-iterations").set_value(4).run()
    next(b for b in at.button if "Run the ablation" in b.label).click().run()
    assert not at.exception, at.exception
    snap = _wait(at, "rare-run")
    assert snap.statuses == {v.label: "done" for v in VARIANTS.values()}, snap.messages
    assert all(len(snap.columns[v.label]["iteration"]) == 5 for v in VARIANTS.values())
    rare, curves = _charts(at)
    # ω^j counted with SciPy: on how many nodes' row blocks each column has a nonzero.
    ds = cache.dataset(SMALL)
    X = ds.X.tocsc()
    omega = np.zeros(ds.d, dtype=int)
    for k in range(ds.n_nodes):
        omega += (abs(X[ds.offsets[k]:ds.offsets[k + 1]]).sum(axis=0).A1 > 0)
    seen = omega[omega > 0]
    bins = np.floor(np.log2(seen)).astype(int)
    counts = np.bincount(bins)
    bars, *lines = rare["data"]
    np.testing.assert_array_equal(_array(bars["y"]), counts[counts > 0])
    assert [t["name"] for t in lines] == [f"{v.label} (iteration 4)" for v in VARIANTS.values()]
    assert {t["name"] for t in curves["data"] if t.get("showlegend", True)} == {v.label for v in VARIANTS.values()}
    assert "What to look at" in _captions(at)
    assert not at.error and not at.warning
    for metric in ("mean_abs", "share"):  # the other measures redraw the same bins
        at.radio(key="rare-metric").set_value(metric).run()
        assert not at.exception, at.exception
        rare, _ = _charts(at)
        assert len(rare["data"]) == 1 + len(VARIANTS)
    shares = [_array(t["y"]) for t in rare["data"][1:]]
    assert all(np.nansum(y) == pytest.approx(1.0) for y in shares)  # each curve's shares of ‖w − w*‖² add up
    # The ablation's runs are ordinary runs of the history: Compare lists them, each naming what it switched off.
    at.switch_page("pages/compare.py")
    at.run()
    assert not at.exception, at.exception
    options = " ".join(o for ms in at.multiselect for o in ms.options)
    assert "FSVRG without A" in options and "aggregate scaling = off" in options


def test_a_tuned_ablation_keeps_each_curve_s_colour_on_both_charts():
    """Tuning renames a curve ('FSVRG (stepsize 30.6, tuned)'); the per-bin chart keeps the variant's name, and
    both charts give a variant the same colour."""
    at = _app("pages/learn_rare_features.py", RunConfig(data=SMALL))
    at.number_input(key="rare-iterations").set_value(3).run()
    at.multiselect(key="rare-variants").set_value(["fsvrg", "no-aggregate-scaling"]).run()
    at.checkbox(key="rare-tune").set_value(True).run()
    next(b for b in at.button if "Run the ablation" in b.label).click().run()
    snap = _wait(at, "rare-run")
    assert all(label.endswith(("tuned)", "tuned, default kept)")) for label in snap.labels), snap.labels
    rare, curves = _charts(at)
    per_bin = {t["name"].split(" (iteration")[0]: t["line"]["color"] for t in rare["data"][1:]}
    assert list(per_bin) == ["FSVRG", "FSVRG without A"]
    drawn = {t["name"]: t["line"]["color"] for t in curves["data"] if t.get("showlegend", True)}
    for label, variant in zip(snap.labels, per_bin):
        assert label.startswith(variant) and drawn[label] == per_bin[variant]
    assert len(set(per_bin.values())) == 2 and not at.exception and not at.error


def test_the_ablation_needs_a_curve():
    at = _app("pages/learn_rare_features.py", RunConfig(data=SMALL))
    at.multiselect(key="rare-variants").set_value([]).run()
    assert any("at least one curve" in i.value for i in at.info)
    assert next(b for b in at.button if "Run the ablation" in b.label).disabled
    assert not at.exception


# -- the sentences under the Run and Home charts --------------------------------------------------------------
def test_run_charts_say_what_to_look_at_for_the_axis_and_algorithms_shown():
    at = _app("pages/run.py", RunConfig(data=TINY, algorithms=(("fsvrg", ()), ("gd", ())), iterations=3))
    next(b for b in at.button if b.label.endswith(" Run")).click().run()
    _wait(at, "run")
    text = _captions(at)
    assert AXIS_NOTES["iteration"] in text
    assert SUBOPTIMALITY_NOTES["fsvrg"] in text and SUBOPTIMALITY_NOTES["gd"] in text
    assert "predict majority" in text and SUBOPTIMALITY_NOTES["cocoa-plus"] not in text
    at.radio(key="axis").set_value("rounds").run()
    text = _captions(at)
    assert AXIS_NOTES["rounds"] in text and AXIS_NOTES["iteration"] not in text
    assert not at.exception


def test_home_offers_the_tour():
    at = open_page()
    assert any("guided tour" in m.value for m in at.markdown)
    assert any(getattr(e.proto, "page", "").endswith("learn_tour.py") or "guided tour" in str(e.proto)
               for e in at.get("page_link"))
