"""Learn · Rare features: Figure 1's ω^j with the error per bin, live, and FSVRG's ablation in one click."""

import numpy as np
import streamlit as st

from fedviz import ui
from fedviz.markup import escape
from fedviz.learn.rare_features import (MAX_ITERATIONS, METRICS, VARIANTS, AblationConfig, BucketTracker,
                                        ablation_findings, ablation_job, omega_buckets, rare_share)
from fedviz.plots import convergence_figure
from fedviz.plots.learn_rare import rare_features_figure
from fedviz.problems.losses import loss_for

ui.through_navigation()

KEY = "rare-run"

st.title("Rare features and the FSVRG ablation")
st.markdown(
    "Most words appear on few devices (the paper's Figure 1). FSVRG (Algorithm 4, Section 3.6) changes naive "
    "federated SVRG (Algorithm 3) in four ways: each node steps with **h/n_k**, updates are weighted by **n_k/n**, "
    "local gradients are scaled by **S_k**, and the aggregated update is scaled per feature by **A = Diag(K/ω^j)**. "
    "Run them side by side, each modification off on its own, and watch where the error sits.")
config = ui.current_config()
ui.show_query_problems()

buckets, ds = None, None
with ui.guard("Loading the data set"):
    ds = ui.load_dataset(config.data)
    buckets = omega_buckets(ds.stats.omega, ds.n_nodes)
    st.caption(f"Data: **{escape(ds.meta.get('source', 'upload'))}** · n = {ds.n:,}, d = {ds.d:,}, K = {ds.n_nodes:,} nodes; "
               f"{100 * rare_share(ds.stats.omega, ds.n_nodes):.0f}% of the features appear on fewer than a tenth "
               f"of the nodes — change the data on the Data page.")

# The picker spans the page: in the settings' column a 1024 px screen cut every label to "FSVR…".
variants = st.multiselect("Curves", list(VARIANTS), wrap=True, format_func=lambda k: VARIANTS[k].label,
                          key=ui.seeded("rare-variants", list(VARIANTS)),
                          help="FSVRG, FSVRG with one modification of Section 3.6.2 off, and naive FSVRG "
                               "(Algorithm 3, none of them).")
left, right = st.columns([1, 2], gap="large")
with left:
    iterations = st.number_input("Iterations", 1, MAX_ITERATIONS, key=ui.seeded("rare-iterations", 30))
    tune = st.checkbox("Tune stepsizes", key=ui.seeded("rare-tune", False),
                       help="Choose each curve's stepsize h by pilot runs first (as long as the run), so every variant runs at "
                            "its own best h rather than at the default derived for Algorithm 4.")
    metric = st.radio("Error per bin", list(METRICS), format_func=lambda m: METRICS[m].replace("*", "\\*"),
                      key=ui.seeded("rare-metric", "relative"))  # \* : an asterisk, not Markdown's italics
    ablation = None
    with ui.guard("Reading the settings"):
        if variants:
            # The loss the data take (softmax for many classes: FSVRG's S_k and A scale a feature's row of C).
            loss = config.loss if ds is None else loss_for(config.loss, ds.multiclass)
            ablation = AblationConfig.of(config, loss=loss, variants=tuple(variants), iterations=int(iterations),
                                         tune=bool(tune))
        else:
            st.info("Choose at least one curve.")
    if st.button(":material/play_arrow: Run the ablation", type="primary", disabled=ablation is None,
                 width="stretch"):
        with ui.guard("Starting the ablation"):
            old = st.session_state.get(KEY)
            if old is not None and not old.done:
                old.stop("replaced by a new run")
            tracker = BucketTracker()
            st.session_state[KEY] = ui.manager().submit(ablation_job(ablation, tracker), ui.session_id())
            st.session_state[KEY + "-meta"] = {"tracker": tracker, "data": ablation.data,
                                               "labels": [VARIANTS[v].label for v in ablation.variants]}
    handle = st.session_state.get(KEY)
    if st.button(":material/stop: Stop", disabled=handle is None or handle.done, width="stretch"):
        handle.stop("stopped by the user")
    with st.expander("What each curve changes"):
        st.markdown("\n".join(f"- **{v.label}**: {v.what}" for v in VARIANTS.values()))

