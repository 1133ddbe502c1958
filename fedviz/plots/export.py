"""Static PNG export of a Plotly figure, with fedviz's own requirements.

Two renderers, the first that this machine has:

* **Chromium** (Debian's ``chromium`` driven by Playwright, both there for the browser tests): the
  standalone HTML rendered exactly as a page shows it;
* **matplotlib** (in ``requirements.txt``), :func:`draw_matplotlib`: the figure's traces, axes,
  shapes, annotations and legend drawn again from the Plotly figure's own data, with no browser.

Why not Plotly's own ``write_image``: Plotly 6.1+ accepts only kaleido ≥ 1, which drives a Chrome
that it downloads (``kaleido.get_chrome``) or finds installed, so a machine with nothing but
``pip install -r requirements.txt`` cannot export; matplotlib's wheels carry their fonts and
rasteriser, so ``fedviz experiment --out`` and ``fedviz figure2 --out X.png`` write their PNGs on
such a machine too.
"""

from __future__ import annotations

import math
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np

from ..errors import FedvizError

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic",
                 "--no-first-run", "--disable-component-update", "--disable-sync"]
#: The renderers :func:`write_png` chooses from, in order ("auto": the first available).
ENGINES = ("chromium", "matplotlib")


def chromium_available() -> bool:
    """True when Playwright and a Chromium binary are both installed."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return _chromium() is not None


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def write_png(fig, path: str | Path, *, scale: float = 1.0, engine: str = "auto") -> str:
    """Render ``fig`` at its layout width × height and save a PNG; returns the engine used.

    ``engine``: "chromium", "matplotlib", or "auto" (Chromium when Playwright and Chromium are
    installed, else matplotlib).
    """
    if engine not in ("auto", *ENGINES):
        from ..errors import ParameterError

        raise ParameterError("engine", engine, "auto, chromium or matplotlib")
    if engine == "auto":
        engine = "chromium" if chromium_available() else "matplotlib"
    if engine == "chromium":
        _write_chromium(fig, path, scale)
    else:
        draw_matplotlib(fig, path, scale=scale)
    return engine


def _write_chromium(fig, path, scale: float) -> None:
    chromium = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise FedvizError("PNG export through Chromium needs playwright (pip install playwright)") from None
    if chromium is None:
        raise FedvizError("PNG export through Chromium needs Chromium (apt-get install chromium)")
    width = int(fig.layout.width or 1100)
    height = int(fig.layout.height or 450)
    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "figure.html"
        # Inline plotly.js: the page must render with no network.
        fig.write_html(str(html), include_plotlyjs=True, full_html=True, config={"staticPlot": True})
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=scale)
            page.goto(html.as_uri())
            page.wait_for_selector(".main-svg")
            page.locator(".js-plotly-plot").first.screenshot(path=str(path))
            browser.close()


# -- matplotlib ---------------------------------------------------------------------------------------------
DPI = 100
PT = 72 / DPI  # Plotly sizes are pixels; matplotlib's are points
# Every dash of fedviz.plots.styles.DASHES drawn apart (a long dash is not a dash: two runs would look alike).
_DASH = {"solid": "-", None: "-", "dot": ":", "dash": "--", "dashdot": "-.", "longdash": (0, (9, 3)),
         "longdashdot": (0, (9, 3, 2, 3))}
_SUP = str.maketrans("0123456789−-+=()nijk", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁻⁺⁼⁽⁾ⁿⁱʲᵏ")
_SUB = str.maketrans("0123456789−-+=()", "₀₁₂₃₄₅₆₇₈₉₋₋₊₌₍₎")
# Every marker of fedviz.plots.styles.MARKERS, each its own matplotlib marker.
_SYMBOLS = {"circle": "o", "diamond": "D", "square": "s", "triangle-up": "^", "triangle-down": "v", "star": "*",
            "x": "x", "cross": "P", "pentagon": "p", "hexagon": "h", "triangle-left": "<", "triangle-right": ">"}
_PLOTLY_COLORS = ["#636efa", "#EF553B", "#00cc96", "#ab63fa", "#FFA15A", "#19d3f3", "#FF6692", "#B6E880"]


def _text(s) -> str:
    """Plotly's HTML-ish text as plain text: <br> a new line, <sup>/<sub> as Unicode, other tags dropped."""
    if s is None:
        return ""
    s = str(s)
    s = re.sub(r"<br\s*/?>", "\n", s, flags=re.I)
    s = re.sub(r"<sup>(.*?)</sup>", lambda m: m.group(1).translate(_SUP), s, flags=re.I | re.S)
    s = re.sub(r"<sub>(.*?)</sub>", lambda m: m.group(1).translate(_SUB), s, flags=re.I | re.S)
    s = re.sub(r"<[^>]+>", "", s)
    return s.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">").replace("$", r"\$")


