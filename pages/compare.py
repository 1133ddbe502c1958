"""Compare: overlay past runs from the history, export them, and ask 'what if the data were split
differently?' (the paper's FSVRG against FSVRGR)."""

import dataclasses

import streamlit as st

from fedviz import ui
from fedviz.data.partition import PARTITIONERS
from fedviz.plots import convergence_figure
from fedviz.runner import get_manager

ui.through_navigation()

st.title("Compare")
tab_history, tab_whatif = st.tabs(["History", "What if: two partitionings"])

with tab_history:
    with ui.guard("Reading the run history"):
        store = get_manager().store
        if store is None:
            st.warning("The run history is unavailable on this server; runs are kept in memory only.")
        else:
            runs = store.list_runs(limit=200)
            if not runs:
                st.info("No runs yet. Start one on the Run page; every run is kept here, across restarts.")
            else:
                labels = {r.id: f"#{r.id} {r.label} · {r.status} · {r.created[:19].replace('T', ' ')} · "
                                f"{(r.config.get('data') or {}).get('source', '')}" for r in runs}
                chosen = st.multiselect("Runs to overlay", list(labels), default=list(labels)[:3],
                                        format_func=labels.get)
                ui.axis_controls("cmp-axis", "cmp-cost")
                if chosen:
                    overlay = {f"#{i} {next(r.label for r in runs if r.id == i)}": store.columns(i) for i in chosen}
                    fig = convergence_figure(overlay, axis=st.session_state.get("cmp-axis", "iteration"),
                                             round_cost=float(st.session_state.get("cmp-cost", 1.0)))
                    st.plotly_chart(fig, width="stretch")
                    c1, c2, c3 = st.columns(3)  # files made on click, not on every page load
                    c1.download_button("Runs as CSV", lambda: store.export_csv(chosen), "fedviz-runs.csv", "text/csv")
                    c2.download_button("Runs as JSON", lambda: store.export_json(chosen), "fedviz-runs.json",
                                       "application/json")
                    c3.download_button("Figure as HTML", lambda: fig.to_html(include_plotlyjs="cdn", full_html=True),
                                       "fedviz-figure.html", "text/html")

with tab_whatif:
    config = ui.current_config()
    st.markdown("Run the chosen algorithms on the same data split two ways, side by side. The default pits the "
                "data's own (non-IID) nodes against **reshuffle**, which keeps every node's size but fills it with "
                "random rows — the paper's FSVRG against FSVRGR.")
    own = "the data's own nodes"
    options = [own] + list(PARTITIONERS)
    c1, c2 = st.columns(2)
    a = c1.selectbox("Partition A", options, index=0, key="whatif-a")
    b = c2.selectbox("Partition B", options, index=options.index("reshuffle"), key="whatif-b")
    nodes = st.number_input("Nodes for partitioners that need K", 1, 100_000, 100, key="whatif-nodes")
    if st.button(":material/play_arrow: Run both", type="primary"):
        with ui.guard("Starting the comparison"):
            for key, choice in (("whatif-run-a", a), ("whatif-run-b", b)):
                part = None if choice == own else choice
                k = None if part in (None, "natural", "reshuffle") else int(nodes)
                data = dataclasses.replace(config.data, partition=part, nodes=k)
                ui.start_run(dataclasses.replace(config, data=data), key=key)
    ui.axis_controls("whatif-axis", "whatif-cost")
    left, right = st.columns(2)
    with left:
        st.subheader(f"A: {a}")
        ui.live_view("whatif-run-a", axis_key="whatif-axis", cost_key="whatif-cost", height=330, stacked=True)
    with right:
        st.subheader(f"B: {b}")
        ui.live_view("whatif-run-b", axis_key="whatif-axis", cost_key="whatif-cost", height=330, stacked=True)
