"""The Personalise page's figures and sentence (issue 23, point 4), from a
:class:`~fedviz.personal.report.PersonalReport`.

* :func:`distribution_figure`: every node's test error under each method, one box per method
  (global w*, the per-node majority, Local, fine-tuned, Ditto(λ_D), APFL), its pooled error marked;
* :func:`path_figure`: exact Ditto's λ_D path from Local (λ_D = 0) to the global model (λ_D = ∞):
  the nodes' median error with their 10th–90th percentile band, the pooled error and the
  worst-10% mean at each λ_D, and the λ_D that serves the worst 10% best marked;
* :func:`summary_rows`: the table pooled / unweighted mean / std / p10 / worst-10% / min;
* :func:`finding`: one sentence that says what the picture shows, every number read from the report.

The statistics are the report's (:func:`fedviz.problems.pernode.summarize`: ``worst10`` is the mean
of the ⌈K_t/10⌉ worst tested nodes, percentiles numpy's linear ones); this module only draws and
words them.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from ..data.split import DEAL_REMEDY
from ..personal.report import TITLES, PersonalReport
from ..problems.pernode import untested_sentence, worst_count
from .figures import _LAYOUT, error_labels, legend_below, rotated_depth

#: A colour per method: the global model in the Run page's OPT blue, Local's family in greens.
COLOURS = {"majority": "#7f7f7f", "global": "#1f77b4", "local": "#2ca02c", "finetune": "#ff7f0e",
           "ditto": "#9467bd", "apfl": "#17becf"}
#: The table's columns: report summary key → heading.
TABLE_COLUMNS = {"pooled": "pooled", "mean": "unweighted mean", "std": "std", "p10": "p10",
                 "worst10": "worst 10%", "min": "min"}
#: The most nodes whose points are drawn beside each box (above: the outliers only).
MAX_POINTS = 2_000
#: The methods that give each node a model (or predictor) of its own; ``global`` is the one shared model.
PERSONAL = ("majority", "local", "finetune", "ditto", "apfl")


def lam_text(x: float) -> str:
    """λ_D as the page writes it: '0', '0.0316', '∞'."""
    x = float(x)
    return "∞" if math.isinf(x) else ("n/a" if math.isnan(x) else f"{x:g}")


def method_label(report: PersonalReport, method: str) -> str:
    """A method's name with the setting it was computed at ('Ditto (λ_D = 0.0316)', 'fine-tuned (5 steps)')."""
    title = TITLES[method]
    if method == "ditto":
        return f"{title} (λ_D = {lam_text(report.ditto_lambda)})"
    if method == "apfl":
        return f"{title} (α = {report.config.apfl_alpha:g})"
    if method == "finetune":
        return f"{title} ({report.config.finetune_steps:,} steps)"
    if method == "global":
        return f"{title} w*"
    return title


def _fmt(regression: bool):
    return (lambda v: "n/a" if not math.isfinite(v) else f"{v:.4g}") if regression else \
        (lambda v: "n/a" if not math.isfinite(v) else f"{100 * v:.1f}%")


def summary_rows(report: PersonalReport, *, regression: bool = False) -> dict[str, list[str]]:
    """The table: one row per method, the columns of :data:`TABLE_COLUMNS` (percent, or MSE)."""
    fmt = (lambda v: "n/a" if not math.isfinite(v) else f"{v:.4g}") if regression else \
        (lambda v: "n/a" if not math.isfinite(v) else f"{100 * v:.2f}%")
    out = {"method": [method_label(report, m) for m in report.methods]}
    for key, head in TABLE_COLUMNS.items():
        out[head] = [fmt(float(report.summaries[m][key])) for m in report.methods]
    return out


def distribution_figure(report: PersonalReport, *, regression: bool = False, height: int = 460,
                        width: int = 700) -> go.Figure:
    """One box per method over its tested nodes' test errors (whiskers 1.5 IQR, every node a point
    on it up to :data:`MAX_POINTS` nodes), and the method's pooled error as a black diamond."""
    labels = error_labels("mse" if regression else "error")
    fig = go.Figure()
    names = []
    # Every node a point while the browser can draw them all (six boxes of 10,000 nodes it cannot, well).
    points = "all" if report.nodes <= MAX_POINTS else "outliers"
    for m in report.methods:
        e = np.asarray(report.errors[m], dtype=float)
        e = e[np.isfinite(e)]
        name = method_label(report, m)
        fig.add_box(y=e, x=[name] * e.size, name=name, marker_color=COLOURS[m], boxpoints=points, jitter=0.4,
                    pointpos=0, marker=dict(size=3, opacity=0.35), line=dict(width=1.5), showlegend=False,
                    hoverinfo="y")
    pooled = [float(report.summaries[m]["pooled"]) for m in report.methods]
    fig.add_scatter(x=[method_label(report, m) for m in report.methods], y=pooled, mode="markers",
                    marker=dict(symbol="diamond", size=11, color="#111111", line=dict(color="white", width=1)),
                    name="pooled (every test row counts once)",
                    hovertemplate="pooled " + labels["hover"] + "<extra></extra>")
    names.append("pooled (every test row counts once)")
    fig.update_layout(title="Test error per node, each node scored by its own model", yaxis_title=labels["axis"],
                      yaxis_tickformat=None if regression else ".0%", boxmode="overlay", **_LAYOUT)
    legend_below(fig, names, height=height, width=width)
    if not regression:
        fig.update_yaxes(range=[-0.02, 1.02])
    return fig


