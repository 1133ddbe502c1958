"""Per-node views on too few test rows are warned, with a remedy the page offers (issue 31, point 7).

A 1,000-row file split automatically gets 50 nodes of 20 rows, 5 of them test rows: every node's error was a
multiple of 20% and the band and histogram were step functions, unwarned.  Here the first 1,000 rows of a9a
are uploaded without a test file, run at the defaults, and the Run page's Every node section must say how
many test rows the nodes hold (counted here from the file, independently) and name the Test fraction and the
number of nodes; with 10 nodes (25 test rows each) it must not.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from browser_user import choose_option, go_sidebar, observe, open_page, scroll_to, set_number, shot
from conftest import DATA
from live_server import idle, run_button

ROWS = 1_000


@pytest.fixture
def page(server, browser):
    """A fresh browser context (so a fresh Streamlit session)."""
    from live_server import browser_page

    with browser_page(browser) as pg:
        yield pg


def _upload(page, path) -> None:
    page.get_by_text("Upload a LIBSVM file").click()
    idle(page)
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name=re.compile("Browse files|Upload")).first.click()
    chooser.value.set_files(str(path))
    page.get_by_text(path.name).first.wait_for()
    idle(page)


def _warning(page) -> str:
    texts = page.get_by_test_id("stAlert").all_inner_texts()
    return next((t for t in texts if "few test rows" in t), "")


def test_a_small_upload_warns_that_its_nodes_hold_few_test_rows(server, page, tmp_path):
    upload = tmp_path / "a9a-first-1000"
    upload.write_text("\n".join((DATA / "a9a").read_text().splitlines()[:ROWS]) + "\n")
    open_page(page, f"{server.url}/data")
    _upload(page, upload)
    # The file's defaults (docs/dashboard.md): a node per 20 rows, a test fraction of 0.25 of each node's rows.
    nodes, per_node = ROWS // 20, int(np.floor(0.25 * 20))
    go_sidebar(page, "Run")
    run_button(page).first.click()
    said = observe(lambda: _warning(page), bool, timeout_ms=180_000, page=page)
    scroll_to(page, lambda: page.get_by_test_id("stAlert").filter(has_text="few test rows").first)
    shot(page, "few-test-rows")
    assert f"({per_node:,} each; {nodes:,} nodes scored)" in said, said
    assert f"steps of {100 // per_node} points" in said and "Test fraction" in said and "fewer nodes" in said, said

    go_sidebar(page, "Data")  # the remedy as the warning names it
    choose_option(page, "How the rows are split over nodes", "IID, balanced")
    set_number(page, "Nodes for the partition", 10)  # 100 rows a node, 25 of them test rows
    idle(page)
    go_sidebar(page, "Run")
    run_button(page).first.click()
    gone = observe(lambda: _warning(page), lambda text: text == "", timeout_ms=180_000, page=page)
    shot(page, "few-test-rows-10-nodes")
    assert gone == "", gone
