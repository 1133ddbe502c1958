"""Compare: overlay past runs from the history, export them, and ask 'what if the data were split
differently?' (the paper's FSVRG against FSVRGR)."""

import dataclasses

import streamlit as st

from fedviz import ui
from fedviz.algorithms import ALGORITHMS
from fedviz.data.partition import PARTITION_SPEC, PARTITIONERS, human_label, make_partitioner
from fedviz.errors import FedvizError
from fedviz.params import Param
from fedviz.plots import convergence_figure
from fedviz.runner import get_manager
from fedviz.runner.history.describe import describe_run

ui.through_navigation()

OWN = "the data's own nodes"
#: What the History tab lists, and why (RunStore.list_runs, visible_to).
HISTORY_SCOPE = ("Listed: the runs started in this tab since it was opened, and the runs no visitor owns (from the "
                 "command line, or from before runs had owners); other visitors' runs, and the names of their "
                 "files, are private to them. The operator's link lists every run.")
#: The same for the operator (ui.history_viewer: this tab presented the operator's token).
OPERATOR_SCOPE = ("Listed: every run in this server's history — this tab was opened with the operator's link. "
                  "Visitors see only their own tab's runs and the command line's.")
#: K of the What-if partitioners, as its input takes it (and a link gives it).
NODES_PARAM = Param("whatif_nodes", "int", 100, "K, for the What-if partitioners that take it.", low=1, high=100_000)


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
    start = st.session_state.get("whatif-link", {}).get(side) if st.session_state.get(f"whatif-{side}") == choice \
        else None
    changed = ui.param_inputs(cls.params.values(), owner=choice, key=lambda pname: f"whatif-{side}-{choice}-{pname}",
                              start=start)
    return PARTITION_SPEC.join(choice, {pname: cls.params[pname].format(v) for pname, v in changed.items()})


def _choice_label(option: str) -> str:
    return option if option == OWN else ui.partitioner_label(option)


#: The What-if choices a link carries: each side's partitioner spec ("own": the data's own nodes) and K.
LINK_KEYS = {"whatif_a": "a", "whatif_b": "b"}
LINK_NODES = "whatif_nodes"
DEFAULTS = {"a": OWN, "b": "reshuffle"}
WHATIF_TAB = "What if: two partitionings"


def read_link() -> list[str]:
    """Seed the What-if choices from the link (``whatif_a``, ``whatif_b``: a partitioner spec such as
    ``dirichlet:alpha=0.1``, or ``own``; ``whatif_nodes``: K) and take these keys out of the query
    before the run settings read it; returns what could not be used, as the run settings' problems."""
    link = {k: str(st.query_params[k]) for k in (*LINK_KEYS, LINK_NODES) if k in st.query_params}
    for k in link:
        del st.query_params[k]
    problems, state = [], st.session_state
    if not link or "whatif-link" in state:
        return problems
    state["whatif-link"] = {}
    state["whatif-open"] = True  # a link with What-if choices opens on that tab
    for k, side in LINK_KEYS.items():
        if k not in link:
            continue
        spec = link[k].strip()
        if spec == "own":
            state.setdefault(f"whatif-{side}", OWN)
            continue
        try:
            name, options = PARTITION_SPEC.split(spec)
            if name not in PARTITIONERS:
                raise FedvizError(f"unknown partitioner {name!r}; one of own, {', '.join(PARTITIONERS)}")
            params = PARTITIONERS[name].params
            for pname in options:
                if pname not in params:
                    raise FedvizError(f"{name} has no knob {pname!r} (it has: {', '.join(params) or 'none'})")
            knobs = {pname: params[pname].parse(text, name) for pname, text in options.items()}
        except FedvizError as e:
            problems.append(f"{k}: {e}")
            continue
        state.setdefault(f"whatif-{side}", name)
        state["whatif-link"][side] = knobs
    if LINK_NODES in link:
        try:
            state.setdefault("whatif-nodes", int(NODES_PARAM.parse(link[LINK_NODES])))
        except FedvizError as e:
            problems.append(f"{LINK_NODES}: {e}")
    return problems


