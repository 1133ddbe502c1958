"""Compare: overlay past runs from the history, export them, and ask 'what if the data were split
differently?' (the paper's FSVRG against FSVRGR)."""

import dataclasses

import streamlit as st

from fedviz import ui
from fedviz.algorithms import ALGORITHMS
from fedviz.data.partition import PARTITION_SPEC, PARTITIONERS, human_label, make_partitioner
from fedviz.plots import convergence_figure
from fedviz.runner import get_manager
from fedviz.runner.store import describe_run

ui.through_navigation()

OWN = "the data's own nodes"


def history_label(r) -> str:
    """A history entry: id, algorithm, status, time, then the data, the partition and every
    setting that differs from the defaults (two runs of GD differ somewhere, and it shows)."""
    when = r.created[:19].replace("T", " ")
    return f"#{r.id} {r.label} · {r.status} · {when} · " + describe_run(r.config, algorithm=r.algorithm,
                                                                         hyper=r.hyper)


def partition_knobs(side: str, choice: str) -> str | None:
    """Inputs for the knobs of partitioner ``choice`` on one side (A or B); the spec string
    ``name:key=value,...`` with the knobs changed from their defaults, None for the data's own
    nodes.  Keys carry the side, so A and B may use the same partitioner with other knobs.
    Raises ``ui.InvalidInput`` (after showing why) when a knob is invalid."""
    if choice == OWN:
        return None
    cls = PARTITIONERS[choice]
    changed = ui.param_inputs(cls.params.values(), owner=choice, key=lambda pname: f"whatif-{side}-{choice}-{pname}")
    return PARTITION_SPEC.join(choice, {pname: cls.params[pname].format(v) for pname, v in changed.items()})


def _choice_label(option: str) -> str:
    return option if option == OWN else ui.partitioner_label(option)


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
                labels = {r.id: history_label(r) for r in runs}
                chosen = st.multiselect("Runs to overlay", list(labels), default=list(labels)[:3],
                                        format_func=labels.get)
                ui.axis_controls("cmp-axis", "cmp-cost")
                if chosen:
                    by_id = {r.id: r for r in runs}
                    overlay = {f"#{i} {by_id[i].label}": store.columns(i) for i in chosen}
                    styles = {f"#{i} {by_id[i].label}": ALGORITHMS[by_id[i].algorithm].title
                              for i in chosen if by_id[i].algorithm in ALGORITHMS}  # each algorithm its own marker
                    fig = convergence_figure(overlay, axis=st.session_state.get("cmp-axis", "iteration"),
                                             round_cost=float(st.session_state.get("cmp-cost", 1.0)), styles=styles)
                    st.plotly_chart(fig, width="stretch")
                    c1, c2, c3 = st.columns(3)  # files made on click, not on every page load
                    c1.download_button("Runs as CSV", lambda: store.export_csv(chosen), "fedviz-runs.csv", "text/csv")
                    c2.download_button("Runs as JSON", lambda: store.export_json(chosen), "fedviz-runs.json",
                                       "application/json")
                    # plotly.js inlined (about 4.6 MB): the file opens offline, and years later.
                    c3.download_button("Figure as HTML", lambda: fig.to_html(include_plotlyjs=True, full_html=True),
                                       "fedviz-figure.html", "text/html")

with tab_whatif:
    config = ui.current_config()
    st.markdown("Run the chosen algorithms on the same data split two ways, side by side. The default pits the "
                "data's own (non-IID) nodes against **reshuffle**, which keeps every node's size but fills it with "
                "random rows — the paper's FSVRG against FSVRGR.")
    names = [ui.algorithm_label(name) + (f" ({', '.join(f'{human_label(k)} = {v}' for k, v in hyper)})"
                                         if hyper else "") for name, hyper in config.algorithms]
    shown = {k: v for k, v in config.as_json().items() if k not in ("algorithms", "iterations", "seed")}
    settings = describe_run(shown, partition=False)
    st.caption(f"Runs {', '.join(names)} on {settings} (the Run page's settings; {config.iterations} "
               f"iterations, seed {config.seed}), once on each partitioning.")
    options = [OWN] + list(PARTITIONERS)
    c1, c2 = st.columns(2)
    invalid = False
    with c1:
        a = st.selectbox("Partition A", options, index=0, key="whatif-a", format_func=_choice_label)
        try:
            spec_a = partition_knobs("a", a)
        except ui.InvalidInput:
            spec_a, invalid = None, True
    with c2:
        b = st.selectbox("Partition B", options, index=options.index("reshuffle"), key="whatif-b",
                         format_func=_choice_label)
        try:
            spec_b = partition_knobs("b", b)
        except ui.InvalidInput:
            spec_b, invalid = None, True
    needs_k = any(choice != OWN and not PARTITIONERS[choice].nodes_from_groups for choice in (a, b))
    nodes = int(st.number_input("Nodes K (for the partitioners that take it)", 1, 100_000, 100, key="whatif-nodes",
                                disabled=not needs_k))
    if st.button(":material/play_arrow: Run both", type="primary", disabled=invalid):
        with ui.guard("Starting the comparison"):
            for key, choice, spec in (("whatif-run-a", a, spec_a), ("whatif-run-b", b, spec_b)):
                k = None if spec is None or PARTITIONERS[choice].nodes_from_groups else nodes
                if spec is not None:
                    make_partitioner(spec, n_nodes=k, seed=config.data.seed)  # a bad knob stops here, named
                data = dataclasses.replace(config.data, partition=spec, nodes=k)
                ui.start_run(dataclasses.replace(config, data=data), key=key)
            st.session_state["whatif-specs"] = (spec_a or OWN, spec_b or OWN)
    ui.axis_controls("whatif-axis", "whatif-cost")
    ran = st.session_state.get("whatif-specs", (None, None))
    left, right = st.columns(2)
    with left:
        st.subheader(f"A: {ran[0] or _choice_label(a)}")
        ui.live_view("whatif-run-a", axis_key="whatif-axis", cost_key="whatif-cost", height=330, stacked=True)
    with right:
        st.subheader(f"B: {ran[1] or _choice_label(b)}")
        ui.live_view("whatif-run-b", axis_key="whatif-axis", cost_key="whatif-cost", height=330, stacked=True)

ui.sync_link()
