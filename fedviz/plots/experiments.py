"""Figures of an experiment (issue 14): pure functions of a :class:`~fedviz.experiments.results.Results`
(and, for the progress view, of a live :class:`~fedviz.experiments.driver.ExperimentSnapshot`).

The views are those a paper's experiment section publishes (Konečný et al. 2016, Section 4,
Figure 2), made honest about chance: every line is the median over seeds with its min–max
band, never one lucky seed.

* :func:`band_figure` — the curves of each setting, median and min–max over seeds;
* :func:`protocol_figure` — FedProx's Figure 2 as Li et al. (2020) draw it, for an experiment that
  records the gradient dissimilarity: training loss f(w), f − f* and the dissimilarity
  (1/K) Σ_k ‖∇F_k(w) − ∇f(w)‖² over rounds, one column per setting;
* :func:`axis_figure` — a final figure (f − f*, test error, rounds to reach ε) against the
  varied axis, one line per algorithm, min–max error bars;
* :func:`heatmap_figure` — algorithm × setting, the median final figure (log colour for f − f*);
* :func:`sensitivity_figure` — final f − f* against each grid value: Section 4.1 "tried a set
  of stepsizes, and retrospectively choose one that works best"; this shows how much that
  choice mattered;
* :func:`tuned_figure` / :func:`tuned_rows` — each tuned cell's chosen stepsize (and each
  grid line's best value);
* :func:`live_figure`, :func:`progress` — the running cells, for the page's progress view;
* :func:`report_html` — one standalone HTML page with all of them, the verdict and the cells.

A line with a stepsize grid is drawn at its best grid value in each setting
(:meth:`Results.best_step`), as the paper chose its stepsizes.
"""

from __future__ import annotations

import html
import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..experiments.results import METRICS, Results, per_node_title
from ..problems import metrics as pernode_metrics
from .figures import _LAYOUT, _PALETTE, decade_text, log_axis
from .styles import Style, run_styles

#: The curves a band can show (record columns), and how each reads.
CURVES = {"suboptimality": "f(w) − f*", "test_error": "test error", "objective": "objective f(w)",
          "dissimilarity": "gradient dissimilarity (1/K) Σ_k ‖∇F_k − ∇f‖²"}
#: The curves drawn on a log axis (positive quantities spanning decades).
LOG_CURVES = ("suboptimality", "dissimilarity")
#: The most settings drawn as facets of one figure (more: the caller picks which).
MAX_FACETS = 12
#: f − f* ≤ 0 (rounding at the optimum) cannot sit on a log axis: it is drawn at this floor.
FLOOR = 1e-16


# -- helpers ----------------------------------------------------------------------------------------
def arm_styles(results: Results) -> dict[str, Style]:
    """One style per line, the same in every figure (:func:`~fedviz.plots.styles.run_styles`: the
    algorithm's family hue; two lines of one algorithm — two stepsizes, an ablation — differ in
    lightness, dash and marker)."""
    algos = {a.label: a.spec.name for a in results.experiment.arms}
    return run_styles({arm: algos.get(arm) for arm in results.arms})


def arm_colors(results: Results) -> dict[str, str]:
    """The colour of each line's :func:`arm_styles`."""
    return {arm: st.color for arm, st in arm_styles(results).items()}


def _metric_title(metric: str, results: Results) -> str:
    if metric == "rounds":
        return f"rounds to reach f − f* ≤ {results.experiment.target:g}"
    return METRICS[metric] if metric in METRICS else per_node_title(metric)


def _grid(n: int, cols: int = 3) -> tuple[int, int]:
    cols = max(1, min(cols, n))
    return -(-n // cols), cols


def _facets(titles: Sequence[str], *, height_each: int = 300, cols: int = 3, shared_y: bool = True):
    rows, ncols = _grid(len(titles), cols)
    fig = make_subplots(rows=rows, cols=ncols, subplot_titles=list(titles), shared_yaxes=shared_y,
                        horizontal_spacing=0.06, vertical_spacing=min(0.12, 0.5 / max(rows, 1)))
    height = max(340, 150 + height_each * rows)
    # The legend sits above the facets' titles (28 px above the plot area), under the figure's title.
    fig.update_layout(height=height, **_LAYOUT)
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1 + 28 / (height - 150), xanchor="left",
                                  x=0), margin=dict(l=60, r=20, t=110, b=40))
    return fig, rows, ncols


