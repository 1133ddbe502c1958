"""Every registered algorithm, partitioner and preset, opened from the pages as a user would
(Streamlit's AppTest), and every control changed three times in a row.

The lists come from the registries, so an algorithm, partitioner or preset added later is
covered without anyone remembering to add it here.  The browser versions of the same walks
are in test_browser_user.py; these are the cheap ones that also run on a machine without a
browser."""


import pytest
from streamlit.testing.v1 import AppTest

from fedviz.algorithms import ALGORITHMS
from fedviz.data.build import DataSpec
from fedviz.data.partition import PARTITIONERS
from fedviz.data.presets import PRESETS
from fedviz.runner.config import RunConfig, from_query
from apptest import long_sessions, open_page  # noqa: F401 - the fixture, used by pytestmark
from conftest import plain

TINY = DataSpec(source="preset:identical-nodes")


pytestmark = pytest.mark.usefixtures("long_sessions")


def _page(page: str, config: RunConfig | None = None) -> AppTest:
    return open_page(page, config, timeout=180)


def _link(at: AppTest) -> RunConfig:
    """The config the address bar's link reproduces (what a user copying it would share)."""
    config, problems = from_query(dict(at.query_params))
    assert not problems, problems
    return config


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_every_algorithm_opens_and_runs_from_the_run_page(name):
    at = _page("pages/run.py", RunConfig(data=TINY, algorithms=(("gd", ()),), iterations=3))
    loss = ALGORITHMS[name].losses[0]
    at.selectbox(key="run-loss").set_value(loss).run()
    at.multiselect(key="run-algorithms").set_value([name]).run()
    assert not at.exception, at.exception
    assert not at.error, [plain(e.value) for e in at.error]
    assert _link(at).algorithms == ((name, ()),) and _link(at).loss == loss
    run = next(b for b in at.button if b.label.endswith(" Run"))
    assert not run.disabled
    run.click().run()
    assert not at.exception, at.exception
    handle = at.session_state["run"]
    assert handle.wait(180), "the run did not end"
    at.run()
    snap = handle.snapshot()
    label = ALGORITHMS[name].title
    assert snap.statuses == {label: "done"}, snap.messages
    assert len(snap.columns[label]["iteration"]) == 4
    assert not at.exception


@pytest.mark.parametrize("name", list(PARTITIONERS))
def test_every_partitioner_opens_on_the_data_page_and_reaches_the_link(name):
    at = _page("pages/data.py", RunConfig(data=DataSpec(source="preset:google-plus-small?nodes=40")))
    at.selectbox(key="data-partition").set_value(name).run()
    assert not at.exception, at.exception
    assert not at.error, [plain(e.value) for e in at.error]
    link = _link(at)
    assert link.data.partition.split(":")[0] == name
    assert at.session_state["config"] == link


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_opens_with_its_own_knobs(name):
    """From another preset with changed knobs to each preset: the link names the bare preset (no
    knob of the previous one), and the knob inputs show the new preset's own values."""
    start = "google-plus-small?words_per_example=4&nodes=30" if name != "google-plus-small" else "iid?nodes=30"
    at = _page("pages/data.py", RunConfig(data=DataSpec(source=f"preset:{start}")))
    at.selectbox(key="data-preset").set_value(name).run()
    assert not at.exception, at.exception
    assert not at.error, [plain(e.value) for e in at.error]
    assert _link(at).data.source == f"preset:{name}"
    from fedviz.data.presets import preset_config

    base = preset_config(name)
    for w in at.number_input:
        prefix = f"data-{name}-knob-"
        if w.key and w.key.startswith(prefix):
            assert w.value == pytest.approx(float(getattr(base, w.key[len(prefix):])))


def test_an_algorithm_without_the_chosen_loss_is_refused_before_the_run_with_the_remedy():
    only = [name for name, cls in ALGORITHMS.items() if "logistic" not in cls.losses]
    assert only  # the Appendix's primal method is for the squared loss
    at = _page("pages/run.py", RunConfig(data=TINY, algorithms=(("gd", ()),), iterations=3))
    at.multiselect(key="run-algorithms").set_value(["gd", only[0]]).run()
    assert not at.exception
    assert any("loss" in plain(e.value) and "squared" in plain(e.value) for e in at.error), [plain(e.value) for e in at.error]
    assert next(b for b in at.button if b.label.endswith(" Run")).disabled


def test_run_controls_keep_three_changes_in_a_row():
    at = _page("pages/run.py", RunConfig(data=TINY, algorithms=(("gd", ()),), iterations=3))
    for key, values, field in (("run-iterations", (40, 50, 60), "iterations"), ("run-seed", (1, 2, 3), "seed")):
        for v in values:
            at.number_input(key=key).set_value(v).run()
            assert at.number_input(key=key).value == v
            assert getattr(_link(at), field) == v
    for v in ("squared", "smoothed-hinge", "logistic"):
        at.selectbox(key="run-loss").set_value(v).run()
        assert _link(at).loss == v
    for v in ("0.1", "0.01", "0.001"):
        at.text_input(key="run-lam").set_value(v).run()
        assert _link(at).lam == float(v)
    chosen = ["gd"]
    for name in ("fedavg", "scaffold", "fedprox"):
        chosen.append(name)
        at.multiselect(key="run-algorithms").set_value(list(chosen)).run()
        assert [n for n, _ in _link(at).algorithms] == chosen
    for flag in (True, False, True):
        at.checkbox(key="run-sweep").set_value(flag).run()
        assert _link(at).sweep is flag
    assert not at.exception


def test_the_link_survives_navigation_between_pages():
    at = _page("pages/data.py", RunConfig(data=TINY))
    at.selectbox(key="data-partition").set_value("shards").run()
    at.number_input(key="data-part-nodes").set_value(50).run()
    before = dict(at.query_params)
    assert before["partition"].startswith("shards") and before["nodes"] == "50"
    for page in ("pages/run.py", "pages/compare.py", "pages/personalise.py", "pages/home.py", "pages/data.py"):
        at.switch_page(page)
        at.run()
        assert not at.exception, (page, at.exception)
        assert dict(at.query_params) == before, page
    assert at.number_input(key="data-part-nodes").value == 50


#: Presets whose personalised models take minutes at their own scale (the paper's 10,000 authors): opened,
#: not computed, here; the bench times Local at that scale.  Softmax presets are opened only too: their
#: exact solves took 3.5 minutes on fedprox-synthetic (30 nodes, C = 10) on this 2-core machine;
#: tests/integration/test_personalise_page.py computes the page on dna.scale (C = 3).
PERSONAL_OPEN_ONLY = ("google-plus",)


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_opens_the_personalise_page_and_computes(name):
    """Each preset of the registry: the page opens without an error, and (the paper-scale preset aside)
    Compute draws the boxes, the table and the path, or says why it cannot, never a traceback."""
    at = _page("pages/personalise.py", RunConfig(data=DataSpec(source=f"preset:{name}")))
    assert not at.error, [plain(e.value) for e in at.error]
    if name in PERSONAL_OPEN_ONLY or any(" classes" in c.value for c in at.caption):
        return
    next(b for b in at.button if "Compute" in b.label).click().run(timeout=600)
    assert not at.exception, at.exception
    assert not at.error, [plain(e.value) for e in at.error]
    assert len(at.get("plotly_chart")) == 2 and len(at.table) == 1
