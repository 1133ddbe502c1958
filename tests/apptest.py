"""The app's pages opened as a user opens them, in Streamlit's AppTest: shared by the integration
tests, so that every page test starts the same way (app.py's navigation, then the page)."""

import pytest
from streamlit.testing.v1 import AppTest

from conftest import ROOT

APP = str(ROOT / "app.py")


def open_page(page: str | None = None, config=None, *, timeout: float = 120) -> AppTest:
    """app.py run once (with ``config`` as the session's RunConfig), then ``page``; no exception."""
    at = AppTest.from_file(APP, default_timeout=timeout)
    if config is not None:
        at.session_state["config"] = config
    at.run()
    if page:
        at.switch_page(page)
        at.run()
    assert not at.exception, at.exception
    return at


@pytest.fixture
def long_sessions(monkeypatch):
    """AppTest has no browser to heartbeat while a test waits, and a first run that compiles every
    kernel on a loaded machine can outlast the 30 s session timeout; the reaper has its own tests
    (test_manager.py), so here it must not stop a run the test is waiting for."""
    from fedviz.runner import get_manager

    monkeypatch.setattr(get_manager(), "session_timeout", 24 * 3600.0)
