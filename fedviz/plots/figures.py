"""Figures of fedviz: convergence curves (the paper's Figure 2) and data views (its Figure 1).

Every builder takes plain data (records or statistics) and returns a
``plotly.graph_objects.Figure``; the pages only place them.
"""

from __future__ import annotations

import math

from typing import Iterable, Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from .styles import run_styles

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

#: The same axes as axis titles (HTML: Plotly draws <sub>; the radio buttons showing X_AXES do not).
_AXIS_TITLES = {**X_AXES, "simulated": "Simulated time I × (c + T<sub>A</sub>) (s)"}

# Colours of the experiments' live cells (runs are styled by :func:`fedviz.plots.styles.run_styles`).
_PALETTE = ["#1f77b4", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#aec7e8", "#ffbb78",
            "#98df8a", "#ff9896", "#c5b0d5", "#c49c94"]

#: A run is drawn as diverged when f − f* climbs above this multiple of the largest start f(w⁰) − f*
#: (or becomes NaN/∞); the suboptimality axis stops at this multiple, the test-error axis at the
#: converging runs' range.
DIVERGED_FACTOR = 100.0
#: The least height of a plot area in pixels, whatever its legend holds (14 algorithms included).
PLOT_MIN = 240
#: Pixels under a plot area for the x tick labels and the x title, above the legend.
_X_TITLE_SPACE = 58
#: One row of a horizontal legend (29 px a row of line-and-marker entries as Chromium draws them), and
#: the width of an entry besides its text (its line and marker, and the gap to the next).
_LEGEND_ROW, _LEGEND_ITEM = 29, 52
#: Width of one character of a legend entry at Plotly's 12 px font (measured 4.6–5.5; a little more).
_CHAR = 5.8


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


def _series(runs, column, *, axis, nodes, round_cost) -> list[tuple[str, np.ndarray, np.ndarray, str, dict]]:
    """(label, x, y, algorithm, columns) of every run with records and ``column``."""
    out = []
    for label, records in runs.items():
        cols = _columns(records)
        if not cols or column not in cols:
            continue
        algorithm = str(cols["algorithm"][0]) if "algorithm" in cols and len(cols["algorithm"]) else label
        out.append((label, np.asarray(x_values(cols, axis, nodes=nodes, round_cost=round_cost), dtype=float),
                    np.asarray(cols[column], dtype=float), algorithm, cols))
    return out


def styles_of(runs, styles: Mapping[str, str] | None = None) -> dict:
    """The :class:`~fedviz.plots.styles.Style` of every run of ``runs`` (label → records): its family
    from ``styles`` (label → algorithm title, from the spec that made the label: labels are never
    parsed), else its records' algorithm column, else the label."""
    algos = {}
    for label, records in runs.items():
        algo = (styles or {}).get(label)
        if algo is None:
            cols = _columns(records) if records is not None else {}
            algo = str(cols["algorithm"][0]) if cols and "algorithm" in cols and len(cols["algorithm"]) else None
        algos[label] = algo
    return run_styles(algos)


def diverged_runs(runs, diverged: Iterable[str] = ()) -> set[str]:
    """The labels of the runs that diverged: named in ``diverged`` (a run's status), or whose
    f − f* becomes NaN/∞ after a finite value or climbs above :data:`DIVERGED_FACTOR` × the largest
    start f(w⁰) − f* of all the runs."""
    subs = {}
    for label, records in runs.items():
        cols = _columns(records) if records is not None else {}
        if cols and "suboptimality" in cols and len(cols["suboptimality"]):
            subs[label] = np.asarray(cols["suboptimality"], dtype=float)
    starts = [y[np.isfinite(y)][0] for y in subs.values() if np.isfinite(y).any()]
    ref = max([abs(v) for v in starts] or [0.0])
    out = {label for label in diverged if label in runs}
    for label, y in subs.items():
        finite = np.isfinite(y)
        if finite.any() and not finite[int(np.argmax(finite)):].all():
            out.add(label)
        elif ref > 0 and finite.any() and np.nanmax(y[finite]) > DIVERGED_FACTOR * ref:
            out.add(label)
    return out


