"""Run: choose algorithms and hyperparameters, press Run, watch the curves."""

import dataclasses

import streamlit as st

from fedviz import ui
from fedviz.algorithms import ALGORITHMS
from fedviz.errors import FedvizError
from fedviz.runner.config import MAX_ITERATIONS, RunConfig
from fedviz.runner.sweep import sweep_variants

ui.through_navigation()

st.title("Run")
config = ui.current_config()
ui.show_query_problems()

with ui.guard("Loading the data set"):
    ds = ui.load_dataset(config.data)
    st.caption(f"Data: **{ds.meta.get('source', 'upload')}** · n = {ds.n:,}, d = {ds.d:,}, K = {ds.n_nodes:,} nodes "
               f"· partition: {config.data.partition or 'its own nodes'} — change it on the Data page.")

left, right = st.columns([1, 2], gap="large")
with left:
    names = st.multiselect("Algorithms", list(ALGORITHMS), default=[n for n, _ in config.algorithms],
                           format_func=ui.algorithm_label,
                           help="The paper's methods (GD, CoCoA+, DANE, FSVRG, ...) and today's baselines "
                                "(FedAvg, FedProx, SCAFFOLD). Centralised references are marked.")
    algorithms = ui.algorithm_widgets(names, config)
    c1, c2 = st.columns(2)
    iterations = c1.number_input("Iterations", 1, MAX_ITERATIONS, config.iterations)
    seed = c2.number_input("Seed", 0, 2**32 - 1, config.seed)
    losses = ["logistic", "squared", "smoothed-hinge"]
    loss = st.selectbox("Loss", losses, index=losses.index(config.loss),
                        help="logistic: the paper's experiment; squared: ridge regression; smoothed hinge: SVM.")
    lam_text = st.text_input("λ (blank: 1/n, as in the paper)", "" if config.lam is None else repr(config.lam))
    sweep = st.checkbox("Stepsize sweep", help="Run each algorithm with its stepsize × 1/4, 1/2, 1, 2, 4 and "
                        "keep the best (lowest final f − f*), as the paper chose its stepsize after the fact.")
    new = None
    if algorithms is not None and names:
        try:
            lam = float(lam_text) if lam_text.strip() else None
            new = RunConfig(data=config.data, loss=loss, lam=lam, algorithms=algorithms,
                            iterations=int(iterations), seed=int(seed))
        except (FedvizError, ValueError) as e:
            st.error(f"λ: {e}" if "could not convert" in str(e) else str(e))
    if new is not None and new != config:
        ui.set_config(new)
        config = new
    b1, b2 = st.columns(2)
    if b1.button(":material/play_arrow: Run", type="primary", disabled=new is None, width="stretch"):
        with ui.guard("Starting the run"):
            variants = None
            if sweep:
                ds = ui.load_dataset(config.data)
                variants = sweep_variants(config, ds)
            ui.start_run(config, key="run", variants=variants)
    handle = st.session_state.get("run")
    if b2.button(":material/stop: Stop", disabled=handle is None or handle.done, width="stretch"):
        handle.stop("stopped by the user")

with right:
    ui.axis_controls()
    if st.session_state.get("run") is None:
        st.info("Choose algorithms and press **Run**. Curves appear as iterations finish.")
    ui.live_view("run", sweep=True)
