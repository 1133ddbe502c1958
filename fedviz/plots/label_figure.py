"""The node × class view of a federated data set's labels: the heatmap Flower's
``plot_label_distributions`` draws (issue 22, point 5), with each node's size n_k above it.

A pure builder: it takes the K × C table of :func:`fedviz.data.labels.node_label_counts` and
returns a figure.  Section 1.2 of Konečný et al. (2016) names the two ways federated data are
unlike a data centre's: non-IID (a node's examples are no sample of the whole) and unbalanced
(n_k spans orders of magnitude).  The heatmap shows the first for labels, the bars the second.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..data.labels import BINARY_CLASSES, format_label, node_majority
from ..errors import ParameterError
from .figures import _LAYOUT, log_axis

__all__ = ["COLOURS", "MAX_CELLS", "MAX_NODES", "class_names", "class_totals_figure", "label_distribution_figure", "label_order", "shown_nodes"]

#: What a cell's colour can mean (``colour=``): the share of the node's rows in that class, or
#: their count.
COLOURS = ("share", "count")
#: Nodes drawn at most: a column a pixel or two wide at the page's widths (about 450 px at 1024,
#: 850 px at 1400), and C × 400 cells of hover text, light for the browser.
MAX_NODES = 400
#: Cells drawn at most (nodes × classes): each carries its hover text, about 80 bytes, so 53 classes
#: (LIBSVM's largest multiclass files) on 400 nodes sent 1.8 MB to the browser; with many classes
#: fewer nodes are drawn (never fewer than 50).
MAX_CELLS = 8000
#: Colour of the node sizes, as in :func:`fedviz.plots.figures.node_size_figure`.
_SIZE_COLOUR = "#ff7f0e"


def class_names(classes) -> list[str]:
    """How the classes are written on the axis: "−1" and "+1" for binary y, else the raw labels."""
    classes = tuple(float(c) for c in classes)
    if classes == BINARY_CLASSES:
        return ["−1", "+1"]
    return [format_label(c) for c in classes]


def _check_counts(counts) -> np.ndarray:
    counts = np.asarray(counts)
    if counts.ndim != 2 or counts.shape[1] < 2 or counts.shape[0] < 1:
        raise ParameterError("counts", f"shape {counts.shape}", "a K × C table with K ≥ 1 nodes and C ≥ 2 classes")
    if not np.issubdtype(counts.dtype, np.integer) or np.any(counts < 0):
        raise ParameterError("counts", "a table with a negative or fractional entry", "counts: integers ≥ 0")
    return counts.astype(np.int64)


def label_order(counts) -> np.ndarray:
    """The nodes in the order they are drawn: by majority class (:func:`node_majority`, column
    order), then that class's share of the node's rows, largest first; nodes holding no rows last.

    Why this order: blocks of nodes with the same majority class put each block's bright cells
    in its class's row, so the heatmap is a staircase whose steps' widths are how many nodes lean
    to each class; within a block the colour fades from nodes holding one class only to mixed
    nodes.  IID nodes make one flat block at the whole's mix; non-IID nodes make several blocks
    with saturated cells (sorting by node index, as Flower does, shows the same cells as noise).
    Ties keep the larger node first, then the lower index, so the order is deterministic.
    """
    counts = _check_counts(counts)
    K, C = counts.shape
    sizes = counts.sum(axis=1)
    major = node_majority(counts)
    share = counts[np.arange(K), major] / np.maximum(sizes, 1)
    block = np.where(sizes > 0, major, C)  # an empty node has no majority: after every block
    return np.lexsort((np.arange(K), -sizes, -share, block))


def shown_nodes(order: np.ndarray, max_nodes: int = MAX_NODES) -> np.ndarray:
    """``order`` itself when it holds at most ``max_nodes`` nodes, else ``max_nodes`` of them evenly
    spaced along it (the first and the last included): every block keeps its share of the columns,
    so the picture of the whole survives, and every column is one real node that hover can name."""
    order = np.asarray(order)
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, (int, np.integer)) or max_nodes < 2:
        raise ParameterError("max_nodes", max_nodes, "an integer ≥ 2")
    if order.size <= max_nodes:
        return order
    return order[np.unique(np.round(np.linspace(0, order.size - 1, max_nodes)).astype(np.int64))]


def label_distribution_figure(counts, classes, node_sizes=None, *, colour: str = "share",
                              max_nodes: int = MAX_NODES, height: int | None = None) -> go.Figure:
    """Nodes along x (:func:`label_order`), classes down y, each cell coloured by the node's rows
    of that class; above, each drawn node's size n_k, sharing the node axis.

    Parameters
    ----------
    counts : array_like of int, shape (K, C), C ≥ 2
        Rows of each class on each node (:func:`fedviz.data.labels.node_label_counts`).
    classes : sequence, length C
        The columns' labels (floats, named by :func:`class_names`, or strings as they are).
    node_sizes : array_like of int, shape (K,), optional
        n_k; default the rows of ``counts`` summed (the training rows).
    colour : {"share", "count"}
        ``"share"`` (the default) colours a cell by the share of the node's rows in that class,
        from 0 to 1: n_k spans orders of magnitude on the natural presets (Section 1.2), and
        counts would light up the largest nodes only and leave the rest blank, hiding how
        differently the small nodes' labels are mixed, which is the non-IID-ness this figure is
        for; the sizes are the bars above.  ``"count"`` is Flower's default (``size_unit=
        "absolute"``).
    max_nodes : int
        Draw at most this many nodes, chosen by :func:`shown_nodes` (and at most
        :data:`MAX_CELLS` / C of them, at least 50); the x title says how many.
    height : int, optional
        Pixels; default grows with C (22 px a class, at least 2 × 50 and at most 480).

    The hover text of a cell names the node, the class, its count and its share; of a bar, the
    node and n_k.  The drawn node indices are the heatmap trace's ``meta``.
    """
    counts = _check_counts(counts)
    K, C = counts.shape
    if len(classes) != C:
        raise ParameterError("classes", f"{len(classes)} labels", f"one per column of counts: {C}")
    if colour not in COLOURS:
        raise ParameterError("colour", colour, " or ".join(repr(c) for c in COLOURS))
    sizes = counts.sum(axis=1) if node_sizes is None else np.asarray(node_sizes).reshape(-1)
    if sizes.size != K:
        raise ParameterError("node_sizes", f"{sizes.size} sizes", f"one per node of counts: K = {K}")
    names = [str(c) for c in classes] if all(isinstance(c, str) for c in classes) else class_names(classes)

    order = label_order(counts)
    nodes = shown_nodes(order, max_nodes if max_nodes < 50 else min(max_nodes, max(50, MAX_CELLS // C)))
    m = nodes.size
    sub = counts[nodes]  # (m, C)
    rows = sub.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(rows[:, None] > 0, sub / rows[:, None], np.nan)
    z = (share if colour == "share" else sub.astype(float)).T  # (C, m): a row per class
    # Hover text written out: Plotly's heatmap formats one customdata value per cell unreliably.
    text = [[f"node {k:,}<br>class {names[c]}<br>{sub[j, c]:,} of its {rows[j]:,} rows"
             + (f" ({share[j, c]:.1%})" if rows[j] else "") for j, k in enumerate(nodes)] for c in range(C)]

    if height is None:
        height = 250 + int(np.clip(22 * C, 100, 480))
    heat_px = height - 250 + 30
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.04,
                        row_heights=[90 / (90 + heat_px), heat_px / (90 + heat_px)])
    x = np.arange(m)
    fig.add_trace(go.Bar(x=x, y=sizes[nodes], marker_color=_SIZE_COLOUR, marker_line_width=0, showlegend=False,
                         name="n_k", customdata=nodes,
                         hovertemplate="node %{customdata:,}<br>n<sub>k</sub> = %{y:,} rows<extra></extra>"),
                  row=1, col=1)
    fig.add_trace(go.Heatmap(
        x=x, y=names, z=z, text=text, hovertemplate="%{text}<extra></extra>", meta=[int(k) for k in nodes],
        colorscale="Blues", zmin=0, zmax=1 if colour == "share" else max(1, int(sub.max())), hoverongaps=False,
        colorbar=dict(title=dict(text="share" if colour == "share" else "rows", side="top"), tickformat=".0%" if colour == "share" else ",d",
                      thickness=12, len=heat_px / (90 + heat_px + 10), y=0, yanchor="bottom")),
        row=2, col=1)

    positive = sizes[nodes][sizes[nodes] > 0]
    if positive.size and positive.max() >= 30 * positive.min():  # unbalanced: a log axis shows every node
        fig.update_yaxes(**log_axis([positive]), row=1, col=1)
    fig.update_yaxes(title_text="n<sub>k</sub>", row=1, col=1)
    fig.update_yaxes(title_text="class", type="category", autorange="reversed", row=2, col=1)
    shown = (f"all {K:,} nodes" if m == K else
             f"{m:,} of the {K:,} nodes, evenly spaced in this order")
    fig.update_xaxes(showticklabels=False, showgrid=False, range=[-0.5, m - 0.5], row=1, col=1)
    fig.update_xaxes(showticklabels=False, showgrid=False, range=[-0.5, m - 0.5], row=2, col=1,
                     title_text=f"{shown},<br>sorted by majority class, then its share")
    # Short lines: the chart is about 400 px wide on a 1024 px screen.
    what = "the share of its rows" if colour == "share" else "its rows"
    fig.update_layout(title=dict(text=f"Labels on each node<br><span style='font-size:12px'>colour: {what} in "
                                      "each class; bars: its size n<sub>k</sub></span>"),
                      height=height, bargap=0, **{**_LAYOUT, "margin": dict(l=60, r=20, t=70, b=70)})
    return fig


def class_totals_figure(counts, classes, *, height: int = 340) -> go.Figure:
    """The whole's label distribution p: each class's rows over all nodes, the mix a node's own
    is compared with (the total-variation sentence under the heatmap, and the IID case in which
    every node holds this mix)."""
    counts = _check_counts(counts)
    if len(classes) != counts.shape[1]:
        raise ParameterError("classes", f"{len(classes)} labels", f"one per column of counts: {counts.shape[1]}")
    names = [str(c) for c in classes] if all(isinstance(c, str) for c in classes) else class_names(classes)
    total = counts.sum(axis=0)
    share = total / max(1, total.sum())
    fig = go.Figure(go.Bar(x=names, y=share, marker_color="#2171b5", showlegend=False,
                           customdata=total, text=[f"{s:.0%}" for s in share], textposition="outside",
                           cliponaxis=False,
                           hovertemplate="class %{x}: %{customdata:,} rows (%{y:.1%})<extra></extra>"))
    fig.update_xaxes(type="category", title_text="class")
    fig.update_yaxes(tickformat=".0%", range=[0, min(1.0, 1.15 * float(share.max()) + 0.05)],
                     title_text="share of all rows")
    fig.update_layout(title="Classes overall<br>(all nodes together)", height=height,
                      **{**_LAYOUT, "margin": dict(l=60, r=20, t=70, b=60)})
    return fig
