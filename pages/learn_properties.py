"""Learn · Properties (A)–(D): every algorithm against the desirable properties of Section 3.1,
each cell measured on the property's own data, beside what the paper says; a click shows its curve."""

import streamlit as st

from fedviz import ui
from fedviz.markup import escape
from fedviz.errors import FedvizError
from fedviz.learn.matrix import (MATRIX_LOSSES, PROPERTIES, PROPERTY_QUOTE, PROPERTY_TEXT, START_TEXT, MatrixConfig,
                                 properties_matrix)
from fedviz.plots.learn_matrix import COLUMN_TITLES, cell_at, cell_figure, matrix_figure

ui.through_navigation()


@st.cache_data(max_entries=8, show_spinner="Measuring every cell (a few seconds)…")
def _matrix(config: MatrixConfig):
    return properties_matrix(config)


st.title("Properties (A)–(D)")
st.markdown(
    "Section 3.1 of the paper asks four things of an algorithm for federated optimization: **(A)** started at "
    "the optimum, it stays there; it converges in O(1) rounds of communication when **(B)** all data are on one "
    "node, **(C)** each feature occurs on a single node, **(D)** every node holds the same data. Each cell below "
    "is *measured* now, on the property's own data, with each algorithm's defaults as the Run page offers "
    "them — where a property is about a setting (DANE's (D) at the paper's η = 1, μ = 0), the cell pins that "
    "setting and says why — and names every setting it ran (hover a cell, or click it); it is set beside what "
    "the paper says (or that it says nothing). (A) runs the methods that "
    "sample nodes with every node and full batches (their drift alone) and then with their defaults (drift "
    "plus sampling noise); (B) deals one node's data to 10 nodes, one keeping 99.7% of the rows (with a single "
    "node every method's local problem is f itself); (C) runs the dual methods at σ = max ω^j. "
    "**Click a cell** for its curves.")

with st.expander("Settings", expanded=False):
    c1, c2, c3, c4, c5 = st.columns(5)
    loss = c1.selectbox("Loss", list(MATRIX_LOSSES), key="learn-props-loss",
                        help="logistic: the paper's experiment; squared (ridge regression) also runs the "
                             "Appendix's primal and dual methods; softmax: the same rows in three classes "
                             "(the −1 rows, and the +1 rows split in two), for the algorithms that take it.")
    eps = c2.selectbox("ε for (B)–(D)", [1e-3, 1e-4, 1e-5, 1e-6, 1e-8, 1e-10], index=3, format_func="{:.0e}".format,
                       key="learn-props-eps", help="A cell counts the rounds until f(w) − f* ≤ ε.")
    budget = c3.number_input("Round budget", min_value=1, max_value=200, value=20, key="learn-props-budget",
                             help="(B)–(D): rounds run at most (iterations for the centralised references).")
    o1 = c4.number_input("O(1) means ≤ rounds", min_value=1, max_value=200, value=4, key="learn-props-o1",
                         help="A run that reaches ε within this many rounds has the property: two iterations "
                              "of a two-round method such as DANE or FSVRG.")
    seed = c5.number_input("Seed", min_value=0, max_value=2**32 - 1, value=0, key="learn-props-seed",
                           help="Seeds every algorithm's random choices.")

config = None
try:
    config = MatrixConfig(loss=loss, eps=float(eps), max_rounds=int(budget), o1_rounds=int(o1), seed=int(seed))
except FedvizError as e:
    st.error(escape(str(e)), icon=":material/error:")

matrix = None
if config is not None:
    with ui.guard("Measuring the properties"):
        matrix = _matrix(config)

if matrix is not None:
    state = st.session_state
    state.setdefault("learn-props-algorithm", "fedavg" if "fedavg" in matrix.algorithms else matrix.algorithms[0])
    state.setdefault("learn-props-property", "A")
    shown = (state["learn-props-algorithm"], state["learn-props-property"])
    event = st.plotly_chart(matrix_figure(matrix, selected=shown), key="learn-props-matrix", on_select="rerun",
                            selection_mode="points", config={"displayModeBar": False})
    points = list(getattr(getattr(event, "selection", None), "points", None) or [])
    clicked = cell_at(matrix, points[0]) if points else None
    if clicked is None:  # no selection (or it was cleared): the next click counts, even on the same cell
        state.pop("learn-props-clicked", None)
    elif clicked != state.get("learn-props-clicked"):
        state["learn-props-clicked"] = clicked
        if clicked != shown:
            state["learn-props-algorithm"], state["learn-props-property"] = clicked
            st.rerun()
    n_dis = len(matrix.disagreements())
    st.caption(
        f"{len(matrix.cells)} cells measured in {matrix.seconds:.1f} s. Green: measured to have the property; red: "
        "not; grey: the algorithm cannot run this case. \"paper: …\" is what the paper says, where it says "
        f"anything (Section 3); a black ring and ≠ mark where the measurement contradicts it ({n_dis} "
        f"cell{'s' * (n_dis != 1)}).")

    titles = {c.algorithm: c.title for c in matrix.cells}
    left, right = st.columns([1, 1])
    name = left.selectbox("Algorithm", list(matrix.algorithms), format_func=titles.get, key="learn-props-algorithm")
    prop = right.selectbox("Property", list(PROPERTIES), format_func=lambda p: f"({p}) {PROPERTY_TEXT[p]}",
                           key="learn-props-property")
    cell = matrix.cell(name, prop)
    st.subheader(f"{cell.title} × {COLUMN_TITLES[prop]}")
    verdict = {True: ":green[**Measured: has it.**]", False: ":red[**Measured: lacks it.**]",
               None: "**Not measured.**"}[cell.has]
    st.markdown(f"{verdict} {cell.detail}")
    if cell.runs:
        st.markdown("**Ran** (the verdict is the first run's):\n"
                    + "\n".join(f"{i}. From {START_TEXT[run.start]}, {run.ran} → **{run.text}**"
                                 for i, run in enumerate(cell.runs, 1)))
    if cell.why:
        st.markdown(f"**Why**: {cell.why}")
    st.markdown(f"**Section 3.1, property ({prop})**: *\"{PROPERTY_QUOTE[prop]}\"*")
    where = f" ({cell.claim.where})" if cell.claim.where != "—" else ""
    st.markdown(f"**What the paper says**{where}: *{cell.claim.words}* — {cell.claim.note}"
                + ("  \n:orange[**The measurement contradicts the paper here.**]"
                   if cell.agreement == "disagrees" else ""))
    st.plotly_chart(cell_figure(cell, o1_rounds=config.o1_rounds), key="learn-props-curve",
                    config={"displayModeBar": False})
    st.caption(f"Data of ({prop}): {matrix.specs[prop]} — {matrix.cases[prop]}"
               + (". Softmax: its rows in three classes — the −1 rows, and the +1 rows split by the sign of xᵀv "
                  "(v a seeded Gaussian) — so the model is d × 3" if config.loss == "softmax" else ""))

ui.sync_link()
