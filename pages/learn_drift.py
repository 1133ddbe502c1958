"""Learn · client drift, drawn: FedAvg, SCAFFOLD and FSVRG on an IID and a non-IID split, every node's
local iterate and the server's, round by round, with the nodes' own optima and w* (Sections 3.1, 3.4, 3.6)."""

import streamlit as st

from fedviz import ui
from fedviz.markup import escape
from fedviz.errors import FedvizError
from fedviz.learn.drift import MAX_LOCAL_STEPS, MAX_NODES, MAX_ROUNDS, SPLITS, DriftSettings, drift_view
from fedviz.plots.learn_drift import drift_figure

ui.through_navigation()


@st.cache_data(max_entries=32, show_spinner="Tracing the rounds…")
def views(settings: DriftSettings):
    """Both splits' traces: a pure function of the settings, shared by the sessions asking for them."""
    return [drift_view(split, settings) for split in SPLITS]


st.title("Client drift")
st.markdown(
    "Each round the server sends its model w<sup>t</sup> to the nodes; each node works on its **own** data "
    "(its F<sub>k</sub>, Section 3.3, eq. (6)) and sends back a local model y<sub>k</sub>. On a **non-IID** split "
    "each F<sub>k</sub> has its own optimum w*<sub>k</sub> far from the global w*, and plain local work runs "
    "towards it: **FedAvg**'s average then settles away from w* (it lacks property (A) of Section 3.1). "
    "**SCAFFOLD**'s control variates c − c<sub>k</sub> and **FSVRG**'s variance-reduced local steps (Algorithm 4, "
    "Section 3.6) correct every local step by an estimate of the global gradient, and pull the local models "
    "back. On an **IID** split the nodes' optima sit near w* and the three agree. Press ▶ or move the round "
    "slider under the figure.", unsafe_allow_html=True)

c1, c2, c3, c4 = st.columns(4)
nodes = c1.number_input("Nodes K", 2, MAX_NODES, 4, key="drift-nodes",
                        help="Each node holds 60 rows of a small logistic problem (5 features and a bias).")
steps = c2.number_input("Local steps E (FedAvg, SCAFFOLD)", 1, MAX_LOCAL_STEPS, 10, key="drift-steps",
                        help="Full-batch gradient steps on F_k per round at the step 1/max_k L_k. More local work: "
                             "fewer rounds, and more drift for FedAvg. FSVRG makes one pass over its node's rows.")
rounds = c3.number_input("Rounds", 1, MAX_ROUNDS, 8, key="drift-rounds")
seed = c4.number_input("Seed", 0, 2**32 - 1, 0, key="drift-seed", help="Seeds the data, the split and the samples.")

with ui.guard("Tracing client drift"):
    try:
        settings = DriftSettings(nodes=int(nodes), local_steps=int(steps), rounds=int(rounds), seed=int(seed))
    except FedvizError as e:
        st.error(escape(str(e)))
        st.stop()
    vs = views(settings)
    st.plotly_chart(drift_figure(vs), width="stretch", key="drift-figure")
    st.caption("Each panel is the plane of the two principal directions of all its row's points, through w*, "
               "its two axes scaled to fill the panel "
               f"(the plane shows {100 * vs[0].plane.explained:.0f}% of their spread on the IID split, "
               f"{100 * vs[1].plane.explained:.0f}% on the non-IID one). The non-IID split gives each node one "
               "label: " + ", ".join(f"node {k + 1}: {100 * p:.0f}% +1" for k, p in enumerate(vs[1].node_labels))
               + ".")
    st.caption("This lesson draws its own small two-class problem (logistic regression on a few features, so that "
               "the nodes' paths can be drawn on one plane), whatever the data set in force.")
    st.table({
        "after the last round": ["‖w − w*‖, IID", "‖w − w*‖, non-IID",
                                 "local iterates' mean ‖y_k − w*‖ ÷ ‖w⁰ − w*‖, non-IID"],
        **{title: [f"{vs[0].final_distances()[title]:.3g}", f"{vs[1].final_distances()[title]:.3g}",
                   f"{vs[1].drift()[title]:.3g}"] for title in vs[0].final_distances()},
    })

ui.sync_link()
