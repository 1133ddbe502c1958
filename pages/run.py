"""Run: choose algorithms and hyperparameters, press Run, watch the curves."""

import streamlit as st

from fedviz import ui
from fedviz.markup import escape
from fedviz.errors import FedvizError
from fedviz.problems.losses import LOSSES, loss_for
from fedviz.runner.config import MAX_ITERATIONS, RunConfig
from fedviz.runner.tune import MAX_PILOT_ITERATIONS
from fedviz.data.build import partition_words

ui.through_navigation()

st.title("Run")
config = ui.current_config()
ui.show_query_problems()
ui.show_cluster_note()

ds = None
with ui.guard("Loading the data set"):
    ds = ui.load_dataset(config.data)
    st.caption(f"Data: **{escape(ds.meta.get('source', 'upload'))}** · n = {ds.n:,}, d = {ds.d:,}, K = {ds.n_nodes:,} nodes "
               f"· partition: {partition_words(ds)} · test set: "
               f"{ds.meta.get('split', 'its own')} — change them on the Data page.")
    ui.show_data_notes(ds)

multiclass = ds is not None and ds.multiclass
# Softmax data offer only the algorithms that take softmax; a caption names the others and why.  The picker spans
# the page: in the settings' column a 1024 px screen showed one chip of fourteen.
options, left_out = ui.algorithm_choices(multiclass)
names = st.multiselect("Algorithms", options, wrap=True, format_func=ui.algorithm_label,
                       key=ui.seeded("run-algorithms-softmax" if multiclass else "run-algorithms",
                                     [n for n, _ in config.algorithms if n in options]),
                       help="The paper's methods (GD, CoCoA+, DANE, FSVRG, ...) and today's baselines "
                            "(FedAvg, FedProx, SCAFFOLD). Centralised references are marked.")
if left_out:
    ui.show_left_out(left_out, ds.n_classes)
left, right = st.columns([1, 2], gap="large")
with left:
    # Run and Stop sit here, above the settings, so that a 768 px high screen shows them without
    # scrolling; they are drawn into this place below, once the settings have made the config.
    actions = st.container()
    lineup = ("The paper's line-up is FSVRG, GD and CoCoA+ (Figure 2; its data have two classes, and CoCoA+ "
              "takes no softmax)." if multiclass else "The paper's line-up is FSVRG, GD and CoCoA+ (Figure 2).")
    st.caption(lineup + " Under the charts, a few sentences say what each line and axis means; Learn › Start here "
               "has a lesson per idea.")
    algorithms = ui.algorithm_widgets(names, config)
    c1, c2 = st.columns(2)
    iterations = c1.number_input("Iterations", 1, MAX_ITERATIONS, key=ui.seeded("run-iterations", config.iterations))
    seed = c2.number_input("Seed", 0, 2**32 - 1, key=ui.seeded("run-seed", config.seed),
                           help="Seeds every random choice of the algorithms: the same seed gives the same curves.")
    if multiclass:
        loss = "softmax"
        st.caption(f"Loss: softmax (multinomial logistic) regression over the data's {ds.n_classes} classes, "
                   "the loss for more than two classes.")
    else:
        loss = st.selectbox("Loss", list(LOSSES), key=ui.seeded("run-loss", loss_for(config.loss, False)),
                            help="logistic: the paper's experiment; squared: ridge regression; smoothed hinge: SVM.")
    lam_text = st.text_input("λ (blank: 1/n, as in the paper)",
                             key=ui.seeded("run-lam", "" if config.lam is None else repr(config.lam)))
    tune = st.checkbox("Tune stepsizes", key=ui.seeded("run-tune", config.tune),
                       help="Before each run, choose each algorithm's stepsize by pilot runs as long as the run "
                            f"(at most {MAX_PILOT_ITERATIONS} iterations), judged as the run is by their final "
                            "f − f*, on a geometric grid (widened while the best sits at its edge); pilots that "
                            "diverge or oscillate are left out. Pilots run on seeds derived from the run's, never on it (one seed for a "
                            "deterministic method, three for a stochastic one). The chosen value shows in the "
                            "curve's label; the pilots' rounds and time are shown next to the run's.")
    sweep = st.checkbox("Stepsize sweep", key=ui.seeded("run-sweep", config.sweep), disabled=tune,
                        help="Run each algorithm with its stepsize × 1/4, 1/2, 1, 2, 4 and keep the best stable "
                             "one (lowest final f − f*), as the paper chose its stepsize after the fact. "
                             "Off while tuning chooses the stepsizes.")
    new = None
    if algorithms is not None and names:
        try:
            lam = float(lam_text) if lam_text.strip() else None
            new = RunConfig(data=config.data, loss=loss, lam=lam, algorithms=algorithms,
                            iterations=int(iterations), seed=int(seed), tune=bool(tune), sweep=bool(sweep))
        except FedvizError as e:  # before ValueError, which it extends
            st.error(escape(str(e)))
        except ValueError:
            st.error(f"λ: {escape(repr(lam_text))} is not a number; allowed: a number > 0, or blank for 1/n.")
    elif not names:
        st.info("Choose at least one algorithm.")
    if new is not None and new != config:
        ui.set_config(new)
        config = new
    b1, b2 = actions.columns(2)
    with actions:
        ui.show_slow_run_warnings(config)  # a first iteration estimated to take long: said beside Run
    if b1.button(":material/play_arrow: Run", type="primary", disabled=new is None, width="stretch"):
        with ui.guard("Starting the run"):
            ui.start_run(config, key="run")
    handle = st.session_state.get("run")
    if b2.button(":material/stop: Stop", disabled=handle is None or handle.done, width="stretch"):
        handle.stop("stopped by the user")

with right:
    ui.axis_controls()
    if st.session_state.get("run") is None:
        st.info("Choose algorithms and press **Run**. Curves appear as iterations finish.")
    # One figure above the other: side by side, a 1024 px screen left each about 170 px wide.
    ui.live_view("run", sweep=True, stacked=True, per_node=True)

ui.sync_link()