def _add_curves(fig, series, styles: Mapping, *, row=None, col=None, showlegend=True, diverged=frozenset(),
                limits: tuple[float, float] | None = None, hover: str | None = None) -> None:
    """One curve per series (see :func:`_series`), styled by ``styles`` (label → Style).

    A diverged run (``diverged``) is drawn up to where it leaves ``limits`` (lo, hi): from there on
    it is off the axis, and a marker on the axis's edge says where it left, its legend entry and
    hover text say "diverged" — one run that blew up no longer stretches the axis of all the others."""
    for label, x, y, _, _ in series:
        st = styles[label]
        name = f"{label} — diverged" if label in diverged else label
        edge = None
        if label in diverged and limits is not None:
            lo, hi = limits
            out = ~np.isfinite(y) | (y > hi) | (y < lo)
            if out.any():
                i = int(np.argmax(out))
                edge = (x[i], hi if not (np.isfinite(y[i]) and y[i] < lo) else lo, y[i])
                y = np.where(np.arange(y.size) < i, y, np.nan)
        trace = go.Scatter(x=x, y=y, mode="lines+markers", name=name, legendgroup=label, showlegend=showlegend,
                           marker=dict(symbol=st.marker, size=6, color=st.color), line=st.line(),
                           meta={"label": label, "diverged": label in diverged})
        if hover:
            trace.hovertemplate = hover
        fig.add_trace(trace, row=row, col=col) if row is not None else fig.add_trace(trace)
        if edge is not None:
            ex, ey, actual = edge
            value = "NaN/∞" if not np.isfinite(actual) else f"{actual:.3g}"
            mark = go.Scatter(x=[ex], y=[ey], mode="markers", showlegend=False, legendgroup=label, name=name,
                              marker=dict(symbol="x", size=13, color=st.color,
                                          line=dict(width=2, color=st.color)),
                              cliponaxis=False, meta={"label": label, "edge": True},
                              hovertemplate=f"{label}: diverged here, value {value} (off the axis)<extra></extra>")
            fig.add_trace(mark, row=row, col=col) if row is not None else fig.add_trace(mark)


def _sub_limits(series, diverged) -> tuple[dict, tuple[float, float]]:
    """The log f − f* axis (keyword arguments of :func:`log_axis`) and the (lo, hi) the diverged runs
    are cut at: the axis spans the converging runs; the diverged ones count only up to
    :data:`DIVERGED_FACTOR` × the largest start, and only when no run converges."""
    ys = [_positive(y) for label, _, y, _, _ in series if label not in diverged]
    if not any(np.isfinite(y).any() for y in ys):
        starts = [y[np.isfinite(y)][0] for _, _, y, _, _ in series if np.isfinite(y).any()]
        cap = DIVERGED_FACTOR * max([abs(v) for v in starts if v > 0] or [1.0])
        ys = [np.where(_positive(y) <= cap, _positive(y), np.nan) for _, _, y, _, _ in series]
    axis = log_axis(ys)
    return axis, (0.0, 10.0 ** axis["range"][1])


def _positive(y) -> np.ndarray:
    """On a log axis, f − f* ≤ 0 (rounding at the optimum) cannot be drawn: clipped to a floor below
    anything meaningful instead of dropping the point."""
    y = np.asarray(y, dtype=float)
    return np.where(np.isfinite(y), np.maximum(y, 1e-16), y)


