"""The Learn section's properties matrix and equivalences in real headless Chromium against
``streamlit run app.py``: the matrix is drawn, a click on a cell shows that cell's curve and words,
and the equivalences print distances at the paper's identity.

Set FEDVIZ_SCREENSHOTS=DIR to keep docs/screenshots/learn-properties.png and learn-equivalences.png.
"""

import os
import re

from live_server import browser_page, idle, screenshot

SHOTS = os.environ.get("FEDVIZ_SCREENSHOTS")


def _shot(page, name, height: int = 2000):
    """Streamlit scrolls inside its own container, so a full-page shot is the viewport: make it tall."""
    screenshot(page, name, height=height, settle=1200, restore=True)


def _click_cell(page, algorithm: str, prop: str) -> None:
    """Click the matrix's square of (algorithm, prop), found by the customdata Plotly bound to it."""
    box = page.evaluate("""([alg, prop]) => {
        const plot = document.querySelector('.js-plotly-plot');
        for (const g of plot.querySelectorAll('g.trace.scatter')) {
            const trace = g.__data__ && g.__data__[0] && g.__data__[0].trace;
            if (!trace || !trace.customdata) continue;
            for (const p of g.querySelectorAll('path.point')) {
                const cd = trace.customdata[p.__data__.i];
                if (cd && cd[0] === alg && cd[1] === prop) {
                    const r = p.getBoundingClientRect();
                    return {x: r.x + r.width / 2, y: r.y + r.height / 2};
                }
            }
        }
        return null;
    }""", [algorithm, prop])
    assert box is not None, f"no square for {algorithm} × {prop}"
    page.mouse.click(box["x"], box["y"])


def _distances(page) -> list[float]:
    values = page.locator('[data-testid="stMetricValue"]').all_inner_texts()
    return [float(v) for v in values]


def test_the_matrix_is_drawn_and_a_click_shows_that_cells_curve(server, browser):
    with browser_page(browser) as page:
        page.goto(server.url + "/learn_properties")
        page.get_by_text("Properties (A)–(D)").first.wait_for()
        page.locator(".js-plotly-plot").first.wait_for(timeout=180_000)  # the first view measures every cell
        idle(page)
        # Every registered algorithm has a row: 4 squares each (the selection ring is not a square of a trace
        # with customdata).
        from fedviz.algorithms import ALGORITHMS

        squares = page.evaluate("""() => {
            const plot = document.querySelector('.js-plotly-plot');
            let n = 0;
            for (const g of plot.querySelectorAll('g.trace.scatter')) {
                const t = g.__data__ && g.__data__[0] && g.__data__[0].trace;
                if (t && t.customdata) n += g.querySelectorAll('path.point').length;
            }
            return n;
        }""")
        assert squares == 4 * len(ALGORITHMS)
        # The default curve is FedAvg's drift from w* (property A): it does not stay, with its two runs named,
        # the first by what it pins and why, the second by its defaults.
        page.get_by_text("Measured: lacks it.").first.wait_for()
        assert page.get_by_text(re.compile(r"client_fraction = 1 \(pinned\), local_epochs = 10 \(pinned\)")).count() >= 1
        assert page.get_by_text(re.compile(r"with its defaults: client_fraction = ")).count() >= 1
        # A click on DANE × (B) shows that cell: on 10 nodes, one holding 99.7% of the rows, DANE with its
        # defaults lacks (B), as Section 3.4 says; the paper's exact DANE (η = 1, μ = 0) climbs; no cell
        # contradicts the paper.
        _click_cell(page, "dane", "B")
        page.get_by_text(re.compile(r"DANE × \(B\)")).first.wait_for(timeout=60_000)
        idle(page)
        page.get_by_text(re.compile(r"With its defaults: eta = ")).first.wait_for()
        assert page.get_by_text(re.compile(r"eta = 1( \(pinned\))?, mu = 0( \(pinned\))?, solver = exact")).count() >= 1
        assert page.get_by_text("Unfortunately, DANE does not achieve").count() >= 1
        assert page.get_by_text("The measurement contradicts the paper here.").count() == 0
        _shot(page, "learn-properties", height=1900)
        # A second click, on another cell, moves the curve again: FSVRG on (C), whose defaults (the safeguard
        # on) do not climb; Algorithm 4 as printed, beside them, does.
        _click_cell(page, "fsvrg", "C")
        page.get_by_text(re.compile(r"FSVRG × \(C\)")).first.wait_for(timeout=60_000)
        idle(page)
        page.get_by_text(re.compile(r"With its defaults: stepsize = .*safeguard = on — FSVRG was still")).first.wait_for()
        assert page.get_by_text(re.compile(r"FSVRG climbed")).count() == 0
        # Waited for, not counted at once: the cell's two runs are drawn one after the other (a loaded run read 0).
        page.get_by_text(re.compile(r"safeguard = off \(pinned\) — climbed")).first.wait_for(timeout=60_000)
        _shot(page, "learn-properties-fsvrg", height=1900)
        # One-shot averaging on (B) reads the one round it used, not the budget.
        _click_cell(page, "one-shot", "B")
        page.get_by_text(re.compile(r"One-shot averaging × \(B\)")).first.wait_for(timeout=60_000)
        idle(page)
        page.get_by_text(re.compile(r"used 1 round of communication")).first.wait_for()
        assert page.get_by_text(re.compile(r"1 round, > ε")).count() >= 1
        assert page.get_by_text(re.compile(r"Traceback")).count() == 0


def test_the_equivalences_print_distances_at_the_papers_identity(server, browser):
    with browser_page(browser) as page:
        page.goto(server.url + "/learn_equivalences")
        page.get_by_text("Proposition 1: inexact DANE is naive FSVRG").first.wait_for()
        page.locator('[data-testid="stMetricValue"]').nth(1).wait_for()
        idle(page)
        first = _distances(page)
        # Proposition 1 is exact up to rounding; Theorem 5 up to the block solves' rounding.
        assert len(first) == 2 and first[0] <= 1e-12 and first[1] <= 1e-9, first
        assert page.get_by_text("the same sequence, as the paper states").count() == 2
        assert page.locator(".js-plotly-plot").count() == 2
        # More iterations: the Proposition's distance is measured again, and stays at rounding.
        box = page.get_by_role("spinbutton", name="Iterations").first
        box.fill("25")
        box.press("Enter")
        idle(page)
        page.get_by_text(re.compile(r"over 25 iterations")).first.wait_for()
        again = _distances(page)
        assert again[0] <= 1e-12, again
        _shot(page, "learn-equivalences", height=2500)
