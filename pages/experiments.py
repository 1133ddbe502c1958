"""Experiments: grids of runs over algorithms, stepsizes, settings and seeds (issue 14) — launch one (a
built-in that checks a published claim, or your own), watch its cells, reopen it, export it."""

import math

import streamlit as st

from fedviz import ui
from fedviz.markup import escape
from fedviz.algorithms import ALGORITHMS
from fedviz.data.partition import PARTITION_SPEC, PARTITIONERS
from fedviz.data.presets import PRESETS, override_keys
from fedviz.errors import FedvizError, ParameterError
from fedviz.experiments import driver, from_mapping, from_toml
from fedviz.experiments.builtin import BUILTINS, SCALES, builtin_for
from fedviz.experiments.results import METRICS, load
from fedviz.experiments.spec import DEFAULT_TARGET, PLAIN_KEYS, data_classes, parse_values
from fedviz.plots import experiments as views
from fedviz.data.build import DataSpec
from fedviz.problems.losses import loss_choices
from fedviz.runner.tune import tunable_params

ui.through_navigation()

#: Said of an experiment another visitor launched (the page offers no action on it).
OTHERS = "Launched by another visitor of this server:"
#: The form's first experiment, one that shows an effect: GD and FedAvg on FedProx's Synthetic(α, β) with its data
#: heterogeneity β varied (Li et al. 2020, Section 5.1; α, under argmax labels, changes nothing); identical nodes
#: with K varied drew two flat lines (tests/integration/test_experiment_form_default.py measures the effect).
FORM_PRESET = "fedprox-synthetic-binary"
FORM_AXES = (("data.beta", "0, 1, 2"), ("lam", "0.01, 0.001"))

STEP_HELP = ("default: the algorithm's own (derived) value · tuned: pilot runs choose it in each setting and seed · "
             "grid: one cell per value you list · scales: one cell per factor × the derived default")


def _launch(experiment, *, replace: bool = False) -> None:
    store = ui.manager().store
    if store is None:
        raise ParameterError("history", None, "a run history on this server (experiments are stored there)")
    experiment.check(presets_only=True)  # a bad knob is named here, not failed on the workers cell by cell
    st.session_state.pop("exp-conflict", None)
    try:
        # The experiment is this session's: only this tab may stop, resume or replace it (driver.NotYours).
        handle = driver.launch(experiment, store, replace=replace, max_cells=ui.max_experiment_cells(),
                               session=ui.session_id(), alive=ui.session_connected)
    except driver.NameTaken as e:  # another grid under this name: say so, offer Replace (nothing starts)
        st.session_state["exp-conflict"] = (experiment, str(e))
        return
    except driver.NotYours:  # another visitor's (or process's): show it under Results, with why
        st.session_state["exp-open"] = experiment.name
        raise
    # Kept in the session: the driver forgets a handle when it ends, and the page still shows how.
    st.session_state["exp-handle"] = handle
    st.session_state["exp-recent"] = {}
    st.session_state["exp-running"] = experiment.name
    st.session_state["exp-open"] = experiment.name  # before the picker exists in this run (or in a callback)


def _forget_conflict() -> None:
    """Another launch was asked for: the refusal of the previous one no longer applies."""
    st.session_state.pop("exp-conflict", None)


def _launch_now(experiment, replace: bool = False) -> None:
    """A button's callback (it runs before the page, so it may set the picker's state): launch, and keep
    an error for the page to show where the button is."""
    st.session_state.pop("exp-callback-error", None)
    try:
        _launch(experiment, replace=replace)
    except FedvizError as e:
        st.session_state["exp-callback-error"] = str(e)


st.title("Experiments")
st.caption("A grid of runs — algorithms × stepsizes × one or two varied settings × seeds — run on a Dask "
           "cluster and kept cell by cell in the history: curves with a band over seeds, the final figure against the "
           "varied setting, and whether a published claim held. The paper chose its stepsize after trying a set "
           "(Section 4.1); here each choice and its sensitivity are shown.")
