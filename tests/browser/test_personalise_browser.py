"""The Personalise page in real headless Chromium against ``streamlit run app.py`` (helpers from
``live_server``): opened from the sidebar, Compute on google-plus-small, and what Plotly drew checked
against the table the page shows (one box per method, the pooled diamonds, the λ_D path's ends).

FEDVIZ_SCREENSHOTS=DIR keeps personalise.png.
"""

import re

import pytest

from live_server import browser_page, idle, screenshot


def _figures(page) -> list[list[dict]]:
    return page.evaluate("""() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(el =>
        (el._fullData || []).map(t => ({name: t.name, type: t.type, x: t.x ? Array.from(t.x) : [],
                                         y: t.y ? Array.from(t.y) : []})))""")


def _table(page) -> list[list[str]]:
    return page.evaluate("""() => {
        for (const t of document.querySelectorAll('table')) {
            const head = Array.from(t.querySelectorAll('thead th')).map(x => x.innerText.trim()).filter(x => x);
            if (head[0] !== 'method') continue;
            return Array.from(t.querySelectorAll('tbody tr')).map(
                r => Array.from(r.querySelectorAll('td')).map(x => x.innerText.trim()));
        }
        return null;
    }""")


def test_compute_draws_every_method_and_the_path(server, browser):
    with browser_page(browser, timeout_ms=120_000) as page:
        page.goto(server.url + "/personalise")
        page.get_by_role("button").filter(has_text=re.compile("Compute")).click()
        page.get_by_text("has the lowest pooled test error").first.wait_for(timeout=300_000)
        idle(page)
        page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length == 2 && "
                               "Array.from(document.querySelectorAll('.js-plotly-plot')).every(e => e._fullData)")
        # The table too: on a cold server the warm-up banner's reruns redraw the page while it settles.
        page.wait_for_function("() => Array.from(document.querySelectorAll('table thead th'))"
                               ".some(x => x.innerText.trim() === 'method')", timeout=120_000)
        screenshot(page, "personalise", height=1900)
        rows = _table(page)
        assert rows, "the page's table of methods"
        methods = [r[0] for r in rows]
        assert methods[:3] == ["per-node majority", "global model w*", "Local"], methods
        boxes, path = _figures(page)
        assert [t["name"] for t in boxes if t["type"] == "box"] == methods
        diamonds = next(t for t in boxes if t["type"] == "scatter")
        # The diamonds are the table's pooled column (percent, two decimals).
        assert [round(100 * y, 2) for y in diamonds["y"]] == pytest.approx(
            [float(r[1].rstrip("%")) for r in rows], abs=0.006)
        pooled = next(t for t in path if t["name"] == "pooled")
        # The path runs from Local (its first point) to w* (its last): the table's two rows.
        assert round(100 * pooled["y"][0], 2) == pytest.approx(float(rows[2][1].rstrip("%")), abs=0.006)
        assert round(100 * pooled["y"][-1], 2) == pytest.approx(float(rows[1][1].rstrip("%")), abs=0.006)
        for width in (1400, 1024):  # the page's own width, then the narrow one the issue saw (344 px charts)
            page.set_viewport_size({"width": width, "height": 1000})
            page.wait_for_timeout(800)  # Plotly relayouts on the window's resize
            _assert_the_path_is_laid_out(page, width)


def _assert_the_path_is_laid_out(page, width: int) -> None:
    """Issue 31, point 10: the λ_D path's slanted end labels ran under its x title and its legend, and on a
    narrow page the best λ_D's label widened the x range until the path filled a third of the plot."""
    geo = page.evaluate("""() => {
        const el = document.querySelectorAll('.js-plotly-plot')[1];
        const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
        const L = el._fullLayout, s = L._size;
        const px = v => L.xaxis.l2p(v) + s.l;
        const path = el._fullData.find(t => t.name === 'pooled');
        return {fig: box(el), ticks: [...el.querySelectorAll('.xtick text')].map(t => [t.textContent, box(t)]),
                title: box(el.querySelector('.g-xtitle text')),
                legend: [...el.querySelectorAll('.legend .traces')].map(box),
                plot: [s.l, s.l + s.w], ends: [px(path.x[0]), px(path.x[path.x.length - 1])]};
    }""")
    hits = lambda a, b: min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])  # noqa: E731
    f = geo["fig"]
    for text, b in geo["ticks"]:
        assert b[0] >= f[0] - 1 and b[2] <= f[2] + 1 and b[3] <= f[3] + 1, f"{width} px: {text!r} is clipped"
        assert not hits(b, geo["title"]), f"{width} px: {text!r} runs under the x title"
        assert not any(hits(b, item) for item in geo["legend"]), f"{width} px: {text!r} runs under the legend"
    (l, r), (first, last) = geo["plot"], geo["ends"]
    assert first - l < 0.1 * (r - l) and r - last < 0.1 * (r - l), f"{width} px: the path spans {first}–{last} of {l}–{r}"
