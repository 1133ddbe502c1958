"""Figures read cleanly: log axes labelled at powers of ten only, test-error axes that never
go below 0% or past 100% without data there, baselines of equal value under one label,
ω^j written in HTML, and "no test rows" instead of an empty −100%…400% axis.

The axis helpers are checked against hand-worked values; the figures as Chromium draws
them (tick texts and the boxes of the labels, read from the rendered SVG), since what a
reader sees is the browser's layout, not the figure's JSON.
"""

import math
import re

import numpy as np
import pytest

from fedviz import plots
from fedviz.plots import convergence_figure, feature_appearance_figure, node_size_figure
from fedviz.plots.figures import decade_text, error_range, log_axis

IT = np.arange(21)


def _run(sub, err, name="gd"):
    return {"iteration": IT, "rounds": IT, "vectors_up": IT, "vectors_down": IT, "seconds": 0.1 * IT,
            "suboptimality": np.asarray(sub, dtype=float), "test_error": np.asarray(err, dtype=float),
            "algorithm": np.array([name] * IT.size)}


# -- the helpers, against hand-worked values ---------------------------------------------------
def test_decade_text_hand_worked():
    """Counts are written out, small values as powers with a true minus sign (no '^', no '-')."""
    assert [decade_text(k) for k in (0, 1, 3, 4)] == ["1", "10", "1,000", "10,000"]
    assert decade_text(-3) == "10<sup>−3</sup>"
    assert decade_text(6) == "10<sup>6</sup>"


def test_log_axis_labels_powers_of_ten_only():
    """Data in [2e-5, 0.3]: the labels are exactly 10^-4 ... 10^-1, and the range holds the data."""
    ax = log_axis([[2e-5, 0.3, 1e-3]])
    assert ax["type"] == "log" and ax["tickmode"] == "array"
    assert ax["tickvals"] == [1e-4, 1e-3, 1e-2, 1e-1]
    assert ax["ticktext"] == ["10<sup>−4</sup>", "10<sup>−3</sup>", "10<sup>−2</sup>", "10<sup>−1</sup>"]
    lo, hi = ax["range"]
    assert lo < math.log10(2e-5) and hi > math.log10(0.3)


def test_log_axis_within_one_decade_still_shows_two_labels():
    """f − f* between 0.2 and 0.3 holds no power of ten: the axis widens to 0.1 … 1."""
    ax = log_axis([[0.2, 0.3]])
    assert ax["tickvals"] == [0.1, 1.0]
    lo, hi = ax["range"]
    assert lo <= -1 and hi >= 0


def test_log_axis_thins_labels_over_many_decades():
    """1e-16 … 1 is 16 decades: every second one is labelled (at most 8 + 1 labels)."""
    ax = log_axis([[1e-16, 1.0]])
    assert len(ax["tickvals"]) <= 9
    assert ax["tickvals"] == [10.0 ** k for k in range(-16, 1, 2)]


def test_log_axis_ignores_non_positive_and_non_finite_values():
    """5 … 50 holds one power of ten (10), so the axis widens to the enclosing 1 … 100."""
    ax = log_axis([[0.0, -1.0, np.nan, np.inf, 5.0, 50.0]])
    assert ax["tickvals"] == [1.0, 10.0, 100.0]
    assert ax["ticktext"] == ["1", "10", "100"]
    assert ax["range"][0] <= 0 and ax["range"][1] >= 2


def test_error_range_of_a_flat_series_stays_in_0_to_100_percent():
    """A constant 25% gets a band of ±1 point; a constant 0% starts at exactly 0%, and a
    constant 100% ends at exactly 100%."""
    assert error_range([np.full(10, 0.25)]) == pytest.approx([0.24, 0.26])
    assert error_range([np.zeros(10)]) == [0.0, pytest.approx(0.01)]
    assert error_range([np.ones(10)]) == [pytest.approx(0.99), 1.0]


def test_error_range_includes_baselines_and_goes_past_1_only_with_data_there():
    lo, hi = error_range([np.linspace(0.3, 0.26, 5)], {"optimum": 0.2, "majority": None})
    assert lo < 0.2 < 0.3 < hi <= 1
    # A mean squared error of 3: the axis follows the data past 1.
    lo, hi = error_range([np.array([3.0, 2.0])])
    assert lo < 2.0 and hi > 3.0


