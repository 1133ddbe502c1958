"""Users apart in a real browser (issue 21, point 4): two browser contexts are two Streamlit sessions with
their own ids.  Visitor A's run is in A's Compare history and not in B's; the command line's run is in
both; a reloaded tab is a new visitor (docs/sharing.md says so).  The AppTest in
tests/integration/test_visitors_apart.py covers the uploaded file's name.

The operator (issue 32, point 4) is the tab that presented the operator's token, not a browser on the
server's machine: through a TCP forwarder on 127.0.0.1 (what ``ssh -L`` or socat make, a relay that adds no
header) a browser is a visitor, and the same browser with the token sees every run."""

from __future__ import annotations

import re
import socket
import sqlite3
import threading
import time
import urllib.parse
from contextlib import contextmanager

from browser_user import go_sidebar, observe, open_page, query
from live_server import StreamlitServer, browser_page, run_button
from fedviz.runner.history.store import RunStore


def _history(page) -> str:
    """The Compare page's History tab as a visitor reads it: its caption and the runs drawn (their chips)."""
    page.get_by_text(re.compile("^Listed: the runs started in this tab")).wait_for()
    return page.get_by_test_id("stMultiSelect").first.inner_text()


def test_a_visitors_run_is_listed_to_it_only(tmp_path, browser):
    db = tmp_path / "runs.sqlite"
    with RunStore(db) as s:
        cli = s.create_run(label="CLI", algorithm="gd", status="done")
    # Two browsers on one machine stand for two machines: every browser is a visitor unless its link
    # presents the operator's token, wherever it connects from (the test below).
    with StreamlitServer(db, tmp_path / "server.log") as server, browser_page(browser) as a, browser_page(browser) as b:
        open_page(a, f"{server.url}/run?data=identical-nodes&algorithms=gd&iterations=3")
        run_button(a).click()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with sqlite3.connect(db) as con:
                done = con.execute("SELECT id FROM runs WHERE label = 'GD' AND status = 'done'").fetchall()
            if done:
                break
            time.sleep(0.2)
        ((run_a,),) = done
        go_sidebar(a, "Compare")  # the same tab (a link would open a new session)
        mine = _history(a)
        assert f"#{run_a} GD" in mine and f"#{cli} CLI" in mine, mine

        open_page(b, f"{server.url}/compare")
        theirs = _history(b)
        assert f"#{cli} CLI" in theirs and f"#{run_a} " not in theirs, theirs

        a.reload()
        a.get_by_test_id("stSidebarNavLink").first.wait_for()
        after = _history(a)
        assert f"#{cli} CLI" in after and f"#{run_a} " not in after, after


@contextmanager
def _forwarder(port: int):
    """A plain TCP relay on 127.0.0.1 to ``port`` (as ``ssh -L`` or socat would be): yields its own port."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def pipe(a, b):
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def serve():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", port))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=pipe, args=(a, b), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()
        thread.join(timeout=5)


def test_through_a_forwarder_a_browser_is_a_visitor_and_the_token_makes_it_the_operator(tmp_path, browser):
    token = "class-server-operator-token-0123"
    db = tmp_path / "runs.sqlite"
    with RunStore(db) as s:
        theirs = s.create_run(label="another visitor's", algorithm="gd", status="done", session="visitor-z")
    log = tmp_path / "server.log"
    with StreamlitServer(db, log, env={"FEDVIZ_OPERATOR_TOKEN": token}) as server, \
            _forwarder(urllib.parse.urlsplit(server.url).port) as port, browser_page(browser) as a, \
            browser_page(browser) as b:
        relayed = f"http://127.0.0.1:{port}"
        open_page(a, f"{relayed}/compare")
        seen = a.get_by_text(re.compile("^Listed: ")).first.inner_text()
        assert seen.startswith("Listed: the runs started in this tab"), seen
        page_text = a.locator("body").inner_text()
        assert f"#{theirs} " not in page_text, page_text

        open_page(b, f"{relayed}/compare?operator={token}")
        listed = observe(lambda: b.get_by_text(re.compile("^Listed: ")).first.inner_text(),
                         lambda text: text.startswith("Listed: every run"), page=b)
        assert listed.startswith("Listed: every run in this server's history"), listed
        assert f"#{theirs} " in b.get_by_test_id("stMultiSelect").first.inner_text()
        assert "operator" not in query(b), b.url  # taken out of the address: a copied link does not carry it
    assert f"?operator={token}" in log.read_text()  # the link, printed in the server's terminal
