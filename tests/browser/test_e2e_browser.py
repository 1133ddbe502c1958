"""End to end in real headless Chromium (Debian's), driven by Playwright, against
``streamlit run app.py`` on a free port (both from ``live_server``).

Set FEDVIZ_SCREENSHOTS=DIR to keep a screenshot of every page (the README's pictures).
"""

import os
import re
import time
from pathlib import Path

import pytest

from conftest import DATA, ROOT
from live_server import StreamlitServer, browser_page, idle, run_button

SHOTS = os.environ.get("FEDVIZ_SCREENSHOTS")


@pytest.fixture(scope="module")
def page(server, browser):
    with browser_page(browser) as pg:
        yield pg


def _shot(page, name):
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.wait_for_timeout(800)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def _points(page) -> int:
    """Points in the first live chart's first curve (0 when there is no chart yet)."""
    return page.evaluate("""() => {
        const el = document.querySelector('.js-plotly-plot');
        // _fullData holds the decoded arrays (data may keep Plotly's base64 form).
        if (!el || !el._fullData) return 0;
        return el._fullData.reduce((n, t) => n + (t.x && t.x.length ? t.x.length : 0), 0);
    }""")


def test_dashboard_end_to_end(server, page):
    # 1. Home, then generate a small data set on the Data page.
    page.goto(server.url)
    page.get_by_text("Reproduce the paper's experiment").first.wait_for()
    _shot(page, "home")
    page.goto(server.url + "/data")
    page.get_by_text("Nodes K").first.wait_for()
    idle(page)
    nodes = page.get_by_role("spinbutton", name="Nodes K")
    nodes.fill("60")
    nodes.press("Enter")
    idle(page)
    page.locator('[data-testid="stMetricValue"]', has_text=re.compile(r"^60$")).first.wait_for()
    page.locator(".js-plotly-plot").first.wait_for()
    _shot(page, "data")

    # 2. Start two algorithms and watch the chart update at least three times.
    page.goto(server.url + "/run?algorithms=gd,fsvrg&iterations=10000")  # the paper's 500 users
    run_button = page.get_by_role("button").filter(has_text=re.compile(r"\bRun$"))
    run_button.wait_for()
    idle(page)
    run_button.click()
    seen = []
    deadline = time.time() + 120
    while time.time() < deadline and len(set(seen)) < 4:
        seen.append(_points(page))
        page.wait_for_timeout(400)
    updates = sorted(set(seen) - {0})
    assert len(updates) >= 3, f"chart point counts seen: {seen}"
    _shot(page, "run")

    # 3. Stop the run; the statuses say so.
    page.get_by_role("button").filter(has_text=re.compile(r"\bStop$")).last.click()
    page.get_by_text(re.compile(r"stopped")).first.wait_for(timeout=15_000)

    # 4. Upload heart_scale through the real file chooser and see its statistics (in the same tab: a
    # link opens a new session, and Compare lists a session its own runs).
    page.get_by_test_id("stSidebarNavLink").filter(has_text=re.compile(r"Data$")).first.click()
    page.get_by_text("Upload a LIBSVM file").click()
    idle(page)
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name=re.compile("Browse files|Upload")).first.click()
    chooser.value.set_files(str(DATA / "heart_scale"))
    page.locator('[data-testid="stMetricValue"]', has_text=re.compile(r"^13$")).first.wait_for()
    page.get_by_text("heart_scale").first.wait_for()

    # 5. Open Compare: the stopped run is in the history.
    page.get_by_role("link", name=re.compile("Compare")).first.click()
    page.get_by_text("Runs to overlay").first.wait_for()
    page.get_by_text(re.compile(r"stopped")).first.wait_for()
    _shot(page, "compare")


def test_a_shared_link_as_the_first_request_after_a_start_goes_through_app_py(tmp_path, browser):
    """Until some session has called ``st.navigation``, Streamlit runs a script of pages/ on
    its own (its older multipage layout): a link to /run as the first request after a start
    got Streamlit's file-name sidebar ('app', 'compare', …) and no page config.  It must get
    the app's navigation, and keep the link's settings."""
    with StreamlitServer(tmp_path / "runs.sqlite", tmp_path / "server.log") as s:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        try:
            page = context.new_page()
            page.set_default_timeout(60_000)
            page.goto(s.url + "/run?iterations=7")
            run_button(page).wait_for()
            idle(page)
            links = page.get_by_test_id("stSidebarNavLink").all_inner_texts()
            # Every page of app.py's navigation, in its order (each link's text is its icon's name, then its title).
            titles = re.findall(r'st\.Page\("pages/[^"]+", title="([^"]+)"', (ROOT / "app.py").read_text())
            assert len(links) == len(titles) >= 4 and all(t.strip().endswith(w) for t, w in zip(links, titles)), \
                (links, titles)
            assert page.get_by_role("spinbutton", name="Iterations").input_value() == "7"
        finally:
            context.close()