def _color(c, default="#444444"):
    """A Plotly colour ('#rrggbb', 'rgb(...)', 'rgba(...)', a CSS name) as matplotlib takes it."""
    if c is None:
        return default
    if isinstance(c, str):
        m = re.match(r"rgba?\(([^)]*)\)", c.replace(" ", ""))
        if m:
            parts = [float(v) for v in m.group(1).split(",")]
            rgb = [v / 255 for v in parts[:3]]
            return (*rgb, parts[3] if len(parts) > 3 else 1.0)
        return c
    return default


def _axis_key(ref: str, letter: str) -> str:
    """'x2' -> 'xaxis2', 'x' -> 'xaxis'."""
    return f"{letter}axis{ref[1:]}"


def _percent(fmt: str | None):
    m = re.fullmatch(r"\.(\d+)%", fmt or "")
    return int(m.group(1)) if m else None


def draw_matplotlib(fig, path: str | Path, *, scale: float = 1.0) -> None:
    """Draw the Plotly figure ``fig`` with matplotlib and save it as a PNG of its layout's size.

    Draws what fedviz's figures use: Scatter/Scattergl traces (lines, markers, ``fill='tonexty'``
    bands, ``error_y`` bars), Bar traces, linear, log (``range`` in decades) and category axes with
    their tick values, texts and percent formats, subplots placed by their domains, line shapes,
    annotations (subplot titles), the title and the legend.  Another trace type is a
    :class:`~fedviz.errors.FedvizError` naming it, never a silently missing line.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, PercentFormatter

    layout = fig.layout
    width, height = int(layout.width or 1100), int(layout.height or 450)
    m = layout.margin
    ml, mr, mt, mb = (80 if v is None else v for v in (m.l, m.r, m.t, m.b))
    mt = 100 if m.t is None else m.t
    lg = layout.legend
    shown = layout.showlegend is not False and any(tr.showlegend is not False and tr.name for tr in fig.data)
    # A legend at the foot of the figure (yref "container"): its room is already in the bottom margin.
    footer = shown and lg.orientation == "h" and lg.yref == "container"
    below = footer or (shown and lg.orientation == "h" and lg.y is not None and lg.y < 0)
    if below and not footer:  # Plotly grows the bottom margin for a legend under the plot (automargin): so does this
        mb += 36
    plot_w, plot_h = max(1.0, width - ml - mr), max(1.0, height - mt - mb)
    mfig = Figure(figsize=(width / DPI, height / DPI), dpi=DPI * scale)
    FigureCanvasAgg(mfig)
    mfig.patch.set_facecolor("white")

    def paper(x: float, y: float) -> tuple[float, float]:
        """Plotly's paper coordinates (the plot area) as matplotlib's figure fraction."""
        return (ml + x * plot_w) / width, (mb + y * plot_h) / height

    # The subplots: every (x, y) pair a trace uses, or the layout's only axes.
    pairs = []
    for tr in fig.data:
        pair = (getattr(tr, "xaxis", None) or "x", getattr(tr, "yaxis", None) or "y")
        if pair not in pairs:
            pairs.append(pair)
    for key in layout.to_plotly_json():
        if key.startswith("xaxis"):
            xref = "x" + key[5:]
            anchor = layout[key].anchor
            yref = anchor if anchor and anchor.startswith("y") else "y" + key[5:]
            if (xref, yref) not in pairs:
                pairs.append((xref, yref))
    if not pairs:
        pairs = [("x", "y")]
    template = layout.template.layout if layout.template is not None else None

    def themed(name: str, default: str) -> str:
        value = getattr(layout, name, None) or (getattr(template, name, None) if template is not None else None)
        return value or default

    background = themed("plot_bgcolor", "#E5ECF6")
    grid = (layout.xaxis.gridcolor or (template.xaxis.gridcolor if template is not None else None) or "white")
    font = _color(layout.font.color or (template.font.color if template is not None else None), "#2a3f5f")
    axes, categories = {}, {}
    for xref, yref in pairs:
        xa, ya = layout[_axis_key(xref, "x")], layout[_axis_key(yref, "y")]
        x0, x1 = xa.domain or (0, 1)
        y0, y1 = ya.domain or (0, 1)
        (fx0, fy0), (fx1, fy1) = paper(x0, y0), paper(x1, y1)
        ax = mfig.add_axes((fx0, fy0, fx1 - fx0, fy1 - fy0))
        ax.set_facecolor(_color(background))
        ax.grid(True, color=_color(grid), linewidth=1)
        ax.set_axisbelow(True)
        for spine in ax.spines.values():
            spine.set_visible(False)
        ax.tick_params(which="both", length=0, labelsize=12 * PT, colors=font)
        axes[(xref, yref)] = ax
        categories[(xref, yref)] = {}

    def cat(pair, values):
        """Category x values as positions 0, 1, … in order of first appearance."""
        table = categories[pair]
        out = []
        for v in values:
            table.setdefault(str(v), len(table))
            out.append(table[str(v)])
        return np.asarray(out, dtype=float)

    legend: dict[str, Line2D] = {}
    previous: dict[tuple, tuple] = {}
    for i, tr in enumerate(fig.data):
        pair = (tr.xaxis or "x", tr.yaxis or "y")
        ax = axes[pair]
        if tr.visible in (False, "legendonly"):
            continue
        if tr.type not in ("scatter", "scattergl", "bar"):
            raise FedvizError(f"PNG export without Chromium cannot draw a {tr.type} trace; "
                              "write .html, or install playwright and chromium")
        xa = layout[_axis_key(pair[0], "x")]
        x = np.asarray(tr.x if tr.x is not None else np.arange(len(tr.y)), dtype=object)
        x = cat(pair, x) if xa.type == "category" else np.asarray(x, dtype=float)
        y = np.asarray(tr.y if tr.y is not None else [], dtype=float)
        color_default = _PLOTLY_COLORS[i % len(_PLOTLY_COLORS)]
        if tr.type in ("scatter", "scattergl"):
            mode = tr.mode or "lines"
            color = _color(tr.line.color or (tr.marker.color if isinstance(tr.marker.color, str) else None),
                           color_default)
            lw = 0 if tr.line.width == 0 else (tr.line.width or 2) * PT
            style = _DASH.get(tr.line.dash, "-")
            symbol = tr.marker.symbol if isinstance(tr.marker.symbol, str) else "circle"
            marker = _SYMBOLS.get(symbol.replace("-open", ""), "o") if "markers" in mode else None
            ms = (tr.marker.size or 6) * PT if isinstance(tr.marker.size, (int, float, type(None))) else 4
            if tr.fill in ("tonexty", "tozeroy"):
                base = previous.get(pair) if tr.fill == "tonexty" else (x, np.zeros_like(y))
                if base is not None and len(base[1]) == len(y):
                    ax.fill_between(x, base[1], y, color=_color(tr.fillcolor, color), linewidth=0)
            if "lines" in mode and lw > 0:
                ax.plot(x, y, color=color, linewidth=lw, linestyle=style, marker=marker, markersize=ms)
            elif marker:
                ax.plot(x, y, linestyle="none", color=color, marker=marker, markersize=ms)
            err = tr.error_y
            if err is not None and err.array is not None and err.visible is not False:
                plus = np.asarray(err.array, dtype=float)
                minus = np.asarray(err.arrayminus if err.arrayminus is not None else err.array, dtype=float)
                ax.errorbar(x, y, yerr=np.vstack([np.nan_to_num(minus), np.nan_to_num(plus)]), fmt="none",
                            ecolor=color, elinewidth=(err.thickness or 1.5) * PT,
                            capsize=(err.width if err.width is not None else 4) * PT)
            previous[pair] = (x, y)
            handle = Line2D([], [], color=color, linewidth=lw or 1, linestyle=style, marker=marker, markersize=ms)
        else:  # a bar
            color = _color(tr.marker.color if isinstance(tr.marker.color, str) else None, color_default)
            w = np.asarray(tr.width, dtype=float) if tr.width is not None else 0.8
            ax.bar(x, y, width=w, color=color, linewidth=0)
            handle = Line2D([], [], color=color, linewidth=6)
        if tr.showlegend is not False and tr.name and tr.name not in legend:
            legend[_text(tr.name)] = handle

    for (xref, yref), ax in axes.items():
        for letter, a in (("x", layout[_axis_key(xref, "x")]), ("y", layout[_axis_key(yref, "y")])):
            getattr(ax, f"set_{letter}scale")("log" if a.type == "log" else "linear")
            lim = getattr(ax, f"set_{letter}lim")
            if a.range is not None and None not in a.range:
                r0, r1 = (float(v) for v in a.range)
                lim(*((10 ** r0, 10 ** r1) if a.type == "log" else (r0, r1)))
            axis = ax.xaxis if letter == "x" else ax.yaxis
            if a.type == "category":
                table = categories[(xref, yref)]
                axis.set_major_locator(FixedLocator(list(table.values())))
                axis.set_ticklabels([_text(k) for k in table])
                lim(-0.5, len(table) - 0.5)
            elif a.tickvals is not None:
                vals = [float(v) for v in a.tickvals]
                axis.set_major_locator(FixedLocator(vals))
                axis.set_minor_formatter(NullFormatter())
                if a.ticktext is not None:
                    axis.set_ticklabels([_text(t) for t in a.ticktext])
            if a.type == "log" and a.tickvals is None:
                lo, hi = sorted(v for v in (ax.get_xlim() if letter == "x" else ax.get_ylim()))
                if lo > 0 and math.log10(hi / lo) <= 2:  # a short log axis: Plotly labels 2, 3, 5 too
                    axis.set_major_locator(LogLocator(subs=tuple(range(1, 10))))
                    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
                axis.set_minor_formatter(NullFormatter())
            elif a.type == "log":
                axis.set_minor_formatter(NullFormatter())
            decimals = _percent(a.tickformat)
            if decimals is not None:
                axis.set_major_formatter(PercentFormatter(1.0, decimals=decimals))
            if a.showticklabels is False:
                axis.set_tick_params(labelbottom=False, labelleft=False)
            title = a.title.text if a.title is not None else None
            if title:
                (ax.set_xlabel if letter == "x" else ax.set_ylabel)(_text(title), fontsize=14 * PT, color=font)

    # Shapes: lines across a subplot (baselines), in data or domain coordinates.
    for shape in layout.shapes or ():
        if shape.type != "line":
            continue
        xref, yref = shape.xref or "x", shape.yref or "y"
        pair = (xref.split()[0].replace("paper", "x"), yref.split()[0].replace("paper", "y"))
        ax = axes.get(pair) or next(iter(axes.values()))
        tx = ax.transAxes if xref.endswith("domain") or xref == "paper" else ax.transData
        ty = ax.transAxes if yref.endswith("domain") or yref == "paper" else ax.transData
        from matplotlib.transforms import blended_transform_factory

        ax.add_line(Line2D([shape.x0, shape.x1], [shape.y0, shape.y1], transform=blended_transform_factory(tx, ty),
                           color=_color(shape.line.color), linestyle=_DASH.get(shape.line.dash, "-"),
                           linewidth=(shape.line.width or 2) * PT))

    # Annotations: subplot titles (paper coordinates) and notes inside a subplot (domain coordinates).
    for note in layout.annotations or ():
        text = _text(note.text)
        if not text:
            continue
        ha = {"left": "left", "right": "right"}.get(note.xanchor, "center")
        va = {"bottom": "bottom", "top": "top"}.get(note.yanchor, "center")
        size = ((note.font.size if note.font is not None else None) or 12) * PT
        xref, yref = note.xref or "x", note.yref or "y"
        if xref == "paper" and yref == "paper":
            fx, fy = paper(float(note.x or 0), float(note.y or 0))
            mfig.text(fx, fy, text, ha=ha, va=va, fontsize=size, color=font)
            continue
        pair = (xref.split()[0], yref.split()[0])
        ax = axes.get(pair) or next(iter(axes.values()))
        from matplotlib.transforms import blended_transform_factory

        tx = ax.transAxes if xref.endswith("domain") else ax.transData
        ty = ax.transAxes if yref.endswith("domain") else ax.transData
        ax.text(note.x or 0, note.y or 0, text, ha=ha, va=va, fontsize=size, color=font,
                transform=blended_transform_factory(tx, ty))

    title = layout.title.text if layout.title is not None else None
    if title:
        mfig.text(ml / width, 1 - 30 / height, _text(title), ha="left", va="center", fontsize=17 * PT, color=font)
    if legend and layout.showlegend is not False:
        horizontal = lg.orientation == "h"
        lx, ly = paper(float(lg.x if lg.x is not None else 1.02), float(lg.y if lg.y is not None else 1.0))
        if below:
            ly = 4 / height
        loc = ("lower" if lg.yanchor == "bottom" or below else "upper" if lg.yanchor in ("top", None) else "center")
        loc += " right" if lg.xanchor == "right" else " left"
        # A horizontal legend wraps as Plotly's does: as many entries to a row as the width holds.
        chars = max((len(k) for k in legend), default=1)
        per_row = max(1, int((width - ml - mr) // (46 + 7 * chars))) if horizontal else 1
        mfig.legend(list(legend.values()), list(legend), loc=loc, bbox_to_anchor=(lx, ly), frameon=False,
                    ncol=min(len(legend), per_row) if horizontal else 1, fontsize=12 * PT, handlelength=2.2,
                    labelcolor=font)
    mfig.savefig(str(path), dpi=DPI * scale, facecolor="white")


__all__ = ["CHROMIUM_ARGS", "ENGINES", "chromium_available", "draw_matplotlib", "write_png"]
