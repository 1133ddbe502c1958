"""The Data page's inputs of the data settings, walked from their table (fedviz.data.settings): each setting has an
input labelled and explained by its Param, bounded by its range, and a value the range leaves out is a message
naming the setting and the range, the session keeping its data set.  The link, the command line and an
experiment file are walked in tests/unit/test_data_settings.py."""

import pytest

from fedviz import ui
from fedviz.data.build import DataSpec
from fedviz.data.settings import DATA_SETTINGS, settings_of
from fedviz.runner.config import RunConfig, from_query

from apptest import open_page
from conftest import DATA, plain

#: Two sessions that between them show every input: a preset split into new nodes (the partition, K, the
#: data seed, the test fraction, the unseen share, the dealing of test rows) and a file (its test rows' split).
SESSIONS = {"preset": DataSpec("preset:identical-nodes", partition="iid", nodes=4),
            "file": DataSpec(str(DATA / "heart_scale"), partition="iid", nodes=5)}
KINDS = ("number_input", "selectbox", "checkbox", "text_input")


@pytest.fixture(scope="module")
def pages():
    return {name: open_page("pages/data.py", RunConfig(data=data), timeout=180) for name, data in SESSIONS.items()}


def _inputs(at):
    return [w for kind in KINDS for w in getattr(at, kind)]


@pytest.mark.parametrize("name", list(DATA_SETTINGS))
def test_every_setting_has_its_input_labelled_explained_and_bounded_by_its_param(pages, name):
    p = DATA_SETTINGS[name]
    found = [w for at in pages.values() for w in _inputs(at) if w.label == p.shown_label]
    assert found, f"no input labelled {p.shown_label!r} on the Data page"
    for w in found:
        assert w.help == ui.param_help(p)
        if p.kind in ("int", "float"):
            assert (w.min, w.max) == p.bounds
        if p.kind == "choice":  # the options as the page words them, one per choice
            assert len(w.options) == len(p.choices) and w.value in p.choices


def test_the_inputs_start_from_the_session_and_leave_it_as_it_was(pages):
    """Drawn from the session's settings, the page hands the same settings back (no input moves a value)."""
    for name, at in pages.items():
        assert not at.exception and not at.error, (name, [plain(e.value) for e in at.error])
        assert settings_of(at.session_state["config"].data) == settings_of(SESSIONS[name])


@pytest.mark.parametrize("name", [n for n, p in DATA_SETTINGS.items() if p.kind == "float" and p.high_open])
def test_the_top_an_open_range_leaves_out_is_a_message_naming_the_setting(name):
    """A number input's top is the range's end; where the range leaves it out (a share below 1) the page says
    so beneath the input, in the words of the link and the command line, and keeps the session's data set."""
    p = DATA_SETTINGS[name]
    at = open_page("pages/data.py", RunConfig(data=SESSIONS["preset"]), timeout=180)
    before = at.session_state["config"]
    box = next(w for w in at.number_input if w.label == p.shown_label)
    box.set_value(p.bounds[1]).run()
    assert not at.exception
    said = f"parameter {name}={p.bounds[1]!r} is out of range: allowed {p.range_text()}"
    assert any(said in plain(e.value) for e in at.error), [plain(e.value) for e in at.error]
    assert at.session_state["config"] == before
    assert from_query({name: repr(p.bounds[1])})[1] == [f"{name}: {said}"]  # the link's words
