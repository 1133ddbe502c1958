"""Per-node figures of a run (issue 23, point 1): the 10th–90th percentile band of the nodes' test
error around their median beside the pooled curve, a histogram of the nodes' errors at the last
iteration, one node's curve, and the sentence that says what they show.

Builders take plain data (record columns, per-node vectors) and return Plotly figures or text;
the statistics are :mod:`fedviz.problems.pernode`'s.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np
import plotly.graph_objects as go

from ..data.split import DEAL_REMEDY
from ..problems import metrics
from ..problems.metrics import Metric
from ..problems.pernode import untested_sentence, worst_count
from .figures import _AXIS_TITLES, _LAYOUT, error_labels, legend_below, styles_of, x_values



def _band(fig, x, lo, mid, hi, color: str, label: str, name: str, kind: str, hover: str) -> None:
    """The 10th–90th percentile band (two invisible edges, the lower filled to the upper) and the median
    line named ``name``, its hover giving the band; ``kind`` ('' or 'personal') tags the edges' names."""
    tag = f"{label} {kind} " if kind else f"{label} "
    fig.add_scatter(x=x, y=hi, mode="lines", line=dict(width=0, color=color), hoverinfo="skip",
                    showlegend=False, legendgroup=label, name=tag + "p90")
    fig.add_scatter(x=x, y=lo, mode="lines", line=dict(width=0, color=color), fill="tonexty",
                    fillcolor=_rgba(color, 0.18), hoverinfo="skip", showlegend=False, legendgroup=label,
                    name=tag + "p10")
    fig.add_scatter(x=x, y=mid, mode="lines", line=dict(color=color, width=2), name=name, legendgroup=label,
                    customdata=np.c_[lo, hi],
                    hovertemplate=f"{label}<br>{kind + ', ' if kind else ''}median node {hover}<br>10th–90th "
                                  + hover.replace("y", "customdata[0]") + " – "
                                  + hover.replace("y", "customdata[1]") + "<extra></extra>")