def legend_below(fig, names: Sequence[str], *, height: int, top: int = 50, width: int = 420,
                 left: int = 60, right: int = 20, xtitle: int = _X_TITLE_SPACE) -> int:
    """Put the legend under the plot, outside it, and grow the figure with it; returns the height.

    The legend hangs right under the x title (``yref="paper"``, ``xtitle`` pixels below the plot
    area); the bottom margin holds the x title and the legend's rows as they wrap at ``width``
    pixels (a narrow estimate of the width the page gives the figure: a wider figure wraps to fewer
    rows, and the space left over stays at the figure's foot, not between the plot and its legend,
    where it read as a gap of ~170 px on a wide page, issue 31).  The plot area keeps ``height`` − ``top`` − the margin of a one-row
    legend, and at least :data:`PLOT_MIN` pixels, however many runs the legend lists.  ``xtitle``:
    the pixels under the plot area for its tick labels and x title, above the legend.
    """
    rows = legend_rows(names, width - left - right)
    legend_h = rows * _LEGEND_ROW + 26 if rows else 0  # + the legend box's own padding
    bottom = xtitle + legend_h
    plot = max(PLOT_MIN, height - top - xtitle - _LEGEND_ROW - 26)
    total = top + plot + bottom
    fig.update_layout(height=total, margin=dict(l=left, r=right, t=top, b=bottom),
                      # maxheight 1 (the whole figure): Plotly caps a horizontal legend at half the figure by
                      # default, which made 16 runs scroll at 280 px although the margin holds them.
                      legend=dict(orientation="h", yref="paper", y=-xtitle / plot, yanchor="top", xanchor="left",
                                  x=0, maxheight=1.0))
    return total


def rotated_depth(labels: Sequence[str], angle: float = 45.0, char: float = 7.0) -> int:
    """Pixels the longest of ``labels`` reaches below (or beside) its axis when slanted by ``angle``
    degrees, at ``char`` pixels a character (Plotly's 12 px tick font)."""
    longest = max((len(_plain(t)) for t in labels), default=0)
    return int(math.ceil(longest * char * math.sin(math.radians(angle)))) + 8


def wrap_title(text: str, width: int) -> str:
    """``text`` broken with <br> at spaces into lines of at most ``width`` characters (Plotly neither
    wraps a title nor shrinks it: at 1024 px a long one was cut off at the figure's edge)."""
    if "<br>" in text or len(_plain(text)) <= width:
        return text
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(_plain(line)) + 1 + len(_plain(word)) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "<br>".join([*lines, line])


def legend_rows(names: Sequence[str], width: float) -> int:
    """How many rows Plotly's horizontal legend takes for entries ``names`` in ``width`` pixels (the
    plot area's width): entries flow left to right, each its line and marker, then its text."""
    rows, used = 0, width
    for name in names:
        w = _LEGEND_ITEM + _CHAR * len(_plain(name))
        if used + w > width:
            rows, used = rows + 1, 0.0
        used += w
    return rows


def _plain(text: str) -> str:
    import re

    return re.sub(r"<[^>]+>", "", str(text))


# -- axes ------------------------------------------------------------------------------------------
def _finite(arrays) -> np.ndarray:
    arrays = [np.asarray(a, dtype=float).ravel() for a in arrays]
    v = np.concatenate(arrays) if arrays else np.empty(0)
    return v[np.isfinite(v)]


def decade_text(k: int) -> str:
    """The label of 10^k: "1", "10", "100", "1,000", "10,000", else 10<sup>k</sup> (a true minus)."""
    k = int(k)
    if 0 <= k <= 4:
        return f"{10 ** k:,}"
    return "10<sup>" + str(k).replace("-", "−") + "</sup>"


def log_axis(arrays, *, max_ticks: int = 8) -> dict:
    """Keyword arguments for ``update_xaxes``/``update_yaxes``: a log axis labelled at powers
    of ten only.

    Plotly's own log ticks add "2" and "5" between decades and write small values as
    "0.0001", strings of every width.  The range is the data's with 5% of padding (in
    decades), widened to the enclosing decades when that would hold fewer than two powers
    of ten, so at least two labels always show; every ``ceil(decades / max_ticks)``-th decade is labelled with
    :func:`decade_text`.
    """
    v = _finite(arrays)
    v = v[v > 0]
    a, b = (-3.0, 0.0) if v.size == 0 else (float(np.log10(v.min())), float(np.log10(v.max())))
    pad = 0.05 * max(b - a, 1.0)
    lo, hi = a - pad, b + pad
    if np.floor(hi) - np.ceil(lo) < 1:  # fewer than two decades inside: widen to the enclosing ones
        lo, hi = np.floor(a) - pad, max(np.ceil(b), np.floor(a) + 1) + pad
    first, last = int(np.ceil(lo)), int(np.floor(hi))
    step = max(1, int(np.ceil((last - first) / max_ticks)))
    ks = np.arange(first, last + 1, step)
    return dict(type="log", range=[float(lo), float(hi)], tickmode="array",
                tickvals=[10.0 ** int(k) for k in ks], ticktext=[decade_text(k) for k in ks])