def _positive(y: np.ndarray) -> np.ndarray:
    y = np.asarray(y, dtype=float)
    return np.where(np.isfinite(y), np.maximum(y, FLOOR), np.nan)


def _finite_or_nan(v: float) -> float:
    return v if isinstance(v, (int, float)) and math.isfinite(v) else math.nan


def _settings(results: Results, settings) -> list[tuple[int, ...]]:
    chosen = list(results.settings) if settings is None else [tuple(s) for s in settings]
    return chosen[:MAX_FACETS]


def _step_text(step) -> str:
    return "" if step is None else f" (grid value {step:g})"


# -- curves with a band over seeds -------------------------------------------------------------------
def band_figure(results: Results, settings: Sequence[Sequence[int]] | None = None, *,
                metric: str = "suboptimality") -> go.Figure:
    """One facet per setting: each line's median curve over seeds and its min–max band.

    ``settings`` (default: all, at most :data:`MAX_FACETS`) picks the facets.  Each trace's
    ``meta`` names its line, setting and part (median, min or max) for readers of the figure.
    f − f* is on a log axis labelled at powers of ten (the paper's Figure 2).
    """
    if metric not in CURVES:
        from ..errors import ParameterError

        raise ParameterError("metric", metric, "one of " + ", ".join(CURVES))
    chosen = _settings(results, settings)
    fig, rows, cols = _facets([results.setting_label(s) for s in chosen] or ["no settings"])
    looks = arm_styles(results)
    colors = {arm: st.color for arm, st in looks.items()}
    ys = []
    for k, setting in enumerate(chosen):
        r, c = k // cols + 1, k % cols + 1
        for arm in results.arms:
            step = results.best_step(arm, setting)
            band = results.band(arm, setting, metric, step=step)
            if band is None:
                continue
            it, med, lo, hi = band
            if metric in LOG_CURVES:
                med, lo, hi = _positive(med), _positive(lo), _positive(hi)
            ys += [lo, hi]
            color = colors[arm]
            meta = {"arm": arm, "setting": list(setting), "step": step}
            fig.add_trace(go.Scatter(x=it, y=lo, mode="lines", line=dict(width=0, color=color), hoverinfo="skip",
                                     showlegend=False, legendgroup=arm, meta={**meta, "part": "min"}), row=r, col=c)
            fig.add_trace(go.Scatter(x=it, y=hi, mode="lines", line=dict(width=0, color=color), fill="tonexty",
                                     fillcolor=_alpha(color, 0.2), hoverinfo="skip", showlegend=False,
                                     legendgroup=arm, meta={**meta, "part": "max"}), row=r, col=c)
            fig.add_trace(go.Scatter(x=it, y=med, mode="lines+markers", name=arm, legendgroup=arm, showlegend=k == 0,
                                     line=looks[arm].line(), meta={**meta, "part": "median"},
                                     marker=dict(symbol=looks[arm].marker, size=6, color=color, maxdisplayed=12),
                                     hovertemplate=f"{arm}{_step_text(step)}<br>iteration %{{x}}<br>median "
                                                   f"%{{y:.3g}}<extra></extra>"), row=r, col=c)
    if metric in LOG_CURVES:
        fig.update_yaxes(**log_axis(ys))
    fig.update_xaxes(title_text="iterations", row=rows)
    fig.update_yaxes(title_text=CURVES[metric], col=1)
    fig.update_layout(title=f"{CURVES[metric]}: median over seeds, band min–max "
                            f"({len(results.experiment.seeds)} seed{'s' * (len(results.experiment.seeds) > 1)})")
    return fig


def curve_choices(results: Results) -> list[str]:
    """The curves :func:`band_figure` can draw for ``results``: the dissimilarity only where it was recorded."""
    return [m for m in CURVES if m != "dissimilarity" or results.experiment.dissimilarity]


#: The rows of :func:`protocol_figure`: (record column, axis title).
PROTOCOL_ROWS = (("objective", "training loss f(w)"), ("suboptimality", "f(w) − f*"),
                 ("dissimilarity", "(1/K) Σ_k ‖∇F_k − ∇f‖²"))