store = ui.manager().store

# -- 1. built-in experiments -------------------------------------------------------------------------------
st.subheader("Built-in experiments")
cards = st.columns(len(BUILTINS))
for card, b in zip(cards, BUILTINS.values()):
    # Each card as tall as the row's tallest, its Run button at the foot: claims of different lengths put the
    # four buttons at four heights (issue 31).
    with card.container(border=True, height="stretch", vertical_alignment="distribute"):
        with st.container():
            st.markdown(f"**{b.title}**")
            st.caption(f"**Claim:** {b.claim}.  \n*{b.source}*")
        with st.container(), ui.guard("Preparing the experiment"):
            scale = st.radio("Scale", SCALES, horizontal=True, key=ui.seeded(f"exp-scale-{b.name}", "small"),
                             help="small: minutes on a laptop; full: the published protocol's length.")
            exp = b.experiment(scale)
            st.caption(f"{exp.size} cells · {exp.iterations} iterations · {len(exp.seeds)} seeds")
            if st.button(":material/play_arrow: Run", key=f"exp-run-{b.name}", width="stretch",
                         on_click=_forget_conflict):
                _launch(exp)

# -- 2. define your own --------------------------------------------------------------------------------------
with st.expander("Define your own experiment", expanded=False):
    form, upload = st.tabs(["Form", "TOML"])
    with form:
        c1, c2, c3 = st.columns([2, 2, 1])
        preset = c1.selectbox("Data (preset)", list(PRESETS), key=ui.seeded("exp-preset", FORM_PRESET))
        options = c2.text_input("Preset options", key=ui.seeded("exp-preset-options", ""),
                                placeholder="e.g. n_nodes=5&seed=1", help="key=value pairs joined by &.")
        # Softmax for a preset of many classes (fedprox-synthetic), the binary losses otherwise (issue 22); a
        # preset option the generator refuses is named at launch.
        try:
            n_classes = data_classes(DataSpec(source="preset:" + preset.split("?")[0]
                                              + (f"?{options.strip()}" if options.strip() else "")))
        except FedvizError:
            n_classes = 1
        multiclass = n_classes > 1
        losses = loss_choices(multiclass)
        loss = c3.selectbox("Loss", list(losses), key=ui.seeded("exp-loss-softmax" if multiclass else "exp-loss",
                                                                losses[0]))
        partition = st.text_input("Partition (optional)", key=ui.seeded("exp-partition", ""),
                                  placeholder="e.g. dirichlet:alpha=1", help="Split the data over new nodes: "
                                  + ", ".join(PARTITIONERS) + ". Needed to vary partition.<knob>.")
        offered, left_out = ui.algorithm_choices(multiclass)
        names = st.multiselect("Algorithms", offered, wrap=True, format_func=ui.algorithm_label,
                               key=ui.seeded("exp-algorithms-softmax" if multiclass else "exp-algorithms",
                                             [n for n in ("gd", "fedavg") if n in offered]))
        if left_out:
            ui.show_left_out(left_out, n_classes)
        arms = []
        for name in names:
            a1, a2 = st.columns([1, 2])
            varied = tunable_params(ALGORITHMS[name])  # the hyperparameter tuning and grids vary
            modes = ("default", "tuned", "grid", "scales") if varied else ("default",)
            mode = a1.selectbox(f"{ALGORITHMS[name].title}: {varied[0] if varied else 'nothing to vary'}", modes,
                                key=ui.seeded(f"exp-step-{name}", "default"), help=STEP_HELP)
            values = a2.text_input(f"{ALGORITHMS[name].title}: grid values or factors",
                                   key=ui.seeded(f"exp-values-{name}", "0.25, 1, 4"),
                                   disabled=mode not in ("grid", "scales"))
            arms.append((name, mode, values))
        head = preset.split("?")[0]
        try:  # the partitioner's knobs join the axis keys; a bad spec is named at launch (and here)
            part_name = PARTITION_SPEC.split(partition)[0] if partition.strip() else None
        except FedvizError as e:
            st.error(escape(str(e)))
            part_name = None
        keys = ([f"data.{k}" for k in override_keys(head)]
                + ([f"partition.{k}" for k in PARTITIONERS[part_name].params] if part_name in PARTITIONERS else [])
                + list(PLAIN_KEYS))
        n_axes = st.radio("Varied settings", (0, 1, 2), horizontal=True, key=ui.seeded("exp-axes", 1))
        axes = []
        for i in range(n_axes):
            x1, x2 = st.columns([1, 2])
            default, start = FORM_AXES[i]
            if st.session_state.get(f"exp-axis{i}-key", default) not in keys:  # a key of the preset before
                st.session_state.pop(f"exp-axis{i}-key", None)
                default = default if default in keys else "nodes"
            key = x1.selectbox(f"Axis {i + 1}: setting", keys, key=ui.seeded(f"exp-axis{i}-key", default))
            values = x2.text_input(f"Axis {i + 1}: values (comma list)", key=ui.seeded(f"exp-axis{i}-values", start))
            axes.append((key, values))
        d1, d2, d3, d4 = st.columns(4)
        seeds = d1.number_input("Seeds", 1, 50, key=ui.seeded("exp-seeds", 2), help="Seeds 0 … n − 1.")
        iterations = d2.number_input("Iterations", 1, 100_000, key=ui.seeded("exp-iterations", 20))
        target = d3.text_input("Target ε", key=ui.seeded("exp-target", f"{DEFAULT_TARGET:g}"),
                               help="For 'rounds to reach f − f* ≤ ε'.")
        name = d4.text_input("Name", key=ui.seeded("exp-name", "my-experiment"))
        if st.button(":material/rocket_launch: Launch", type="primary", key="exp-launch", disabled=not names,
                     on_click=_forget_conflict):
            with ui.guard("Launching the experiment"):
                try:
                    eps = float(target)
                except ValueError:
                    raise ParameterError("target", target, "a number > 0, e.g. 1e-4") from None
                doc = {"name": name.strip(), "data": "preset:" + head + (f"?{options.strip()}" if options.strip()
                                                                          else ""),
                       "loss": loss, "iterations": int(iterations), "seeds": int(seeds), "target": eps,
                       "algorithm": [{"name": n, "step": m, **({"values": parse_values(v, f"{n} values")}
                                                              if m in ("grid", "scales") else {})}
                                     for n, m, v in arms],
                       "axis": [{"key": k, "values": parse_values(v, f"axis {k} values")} for k, v in axes]}
                if partition.strip():
                    doc["partition"] = partition.strip()
                _launch(from_mapping(doc, where="form"))
    with upload:
        st.caption("The same experiment as a file; see docs/experiments.md for the format.")
        text = st.text_area("TOML", key=ui.seeded("exp-toml", ""), height=220,
                            placeholder='name = "sweep"\ndata = "preset:identical-nodes"\n\n[[algorithm]]\n'
                                        'name = "gd"\n\n[[axis]]\nkey = "nodes"\nvalues = [2, 5]')
        file = st.file_uploader("…or upload a .toml file", type=["toml"], key="exp-upload")
        if st.button(":material/rocket_launch: Launch from TOML", key="exp-launch-toml", on_click=_forget_conflict):
            with ui.guard("Reading the TOML file"):
                source = file.getvalue().decode("utf-8", "replace") if file is not None else text
                if not source.strip():
                    raise ParameterError("TOML", "", "a TOML document: paste one or upload a file")
                _launch(from_toml(source, where="toml"))

