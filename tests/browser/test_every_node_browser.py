"""The Every node section stays readable with many runs (issue 31, point 12).

Four algorithms drew four overlapping 10th-90th percentile bands on one axis, and a sentence of about 200 words.
With more than two runs the section now shows one run at a time, chosen with a picker: here four algorithms run
on google-plus-small and the band figure must hold the curves of the chosen run only, the sentence only its
name, and choosing another run must switch both.
"""

from __future__ import annotations

import re

import pytest

from browser_user import choose_option, observe, open_page, scroll_to, selectbox, shot
from fedviz.algorithms import ALGORITHMS
from live_server import browser_page, idle, run_button

NAMES = ("fsvrg", "gd", "cocoa-plus", "fedavg")
_BAND_TRACES = """() => {
    for (const el of document.querySelectorAll('.js-plotly-plot')) {
        const title = ((el._fullLayout && el._fullLayout.title && el._fullLayout.title.text) || '');
        if (/per node/i.test(title.replace(/<[^>]*>/g, ''))) return el._fullData.map(t => t.name || '');
    }
    return null;
}"""


@pytest.fixture
def page(server, browser):
    with browser_page(browser) as pg:
        yield pg


def _band_runs(page) -> set[str]:
    """The runs the band figure draws (its traces are named '<run>: median node …' and '<run>: pooled')."""
    names = page.evaluate(_BAND_TRACES) or []
    return {n.split(":")[0] for n in names if ":" in n}


def test_four_runs_show_one_band_at_a_time(server, page):
    titles = [ALGORITHMS[n].title for n in NAMES]
    open_page(page, f"{server.url}/run?algorithms={','.join(NAMES)}&iterations=5")
    run_button(page).first.click()
    for title in titles:
        page.get_by_text(re.compile(rf"{re.escape(title)}: (done|diverged)")).first.wait_for(timeout=180_000)
    idle(page)
    scroll_to(page, lambda: page.get_by_text("Every node").first)
    drawn = observe(lambda: _band_runs(page), lambda runs: len(runs) > 0, timeout_ms=30_000, page=page)
    selectbox(page, "Algorithm").evaluate("e => e.scrollIntoView({block: 'start'})")
    shot(page, "every-node-four-runs")
    assert drawn == {titles[0]}, drawn
    choose_option(page, "Algorithm", titles[2])
    drawn = observe(lambda: _band_runs(page), lambda runs: runs == {titles[2]}, timeout_ms=30_000, page=page)
    assert drawn == {titles[2]}, drawn
    body = page.locator("body").inner_text()
    sentence = next(line for line in body.splitlines() if "the worst 10% of nodes" in line)
    assert titles[2] in sentence and titles[0] not in sentence, sentence