def protocol_figure(results: Results, settings: Sequence[Sequence[int]] | None = None) -> go.Figure:
    """Li et al. (2020, FedProx), Figure 2, on ``results``: one column per setting, rows the training
    loss f(w) (their top row; here with the λ/2‖W‖² of eq. (1)), f − f* (log) and the gradient
    dissimilarity (1/K) Σ_k ‖∇F_k(w) − ∇f(w)‖² (their bottom row, "variance of local gradients"; log),
    each line's median over seeds with its min–max band, a grid line at its best value per setting.
    Traces' ``meta`` name the line, setting, row (its record column) and part."""
    chosen = _settings(results, settings)[:6]  # six columns at most: a row of a paper's figure
    cols = max(1, len(chosen))
    params = {a.label: a.param for a in results.experiment.arms}

    def title(setting) -> str:  # a grid line's value differs by setting: each column names its own
        steps = [f"{arm} {params.get(arm) or 'value'} = {step:g}" for arm in results.arms
                 if (step := results.best_step(arm, setting)) is not None]
        return results.setting_label(setting) + (f"<br><sup>{'; '.join(steps)}</sup>" if steps else "")

    fig = make_subplots(rows=len(PROTOCOL_ROWS), cols=cols, shared_xaxes=True, horizontal_spacing=0.05,
                        vertical_spacing=0.06, column_titles=[title(s) for s in chosen] or [""])
    looks = arm_styles(results)
    ys: dict[str, list] = {m: [] for m, _ in PROTOCOL_ROWS}
    for j, setting in enumerate(chosen):
        for arm in results.arms:
            step = results.best_step(arm, setting)
            for i, (metric, _) in enumerate(PROTOCOL_ROWS):
                band = results.band(arm, setting, metric, step=step)
                if band is None:
                    continue
                it, med, lo, hi = band
                if metric in LOG_CURVES:
                    med, lo, hi = _positive(med), _positive(lo), _positive(hi)
                ys[metric] += [lo, hi]
                color = looks[arm].color
                meta = {"arm": arm, "setting": list(setting), "step": step, "row": metric}
                fig.add_trace(go.Scatter(x=it, y=lo, mode="lines", line=dict(width=0, color=color), hoverinfo="skip",
                                         showlegend=False, legendgroup=arm, meta={**meta, "part": "min"}),
                              row=i + 1, col=j + 1)
                fig.add_trace(go.Scatter(x=it, y=hi, mode="lines", line=dict(width=0, color=color), fill="tonexty",
                                         fillcolor=_alpha(color, 0.2), hoverinfo="skip", showlegend=False,
                                         legendgroup=arm, meta={**meta, "part": "max"}), row=i + 1, col=j + 1)
                fig.add_trace(go.Scatter(x=it, y=med, mode="lines", name=arm,
                                         legendgroup=arm, showlegend=i == 0 and j == 0, line=looks[arm].line(),
                                         meta={**meta, "part": "median"},
                                         hovertemplate=f"{arm}{_step_text(step)}<br>round %{{x}}<br>median "
                                                       f"%{{y:.3g}}<extra></extra>"), row=i + 1, col=j + 1)
    for i, (metric, axis_title) in enumerate(PROTOCOL_ROWS):
        if metric in LOG_CURVES:
            fig.update_yaxes(**log_axis(ys[metric]), row=i + 1)
        fig.update_yaxes(title_text=axis_title, row=i + 1, col=1)
    fig.update_xaxes(title_text="rounds", row=len(PROTOCOL_ROWS))
    n = len(results.experiment.seeds)
    fig.update_layout(height=220 * len(PROTOCOL_ROWS) + 140, **_LAYOUT)
    fig.update_layout(title=f"FedProx's Figure 2 protocol: median over {n} seed{'s' * (n > 1)}, band min–max",
                      legend=dict(orientation="h", yanchor="bottom", y=1.06, x=0),
                      margin=dict(l=70, r=20, t=120, b=40))
    return fig


