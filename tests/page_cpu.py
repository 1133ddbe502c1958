"""Chromium's CPU seconds for one page load of a running server, second by second (docs/testing.md).

    python tests/page_cpu.py http://127.0.0.1:8501/data

Each chromium process's user and system time is read from ``/proc`` every second for 20 s after the
navigation starts (a closed page's renderer takes its time with it, so the page stays open while measured).
To price one chart, compare with a server whose page leaves it out.
"""

from __future__ import annotations

import glob
import os
import sys
import time

from live_server import CHROMIUM, CHROMIUM_ARGS


def chromium_cpu() -> float:
    """User plus system seconds of every live process whose name starts with "chrom"."""
    total = 0.0
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            text = open(stat).read()
        except OSError:
            continue
        if text[text.index("(") + 1:text.rindex(")")].startswith("chrom"):
            fields = text[text.rindex(")") + 2:].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def main(url: str, seconds: int = 20) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=list(CHROMIUM_ARGS))
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        start = previous = chromium_cpu()
        page.goto(url, wait_until="commit")
        per_second = []
        for _ in range(seconds):
            page.wait_for_timeout(1000)
            now = chromium_cpu()
            per_second.append(round(now - previous, 1))
            previous = now
        print(f"{url}: chromium CPU {previous - start:.1f} s; per second {per_second}")
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1])
