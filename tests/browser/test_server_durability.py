"""Durability of the real server (issue 6, point 5): SIGKILL during a run loses no completed run.

A browser starts two runs from shared links to the Run page, as a user would: a short
one that completes, then a long one.  Once the long run has iterations in the history,
the server's whole process group is killed with SIGKILL, so no shutdown code runs.  A
new server on the same ``FEDVIZ_DB`` must hold the completed run intact (every
iteration, status done, the same numbers) and the interrupted run up to its last
committed iteration, marked ``interrupted``, and its Compare page must list both so.
(tests/unit/test_store.py kills a bare writer process; this kills the dashboard itself.)
"""

import math
import re
import signal
import sqlite3
import time
from contextlib import closing
from dataclasses import astuple

from live_server import StreamlitServer, idle, run_button

from fedviz.runner.history.describe import INTERRUPTED_MESSAGE
from fedviz.runner.history.store import RunStore
from fedviz.runner.serve.operator import LINK_KEY

DATA = "data=google-plus-small%3Fnodes%3D60&algorithms=gd,fsvrg"
SHORT_ITERATIONS = 20
SHORT = f"/run?{DATA}&iterations={SHORT_ITERATIONS}"
LONG = f"/run?{DATA}&iterations=10000"  # would take minutes
ALGORITHMS = {"GD", "FSVRG"}


def _key(rec):
    """A record as a tuple in which NaN equals NaN."""
    return tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in astuple(rec))


def _runs(db) -> dict[int, tuple[str, str, int]]:
    """id → (label, status, stored records), read-only: this process must not touch the file."""
    if not db.exists():  # the server creates it on first use
        return {}
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as c:
        if not c.execute("SELECT 1 FROM sqlite_master WHERE name = 'runs'").fetchone():  # being created
            return {}
        rows = c.execute("SELECT id, label, status, (SELECT COUNT(*) FROM records r WHERE r.run_id = runs.id) "
                         "FROM runs ORDER BY id").fetchall()
    return {i: (label, status, n) for i, label, status, n in rows}


def _until(predicate, what: str, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        time.sleep(0.2)


def _token(db) -> str:
    """The operator token the servers on ``db`` share (the file they made beside it), read as the operator would."""
    return (db.parent / "operator-token").read_text().strip()


def _start_run(page, url):
    page.goto(url)
    run_button(page).wait_for()
    idle(page)
    run_button(page).click()


def test_sigkill_during_a_run_keeps_the_history(tmp_path, browser):
    db = tmp_path / "runs.sqlite"
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        with StreamlitServer(db, tmp_path / "first.log") as first:
            _start_run(page, first.url + SHORT)
            _until(lambda: [s for _, s, _ in _runs(db).values()] == ["done", "done"], "the short run completes")
            short = sorted(_runs(db))
            _start_run(page, first.url + LONG)
            _until(lambda: len(_runs(db)) == 4 and all(n >= 5 and s == "running" for i, (_, s, n)
                                                       in _runs(db).items() if i not in short),
                   "the long run stores five iterations of each algorithm")
            long = sorted(set(_runs(db)) - set(short))
            with RunStore(db) as store:
                before = {i: [_key(r) for r in store.records(i)] for i in short + long}
            first.kill()
            assert first.proc.returncode == -signal.SIGKILL
        # The file as the dead server left it: the long run still says 'running'.
        assert {i: s for i, (_, s, _) in _runs(db).items()} == {**dict.fromkeys(short, "done"),
                                                                **dict.fromkeys(long, "running")}

        with StreamlitServer(db, tmp_path / "second.log") as second:
            # The operator's link (the token beside the history, the same for both servers): the runs of a
            # tab of the dead server are listed to the operator only.  The first page that opens the
            # history marks the dead runs.
            page.goto(second.url + f"/compare?{LINK_KEY}={_token(db)}")
            page.get_by_text("Runs to overlay").first.wait_for()
            # History lists every run as "#id label · status · …", newest first: the three newest
            # are chosen for the overlay, the others wait in the picker's list.
            picker = page.locator('[data-testid="stMultiSelect"]').first
            texts = picker.locator("[data-tag] > span[title]").evaluate_all("tags => tags.map(t => t.title)")
            picker.get_by_role("combobox").click()
            page.get_by_role("option").first.wait_for()
            texts += page.get_by_role("option").all_inner_texts()
            listed = {int(m[1]): m[2] for text in texts if (m := re.match(r"#(\d+) \S+ · (\w+) ·", text))}

        with RunStore(db) as store:
            for i in short:
                run = store.get_run(i)
                assert (run.status, run.label in ALGORITHMS, run.finished is not None) == ("done", True, True)
                recs = store.records(i)
                assert [_key(r) for r in recs] == before[i]
                assert [r.iteration for r in recs] == list(range(SHORT_ITERATIONS + 1))  # 0 is the start
                assert recs[-1].status == "done"
            for i in long:
                run = store.get_run(i)
                assert (run.status, run.message) == ("interrupted", INTERRUPTED_MESSAGE)
                recs = store.records(i)
                # Everything committed before the kill is there, unchanged, with no gap.
                assert [_key(r) for r in recs[: len(before[i])]] == before[i]
                assert [r.iteration for r in recs] == list(range(len(recs)))
    finally:
        context.close()
    assert listed == {**dict.fromkeys(short, "done"), **dict.fromkeys(long, "interrupted")}, texts
