"""Figures of fedviz: convergence curves (the paper's Figure 2) and data views (its Figure 1).

Every builder takes plain data (records or statistics) and returns a
``plotly.graph_objects.Figure``; the pages only place them.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

# fedviz's figures use Plotly's white template.  Set as the default, Plotly attaches it
# to a new figure without validating it again; passed to each figure, its validation took
# 15-30 ms of the ~85 ms a live figure cost, holding the GIL, twice a second per live page.
pio.templates.default = "plotly_white"

#: x-axis choices: key → (label, how to compute from the record columns).
X_AXES = {
    "iteration": "Iterations",
    "rounds": "Communication rounds",
    "vectors": "Vectors sent (per node, up + down)",
    "seconds": "Wall seconds",
    "simulated": "Simulated time I × (c + T_A) (s)",
}

# The paper's Figure 2 markers where they exist (OPT squares, GD diamonds, CoCoA+ triangles,
# FSVRG circles, FSVRGR stars), then Plotly's defaults.
_STYLE = {
    "GD": ("diamond", "#17becf"), "CoCoA+": ("triangle-up", "#9467bd"),
    "FSVRG": ("circle", "#2ca02c"), "FSVRGR": ("star", "#d62728"),
}
_PALETTE = ["#1f77b4", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#aec7e8", "#ffbb78",
            "#98df8a", "#ff9896", "#c5b0d5", "#c49c94"]


def _columns(records) -> dict[str, np.ndarray]:
    """A list of IterationRecord or dicts, or a mapping of columns → a dict of arrays."""
    if isinstance(records, Mapping):
        return {k: np.asarray(v) for k, v in records.items()}
    rows = [r if isinstance(r, Mapping) else r.as_dict() for r in records]
    if not rows:
        return {}
    return {k: np.asarray([r[k] for r in rows]) for k in rows[0]}


def x_values(cols: Mapping[str, np.ndarray], axis: str, *, nodes: int = 1, round_cost: float = 0.0):
    """The x coordinate of each record for an axis key of :data:`X_AXES`.

    ``simulated`` is the paper's eq. (3), TIME = I × (c + T_A), accumulated over the run:
    every communication round costs ``round_cost`` seconds (c) on top of the measured
    computation time (T_A, the wall seconds of the simulation).
    """
    if axis == "iteration":
        return cols["iteration"]
    if axis == "rounds":
        return cols["rounds"]
    if axis == "vectors":
        return (cols["vectors_up"] + cols["vectors_down"]) / max(1, nodes)
    if axis == "seconds":
        return cols["seconds"]
    if axis == "simulated":
        return cols["rounds"] * round_cost + cols["seconds"]
    raise ValueError(f"unknown x axis {axis!r}; one of {', '.join(X_AXES)}")


def _style(label: str, algorithm: str, i: int):
    marker, color = _STYLE.get(label, _STYLE.get(algorithm, (None, None)))
    if marker is None:  # 'FSVRG ×2' in a sweep, '#3 GD' in the history: style by the title inside
        for title, style in _STYLE.items():
            if label.endswith(" " + title) or label.startswith(title + " "):
                marker, color = style
    return marker or "circle", color or _PALETTE[i % len(_PALETTE)]


def _add_curves(fig, runs, column, *, axis, nodes, round_cost, row=None, col=None, positive=False,
                showlegend=True):
    for i, (label, records) in enumerate(runs.items()):
        cols = _columns(records)
        if not cols:
            continue
        y = np.asarray(cols[column], dtype=float)
        if positive:
            # On a log axis, f − f* ≤ 0 (rounding at the optimum) cannot be drawn: clip it
            # to a floor below anything meaningful instead of dropping the point.
            y = np.where(np.isfinite(y), np.maximum(y, 1e-16), np.nan)
        algorithm = str(cols["algorithm"][0]) if "algorithm" in cols else label
        marker, color = _style(label, algorithm, i)
        trace = go.Scatter(x=x_values(cols, axis, nodes=nodes, round_cost=round_cost), y=y,
                           mode="lines+markers", name=label, legendgroup=label, showlegend=showlegend,
                           marker=dict(symbol=marker, size=6, color=color), line=dict(color=color, width=2))
        if row is None:
            fig.add_trace(trace)
        else:
            fig.add_trace(trace, row=row, col=col)


def suboptimality_figure(runs: Mapping[str, Sequence], *, axis: str = "iteration", nodes: int = 1,
                         round_cost: float = 0.0, height: int = 420) -> go.Figure:
    """f(w) − f* on a log axis, one curve per run label."""
    fig = go.Figure()
    _add_curves(fig, runs, "suboptimality", axis=axis, nodes=nodes, round_cost=round_cost, positive=True)
    fig.update_layout(title="Objective suboptimality f(w) − f*", xaxis_title=X_AXES[axis],
                      yaxis_title="f(w) − f*", yaxis_type="log", height=height, **_LAYOUT)
    return fig


def test_error_figure(runs: Mapping[str, Sequence], *, baselines: Mapping[str, float] | None = None,
                      axis: str = "iteration", nodes: int = 1, round_cost: float = 0.0,
                      height: int = 420, regression: bool = False) -> go.Figure:
    """Test error per run, with horizontal lines for the optimum and the naive baselines."""
    fig = go.Figure()
    _add_curves(fig, runs, "test_error", axis=axis, nodes=nodes, round_cost=round_cost)
    _add_baselines(fig, baselines)
    fig.update_layout(title="Test mean squared error" if regression else "Test error",
                      xaxis_title=X_AXES[axis], yaxis_title="test MSE" if regression else "test error",
                      yaxis_tickformat=None if regression else ".1%", height=height, **_LAYOUT)
    return fig


_BASELINE_STYLE = {"optimum": ("OPT", "#1f77b4", "solid"), "majority": ("predict majority", "#7f7f7f", "dot"),
                   "node_majority": ("per-node majority", "#bcbd22", "dash")}
# OPT's label goes under its line (the curves converge onto it from above), the others over theirs.
_BASELINE_LABEL = {"optimum": "top"}


def _add_baselines(fig, baselines, row=None, col=None):
    """A labelled horizontal line per baseline, across the (row, col) subplot.

    Written as layout shapes and annotations in one update: ``fig.add_hline`` gives the
    same lines but took 10 ms each.
    """
    if row is None:
        x, y = "x", "y"
    else:
        sub = fig.get_subplot(row, col)
        x, y = sub.xaxis.plotly_name.replace("axis", ""), sub.yaxis.plotly_name.replace("axis", "")
    shapes, labels = [], []
    for key, value in (baselines or {}).items():
        if value is None or not np.isfinite(value):
            continue
        name, color, dash = _BASELINE_STYLE.get(key, (key, "#444", "dot"))
        shapes.append(dict(type="line", xref=f"{x} domain", x0=0, x1=1, yref=y, y0=value, y1=value,
                           line=dict(color=color, dash=dash, width=1.5)))
        labels.append(dict(xref=f"{x} domain", x=1, xanchor="right", yref=y, y=value,
                           yanchor=_BASELINE_LABEL.get(key, "bottom"), showarrow=False,
                           text=f"{name} {100 * value:.2f}%"))
    if shapes:
        fig.update_layout(shapes=list(fig.layout.shapes) + shapes,
                          annotations=list(fig.layout.annotations) + labels)


def convergence_figure(runs, *, baselines=None, axis="iteration", nodes=1, round_cost=0.0,
                       title=None, height=430) -> go.Figure:
    """Suboptimality (log) and test error side by side: the layout of the paper's Figure 2."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Objective suboptimality f(w) − f*", "Test error"),
                        horizontal_spacing=0.1)
    _add_curves(fig, runs, "suboptimality", axis=axis, nodes=nodes, round_cost=round_cost, row=1, col=1,
                positive=True)
    _add_curves(fig, runs, "test_error", axis=axis, nodes=nodes, round_cost=round_cost, row=1, col=2,
                showlegend=False)
    _add_baselines(fig, baselines, row=1, col=2)
    fig.update_yaxes(type="log", row=1, col=1)
    fig.update_yaxes(tickformat=".1%", row=1, col=2)
    fig.update_xaxes(title_text=X_AXES[axis])
    fig.update_layout(height=height, **_LAYOUT)
    if title:  # above the subplot titles, not on them
        fig.update_layout(title=dict(text=title, y=0.98, yanchor="top"), margin=dict(t=90))
    return fig


