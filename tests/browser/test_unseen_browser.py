"""Unseen nodes (issue 23, point 2) in real headless Chromium: the Data page's option, typed as a user
types it, reaches the link, the node count and the caption (one short walk)."""

from browser_user import metric, observe, open_page, query, set_number, table_cell
from live_server import browser_page, screenshot


def test_the_unseen_option_holds_out_nodes_and_says_so(server, browser):
    from fedviz.data.build import DataSpec, build
    from fedviz.data.unseen import unseen_sentence

    with browser_page(browser) as page:
        open_page(page, f"{server.url}/data?data=google-plus-small%3Fnodes%3D40")
        set_number(page, "Unseen nodes (share)", 0.2)
        # The link is rewritten by the rerun the edit starts: read it once that rerun has written it.
        assert observe(lambda: query(page).get("unseen"), lambda v: v == "0.2", page=page) == "0.2"
        # The data set is rebuilt after the rerun that wrote the link: the count follows.
        shown = observe(lambda: metric(page, "nodes K"), lambda v: v == "32 + 8 unseen", timeout_ms=60_000, page=page)
        assert shown == "32 + 8 unseen"
        ds = build(DataSpec("preset:google-plus-small?nodes=40", unseen=0.2))
        page.get_by_text(unseen_sentence(ds), exact=False).first.wait_for()
        assert table_cell(page, "the optimum w*", 2).endswith("%")  # the unseen nodes' column
        screenshot(page, "unseen-data", height=2600)  # for a person to look at ($FEDVIZ_SCREENSHOTS)