conflict = st.session_state.get("exp-conflict")
if conflict is not None:
    pending, why = conflict
    st.error(why, icon=":material/error:")
    r1, r2 = st.columns(2)
    stored = store.get_experiment(pending.name) if store is not None else None
    if stored is not None and stored.launched_in(ui.session_id()):
        r1.button(f":material/delete: Replace the stored {pending.name!r} (deletes its cells) and run",
                  key="exp-replace", on_click=_launch_now, args=(pending, True))
    else:
        r1.caption("This tab did not launch the stored experiment: on a shared server its cells may be another "
                   "visitor's results, so the page does not delete them. Choose another name (the command line's "
                   "`--replace` can).")
    r2.button(":material/close: Keep the stored one", key="exp-keep", on_click=_forget_conflict)

failed_launch = st.session_state.pop("exp-callback-error", None)  # a Resume or Replace that could not start
if failed_launch:
    st.error(escape(failed_launch), icon=":material/error:")

# -- 3. the running experiment --------------------------------------------------------------------------------
handle = st.session_state.get("exp-handle")
live = handle is not None and not handle.done


@st.fragment(run_every=1.0 if live else None)
def _running():
    """Progress over cells and the running cells' curves, from the driver's immutable snapshot."""
    h = st.session_state.get("exp-handle")
    if h is None:
        return
    snap = h.snapshot()
    if live and snap.finished:
        st.rerun()  # ended: the whole page again, without the timer, with its results below
    st.subheader(f"{'Last launched' if snap.finished else 'Running'}: {snap.name}")
    fraction, text = views.progress(snap)
    st.progress(fraction, text=text)
    if snap.message:
        st.caption(snap.message)
    if snap.cluster:
        st.caption(f"Cluster: {snap.cluster}")
    recent = st.session_state.setdefault("exp-recent", {})  # the cells seen running, latest state, last 6
    for c in snap.running:
        recent.pop(c.key, None)
        recent[c.key] = c
    for k in list(recent)[:-6]:
        del recent[k]
    if snap.running:
        st.markdown("  \n".join(f":material/autorenew: **{c.label}** · setting {h.experiment.setting_label(c.setting)}"
                                f" · seed {c.seed} · iteration {c.iteration}"
                                + (f" · f − f* {c.suboptimality:.3g}" if math.isfinite(c.suboptimality) else "")
                                for c in snap.running))
    if not snap.finished and any(len(c.records) >= 2 for c in recent.values()):  # short cells: no empty chart
        fig = views.live_figure(snap, tuple(recent.values()), setting_label=h.experiment.setting_label)
        st.plotly_chart(fig, width="stretch", key="exp-live-chart")
    if not snap.finished and st.button(":material/stop: Stop", key="exp-stop"):
        h.stop("stopped by the user")


