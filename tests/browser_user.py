"""Page helpers for browser tests that act as a user: read the address bar, type into a
number or text input and press Enter, pick an option of a selectbox or a multiselect, tick a
checkbox, read metrics, tables and charts, and collect what a user would see as a crash.

Every action waits for Streamlit's rerun to end (``live_server.idle``); every check polls
the page until it shows what is expected or a timeout passes (``observe``), and returns
what it last saw, so a failing assertion says what the page showed, not only that it
differed.  No sleeps: the only fixed wait is ``idle``'s 300 ms for a rerun to start.
"""

from __future__ import annotations

import re
import time
import urllib.parse
from pathlib import Path
from typing import Callable

from live_server import idle

SHOTS = Path("/tmp/shots")

#: How long a check waits for the page to show the expected state after a rerun ended (ms).
SETTLE_MS = 10_000


# -- the address bar ------------------------------------------------------------------------------
def query(page) -> dict[str, str]:
    """The address bar's query string as a dict (the first value of each key)."""
    parsed = urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query, keep_blank_values=True)
    return {key: values[0] for key, values in parsed.items()}


def path(page) -> str:
    return urllib.parse.urlsplit(page.url).path


def preset_in_link(q: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The preset a link's ``data`` value names (no ``data``: the default, google-plus-small) and
    its overrides as text, e.g. ``google-plus-small?nodes=60`` -> ("google-plus-small", {"nodes": "60"})."""
    name, _, rest = q.get("data", "google-plus-small").partition("?")
    return name, dict(urllib.parse.parse_qsl(rest, keep_blank_values=True))


# -- waiting ---------------------------------------------------------------------------------------
def observe(read: Callable[[], object], ok: Callable[[object], bool], timeout_ms: float = SETTLE_MS,
            page=None):
    """Poll ``read()`` until ``ok`` accepts its value or the timeout passes; return the last value.

    A read that raises (an element replaced during a rerun) counts as not yet.
    """
    deadline = time.monotonic() + timeout_ms / 1000
    value = None
    while True:
        try:
            value = read()
            if ok(value):
                return value
        except Exception as e:  # noqa: BLE001 - a detached element mid-rerun: read again
            value = f"<unreadable: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}>"
        if time.monotonic() > deadline:
            return value
        if page is not None:
            page.wait_for_timeout(150)
        else:
            time.sleep(0.15)


def scroll_to(page, locate: Callable[[], object], timeout_ms: float = SETTLE_MS) -> bool:
    """Scroll the element ``locate()`` finds into view, finding it again if a rerun replaced it
    (a live fragment redraws its alerts every tick).  For screenshots: returns whether it scrolled,
    and never fails a test, since where the page is scrolled is not what a test asserts."""
    def scrolled() -> bool:
        locate().scroll_into_view_if_needed(timeout=2_000)
        return True
    return observe(scrolled, lambda done: done is True, timeout_ms=timeout_ms, page=page) is True


def open_page(page, url: str) -> None:
    """Go to ``url`` and wait until the script ran to its end."""
    page.goto(url)
    page.locator('[data-testid="stSidebarNavLink"]').first.wait_for()
    page.locator("h1").first.wait_for()
    idle(page)


def go_sidebar(page, title: str) -> None:
    """Click the sidebar's navigation link ``title`` (Home, Data, Run, Compare) and wait."""
    page.get_by_test_id("stSidebarNavLink").filter(has_text=re.compile(rf"{re.escape(title)}$")).first.click()
    page.locator("h1", has_text=re.compile(rf"^{re.escape(title)}$")).first.wait_for()
    idle(page)


# -- widgets ---------------------------------------------------------------------------------------
def number_input(page, label: str):
    return page.get_by_role("spinbutton", name=label, exact=True)


def set_number(page, label: str, value) -> None:
    """Type ``value`` into the number input ``label``, press Enter, wait for the rerun."""
    box = number_input(page, label)
    box.fill(str(value))
    box.press("Enter")
    idle(page)


def text_input(page, label: str | re.Pattern):
    return page.get_by_role("textbox", name=label)


def set_text(page, label, value: str) -> None:
    box = text_input(page, label)
    box.fill(value)
    box.press("Enter")
    idle(page)


def selectbox(page, label: str):
    """The combobox input of the selectbox ``label`` (its value is the option shown)."""
    return page.locator('[data-testid="stSelectbox"]').filter(
        has=page.get_by_role("combobox", name=label, exact=True)).get_by_role("combobox")


def choose_option(page, label: str, option: str) -> None:
    """Open the selectbox ``label``, click ``option`` (its displayed text), wait for the rerun."""
    for attempt in range(3):
        box = selectbox(page, label)
        # In the middle of the window first, as a person would scroll it: at the window's bottom edge the
        # list opens below it and no option is there to click (Playwright scrolls only until it is visible).
        box.evaluate("e => e.scrollIntoView({block: 'center'})")
        box.click()
        try:
            page.get_by_role("option", name=option, exact=True).click(timeout=15_000)
            break
        except Exception:  # noqa: BLE001 - a rerun redrew the list under the click ("detached"): open it again
            if attempt == 2:
                raise
            page.keyboard.press("Escape")
            idle(page)
    idle(page)


def multiselect(page, label: str):
    return page.locator('[data-testid="stMultiSelect"]').filter(
        has=page.locator('[data-testid="stWidgetLabel"]', has_text=re.compile(rf"^{re.escape(label)}$")))


def multiselect_values(page, label: str) -> list[str]:
    """The chosen options' displayed texts, in order."""
    return multiselect(page, label).locator("[data-tag] [title]").evaluate_all(
        "els => els.map(e => e.getAttribute('title'))")


def multiselect_add(page, label: str, typed: str, option: str) -> None:
    """Click the multiselect ``label``, type ``typed``, click ``option`` in the filtered list, wait."""
    box = multiselect(page, label).get_by_role("combobox")
    box.click()
    box.fill(typed)
    page.get_by_role("option", name=option, exact=True).click()
    box.press("Escape")
    idle(page)


def checkbox(page, label: str):
    return page.get_by_role("checkbox", name=label, exact=True)


def tick(page, label: str) -> None:
    page.locator('[data-testid="stCheckbox"]').filter(has=checkbox(page, label)).locator("label").first.click()
    idle(page)


def metric(page, label: str) -> str:
    """The value shown by the metric ``label`` (text as displayed)."""
    return page.locator('[data-testid="stMetric"]').filter(
        has=page.locator('[data-testid="stMetricLabel"]', has_text=re.compile(rf"^{re.escape(label)}$"))
    ).locator('[data-testid="stMetricValue"]').first.inner_text().strip()


def metric_int(page, label: str) -> int:
    return int(metric(page, label).replace(",", ""))


def table_cell(page, row_text: str, column: int = -1) -> str:
    """The text of cell ``column`` of the first table row that contains ``row_text``."""
    row = page.locator("table tr", has_text=row_text).first
    return row.locator("td, th").nth(column).inner_text().strip() if column >= 0 else \
        row.locator("td, th").last.inner_text().strip()


def crashes(page) -> list[str]:
    """What a user would see as a crash: Streamlit's exception boxes, or a Python traceback."""
    found = [t.strip()[:600] for t in page.locator('[data-testid="stException"]').all_inner_texts()]
    body = page.locator("body").inner_text()
    if "Traceback" in body and not found:
        i = body.index("Traceback")
        found.append(body[i:i + 600])
    return found


def error_axes(page) -> list[dict]:
    """Every drawn Plotly y axis whose title says 'test error' (or MSE): its title and range."""
    return page.evaluate("""() => {
        const out = [];
        for (const el of document.querySelectorAll('.js-plotly-plot')) {
            const lay = el._fullLayout;
            if (!lay) continue;
            for (const key of Object.keys(lay)) {
                if (!/^yaxis\\d*$/.test(key)) continue;
                const ax = lay[key];
                const title = (ax.title && ax.title.text) || '';
                const fig = (lay.title && lay.title.text) || '';
                if (/test (error|MSE)/i.test(title) || /^test (error|mean)/i.test(fig))
                    out.push({figure: fig, axis: key, title: title, range: ax.range});
            }
        }
        return out;
    }""")


def shot(page, name: str) -> None:
    """A full-page screenshot to /tmp/shots/<name>.png, for people to look at."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        idle(page, timeout=20_000)
    except Exception:  # noqa: BLE001 - a page still running a live chart: take it as it is
        pass
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