def paper_figure2(runs, *, baselines, title="Figure 2, reproduced") -> go.Figure:
    """Rounds of communication vs objective and test error, as in the paper's Figure 2."""
    return convergence_figure(runs, baselines=baselines, axis="rounds", title=title)


def feature_appearance_figure(omega: np.ndarray, n_nodes: int, *, height: int = 380) -> go.Figure:
    """The paper's Figure 1 (ω^j, the number of nodes where feature j appears, against j) and
    its histogram."""
    omega = np.asarray(omega)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Features vs. appearance on nodes (Figure 1)",
                                                         "Histogram of ω^j"), horizontal_spacing=0.12)
    idx = np.arange(omega.size)
    if omega.size > 50_000:  # keep the browser responsive: every feature still counted in the histogram
        keep = np.unique(np.r_[np.linspace(0, omega.size - 1, 50_000).astype(int), np.argmax(omega)])
        idx = idx[keep]
    fig.add_trace(go.Scattergl(x=idx, y=omega[idx], mode="markers", marker=dict(size=3, color="#1f77b4"),
                               name="ω^j", showlegend=False), row=1, col=1)
    fig.add_trace(go.Histogram(x=omega, nbinsx=60, marker_color="#1f77b4", showlegend=False), row=1, col=2)
    fig.add_hline(y=n_nodes, line=dict(dash="dot", color="#7f7f7f"), annotation_text=f"K = {n_nodes}",
                  row=1, col=1)
    fig.update_xaxes(title_text="feature index j", row=1, col=1)
    fig.update_yaxes(title_text="nodes with feature j (ω^j)", row=1, col=1)
    fig.update_xaxes(title_text="ω^j", row=1, col=2)
    fig.update_yaxes(title_text="features", type="log", row=1, col=2)
    fig.update_layout(height=height, **_LAYOUT)
    return fig