if handle is not None:
    _running()
others = [n for n, h in driver.running().items() if not h.done and h is not handle]
if others:
    st.caption("Also running on this server: " + escape(", ".join(others)) + " — choose one under Results to "
               "follow its stored cells (only the tab that launched an experiment can stop it).")

# -- 4. reopen ------------------------------------------------------------------------------------------------
st.subheader("Results")
if store is None:
    st.warning("The run history is unavailable on this server, so experiments cannot be stored or reopened.")
    st.stop()
infos = {i.name: i for i in store.list_experiments(limit=200)}
if not infos:
    st.info("No experiment yet: run a built-in above, or define your own.")
    ui.sync_link()
    st.stop()
names_all = list(infos)
# A launch names its experiment before the driver's thread has stored it: the newest one is shown for now, and the
# launched one as soon as it is stored — unless the visitor has picked another meanwhile (the picker's callback).
if st.session_state.get("exp-open-pending") in infos:
    st.session_state["exp-open"] = st.session_state.pop("exp-open-pending")
if st.session_state.get("exp-open") not in infos:
    st.session_state["exp-open-pending"] = st.session_state.pop("exp-open", None)


def _picked() -> None:
    st.session_state.pop("exp-open-pending", None)


chosen = st.selectbox("Experiment", names_all, key="exp-open", on_change=_picked,
                      help="Every experiment in the history, the most recently updated first.")