def link_of(a: str, spec_a: str | None, b: str, spec_b: str | None, nodes: int) -> dict[str, str]:
    """The What-if choices as link keys, the ones that differ from the page's defaults."""
    out = {}
    for key, side, choice, spec in (("whatif_a", "a", a, spec_a), ("whatif_b", "b", b, spec_b)):
        text = "own" if choice == OWN else (spec or choice)
        if choice != DEFAULTS[side] or (spec or choice) != choice:
            out[key] = text
    if nodes != 100:
        out[LINK_NODES] = str(nodes)
    return out


link_problems = read_link()
st.title("Compare")
ui.current_config()  # reads the link's run settings; a setting it cannot use is warned about here
st.session_state["query_problems"] = list(st.session_state.get("query_problems") or []) + link_problems
ui.show_query_problems()
tab_history, tab_whatif = st.tabs(["History", WHATIF_TAB], key="compare-tab",
                                  default=WHATIF_TAB if st.session_state.get("whatif-open") else None)

with tab_history:
    with ui.guard("Reading the run history"):
        store = get_manager().store
        if store is None:
            st.warning("The run history is unavailable on this server; runs are kept in memory only.")
        else:
            # A shared server's history holds every visitor's runs: each is listed only its own (and the
            # runs no visitor owns), since a run's settings name its uploaded file.
            viewer = ui.history_viewer()
            runs = store.list_runs(limit=200, visible_to=viewer)
            st.caption(HISTORY_SCOPE if viewer is not None else OPERATOR_SCOPE)
            if not runs:
                st.info("No run to show yet: start one on the Run page and it is listed here.")
            else:
                labels = {r.id: history_label(r) for r in runs}
                chosen = st.multiselect("Runs to overlay", list(labels), wrap=True, default=list(labels)[:3],
                                        format_func=labels.get)
                ui.axis_controls("cmp-axis", "cmp-cost")
                if chosen:
                    by_id = {r.id: r for r in runs}
                    overlay = {f"#{i} {by_id[i].label}": store.columns(i) for i in chosen}
                    # Each run its own style, in its algorithm's family hue (fedviz.plots.styles.run_styles).
                    styles = {f"#{i} {by_id[i].label}": ALGORITHMS[by_id[i].algorithm].title
                              for i in chosen if by_id[i].algorithm in ALGORITHMS}
                    # A run that diverged is cut at the axes' edge and marked; a mean squared error is not a %.
                    diverged = {f"#{i} {by_id[i].label}" for i in chosen if by_id[i].status == "diverged"}
                    mse = any(by_id[i].dataset_summary.get("error_metric") == "mse"
                              or by_id[i].dataset_summary.get("task") == "regression" for i in chosen)
                    fig = convergence_figure(overlay, axis=st.session_state.get("cmp-axis", "iteration"),
                                             round_cost=float(st.session_state.get("cmp-cost", 1.0)), styles=styles,
                                             diverged=diverged, regression=mse)
                    st.plotly_chart(fig, width="stretch")
                    c1, c2, c3 = st.columns(3)  # files made on click, not on every page load; a download reruns nothing
                    c1.download_button("Runs as CSV", lambda: store.export_csv(chosen), "fedviz-runs.csv", "text/csv",
                                       on_click="ignore")
                    c2.download_button("Runs as JSON", lambda: store.export_json(chosen), "fedviz-runs.json",
                                       "application/json", on_click="ignore")
                    # plotly.js inlined (about 4.6 MB): the file opens offline, and years later.
                    c3.download_button("Figure as HTML", lambda: fig.to_html(include_plotlyjs=True, full_html=True),
                                       "fedviz-figure.html", "text/html", on_click="ignore")