def error_range(arrays, baselines=None) -> list[float] | None:
    """The y range of a test-error axis: the data and baselines with padding, never below 0,
    and not above 1 (100%) unless a value is; None if there is no finite value.

    The padding is 8% of the spread, and at least 1 point (0.01), so a flat series still
    gets a readable band around it instead of an axis Plotly stretches to −100%.
    """
    v = _finite([*arrays, [b for b in (baselines or {}).values() if b is not None]])
    if v.size == 0:
        return None
    lo, hi = float(v.min()), float(v.max())
    pad = max(0.08 * (hi - lo), 0.01)
    top = hi + pad if hi > 1 else min(1.0, hi + pad)
    return [max(0.0, lo - pad), top]


def _error_axis(fig, ys, baselines, *, height, row=None, col=None, regression=False, rng=None) -> None:
    """Range the test-error axis (``rng``, else :func:`error_range`), draw the baselines, and say so
    when no test row exists."""
    rng = list(rng) if rng is not None else error_range(ys, baselines)
    has_records = any(np.size(y) for y in ys)
    _add_baselines(fig, baselines, row=row, col=col, span=(rng[1] - rng[0]) if rng else 1.0,
                   height=height, regression=regression)
    fig.update_yaxes(range=rng or [0, 1], row=row, col=col)
    if has_records and not _finite(ys).size:
        x, y = _refs(fig, row, col)
        fig.add_annotation(xref=f"{x} domain", yref=f"{y} domain", x=0.5, y=0.5, showarrow=False,
                           text="no test rows: this data set has no test set", font=dict(size=14, color="#555"))


def _refs(fig, row, col) -> tuple[str, str]:
    """The axis references ("x", "y" or "x2", "y2", ...) of a subplot (or the only plot)."""
    if row is None:
        return "x", "y"
    sub = fig.get_subplot(row, col)
    return sub.xaxis.plotly_name.replace("axis", ""), sub.yaxis.plotly_name.replace("axis", "")


def suboptimality_figure(runs: Mapping[str, Sequence], *, axis: str = "iteration", nodes: int = 1,
                         round_cost: float = 0.0, height: int = 420,
                         styles: Mapping[str, str] | None = None, diverged: Iterable[str] = (),
                         width: int = 420, also=()) -> go.Figure:
    """f(w) − f* on a log axis, one curve per run label (``styles``: label → title to style it as;
    ``diverged``: labels whose status says so; ``width``: a narrow estimate of the figure's width,
    for the legend's rows, :func:`legend_below`; ``also``: (runs, nodes) drawn in another figure
    beside this one, whose values set this one's ranges too — panels to compare on the same axes).

    The axis stops at :data:`DIVERGED_FACTOR` × the largest start: a diverged run is cut there and
    marked (:func:`diverged_runs`)."""
    fig = go.Figure()
    series = _series(runs, "suboptimality", axis=axis, nodes=nodes, round_cost=round_cost)
    gone = diverged_runs(runs, diverged)
    beside, gone_beside = _beside(also, "suboptimality", axis=axis, round_cost=round_cost)
    axis_kw, limits = _sub_limits(series + beside, gone | gone_beside)
    series = [(label, x, _positive(y), a, c) for label, x, y, a, c in series]
    _add_curves(fig, series, styles_of(runs, styles), diverged=gone, limits=limits)
    _shared_x(fig, series + beside, also)
    fig.update_layout(title="Objective suboptimality f(w) − f*", xaxis_title=_AXIS_TITLES[axis],
                      yaxis_title="f(w) − f*", **_LAYOUT)
    legend_below(fig, [_name(label, gone) for label, *_ in series], height=height, width=width)
    fig.update_yaxes(**axis_kw)
    return fig


