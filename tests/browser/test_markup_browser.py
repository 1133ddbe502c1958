"""Visitors' text shows as text (issue 21, point 5), checked where it is rendered: Streamlit's
Markdown in a real Chromium.

Issue 21 found a link key ``[Session expired - sign in again](https://…)`` rendered as a
clickable link in a warning, and ``![t](http://host/pixel.png)`` making the visitor's browser
fetch it.  Each hostile string goes through :func:`fedviz.markup.literal` into ``st.markdown``,
``st.warning`` and ``st.caption``; the page must show its characters exactly, hold no link,
image, math or icon made from it, and request nothing outside the server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import ROOT
from live_server import free_port, idle

CASES = [
    "[Session expired - sign in again](https://evil.example/login)",
    "![t](http://evil.example/pixel.png)",
    "<img src=http://evil.example/x.png onerror=alert(1)>",
    "**bold** _it_ ~~s~~ `code` ``two``",
    ":red[alarm] :material/warning: :smile: :rocket:",
    "$x^2$ and $$\\int$$",
    "# heading\n- item\n> quote",
    "`",
    "a`b``c",
    "   ",
    "https://evil.example/auto-link",
    "line1\nline2\r\nline3",
    "\\[escaped\\] & &amp; <b>",
    # An error of the Personalise page as escape() sends it (issue 32's minor point: the protobuf carries
    # unseen\\=0\\.5, and the page must read unseen=0.5).
    "unseen=0.5, nodes=40: λ=1.5e-3 (a) #1 +2 -3 *4 _5 !6 |7 {8} ~9 5. 6)",
]


def _expected(s: str) -> str:
    """What the visitor must read: the characters, control characters as spaces."""
    return "".join(" " if ord(c) < 32 else c for c in s)


@pytest.fixture
def markup_server(tmp_path):
    port = free_port()
    env = {**os.environ, "FEDVIZ_MARKUP_CASES": json.dumps(CASES), "PYTHONPATH": str(ROOT)}
    with open(tmp_path / "server.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "tests" / "browser" / "markup_app.py"),
                                 "--server.headless", "true", "--server.port", str(port), "--server.address",
                                 "127.0.0.1", "--browser.gatherUsageStats", "false"],
                                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2):
                break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()
            time.sleep(0.2)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


def test_hostile_text_renders_as_its_characters(markup_server, browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    outside = []
    context.on("request", lambda r: outside.append(r.url) if "127.0.0.1" not in r.url and not r.url.startswith("data:")
               else None)
    try:
        page = context.new_page()
        page.goto(markup_server)
        page.get_by_text("END").wait_for(timeout=60_000)
        idle(page)
        main = page.locator("[data-testid='stMain']")
        links = main.locator("a[href*='evil']")
        assert links.count() == 0, [links.nth(i).evaluate("e => e.parentElement.textContent") for i in range(links.count())]
        assert main.locator("img").count() == 0
        assert main.locator(".katex").count() == 0
        assert main.locator("h1, h2, h3, ul, blockquote, strong, em, del").count() == 0
        for k, s in enumerate(CASES):
            for prefix in ("m", "w", "c"):
                el = main.get_by_text(f"{prefix}{k}: before", exact=False).first
                code = el.locator("code").first
                got = code.evaluate("e => e.textContent")
                shown = got.replace("\u00a0", " ").replace("\u200b", "").strip()
                assert shown == _expected(s).strip(), (prefix, k, got, s)
                # Nothing of the string was turned into an icon or an emoji image around it.
                assert el.locator("[data-testid='stIconMaterial'], img").count() == 0, (prefix, k)
            # escape(): the same characters in prose, with no code span around them.
            el = main.get_by_text(f"e{k}: before", exact=False).first
            text = " ".join(el.evaluate("e => e.textContent").replace("\u200b", "").split())
            assert text == " ".join(f"e{k}: before {_expected(s)} after".split()), (k, text, s)
            assert el.locator("a, img, code, strong, em, del, .katex, [data-testid='stIconMaterial']").count() == 0, k
        assert not [u for u in outside if "evil" in u], outside
    finally:
        context.close()


def test_a_link_key_made_of_markdown_is_shown_as_text(server, browser):
    """Issue 21's case on the dashboard itself: a link key ``[Session expired - sign in again](https://…)``
    rendered as a clickable link in the page's warning, and an image key made the browser fetch it."""
    from urllib.parse import quote, urlsplit

    keys = ["[Session expired - sign in again](https://evil.example/login)", "![t](http://evil.example/p.png)"]
    query = "&".join(f"{quote(k, safe='')}=1" for k in keys)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    outside = []
    context.on("request", lambda r: outside.append(r.url) if urlsplit(r.url).hostname == "evil.example" else None)
    try:
        page = context.new_page()
        page.goto(f"{server.url}/run?{query}")
        page.get_by_text("Ignored a setting from the link").first.wait_for(timeout=60_000)
        idle(page)
        main = page.locator("[data-testid='stMain']")
        assert main.locator("a[href*='evil']").count() == 0 and main.locator("img[src*='evil']").count() == 0
        shown = " ".join(main.locator("[data-testid='stAlert'] code").all_text_contents())
        for k in keys:
            assert k in shown, shown
        assert not outside, outside
    finally:
        context.close()