with tab_whatif:
    config = ui.current_config()
    ds, whatif = None, None
    with ui.guard("Loading the data set"):
        ds = ui.load_dataset(config.data)
    grouped = config.data.is_preset or bool(ds is not None and ds.meta.get("groups"))
    # Reshuffle and natural regroup the data's own groups (a generator's nodes, a file's qid:); a file without
    # them offers the others, and B starts on label skew (regression: unbalanced sizes), a split such a file can have.
    default_b = "reshuffle" if grouped else "dirichlet" if ds is None or ds.task == "classification" else \
        "iid-unbalanced"
    st.markdown("Run the chosen algorithms on the same data split two ways, side by side. " + {
        "reshuffle": "The default pits the data's own (non-IID) nodes against **reshuffle**, which keeps every "
                     "node's size but fills it with random rows — the paper's FSVRG against FSVRGR.",
        "dirichlet": "The default pits the data's own nodes against **label skew (Dirichlet)**, which gives each "
                     "node its own mix of the classes.",
        "iid-unbalanced": "The default pits the data's own nodes against **IID, unbalanced sizes**."}[default_b])
    if ds is not None:
        # The Run page's settings as these data take them: softmax for many classes, and only the algorithms
        # that take it; the others named with the registry's sentence (issue 22).
        whatif, refused = config.for_data(ds.multiclass)
        if refused:
            st.caption(("Left out on these " + f"{ds.n_classes} classes: " if ds.multiclass else "Left out: ")
                       + "; ".join(refused) + ".")
        if whatif is None:
            st.info("None of the Run page's algorithms runs on these data: choose others on the Run page.")
    if whatif is not None:
        names = [ui.algorithm_label(name) + (f" ({', '.join(f'{human_label(k)} = {v}' for k, v in hyper)})"
                                             if hyper else "") for name, hyper in whatif.algorithms]
        shown = {k: v for k, v in whatif.as_json().items() if k not in ("algorithms", "iterations", "seed")}
        settings = describe_run(shown, partition=False)
        st.caption(f"Runs {', '.join(names)} on {settings} (the Run page's settings; {whatif.iterations} "
                   f"iterations, seed {whatif.seed}), once on each partitioning.")
    options = [OWN] + [p for p in PARTITIONERS if grouped or not PARTITIONERS[p].needs_groups]
    if not grouped:
        st.caption(" and ".join(ui.partitioner_label(p) for p in PARTITIONERS if PARTITIONERS[p].needs_groups)
                   + " are not offered: they regroup the data's own groups (a file's qid:, a generator's nodes), "
                     "and this file has none.")
    for side in ("a", "b"):  # a choice of other data that these cannot take falls back to the default
        if st.session_state.get(f"whatif-{side}") not in (None, *options):
            st.session_state[f"whatif-{side}"] = OWN if side == "a" else default_b
    c1, c2 = st.columns(2)
    invalid = False
    with c1:
        a = st.selectbox("Partition A", options, key=ui.seeded("whatif-a", OWN), format_func=_choice_label)
        try:
            spec_a = partition_knobs("a", a)
        except ui.InvalidInput:
            spec_a, invalid = None, True
    with c2:
        b = st.selectbox("Partition B", options, key=ui.seeded("whatif-b", default_b), format_func=_choice_label)
        try:
            spec_b = partition_knobs("b", b)
        except ui.InvalidInput:
            spec_b, invalid = None, True
    needs_k = any(choice != OWN and not PARTITIONERS[choice].nodes_from_groups for choice in (a, b))
    nodes = int(st.number_input("Nodes K (for the partitioners that take it)", 1, 100_000,
                                key=ui.seeded("whatif-nodes", 100), disabled=not needs_k))
    if st.button(":material/play_arrow: Run both", type="primary", disabled=invalid or whatif is None):
        with ui.guard("Starting the comparison"):
            for key, choice, spec in (("whatif-run-a", a, spec_a), ("whatif-run-b", b, spec_b)):
                k = None if spec is None or PARTITIONERS[choice].nodes_from_groups else nodes
                if spec is not None:
                    make_partitioner(spec, n_nodes=k, seed=config.data.seed)  # a bad knob stops here, named
                data = dataclasses.replace(config.data, partition=spec, nodes=k)
                ui.start_run(dataclasses.replace(whatif, data=data), key=key)
            st.session_state["whatif-specs"] = (spec_a or OWN, spec_b or OWN)
    ui.axis_controls("whatif-axis", "whatif-cost")
    ran = st.session_state.get("whatif-specs", (None, None))
    left, right = st.columns(2)
    pair = ("whatif-run-a", "whatif-run-b")  # A and B on the same axes: each panel's ranges span both
    with left:
        st.subheader(f"A: {ran[0] or _choice_label(a)}")
        ui.live_view("whatif-run-a", axis_key="whatif-axis", cost_key="whatif-cost", height=330, stacked=True,
                     shared=pair, width=280)
    with right:
        st.subheader(f"B: {ran[1] or _choice_label(b)}")
        ui.live_view("whatif-run-b", axis_key="whatif-axis", cost_key="whatif-cost", height=330, stacked=True,
                     shared=pair, width=280)
    whatif_link = link_of(a, spec_a, b, spec_b, nodes)

ui.sync_link(extra=whatif_link)