def _name(label: str, diverged) -> str:
    return f"{label} — diverged" if label in diverged else label


def error_labels(metric: str = "error", loss: str | None = None) -> dict:
    """Title, axis title, tick format and hover text of a test-error chart, keyed by the metric
    (:attr:`fedviz.problems.objective.Problem.error_metric`: "error" on ±1 labels, "mse" on
    real targets) and the loss: the squared loss on ±1 labels is scored by the sign of wᵀx."""
    if metric == "mse":
        return dict(title="Test mean squared error (ridge regression)", axis="test MSE", tickformat=None,
                    hover="%{y:.4g}")
    title = "Test error: sign(wᵀx) ≠ y" if loss == "squared" else "Test error"
    return dict(title=title, axis="test error", tickformat=".1%", hover="%{y:.2%}")


def test_error_figure(runs: Mapping[str, Sequence], *, baselines: Mapping[str, float] | None = None,
                      axis: str = "iteration", nodes: int = 1, round_cost: float = 0.0,
                      height: int = 420, regression: bool = False, loss: str | None = None,
                      styles: Mapping[str, str] | None = None, diverged: Iterable[str] = (),
                      width: int = 420, also=()) -> go.Figure:
    """Test error per run, with horizontal lines for the optimum and the naive baselines (``also``:
    runs beside it that share its ranges, as in :func:`suboptimality_figure`).

    ``regression`` is the metric's ("mse" when True, else the sign error rate; see
    :func:`error_labels`, also keyed by ``loss``).  The axis spans the converging runs and the
    baselines (:func:`error_range`); a diverged run is cut where it leaves it, and marked."""
    labels = error_labels("mse" if regression else "error", loss)
    fig = go.Figure()
    series = _series(runs, "test_error", axis=axis, nodes=nodes, round_cost=round_cost)
    gone = diverged_runs(runs, diverged)
    hover = (f"%{{fullData.name}}<br>{_AXIS_TITLES[axis]} %{{x}}<br>{labels['axis']} {labels['hover']}"
             "<extra></extra>")
    beside, gone_beside = _beside(also, "test_error", axis=axis, round_cost=round_cost)
    # The baselines beside count for the range too (another partition has another per-node majority).
    every = {f"{k} {i}": v for i, (*_, base) in enumerate(a for a in (also or ()) if len(a) > 2)
             for k, v in (base or {}).items()}
    rng = _error_limits(series + beside, gone | gone_beside, {**(baselines or {}), **every}, regression)
    _add_curves(fig, series, styles_of(runs, styles), diverged=gone, limits=rng, hover=hover)
    _shared_x(fig, series + beside, also)
    fig.update_layout(title=labels["title"], xaxis_title=_AXIS_TITLES[axis], yaxis_title=labels["axis"],
                      yaxis_tickformat=labels["tickformat"], **_LAYOUT)
    height = legend_below(fig, [_name(label, gone) for label, *_ in series], height=height, width=width)
    _error_axis(fig, [s[2] for s in series], baselines, height=height, regression=regression, rng=rng)
    return fig


def _beside(also, column, *, axis, round_cost) -> tuple[list, set[str]]:
    """The series (and the diverged labels) of the runs of ``also`` [(runs, nodes), ...], labels
    made apart from this figure's own ("B: FSVRG")."""
    series, gone = [], set()
    for k, (runs, nodes, *_) in enumerate(also or ()):  # (runs, nodes[, baselines])
        tag = f"beside {k}: "
        series += [(tag + label, x, y, a, c)
                   for label, x, y, a, c in _series(runs, column, axis=axis, nodes=nodes, round_cost=round_cost)]
        gone |= {tag + label for label in diverged_runs(runs)}
    return series, gone