info = infos[chosen]
with ui.guard("Reading the experiment"):
    cache_key = (chosen, info.updated, info.n_cells, info.status)
    cached = st.session_state.get("exp-results")
    if cached is None or cached[0] != cache_key:
        cached = st.session_state["exp-results"] = (cache_key, load(store, chosen))
    results = cached[1]
    figures = st.session_state.setdefault("exp-figures", {})
    if figures.get("key") != cache_key:
        figures.clear()
        figures["key"] = cache_key

    def figure(name: str, *args, **kwargs):
        """A view of ``results``, built once per state of the experiment and choice of its controls (a
        change to another control reruns the page, and the figures need not be built again)."""
        key = (name, repr(args), repr(sorted(kwargs.items())))
        if key not in figures:
            figures[key] = getattr(views, name)(results, *args, **kwargs)
        return figures[key]

    exp = results.experiment
    mine = driver.running(chosen)
    busy = mine is not None and not mine.done
    # Counted from the cells of this grid (results.load keeps one per place), never more than the grid.
    complete = sum(1 for c in results.cells if c.status in ("done", "diverged"))
    missing = exp.size - complete
    failed = [c for c in results.cells if c.status == "failed"]
    st.caption(f"**{info.status}** · {complete} of {exp.size} cells complete"
               + (" (this view refreshes when it ends)" if busy else "") + " · updated "
               f"{info.updated[:19].replace('T', ' ')}" + (f" · {info.message}" if info.message else "")
               + f" — {exp.description or 'your experiment.'}")
    if failed:
        found = results.failures()
        st.warning(f"{len(failed)} of {exp.size} cells failed"
                   + (" (one reason):" if len(found) == 1 else f" ({len(found)} distinct reasons):") + "\n\n"
                   + "\n".join(f"- '{text}' ×{n}" for n, text in found[:8])
                   + (f"\n- … and {len(found) - 8} other reasons (each cell's message is in the Cells tab's "
                      "JSON download)" if len(found) > 8 else ""), icon=":material/warning:")
    # Resume runs the missing cells again; a failed cell fails again on the same grid, so when every
    # missing cell failed (and nothing was stopped or cut short) there is nothing resuming can fix.
    only_failed = missing > 0 and len(failed) == missing and info.status not in ("stopped", "interrupted")
    resumable = info.status in ("stopped", "interrupted", "failed") or missing > 0
    # Who may act (driver.NotYours): the tab that launched it; Resume also an experiment no visitor holds
    # (the command line's, a gone server's or a closed tab's), within FEDVIZ_MAX_CELLS: nobody else can.
    sid = ui.session_id()
    if busy:
        if not mine.launched_in(sid):
            st.caption(f"{OTHERS} only that visitor can stop it.")
        elif mine is not handle:  # launched earlier from this tab: its Stop is here, not in the view above
            st.button(":material/stop: Stop this experiment", key="exp-stop-open", on_click=mine.stop)
    elif info.status == "running" and info.owner_live:
        st.caption("Running in another process on this history (the command line, or another server): its cells "
                   "appear here as they finish, and Resume is offered once it has ended.")
    elif resumable and not info.launched_in(sid) and driver.held(info, ui.session_connected):
        st.caption(f"{OTHERS} only that visitor (or the command line) can resume or replace it.")
    elif only_failed:
        st.caption("Resume is not offered: every missing cell failed for the reasons above, and running the same "
                   "grid again would meet them again. Change the grid and launch it under another name.")
    elif resumable:
        uploaded = bool(info.spec.get("uploaded"))
        st.button(f":material/replay: Resume ({missing} cells to run)", key="exp-resume", disabled=uploaded,
                  help="Runs only the cells without a complete result." if not uploaded else
                  "An uploaded data set is not kept: reopen its results only.",
                  on_click=_launch_now, args=(exp,))
    builtin = builtin_for(exp)  # by grid: an experiment that only shares a built-in's name gets no verdict
    verdict = builtin.verdict(results) if builtin is not None and results.cells else None
    if verdict is not None:
        show = st.success if verdict.held else st.error if verdict.refutes else st.warning
        show(verdict.text + "\n\n" + "\n".join(f"- {line}" for line in verdict.lines()))
    if not results.cells:
        st.info("No cell stored yet.")
    elif not complete:  # every stored cell failed or stopped: no curve to draw, only the cells
        st.info("No cell is complete, so there is no figure to draw; the stored cells are below.")
        st.dataframe(results.rows(), hide_index=True, width="stretch")
    else:
        tabs = st.tabs(["Curves", "Against the axis", "Heatmap", "Stepsize sensitivity", "Chosen stepsizes",
                        "Cells"])
        with tabs[0]:
            c1, c2 = st.columns([1, 2])
            curve = c1.selectbox("Curve", views.curve_choices(results), format_func=views.CURVES.get,
                                 key=ui.seeded("exp-curve", "suboptimality"))
            labels = {s: results.setting_label(s) for s in results.settings}
            shown = c2.multiselect("Settings", list(labels), wrap=True, format_func=labels.get, max_selections=views.MAX_FACETS,
                                   key=f"exp-settings-{chosen}", default=list(labels)[:6])
            st.plotly_chart(figure("band_figure", shown or list(labels)[:1], metric=curve), width="stretch",
                            key="exp-band")
        with tabs[1]:
            c1, c2 = st.columns(2)
            metric = c1.selectbox("Final figure", list(METRICS), format_func=METRICS.get,
                                  key=ui.seeded("exp-metric", "suboptimality"))
            axis = c2.radio("Against", list(range(len(exp.axes))) or [0], horizontal=True,
                            format_func=lambda i: exp.axes[i].name if exp.axes else "setting",
                            key=f"exp-against-{chosen}")
            st.plotly_chart(figure("axis_figure", metric, axis=axis if exp.axes else 0), width="stretch",
                            key="exp-axis-fig")
            if views.grid_arms(results):
                st.caption("Lines with a stepsize grid are drawn at their best grid value in each setting (lowest "
                           "median final f − f*), as the paper chose its stepsize after the fact (Section 4.1).")
        with tabs[2]:
            hm = st.selectbox("Colour by", list(METRICS), format_func=METRICS.get,
                              key=ui.seeded("exp-heat-metric", "suboptimality"))
            st.plotly_chart(figure("heatmap_figure", hm), width="stretch", key="exp-heatmap")
        with tabs[3]:
            if views.grid_arms(results):
                st.plotly_chart(figure("sensitivity_figure", shown or None), width="stretch",
                                key="exp-sensitivity")
            else:
                st.info("No line of this experiment has a stepsize grid (step = grid or scales).")
        with tabs[4]:
            rows = views.tuned_rows(results)
            if rows:
                st.plotly_chart(figure("tuned_figure"), width="stretch", key="exp-tuned")
                st.dataframe(rows, hide_index=True, width="stretch")
            else:
                st.info("No line of this experiment is tuned or has a stepsize grid.")
        with tabs[5]:
            st.dataframe(results.rows(), hide_index=True, width="stretch")
        # Files made on click, not on every page load.  A download reruns nothing: a rerun redraws every figure and
        # gives every button a new deferred file id, so a second click racing it fetched a retired id (no file).
        d1, d2, d3 = st.columns(3)
        d1.download_button(":material/download: Cells as CSV", results.to_csv, f"{chosen}.csv", "text/csv",
                           key="exp-csv", on_click="ignore")
        d2.download_button(":material/download: Everything as JSON", results.to_json, f"{chosen}.json",
                           "application/json", key="exp-json", on_click="ignore")
        d3.download_button(":material/download: Report as HTML", lambda: views.report_html(results, verdict and verdict.for_report()),
                           f"{chosen}.html", "text/html", key="exp-html", on_click="ignore",
                           help="One standalone page with every figure, the verdict and the cells (opens offline).")

ui.sync_link()