def test_error_range_of_no_finite_value_is_none():
    assert error_range([np.full(4, np.nan)]) is None
    assert error_range([]) is None


# -- the figures' content ----------------------------------------------------------------------
def _annotations(fig):
    return [a.text for a in fig.layout.annotations]


def test_no_test_rows_is_said_not_drawn_as_an_empty_axis():
    fig = plots.test_error_figure({"GD": _run(0.5 ** IT, np.full(IT.size, np.nan))})
    assert any("no test rows" in text for text in _annotations(fig))
    assert list(fig.layout.yaxis.range) == [0, 1]
    conv = convergence_figure({"GD": _run(0.5 ** IT, np.full(IT.size, np.nan))})
    assert any("no test rows" in text for text in _annotations(conv))


def test_a_run_with_test_rows_gets_no_such_note():
    fig = plots.test_error_figure({"GD": _run(0.5 ** IT, np.full(IT.size, 0.3))})
    assert not any("no test rows" in (text or "") for text in _annotations(fig))


def test_equal_baselines_share_one_label():
    """Majority and per-node majority of 32.87% both: one label naming both, one value."""
    fig = plots.test_error_figure({"GD": _run(0.5 ** IT, np.linspace(0.33, 0.27, IT.size))},
                            baselines={"optimum": 0.2638, "majority": 0.3287, "node_majority": 0.3287})
    texts = _annotations(fig)
    assert len(fig.layout.shapes) == 3  # every line is still drawn
    assert len(texts) == 2
    merged = [t for t in texts if "predict majority" in t]
    assert merged == ["predict majority = per-node majority 32.87%"]
    assert any(t.startswith("OPT") for t in texts)


def test_feature_appearance_figure_says_what_omega_is_in_html():
    """No literal '^' anywhere in the figure; ω^j written with <sup> and explained in words;
    the histogram counts every feature once."""
    omega = np.array([1, 1, 2, 3, 5, 8, 40, 40, 1])
    fig = feature_appearance_figure(omega, 40)
    texts = [a.text for a in fig.layout.annotations]
    texts += [fig.layout[k].title.text for k in fig.layout if k.startswith(("xaxis", "yaxis"))]
    assert not any("^" in (t or "") for t in texts)
    assert any("ω<sup>j</sup>" in t and "appears on" in t for t in texts if t)
    bars = [t for t in fig.data if t.type == "bar"][0]
    assert int(np.sum(bars.y)) == omega.size
    assert "^" not in fig.to_json()


def test_node_size_figure_writes_n_k_in_html():
    fig = node_size_figure(np.array([1, 3, 10, 200]))
    assert fig.layout.title.text == "Node sizes n<sub>k</sub>"
    assert fig.layout.xaxis.tickvals == (1.0, 10.0, 100.0)


# -- as Chromium draws them ------------------------------------------------------------------
# Plotly wraps <sup> in zero-width spaces: dropped, they are not what a reader sees.
_TICKS_JS = """sel => Array.from(document.querySelectorAll(sel)).map(e => e.textContent.replace(/\u200b/g, ''))"""
_BOXES_JS = """() => Array.from(document.querySelectorAll('g.annotation')).map(e => {
    const r = e.getBoundingClientRect(); return [e.textContent, r.left, r.top, r.right, r.bottom]; })"""


def _overlap(a, b) -> bool:
    return a[1] < b[3] and b[1] < a[3] and a[2] < b[4] and b[2] < a[4]


@pytest.fixture
def draw(browser, tmp_path):
    """Render a figure's standalone HTML (plotly.js inlined) in Chromium and query it."""
    page = browser.new_page(viewport={"width": 1100, "height": 500})

    def _draw(fig, name):
        path = tmp_path / f"{name}.html"
        fig.update_layout(width=1100, height=450)
        fig.write_html(str(path), include_plotlyjs=True, full_html=True)
        page.goto(path.as_uri())
        page.wait_for_selector(".main-svg")
        return page

    yield _draw
    page.close()


