"""The Personalise page as a user drives it (Streamlit's AppTest): Compute, every control changed three
times in a row, a bad input named, many classes, and what the page says checked against the report of
an independent call (fedviz.personal.personalise on the same problem)."""

import pytest

from fedviz.data.build import DataSpec, build
from fedviz.personal import PersonaliseConfig, personalise
from fedviz.plots.personal import finding, method_label
from fedviz.problems.objective import Problem
from fedviz.runner.config import RunConfig
from apptest import long_sessions, open_page  # noqa: F401 - the fixture, used by pytestmark
from conftest import DATA, plain

pytestmark = pytest.mark.usefixtures("long_sessions")

TINY = DataSpec(source="preset:identical-nodes")


def _compute(at):
    next(b for b in at.button if "Compute" in b.label).click().run(timeout=600)
    assert not at.exception, at.exception
    assert not at.error, [plain(e.value) for e in at.error]


def _said(at) -> str:
    return " ".join(plain(m.value) for m in at.markdown)


def test_compute_draws_the_report_of_an_independent_call_on_the_paper_s_data():
    """google-plus-small, the page's defaults: the sentence, the table's pooled column and the two figures
    are those of personalise() called here on the same problem (from its own w*)."""
    from fedviz import ui

    with ui.loaders._PERSONAL_LOCK:  # a fresh server: another test of this process may have computed these settings
        ui.loaders._PERSONAL.clear()
    at = open_page("pages/personalise.py", RunConfig(), timeout=600)
    assert any("Press **Compute**" in i.value for i in at.info)
    assert not at.get("plotly_chart")  # nothing solved before the click
    _compute(at)
    config = RunConfig()
    report = personalise(Problem(build(config.data), config.loss, config.lam), PersonaliseConfig())
    assert finding(report) in _said(at)
    table = at.table[0].value
    assert list(table["method"]) == [method_label(report, m) for m in report.methods]
    assert list(table["pooled"]) == [f"{100 * report.summaries[m]['pooled']:.2f}%" for m in report.methods]
    assert len(at.get("plotly_chart")) == 2
    # Acceptance: the per-node majority, w*, Local and Ditto are all on the page, pooled.
    assert {"per-node majority", "global model w*", "Local"} <= set(table["method"])
    assert any(m.startswith("Ditto (λ_D = ") for m in table["method"])


def test_every_control_keeps_three_changes_in_a_row_and_the_last_compute_uses_them():
    at = open_page("pages/personalise.py", RunConfig(data=TINY), timeout=600)
    _compute(at)
    changes = (("number_input", "pers-steps", (1, 2, 3)), ("text_input", "pers-step", ("0.5", "0.25", "0.1")),
               ("slider", "pers-alpha", (0.25, 0.75, 0.9)), ("selectbox", "pers-ditto", ("0", "0.01", "1")))
    for kind, key, values in changes:
        for v in values:
            getattr(at, kind)(key=key).set_value(v).run()
            assert not at.exception and not at.error, (key, v)
            assert getattr(at, kind)(key=key).value == v
            # The figures of the last Compute stay, said to be those of other settings.
            assert any("changed since the last Compute" in w.value for w in at.warning), (key, v)
    _compute(at)
    assert not at.warning
    methods = list(at.table[0].value["method"])
    assert "fine-tuned (3 steps)" in methods and "APFL mixture (α = 0.9)" in methods
    assert "Ditto (λ_D = 1)" in methods


def test_a_bad_step_is_named_with_its_range_and_compute_waits():
    at = open_page("pages/personalise.py", RunConfig(data=TINY), timeout=600)
    for text in ("abc", "-1", "0"):
        at.text_input(key="pers-step").set_value(text).run()
        assert not at.exception
        errors = [plain(e.value) for e in at.error]
        assert errors and "step" in errors[0] and "> 0" in errors[0], errors
        assert next(b for b in at.button if "Compute" in b.label).disabled


def test_many_classes_compute_with_softmax():
    """dna.scale (three classes): softmax Local, Ditto and APFL per node, the table and both figures."""
    spec = DataSpec(source=str(DATA / "dna.scale"), nodes=10)
    at = open_page("pages/personalise.py", RunConfig(data=spec), timeout=600)
    assert any("softmax over the data's 3 classes" in c.value for c in at.caption)
    _compute(at)
    assert len(at.get("plotly_chart")) == 2 and len(at.table) == 1
    assert "pooled test error" in _said(at)


@pytest.mark.parametrize("spec", [
    DataSpec(source=str(DATA / "heart_scale"), test=str(DATA / "heart_scale"), nodes=4),
    DataSpec(source="preset:identical-nodes", partition="iid", nodes=5)], ids=["test-file", "re-partitioned-preset"])
def test_no_test_row_on_any_node_is_said_at_once_and_nothing_is_solved(spec):
    """A separate test file, or a preset split into other nodes (its test rows stay with the generator's):
    the page says so with the remedy before anything is solved, and Compute is off."""
    ds = build(spec)
    assert not (ds.test_nodes >= 0).any()  # the premise, from the data set itself
    at = open_page("pages/personalise.py", RunConfig(data=spec), timeout=600)
    info = " ".join(plain(i.value) for i in at.info)
    assert f"No node has test rows (the test set's {ds.y_test.size:,} rows belong to no node" in info
    assert next(b for b in at.button if "Compute" in b.label).disabled
    assert not at.get("plotly_chart") and not at.table


def test_a_closed_tab_s_reports_leave_with_its_data_set():
    """An upload's spec holds its bytes: the reports computed on it go when the last session that asked for
    the data set ends (fedviz.ui.session_ended), as the data set does; another session's stay."""
    from fedviz import ui
    from fedviz.runner import cache

    # Specs no other test's session asked for (AppTest sessions keep theirs).
    mine = DataSpec(source=(DATA / "heart_scale").read_bytes(), name="heart")
    theirs = DataSpec(source="preset:identical-nodes", seed=987)
    cache.dataset(mine, owner="tab-1")
    cache.dataset(theirs, owner="tab-2")
    keys = [(mine, "logistic", None, PersonaliseConfig()), (theirs, "logistic", None, PersonaliseConfig())]
    with ui.loaders._PERSONAL_LOCK:
        for k in keys:
            ui.loaders._PERSONAL[k] = object()
    ui.session_ended("tab-1")
    assert not ui.personal_ready(*keys[0]) and ui.personal_ready(*keys[1])
    ui.session_ended("tab-2")
    assert not ui.personal_ready(*keys[1])


def test_unseen_nodes_get_their_own_table_as_new_clients_of_the_seen_nodes_w_star():
    """Issue 23, point 2 on this page: with unseen nodes the held-out ones are scored as new clients —
    the table's global row is the seen nodes' optimum on their test rows (independently: Problem.test_error
    on the data layer's unseen part), the other rows personalised from it on their own training rows."""
    from fedviz.problems.optimum import solve

    spec = DataSpec(source=str(DATA / "heart_scale"), nodes=10, unseen=0.2)
    at = open_page("pages/personalise.py", RunConfig(data=spec), timeout=600)
    _compute(at)
    assert any(h.value == "Unseen nodes: new clients" for h in at.subheader)
    ds = build(spec)
    pb = Problem(ds, "logistic")
    held = Problem(ds.unseen, "logistic", lam=pb.lam)
    assert len(at.table) == 2
    unseen = at.table[1].value
    row = list(unseen["method"]).index("global model w*")
    assert unseen["pooled"][row] == f"{100 * held.test_error(solve(pb).w):.2f}%"
    assert f"The {ds.unseen.n_nodes:,} nodes held out of training" in _said(at)