def node_size_figure(node_sizes: np.ndarray, *, height: int = 340) -> go.Figure:
    """The distribution of n_k on log-spaced bins (a log x axis)."""
    sizes = np.asarray(node_sizes)
    lo, hi = max(1, sizes.min()), max(2, sizes.max())
    edges = np.unique(np.geomspace(lo, hi * 1.0001, 40))
    counts, edges = np.histogram(sizes, bins=edges)
    fig = go.Figure(go.Bar(x=np.sqrt(edges[:-1] * edges[1:]), y=counts, width=np.diff(edges),
                           marker_color="#ff7f0e", name="nodes"))
    fig.update_layout(title="Node sizes n_k", xaxis_title="examples on the node (n_k)", xaxis_type="log",
                      yaxis_title="nodes", height=height, bargap=0, **_LAYOUT)
    return fig


def label_balance_figure(positive_fraction: np.ndarray, node_sizes: np.ndarray, *,
                         max_nodes: int = 2000, height: int = 340) -> go.Figure:
    """Each node's fraction of +1 labels, nodes sorted by it (a sample of ``max_nodes`` if many)."""
    frac = np.asarray(positive_fraction, dtype=float)
    sizes = np.asarray(node_sizes)
    order = np.argsort(frac, kind="stable")
    if order.size > max_nodes:
        order = order[np.linspace(0, order.size - 1, max_nodes).astype(int)]
    fig = go.Figure(go.Bar(x=np.arange(order.size), y=frac[order], marker_color="#2ca02c",
                           customdata=np.c_[order, sizes[order]],
                           hovertemplate="node %{customdata[0]}<br>n_k = %{customdata[1]}"
                                         "<br>+1 fraction %{y:.1%}<extra></extra>"))
    fig.add_hline(y=float(np.average(frac, weights=sizes)), line=dict(dash="dot", color="#444"),
                  annotation_text="overall")
    fig.update_layout(title="Label balance per node (sorted)", xaxis_title="nodes, sorted",
                      yaxis_title="fraction of +1 labels", yaxis_tickformat=".0%", height=height, bargap=0,
                      **_LAYOUT)
    return fig


# The legend sits under the plot, where it cannot cover a title or a curve.
_LAYOUT = dict(margin=dict(l=60, r=20, t=50, b=40),
               legend=dict(orientation="h", yanchor="top", y=-0.2, xanchor="left", x=0))
