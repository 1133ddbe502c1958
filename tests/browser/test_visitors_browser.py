"""Users apart in a real browser (issue 21, point 4): two browser contexts are two Streamlit sessions with
their own ids.  Visitor A's run is in A's Compare history and not in B's; the command line's run is in
both; a reloaded tab is a new visitor (docs/sharing.md says so).  The AppTest in
tests/integration/test_visitors_apart.py covers the uploaded file's name."""

from __future__ import annotations

import re
import sqlite3
import time

from browser_user import go_sidebar, open_page
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
    # Two browsers on one machine stand for two machines: FEDVIZ_OPERATOR=none makes every browser a
    # visitor (by default a browser on the server's own machine is its operator and sees every run).
    with StreamlitServer(db, tmp_path / "server.log", env={"FEDVIZ_OPERATOR": "none"}) as server, browser_page(browser) as a, \
            browser_page(browser) as b:
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
