"""Learn › Start here, Learn › Rare features and the sentences under the Run charts in real headless Chromium
against ``streamlit run app.py`` (helpers from ``live_server``).

FEDVIZ_SCREENSHOTS=DIR keeps docs/screenshots' learn-tour.png, learn-rare.png and run-sentences.png.
"""

import os
import re
import time

from fedviz.learn.rare_features import VARIANTS
from fedviz.learn.chart_notes import AXIS_NOTES
from fedviz.learn.tour import LESSONS, lesson
from browser_user import observe
from live_server import browser_page, idle, run_button, screenshot

SHOTS = os.environ.get("FEDVIZ_SCREENSHOTS")


def _shot(page, name, height=1000):
    screenshot(page, name, height=height)


def _names(page, index: int = 0, drawn: bool = False) -> list[str]:
    """The trace names Plotly drew in the index-th chart ([] before it exists); ``drawn``: only the traces
    with a value to draw (not the lower plot's empty placeholder, which keeps its axes before a run)."""
    return page.evaluate("""([i, drawn]) => {
        const el = document.querySelectorAll('.js-plotly-plot')[i];
        const has = t => !drawn || (t.y && Array.from(t.y).some(v => v !== null && v !== undefined));
        return (el && el._fullData) ? el._fullData.filter(has).map(t => t.name) : [];
    }""", [index, drawn])


def test_the_tour_opens_rare_features_and_the_ablation_streams_live(server, browser):
    with browser_page(browser) as page:
        page.goto(server.url + "/learn_tour")
        page.get_by_text("Start here: a guided tour").first.wait_for()
        idle(page)
        for title in ("Why FSVRG wins", "Personalisation", "Rare features and the FSVRG ablation"):
            page.get_by_text(title).first.wait_for()
        _shot(page, "learn-tour", height=1750)
        # Each lesson's link is its settings' query string (opened in a new tab: a new session reads it).
        shown = [x for x in LESSONS if x.exists()]  # a lesson whose page is missing has no link
        hrefs = page.get_by_role("link", name="Link to share ↗").evaluate_all("els => els.map(e => e.href)")
        assert [h.split("/")[-1] for h in hrefs] == [x.url() for x in shown]

        page.locator(".st-key-tour-rare-features button").click()
        page.get_by_text("Rare features and the FSVRG ablation").first.wait_for()
        page.get_by_role("button").filter(has_text=re.compile("Run the ablation")).wait_for()
        idle(page)
        page.locator(".js-plotly-plot").first.wait_for()
        page.wait_for_function("() => { const el = document.querySelector('.js-plotly-plot'); "
                               "return el && el._fullData && el._fullData.length > 0; }")
        assert _names(page, drawn=True) == ["features"]  # Figure 1 binned, no curve before any run
        iterations = page.get_by_role("spinbutton", name="Iterations")
        iterations.fill("12")
        iterations.press("Enter")
        idle(page)
        page.get_by_role("button").filter(has_text=re.compile("Run the ablation")).click()
        # Live: the legend names the iteration each curve's errors are from; it must change while the run runs.
        seen, deadline = set(), time.time() + 180
        while time.time() < deadline:
            names = tuple(_names(page))
            if len(names) > 1:
                seen.add(names)
            if page.get_by_text("Naive FSVRG: done").count():
                break
            page.wait_for_timeout(300)
        page.get_by_text("Naive FSVRG: done").first.wait_for(timeout=180_000)
        idle(page)
        want = [f"{v.label} (iteration 12)" for v in VARIANTS.values()]
        final = observe(lambda: _names(page)[1:], lambda names: names == want, page=page)  # the last redraw
        assert final == want, final
        assert len(seen) >= 2, f"the per-bin chart did not change while the run ran: {seen}"
        page.get_by_text("What to look at").first.wait_for()
        _shot(page, "learn-rare", height=2000)


def test_a_lesson_link_opens_run_set_up_and_its_charts_carry_their_sentences(server, browser):
    """The non-IID lesson's link, as a class would open it: a new session on Run with the reshuffled posts.
    (With FEDVIZ_SCREENSHOTS, the paper's trio on the default data instead, for the docs' picture.)"""
    item = lesson("non-iid")
    with browser_page(browser) as page:
        page.goto(server.url + "/" + (item.url() if not SHOTS else "run"))
        run_button(page).wait_for()
        if not SHOTS:
            page.get_by_text(re.compile(r"partition: reshuffle")).first.wait_for()
        iterations = page.get_by_role("spinbutton", name="Iterations")
        iterations.fill("10")
        iterations.press("Enter")
        idle(page)
        run_button(page).click()
        page.get_by_text(AXIS_NOTES["iteration"].split("**")[-1].strip()[:40]).first.wait_for(timeout=120_000)
        page.get_by_text(re.compile(r"FSVRG: done")).first.wait_for(timeout=120_000)
        idle(page)
        # Computed from this run (fedviz.learn.chart_notes): the per-node majority against OPT, the lowest f − f*.
        page.get_by_text(re.compile(r"per-node majority: n/a — the partition dealt the training rows to new nodes"
                                    if not SHOTS else r"per-node majority \(\d+\.\d\d%\): .*below OPT")
                         ).first.wait_for()
        page.get_by_text(re.compile(r"At iteration 10 the lowest f − f\*")).first.wait_for()
        _shot(page, "run-sentences", height=1300)


def test_before_the_first_run_every_bar_count_shows_and_the_note_sits_in_the_empty_plot(server, browser):
    """Issue 31, point 10: before the ablation ran, the lower plot had no axes (Plotly.js builds none for an
    empty subplot), so its note fell back to the whole figure and covered the first bar's count."""
    with browser_page(browser) as page:
        page.goto(server.url + "/learn_rare_features")
        page.locator(".js-plotly-plot").first.wait_for()
        idle(page)
        boxes = observe(lambda: page.evaluate("""() => {
            const el = document.querySelector('.js-plotly-plot');
            const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
            return {bars: [...el.querySelectorAll('.bartext')].map(t => [t.textContent, box(t)]),
                    notes: [...el.querySelectorAll('.annotation-text')].filter(t => /run the ablation/.test(t.textContent))
                           .map(box),
                    y2: el._fullLayout.yaxis2 ? el._fullLayout.yaxis2.domain : null,
                    plot: box(el)};
        }"""), lambda b: bool(b["bars"]) and bool(b["notes"]), page=page)
    assert boxes["y2"] is not None, "the lower plot has axes before the first run"
    (note,) = boxes["notes"]
    for text, (l, t, r, b) in boxes["bars"]:
        overlap = min(r, note[2]) > max(l, note[0]) and min(b, note[3]) > max(t, note[1])
        assert not overlap, f"the note covers the count {text!r} of a bar"
    assert note[1] > max(b for _, (_, _, _, b) in boxes["bars"]), "the note sits below the bars, in the lower plot"
