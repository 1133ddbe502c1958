"""Layout in a real browser (issue 20, "Layout"): at 1024×768 the Run button sat below the fold and
the Properties matrix's labels overlapped; on Compare › What-if the A/B choice was not in the link,
a link with ``data=upload`` was dropped without a word, and panels A and B had different y ranges.

Headless Debian chromium against ``streamlit run app.py`` (``live_server``), at the viewport a
small laptop gives.
"""

import re
from urllib.parse import parse_qs, urlparse

import pytest

from browser_user import observe
from live_server import idle, run_button

SMALL = {"width": 1024, "height": 768}


@pytest.fixture
def small(browser):
    """A fresh session (its own browser context) at 1024×768."""
    context = browser.new_context(viewport=SMALL)
    page = context.new_page()
    page.set_default_timeout(90_000)
    yield page
    context.close()


def _open(page, url):
    page.goto(url)
    page.wait_for_timeout(500)
    idle(page)


def test_the_run_button_is_visible_without_scrolling_at_1024x768(server, small):
    _open(small, server.url + "/run")
    button = run_button(small)
    button.wait_for()
    box = button.bounding_box()
    assert box is not None
    assert 0 <= box["y"] and box["y"] + box["height"] <= SMALL["height"], box
    assert 0 <= box["x"] and box["x"] + box["width"] <= SMALL["width"], box


_CHIPS = """(label) => {
    const box = Array.from(document.querySelectorAll('[data-testid="stMultiSelect"]'))
        .find(el => el.innerText.trim().startsWith(label));
    if (!box) return null;
    const tags = box.querySelector('[data-testid="stMultiSelectTagsContainer"]');
    const frame = tags.parentElement.getBoundingClientRect();  // the picker's visible frame
    return Array.from(tags.querySelectorAll(':scope > span > span')).map(tag => {  // a chip: its text, its ×
        const r = tag.getBoundingClientRect(), text = tag.querySelector('span');
        return {text: tag.innerText.trim(), inside: r.top >= frame.top - 1 && r.bottom <= frame.bottom + 1
                    && r.left >= frame.left - 1 && r.right <= frame.right + 1 && r.bottom <= innerHeight,
                cut: text ? text.scrollWidth > text.clientWidth + 1 : false};
    });
}"""


@pytest.mark.parametrize("where, label, count", [
    ("/run?algorithms={all}", "Algorithms", None),
    ("/learn_rare_features", "Curves", None),
])
def test_every_chosen_chip_is_shown_whole_at_1024x768(server, small, where, label, count):
    """Issue 31, point 9: at 1024×768 the Run page's picker with every algorithm chosen showed about one chip, and
    Rare features cut every curve's label to "FSVR…": each chip is inside the picker's frame, on the screen, and
    its label is not cut; and Run stays visible without scrolling."""
    from fedviz.algorithms import ALGORITHMS

    names = [n for n, cls in ALGORITHMS.items() if "logistic" in cls.losses]
    _open(small, server.url + where.format(all=",".join(names)))
    chips = observe(lambda: small.evaluate(_CHIPS, label), lambda c: bool(c), page=small)
    if label == "Algorithms":
        assert len(chips) == len(names), chips
        button = run_button(small).first.bounding_box()
        assert button and button["y"] + button["height"] <= SMALL["height"], button
    assert all(c["inside"] and not c["cut"] for c in chips), [c for c in chips if not c["inside"] or c["cut"]]


def _alerts(page) -> list[str]:
    return page.get_by_test_id("stAlert").all_inner_texts()


def test_compare_warns_about_an_upload_link_and_restores_the_what_if_choice(server, small):
    """``data=upload`` is warned about as Run and Data warn; ``whatif_b`` and ``whatif_nodes`` are
    restored into the What-if widgets, and the tab opens on What-if."""
    _open(small, server.url + "/compare?data=upload&whatif_b=dirichlet:alpha=0.1&whatif_nodes=50")
    small.get_by_text("Partition B").first.wait_for()
    alerts = _alerts(small)
    assert any("Ignored a setting from the link" in a and "data:" in a for a in alerts), alerts
    assert small.get_by_role("tab", name=re.compile("What if")).get_attribute("aria-selected") == "true"
    # Read once the page settles: loaded, CI's run once read the node count as 1 while the link held 50.
    want = ("Label skew (Dirichlet)", "0.1", "50")
    seen = observe(lambda: (small.get_by_role("combobox", name="Partition B").input_value(),
                            small.get_by_role("textbox", name=re.compile("^α")).input_value(),
                            small.get_by_role("spinbutton", name=re.compile("Nodes K")).input_value()),
                   lambda v: v == want, page=small)
    assert seen == want
    # The link keeps the choice (the upload it could not use is gone from it).
    query = parse_qs(urlparse(small.url).query)
    assert query.get("whatif_b") == ["dirichlet:alpha=0.1"] and query.get("whatif_nodes") == ["50"], small.url
    assert "data" not in query


