"""Learn · the efficiency paradigm (Section 2.3.1, eq. (3)): from runs in the history, I(ε) and T_A(ε)
per algorithm, TIME = I(ε)(c + T_A(ε)) against the cost c of a round, and who wins where."""

import streamlit as st

from fedviz import ui
from fedviz.algorithms import ALGORITHMS
from fedviz.learn.efficiency import (epsilon_choices, group_runs, history_groups, paradigm, seconds_text,
                                     suggested_epsilon)
from fedviz.plots.learn_efficiency import efficiency_figure
from fedviz.runner import get_manager
from fedviz.runner.config import RunConfig

ui.through_navigation()

#: The one-click set: the paper's three (Figure 2) and FedAvg, on google-plus-small, 30 iterations.
DEFAULT_RUN = RunConfig(algorithms=(("fsvrg", ()), ("gd", ()), ("cocoa-plus", ()), ("fedavg", ())))

st.title("The efficiency paradigm")
st.markdown(
    "Which algorithm is fastest depends on the network. The paper (Section 2.3.1, eq. (3)) measures an "
    "algorithm A by **TIME = I(ε) × (c + T<sub>A</sub>(ε))**: I(ε) rounds of communication to reach accuracy ε, "
    "each costing c to communicate and T<sub>A</sub> to compute. Many cheap rounds win in a data centre "
    "(c ≪ T<sub>A</sub>); few expensive ones win over phones on a slow network (c ≫ T<sub>A</sub>). "
    "Here I(ε) and T<sub>A</sub>(ε) are read off runs that ran: the rounds up to the first record with "
    "f − f* ≤ ε, and the measured computation per round up to it.", unsafe_allow_html=True)


def compare(store, group) -> None:
    """ε, the runs compared, the figure of eq. (3), who wins where, and each run's I(ε) and T_A(ε)."""
    every = group_runs(store, group)
    shown = st.multiselect("Runs compared", list(every), key=f"eff-runs-{group.group_id}", default=list(every),
                           help="Take the fastest out to see who wins among the others.")
    runs = {label: every[label] for label in shown}
    if not runs:
        st.info("Choose at least one run.")
        return
    algorithms = {label: a for label, a in zip(every, group.algorithms) if label in runs}
    choices = epsilon_choices(runs)
    if not choices:
        st.info("These runs have no finite f − f* to compare.")
        return
    start = suggested_epsilon(runs)
    eps = st.select_slider(
        "ε: the suboptimality f − f* to reach", choices, format_func=lambda e: f"{e:.3g}",
        key=ui.seeded(f"eff-eps-{group.group_id}-{len(runs)}",
                      min(choices, key=lambda e: abs(e - start)) if start else choices[-1]),
        help="From the best value any run reached up to where they started. It opens at the hardest target "
             "where the fastest algorithm changes with c, if there is one.")
    p = paradigm(runs, eps, algorithms=algorithms)
    styles = {label: ALGORITHMS[a].title for label, a in algorithms.items() if a in ALGORITHMS}
    st.plotly_chart(efficiency_figure(p, styles=styles), width="stretch", key="eff-figure")
    st.markdown("**" + p.describe().replace("*", "\\*") + "**")  # f* is not markdown's emphasis
    st.table({
        "run": [e.label for e in p.entries],
        "I(ε): rounds": [str(e.rounds) if e.reached else "not reached" for e in p.entries],
        "iterations": [str(e.iterations) if e.reached else "—" for e in p.entries],
        "T_A(ε) per round": [seconds_text(e.compute) if e.reached and e.rounds else "—" for e in p.entries],
        "TIME at c = 1 ms": [seconds_text(e.time(1e-3)) if e.reached else "—" for e in p.entries],
        "TIME at c = 10 s": [seconds_text(e.time(10.0)) if e.reached else "—" for e in p.entries],
    })
    if p.crossovers:
        st.caption("Where two lines meet, c = (I_b T_b − I_a T_a) / (I_a − I_b): " + "; ".join(
            f"{x.faster_below} faster below c = {seconds_text(x.c)}, {x.faster_above} above" for x in p.crossovers)
            + ".")
    st.caption("T_A is measured on this server, with the other sessions' work around it: the same runs on another "
               "machine move the crossovers, not the rounds.")



groups: list = []
with ui.guard("Reading the run history"):
    store = get_manager().store
    if store is None:
        st.warning("The run history is unavailable on this server; runs are kept in memory only.")
    groups = [] if store is None else history_groups(store)
    with st.container(border=not groups):
        if not groups:
            st.info("The history has no finished runs to compare yet (two or more algorithms started by one "
                    "Run click). Run a small default set here, or any set on the Run page.")
        label = ":material/play_arrow: Run FSVRG, GD, CoCoA+ and FedAvg on google-plus-small (30 iterations)"
        if st.button(label, type="primary" if not groups else "secondary", key="eff-start"):
            ui.start_run(DEFAULT_RUN, key="eff-run")
        if st.session_state.get("eff-run") is not None and not st.session_state["eff-run"].done:
            ui.live_view("eff-run", axis_key="eff-axis", cost_key="eff-cost", height=300)

if groups:
    with ui.guard("Comparing the runs"):
        by_id = {g.group_id: g for g in groups}
        gid = st.selectbox("Runs started together (newest first)", list(by_id), format_func=lambda k: by_id[k].title(),
                           key="eff-group")
        compare(store, by_id[gid])

ui.sync_link()
