"""The efficiency paradigm drawn: TIME = I(ε) × (c + T_A(ε)) against the round cost c (the paper's
Section 2.3.1, eq. (3)), one line per run, with the costs where the fastest run changes."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from ..learn.efficiency import Paradigm, seconds_text
from .figures import _LAYOUT, log_axis
from .styles import run_styles

#: Light fills of the regimes (who is fastest where), by the winner's colour.
_BAND_OPACITY = 0.10


def efficiency_figure(p: Paradigm, *, styles: dict[str, str] | None = None, height: int = 460) -> go.Figure:
    """TIME(c) on log-log axes over ``p.c_range``; the pieces of the lower envelope shaded in the
    winner's colour, each change of winner marked by a dotted line at its exact c.

    ``styles`` maps a run's label to the algorithm title whose marker it takes; every run has its own
    colour (:func:`~fedviz.plots.styles.run_styles`).  A centralised run (:attr:`Efficiency.central`) is a dashed flat line, its
    computation (eq. (2)), named as a reference: it is not ranked."""
    lo, hi = p.c_range
    c = np.geomspace(lo, hi, 241)
    fig = go.Figure()
    colors, ys = {}, []
    look = run_styles({e.label: (styles or {}).get(e.label, e.algorithm) for e in p.entries})  # one style per run
    for e in p.entries:
        marker, color = look[e.label].marker, look[e.label].color
        colors[e.label] = color
        if not e.reached:
            continue
        y = np.asarray(e.time(c), dtype=float)
        ys.append(y)
        compute = "—" if not math.isfinite(e.compute) else seconds_text(e.compute)
        if e.central:
            name = f"{e.label}: centralised, TIME = {seconds_text(e.seconds)} (eq. (2)), not ranked"
        else:
            name = f"{e.label}: I = {e.rounds} rounds, T<sub>A</sub> = {compute}"
        fig.add_trace(go.Scatter(
            x=c, y=y, mode="lines+markers", name=name,
            line=dict(look[e.label].line(2.5), **({"dash": "dash"} if e.central else {})),
            marker=dict(symbol=marker, size=7, color=color, maxdisplayed=12),
            hovertemplate=f"{e.label}<br>c = %{{x:.3g}} s<br>TIME = %{{y:.3g}} s<extra></extra>"))
    if p.crossovers:
        fig.add_trace(go.Scatter(
            x=[x.c for x in p.crossovers], y=[x.time for x in p.crossovers], mode="markers",
            name="two lines meet (their order flips)", marker=dict(symbol="circle-open", size=14, color="#111",
                                                                   line=dict(width=2)),
            customdata=[[x.faster_below, x.faster_above] for x in p.crossovers],
            hovertemplate="c = %{x:.3g} s: %{customdata[0]} faster below, %{customdata[1]} above<extra></extra>"))
    shapes, notes = [], []
    for r in p.regimes:
        shapes.append(dict(type="rect", xref="x", yref="paper", x0=r.c_from, x1=r.c_to, y0=0, y1=1,
                           fillcolor=colors.get(r.label, "#999"), opacity=_BAND_OPACITY, line_width=0,
                           layer="below"))
        notes.append(dict(xref="x", yref="paper", x=math.log10(math.sqrt(r.c_from * r.c_to)), y=1.0,
                          yanchor="bottom", showarrow=False, text=f"<b>{r.label}</b> fastest",
                          font=dict(size=12, color=colors.get(r.label, "#444"))))
    for s in p.switches:
        shapes.append(dict(type="line", xref="x", yref="paper", x0=s.c, x1=s.c, y0=0, y1=1,
                           line=dict(color="#444", dash="dot", width=1.5)))
        notes.append(dict(xref="x", yref="paper", x=math.log10(s.c), y=0.02, yanchor="bottom", xanchor="left",
                          showarrow=False, text=f" c = {seconds_text(s.c)}", font=dict(size=11, color="#333")))
    # Under the axis title, not beside it: on a 1024 px page the title ran into the right-hand note.
    notes += [dict(xref="paper", yref="paper", x=0, y=-0.22, xanchor="left", yanchor="top", showarrow=False,
                   text="← a data centre: c ≪ T<sub>A</sub>", font=dict(size=11, color="#555")),
              dict(xref="paper", yref="paper", x=1, y=-0.22, xanchor="right", yanchor="top", showarrow=False,
                   text="phones on a slow network: c ≫ T<sub>A</sub> →", font=dict(size=11, color="#555"))]
    fig.update_layout(shapes=shapes, annotations=notes, height=height, **{**_LAYOUT, "margin": dict(l=60, r=20, t=60,
                                                                                                     b=40)})
    fig.update_layout(title=dict(text=f"TIME = I(ε) × (c + T<sub>A</sub>(ε)) to reach f − f* ≤ {p.epsilon:.3g} "
                                      "(eq. (3))", y=0.98, yanchor="top"),
                      legend=dict(orientation="h", yanchor="top", y=-0.31, xanchor="left", x=0))
    fig.update_xaxes(title_text="c: seconds per communication round", **log_axis([[lo, hi]], max_ticks=10))
    fig.update_xaxes(range=[math.log10(lo), math.log10(hi)])
    fig.update_yaxes(title_text="TIME (s)", **log_axis(ys or [[1e-3, 1.0]]))
    if not ys:
        fig.add_annotation(xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False,
                           text=f"no run reached f − f* ≤ {p.epsilon:.3g}", font=dict(size=14, color="#555"))
    return fig
