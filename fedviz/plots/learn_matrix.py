"""Figures of the Learn section's properties matrix and equivalences (pure: plain results in,
a Plotly figure out).

- :func:`matrix_figure`: algorithms × properties (A)–(D) of Section 3.1, one clickable square per
  cell coloured by the measurement, labelled with its figure and the paper's word;
- :func:`cell_figure`: one cell's curve (the drift from w*, or f − f* against rounds);
- :func:`overlay_figure`: Proposition 1's or Theorem 5's two runs overlaid, and their distance.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

__all__ = ["COLUMN_TITLES", "matrix_figure", "cell_figure", "overlay_figure", "cell_at"]

#: Column titles of the matrix, Section 3.1's properties in a few words.
COLUMN_TITLES = {
    "A": "(A) started at w*, stays",
    "B": "(B) one node holds 99.7%: O(1)",
    "C": "(C) disjoint features: O(1)",
    "D": "(D) identical nodes: O(1)",
}

#: The same, on lines of at most 13 characters: the matrix's column heads, centred over their
#: columns, fit side by side in the ~115 px a column gets on a 1024 px screen (with the sidebar).
_HEADS = {"A": "(A) started<br>at w*, stays", "B": "(B) one node<br>holds 99.7%:<br>O(1) rounds",
          "C": "(C) disjoint<br>features:<br>O(1) rounds", "D": "(D) identical<br>nodes:<br>O(1) rounds"}
#: Characters per line of a cell's label: about 70 px at 11 px, the room right of a square at 1024 px.
_CELL_CHARS = 13
#: Where a column's head sits: over the middle of its square and label, not over the square alone.
_HEAD_AT = 0.38

_COLOURS = {True: "#2ca02c", False: "#d62728", None: "#c7c7c7"}
_NAMES = {True: "has the property (measured)", False: "lacks it (measured)", None: "not measured"}
_MARK = {"has": "paper: has", "lacks": "paper: lacks", "aims": "paper: aims at it", "silent": ""}


def matrix_figure(matrix, *, selected: tuple[str, str] | None = None) -> go.Figure:
    """The properties matrix: a square per cell at (property, algorithm), green where the
    measurement shows the property, red where it does not, grey where the algorithm cannot run
    the case; beside it the cell's figure and what the paper says; a black ring where the two
    disagree.  Every point carries ``customdata = [algorithm, property]`` for a click."""
    props = list(COLUMN_TITLES)
    titles = {c.algorithm: c.title for c in matrix.cells}
    rows = [titles[a] for a in matrix.algorithms]
    fig = go.Figure()
    labels = {id(c): _wrap(c.text + (f" {_MARK[c.claim.verdict]}" if c.claim.verdict != "silent" else "")
                           + (" ≠" if c.agreement == "disagrees" else ""), _CELL_CHARS) for c in matrix.cells}
    lines = max([labels[id(c)].count("<br>") + 1 for c in matrix.cells] or [1])
    for has in (True, False, None):
        cells = [c for c in matrix.cells if c.has is has]
        if not cells:
            continue
        fig.add_trace(go.Scatter(
            x=[props.index(c.prop) for c in cells], y=[c.title for c in cells],
            mode="markers+text", name=_NAMES[has],
            marker=dict(symbol="square", size=22, color=_COLOURS[has],
                        line=dict(width=[3 if c.agreement == "disagrees" else 0 for c in cells], color="#000000")),
            # Wrapped at _CELL_CHARS (the paper's word on its own line), so that a label stays inside
            # its column, clear of the next square, at 1024 px.
            text=[labels[id(c)] for c in cells],
            textposition="middle right", textfont=dict(size=11),
            customdata=[[c.algorithm, c.prop] for c in cells],
            hovertext=[f"<b>{c.title} × ({c.prop})</b><br>{_wrap(c.detail)}"
                       + (f"<br><i>ran:</i> {_wrap(c.ran)}" if c.ran else "")
                       + f"<br><i>{c.claim.words}</i> ({c.claim.where}): {_wrap(c.claim.note)}" for c in cells],
            hoverinfo="text"))
    if selected is not None and selected[1] in props and selected[0] in titles:
        fig.add_trace(go.Scatter(x=[props.index(selected[1])], y=[titles[selected[0]]], mode="markers",
                                 marker=dict(symbol="square-open", size=27, color="#1f77b4", line=dict(width=2.5)),
                                 hoverinfo="skip", showlegend=False, name="shown below"))
    fig.update_xaxes(tickvals=[i + _HEAD_AT for i in range(len(props))], ticktext=[_HEADS[p] for p in props],
                     range=[-0.15, len(props) - 0.05], side="top", showgrid=False, zeroline=False, fixedrange=True)
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(rows)), showgrid=True,
                     gridcolor="#eeeeee", fixedrange=True)
    # A row holds its tallest label (13 px a line) and its square; the heads take three lines.
    row = max(36, 14 * lines + 8)
    fig.update_layout(height=110 + row * len(rows), margin=dict(l=10, r=10, t=80, b=10),
                      legend=dict(orientation="h", yanchor="top", y=-0.01, xanchor="left", x=0),
                      clickmode="event+select", dragmode=False, hoverlabel=dict(align="left"))
    return fig


def cell_at(matrix, point: dict) -> tuple[str, str] | None:
    """The (algorithm, property) of a clicked point of :func:`matrix_figure` (Streamlit's
    selection gives the point's customdata, or at least its x and y)."""
    data = point.get("customdata")
    if isinstance(data, (list, tuple)) and len(data) == 2:
        return str(data[0]), str(data[1])
    props = list(COLUMN_TITLES)
    by_title = {c.title: c.algorithm for c in matrix.cells}
    x, y = point.get("x"), point.get("y")
    try:
        prop = props[int(round(float(x)))]
    except (TypeError, ValueError, IndexError):
        return None
    return (by_title[y], prop) if y in by_title else None


def cell_figure(cell, *, o1_rounds: int | None = None) -> go.Figure:
    """One cell's curve on a log scale: (A) ‖w^t − w*‖₂ against iterations from w* (with the
    tolerance it must stay below, ``cell.threshold``); (B)–(D) f(w) − f* against rounds (with ε,
    ``cell.threshold``, and the O(1) budget ``o1_rounds``).  Values ≤ 0 (rounding at the optimum)
    are drawn at 1e-17."""
    fig = go.Figure()
    if cell.status != "measured":
        fig.add_annotation(text=cell.detail, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
        fig.update_layout(height=320, xaxis=dict(visible=False), yaxis=dict(visible=False))
        return fig
    y = np.asarray(cell.y, dtype=float)
    floor = 1e-17
    shown = np.where(np.isfinite(y), np.maximum(y, floor), np.nan)
    colour = _COLOURS[cell.has]
    what = "‖w<sup>t</sup> − w*‖₂" if cell.prop == "A" else "f(w) − f*"
    fig.add_trace(go.Scatter(x=list(cell.x), y=shown, mode="lines+markers", name=_short(cell.label or cell.title),
                             line=dict(color=colour, width=2), marker=dict(size=7),
                             hovertext=f"ran: {cell.ran}", hoverinfo="x+y+text"))
    # The cell's other runs (sampling noise, another start, the default σ), dashed beside it.
    for run, dash in zip(cell.runs[1:], ("dash", "dot", "dashdot")):
        other = np.asarray(run.y, dtype=float)
        fig.add_trace(go.Scatter(x=list(run.x), y=np.where(np.isfinite(other), np.maximum(other, floor), np.nan),
                                 mode="lines+markers", name=_short(run.label), hovertext=f"ran: {run.ran}",
                                 hoverinfo="x+y+text", line=dict(color="#7f7f7f", width=1.5, dash=dash),
                                 marker=dict(size=5)))
    line = cell.threshold
    if line is not None:
        fig.add_hline(y=line, line=dict(color="#555555", dash="dash"))
        _log_label(fig, line, ("tolerance" if cell.prop == "A" else "ε") + f" = {line:.0e}", yref="y")
    if cell.prop != "A" and o1_rounds is not None:
        fig.add_vline(x=o1_rounds, line=dict(color="#888888", dash="dot"),
                      annotation_text=f"O(1): ≤ {o1_rounds} rounds", annotation_position="top left")
    fig.update_yaxes(type="log", title=what, exponentformat="power")
    xs = [x for run in (cell.runs or [cell]) for x in run.x]
    right = max(xs + ([o1_rounds] if o1_rounds is not None and cell.prop != "A" else []))
    fig.update_xaxes(title=cell.x_label, range=[-0.3, right + 0.5], dtick=1 if right <= 30 else None)
    fig.update_layout(height=360 + 22 * max(0, len(cell.runs) - 1), margin=dict(l=10, r=10, t=40, b=10),
                      showlegend=True, title=dict(text=f"{cell.title} × ({cell.prop}): {cell.text}", font=dict(size=15)),
                      legend=dict(orientation="h", y=-0.25, yanchor="top"))
    return fig


def overlay_figure(overlay) -> go.Figure:
    """Two methods' f(w^t) − f* overlaid (the second dashed, so both show where they coincide), and
    below, the distance between their iterates at every t, with the equivalence's tolerance."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.62, 0.38], vertical_spacing=0.08)
    t = list(overlay.iterations)
    floor = 1e-17
    for values, label, style in ((overlay.first, overlay.labels[0], dict(color="#1f77b4", width=6)),
                                 (overlay.second, overlay.labels[1], dict(color="#ff7f0e", width=2, dash="dash"))):
        y = np.maximum(np.asarray(values, dtype=float), floor)
        fig.add_trace(go.Scatter(x=t, y=y, name=label, mode="lines+markers", line=style,
                                 marker=dict(size=6 if style.get("dash") else 10)), row=1, col=1)
    d = np.maximum(np.asarray(overlay.distances, dtype=float), floor)
    fig.add_trace(go.Scatter(x=t, y=d, name="distance between the iterates", mode="lines+markers",
                             line=dict(color="#2ca02c" if overlay.holds else "#d62728")), row=2, col=1)
    fig.add_hline(y=overlay.rtol, line=dict(color="#555555", dash="dot"), row=2, col=1)
    _log_label(fig, overlay.rtol, f"tolerance {overlay.rtol:.0e}", yref="y2", xref="x2 domain")
    fig.update_yaxes(type="log", title="f(w<sup>t</sup>) − f*", exponentformat="power", row=1, col=1)
    fig.update_yaxes(type="log", title="distance", exponentformat="power", row=2, col=1)
    fig.update_xaxes(title="iteration t", row=2, col=1)
    fig.update_layout(height=540, margin=dict(l=10, r=10, t=40, b=10),
                      title=dict(text=f"{overlay.name}: largest distance {overlay.distance:.2g}", font=dict(size=15)),
                      legend=dict(orientation="h", yanchor="top", y=-0.12, x=0))
    return fig


def _log_label(fig, y: float, text: str, *, yref: str, xref: str = "x domain") -> None:
    """A label just above a horizontal line at ``y`` on a log axis, at the left.  (Plotly places
    ``add_hline``'s own annotation at ``y`` in axis units, which on a log axis are log10(y).)"""
    fig.add_annotation(x=0.01, xref=xref, y=float(np.log10(y)), yref=yref, text=text, showarrow=False,
                       xanchor="left", yanchor="bottom", font=dict(size=11, color="#555555"))


def _short(label: str, width: int = 80) -> str:
    """A legend entry: the run's label up to its colon, cut at ``width`` characters."""
    head = str(label).split(":")[0]
    return head if len(head) <= width else head[:width - 1] + "…"


def _wrap(text: str, width: int = 90) -> str:
    """Break a hover line every ``width`` characters at a space (Plotly does not wrap)."""
    out, line = [], ""
    for word in str(text).split():
        if len(line) + len(word) + 1 > width and line:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    out.append(line)
    return "<br>".join(out)