def path_figure(report: PersonalReport, *, regression: bool = False, height: int = 460,
                width: int = 700) -> go.Figure:
    """Exact Ditto along the λ_D grid, one grid point per tick (0: Local; ∞: the global model): the
    nodes' median test error (solid) in their 10th–90th percentile band, the pooled error (dotted),
    the worst-10% mean (dashed), and a vertical line at the λ_D whose worst-10% mean is lowest."""
    labels = error_labels("mse" if regression else "error")
    lams = np.asarray(report.lambdas, dtype=float)
    x = np.arange(lams.size)
    ticks = [("0 (Local)" if lam == 0 else "∞ (global)" if math.isinf(lam) else lam_text(lam)) for lam in lams]
    s = report.path_summaries
    col = lambda key: np.array([float(d[key]) for d in s])  # noqa: E731
    colour = COLOURS["ditto"]
    fig = go.Figure()
    fig.add_scatter(x=x, y=col("p90"), mode="lines", line=dict(width=0, color=colour), hoverinfo="skip",
                    showlegend=False, name="p90")
    fig.add_scatter(x=x, y=col("p10"), mode="lines", line=dict(width=0, color=colour), fill="tonexty",
                    fillcolor="rgba(148,103,189,0.2)", hoverinfo="skip", showlegend=False, name="p10")
    names = ["median node (band: 10th–90th percentile)", "pooled", "worst 10% of nodes (mean)"]
    fig.add_scatter(x=x, y=col("p50"), mode="lines+markers", line=dict(color=colour, width=2), marker=dict(size=5),
                    name=names[0], customdata=np.c_[col("p10"), col("p90")], text=ticks,
                    hovertemplate="λ_D = %{text}<br>median " + labels["hover"] + "<br>10th–90th "
                                  + labels["hover"].replace("y", "customdata[0]") + " – "
                                  + labels["hover"].replace("y", "customdata[1]") + "<extra></extra>")
    fig.add_scatter(x=x, y=col("pooled"), mode="lines", line=dict(color="#111111", width=1.5, dash="dot"),
                    name=names[1], text=ticks, hovertemplate="λ_D = %{text}<br>pooled " + labels["hover"]
                                                              + "<extra></extra>")
    fig.add_scatter(x=x, y=col("worst10"), mode="lines", line=dict(color="#d62728", width=1.5, dash="dash"),
                    name=names[2], text=ticks, hovertemplate="λ_D = %{text}<br>worst 10% " + labels["hover"]
                                                              + "<extra></extra>")
    best = report.best_lambda
    if not math.isnan(best):
        hit = np.flatnonzero(lams == best)
        if hit.size:
            # On two lines, on the side with more room: one line ran past the plot's end on a narrow page,
            # and Plotly widened the x range to hold it, squeezing the path into a third of the plot.
            fig.add_vline(x=int(hit[0]), line=dict(color="#d62728", width=1, dash="longdash"),
                          annotation_text=f"best for the worst 10%:<br>λ_D = {lam_text(best)}",
                          annotation_position="top right" if hit[0] < lams.size / 2 else "top left")
    fig.update_layout(title="Ditto's λ_D path: from Local (λ_D = 0)<br>to the global model (λ_D = ∞)",
                      xaxis_title="λ_D (one tick per grid point)", yaxis_title=labels["axis"],
                      yaxis_tickformat=labels["tickformat"], **_LAYOUT)
    fig.update_xaxes(tickmode="array", tickvals=list(x), ticktext=ticks, tickangle=-45,
                     range=[-0.5, lams.size - 0.5])  # the grid, whatever the labels drawn in it
    # The labels slant at 45°: the longest reaches its length × sin 45° below the axis.  The x title and
    # the legend go under that depth (the default 58 px put the title on "∞ (global)" and the legend's
    # first row on "0 (Local)", issue 31, point 10), and the first label's run to the left fits the margin.
    depth = rotated_depth(ticks)
    legend_below(fig, names, height=height, width=width, top=70, xtitle=depth + 45,
                 left=max(60, int(depth) + 10))
    if not regression:
        top = np.concatenate([col("p90"), col("worst10"), col("pooled")])
        top = top[np.isfinite(top)]
        # Room above the highest line for the best λ_D's two-line label.
        fig.update_yaxes(range=[0.0, min(1.0, float(top.max()) if top.size else 1.0) * 1.25 + 0.005])
    return fig


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def no_test_rows(unassigned_rows: int) -> str:
    """Why no node can be scored when no test row belongs to a node, and what to do on Data."""
    why = (f"the test set's {unassigned_rows:,} rows belong to no node: a separate test file, or a preset split "
           "into other nodes, whose test rows stay with the generator's own nodes"
           if unassigned_rows else "the test set is empty")
    if not unassigned_rows:
        return (f"No node has test rows ({why}), so no model can be scored node by node. On Data, keep a "
                "preset's own nodes, or split a file without a test file (a test fraction above 0): each node's "
                "own rows are then split.")
    return (f"No node has test rows ({why}), so no model can be scored node by node. {DEAL_REMEDY} Or keep a "
            "preset's own nodes, or split a file without a test file: each node's own rows are then split.")


