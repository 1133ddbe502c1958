"""PNG export with the project's own requirements (issue 19): matplotlib draws a Plotly figure when
no Chromium is there.  Oracles: the figure's own layout (the PNG's size), its traces' colours (found
in the pixels where the traces are), and Plotly's figure data, never the renderer's output."""

import sys

import numpy as np
import plotly.graph_objects as go
import pytest
from matplotlib.image import imread
from plotly.subplots import make_subplots

from fedviz.errors import FedvizError
from fedviz.plots import export
from fedviz.plots.export import draw_matplotlib, write_png


def _pixels(path) -> np.ndarray:
    return (imread(str(path))[..., :3] * 255).round().astype(int)


def _has(img: np.ndarray, hex_color: str, tol: int = 6) -> int:
    rgb = np.array([int(hex_color[i:i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(img - rgb).max(axis=-1) <= tol).sum())


def _figure():
    fig = make_subplots(rows=1, cols=2, subplot_titles=("left", "right"))
    x = np.arange(10)
    fig.add_trace(go.Scatter(x=x, y=10.0 ** -x, mode="lines", name="A", line=dict(color="#d62728", width=3)),
                  row=1, col=1)
    fig.add_trace(go.Scatter(x=x, y=10.0 ** (-x / 2), mode="lines", name="B", line=dict(color="#2ca02c", width=3)),
                  row=1, col=1)
    fig.add_trace(go.Scatter(x=["a", "b", "c"], y=[0.1, 0.3, 0.2], mode="lines+markers", name="C",
                             line=dict(color="#1f77b4"), error_y=dict(type="data", array=[0.05] * 3)), row=1, col=2)
    fig.update_yaxes(type="log", range=[-9.5, 0.5], row=1, col=1)
    fig.update_xaxes(type="category", row=1, col=2)
    fig.update_layout(width=640, height=300, title="t", template="plotly_white")
    return fig


def test_the_png_has_the_layouts_size_and_every_traces_colour_where_its_subplot_is(tmp_path):
    fig = _figure()
    draw_matplotlib(fig, tmp_path / "f.png")
    img = _pixels(tmp_path / "f.png")
    assert img.shape[:2] == (300, 640)
    width = img.shape[1]
    left, right = img[:, : width // 2], img[:, width // 2:]
    assert _has(left, "#d62728") > 50 and _has(left, "#2ca02c") > 50  # the two lines of the left subplot
    assert _has(right, "#1f77b4") > 50 and _has(left, "#1f77b4") == 0  # C only on the right


def test_a_log_axis_range_in_decades_is_honoured(tmp_path):
    """Plotly's log range is in decades: 10^-x for x = 0..9 spans 9 of the 13 decades of [-12, 1]
    (matplotlib's own autoscale would make it about 91 % of the height)."""
    fig = go.Figure(go.Scatter(x=np.arange(10), y=10.0 ** -np.arange(10), mode="lines", line=dict(color="#d62728")))
    fig.update_yaxes(type="log", range=[-12, 1])
    fig.update_layout(width=400, height=400, margin=dict(l=50, r=10, t=40, b=40), template="plotly_white")
    draw_matplotlib(fig, tmp_path / "f.png")
    rows = np.flatnonzero([_has(row[None], "#d62728", tol=40) for row in _pixels(tmp_path / "f.png")])
    plot_h = 400 - 40 - 40
    assert abs((rows.max() - rows.min()) - 9 / 13 * plot_h) < 0.03 * plot_h, (rows.min(), rows.max())
    assert abs(rows.min() - 40 - 1 / 13 * plot_h) < 0.03 * plot_h, "the top decade, 10^0, sits 1/13 below the top"


def test_an_unsupported_trace_is_an_error_naming_it(tmp_path):
    fig = go.Figure(go.Heatmap(z=[[1, 2], [3, 4]]))
    with pytest.raises(FedvizError, match="heatmap"):
        draw_matplotlib(fig, tmp_path / "f.png")


def test_without_playwright_write_png_draws_with_matplotlib(tmp_path, monkeypatch):
    """A machine with only requirements.txt: playwright cannot be imported."""
    monkeypatch.setitem(sys.modules, "playwright", None)
    monkeypatch.setitem(sys.modules, "playwright.sync_api", None)
    assert not export.chromium_available()
    assert write_png(_figure(), tmp_path / "f.png") == "matplotlib"
    assert _pixels(tmp_path / "f.png").shape[:2] == (300, 640)


def test_experiment_out_writes_both_figures_without_playwright(tmp_path, monkeypatch, capsys):
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from test_experiment_plots import _experiment, _stored

    from fedviz.cli.experiment import _write
    from fedviz.plots.experiments import arm_colors

    monkeypatch.setitem(sys.modules, "playwright", None)
    monkeypatch.setitem(sys.modules, "playwright.sync_api", None)
    results, _ = _stored(_experiment())
    _write(results, None, tmp_path)
    err = capsys.readouterr().err
    assert "curves.png" in err and "final.png" in err and "(PNGs drawn with matplotlib)" in err
    for name in ("curves.png", "final.png"):
        img = _pixels(tmp_path / name)
        for arm, color in arm_colors(results).items():
            assert _has(img, color) > 20, (name, arm, color)


def test_an_unknown_engine_is_refused(tmp_path):
    with pytest.raises(FedvizError, match="engine"):
        write_png(_figure(), tmp_path / "f.png", engine="kaleido")


def test_every_run_style_is_drawn_apart_without_chromium():
    """run_styles tells runs apart by dash and marker too (issue 20): the matplotlib export must draw
    each of its dashes and markers as a different line style and marker, not fall back to one."""
    from fedviz.plots.styles import DASHES, MARKERS

    dashes = [export._DASH[d] for d in DASHES]
    assert len({repr(d) for d in dashes}) == len(DASHES), dashes
    markers = [export._SYMBOLS[m] for m in MARKERS]
    assert len(set(markers)) == len(MARKERS), markers
