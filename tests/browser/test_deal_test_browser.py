"""DataSpec.deal_test (issue 23, point 1) in real headless Chromium: the Data page's checkbox, ticked as a
user ticks it, reaches the link, the caption and the per-node majority (one short walk)."""

from browser_user import observe, open_page, query, table_cell, tick
from live_server import browser_page, screenshot


def test_dealing_the_test_rows_gives_every_node_a_per_node_majority(server, browser):
    from fedviz.data.build import DataSpec, build, deal_sentence
    from fedviz.data.split import DEAL_LABEL

    with browser_page(browser) as page:
        open_page(page, f"{server.url}/data?data=google-plus-small%3Fnodes%3D40&partition=dirichlet%3Aalpha%3D0.3"
                        "&nodes=20")
        assert table_cell(page, "per-node majority", 1) == "n/a"
        tick(page, DEAL_LABEL)
        assert observe(lambda: query(page).get("deal_test"), lambda v: v == "1", page=page) == "1"
        ds = build(DataSpec("preset:google-plus-small?nodes=40", partition="dirichlet:alpha=0.3", nodes=20,
                            deal_test=True))
        page.get_by_text(deal_sentence(ds), exact=False).first.wait_for()
        cell = observe(lambda: table_cell(page, "per-node majority", 1), lambda v: v.endswith("%"),
                       timeout_ms=60_000, page=page)
        assert cell.endswith("%")
        screenshot(page, "deal-test-data", height=2600)  # for a person to look at ($FEDVIZ_SCREENSHOTS)
