"""The Run page's "Every node" section (issue 23, point 1): the per-node band beside the pooled test
error, the histogram of the nodes' errors at the last iteration and a node picker, with a sentence
computed from the run.  Drawn inside :func:`fedviz.ui.live_view`'s fragment, from the run's snapshot
(its record columns and :class:`~fedviz.problems.pernode.NodeTrack`); figures are rebuilt only when
the snapshot, the axis or a choice changed.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from ..plots.figures import x_values
from ..plots.pernode import (band_figure, caption, distance_figure, distance_runs, histogram_figure, node_figure,
                            personal_caption, personal_figure, personal_runs, unseen_caption)
from ..problems import metrics
from ..problems.pernode import few_test_rows_sentence
from ..personal.target import CONVERGENCE_NOTE, target_sentence


def metric_options(*, untested: int, K: int, unseen: bool) -> list[str]:
    """The "Per node" choices (the registry's metrics with a ``choice`` and a band, in its order): those of
    the seen nodes, an error only when some node has test rows, and the unseen nodes' when there are some."""
    return [m.name for m in metrics.METRICS if m.choice and m.band
            and (m.scope == "seen" or (m.scope == "unseen" and unseen))
            and not (m.scope == "seen" and m.needs_test_rows and untested == K)]


def node_counts(ds) -> tuple[np.ndarray, np.ndarray, int]:
    """(training rows per node n_k, test rows per node, test rows of no node) of a data set."""
    tn = np.asarray(ds.test_nodes)
    tested = np.bincount(tn[tn >= 0], minlength=ds.n_nodes)
    return ds.node_sizes, tested, int(np.count_nonzero(tn < 0))


def node_order(errors: np.ndarray) -> list[int]:
    """Node ids, the worst (highest final test error) first and the untested (NaN) last."""
    e = np.asarray(errors, dtype=float)
    key = np.where(np.isfinite(e), -e, np.inf)
    return [int(k) for k in np.argsort(key, kind="stable")]


def node_series(track, cols, axis: str, *, nodes: int, round_cost: float, node: int):
    """(x, the node's test error, the pooled test error) at the iterations the track kept."""
    iters = np.asarray(track.iterations)
    idx = np.searchsorted(cols["iteration"], iters)
    ok = idx < len(cols["iteration"])
    idx, iters = idx[ok], iters[ok]
    x = np.asarray(x_values(cols, axis, nodes=nodes, round_cost=round_cost), dtype=float)[idx]
    return x, np.asarray(track.error[: len(ok)][ok, node], dtype=float), np.asarray(cols["test_error"], float)[idx]


#: The most runs whose bands one figure draws; with more, a picker shows one run at a time.
MAX_BANDS = 2


def warn_few_test_rows(ds, spec) -> None:
    """Warn when the nodes hold too few test rows for their errors to read as more than steps
    (:func:`~fedviz.problems.pernode.few_test_rows_sentence`), with the Data page's remedies for ``spec``."""
    few = few_test_rows_sentence(node_counts(ds)[1], test_file=getattr(spec, "test", None) is not None,
                                 regression=ds.task == "regression")
    if few:
        st.warning(few, icon=":material/grain:")


def per_node_view(snap, meta: dict, key: str, axis: str, cost: float, *, regression: bool, styles,
                  load_dataset, width: int = 340, height: int = 420) -> None:
    """``load_dataset``: the dashboard's loader of a data spec (:func:`fedviz.ui.load_dataset`, which
    calls this function: passed in, so that this module sits below the adapter)."""
    labels = [label for label in snap.labels if label in snap.columns and len(snap.columns[label]["iteration"])]
    data = meta.get("data")
    if not labels or data is None:
        return
    ds = load_dataset(data)
    sizes, tested, unassigned = node_counts(ds)
    K = ds.n_nodes
    untested = int(np.count_nonzero(tested == 0))
    st.markdown("##### Every node")
    if len(labels) > MAX_BANDS:  # one run at a time: four bands of 0-100% on one axis read as one smear
        labels = [st.selectbox("Algorithm", labels, key=f"{key}-node-algo",
                               help=f"The band, the sentence, the histogram and the node picker of one run at a "
                                    f"time: with more than {MAX_BANDS} runs their bands overlap.")]
    last = {label: snap.last[label] for label in labels if snap.last.get(label) is not None}
    st.caption(caption(last, K=K, untested=untested, unassigned_rows=unassigned, regression=regression))
    warn_few_test_rows(ds, data)
    unseen = getattr(ds, "unseen", None)  # the nodes held out of training (issue 23, point 2)
    if unseen is not None:
        st.caption(unseen_caption(last, K=unseen.n_nodes, seen=K, test_rows=int(unseen.y_test.size),
                                  regression=regression, untested=int(np.count_nonzero(node_counts(unseen)[1] == 0))))
    nodes = snap.summary.get("nodes", K)
    runs = {label: snap.columns[label] for label in labels}
    options = metric_options(untested=untested, K=K, unseen=unseen is not None)
    helps = ", or ".join(m.help for m in metrics.METRICS if m.choice and m.band
                         and (m.scope == "seen" or (m.scope == "unseen" and unseen is not None)))
    metric = options[0] if len(options) == 1 else st.radio(
        "Per node", options, horizontal=True, key=f"{key}-node-metric", format_func=lambda n: metrics.get(n).choice,
        help=helps[:1].upper() + helps[1:] + ".")
    version = (snap.run_id, snap.version, axis, cost, metric, tuple(labels))
    cached = st.session_state.get(key + "-band")
    if cached is None or cached[0] != version:
        fig = band_figure(runs, axis=axis, nodes=nodes, round_cost=cost, regression=regression, styles=styles,
                          height=height, width=width, metric=metric)
        cached = st.session_state[key + "-band"] = (version, fig)
    st.plotly_chart(cached[1], width="stretch", key=f"{key}-band-chart")
    st.caption(metrics.get(metric).caption)
    personal_view(snap, runs, key, axis, cost, nodes=nodes, K=K, regression=regression, styles=styles,
                  width=width, height=height)
    tracks = {label: snap.nodes.get(label) for label in labels}
    tracks = {label: t for label, t in tracks.items() if t is not None and t.latest is not None}
    if metrics.get(metric).scope == "unseen":
        _unseen_histogram(snap, tracks, key, regression=regression)
        return
    if not tracks or untested == K:
        return
    if not snap.finished:
        # Live, the nodes' order changes at every redraw (a picked node would jump) and a picker of
        # 10,000 nodes would be sent to the browser twice a second: both wait for the end.
        st.caption("The histogram of the nodes' errors and the node picker appear when the run ends.")
        return
    label = st.selectbox("Algorithm", list(tracks), key=f"{key}-node-algo") if len(tracks) > 1 else next(iter(tracks))
    track = tracks[label]
    last = snap.last[label]
    st.plotly_chart(histogram_figure(track.latest.error, pooled=last.test_error, label=label, regression=regression),
                    width="stretch", key=f"{key}-node-hist")
    order = node_order(track.latest.error)
    fmt = (lambda v: f"{v:.4g}") if regression else (lambda v: f"{100 * v:.1f}%")

    def describe(k: int) -> str:
        e = float(track.latest.error[k])
        said = fmt(e) if np.isfinite(e) else "no test rows"
        return f"node {k}: n_k = {int(sizes[k]):,}, {int(tested[k]):,} test rows, error {said}"

    node = st.selectbox("Node (the worst first)", order, format_func=describe, key=f"{key}-node-pick")
    series = {lab: node_series(t, snap.columns[lab], axis, nodes=nodes, round_cost=cost, node=int(node))
              for lab, t in tracks.items()}
    st.plotly_chart(node_figure(int(node), series, axis=axis, regression=regression, styles=styles, width=width),
                    width="stretch", key=f"{key}-node-curve")
    stride = max(t.stride for t in tracks.values())
    if stride > 1:
        st.caption(f"The node's curve keeps every {stride}th iteration (and the last): the history of "
                   f"{K:,} nodes is bounded in memory.")


def _unseen_histogram(snap, tracks, key: str, *, regression: bool) -> None:
    """The unseen nodes' test errors at the last iteration (their per-node history is not kept: the
    node picker is the seen nodes')."""
    tracks = {label: t for label, t in tracks.items() if t.latest.unseen is not None}
    if not tracks or not snap.finished:
        return
    label = st.selectbox("Algorithm", list(tracks), key=f"{key}-unseen-algo") if len(tracks) > 1 else next(iter(tracks))
    st.plotly_chart(histogram_figure(tracks[label].latest.unseen, pooled=snap.last[label].unseen_test_error,
                                     label=label, regression=regression, unseen=True),
                    width="stretch", key=f"{key}-unseen-hist")
    st.caption("The node picker lists the seen nodes: choose the test error above to pick one.")


def personal_view(snap, runs, key: str, axis: str, cost: float, *, nodes: int, K: int, regression: bool, styles,
                  width: int = 340, height: int = 420) -> None:
    """The runs with a model per node (Ditto, APFL; issue 23, point 3): their personal models' test error
    per node beside the global model's, and for Ditto the distance to the exact v_k(λ_D) the run was
    given (:mod:`fedviz.personal.target`), with the sentences that say what they show."""
    with_personal, with_distance = personal_runs(runs), distance_runs(runs)
    if not with_personal and not with_distance:
        return
    st.markdown("##### Personal models")
    version = (snap.run_id, snap.version, axis, cost)
    cached = st.session_state.get(key + "-personal")
    if cached is None or cached[0] != version:
        fig = (personal_figure(runs, axis=axis, nodes=nodes, round_cost=cost, regression=regression, styles=styles,
                               height=height, width=width) if with_personal else None)
        dist = (distance_figure(runs, axis=axis, nodes=nodes, round_cost=cost, styles=styles, width=width)
                if with_distance else None)
        cached = st.session_state[key + "-personal"] = (version, fig, dist)
    if cached[1] is not None:
        st.plotly_chart(cached[1], width="stretch", key=f"{key}-personal-chart")
        st.caption("Each node's test rows scored with its own model (Ditto's v_k; APFL's mixture "
                   "αv_k + (1 − α)w): the band spans the nodes' 10th to 90th percentile, every node counted "
                   "alike, the solid line is the median node and the dashed one the median node under the "
                   "run's global model w.")
        text = personal_caption(runs, regression=regression)
        if text:
            st.caption(text)
    if cached[2] is not None:
        st.plotly_chart(cached[2], width="stretch", key=f"{key}-distance-chart")
        targets = dict(snap.summary.get("personal_targets") or {})
        lambdas = {label: float(targets[label]) for label in with_distance if label in targets}
        if lambdas:
            st.caption(target_sentence(lambdas, K) + " " + CONVERGENCE_NOTE)
