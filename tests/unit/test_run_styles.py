"""Every run has its own look (issue 20, "Runs of one algorithm look the same"): colour and marker
used to follow the algorithm, so the FSVRG ablation variants, FSVRG on two partitions or two
stepsizes were drawn alike on Compare, Efficiency and the HTML export.

And the layout with many runs (issue 20, "Layout"): with 12–14 algorithms the plot shrank to
about 100 px under its legend, and one diverged DANE stretched the test-error axis to
40,000,000%.  The figures are checked as objects and, for what a reader sees, as Chromium
draws them.
"""

import colorsys
import json
import re
from itertools import combinations
from types import SimpleNamespace

import numpy as np
import pytest

from fedviz.algorithms import ALGORITHMS
from fedviz.learn.efficiency import paradigm
from fedviz import plots
from fedviz.plots import convergence_figure, suboptimality_figure
from fedviz.plots.experiments import arm_styles
from fedviz.plots.figures import _X_TITLE_SPACE, DIVERGED_FACTOR, PLOT_MIN
from fedviz.plots.learn_efficiency import efficiency_figure
from fedviz.plots.styles import run_styles

IT = np.arange(21)

#: The ablation of Learn › Rare features (fedviz.learn.rare_features.VARIANTS): five lines of FSVRG
#: and naive FSVRG, a family of six; plus FSVRG on two partitions and at two stepsizes.
ABLATION = {"FSVRG": "fsvrg", "FSVRG without h/n_k": "fsvrg", "FSVRG without S_k": "fsvrg",
            "FSVRG without A": "fsvrg", "FSVRG without ω scaling": "fsvrg", "Naive FSVRG": "naive-fsvrg"}
GROUP = {**ABLATION, "#7 FSVRG (reshuffle)": "fsvrg", "FSVRG ×2": "fsvrg", "GD": "gd", "GD ×1/2": "gd"}


def _cols(label, algorithm, k, n=IT.size):
    """Columns of a converging run (f − f* falling by a run-specific rate; error falling to 25%)."""
    t = np.arange(n)
    return {"iteration": t, "rounds": 2 * t, "vectors_up": t, "vectors_down": t, "seconds": 0.01 * (k + 1) * t,
            "grad_evals": 100 * (k + 1) * t,
            "suboptimality": 0.3 * (0.5 + 0.04 * k) ** t, "test_error": 0.25 + 0.1 * 0.8 ** t,
            "algorithm": np.array([algorithm] * n)}


def _runs(group):
    return {label: _cols(label, algo, k) for k, (label, algo) in enumerate(group.items())}


def _looks(traces):
    """(colour, dash, marker) of each named trace, by name."""
    out = {}
    for t in traces:
        if t.get("showlegend") is False or not t.get("name"):
            continue
        line, marker = t.get("line") or {}, t.get("marker") or {}
        out[t["name"]] = (line.get("color") or marker.get("color"), line.get("dash") or "solid",
                          marker.get("symbol") or "circle")
    return out


def _distinct(looks: dict, expected: int):
    assert len(looks) == expected, looks
    for (a, la), (b, lb) in combinations(looks.items(), 2):
        assert la != lb, f"{a} and {b} are drawn alike: {la}"


# -- the style assignment ----------------------------------------------------------------------
def test_every_run_of_a_group_has_its_own_colour_dash_and_marker():
    looks = run_styles(GROUP)
    _distinct({k: (s.color, s.dash, s.marker) for k, s in looks.items()}, len(GROUP))
    # And colour alone tells the runs of one family apart (a reader sees colour first).
    fsvrg = [s.color for k, s in looks.items() if GROUP[k] in ("fsvrg", "naive-fsvrg")]
    assert len(set(fsvrg)) == len(fsvrg), fsvrg


def test_a_family_shares_its_hue_and_variants_differ_in_lightness():
    """FSVRG and naive FSVRG, two GDs: the hue (HLS) of one family stays within ±40° of the family's,
    its lightness varies."""
    looks = run_styles(GROUP)

    def hls(color):
        return colorsys.rgb_to_hls(*(int(color[i:i + 2], 16) / 255 for i in (1, 3, 5)))

    for fam in (("fsvrg", "naive-fsvrg"), ("gd",)):
        members = [hls(s.color) for k, s in looks.items() if GROUP[k] in fam]
        assert len(members) >= 2
        assert max(h for h, _, _ in members) - min(h for h, _, _ in members) <= 2 * 40 / 360 + 0.01, members
        assert len({round(lum, 3) for _, lum, _ in members}) == len(members), members
    # Two families, two hues.
    assert abs(hls(looks["FSVRG"].color)[0] - hls(looks["GD"].color)[0]) > 0.05


def test_the_assignment_is_deterministic_and_a_new_run_does_not_restyle_the_others():
    first = run_styles(GROUP)
    assert run_styles(dict(GROUP)) == first
    more = run_styles({**GROUP, "FSVRG ×4": "fsvrg"})
    assert {k: more[k] for k in GROUP} == first


