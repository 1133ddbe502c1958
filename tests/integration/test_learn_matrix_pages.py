"""The Learn section's properties matrix and equivalences pages through Streamlit's AppTest: they
open without an error, draw what fedviz computes (the matrix of every registered algorithm, the
equivalences' distances at the paper's identity), follow their controls, and name a bad setting."""

import base64
import json

import numpy as np
from streamlit.testing.v1 import AppTest

from apptest import open_page
from conftest import plain
from fedviz.algorithms import ALGORITHMS
from fedviz.learn import matrix as M



def _page(page: str) -> AppTest:
    at = open_page(page, timeout=300)
    assert not at.error, [plain(e.value) for e in at.error]
    return at


def _figures(at) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def _cells(figure) -> dict:
    """(algorithm, property) → the label the matrix figure prints beside its square."""
    out = {}
    for trace in figure["data"]:
        for (name, prop), text in zip(trace.get("customdata") or [], trace.get("text") or []):
            out[(name, prop)] = text.replace("<br>", " ")  # as one line (it wraps to its column)
    return out


def _values(v) -> list:
    """A figure's array as a list: Plotly writes NumPy arrays as base64 ('bdata' with its dtype)."""
    if isinstance(v, dict) and "bdata" in v:
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"])).tolist()
    return list(v)


def _text(at) -> str:
    return "\n".join(m.value for m in at.markdown) + "\n".join(c.value for c in at.caption)


def test_the_properties_page_draws_every_registered_algorithm_and_shows_a_cell():
    at = _page("pages/learn_properties.py")
    matrix_fig, curve_fig = _figures(at)
    cells = _cells(matrix_fig)
    assert set(cells) == {(n, p) for n in ALGORITHMS for p in M.PROPERTIES}
    # The page shows what fedviz measures (the same settings, computed here in-process).
    measured = M.properties_matrix(M.MatrixConfig())
    for cell in measured.cells:
        assert cells[(cell.algorithm, cell.prop)].startswith(cell.text)
    # The first cell shown is FedAvg's drift from w*: property (A) fails, as a drift, and the page names
    # both runs (every node and full batches; the defaults' sampling) with their hyperparameters.
    fedavg = measured.cell("fedavg", "A")
    text = _text(at)
    assert not fedavg.has and fedavg.detail in text and fedavg.why in text
    names = [trace.get("name", "") for trace in curve_fig["data"]]
    for run in fedavg.runs:  # the page says what each run ran; its curve carries its label
        assert run.ran in text, (run.ran, text)
        assert any(run.label.startswith(n.removesuffix("…")) for n in names), (run.label, names)  # cut for the legend
    assert M.PROPERTY_QUOTE["A"] in text
    assert _values(curve_fig["data"][0]["x"]) == list(fedavg.x)
    assert len(curve_fig["data"]) == len(fedavg.runs)
    # Choosing another cell shows it: DANE on a dominant node climbs, as Section 3.4 says it would lack (B).
    at.selectbox(key="learn-props-algorithm").set_value("dane").run()
    at.selectbox(key="learn-props-property").set_value("B").run()
    assert not at.exception
    text = _text(at)
    dane = measured.cell("dane", "B")
    assert dane.detail in text and "climbed" in dane.detail and dane.why in text
    assert "contradicts the paper" not in text and "Unfortunately, DANE does not achieve" in text
    assert "2,991 of the 3,000 rows" in text


def test_the_squared_loss_measures_the_appendix_methods_and_a_bad_budget_is_named():
    at = _page("pages/learn_properties.py")
    before = _cells(_figures(at)[0])
    only_squared = [n for n, c in ALGORITHMS.items() if "logistic" not in c.losses]
    assert only_squared and all("loss only" in before[(n, "B")] for n in only_squared)
    at.selectbox(key="learn-props-loss").set_value("squared").run()
    assert not at.exception and not at.error
    after = _cells(_figures(at)[0])
    assert all("loss only" not in after[(n, p)] for n in only_squared for p in M.PROPERTIES)
    # An O(1) threshold beyond the budget cannot be judged: the page names the setting and its range.
    at.number_input(key="learn-props-budget").set_value(3).run()
    assert any("o1_rounds" in plain(e.value) and "max_rounds" in plain(e.value) for e in at.error), [plain(e.value) for e in at.error]
    assert not at.exception


def test_the_equivalences_page_prints_distances_at_the_papers_identity():
    at = _page("pages/learn_equivalences.py")
    p1, t5 = (float(m.value) for m in at.metric)
    assert p1 <= 1e-12 and t5 <= 1e-9
    assert len(at.success) == 2 and all("as the paper states" in s.value for s in at.success)
    assert len(_figures(at)) == 2
    # Both curves of each figure are drawn at every iteration, and coincide (the identity).
    for fig in _figures(at):
        a, b = _values(fig["data"][0]["y"]), _values(fig["data"][1]["y"])
        assert len(a) == len(b) == 11
        np.testing.assert_allclose(a, b, rtol=1e-8)
    # Controls: more iterations and another loss for Proposition 1, σ = 1 and a random start for Theorem 5.
    at.number_input(key="learn-eq-p1-iterations").set_value(4).run()
    at.selectbox(key="learn-eq-p1-loss").set_value("smoothed-hinge").run()
    at.number_input(key="learn-eq-t5-sigma").set_value(1.0).run()
    at.radio(key="learn-eq-t5-start").set_value("random").run()
    assert not at.exception and not at.error
    assert "over 4 iterations" in at.success[0].value
    assert "σ = 1" in "\n".join(c.value for c in at.caption)
    p1, t5 = (float(m.value) for m in at.metric)
    assert p1 <= 1e-12 and t5 <= 1e-9


def test_a_sigma_beyond_k_is_named_with_its_range():
    at = _page("pages/learn_equivalences.py")
    at.selectbox(key="learn-eq-t5-data").set_value("identical-nodes").run()
    at.number_input(key="learn-eq-t5-sigma").set_value(50.0).run()
    assert not at.exception
    errors = [plain(e.value) for e in at.error]
    assert any("sigma" in e and "10" in e for e in errors), errors
    # Proposition 1 above it still runs.
    assert len(at.success) == 1