def _shared_x(fig, series, also) -> None:
    """With runs beside the figure (``also``), its x range spans theirs too."""
    if not also:
        return
    x = _finite([s[1] for s in series])
    if x.size:
        lo, hi = float(x.min()), float(x.max())
        pad = 0.03 * (hi - lo) or 0.5
        fig.update_xaxes(range=[lo - pad, hi + pad])


def _error_limits(series, diverged, baselines, regression: bool) -> tuple[float, float] | None:
    """The test-error axis: the converging runs' values and the baselines (all runs' when every run
    diverged), never beyond [0, 1] for an error rate."""
    ys = [y for label, _, y, _, _ in series if label not in diverged]
    if not any(np.isfinite(y).any() for y in ys):
        ys = [y for _, _, y, _, _ in series]
    rng = error_range(ys, baselines)
    if rng is not None and not regression:
        rng = [max(0.0, rng[0]), min(1.0, rng[1])]
    return None if rng is None else (float(rng[0]), float(rng[1]))


_BASELINE_STYLE = {"optimum": ("OPT", "#1f77b4", "solid"), "majority": ("predict majority", "#7f7f7f", "dot"),
                   "node_majority": ("per-node majority", "#bcbd22", "dash")}
# OPT's label goes under its line (the curves converge onto it from above), the others over theirs.
_BASELINE_LABEL = {"optimum": "top"}


def _add_baselines(fig, baselines, row=None, col=None, *, span: float = 1.0, height: int = 420,
                   regression: bool = False):
    """A horizontal line per baseline across the (row, col) subplot, and their labels.

    Lines closer than a label's height (about 16 px of the ``span`` of the y axis over the
    plot's height) share one label, "predict majority = per-node majority 32.87%" when
    their values print alike, "OPT 26.38% · per-node majority 26.41%" otherwise: two
    labels at the same height printed on top of each other.

    Written as layout shapes and annotations in one update: ``fig.add_hline`` gives the
    same lines but took 10 ms each.
    """
    x, y = _refs(fig, row, col)
    lines = []
    for key, value in (baselines or {}).items():
        if value is None or not np.isfinite(value):
            continue
        name, color, dash = _BASELINE_STYLE.get(key, (key, "#444", "dot"))
        lines.append((float(value), key, name, color, dash))
    shapes = [dict(type="line", xref=f"{x} domain", x0=0, x1=1, yref=y, y0=v, y1=v,
                   line=dict(color=color, dash=dash, width=1.5)) for v, _, _, color, dash in lines]
    close = span * 16 / max(100, height - 90)  # 90 px: the top and bottom margins
    labels = []
    for group in _close_groups(sorted(lines), close):
        texts: dict[str, list[str]] = {}
        for v, _, name, _, _ in group:
            texts.setdefault(f"{v:.4g}" if regression else f"{100 * v:.2f}%", []).append(name)
        text = " · ".join(" = ".join(names) + " " + value for value, names in texts.items())
        keys = {key for _, key, _, _, _ in group}
        anchor = _BASELINE_LABEL.get(next(iter(keys))) if len(keys) == 1 else "bottom"
        labels.append(dict(xref=f"{x} domain", x=1, xanchor="right", yref=y,
                           y=max(v for v, *_ in group), yanchor=anchor or "bottom", showarrow=False,
                           text=text))
    if shapes:
        fig.update_layout(shapes=list(fig.layout.shapes) + shapes,
                          annotations=list(fig.layout.annotations) + labels)


def _close_groups(lines, close: float) -> list[list]:
    """Split lines sorted by value into runs whose neighbours are closer than ``close``."""
    groups: list[list] = []
    for line in lines:
        if groups and line[0] - groups[-1][-1][0] < close:
            groups[-1].append(line)
        else:
            groups.append([line])
    return groups