def _ties(report: PersonalReport, values: dict, method: str) -> str:
    """' (tied with Local, APFL mixture (α = 0.5) and Ditto (λ_D = 0))': the other methods whose value
    equals ``method``'s."""
    same = [method_label(report, m) for m in report.methods if m != method and values[m] == values[method]]
    if not same:
        return ""
    return f" (tied with {same[0] if len(same) == 1 else ', '.join(same[:-1]) + ' and ' + same[-1]})"


def finding(report: PersonalReport, *, regression: bool = False) -> str:
    """What the two figures show, in one or two sentences computed from ``report``: the method with
    the lowest pooled test error and its distance from the global model's, the method whose worst
    10% of nodes fare best (a personalised one or the global model), and the λ_D of Ditto's path
    that serves them best with their mean there.  Ties go to the method listed first
    (:data:`~fedviz.personal.report.METHODS`), and a tie with the global model is said.  On real
    targets (``regression``) the error is the test MSE."""
    fmt = _fmt(regression)
    unit = "" if regression else " points"
    scale = 1.0 if regression else 100.0
    K = report.nodes
    tested = K - report.untested
    if tested == 0:
        return no_test_rows(report.unassigned_rows)
    noun = "test MSE" if regression else "test error"
    pooled = {m: float(report.summaries[m]["pooled"]) for m in report.methods}
    worst = {m: float(report.summaries[m]["worst10"]) for m in report.methods}
    best = min((m for m in report.methods if math.isfinite(pooled[m])), key=lambda m: pooled[m], default=None)
    if best is None:
        return f"No method has a pooled {noun} on these nodes."
    parts = []
    g = pooled.get("global", math.nan)
    if best == "global":
        parts.append(f"No personalised model beats the global model here: w* has the lowest pooled {noun}, "
                     f"{fmt(g)}{_ties(report, pooled, 'global')}.")
    elif math.isfinite(g):
        gap = (g - pooled[best]) * scale
        parts.append(f"{_cap(method_label(report, best))} has the lowest pooled {noun}, {fmt(pooled[best])}: "
                     f"{gap:.1f}{unit} below the global model w*'s {fmt(g)}.")
    else:
        parts.append(f"{_cap(method_label(report, best))} has the lowest pooled {noun}, {fmt(pooled[best])}.")
    m = worst_count(tested)
    wbest = min((x for x in report.methods if math.isfinite(worst[x])), key=lambda x: worst[x])
    who = f"the worst 10% of nodes ({m:,} of {tested:,})"
    if wbest == "global":
        either = " either" if best == "global" else ""
        parts.append(f"For {who} no personalised model does better{either}: w*'s worst-10% mean, "
                     f"{fmt(worst['global'])}, is the lowest{_ties(report, worst, 'global')}.")
    else:
        against = f" against {fmt(worst['global'])} under w*" if "global" in worst else ""
        parts.append(f"{_cap(who)} are served best by a personalised model, "
                     f"{method_label(report, wbest)}: {fmt(worst[wbest])} on average{against}.")
    if report.path_summaries and not math.isnan(report.best_lambda):
        ends = {0.0: " (Local)", math.inf: " (the global model)"}.get(report.best_lambda, "")
        at = int(np.flatnonzero(np.asarray(report.lambdas) == report.best_lambda)[0])
        parts.append(f"Along Ditto's path their mean is lowest at λ_D = {lam_text(report.best_lambda)}{ends}, "
                     f"{fmt(float(report.path_summaries[at]['worst10']))}.")
    note = untested_sentence(report.untested, K, report.unassigned_rows)
    return " ".join(parts + ([note] if note else []))


__all__ = ["COLOURS", "PERSONAL", "TABLE_COLUMNS", "distribution_figure", "finding", "lam_text", "method_label", "no_test_rows",
           "path_figure", "summary_rows"]