def test_drawn_axes_read_cleanly(draw):
    """In the browser: the log axis shows only powers of ten (no '2'/'5' minor labels, no
    '0.0001'), a flat test error shows no negative percentage and none above 100%, the
    no-test-rows note is drawn, and the labels of equal and near-equal baselines do not
    overlap."""
    runs = {"FSVRG": _run(0.3 * 0.5 ** IT, np.full(IT.size, 0.25), "fsvrg"),
            "GD": _run(0.3 * 0.9 ** IT, np.full(IT.size, 0.25))}
    base = {"optimum": 0.25, "majority": 0.3287, "node_majority": 0.3290}
    page = draw(convergence_figure(runs, baselines=base), "flat")
    sub_ticks = page.evaluate(_TICKS_JS, ".ytick text")  # the left subplot: f − f*
    err_ticks = page.evaluate(_TICKS_JS, ".y2tick text")  # the right one: test error
    power = re.compile(r"^(1|10|100|1,000|10,000|10−?\d+)$")
    assert sub_ticks and all(power.match(t) for t in sub_ticks), sub_ticks
    assert err_ticks and all(t.endswith("%") for t in err_ticks), err_ticks
    assert not any(t.startswith(("−", "-")) for t in err_ticks), err_ticks
    assert all(float(t.rstrip("%").replace("−", "-")) <= 100 for t in err_ticks), err_ticks
    boxes = page.evaluate(_BOXES_JS)
    labels = [b for b in boxes if "%" in b[0]]
    assert len(labels) == 2, labels  # OPT, and the two majorities in one label
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            assert not _overlap(a, b), (a, b)

    page = draw(plots.test_error_figure({"GD": _run(0.5 ** IT, np.full(IT.size, np.nan))}), "empty")
    ticks = page.evaluate(_TICKS_JS, ".ytick text")
    assert ticks and all(0 <= float(t.rstrip("%")) <= 100 for t in ticks), ticks
    assert any("no test rows" in b[0] for b in page.evaluate(_BOXES_JS))


# -- panels side by side on shared ranges (Compare › What-if) ------------------------------------
def test_panels_given_each_others_runs_have_the_same_ranges():
    """A on its own nodes, B reshuffled: drawn as two figures, each told of the other's runs
    (``also``), both get the y range that holds every curve of both, and the same x range."""
    a = {"GD": _run(0.3 * 0.9 ** IT, np.linspace(0.35, 0.30, IT.size))}
    b = {"GD": {**_run(0.3 * 0.5 ** IT, np.linspace(0.30, 0.20, IT.size)), "iteration": 2 * IT}}
    base_a, base_b = {"optimum": 0.28}, {"optimum": 0.18}
    for build, col in ((plots.suboptimality_figure, "suboptimality"), (plots.test_error_figure, "test_error")):
        kw_a = {"baselines": base_a} if col == "test_error" else {}
        kw_b = {"baselines": base_b} if col == "test_error" else {}
        fa = build(a, also=[(b, 1, base_b)], **kw_a)
        fb = build(b, also=[(a, 1, base_a)], **kw_b)
        assert list(fa.layout.yaxis.range) == pytest.approx(list(fb.layout.yaxis.range))
        assert list(fa.layout.xaxis.range) == pytest.approx(list(fb.layout.xaxis.range))
        lo, hi = fa.layout.yaxis.range
        values = np.r_[a["GD"][col], b["GD"][col]]
        if col == "suboptimality":
            values = np.log10(values)
        else:
            values = np.r_[values, 0.28, 0.18]
        assert lo <= values.min() and values.max() <= hi
        x0, x1 = fa.layout.xaxis.range
        assert x0 <= 0 and x1 >= 2 * IT.max()


@pytest.mark.parametrize("sizes", [np.full(12, 15), np.r_[np.full(99, 325), 326], np.array([1, 3, 10, 200]),
                                   np.geomspace(30, 2250, 500).astype(int)])
def test_node_size_bars_count_every_node_and_are_visible(sizes):
    """Every node in exactly one bar, and every bar at least a twentieth of a decade wide on the log axis (nodes
    of one size, dna.scale's 15 each, were drawn as a bar 1e-5 decades wide: nothing showed)."""
    bar = node_size_figure(sizes).data[0]
    lo, hi = np.asarray(bar.customdata, dtype=float).T
    assert np.sum(bar.y) == sizes.size
    for left, right, count in zip(lo, hi, bar.y):
        assert count == np.sum((sizes >= left) & ((sizes < right) | (right == hi[-1]) & (sizes <= right)))
    assert np.all(np.log10(hi) - np.log10(lo) >= 0.05 - 1e-12)
