"""Personalise: every node's own model against the one global model, node by node (issue 23, point 4)."""

import math

import numpy as np
import streamlit as st

from fedviz import ui
from fedviz.data.build import partition_words
from fedviz.errors import FedvizError
from fedviz.markup import escape
from fedviz.personal import PARAMS, PersonaliseConfig
from fedviz.plots.personal import distribution_figure, finding, lam_text, no_test_rows, path_figure, summary_rows
from fedviz.problems.losses import loss_for

ui.through_navigation()

#: The Ditto column's λ_D choice that lets the path choose (PersonaliseConfig.ditto_lambda = None).
BEST = "best for the worst 10%"

st.title("Personalise")
config = ui.current_config()
ui.show_query_problems()
st.markdown(
    "One global model w* against a model per node: **Local** (each node alone, v_k = argmin F_k), **fine-tuned** "
    "(m local steps from w*), **Ditto** (argmin F_k(v) + (λ_D/2)‖v − w*‖², exact, from Local at λ_D = 0 to w* as "
    "λ_D → ∞) and **APFL**'s mixture α v_k + (1 − α) w*, beside each node's own majority label (Section 4.1). "
    "Every node is scored on its own test rows; the pooled error counts every test row once, the others count "
    "every node once.")

ds = None
with ui.guard("Loading the data set"):
    ds = ui.load_dataset(config.data)
    st.caption(f"Data: **{escape(ds.meta.get('source', 'upload'))}** · n = {ds.n:,}, d = {ds.d:,}, "
               f"K = {ds.n_nodes:,} nodes · partition: {partition_words(ds)} · test set: "
               f"{ds.meta.get('split', 'its own')} — change them on the Data page; the loss and λ are the Run page's.")
    ui.show_data_notes(ds)
    ui.warn_few_test_rows(ds, config.data)  # every number below is per node

left, right = st.columns([1, 2], gap="large")
pconfig = None
with left:
    loss = loss_for(config.loss, ds is not None and ds.multiclass)
    lam_shown = "1/n" if config.lam is None else f"{config.lam:g}"
    st.caption(f"Loss: {loss}" + (f" over the data's {ds.n_classes} classes" if ds is not None and ds.multiclass
                                  else "") + f"; λ = {lam_shown}.")
    steps = st.number_input("Fine-tuning steps m", 0, 10_000, value=5, key="pers-steps",
                            help=PARAMS["finetune_steps"].help)
    step_text = st.text_input("Fine-tuning step h (blank: 1/L_k on node k)", key="pers-step",
                              help=PARAMS["finetune_step"].help)
    alpha = st.slider("APFL α", 0.0, 1.0, value=0.5, step=0.05, key="pers-alpha", help=PARAMS["apfl_alpha"].help)
    grid = PersonaliseConfig().lambdas
    # ∞ is not offered: Ditto there is the global model, which has its own box.
    ditto = st.selectbox("Ditto's λ_D (the Ditto box)", [BEST] + [lam_text(x) for x in grid if math.isfinite(x)],
                         key="pers-ditto",
                         help="Any λ_D of the path drawn below; by default the one whose worst 10% of nodes fare "
                              "best (chosen on the test rows: how far Ditto can go, not a tuned model).")
    try:
        step = None
        if step_text.strip():
            try:
                step = float(step_text)
            except ValueError:
                raise FedvizError(f"fine-tuning step h: {step_text!r} is not a number; allowed: "
                                  f"{PARAMS['finetune_step'].range_text()}, or blank for 1/L_k") from None
        lam_d = None if ditto == BEST else float(ditto)
        pconfig = PersonaliseConfig(finetune_steps=int(steps), finetune_step=step, apfl_alpha=float(alpha),
                                    ditto_lambda=lam_d)
    except FedvizError as e:
        st.error(escape(str(e)))
    # Without a test row on any node there is nothing to score: said at once, nothing solved.
    untestable = ds is not None and not np.any(np.asarray(ds.test_nodes) >= 0)
    ready = ds is not None and pconfig is not None and ui.personal_ready(config.data, loss, config.lam, pconfig)
    go = st.button(":material/calculate: Compute", type="primary", disabled=pconfig is None or ds is None or untestable,
                   width="stretch", help="Solves every node's models exactly (Newton per node) and Ditto at "
                                         f"{len(grid)} values of λ_D; seconds on google-plus-small.")

with right:
    report = None
    if ds is not None and pconfig is not None and (go or ready):
        with ui.guard("Computing the personalised models"):
            report = ui.load_personal(config.data, loss, config.lam, pconfig)
            st.session_state["pers-last"] = (config.data, loss, config.lam, pconfig)
    last = st.session_state.get("pers-last")
    if report is None and last is not None and last[:3] == (config.data, loss, config.lam) and ui.personal_ready(*last):
        # A setting changed since Compute: the last result stays on the page, said to be the last one.
        report = ui.load_personal(*last)
        st.warning("The settings on the left changed since the last Compute: below are the models of the settings "
                   "computed last. Press **Compute** to update them.", icon=":material/update:")
    if untestable:
        st.info(no_test_rows(int(np.asarray(ds.test_nodes).size)), icon=":material/info:")
    elif report is None:
        st.info("Press **Compute**: every node's Local, fine-tuned, Ditto and APFL models, solved exactly, and "
                "Ditto's path from Local to the global model.")
    else:
        regression = ds.task != "classification"
        st.markdown(escape(finding(report, regression=regression)))  # computed from the report
        if report.untested < report.nodes:
            st.plotly_chart(distribution_figure(report, regression=regression), width="stretch")
            st.table(summary_rows(report, regression=regression))
            st.caption("Pooled: every test row once (the Run page's test error); unweighted mean, std, p10 and min: "
                       "every tested node once; worst 10%: the mean of the worst tenth of the nodes (q-FFL's). The "
                       "per-node majority predicts each node's commonest training label. "
                       + ("Ditto's λ_D is the one chosen on the left." if report.config.ditto_lambda is not None else
                          "Ditto's λ_D is the path's best for the worst 10%, chosen on these same test rows: how far "
                          "Ditto can go, not a tuned model."))
            st.plotly_chart(path_figure(report, regression=regression), width="stretch")
        unseen = ui.personal_unseen(config.data, loss, config.lam, report.config)
        if unseen is not None:
            st.subheader("Unseen nodes: new clients")
            if unseen.untested == unseen.nodes:
                st.info(f"None of the {unseen.nodes:,} unseen nodes has test rows: none can be scored.")
            else:
                st.markdown(escape(f"The {unseen.nodes:,} nodes held out of training (Data › Unseen nodes), scored "
                                   "as new clients: the global model w* of the seen nodes as they receive it, and "
                                   "each method run from it on the new node's own training rows. "
                                   + finding(unseen, regression=regression)))
                st.plotly_chart(distribution_figure(unseen, regression=regression), width="stretch")
                st.table(summary_rows(unseen, regression=regression))
        c = report.checks
        if "ditto0_minus_local" in c:
            st.caption(f"Exact Ditto, measured here: at λ_D = 0 (solved from w*) it matches Local (solved from 0) "
                       f"to {c['ditto0_minus_local']:.1e} in every F_k, and at λ_D = {c['ditto_limit_lambda']:.0e} "
                       f"the global model to {c['ditto_limit_minus_global']:.1e}. "
                       f"{sum(report.seconds.values()):.1f} s in all.")

ui.sync_link()
