"""Users apart (issue 21, point 4): on a shared server, Compare › History lists a visitor its own runs and
the runs no visitor owns, never another visitor's runs or the names of the files they uploaded.

Two visitors in Streamlit's AppTest: AppTest gives every session the same id, so each test stands
in for two browser sessions by choosing what ``ui.session_id`` answers while each one's page runs
(the pages and ``ui.start_run`` ask it for the session; tests/browser/test_visitors_browser.py
checks real sessions in a browser).
"""

from __future__ import annotations

import time

import pytest
from streamlit.testing.v1 import AppTest

from fedviz import ui
from fedviz.data.build import DataSpec
from fedviz.runner import get_manager
from fedviz.runner.config import RunConfig
from fedviz.runner.serve.operator import LINK_KEY, operator_token

from apptest import APP, long_sessions  # noqa: F401 - a fixture
from conftest import DATA, plain

SECRET = "grades-of-alice.svm"  # the name visitor A gives the file it uploads


@pytest.fixture
def visitor(monkeypatch):
    """``visitor("a")``: the sessions' pages run as visitor a from now on."""
    current = {"id": "visitor-a"}
    # the pages ask ui.session_id, the adapter's own modules ui.state.session_id: both stand in
    for where in (ui, ui.state):
        monkeypatch.setattr(where, "session_id", lambda: current["id"])
    # A session is a visitor unless its link presents the operator's token, wherever it connects from
    # (test_the_operator_is_the_tab_with_the_token below).
    monkeypatch.delenv("FEDVIZ_OPERATOR", raising=False)

    def switch(name: str) -> None:
        current["id"] = f"visitor-{name}"
    return switch


def _page(page: str, config: RunConfig | None = None, query: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    if config is not None:
        at.session_state["config"] = config
    for key, value in (query or {}).items():
        at.query_params[key] = value
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, at.exception
    return at


def _everything(at: AppTest) -> str:
    """Every text the page shows, the history's option labels included."""
    texts = [e.value for kind in (at.markdown, at.caption, at.info, at.warning, at.error) for e in kind]
    for m in at.multiselect:
        texts += [str(o) for o in m.options] + [str(v) for v in m.value]
    return " ".join(plain(t) for t in texts)


def test_compare_lists_a_visitors_own_runs_and_the_command_lines_never_anothers(visitor, long_sessions):  # noqa: F811
    store = get_manager().store
    cli = store.create_run(label="from the command line", algorithm="gd", status="done")  # no browser: nobody's
    # Visitor A uploads a file under a name that says whose it is, and runs GD on it.
    visitor("a")
    at = _page("pages/data.py", RunConfig(data=DataSpec(source="preset:identical-nodes"), algorithms=(("gd", ()),),
                                          iterations=2))
    at.radio[0].set_value("Upload a LIBSVM file").run()
    at.file_uploader(key="upload-train").set_value((SECRET, (DATA / "heart_scale").read_bytes(),
                                                    "application/octet-stream")).run()
    assert not at.exception and at.session_state["config"].data.name == SECRET
    at.switch_page("pages/run.py")
    at.run()
    next(b for b in at.button if b.label.endswith(" Run")).click().run()
    handle = at.session_state["run"]
    deadline = time.monotonic() + 120
    while not handle.done and time.monotonic() < deadline:
        time.sleep(0.1)
    assert handle.done and set(handle.snapshot().statuses.values()) == {"done"}
    (run_a,) = handle.store_ids.values()
    assert SECRET in store.get_run(run_a).config_json  # the history holds the name (the operator sees it)

    # Visitor B's history: the command line's run, not A's run nor its file's name.
    visitor("b")
    b = _page("pages/compare.py")
    options = b.multiselect[0].options
    assert any(f"#{cli} " in o for o in options) and not any(f"#{run_a} " in o for o in options), options
    assert SECRET not in _everything(b) and "grades" not in _everything(b)
    assert any(c.value.startswith("Listed: the runs started in this tab") for c in b.caption)

    # Visitor A's history lists its run, named by its file, and the command line's.
    visitor("a")
    a = _page("pages/compare.py")
    options = a.multiselect[0].options
    assert any(f"#{run_a} " in o and SECRET in o for o in options), options
    assert any(f"#{cli} " in o for o in options)
    assert a.multiselect[0].value[0] == run_a  # its newest run is drawn first
    assert a.get("plotly_chart") and not a.exception

    # The operator (the tab whose link presented the token: on a laptop, the link the terminal printed) sees
    # every run, as the command line does; the token leaves the address at once.
    visitor("c")
    c = _page("pages/compare.py", query={LINK_KEY: operator_token()})
    assert LINK_KEY not in c.query_params
    options = c.multiselect[0].options
    assert any(f"#{run_a} " in o for o in options) and any(f"#{cli} " in o for o in options), options
    assert any(x.value.startswith("Listed: every run in this server's history") for x in c.caption)

    store.delete_run(run_a)
    store.delete_run(cli)


def test_a_wrong_token_is_a_visitor_told_so_and_none_makes_the_right_one_a_visitor_too(visitor, monkeypatch):
    store = get_manager().store
    theirs = store.create_run(label="a visitor's run", algorithm="gd", status="done", session="visitor-z")
    try:
        visitor("d")
        wrong = AppTest.from_file(APP, default_timeout=180)
        wrong.query_params[LINK_KEY] = "x" * 43
        wrong.run()  # the page the link opens says so, once
        assert LINK_KEY not in wrong.query_params and not wrong.exception
        assert any("operator token is not this server's" in w.value for w in wrong.warning)
        wrong.switch_page("pages/compare.py")
        wrong.run()
        assert f"#{theirs} " not in _everything(wrong)
        monkeypatch.setenv("FEDVIZ_OPERATOR", "none")  # a class at the server's own machine: nobody is
        right = _page("pages/compare.py", query={LINK_KEY: operator_token()})
        assert f"#{theirs} " not in _everything(right)
        assert any(c.value.startswith("Listed: the runs started in this tab") for c in right.caption)
    finally:
        store.delete_run(theirs)
