"""Real servers for the browser tests: ``streamlit run app.py`` on a free loopback port, and
Debian's headless chromium driven by Playwright.

This module owns starting and ending the server's process group (so a failing test
never leaves a server behind), reading the server's memory and threads from
``/proc`` (what an operator would see, no hook inside the app), and the small page
helpers every browser test needs.  The ``server`` and ``browser`` fixtures that use
it live in ``conftest.py`` (one server shared by the modules that need no environment of their own).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator, Mapping

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ("--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic",
                 "--no-first-run", "--disable-component-update", "--disable-sync")

#: The manager names its run workers ``fedviz-run-<id>``; Linux keeps 15 bytes of a thread's
#: name in ``/proc/<pid>/task/<tid>/comm``, which still begin with this.
RUN_THREAD_PREFIX = "fedviz-run"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StreamlitServer:
    """One ``streamlit run app.py --server.headless true`` on loopback, in its own process group.

    The group lets a test end the server with everything it started.  It is not a new
    session: Linux's autogroup scheduler would then split the CPU evenly between the
    server and the test's browser, whatever the priorities inside, and the browser on
    the same machine would measure the scheduler's split instead of the server (whose
    run workers yield to its own threads, and here to the browser standing in for the
    users' machines).

    Parameters
    ----------
    db : path
        The run history (``FEDVIZ_DB``): each server gets its own, or shares one on purpose.
    log : path
        Where the server's output goes.  A file, not a pipe: nobody reads a pipe while the
        test runs, and a full pipe would block the server's logging.
    env : mapping
        Extra environment variables (e.g. ``FEDVIZ_MAX_RUNS``).
    """

    def __init__(self, db: Path, log: Path, env: Mapping[str, str] | None = None):
        self.db, self.log, self.port = Path(db), Path(log), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "FEDVIZ_DB": str(db), **(env or {})}
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 90.0) -> "StreamlitServer":
        """Start the server and wait until its health endpoint answers.

        A server that exits at once is retried on another port: the free port found
        may be taken by another process before Streamlit binds it.
        """
        deadline = time.monotonic() + timeout
        for _ in range(3):
            with open(self.log, "ab") as out:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                     "--server.port", str(self.port), "--server.address", "127.0.0.1",
                     "--browser.gatherUsageStats", "false"],
                    cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT, process_group=0)
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    with urllib.request.urlopen(self.url + "/_stcore/health", timeout=2) as r:
                        if r.status == 200:
                            return self
                except OSError:
                    time.sleep(0.2)
            if self.proc.poll() is None:  # still starting at the deadline
                break
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}"
        self.stop()
        raise RuntimeError(f"streamlit did not start within {timeout:g} s:\n{self.output()}")

    @property
    def pid(self) -> int:
        assert self.proc is not None, "the server was not started"
        return self.proc.pid

    def output(self, tail: int = 4000) -> str:
        """The end of the server's log (for failure messages)."""
        try:
            return self.log.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    # -- what /proc says about the server process -------------------------------------------------
    def rss_mb(self) -> float:
        """Resident memory of the server process (``VmRSS``), in MiB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS line: is the server still alive?")

    def thread_names(self) -> list[str]:
        """The kernel's name of every thread of the server (``comm``, at most 15 bytes)."""
        names = []
        for comm in Path(f"/proc/{self.pid}/task").glob("*/comm"):
            with contextlib.suppress(OSError):  # a thread that ended while listing
                names.append(comm.read_text().strip())
        return names

    def run_threads(self) -> int:
        """How many run-worker threads the server has now."""
        return sum(name.startswith(RUN_THREAD_PREFIX) for name in self.thread_names())

    def wait_without_runs(self, timeout: float = 60.0) -> None:
        """Wait until the server runs no run (no run-worker thread is left): a closed tab's runs are
        stopped by the manager's reaper (after its grace for a reconnect), a finished run's thread ends."""
        deadline = time.monotonic() + timeout
        while self.run_threads():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server still runs {self.run_threads()} run(s) {timeout:g} s after "
                                   f"the tests that started them ended:\n{self.output()}")
            time.sleep(0.2)

    # -- ending it -----------------------------------------------------------------------------------
    def kill(self) -> None:
        """SIGKILL the whole process group, as a crash or the OOM killer would; waits for it."""
        self._signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        """SIGTERM (Streamlit shuts down cleanly), then SIGKILL after 20 s; idempotent."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self._signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.kill()

    def _signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def __enter__(self) -> "StreamlitServer":
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


#: Tabs (pages) of one persistent browser profile per Browser, for :func:`browser_page` (see :func:`chromium`).
_TABS: dict = {}
VIEWPORT = {"width": 1400, "height": 1000}


@contextlib.contextmanager
def chromium() -> Iterator:
    """Debian's chromium under Playwright, headless; closed (with Playwright) on exit.

    Beside the Browser (whose ``new_context()`` gives a test a context of its own), a second chromium keeps one
    persistent profile in a temporary folder, whose tabs :func:`browser_page` hands out.  A tab is a Streamlit
    session of its own (a session is a websocket; a visitor is a tab), and a profile on disk keeps V8's compiled
    code of Streamlit's scripts between pages: a page load cost about 1.2 s of chromium's CPU in such a tab
    against 2.4 s in a fresh incognito context, which compiles the frontend's JavaScript again every time
    (Home page, three loads each, CPU read from /proc/stat).
    """
    import tempfile

    import pytest

    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is a test dependency")
    if not Path(CHROMIUM).exists():  # a missing browser is a broken setup, not a skip
        raise RuntimeError("Debian's chromium is required for the browser tests: apt-get install chromium")
    with sync_api.sync_playwright() as p, tempfile.TemporaryDirectory(prefix="fedviz-chromium-") as profile:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=list(CHROMIUM_ARGS))
        tabs = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True,
                                                    args=list(CHROMIUM_ARGS), viewport=VIEWPORT)
        _TABS[browser] = tabs
        try:
            yield browser
        finally:
            _TABS.pop(browser, None)
            tabs.close()
            browser.close()


@contextlib.contextmanager
def browser_page(browser, timeout_ms: float = 60_000) -> Iterator:
    """A page that is a fresh Streamlit session, closed on exit: a new tab of :func:`chromium`'s persistent
    profile (its compiled scripts kept), or of a fresh context for a Browser started elsewhere."""
    tabs = _TABS.get(browser)
    context = browser.new_context(viewport=VIEWPORT) if tabs is None else None
    page = (context or tabs).new_page()
    try:
        page.set_default_timeout(timeout_ms)
        yield page
    finally:
        page.close()
        if context is not None:
            context.close()


# -- page helpers -------------------------------------------------------------------------------------
def idle(page, timeout: float = 120_000) -> None:
    """Wait until Streamlit finished rerunning the script (its status widget is gone)."""
    page.wait_for_timeout(300)
    page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout)


def run_button(page):
    import re

    return page.get_by_role("button").filter(has_text=re.compile(r"\bRun$"))


def screenshot(page, name: str, *, height: int = 1000, settle: int = 1500, restore: bool = False) -> None:
    """Save ``name``.png into ``$FEDVIZ_SCREENSHOTS`` (nothing when unset).  Streamlit scrolls inside
    its own container, so a full-page shot is the viewport: it is made ``height`` tall first (and
    given its size back after, with ``restore``)."""
    shots = os.environ.get("FEDVIZ_SCREENSHOTS")
    if not shots:
        return
    Path(shots).mkdir(parents=True, exist_ok=True)
    size = page.viewport_size or {"width": 1400, "height": height}
    page.set_viewport_size({"width": size["width"], "height": height})
    page.wait_for_timeout(settle)
    page.screenshot(path=str(Path(shots) / f"{name}.png"), full_page=True)
    if restore:
        page.set_viewport_size(size)
