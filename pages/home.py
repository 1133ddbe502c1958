"""Home: what federated optimization is, and the paper's experiment in one click."""

import streamlit as st

from fedviz import ui
from fedviz.runner.config import RunConfig

ui.through_navigation()

st.title("fedviz — federated optimization, live")
st.markdown(
    "In **federated optimization** one model is trained from data that stay on very many devices: the data are "
    "massively distributed, non-IID, unbalanced and sparse, and every round of communication is expensive. "
    "Classic distributed methods assume the opposite, so they slow down or fail here. "
    "fedviz lets you watch that happen and compare the algorithms of Konečný, McMahan, Ramage and Richtárik "
    "(2016), *Federated Optimization: Distributed Machine Learning for On-Device Intelligence*, with today's "
    "baselines.")

st.markdown(
    "**New here?** The guided tour opens each page already set up for one lesson — why FSVRG wins, why the "
    "per-node majority beats the optimum, what rare features need — with a sentence on what to look at.")
st.page_link("pages/learn_tour.py", label="Start the guided tour", icon=":material/school:")

if st.button(":material/play_arrow: Reproduce the paper's experiment (small)", type="primary",
             help="FSVRG, GD and CoCoA+ on google-plus-small: 500 nodes, about 50,000 posts, 30 iterations"):
    with ui.guard("Starting the experiment"):
        config = RunConfig()  # google-plus-small, FSVRG + GD + CoCoA+, 30 iterations: the defaults
        ui.set_config(config)
        ui.start_run(config, key="run")

if st.session_state.get("run") is not None:
    st.markdown(
        "The button above runs the paper's Figure 2 on 500 simulated authors: FSVRG (green circles), GD (teal "
        "diamonds), CoCoA+ (purple triangles). Switch the x axis to communication rounds, the cost that matters in "
        "federated optimization; the sentences under each chart say what to look at.")
    ui.axis_controls()
    ui.live_view("run")
    st.page_link("pages/run.py", label="Open the Run page to change algorithms and hyperparameters", icon=":material/play_arrow:")
else:
    st.markdown(
        "**Then explore:** on **Data** generate a non-IID data set or upload a LIBSVM file and choose how it is "
        "split over nodes; on **Run** pick algorithms and hyperparameters; on **Compare** overlay past runs or "
        "ask *what if the data were split differently?*")
ui.sync_link()
