"""The x axis and the round cost are in the link (issue 31, point 2).

Communication rounds chosen on the Run page came back as Iterations in a new tab: the link carried the run's
settings only.  Here each choice is made on the page three times in a row and read back from the link, kept
across a page without the control, and a new session opened on the link starts on the same axis; a value no
control offers is refused by name and the axis starts at its default.
"""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from apptest import APP, open_page
from conftest import plain
from fedviz.plots import X_AXES
from fedviz.ui.state import DEFAULT_AXIS, ROUND_COSTS


def _opened_on(query: dict, page: str = "pages/run.py") -> AppTest:
    """A new tab opened on a link with ``query`` (app.py's navigation reads it first, then the page)."""
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, at.exception
    return at


def test_each_axis_chosen_is_in_the_link_and_a_new_tab_opens_on_it():
    at = open_page("pages/run.py")
    choices = [a for a in X_AXES if a != DEFAULT_AXIS]
    for axis in (choices[0], choices[1], choices[0]):  # three changes in a row, one of them back
        at.radio(key="axis").set_value(axis).run()
        assert not at.exception, at.exception
        assert at.radio(key="axis").value == axis
        assert dict(at.query_params).get("axis") in ([axis], axis)
    at.radio(key="axis").set_value(DEFAULT_AXIS).run()
    assert "axis" not in dict(at.query_params)  # the default is where a new tab starts: not written

    at.radio(key="axis").set_value("rounds").run()
    at.switch_page("pages/data.py").run()  # a page without the control keeps it in the link
    assert dict(at.query_params).get("axis") in (["rounds"], "rounds")
    at.switch_page("pages/run.py").run()
    assert at.radio(key="axis").value == "rounds"

    new = _opened_on({"axis": "rounds"})
    assert new.radio(key="axis").value == "rounds"
    assert not [w for w in new.warning if "link" in w.value]


def test_the_round_cost_of_simulated_time_is_in_the_link():
    at = _opened_on({"axis": "simulated"})
    assert at.radio(key="axis").value == "simulated"
    picks = [c for c in ROUND_COSTS if c not in (0.0, 0.01)][:3]
    for cost in picks:
        at.select_slider(key="round_cost").set_value(cost).run()
        assert not at.exception, at.exception
        assert float(dict(at.query_params)["round_cost"][0] if isinstance(dict(at.query_params)["round_cost"], list)
                     else dict(at.query_params)["round_cost"]) == cost
    new = _opened_on({"axis": "simulated", "round_cost": f"{picks[-1]:g}"})
    assert new.select_slider(key="round_cost").value == picks[-1]


def test_a_view_value_no_control_offers_is_named_and_left_at_its_default():
    at = _opened_on({"axis": "furlongs", "round_cost": "7"})
    assert at.radio(key="axis").value == DEFAULT_AXIS
    said = " ".join(plain(w.value) for w in at.warning)
    assert "axis: 'furlongs' is not an x axis" in said and "round_cost: '7' is not a cost" in said, said
