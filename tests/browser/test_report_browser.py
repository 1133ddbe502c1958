"""The experiment's standalone HTML report in Chromium at 1024 px (issue 31, point 8): its table of cells, a
column per setting and summary (seventeen here), ran off the page; it scrolls in its own box now, and the
page itself is never wider than the window."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

from test_experiment_plots import _experiment, _stored  # noqa: E402 - the unit tests' stored experiment

from fedviz.plots.experiments import report_html  # noqa: E402


def test_the_cells_table_scrolls_in_its_box_and_the_page_fits_the_window(browser, tmp_path):
    results, _ = _stored(_experiment())
    path = tmp_path / "report.html"
    path.write_text(report_html(results), encoding="utf-8")
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    try:
        page = context.new_page()
        page.goto(path.as_uri())
        page.locator("table").wait_for()
        page_width, window, table, box = page.evaluate(
            "() => [document.documentElement.scrollWidth, innerWidth, document.querySelector('table').scrollWidth,"
            " document.querySelector('table').parentElement.clientWidth]")
    finally:
        context.close()
    assert table > window, "the table is wider than the window (else this test shows nothing)"
    assert page_width <= window and box <= window, (page_width, box, window)
