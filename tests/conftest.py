"""Shared test setup: the run history goes to a temporary file, never the user's data directory;
the browser tests share one headless chromium (``browser``) and, unless a module needs its own, one
server (``server``)."""

import contextlib
import os
import tempfile
from pathlib import Path

import pytest

# Before anything imports fedviz.runner: the process-wide manager reads FEDVIZ_DB once.
# The kernels' background warm-up at server start (app.py) would compete with the tests for the two
# cores; the browser test that checks it turns it on for its own server.
os.environ.setdefault("FEDVIZ_WARMUP", "0")
# Each test process its own history: pytest-xdist's workers inherit the controller's environment, and a
# history the controller made for itself would be shared by every worker (one worker's runs counted by
# another's test).  A user's own FEDVIZ_DB is left alone.
if "FEDVIZ_DB" not in os.environ or os.environ.get("FEDVIZ_TESTS_DB_PID") not in (None, str(os.getpid())):
    os.environ["FEDVIZ_DB"] = str(Path(tempfile.mkdtemp(prefix="fedviz-tests-")) / "runs.sqlite")
    os.environ["FEDVIZ_TESTS_DB_PID"] = str(os.getpid())

#: The repository, and the real LIBSVM files the tests read, kept in it (tests/data; its README names each
#: file's source), so a fresh clone with nothing beside it runs its own tests.
ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def plain(markdown: str) -> str:
    """The text a reader sees of a message the pages pass through :func:`fedviz.markup.escape`: its
    backslash escapes resolved and its zero-width spaces dropped (AppTest reports the Markdown source)."""
    import re

    return re.sub(r"\\(.)", r"\1", markdown).replace("\u200b", "")


@pytest.fixture(scope="session")
def browser():
    """Debian's chromium under Playwright, started once for all the browser tests."""
    from live_server import chromium

    with chromium() as b:
        yield b


@pytest.fixture(scope="session")
def shared_server(tmp_path_factory):
    """One ``streamlit run app.py`` with the default environment and a history of its own, started once
    for every browser module that needs nothing else (each module starting its own cost a start, the
    first page's imports and the data sets built again: several seconds each, sixteen times)."""
    from live_server import StreamlitServer

    tmp = tmp_path_factory.mktemp("shared-server")
    with StreamlitServer(tmp / "runs.sqlite", tmp / "server.log") as s:
        yield s


@pytest.fixture(scope="module")
def server(shared_server):
    """The shared server (:func:`shared_server`), for a module of browser tests.

    Sharing it is sound because every module's tests open their pages in fresh browser contexts (fresh
    Streamlit sessions, so no widget state carries over) and none counts the runs of the whole history.
    A module that needs its own environment (``FEDVIZ_MAX_RUNS``, ``FEDVIZ_OPERATOR``, ...), a fresh
    start or an empty history defines its own ``server`` fixture, which overrides this one.  After the
    module, its runs have ended: a run left going would take a slot and CPU from the next module.
    """
    yield shared_server
    shared_server.wait_without_runs()


@pytest.fixture(autouse=True)
def _alone(request):
    """Under pytest-xdist, a test marked ``alone`` (it measures a latency or a rate against a bound, e.g.
    Stop within a second) runs while no other worker runs a test; the others run side by side.

    A readers-writer lock between the workers' processes, on two files named by the run's id: every test
    holds ``data`` shared, an ``alone`` test holds it exclusively; ``gate`` gives the lone test its turn
    (a worker about to start a test passes the gate first, so a waiting lone test is not starved by
    tests that keep starting on the other worker).  Without xdist a test runs alone anyway.

    Yields what :func:`timed_alone` hands a test whose timed part is short beside its setup.
    """
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None:
        yield contextlib.nullcontext
        return
    import fcntl

    alone = request.node.get_closest_marker("alone") is not None
    base = Path(tempfile.gettempdir()) / f"fedviz-tests-{run}"
    with open(f"{base}.gate", "a") as gate, open(f"{base}.data", "a") as data:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(data, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:
                fcntl.flock(gate, fcntl.LOCK_UN)

        @contextlib.contextmanager
        def section():
            if alone:  # the whole test holds the lock already
                yield
                return
            # Nothing held while waiting at the gate: two workers each holding ``data`` shared and each waiting
            # for the other's to go would wait for ever.
            fcntl.flock(data, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_EX)
            try:
                fcntl.flock(data, fcntl.LOCK_EX)
                yield
            finally:
                fcntl.flock(data, fcntl.LOCK_SH)  # back to shared (from exclusive: at once)
                fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield section
        finally:
            fcntl.flock(data, fcntl.LOCK_UN)
            if alone:
                fcntl.flock(gate, fcntl.LOCK_UN)


@pytest.fixture
def timed_alone(_alone):
    """``with timed_alone():`` runs a block while no other test runs (the ``alone`` lock, for that block
    only): for a test whose timed part is seconds of a setup that is minutes long (Stop at the paper's
    scale), so the other worker is idle only while the timing runs, not while the setup does."""
    return _alone


#: The tests' kinds, one folder each; a test is marked with its folder's kind, so
#: ``-m unit`` (or ``python -m pytest tests/unit``) runs one kind alone.
KINDS = ("unit", "integration", "browser")
#: Tests that build the paper's full google-plus (2.2M rows; minutes and GBs), marked ``paper_scale``.
PAPER_SCALE = ("test_stop_paper_scale.py",)


def pytest_collection_modifyitems(config, items):
    """Mark each test with its kind, ``paper_scale`` where it builds the paper's data, and ``quick`` where it
    belongs to the tier for every edit: a unit test (one module against its oracle, in-process) that is not
    marked ``slow`` (docs/testing.md)."""
    for item in items:
        path = Path(str(item.path))
        kind = path.parent.name
        if kind in KINDS:
            item.add_marker(getattr(pytest.mark, kind))
        if path.name in PAPER_SCALE:
            item.add_marker(pytest.mark.paper_scale)
        if kind == "unit" and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.quick)
