"""Shared test setup: the run history goes to a temporary file, never the user's data directory;
the browser tests share one headless chromium (``browser``)."""

import os
import tempfile
from pathlib import Path

import pytest

# Before anything imports fedviz.runner: the process-wide manager reads FEDVIZ_DB once.
# The kernels' background warm-up at server start (app.py) would compete with the tests for the two
# cores; the browser test that checks it turns it on for its own server.
os.environ.setdefault("FEDVIZ_WARMUP", "0")
os.environ.setdefault("FEDVIZ_DB", str(Path(tempfile.mkdtemp(prefix="fedviz-tests-")) / "runs.sqlite"))

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def browser():
    """Debian's chromium under Playwright, started once for all the browser tests."""
    from live_server import chromium

    with chromium() as b:
        yield b
