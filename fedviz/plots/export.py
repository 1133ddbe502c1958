"""Static PNG export of a Plotly figure through headless Chromium (Debian's ``chromium``).

Plotly's own PNG export needs kaleido and a browser it downloads; fedviz already has
Chromium and Playwright for its browser tests, so it renders the standalone HTML there.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ..errors import FedvizError

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic",
                 "--no-first-run", "--disable-component-update", "--disable-sync"]


def write_png(fig, path: str | Path, *, scale: float = 1.0) -> None:
    """Render ``fig`` at its layout width × height and save a PNG."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise FedvizError("PNG export needs playwright (pip install playwright); write .html instead") from None
    if chromium is None:
        raise FedvizError("PNG export needs Chromium (apt-get install chromium); write .html instead")
    width = int(fig.layout.width or 1100)
    height = int(fig.layout.height or 450)
    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "figure.html"
        # Inline plotly.js: the page must render with no network.
        fig.write_html(str(html), include_plotlyjs=True, full_html=True, config={"staticPlot": True})
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=scale)
            page.goto(html.as_uri())
            page.wait_for_selector(".main-svg")
            page.locator(".js-plotly-plot").first.screenshot(path=str(path))
            browser.close()