with right:
    handle = st.session_state.get(KEY)
    state = None if handle is None else handle.status
    every = {"running": ui.LIVE_INTERVAL, "queued": ui.QUEUED_INTERVAL}.get(state)

    @st.fragment(run_every=every)
    def live():
        handle = st.session_state.get(KEY)
        meta = st.session_state.get(KEY + "-meta", {})
        if handle is None:
            if buckets is not None:
                st.plotly_chart(rare_features_figure(buckets, metric=metric), width="stretch", key="rare-fig")
            return
        ui.manager().touch(ui.session_id())
        snap = handle.snapshot()
        if every is not None and snap.status != state:
            st.rerun()  # started or ended: the whole page again, with the timer its new state needs
        ui.live._progress(snap)  # the Run page's progress bar and statuses
        if snap.status == "queued":
            return
        track = meta["tracker"].snapshot()
        version = (snap.run_id, snap.version, track.version, metric)
        cached = st.session_state.get(KEY + "-figures")
        if cached is None or cached[0] != version:
            # Each curve keeps one colour on the page: a tuned label ('FSVRG (stepsize 61.5, tuned)') is
            # coloured as the variant it came from (the handle keeps the submission order).
            styles = dict(zip(snap.labels, meta["labels"]))
            order = [lab for lab in meta["labels"] if lab in track.labels]
            latest = track.latest(metric) if track.buckets is not None else {}
            rare = None
            if track.buckets is not None and snap.phase != "preparing":
                rare = rare_features_figure(track.buckets, {lab: latest[lab] for lab in order if lab in latest},
                                            metric=metric, iterations={lab: int(track.iterations[lab][-1])
                                                                       for lab in order if lab in latest})
            base = ui.load_baselines(meta["data"]) if snap.summary else {}
            curves = convergence_figure({lab: snap.columns[lab] for lab in snap.labels},
                                        baselines={**base, "optimum": snap.optimum_test_error},
                                        styles=styles, title="The ablation: f(w) − f* and test error per iteration")
            cached = st.session_state[KEY + "-figures"] = (version, rare, curves, track.message)
        _, rare, curves, message = cached
        if message:
            st.warning(message.capitalize() + ".", icon=":material/warning:")
        if rare is not None:
            st.plotly_chart(rare, width="stretch", key="rare-fig")
            st.caption(
                "**What to look at.** Top: how many features appear on 1, 2–3, 4–7, … of the K nodes — most "
                "are rare.  \nBelow: " + {
                    "relative": "how much of the way from the start w = 0 to the optimum w* each curve still has to "
                                "go in each bin (1: none of it done).",
                    "mean_abs": "each curve's mean distance |w_j − w*_j| to the optimum, bin by bin.",
                    "share": "where each curve's remaining squared distance ‖w − w*‖² sits; a bin with many "
                             "features holds much of it whatever the algorithm.",
                }[metric] + "  \nThe paper's reason for A = Diag(K/ω^j) (Section 3.6.1): a feature seen on ω^j "
                "nodes gets only ω^j/K of its step when the K updates are averaged, and A gives it back. "
                "Whether the rare bins on the left lag without it here is said under the curves, from this run.  \n"
                "Curves that coincide are drawn one inside the other: a modification that changes nothing here.")
        st.plotly_chart(curves, width="stretch", key="rare-curves")
        if snap.finished:  # what the curves show, generated from them (not written for one data set)
            names = dict(zip(snap.labels, meta["labels"]))
            final = {names[lab]: float(snap.columns[lab]["suboptimality"][-1]) for lab in snap.labels
                     if len(snap.columns[lab]["suboptimality"])}
            last = max((int(snap.columns[lab]["iteration"][-1]) for lab in snap.labels
                        if len(snap.columns[lab]["iteration"])), default=0)
            rare, rare_bin = None, ""
            latest = track.latest("relative") if track.buckets is not None else {}
            reference = latest.get(VARIANTS["fsvrg"].label)
            # The rarest bin where the remaining error is defined (a bin whose w*_B = 0 has none).
            b = next((int(i) for i in track.buckets.populated if np.isfinite(reference[i])), None) \
                if reference is not None else None
            if b is not None:
                rare = {lab: float(v[b]) for lab, v in latest.items()}
                rare_bin = track.buckets.labels[b]
            found = ablation_findings(final, iteration=last, reference=VARIANTS["fsvrg"].label, rare=rare,
                                      rare_bin=rare_bin)
            if found:
                st.markdown(found.replace("*", "\\*").replace("\\*\\*", "**"))
        st.caption(
            "**What to look at.** Left: f(w) − f* (log scale) per iteration; a curve far above FSVRG shows a "
            "modification that matters on these data.  \nRight: test error, with the optimum (OPT) and the naive "
            "predictors as lines.  \nEvery curve runs at its default stepsize unless *Tune stepsizes* is on; a "
            "modification can look harmful at a default h and harmless once each curve is tuned — the paper also "
            "chose h after the fact (Section 4.1).")

    live()

ui.sync_link()