def test_a_what_if_choice_made_on_the_page_goes_into_the_link_and_back(server, browser, small):
    _open(small, server.url + "/compare")
    small.get_by_role("tab", name=re.compile("What if")).click()
    small.get_by_role("combobox", name="Partition A").click()
    small.get_by_role("option", name=re.compile("label shards")).click()
    idle(small)
    query = parse_qs(urlparse(small.url).query)
    assert query.get("whatif_a", [""])[0].startswith("shards"), small.url
    link = small.url
    other = browser.new_context(viewport=SMALL)  # another person opening the link
    try:
        page = other.new_page()
        page.set_default_timeout(90_000)
        _open(page, link)
        page.get_by_text("Partition A").first.wait_for()
        assert "label shards" in page.get_by_role("combobox", name="Partition A").input_value()
        assert not any("Ignored a setting" in t for t in _alerts(page)), _alerts(page)
    finally:
        other.close()


def test_the_x_axis_chosen_on_run_is_in_the_link_and_a_new_tab_opens_on_it(server, browser, small):
    """Issue 31, point 2: Communication rounds came back as Iterations in a new tab."""
    _open(small, server.url + "/run")
    small.get_by_text("Communication rounds", exact=True).click()
    idle(small)
    small.wait_for_function("() => location.search.includes('axis=rounds')")
    link = small.url
    other = browser.new_context(viewport=SMALL)  # another tab opening the link
    try:
        page = other.new_page()
        page.set_default_timeout(90_000)
        _open(page, link)
        page.get_by_text("x axis").first.wait_for()
        checked = page.locator('[data-testid="stRadio"] label:has(input:checked)').all_inner_texts()
        assert "Communication rounds" in " ".join(checked), checked
        assert not any("Ignored a setting" in t for t in _alerts(page)), _alerts(page)
    finally:
        other.close()


_RANGES = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(el => {
    const r = el._fullLayout; return [el.closest('[data-testid="stColumn"]') ? 1 : 0,
        (el.layout.title && el.layout.title.text) || '', r.yaxis.range, r.xaxis.range]; })"""


def test_what_if_panels_a_and_b_share_their_axes(server, small):
    """Run both on a small problem: the two suboptimality panels, and the two test-error panels, have
    the same y (and x) ranges."""
    _open(small, server.url + "/compare?algorithms=gd,fsvrg&iterations=6")
    small.get_by_role("tab", name=re.compile("What if")).click()
    small.get_by_role("combobox", name="Partition B").click()
    small.get_by_role("option", name=re.compile("label shards")).click()
    idle(small)
    small.get_by_role("button", name=re.compile("Run both")).click()
    small.get_by_text(re.compile(r"FSVRG\*?\*?: done")).nth(1).wait_for(timeout=180_000)
    idle(small)
    small.wait_for_timeout(2500)  # the last redraw of both panels
    figures = small.evaluate(_RANGES)
    by_title = {}
    for _, title, y, x in figures:
        by_title.setdefault(title, []).append((y, x))
    panels = [v for v in by_title.values() if len(v) == 2]
    assert len(panels) == 2, figures  # f − f* and test error, each in A and B
    for (ya, xa), (yb, xb) in panels:
        assert ya == pytest.approx(yb) and xa == pytest.approx(xb), figures


_MATRIX = """() => {
    const plot = document.querySelector('.js-plotly-plot');
    const box = e => { const r = e.getBoundingClientRect(); return [e.textContent, r.left, r.top, r.right, r.bottom]; };
    return {svg: box(plot.querySelector('.main-svg')),
            texts: Array.from(plot.querySelectorAll('.textpoint text, .xtick text')).map(box),
            squares: Array.from(plot.querySelectorAll('.scatterlayer .point')).map(box)};
}"""


def _overlap(a, b) -> bool:
    return a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5 and a[2] < b[4] - 0.5 and b[2] < a[4] - 0.5


def test_properties_labels_neither_overlap_nor_clip_at_1024x768(server, small):
    """Every cell's label and every column head stays clear of the others and of every square, and
    inside the figure."""
    _open(small, server.url + "/learn_properties")
    small.locator(".js-plotly-plot .textpoint").first.wait_for(timeout=180_000)
    small.wait_for_timeout(1000)
    m = small.evaluate(_MATRIX)
    texts, squares, svg = m["texts"], m["squares"], m["svg"]
    assert len(texts) > 20 and len(squares) > 20, m
    for t in texts:
        assert svg[1] - 0.5 <= t[1] and t[3] <= svg[3] + 0.5, ("clipped", t, svg)
    for i, a in enumerate(texts):
        for b in texts[i + 1:]:
            assert not _overlap(a, b), (a, b)
        for s in squares:
            assert not _overlap(a, s), (a, s)