def convergence_figure(runs, *, baselines=None, axis="iteration", nodes=1, round_cost=0.0,
                       title=None, height=430, styles: Mapping[str, str] | None = None,
                       diverged: Iterable[str] = (), regression: bool = False, width: int = 560) -> go.Figure:
    """Suboptimality (log) and test error side by side: the layout of the paper's Figure 2.

    ``styles`` maps a label to the title it is styled as (Compare: '#3 FSVRG' → 'FSVRG'); every run
    has its own style (:func:`~fedviz.plots.styles.run_styles`).  Diverged runs are cut at the edge
    of both axes and marked (:func:`diverged_runs`)."""
    # 0.16 of the width between the panels: room for the right panel's "35.0%" ticks at 330 px.
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Objective suboptimality f(w) − f*", "Test error"),
                        horizontal_spacing=0.16)
    look = styles_of(runs, styles)
    gone = diverged_runs(runs, diverged)
    subs = _series(runs, "suboptimality", axis=axis, nodes=nodes, round_cost=round_cost)
    axis_kw, limits = _sub_limits(subs, gone)
    subs = [(label, x, _positive(y), a, c) for label, x, y, a, c in subs]
    _add_curves(fig, subs, look, row=1, col=1, diverged=gone, limits=limits)
    errs = _series(runs, "test_error", axis=axis, nodes=nodes, round_cost=round_cost)
    rng = _error_limits(errs, gone, baselines, regression)
    # The legend lists each run once: from the left panel, or the right one for a run with no f − f*.
    left = {label for label, *_ in subs}
    _add_curves(fig, errs, look, row=1, col=2, diverged=gone, limits=rng, showlegend=False)
    for tr in fig.data:
        if tr.xaxis == "x2" and tr.meta and tr.meta.get("label") not in left and not tr.meta.get("edge"):
            tr.showlegend = True
    fig.update_yaxes(**axis_kw, row=1, col=1)
    fig.update_yaxes(tickformat=None if regression else ".1%", row=1, col=2)
    fig.update_xaxes(title_text=_AXIS_TITLES[axis])
    fig.update_layout(**_LAYOUT)
    names = [_name(label, gone) for label in dict.fromkeys([s[0] for s in subs] + [s[0] for s in errs])]
    title = wrap_title(title, max(30, int(width / 9))) if title else None  # Plotly cuts a long title off
    top = (90 + 20 * title.count("<br>")) if title else 50
    height = legend_below(fig, names, height=height, width=width, top=top)
    _error_axis(fig, [s[2] for s in errs], baselines, height=height, row=1, col=2, regression=regression, rng=rng)
    if title:  # above the subplot titles, not on them
        fig.update_layout(title=dict(text=title, y=1 - 8 / height, yanchor="top"))
    return fig


def paper_figure2(runs, *, baselines, title="Figure 2, reproduced", width: int = 1100) -> go.Figure:
    """Rounds of communication vs objective and test error, as in the paper's Figure 2 (drawn
    ``width`` pixels wide: the CLI's file)."""
    return convergence_figure(runs, baselines=baselines, axis="rounds", title=title, width=width)


