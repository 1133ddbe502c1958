"""Client drift drawn: for each split (a row) and algorithm (a column), the server's path and the
nodes' local iterates projected on one plane, round by round (Plotly frames under a round slider),
with every node's own optimum w*_k and the global w* (the paper's Sections 3.1 (A), 3.4 and 3.6)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..learn.drift import DriftView

#: One colour per node (at most 8 nodes).
NODE_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
SERVER_COLOR = "#111"
#: Traces per subplot that change from round to round: the server's path, the spokes w^t → y_k,
#: the local iterates y_k.
_DYNAMIC = 3


def drift_figure(views: list[DriftView], *, height_per_row: int = 340, start: int = 2) -> go.Figure:
    """Rows: the views (splits); columns: the algorithms.  Frame t shows round t: the spokes from
    w^{t−1} to each node's local iterate y_k, and the server's path w^0 … w^t.

    The figure opens at round ``start`` (2 by default: SCAFFOLD's control variates start at zero, so
    its first round is FedAvg's, and its correction shows from the second)."""
    cols = len(views[0].runs)
    titles = [f"{r.title} · {v.title.split(':')[0]}" for v in views for r in v.runs]
    fig = make_subplots(rows=len(views), cols=cols, subplot_titles=titles, horizontal_spacing=0.05,
                        vertical_spacing=0.12)
    rounds = views[0].settings.rounds
    start = max(0, min(int(start), rounds))
    dynamic_idx: list[int] = []
    frames_data: list[list] = [[] for _ in range(rounds + 1)]
    for i, v in enumerate(views):
        K = v.optima.shape[0]
        colors = [NODE_COLORS[k % len(NODE_COLORS)] for k in range(K)]
        opt2 = v.plane.project(v.optima)
        star = v.plane.project(v.w_star)
        pts = [opt2, star[None, :]]
        for r in v.runs:
            pts += [v.plane.project(r.servers), v.plane.project(r.locals.reshape(-1, v.w_star.size))]
        allp = np.concatenate(pts)
        allp = allp[np.all(np.isfinite(allp), axis=1)]
        lo, hi = allp.min(axis=0), allp.max(axis=0)
        # Each axis fills its panel, but neither spans less than 40% of the other (a flat cloud is
        # not stretched into a tall one): the picture stays close to the plane's true shape.
        span = np.maximum(hi - lo, 1e-9)
        widen = np.maximum(0.4 * span[::-1] - span, 0.0) / 2
        lo, hi = lo - widen, hi + widen
        pad = 0.08 * np.maximum(hi - lo, 1e-9)
        for j, r in enumerate(v.runs):
            row, col = i + 1, j + 1
            first = i == 0 and j == 0
            srv = v.plane.project(r.servers)
            loc = v.plane.project(r.locals)                        # (R, K, 2)
            # Dynamic traces (their data per frame below), then the fixed optima on top.
            for trace in _round_traces(srv, loc, start, colors, first):
                fig.add_trace(trace, row=row, col=col)
                dynamic_idx.append(len(fig.data) - 1)
            fig.add_trace(go.Scatter(
                x=opt2[:, 0], y=opt2[:, 1], mode="markers+text", text=[f"w*<sub>{k + 1}</sub>" for k in range(K)],
                textposition="top center", textfont=dict(size=11, color=colors),
                marker=dict(symbol="x-thin", size=13, line=dict(width=3, color=colors)),
                name="node optima w*<sub>k</sub> (own data only)", legendgroup="opt", showlegend=first,
                hovertemplate="node optimum w*<sub>k</sub><extra></extra>"), row=row, col=col)
            fig.add_trace(go.Scatter(
                x=[star[0]], y=[star[1]], mode="markers", name="global optimum w*", legendgroup="star",
                showlegend=first, marker=dict(symbol="star", size=17, color="#ffd700",
                                              line=dict(width=1.5, color="#111")),
                hovertemplate="w*<extra></extra>"), row=row, col=col)
            frame = dict(showticklabels=False, zeroline=False, showgrid=False, showline=True, mirror=True,
                         linecolor="#ccc")
            fig.update_xaxes(range=[lo[0] - pad[0], hi[0] + pad[0]], row=row, col=col, **frame)
            fig.update_yaxes(range=[lo[1] - pad[1], hi[1] + pad[1]], row=row, col=col, **frame)
            for t in range(rounds + 1):
                frames_data[t].extend(_round_traces(srv, loc, t, colors, first))
    fig.update_annotations(yshift=6)  # the subplot titles, clear of the panels' frames
    steps = []
    frames = []
    for t in range(rounds + 1):
        name = str(t)
        frames.append(go.Frame(data=frames_data[t], traces=dynamic_idx, name=name))
        steps.append(dict(method="animate", label=name,
                          args=[[name], dict(mode="immediate", frame=dict(duration=0, redraw=False),
                                             transition=dict(duration=0))]))
    fig.frames = frames
    fig.update_layout(
        height=height_per_row * len(views) + 140, margin=dict(l=20, r=20, t=70, b=40),
        legend=dict(orientation="h", yanchor="bottom", y=1.04, xanchor="left", x=0),
        sliders=[dict(active=start, steps=steps, currentvalue=dict(prefix="round ", font=dict(size=14)),
                      pad=dict(t=30), x=0.1, len=0.9)],
        updatemenus=[dict(type="buttons", showactive=False, x=0, y=0, xanchor="left", yanchor="top",
                          pad=dict(t=45), buttons=[dict(label="▶ play", method="animate", args=[
                              None, dict(frame=dict(duration=700, redraw=False), fromcurrent=True,
                                         transition=dict(duration=300), mode="immediate")])])])
    return fig


def _round_traces(srv: np.ndarray, loc: np.ndarray, t: int, colors, first: bool) -> list[go.Scatter]:
    """The :data:`_DYNAMIC` traces of round t (0: the start, nothing local yet)."""
    K = len(colors)
    path = srv[: t + 1]
    if t == 0:
        sx, sy = [], []
        lx, ly = [], []
    else:
        y = loc[t - 1]
        o = srv[t - 1]
        sx = [v for k in range(K) for v in (o[0], y[k, 0], None)]
        sy = [v for k in range(K) for v in (o[1], y[k, 1], None)]
        lx, ly = y[:, 0], y[:, 1]
    return [
        go.Scatter(x=path[:, 0], y=path[:, 1], mode="lines+markers", name="server w<sup>t</sup>",
                   legendgroup="server", showlegend=first, line=dict(color=SERVER_COLOR, width=2.5),
                   marker=dict(size=7, color=SERVER_COLOR), hovertemplate="server<extra></extra>"),
        go.Scatter(x=sx, y=sy, mode="lines", name="local work from w<sup>t</sup>", legendgroup="spoke",
                   showlegend=first, line=dict(color="#999", width=1, dash="dot"), hoverinfo="skip"),
        go.Scatter(x=lx, y=ly, mode="markers", name="local iterates y<sub>k</sub> (one colour a node)",
                   legendgroup="local", showlegend=first,
                   marker=dict(size=11, color=list(colors) if t else [], line=dict(width=1, color="#fff")),
                   hovertemplate="node local iterate<extra></extra>"),
    ]