def _rgba(color: str, alpha: float) -> str:
    c = color.lstrip("#")
    r, g, b = (int(c[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def metric_labels(metric: Metric, *, regression: bool = False) -> dict:
    """Title, axis title, tick format and hover text of a per-node metric's chart: the test error's
    (:func:`~fedviz.plots.figures.error_labels`: a rate, or the MSE on real targets) for an error, else the
    metric's own axis with 4 significant digits (3 in powers of ten for a distance)."""
    if metric.kind == "error":
        return {**error_labels("mse" if regression else "error"), "title": metric.title}
    return dict(title=metric.title, axis=metric.axis, tickformat=None,
                hover="%{y:.3e}" if metric.kind == "distance" else "%{y:.4g}")


def band_figure(runs: Mapping[str, Mapping[str, np.ndarray]], *, axis: str = "iteration", nodes: int = 1,
                round_cost: float = 0.0, regression: bool = False, styles: Mapping[str, str] | None = None,
                height: int = 420, width: int = 340, metric: str = "node_error") -> go.Figure:
    """For every run: the band between the nodes' 10th and 90th percentile of a per-node ``metric`` (a name of
    the registry :mod:`fedviz.problems.metrics` that keeps p10, p50 and p90), their median (solid) and the
    pooled value (dotted), against the chosen x axis.  ``runs``: label → record columns with
    ``<metric>_p10/p50/p90`` and the metric's pooled key; a run whose nodes are all undefined (NaN: no
    test rows) draws only its pooled curve.  The default, ``node_error``, is the test error (pooled:
    ``test_error``); ``node_loss`` the own losses F_k(w) (eq. (6)), whose row-weighted mean, the pooled
    curve, is the objective f(w); ``unseen_error`` the test error of the unseen nodes (issue 23, point 2),
    pooled over their test rows."""
    m = metrics.get(metric)
    if not m.band:
        raise ValueError(f"the per-node metric {metric!r} keeps no 10th, 50th and 90th percentiles to draw a band")
    labels = metric_labels(m, regression=regression)
    prefix, pooled_col = m.name, m.pooled_key
    fig = go.Figure()
    st = styles_of(runs, styles)
    names, tops = [], []
    for label, cols in runs.items():
        if not len(cols.get("iteration", ())):
            continue
        x = np.asarray(x_values(cols, axis, nodes=nodes, round_cost=round_cost), dtype=float)
        color = st[label].color
        lo, mid, hi = (np.asarray(cols[m.key(q)], dtype=float) for q in ("p10", "p50", "p90"))
        tops += [hi[np.isfinite(hi)]] + ([np.asarray(cols[pooled_col], dtype=float)] if pooled_col else [])
        if np.isfinite(mid).any():
            name = f"{label}: median node (band 10th–90th)"
            _band(fig, x, lo, mid, hi, color, label, name, "", labels["hover"])
            names.append(name)
        if pooled_col is None:
            continue
        name = f"{label}: {m.pooled_label}"  # the caption's words for the dotted line
        fig.add_scatter(x=x, y=np.asarray(cols[pooled_col], dtype=float), mode="lines", name=name,
                        legendgroup=label, line=dict(color=color, width=1.5, dash="dot"),
                        hovertemplate=f"{label}<br>{m.pooled_label} {labels['hover']}<extra></extra>")
        names.append(name)
    fig.update_layout(title=labels["title"], xaxis_title=_AXIS_TITLES[axis],
                      yaxis_title=labels["axis"], yaxis_tickformat=labels["tickformat"], **_LAYOUT)
    legend_below(fig, names, height=height, width=width)
    top = np.concatenate(tops) if tops else np.empty(0)
    top = top[np.isfinite(top)]
    if m.kind == "error" and not regression and top.size:
        # Error rates from 0: the band's upper edge (often 100% on small nodes) inside the frame.
        fig.update_yaxes(range=[0.0, min(1.0, float(top.max())) * 1.04 + 0.005])
    return fig


def histogram_figure(errors: np.ndarray, *, pooled: float, label: str = "", regression: bool = False,
                     height: int = 320, unseen: bool = False) -> go.Figure:
    """The nodes' test errors at one iteration (NaN entries, nodes without test rows, left out), with
    the pooled error and the nodes' unweighted mean as vertical lines.  Sign error rates fall in
    twenty bins of 5 points each; squared errors in Plotly's own bins.  ``unseen``: the errors are the
    unseen nodes' (the title says so)."""
    labels = error_labels("mse" if regression else "error")
    e = np.asarray(errors, dtype=float)
    e = e[np.isfinite(e)]
    fig = go.Figure()
    bins = None if regression else dict(start=0.0, end=1.0 + 1e-9, size=0.05)
    fig.add_histogram(x=e, xbins=bins, marker_color="#7f7f7f", name="nodes",
                      hovertemplate=f"{labels['axis']} %{{x}}<br>%{{y}} nodes<extra></extra>")
    fmt = (lambda v: f"{v:.4g}") if regression else (lambda v: f"{100 * v:.1f}%")
    mean = float(e.mean()) if e.size else math.nan
    # The two labels sit on either side of their lines (the lower value's on its left), never on each other.
    left = pooled <= mean if math.isfinite(mean) else True
    for value, text, dash, side in ((pooled, "pooled", "dot", "top left" if left else "top right"),
                                    (mean, "node mean", "dash", "top right" if left else "top left")):
        if math.isfinite(value):
            fig.add_vline(x=value, line=dict(color="#333333", dash=dash, width=1.5),
                          annotation_text=f"{text} {fmt(value)}", annotation_position=side)
    which = "Unseen nodes" if unseen else "Nodes"
    title = f"{which} by test error at the last iteration{f' ({label})' if label else ''}"
    fig.update_layout(title=title, xaxis_title=labels["axis"], yaxis_title="nodes", height=height,
                      xaxis_tickformat=labels["tickformat"], showlegend=False, bargap=0.05,
                      margin=dict(l=60, r=20, t=70, b=40))
    return fig


def node_figure(node: int, series: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]], *,
                axis: str = "iteration", regression: bool = False, styles: Mapping[str, str] | None = None,
                height: int = 380, width: int = 340) -> go.Figure:
    """One node's test error (solid) against the pooled test error (dotted), per run.

    ``series``: label → (x, the node's error, the pooled error at the same x).
    """
    labels = error_labels("mse" if regression else "error")
    fig = go.Figure()
    st = styles_of({k: None for k in series}, styles)
    names = []
    for label, (x, mine, pooled) in series.items():
        color = st[label].color
        fig.add_scatter(x=x, y=mine, mode="lines+markers", marker=dict(size=4), line=dict(color=color, width=2),
                        name=f"{label}: node {node}",
                        hovertemplate=f"{label}<br>node {node} {labels['hover']}<extra></extra>")
        fig.add_scatter(x=x, y=pooled, mode="lines", line=dict(color=color, width=1.5, dash="dot"),
                        name=f"{label}: pooled", hovertemplate=f"{label}<br>pooled {labels['hover']}<extra></extra>")
        names += [f"{label}: node {node}", f"{label}: pooled"]
    fig.update_layout(title=f"Node {node}: its test error against the pooled one", xaxis_title=_AXIS_TITLES[axis],
                      yaxis_title=labels["axis"], yaxis_tickformat=labels["tickformat"], **_LAYOUT)
    legend_below(fig, names, height=height, width=width)
    return fig


def caption(last: Mapping[str, object], *, K: int, untested: int, unassigned_rows: int = 0,
            regression: bool = False) -> str:
    """What the per-node figures show, from each run's last record (label → record with the
    per-node fields): the pooled error, the nodes' median and the worst-10% mean against it,
    and the nodes the per-node error leaves out."""
    fmt = (lambda v: f"{v:.4g}") if regression else (lambda v: f"{100 * v:.1f}%")
    unit = "" if regression else " points"
    tested = K - untested
    m = worst_count(tested)
    parts = []
    for label, rec in last.items():
        pooled, worst, med = rec.test_error, rec.node_error_worst10, rec.node_error_p50
        if not (math.isfinite(pooled) and math.isfinite(worst) and math.isfinite(med)):
            continue
        gap = (worst - pooled) * (1 if regression else 100)
        where = "above" if gap >= 0 else "below"
        parts.append(f"{label} at iteration {rec.iteration:,}: the worst 10% of nodes ({m:,} of {tested:,}) average "
                     f"{fmt(worst)}, {abs(gap):.1f}{unit} {where} the pooled {fmt(pooled)}; the median node "
                     f"{fmt(med)}, the best {fmt(rec.node_error_min)}.")
    note = untested_sentence(untested, K, unassigned_rows)
    return " ".join(parts + ([note] if note else []))


def unseen_caption(last: Mapping[str, object], *, K: int, seen: int, test_rows: int,
                   regression: bool = False, untested: int = 0) -> str:
    """The unseen nodes (issue 23, point 2) in sentences: how many of the nodes are held out and
    what they are scored with, then per run (label → last record) their pooled and median test error
    against the seen nodes', and the ``untested`` of them without test rows.  '' when there are none."""
    if K <= 0:
        return ""
    fmt = (lambda v: f"{v:.4g}") if regression else (lambda v: f"{100 * v:.1f}%")
    what = "squared error" if regression else "error"
    total = K + seen
    text = (f"{K:,} of the {total:,} nodes are unseen (held out of training, {100 * K / total:.0f}%): each run's "
            f"model in force is scored on their {test_rows:,} test rows, as a new client would be.")
    parts = []
    for label, rec in last.items():
        u, med, s = rec.unseen_test_error, rec.unseen_error_p50, rec.test_error
        if not (math.isfinite(u) and math.isfinite(s)):
            continue
        parts.append(f"{label} at iteration {rec.iteration:,}: {what} {fmt(u)} on the unseen nodes' test rows "
                     f"against {fmt(s)} on the seen nodes'"
                     + (f", the median unseen node {fmt(med)}." if math.isfinite(med) else "."))
    if not parts and test_rows == 0:
        parts.append("They have no test rows (a separate test file's rows belong to no node): they cannot be scored. "
                     + DEAL_REMEDY)
    elif untested:
        parts.append(f"{untested:,} of the {K:,} unseen nodes have no test rows and are left out of their per-node "
                     "error (counted, not scored).")
    return " ".join([text] + parts)


# ---------------------------------------------------------------------------------------------
# Personal models (issue 23, point 3): Ditto's and APFL's per-node models on the Run page
# ---------------------------------------------------------------------------------------------

#: The metrics the personal models' figures and sentences read (:mod:`fedviz.problems.metrics`).
_ERROR, _PERSONAL, _DISTANCE = (metrics.get(n) for n in ("node_error", "personal_error", "personal_distance"))


def personal_runs(runs: Mapping[str, Mapping[str, np.ndarray]]) -> list[str]:
    """The labels of the runs whose records carry personal models' scores (Ditto, APFL)."""
    return [label for label, cols in runs.items()
            if len(cols.get("iteration", ())) and np.isfinite(np.asarray(cols[_PERSONAL.key("p50")], float)).any()]


def distance_runs(runs: Mapping[str, Mapping[str, np.ndarray]]) -> list[str]:
    """The labels of the runs whose records carry a distance to an exact target (Ditto given v_k(λ_D))."""
    return [label for label, cols in runs.items()
            if len(cols.get("iteration", ())) and np.isfinite(np.asarray(cols[_DISTANCE.key("rms")], float)).any()]


def personal_figure(runs: Mapping[str, Mapping[str, np.ndarray]], *, axis: str = "iteration", nodes: int = 1,
                    round_cost: float = 0.0, regression: bool = False, styles: Mapping[str, str] | None = None,
                    height: int = 420, width: int = 340) -> go.Figure:
    """For every run with personal models (:func:`personal_runs`): each node scored with its own model,
    the band between the nodes' 10th and 90th percentile test error around their median (solid), beside
    the median node under the run's global model (dashed).  ``runs``: label → record columns with
    ``personal_error_p10/p50/p90`` and ``node_error_p50``."""
    labels = metric_labels(_PERSONAL, regression=regression)
    fig = go.Figure()
    st = styles_of(runs, styles)
    names, tops = [], []
    for label in personal_runs(runs):
        cols = runs[label]
        x = np.asarray(x_values(cols, axis, nodes=nodes, round_cost=round_cost), dtype=float)
        color = st[label].color
        lo, mid, hi = (np.asarray(cols[_PERSONAL.key(q)], dtype=float) for q in ("p10", "p50", "p90"))
        glob = np.asarray(cols[_ERROR.key("p50")], dtype=float)
        tops += [hi[np.isfinite(hi)], glob[np.isfinite(glob)]]
        name = f"{label}: personal models, median node (band 10th–90th)"
        _band(fig, x, lo, mid, hi, color, label, name, "personal", labels["hover"])
        gname = f"{label}: global model, median node"
        fig.add_scatter(x=x, y=glob, mode="lines", name=gname, legendgroup=label,
                        line=dict(color=color, width=1.5, dash="dash"),
                        hovertemplate=f"{label}<br>global model, median node {labels['hover']}<extra></extra>")
        names += [name, gname]
    fig.update_layout(title=labels["title"], xaxis_title=_AXIS_TITLES[axis], yaxis_title=labels["axis"],
                      yaxis_tickformat=labels["tickformat"], **_LAYOUT)
    legend_below(fig, names, height=height, width=width)
    top = np.concatenate(tops) if tops else np.empty(0)
    if not regression and top.size:
        fig.update_yaxes(range=[0.0, min(1.0, float(top.max())) * 1.04 + 0.005])
    return fig


def distance_figure(runs: Mapping[str, Mapping[str, np.ndarray]], *, axis: str = "iteration", nodes: int = 1,
                    round_cost: float = 0.0, styles: Mapping[str, str] | None = None, height: int = 380,
                    width: int = 340) -> go.Figure:
    """For every run given an exact target (:func:`distance_runs`): the root mean square over the nodes
    of ‖v_k − v_k(λ_D)‖ (``personal_distance``) against the x axis, on a log y axis (non-positive values,
    an exact hit, are not drawn on it)."""
    fig = go.Figure()
    st = styles_of(runs, styles)
    names = []
    for label in distance_runs(runs):
        cols = runs[label]
        x = np.asarray(x_values(cols, axis, nodes=nodes, round_cost=round_cost), dtype=float)
        y = np.asarray(cols[_DISTANCE.key("rms")], dtype=float)
        y = np.where(y > 0, y, np.nan)
        name = f"{label}: RMS over nodes of ‖v_k − v_k(λ_D)‖"
        fig.add_scatter(x=x, y=y, mode="lines", name=name, line=dict(color=st[label].color, width=2),
                        hovertemplate=f"{label}<br>distance %{{y:.3e}}<extra></extra>")
        names.append(name)
    fig.update_layout(title=_DISTANCE.title, yaxis_type="log", xaxis_title=_AXIS_TITLES[axis],
                      yaxis_title=_DISTANCE.axis, **_LAYOUT)
    fig.update_yaxes(exponentformat="power")
    legend_below(fig, names, height=height, width=width)
    return fig


def personal_caption(runs: Mapping[str, Mapping[str, np.ndarray]], *, regression: bool = False) -> str:
    """Per run with personal models, at its last record: the personal models' error pooled over the test
    rows of the nodes and at the median node, against the global model's, and (given a target) the
    distance to it at the first and the last record."""
    fmt = (lambda v: f"{v:.4g}") if regression else (lambda v: f"{100 * v:.1f}%")
    what = "squared error" if regression else "error"
    parts = []
    for label in personal_runs(runs):
        cols = runs[label]
        i = len(cols["iteration"]) - 1
        pooled, med = float(cols[_PERSONAL.pooled_key][i]), float(cols[_PERSONAL.key("p50")][i])
        gpooled, gmed = float(cols[_ERROR.pooled_key][i]), float(cols[_ERROR.key("p50")][i])
        if not all(math.isfinite(v) for v in (pooled, med, gpooled, gmed)):
            continue
        text = (f"{label} at iteration {int(cols['iteration'][i]):,}: its personal models' {what} is "
                f"{fmt(pooled)} pooled and {fmt(med)} at the median node, the global model's {fmt(gpooled)} and "
                f"{fmt(gmed)}")
        dist = np.asarray(cols[_DISTANCE.key("rms")], dtype=float)
        if math.isfinite(dist[0]) and math.isfinite(dist[i]):
            text += (f"; their distance to the exact models went from {dist[0]:.3g} at iteration "
                     f"{int(cols['iteration'][0]):,} to {dist[i]:.3g}")
        parts.append(text + ".")
    return " ".join(parts)
