"""Visitors upload a file each and leave: the server's memory returns to where it was
(issue 21, point 3: "a session's uploads and data sets freed when it ends").

Before, a closed tab's session was kept by Streamlit for reconnects and then dropped without
being shut down, so its uploaded bytes stayed in the server for good, and the dashboard's
caches kept the data sets built from them (a 190 MB upload kept 638 MB after its session
ended).  Now a session still disconnected ``FEDVIZ_SESSION_KEEP`` seconds after its tab
closed is ended (:mod:`fedviz.ui.sessions`), and the data sets only it asked for leave the
caches (:func:`fedviz.runner.cache.release`).  Each visitor has its own file (distinct data
sets: nothing shared between them hides a leak).
"""

from __future__ import annotations

import functools
import re
import time

import numpy as np
import pytest

from browser_user import observe
from live_server import StreamlitServer
from ws_session import WsSession

pytestmark = pytest.mark.slow  # eight visitors, each uploading ~10 MB that the server parses and solves

#: Eight, not the twenty the figures of docs/sharing.md were measured with: each leak fixed so far kept 23 to 42 MB
#: per visitor (460 and 836 MB for twenty), so eight would keep 184 MB or more, over twice :data:`RSS_SLACK_MB`,
#: at two fifths of the test's time.
VISITORS = 8
ROWS, NNZ, WIDTH = 40_000, 24, 2_000
#: Seconds a closed tab's session is kept for a reconnect in this test (60 by default).
KEEP = 3
#: Memory the server may keep beyond its count after the first visitor left: the allocator's
#: high-water mark and Streamlit's per-session bookkeeping.  Without the fix the twenty uploads
#: alone (≈ 9 MB each) and the data sets built from them hold several hundred MB.
RSS_SLACK_MB = 80


@functools.cache
def _rows() -> tuple[str, ...]:
    """ROWS LIBSVM lines of NNZ features each (one drawn in each of NNZ equal bands of the WIDTH
    columns: distinct and sorted, as the format wants), labels +1 with probability 0.4.  Made with
    whole-array draws once, in well under a second; a loop drawing row by row took 5 s per file."""
    rng = np.random.default_rng(21)
    edges = np.linspace(0, WIDTH, NNZ + 1).astype(np.int64)
    cols = 1 + edges[:-1] + (rng.random((ROWS, NNZ)) * np.diff(edges)).astype(np.int64)
    values = rng.random((ROWS, NNZ))
    labels = np.where(rng.random(ROWS) < 0.4, "+1", "-1")
    pairs = np.empty((ROWS, 2 * NNZ), dtype=object)
    pairs[:, 0::2], pairs[:, 1::2] = cols, values
    line = "%s " + " ".join(["%d:%.3f"] * NNZ)
    return tuple(line % (label, *row) for label, row in zip(labels, pairs.tolist()))


def _write(path, seed: int) -> int:
    """A visitor's file: the rows of :func:`_rows` in an order of its own (so other bytes, another
    fingerprint and its own data set and split, as a distinct upload would give); returns its size."""
    rows = _rows()
    order = np.random.default_rng(seed).permutation(len(rows))
    path.write_text("\n".join(rows[i] for i in order) + "\n")
    return path.stat().st_size


OPTIMUM = re.compile(r"^Optimum: f\* =")


def _visit(url: str, path) -> None:
    """Open Data, upload ``path``, wait for its statistics and baselines, close the tab.

    The visitor is a websocket client (:class:`ws_session.WsSession`), which makes the server do what a
    browser's tab makes it do (the same messages, the same upload) without drawing the page: what is
    measured is the server's memory, and chromium drawing nine Data pages took three times the server's
    CPU (50 s against 17 s) on the two cores both share.
    """
    with WsSession(url + "/data", timeout=120) as visitor:
        visitor.load()
        visitor.choose("Source", "Upload a LIBSVM file")
        visitor.upload("Training file", path)
        visitor.wait_text(OPTIMUM)  # the data set built, its optimum solved


def _settled_rss(server, seconds: float) -> float:
    """The server's resident memory once sessions closed ``seconds`` ago have ended."""
    time.sleep(seconds)
    return server.rss_mb()


def test_visitors_upload_and_leave_and_the_memory_returns(tmp_path):
    files = [tmp_path / f"visitor{k}.svm" for k in range(VISITORS + 1)]
    size_mb = sum(_write(f, seed=k) for k, f in enumerate(files)) / (len(files) << 20)
    env = {"FEDVIZ_SESSION_KEEP": str(KEEP), "FEDVIZ_WARMUP": "0"}
    with StreamlitServer(tmp_path / "runs.sqlite", tmp_path / "server.log", env=env) as server:
        _visit(server.url, files[-1])  # the first visitor: imports, kernels, Streamlit's caches
        rss0 = _settled_rss(server, KEEP + 4)
        for path in files[:-1]:  # one after another, each leaving before the next arrives
            _visit(server.url, path)
        # The last session ends KEEP s after its tab closed; then the memory returns.  Read until it has
        # (no fixed wait when it does), at most KEEP + 6 s (what a server that keeps it is given).
        rss1 = observe(server.rss_mb, lambda rss: rss - rss0 < RSS_SLACK_MB, timeout_ms=1000 * (KEEP + 6))
    grown = rss1 - rss0
    assert grown < RSS_SLACK_MB, (
        f"{VISITORS} visitors uploaded a {size_mb:.1f} MB file each and left; the server holds {grown:.0f} MB "
        f"more than after the first one left ({rss0:.0f} → {rss1:.0f} MB)")