def test_all_fourteen_algorithms_and_their_variants_are_told_apart():
    """Walk the registry: every algorithm twice (two stepsizes) — 28 runs, all distinct."""
    group = {}
    for name, cls in ALGORITHMS.items():
        group[cls.title] = name
        group[f"{cls.title} ×2"] = name
    assert len(ALGORITHMS) >= 14
    looks = run_styles(group)
    _distinct({k: (s.color, s.dash, s.marker) for k, s in looks.items()}, len(group))


def test_the_paper_label_fsvrgr_keeps_its_red_star():
    """Figure 2's FSVRGR (FSVRG on reshuffled data) is red stars, FSVRG green circles."""
    looks = run_styles({"FSVRG": "fsvrg", "FSVRGR": "fsvrg"})
    assert (looks["FSVRG"].marker, looks["FSVRGR"].marker) == ("circle", "star")
    assert looks["FSVRGR"].color != looks["FSVRG"].color


# -- every figure builder uses it -----------------------------------------------------------------
def test_convergence_figures_draw_each_run_of_one_algorithm_apart():
    runs = _runs(GROUP)
    styles = {label: ALGORITHMS[a].title for label, a in GROUP.items()}
    for fig in (suboptimality_figure(runs, styles=styles), plots.test_error_figure(runs, styles=styles),
                convergence_figure(runs, styles=styles), convergence_figure(runs)):
        _distinct(_looks(fig.to_plotly_json()["data"]), len(GROUP))


def test_the_exported_html_draws_each_run_apart():
    """Compare's "Figure as HTML": the traces as the file holds them (Plotly.newPlot's data), styled as
    Compare styles them (each label's algorithm title)."""
    runs = _runs(GROUP)
    styles = {label: ALGORITHMS[a].title for label, a in GROUP.items()}
    html = convergence_figure(runs, styles=styles).to_html(include_plotlyjs=False, full_html=True)
    data = re.search(r"Plotly\.newPlot\(\s*\"[^\"]+\",\s*(\[.*?\]),\s*\{", html, re.S).group(1)
    traces = json.loads(data)
    _distinct(_looks(traces), len(GROUP))


def test_the_efficiency_figure_draws_each_run_apart():
    runs = _runs(ABLATION)
    p = paradigm(runs, 1e-3, algorithms=ABLATION)
    fig = efficiency_figure(p, styles={k: ALGORITHMS[a].title for k, a in ABLATION.items()})
    looks = {name.split(":")[0]: look for name, look in _looks(fig.to_plotly_json()["data"]).items()
             if not name.startswith("two lines")}
    _distinct(looks, len(ABLATION))


def test_an_experiments_lines_of_one_algorithm_are_drawn_apart():
    """Two lines of FSVRG (two partitions) and two of GD in an experiment: four looks."""
    arms = [("FSVRG own", "fsvrg"), ("FSVRG reshuffled", "fsvrg"), ("GD", "gd"), ("GD small step", "gd")]
    results = SimpleNamespace(arms=[a for a, _ in arms], experiment=SimpleNamespace(
        arms=[SimpleNamespace(label=a, spec=SimpleNamespace(name=n)) for a, n in arms]))
    looks = arm_styles(results)
    _distinct({k: (s.color, s.dash, s.marker) for k, s in looks.items()}, 4)


# -- layout: many runs, a diverged run ------------------------------------------------------------
def _fourteen():
    return {cls.title: _cols(cls.title, name, k) for k, (name, cls) in enumerate(ALGORITHMS.items())}


@pytest.mark.parametrize("build", ["sub", "err", "both"])
def test_with_every_algorithm_the_plot_area_keeps_its_height_and_the_legend_is_outside(build):
    runs = _fourteen()
    assert len(runs) >= 14
    fig = {"sub": lambda: suboptimality_figure(runs, height=330), "err": lambda: plots.test_error_figure(runs, height=330),
           "both": lambda: convergence_figure(runs)}[build]()
    lay = fig.layout
    plot = lay.height - lay.margin.t - lay.margin.b
    assert plot >= PLOT_MIN, (lay.height, lay.margin)
    # The legend hangs right under the x title, below the plot area (outside the [0, 1] domain): its top
    # edge the x title's pixels under the plot, in the plot's own fraction.
    assert lay.legend.orientation == "h" and lay.legend.yref == "paper" and lay.legend.yanchor == "top"
    assert lay.legend.y * plot == pytest.approx(-_X_TITLE_SPACE) and _X_TITLE_SPACE > 0


def _diverged_group():
    """GD and FedAvg converge; DANE's f − f* climbs to 10^12 and its error to 4×10^5 (as a
    squared-error metric on a blown-up model does), then NaN."""
    runs = {"GD": _cols("GD", "gd", 0), "FedAvg": _cols("FedAvg", "fedavg", 1)}
    dane = _cols("DANE", "dane", 2)
    dane["suboptimality"] = 0.3 * 10.0 ** np.minimum(IT, 12)
    dane["suboptimality"][15:] = np.nan
    dane["test_error"] = np.minimum(0.3 * 3.0 ** IT, 4e5)
    runs["DANE"] = dane
    return runs


