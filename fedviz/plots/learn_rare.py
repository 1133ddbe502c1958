"""The rare-features view of the Learn section: the paper's Figure 1 (how many nodes each feature
appears on, ω^j) binned in powers of two, with the distance to the optimum of each curve in each
bin underneath (:mod:`fedviz.learn.rare_features` computes both).  A pure builder: figures only.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .figures import _LAYOUT, legend_below, log_axis
from .styles import run_styles

#: One marker per curve, in order (colours follow the convergence figures' styles).
_MARKERS = ("circle", "square", "diamond", "triangle-up", "x", "star", "cross", "pentagon")

#: The y-axis title of each measure (fedviz.learn.rare_features.METRICS), as Plotly draws HTML.
_Y_TITLES = {
    "relative": "‖w<sub>B</sub> − w*<sub>B</sub>‖ / ‖w*<sub>B</sub>‖",
    "mean_abs": "mean |w<sub>j</sub> − w*<sub>j</sub>|",
    "share": "share of ‖w − w*‖²",
}


def rare_features_figure(buckets, latest: Mapping[str, np.ndarray] | None = None, *, metric: str = "relative",
                         iterations: Mapping[str, int] | None = None, styles: Mapping[str, str] | None = None,
                         height: int = 620) -> go.Figure:
    """Features per bucket of ω^j (top, log scale) and each curve's ``metric`` per bucket (below).

    ``buckets`` is a :class:`~fedviz.learn.rare_features.Buckets`; ``latest`` maps a curve's label
    to its values per bucket (all buckets; only the populated ones are drawn), ``iterations`` to the
    iteration those values are from (shown in the legend).  ``styles`` maps a label to the title it
    is coloured as, as in the convergence figures, so a curve has one colour on the whole page.
    """
    if metric not in _Y_TITLES:
        raise ValueError(f"unknown metric {metric!r}; one of {', '.join(_Y_TITLES)}")
    keep = buckets.populated
    labels = [buckets.labels[b] for b in keep]
    counts = buckets.counts[keep]
    w = "ω<sup>j</sup>"
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.34, 0.66], vertical_spacing=0.13,
                        subplot_titles=(f"features by the number of nodes they appear on<br>({w}): Figure 1 binned",
                                        "how far each curve still is from w*<br>in each bin"))
    fig.add_trace(go.Bar(x=labels, y=counts, marker_color="#9ecae1", name="features", showlegend=False,
                         text=[f"{c:,}" for c in counts], textposition="outside", cliponaxis=False,
                         hovertemplate="%{y:,} features on %{x} nodes<extra></extra>"), row=1, col=1)
    # Headroom above the tallest bar (three times its count) for its printed count.
    fig.update_yaxes(title_text="features", **log_axis([counts, [3 * counts.max()] if counts.size else []]),
                     row=1, col=1)
    ys = []
    curves = list((latest or {}).items())
    look = run_styles({label: (styles or {}).get(label, label) for label, _ in curves})
    for i, (label, values) in enumerate(curves):
        y = np.asarray(values, dtype=float)[keep]
        ys.append(y)
        color = look[label].color
        at = (iterations or {}).get(label)
        # Variants often coincide (a modification that changes nothing on these data): each curve drawn
        # narrower than the one before and with its own marker, so the ones underneath still show.
        width = 2 + 1.6 * (len(curves) - 1 - i)
        fig.add_trace(go.Scatter(x=labels, y=y, mode="lines+markers", name=label if at is None else
                                 f"{label} (iteration {at})", legendgroup=label,
                                 marker=dict(symbol=_MARKERS[i % len(_MARKERS)], size=6 + width, color=color),
                                 line=dict(color=color, width=width, dash=look[label].dash),
                                 hovertemplate=f"{label}<br>{w} in %{{x}}: %{{y:.3g}}<extra></extra>"),
                      row=2, col=1)
    if metric == "relative":
        fig.add_hline(y=1.0, line=dict(dash="dot", color="#7f7f7f"), row=2, col=1,
                      annotation_text="1 = still at the start w = 0", annotation_position="top left")
        top = max([1.05, *[float(np.nanmax(y)) * 1.05 for y in ys if np.isfinite(y).any()]])
        fig.update_yaxes(range=[0, top], row=2, col=1)
    elif metric == "share":
        fig.update_yaxes(tickformat=".0%", rangemode="tozero", row=2, col=1)
    else:
        fig.update_yaxes(rangemode="tozero", row=2, col=1)
    fig.update_yaxes(title_text=_Y_TITLES[metric], row=2, col=1)
    fig.update_xaxes(type="category", row=1, col=1)
    fig.update_xaxes(type="category", title_text=f"nodes a feature appears on ({w}),<br>in powers of two: rare ← → "
                                                 f"everywhere", row=2, col=1)
    if not latest:
        # An empty subplot has no axes in Plotly.js (yaxis2 is never built): the note below then fell back to
        # the whole figure and sat on the first bar's count (issue 31, point 10).  An invisible trace keeps
        # the lower plot, its bins and its frame in place before the first run.
        fig.add_trace(go.Scatter(x=labels, y=[None] * len(labels), mode="markers", showlegend=False,
                                 hoverinfo="skip", marker=dict(opacity=0)), row=2, col=1)
        fig.add_annotation(xref="x2 domain", yref="y2 domain", x=0.5, y=0.5, showarrow=False,
                           text="run the ablation to see<br>where each curve's error sits",
                           font=dict(size=14, color="#555"))
    # Titles on two lines: the page gives this figure about 330 px on a 1024 px screen; the legend
    # under the x title (two lines, under slanted bin labels), the figure growing with it.
    fig.update_layout(**_LAYOUT)
    names = [t.name for t in fig.data if t.showlegend is not False and t.name]
    legend_below(fig, names, height=height, top=70, width=330, xtitle=110)
    return fig


__all__ = ["rare_features_figure"]