def feature_appearance_figure(omega: np.ndarray, n_nodes: int, *, height: int = 380) -> go.Figure:
    """The paper's Figure 1: on how many nodes each feature appears (ω^j for feature j), and
    how many features appear on a given number of nodes."""
    omega = np.asarray(omega)
    w = "ω<sup>j</sup>"
    # Short subplot titles (each spans half the width); the figure's own title names the paper's figure.
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, subplot_titles=(
        f"{w} for each feature j", f"histogram of {w}"))
    idx = np.arange(omega.size)
    if omega.size > 50_000:  # keep the browser responsive: every feature still counted in the histogram
        keep = np.unique(np.r_[np.linspace(0, omega.size - 1, 50_000).astype(int), np.argmax(omega)])
        idx = idx[keep]
    fig.add_trace(go.Scattergl(x=idx, y=omega[idx], mode="markers", marker=dict(size=3, color="#1f77b4"),
                               name="nodes with feature j", showlegend=False,
                               hovertemplate="feature j = %{x}<br>appears on %{y} nodes<extra></extra>"),
                  row=1, col=1)
    # The histogram's counts are computed here: the figure sends 60 bars, not every ω^j.
    counts, edges = np.histogram(omega, bins=60) if omega.size else (np.zeros(0), np.zeros(1))
    fig.add_trace(go.Bar(x=(edges[:-1] + edges[1:]) / 2, y=counts, width=np.diff(edges), marker_color="#1f77b4",
                         showlegend=False, customdata=np.c_[edges[:-1], edges[1:]],
                         hovertemplate="%{y} features on %{customdata[0]:.0f}–%{customdata[1]:.0f} nodes"
                                       "<extra></extra>"), row=1, col=2)
    fig.update_layout(bargap=0)
    fig.add_hline(y=n_nodes, line=dict(dash="dot", color="#7f7f7f"), annotation_text=f"all K = {n_nodes:,} nodes",
                  row=1, col=1)
    # Axis titles on two lines and the title on two: each half is about 150 px wide on a 1024 px screen.
    fig.update_xaxes(title_text="feature index j", row=1, col=1)
    fig.update_yaxes(title_text=f"nodes the feature<br>appears on ({w})", row=1, col=1)
    fig.update_xaxes(title_text=f"nodes a feature<br>appears on ({w})", row=1, col=2)
    fig.update_yaxes(title_text="features", **log_axis([counts]), row=1, col=2)
    fig.update_layout(height=height, **_LAYOUT)
    fig.update_layout(title=dict(text="On how many nodes each feature appears:<br>the paper's Figure 1",
                                 y=1 - 14 / height, yanchor="top"), margin=dict(t=100, b=60))
    return fig


#: The narrowest bin of the node-size histogram, in decades (a twentieth of a decade, ~12% of n_k).
MIN_BIN_DECADES = 0.05


def node_size_figure(node_sizes: np.ndarray, *, height: int = 340) -> go.Figure:
    """The distribution of n_k on log-spaced bins (a log x axis labelled at powers of ten).

    Bins are at least :data:`MIN_BIN_DECADES` wide: nodes of (nearly) one size, such as dna.scale's
    15 rows each or a random split of a9a, made 40 bins inside a sliver of a decade, and the chart
    showed no bar at all."""
    sizes = np.asarray(node_sizes)
    a, b = np.log10(max(1, sizes.min())), np.log10(max(1, sizes.max()) + 1)
    step = max((b - a) / 40, MIN_BIN_DECADES)
    edges = 10.0 ** (a + step * np.arange(int(np.ceil((b - a) / step)) + 1))
    edges[0], edges[-1] = min(edges[0], sizes.min()), max(edges[-1], sizes.max())  # 10**log10(15) may be 15.000…02
    counts, edges = np.histogram(sizes, bins=edges)
    fig = go.Figure(go.Bar(x=np.sqrt(edges[:-1] * edges[1:]), y=counts, width=np.diff(edges),
                           marker_color="#ff7f0e", name="nodes",
                           customdata=np.c_[edges[:-1], edges[1:]],
                           hovertemplate="%{y} nodes of %{customdata[0]:.0f}–%{customdata[1]:.0f} examples"
                                         "<extra></extra>"))
    fig.update_layout(title="Node sizes n<sub>k</sub>", xaxis_title="examples on<br>the node (n<sub>k</sub>)",
                      yaxis_title="nodes", height=height, bargap=0, **{**_LAYOUT, "margin": dict(l=60, r=20, t=50,
                                                                                                   b=60)})
    fig.update_xaxes(**log_axis([edges]))
    return fig


# The legend sits under the plot, where it cannot cover a title or a curve.
_LAYOUT = dict(margin=dict(l=60, r=20, t=50, b=40),
               legend=dict(orientation="h", yanchor="top", y=-0.2, xanchor="left", x=0))
