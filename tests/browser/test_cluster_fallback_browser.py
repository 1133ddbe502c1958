"""A scheduler address that is not Dask leaves every page usable (issue 21, point 2).

Issue 21 found /run and /compare never loading (while /_stcore/health said OK) with
``FEDVIZ_DASK_SCHEDULER`` pointing at an HTTP server: the manager's lock was held while
Dask's client waited forever for a handshake.  Here a real server gets such an address;
every page must finish loading within 15 s (the bound the issue sets), and the Run page
must say that runs stay in the server and why.
"""

from __future__ import annotations

import http.server
import threading
import time

from live_server import StreamlitServer, idle

PAGES = ["/", "/data", "/run", "/compare", "/experiments"]


def test_a_non_dask_scheduler_leaves_every_page_loading(tmp_path, browser):
    http_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=http_server.serve_forever, daemon=True).start()
    address = f"tcp://127.0.0.1:{http_server.server_address[1]}"
    env = {"FEDVIZ_DASK_SCHEDULER": address, "FEDVIZ_DASK_INSECURE": "1"}
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        with StreamlitServer(tmp_path / "runs.sqlite", tmp_path / "server.log", env=env) as server:
            page = context.new_page()
            for path in PAGES:
                page.goto(server.url + path, timeout=15_000)
                idle(page, timeout=15_000)
                assert not page.locator("[data-testid='stException']").count(), path
            # The manager connects on a thread of its own: the Run page says so, then (after the
            # probe's deadline) why the runs stay in this server.
            deadline = time.monotonic() + 60
            while True:
                page.goto(server.url + "/run", timeout=15_000)
                idle(page, timeout=15_000)
                note = page.get_by_text("Runs execute in this server")
                note.wait_for(timeout=15_000)
                text = note.inner_text()
                if "while it connects" not in text or time.monotonic() > deadline:
                    break
                time.sleep(1)
            assert f"nothing at {address} answered as a Dask scheduler" in text, text
    finally:
        context.close()
        http_server.shutdown()
        http_server.server_close()
