"""Streamlit's sessions kept for reconnect, made to hold no file descriptors.

Streamlit 1.67 keeps a closed tab's session for two minutes (up to 128 of them) so that
a network blip can resume it, and each such session keeps its script-thread event loop
open: an epoll descriptor and a socket pair, 3 descriptors per session.  A session
evicted from that store is never shut down, so its loop is closed only when the garbage
collector happens to reach it.  On a shared server every page load is a session, and the
default limit of 1,024 descriptors ran out after about 330 loads (issue 21).

:func:`install` wraps ``MemorySessionStorage.save`` (called when a tab disconnects) so
that every stored session whose script run has ended gets its loop closed, using
Streamlit's own ``_close_script_event_loop``.  A session that resumes gets a new loop
from Streamlit itself (``AppSession._create_scriptrunner`` replaces a closed one).  If a
later Streamlit lacks the pieces this relies on, nothing is installed, and the load test
(tests/browser/test_session_descriptors.py) says so.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

_MARK = "_fedviz_closes_loops"


def install() -> bool:
    """Install the wrapper once per process; True if it is in place."""
    try:
        from streamlit.runtime import app_session
        from streamlit.runtime.memory_session_storage import MemorySessionStorage
    except ImportError:  # another Streamlit layout: nothing to fix, or nothing we know how to
        return False
    close = getattr(app_session, "_close_script_event_loop", None)
    original = MemorySessionStorage.save
    if getattr(original, _MARK, False):
        return True
    if close is None or not hasattr(MemorySessionStorage, "list"):
        log.warning("Streamlit %s: cannot close the event loops of disconnected sessions", _version())
        return False

    def save(self, session_info) -> None:
        original(self, session_info)
        # Every stored session, not only this one: a tab closed mid-run still had its script
        # runner when it was stored; by the next disconnect that runner has ended.
        for info in self.list():
            session = info.session
            loop = getattr(session, "_script_event_loop", None)
            if loop is None or loop.is_closed() or getattr(session, "_scriptrunner", None) is not None:
                continue
            try:
                close(loop)
            except Exception as e:  # noqa: BLE001 - best effort; Streamlit's own close is too
                log.debug("could not close a stored session's loop: %s", e)

    setattr(save, _MARK, True)
    save.__wrapped__ = original
    MemorySessionStorage.save = save
    return True


def _version() -> str:
    try:
        import streamlit

        return streamlit.__version__
    except Exception:  # noqa: BLE001
        return "?"
