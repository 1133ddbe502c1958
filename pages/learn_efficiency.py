"""Learn · the efficiency paradigm (Section 2.3.1, eq. (3)): from runs in the history, I(ε) and T_A(ε)
per algorithm, TIME = I(ε)(c + T_A(ε)) against the cost c of a round, and who wins where."""

import json

import streamlit as st

from fedviz import ui
from fedviz.algorithms import ALGORITHMS
from fedviz.learn.efficiency import (epsilon_choices, group_runs, history_groups, page_setup, paradigm,
                                     seconds_text, setup_group, suggested_epsilon, work_caption, work_text)
from fedviz.plots.learn_efficiency import efficiency_figure
from fedviz.runner import get_manager

ui.through_navigation()

st.title("The efficiency paradigm")
st.markdown(
    "Which algorithm is fastest depends on the network. The paper (Section 2.3.1, eq. (3)) measures an "
    "algorithm A by **TIME = I(ε) × (c + T<sub>A</sub>(ε))**: I(ε) rounds of communication to reach accuracy ε, "
    "each costing c to communicate and T<sub>A</sub> to compute. Many cheap rounds win in a data centre "
    "(c ≪ T<sub>A</sub>); few expensive ones win over phones on a slow network (c ≫ T<sub>A</sub>). "
    "Here I(ε) and T<sub>A</sub>(ε) are read off runs that ran: the rounds up to the first record with "
    "f − f* ≤ ε, and the work a node did per round up to it.", unsafe_allow_html=True)


def compare(store, group) -> None:
    """ε, the runs compared, the figure of eq. (3), who wins where, and each run's I(ε) and T_A(ε)."""
    every = group_runs(store, group)
    shown = st.multiselect("Runs compared", list(every), wrap=True, key=f"eff-runs-{group.group_id}", default=list(every),
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
    start = suggested_epsilon(runs, algorithms=algorithms)
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
        "run": [e.label + (" (centralised, not ranked)" if e.central else "") for e in p.entries],
        "I(ε): rounds": ["none (centralised)" if e.central else str(e.rounds) if e.reached else "not reached"
                         for e in p.entries],
        "iterations": [str(e.iterations) if e.reached else "—" for e in p.entries],
        "examples per node per round": [work_text(e) for e in p.entries],
        "T_A(ε) per round": [seconds_text(e.compute) if e.reached and e.rounds else "—" for e in p.entries],
        "TIME at c = 1 ms": [seconds_text(e.time(1e-3)) if e.reached and not e.central else "—"
                             for e in p.entries],
        "TIME at c = 10 s": [seconds_text(e.time(10.0)) if e.reached and not e.central else "—"
                             for e in p.entries],
    })
    if p.crossovers:
        st.caption("Where two lines meet, c = (I_b T_b − I_a T_a) / (I_a − I_b): " + "; ".join(
            f"{x.faster_below} faster below c = {seconds_text(x.c)}, {x.faster_above} above" for x in p.crossovers)
            + ".")
    st.caption(work_caption(p))



config = ui.current_config()
ui.show_query_problems()
multiclass, n_classes = False, None
with ui.guard("Loading the data set"):
    ds = ui.load_dataset(config.data)
    multiclass, n_classes = ds.multiclass, ds.n_classes
setup = page_setup(config, multiclass)  # softmax on many classes, and only the algorithms that take it
names = [ALGORITHMS[n].title for n, _ in setup.algorithms]
what = (", ".join(names[:-1]) + " and " + names[-1]) if len(names) > 1 else names[0]
source = str(setup.data.source).removeprefix("preset:")
groups: list = []
with ui.guard("Reading the run history"):
    store = get_manager().store
    if store is None:
        st.warning("The run history is unavailable on this server; runs are kept in memory only.")
    groups = [] if store is None else history_groups(store, visible_to=ui.history_viewer())  # not others' runs
    by_id = {g.group_id: g for g in groups}
    own = setup_group(groups, setup)
    handle = st.session_state.get("eff-run")
    # Which group the page shows: the one its own Run just finished (once, when it finishes), else the
    # newest group of this page's setup (a lesson's own runs, by their settings), else none until chosen.
    if handle is not None and handle.done and handle.id in by_id and st.session_state.get("eff-followed") != handle.id:
        st.session_state["eff-followed"] = handle.id
        st.session_state["eff-group"] = handle.id
    key = json.dumps(setup.as_json(), sort_keys=True, default=str)
    if st.session_state.get("eff-setup") != key:  # a new setup (a lesson opened): its own group
        st.session_state["eff-setup"] = key
        st.session_state["eff-group"] = own.group_id if own is not None else None
    if st.session_state.get("eff-group") not in by_id:
        st.session_state["eff-group"] = None
    with st.container(border=own is None):
        same = set(setup.algorithms) <= set(config.algorithms)  # the settings in force, or some of them
        st.markdown(f"**This page's setup**: {what} on {source}, {setup.iterations} iterations, seed {setup.seed} "
                    f"(the settings in force{'' if same else ', with the default federated methods'}; "
                    "a lesson's link sets them).")
        refused = [why for name, hyper in config.algorithms if name not in dict(setup.algorithms)
                   for why in [ALGORITHMS[name].loss_refusal(setup.loss, dict(hyper))] if why]
        if refused:
            st.caption(f"Left out on these {n_classes} classes (softmax): " + "; ".join(refused) + ".")
        if own is None:
            st.info("The history has no finished runs of this setup yet. Press **Run** (a few seconds), or "
                    "choose runs started earlier below." if groups else
                    "The history has no finished runs to compare yet (two or more algorithms started by one "
                    "Run click). Run this page's setup here, or any set on the Run page.")
        label = f":material/play_arrow: Run {what} on {source} ({setup.iterations} iterations)"
        if st.button(label, type="primary" if own is None else "secondary", key="eff-start"):
            ui.start_run(setup, key="eff-run")
        if st.session_state.get("eff-run") is not None and not st.session_state["eff-run"].done:
            ui.live_view("eff-run", axis_key="eff-axis", cost_key="eff-cost", height=300)

if groups:
    with ui.guard("Comparing the runs"):
        gid = st.selectbox("Runs started together (newest first)", list(by_id), format_func=lambda k: by_id[k].title(),
                           key="eff-group", placeholder="Choose runs started earlier",
                           help="This page's setup opens its own newest runs; any other group of the history "
                                "can be compared too.")
        if gid is not None:
            compare(store, by_id[gid])

ui.sync_link()