def test_a_diverged_run_does_not_stretch_the_axes_and_is_marked():
    runs = _diverged_group()
    start = 0.3
    for fig in (suboptimality_figure(runs), convergence_figure(runs)):
        hi = fig.layout.yaxis.range[1]  # log10 of the top of the f − f* axis
        assert hi <= np.log10(DIVERGED_FACTOR * start) + 0.5, hi
        names = [t.name for t in fig.data if t.showlegend is not False]
        assert "DANE — diverged" in names and "GD" in names and "FedAvg" in names
        # A marker on the edge, with the value it left at in its hover text.
        edges = [t for t in fig.data if isinstance(t.meta, dict) and t.meta.get("edge") and t.xaxis in (None, "x")]
        assert len(edges) == 1 and "diverged" in edges[0].hovertemplate
        assert np.log10(edges[0].y[0]) == pytest.approx(hi, abs=0.6)
        # The converging runs are whole on the axis.
        for label in ("GD", "FedAvg"):
            y = runs[label]["suboptimality"]
            assert np.log10(y.min()) >= fig.layout.yaxis.range[0] and np.log10(y.max()) <= hi
    for fig, axis, ref in ((plots.test_error_figure(runs), "yaxis", None), (convergence_figure(runs), "yaxis2", "y2")):
        lo, hi = fig.layout[axis].range
        assert 0 <= lo and hi <= 1, (lo, hi)  # an error rate: never the 40,000,000% of the report
        for label in ("GD", "FedAvg"):
            y = runs[label]["test_error"]
            assert lo <= y.min() and y.max() <= hi
        drawn = [t for t in fig.data if t.name == "DANE — diverged" and t.yaxis == ref and not t.meta.get("edge")]
        assert drawn and all(np.nanmax(np.asarray(t.y, dtype=float)) <= hi for t in drawn)


def test_a_run_whose_status_is_diverged_is_marked_so():
    runs = _runs({"GD": "gd", "DANE": "dane"})
    fig = suboptimality_figure(runs, diverged={"DANE"})
    assert {t.name for t in fig.data} == {"GD", "DANE — diverged"}


# -- as Chromium draws them -----------------------------------------------------------------------
_BOXES = """() => {
    const box = s => { const e = document.querySelector(s); if (!e) return null;
                       const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    return {plot: box('.nsewdrag'), legend: box('.legend .bg'), xtitle: box('.xtitle'), svg: box('.main-svg')};
}"""


@pytest.mark.slow  # a real chromium draws the figure three times
@pytest.mark.parametrize("width", [280, 420, 700])
def test_drawn_with_every_algorithm_the_plot_keeps_its_height_and_the_legend_clears_the_x_title(browser, tmp_path,
                                                                                                width):
    """In Chromium at the width a 1024 px page gives a figure: the plot area is ≥ 200 px tall, the
    legend starts below the x title and ends inside the figure (no scrolling legend)."""
    page = browser.new_page(viewport={"width": width, "height": 1000})
    try:
        for name, fig in (("sub", suboptimality_figure(_fourteen(), height=330, width=width)),
                          ("both", convergence_figure(_fourteen(), width=width))):
            path = tmp_path / f"{name}-{width}.html"
            fig.write_html(str(path), include_plotlyjs=True, full_html=True, config={"responsive": True})
            page.goto(path.as_uri())
            page.wait_for_selector(".main-svg")
            b = page.evaluate(_BOXES)
            assert b["plot"][3] - b["plot"][1] >= 200, (name, b)
            assert b["legend"][1] >= b["xtitle"][3] - 1, (name, b)
            assert b["legend"][3] <= b["svg"][3] + 1, (name, b)
            # Nothing to scroll: the legend's entries are no taller than its box.
            content, shown = page.evaluate("""() => [document.querySelector('.legend .scrollbox').getBBox().height,
                                                     document.querySelector('.legend .bg').getBBox().height]""")
            assert content <= shown + 1, (name, content, shown)
    finally:
        page.close()


@pytest.mark.slow  # a real chromium draws the figure
def test_on_a_page_wider_than_the_estimate_the_legend_stays_under_the_x_title(browser, tmp_path):
    """Issue 31: the legend's rows are estimated at 420 px; drawn 1,200 px wide they wrap to fewer, and the space
    left over sat between the plot and its legend (~170 px).  It is at the figure's foot now: the legend starts
    within a row of the x title's bottom."""
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    try:
        fig = suboptimality_figure(_fourteen(), height=330, width=420)
        path = tmp_path / "wide.html"
        fig.write_html(str(path), include_plotlyjs=True, full_html=True, config={"responsive": True})
        page.goto(path.as_uri())
        page.wait_for_selector(".main-svg")
        b = page.evaluate(_BOXES)
        assert b["xtitle"][3] - 1 <= b["legend"][1] <= b["xtitle"][3] + 20, b
        assert b["legend"][3] <= b["svg"][3] + 1, b
    finally:
        page.close()