def _alpha(color: str, a: float) -> str:
    color = color.lstrip("#")
    r, g, b = (int(color[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{a})"


# -- final figure against the varied axis ------------------------------------------------------------
def axis_x(results: Results, axis: int = 0) -> tuple[list, str]:
    """(the x values, the axis type) of axis number ``axis``: log when its values are numbers > 0,
    linear when numbers with a zero or negative, else categorical (the labels)."""
    ax = results.experiment.axes[axis]
    numeric = ax.numeric
    if numeric is not None:
        return list(numeric), "log" if all(v > 0 for v in numeric) else "linear"
    return list(ax.labels), "category"


def axis_figure(results: Results, metric: str = "suboptimality", *, axis: int = 0) -> go.Figure:
    """The final ``metric`` against axis ``axis``: one line per algorithm, the median over seeds with
    min–max error bars.  With two axes the other one makes the facets; with none, the one setting.

    "Never reached" (rounds to ε of ∞) is left out of the line and said in the hover text.
    """
    exp = results.experiment
    if metric not in METRICS and metric not in pernode_metrics.KEYS:
        from ..errors import ParameterError

        raise ParameterError("metric", metric, "one of " + ", ".join(METRICS) + ", or a per-node summary ("
                             + ", ".join(pernode_metrics.KEYS[:3]) + ", …: fedviz.problems.metrics.KEYS)")
    looks = arm_styles(results)
    if not exp.axes:
        xs, xtype, other = ["base"], "category", [None]
        fig, rows, cols = _facets(["base"], cols=1)
    else:
        if axis not in range(len(exp.axes)):
            from ..errors import ParameterError

            raise ParameterError("axis", axis, f"0 … {len(exp.axes) - 1}")
        xs, xtype = axis_x(results, axis)
        other_axis = 1 - axis if len(exp.axes) == 2 else None
        other = list(range(len(exp.axes[other_axis].values))) if other_axis is not None else [None]
        titles = ([f"{exp.axes[other_axis].name} = {lab}" for lab in exp.axes[other_axis].labels]
                  if other_axis is not None else [""])
        fig, rows, cols = _facets(titles[:MAX_FACETS], cols=min(3, len(titles)))
    ys = []
    for k, j in enumerate(other[:MAX_FACETS]):
        r, c = k // cols + 1, k % cols + 1
        for arm in results.arms:
            med, plus, minus, hover = [], [], [], []
            for i in range(len(xs)):
                setting = _setting_of(exp, axis, i, j)
                step = results.best_step(arm, setting)
                sm = results.summary(arm, setting, metric, step=step)
                if sm is None:
                    med.append(math.nan), plus.append(math.nan), minus.append(math.nan)
                    hover.append("no result")
                    continue
                m, lo, hi = (_finite_or_nan(v) for v in (sm.median, sm.low, sm.high))
                med.append(m)
                plus.append(hi - m if math.isfinite(hi) and math.isfinite(m) else math.nan)
                minus.append(m - lo if math.isfinite(lo) and math.isfinite(m) else math.nan)
                never = "" if metric != "rounds" or math.isfinite(sm.high) else " · some seeds never reached ε"
                hover.append(f"median {sm.median:.3g}, min {sm.low:.3g}, max {sm.high:.3g} over {sm.n} "
                             f"seed{'s' * (sm.n > 1)}{_step_text(step)}{never}")
            ys += [np.array(med) - np.nan_to_num(minus), np.array(med) + np.nan_to_num(plus)]
            fig.add_trace(go.Scatter(
                x=xs, y=med, mode="lines+markers", name=arm, legendgroup=arm, showlegend=k == 0,
                line=looks[arm].line(), marker=dict(symbol=looks[arm].marker, size=8, color=looks[arm].color),
                error_y=dict(type="data", symmetric=False, array=plus, arrayminus=minus, thickness=1.2, width=4),
                text=hover, hovertemplate=f"{arm}<br>%{{x}}<br>%{{text}}<extra></extra>",
                meta={"arm": arm, "facet": j}), row=r, col=c)
    if metric == "rounds" and not any(np.isfinite(y).any() for y in ys):
        fig.add_annotation(x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False, font=dict(size=14),
                           text=f"no line reached f − f* ≤ {exp.target:g} in any setting")
    fig.update_xaxes(type=xtype)
    fig.update_xaxes(title_text=exp.axes[axis].name if exp.axes else "setting", row=rows)
    if metric == "suboptimality":
        fig.update_yaxes(**log_axis([np.maximum(y, FLOOR) for y in ys]))
    elif metric == "test_error":
        fig.update_yaxes(tickformat=".0%")
    fig.update_yaxes(title_text=_metric_title(metric, results), col=1)
    fig.update_layout(title=f"{_metric_title(metric, results)}: median over seeds, bars min–max")
    return fig


def _setting_of(exp, axis: int, i: int, j: int | None) -> tuple[int, ...]:
    if not exp.axes:
        return ()
    if j is None:
        return (i,)
    return (i, j) if axis == 0 else (j, i)


# -- heatmap ------------------------------------------------------------------------------------------
def heatmap_values(results: Results, metric: str = "suboptimality") -> np.ndarray:
    """The median final ``metric`` per line (rows) and setting (columns), NaN where none."""
    z = np.full((len(results.arms), len(results.settings)), np.nan)
    for a, arm in enumerate(results.arms):
        for s, setting in enumerate(results.settings):
            sm = results.summary(arm, setting, metric)
            if sm is not None and math.isfinite(sm.median):
                z[a, s] = sm.median
    return z


def heatmap_figure(results: Results, metric: str = "suboptimality") -> go.Figure:
    """Algorithm × setting, coloured by the median final ``metric`` (log₁₀ colour for f − f*, whose
    values span decades); each cell's text is the value itself."""
    z = heatmap_values(results, metric)
    labels = [results.setting_label(s) for s in results.settings]
    log = metric == "suboptimality"
    shown = np.log10(np.maximum(z, FLOOR)) if log else z
    text = [[("—" if not math.isfinite(v) else f"{v:.2e}" if log else f"{v:.3g}") for v in row] for row in z]
    colorbar = dict(title=dict(text="f − f*" if log else METRICS[metric], side="right"))
    if log and np.isfinite(shown).any():
        lo, hi = int(np.floor(np.nanmin(shown))), int(np.ceil(np.nanmax(shown)))
        ks = list(range(lo, hi + 1, max(1, -(-(hi - lo) // 6))))
        colorbar.update(tickvals=ks, ticktext=[decade_text(k) for k in ks])
        span = dict(zmin=lo, zmax=max(hi, lo + 1))  # whole decades, so that the colour bar has labels
    else:
        span = {}
    fig = go.Figure(go.Heatmap(z=shown, **span, x=labels, y=list(results.arms), text=text, texttemplate="%{text}",
                               hovertemplate="%{y}<br>%{x}<br>%{text}<extra></extra>", colorscale="Viridis",
                               colorbar=colorbar, xgap=2, ygap=2))
    fig.update_layout(title=f"{_metric_title(metric, results)}: median over seeds", height=max(260, 120 + 50 *
                      len(results.arms)), margin=dict(l=60, r=20, t=50, b=40))
    fig.update_xaxes(type="category", title_text="setting")
    fig.update_yaxes(type="category", autorange="reversed")
    return fig


# -- stepsize sensitivity -----------------------------------------------------------------------------
def grid_arms(results: Results) -> list[str]:
    """The lines with a stepsize grid (grid values or factors)."""
    return [a.label for a in results.experiment.arms if a.step in ("grid", "scales")]


def sensitivity_figure(results: Results, settings: Sequence[Sequence[int]] | None = None, *,
                       metric: str = "suboptimality") -> go.Figure:
    """Final ``metric`` against each grid value, one line per grid line, one facet per setting
    (log–log): how sharply the result depends on the stepsize the paper chose "retrospectively"
    (Section 4.1).  Median over seeds, bars min–max; the best value is ringed."""
    arms = grid_arms(results)
    chosen = _settings(results, settings)
    fig, rows, cols = _facets([results.setting_label(s) for s in chosen] or ["no settings"])
    looks = arm_styles(results)
    colors = {arm: st.color for arm, st in looks.items()}
    xs_all, ys = [], []
    for k, setting in enumerate(chosen):
        r, c = k // cols + 1, k % cols + 1
        for arm in arms:
            pts = results.sensitivity(arm, setting, metric)
            if not pts:
                continue
            x = [s for s, _ in pts]
            med = np.array([_finite_or_nan(sm.median) for _, sm in pts])
            lo = np.array([_finite_or_nan(sm.low) for _, sm in pts])
            hi = np.array([_finite_or_nan(sm.high) for _, sm in pts])
            xs_all.append(np.array(x, dtype=float))
            ys += [lo, hi]
            fig.add_trace(go.Scatter(
                x=x, y=med, mode="lines+markers", name=arm, legendgroup=arm, showlegend=k == 0,
                line=looks[arm].line(), marker=dict(symbol=looks[arm].marker, size=8, color=colors[arm]),
                error_y=dict(type="data", symmetric=False, array=hi - med, arrayminus=med - lo, thickness=1.2),
                meta={"arm": arm, "setting": list(setting)},
                hovertemplate=f"{arm}<br>grid value %{{x:g}}<br>median %{{y:.3g}}<extra></extra>"), row=r, col=c)
            best = results.best_step(arm, setting)
            if best is not None and best in x:
                fig.add_trace(go.Scatter(x=[best], y=[med[x.index(best)]], mode="markers", showlegend=False,
                                         marker=dict(size=16, color="rgba(0,0,0,0)",
                                                     line=dict(color=colors[arm], width=2)),
                                         hoverinfo="skip", meta={"arm": arm, "best": best}), row=r, col=c)
    if not arms:
        fig.add_annotation(x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
                           text="no line with a stepsize grid (step = grid or scales)")
    fig.update_xaxes(**log_axis(xs_all, max_ticks=6))
    fig.update_xaxes(title_text="grid value (× default for scales)", row=rows)
    if metric == "suboptimality":
        fig.update_yaxes(**log_axis([np.maximum(y, FLOOR) for y in ys]))
    fig.update_yaxes(title_text=_metric_title(metric, results), col=1)
    fig.update_layout(title="Stepsize sensitivity: median over seeds, bars min–max, best value ringed")
    return fig


# -- chosen stepsizes -------------------------------------------------------------------------------
def tuned_rows(results: Results) -> list[dict]:
    """One row per tuned cell (the stepsize tuning chose) and per grid line and setting (the best
    grid value): what each cell ran with."""
    exp = results.experiment
    params = {a.label: a.param for a in exp.arms}
    rows = []
    for c in sorted(results.tuned(), key=lambda c: (c.setting, results.arms.index(c.arm), c.seed)):
        rows.append({"setting": results.setting_label(c.setting), "line": c.arm, "how": "tuned",
                     "seed": str(c.seed), "parameter": params.get(c.arm) or "", "value": c.stepsize,
                     "final f − f*": c.suboptimality})
    for arm in grid_arms(results):
        mode = next(a.step for a in exp.arms if a.label == arm)
        for setting in results.settings:
            best = results.best_step(arm, setting)
            cells = sorted(results.of(arm, setting, best), key=lambda c: c.seed) if best is not None else []
            if not cells:
                continue
            how = "best of grid" if mode == "grid" else f"best factor ×{best:g}"
            values = {c.stepsize for c in cells}
            if len(values) == 1:  # a grid value: the same in every seed
                sm = results.summary(arm, setting, "suboptimality", step=best)
                rows.append({"setting": results.setting_label(setting), "line": arm, "how": how, "seed": "all",
                             "parameter": params.get(arm) or "", "value": cells[0].stepsize,
                             "final f − f*": sm.median if sm else math.nan})
            else:  # a factor × a default derived from each seed's data: one value per seed
                rows += [{"setting": results.setting_label(setting), "line": arm, "how": how, "seed": str(c.seed),
                          "parameter": params.get(arm) or "", "value": c.stepsize, "final f − f*": c.suboptimality}
                         for c in cells]
    return rows


def tuned_figure(results: Results) -> go.Figure:
    """Each tuned cell's chosen stepsize (a dot per seed) and each grid line's best value (a ring),
    per setting, on a log axis: whether the best stepsize moves with the setting."""
    rows = tuned_rows(results)
    colors = arm_colors(results)
    fig = go.Figure()
    labels = [results.setting_label(s) for s in results.settings]
    ys = []
    for arm in results.arms:
        for how, symbol in (("tuned", "circle"), ("best", "circle-open")):
            pts = [r for r in rows if r["line"] == arm and r["how"].startswith(how) and r["value"] is not None]
            if not pts:
                continue
            y = [float(r["value"]) for r in pts]
            ys.append(np.array(y))
            fig.add_trace(go.Scatter(
                x=[r["setting"] for r in pts], y=y, mode="markers", name=f"{arm} ({how})",
                marker=dict(symbol=symbol, size=10 if how == "tuned" else 14, color=colors[arm],
                            line=dict(width=2, color=colors[arm])),
                text=[f"seed {r['seed']}" for r in pts], meta={"arm": arm, "how": how},
                hovertemplate=f"{arm}<br>%{{x}}<br>%{{text}}: %{{y:.3g}}<extra></extra>"))
    if not ys:
        fig.add_annotation(x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
                           text="no tuned line and no stepsize grid in this experiment")
    else:
        fig.update_yaxes(**log_axis(ys, max_ticks=6))
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=labels, title_text="setting")
    fig.update_layout(title="Chosen stepsize per setting (dots: tuned, one per seed; rings: best grid value)",
                      yaxis_title="value", height=380, **_LAYOUT)
    return fig


# -- the running experiment ---------------------------------------------------------------------------
def progress(snapshot) -> tuple[float, str]:
    """(fraction of cells complete, a sentence) of a live snapshot: reused + stored of total."""
    total = max(1, snapshot.total)
    done = snapshot.reused + snapshot.stored
    parts = [f"{done} of {snapshot.total} cells"]
    if snapshot.reused:
        parts.append(f"{snapshot.reused} reused")
    if snapshot.failed:
        parts.append(f"{snapshot.failed} failed or diverged")
    if getattr(snapshot, "stopped", 0):
        parts.append(f"{snapshot.stopped} stopped (run again on resume)")
    if snapshot.running:
        parts.append(f"{len(snapshot.running)} running")
    if snapshot.queued:
        parts.append(f"{snapshot.queued} queued")
    # The elapsed time while it runs (a finished snapshot's clock keeps counting in the driver).
    clock = "" if getattr(snapshot, "finished", False) else f" · {snapshot.seconds:.0f} s"
    return min(1.0, done / total), " · ".join(parts) + f" · {snapshot.status}{clock}"


def live_figure(snapshot, recent=(), *, setting_label=None, height: int = 360) -> go.Figure:
    """f − f* of every running cell so far (log axis), one curve per cell; ``recent`` (cells seen
    running earlier, as :class:`~fedviz.experiments.driver.CellProgress`) are drawn thin and dotted,
    so that a grid of short cells does not leave the chart empty between two cells.  ``setting_label``
    names a setting (:meth:`Experiment.setting_label`; default: its value indices)."""
    fig = go.Figure()
    ys = []
    running = {c.key for c in snapshot.running}
    ended = [c for c in recent if c.key not in running and c.records]
    for i, cell in enumerate([*ended, *snapshot.running]):
        it = [r.iteration for r in cell.records]
        y = _positive([r.suboptimality for r in cell.records])
        ys.append(y)
        live = cell.key in running
        where = (setting_label(cell.setting) if setting_label
                 else f"setting {','.join(map(str, cell.setting)) or 'base'}")
        name = f"{cell.label} · {where} · seed {cell.seed}" + ("" if live else " (ended)")
        color = _PALETTE[i % len(_PALETTE)]
        fig.add_trace(go.Scatter(x=it, y=y, mode="lines+markers" if live else "lines", name=name,
                                 line=dict(color=color, width=2 if live else 1, dash="solid" if live else "dot"),
                                 marker=dict(size=5), opacity=1.0 if live else 0.6, meta={"key": cell.key,
                                                                                           "live": live}))
    fig.update_layout(title="Cells: f(w) − f* (solid: running; dotted: ended)", xaxis_title="iterations",
                      yaxis_title="f(w) − f*", height=height, **_LAYOUT)
    fig.update_yaxes(**log_axis(ys))
    return fig


# -- the standalone report ----------------------------------------------------------------------------
def figures(results: Results) -> dict[str, go.Figure]:
    """Every view of ``results`` by name (the page's tabs and the report's sections)."""
    out = {"curves": band_figure(results)}
    if results.experiment.dissimilarity:
        out["loss, f − f* and dissimilarity (FedProx's Figure 2)"] = protocol_figure(results)
    if results.experiment.axes:
        out["final vs axis"] = axis_figure(results, "suboptimality")
        out["test error vs axis"] = axis_figure(results, "test_error")
        out["rounds to ε vs axis"] = axis_figure(results, "rounds")
    out["heatmap"] = heatmap_figure(results)
    if grid_arms(results):
        out["stepsize sensitivity"] = sensitivity_figure(results)
    if tuned_rows(results):
        out["chosen stepsizes"] = tuned_figure(results)
    return out


def report_html(results: Results, verdict=None) -> str:
    """One standalone HTML document: the experiment, the verdict, every figure and a table of cells.

    plotly.js is inlined once (about 4.6 MB), as the Compare page's figure export does: the
    report is a record of an experiment, and must open offline and years later, when a CDN
    link may be gone.  Each figure is a ``<div>`` with its own id (``fig-<name>``).
    """
    exp = results.experiment
    parts = []
    for k, (name, fig) in enumerate(figures(results).items()):
        div = fig.to_html(include_plotlyjs=(k == 0), full_html=False, div_id=f"fig-{_slug(name)}",
                          config={"displaylogo": False})
        parts.append(f"<section><h2>{html.escape(name)}</h2>{div}</section>")
    if verdict is not None:
        held = getattr(verdict, "held", None)
        word = {True: "held", False: "did not hold", None: "inconclusive"}.get(held, "inconclusive")
        color = {True: "#1a7f37", False: "#cf222e"}.get(held, "#9a6700")
        text = str(getattr(verdict, "text", "")) or f"The claim {word}."
        lines = list(verdict.lines()) if callable(getattr(verdict, "lines", None)) else []
        items = "".join(f"<li>{html.escape(str(line))}</li>" for line in lines)
        verdict_html = (f'<div class="verdict" style="border-color:{color}"><b style="color:{color}">'
                        f'{html.escape(text)}</b>{"<ul>" + items + "</ul>" if items else ""}</div>')
    else:
        verdict_html = ""
    rows = results.rows()
    head = "".join(f"<th>{html.escape(str(k))}</th>" for k in (rows[0] if rows else ()))
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell_text(v))}</td>" for v in r.values()) + "</tr>"
                   for r in rows)
    axes = "; ".join(f"{a.name}: {', '.join(a.labels)}" for a in exp.axes) or "none"
    arms = ", ".join(f"{a.label} ({a.step}" + (f" {', '.join(f'{v:g}' for v in a.values)}" if a.values else "") + ")"
                     for a in exp.arms)
    meta = (f"<p><b>Data</b> {html.escape(str(exp.data.source if isinstance(exp.data.source, str) else 'upload'))}"
            f"{' · partition ' + html.escape(exp.data.partition) if exp.data.partition else ''} · "
            f"<b>loss</b> {html.escape(exp.loss)} · <b>λ</b> {exp.lam if exp.lam is not None else '1/n'} · "
            f"<b>iterations</b> {exp.iterations} · <b>seeds</b> {', '.join(map(str, exp.seeds))} · "
            f"<b>ε</b> {exp.target:g}</p><p><b>Lines</b> {html.escape(arms)}</p>"
            f"<p><b>Axes</b> {html.escape(axes)}</p><p><b>Status</b> {html.escape(results.info.status)}"
            f"{' — ' + html.escape(results.info.message) if results.info.message else ''} · "
            f"{len(results.cells)} of {exp.size} cells stored</p>")
    claim = f"<p><b>Claim</b> {html.escape(exp.claim)}</p>" if exp.claim else ""
    if len(results.settings) > MAX_FACETS:  # the facets stop there; the other views and the table hold all
        meta += (f"<p>The curves and the stepsize sensitivity show the first {MAX_FACETS} of "
                 f"{len(results.settings)} settings.</p>")
    desc = f"<p>{html.escape(exp.description)}</p>" if exp.description else ""
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>fedviz experiment {html.escape(exp.name)}</title><style>{_CSS}</style></head><body>"
            f"<h1>Experiment {html.escape(exp.name)}</h1>{desc}{claim}{verdict_html}{meta}"
            f"{''.join(parts)}<section><h2>Cells</h2><div class=\"cells\"><table>"
            f"{'<tr>' + head + '</tr>' if head else ''}{body}</table></div></section><footer>fedviz — Konečný, McMahan, Ramage, Richtárik (2016), Federated "
            f"Optimization, Section 4.</footer></body></html>\n")


_CSS = ("body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}"
        # The cells' table scrolls in its own box: twenty-odd columns ran off the page (issue 31, point 8).
        ".cells{overflow-x:auto;max-width:100%}"
        "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;"
        "white-space:nowrap}th{position:sticky;top:0;background:#f6f8fa}"
        ".verdict{border:2px solid;padding:.6em 1em;margin:1em 0;border-radius:6px}"
        "footer{margin-top:2em;color:#777;font-size:12px}")


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in name.lower()).strip("-")


def _cell_text(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return "∞" if v == math.inf else f"{v:.6g}"
    return str(v)


__all__ = ["CURVES", "FLOOR", "LOG_CURVES", "MAX_FACETS", "PROTOCOL_ROWS", "arm_colors", "arm_styles", "axis_figure",
           "axis_x", "band_figure", "curve_choices", "figures", "protocol_figure",
           "grid_arms", "heatmap_figure", "heatmap_values", "live_figure", "progress", "report_html",
           "sensitivity_figure", "tuned_figure", "tuned_rows"]
