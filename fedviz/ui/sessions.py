"""Streamlit's sessions after their tab closed: kept for a reconnect, then ended, holding nothing.

Streamlit 1.67 keeps a closed tab's session for two minutes (up to 128 of them) so that a
network blip can resume it.  Two things go wrong on a shared server, where every page
load is a session:

* each stored session keeps its script-thread event loop open (an epoll descriptor and a
  socket pair, 3 descriptors per session), and the default limit of 1,024 descriptors ran
  out after about 330 loads (issue 21);
* a session evicted from that store is never shut down, so its uploaded files stay in the
  server's memory for good, and with them whatever was built from them.

:func:`install` wraps ``MemorySessionStorage.save`` (called when a tab disconnects) so that
every stored session whose script run has ended gets its loop closed, with Streamlit's own
``_close_script_event_loop`` (a session that resumes gets a new loop from Streamlit itself,
``AppSession._create_scriptrunner`` replaces a closed one); and so that a session still
disconnected :func:`keep_seconds` later is closed through ``Runtime.close_session``, which
shuts it down and drops its uploaded files.  It wraps ``AppSession.shutdown`` too, so that
every ending (that one, a server stop, Streamlit's own closes) calls the functions given to
:func:`on_session_end` with the session's id: the dashboard lets go of the session's data
sets there (:func:`fedviz.runner.cache.release`).

If a later Streamlit lacks the pieces this relies on, nothing is installed, and the load
tests (tests/browser/test_session_descriptors.py, tests/browser/test_session_memory.py) say so.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import logging
import threading
import time
from typing import Callable

from ..validation import env_int

log = logging.getLogger(__name__)

_MARK = "_fedviz_closes_loops"

#: Seconds a closed tab's session waits for its tab to reconnect before it ends (Streamlit's own
#: store keeps it 120 s).  A laptop waking or a Wi-Fi hand-over reconnects within seconds; the
#: session's runs already stop 15 s after it disconnects (``fedviz.runner.serve.manager.DISCONNECT_GRACE``).
#: ``FEDVIZ_SESSION_KEEP`` sets it.
KEEP_SECONDS = 60

_ON_END: list[Callable[[str], None]] = []
_PENDING: dict[str, asyncio.TimerHandle] = {}  # session → its scheduled end (used on the event loop only)


def keep_seconds() -> int:
    return env_int("FEDVIZ_SESSION_KEEP", KEEP_SECONDS, low=0)


def on_session_end(fn: Callable[[str], None]) -> None:
    """Call ``fn(session_id)`` whenever a session ends (once per function, however often given)."""
    if fn not in _ON_END:
        _ON_END.append(fn)


def install() -> bool:
    """Install the wrappers once per process; True if they are in place."""
    try:
        from streamlit.runtime import app_session
        from streamlit.runtime.memory_session_storage import MemorySessionStorage
    except ImportError:  # another Streamlit layout: nothing to fix, or nothing we know how to
        return False
    close = getattr(app_session, "_close_script_event_loop", None)
    original = MemorySessionStorage.save
    if getattr(original, _MARK, False):
        return True
    if close is None or not hasattr(MemorySessionStorage, "list") or not hasattr(app_session.AppSession, "shutdown"):
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
        _schedule_end(session_info.session)

    setattr(save, _MARK, True)
    save.__wrapped__ = original
    MemorySessionStorage.save = save

    shutdown = app_session.AppSession.shutdown

    def shutdown_and_tell(self) -> None:
        first = getattr(self, "_state", None) != app_session.AppSessionState.SHUTDOWN_REQUESTED
        shutdown(self)
        if first:
            _ended(self.id)

    shutdown_and_tell.__wrapped__ = shutdown
    app_session.AppSession.shutdown = shutdown_and_tell
    return True


def _schedule_end(session) -> None:
    """End ``session`` :func:`keep_seconds` from now unless its tab is back by then (on the event loop,
    where ``save`` is called and where ``Runtime.close_session`` must run)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not on Streamlit's event loop (a test calling save): Streamlit's TTL decides
        return
    old = _PENDING.pop(session.id, None)
    if old is not None:
        old.cancel()  # disconnected again: the wait starts over
    _PENDING[session.id] = loop.call_later(keep_seconds(), _end_if_gone, session)


def _end_if_gone(session) -> None:
    from streamlit.runtime import Runtime

    _PENDING.pop(session.id, None)
    try:
        runtime = Runtime.instance()
        if runtime.is_active_session(session.id):
            return  # its tab came back; a later disconnect schedules again
        runtime.close_session(session.id)  # still stored: removed and shut down
        session.shutdown()  # evicted from the store meanwhile: Streamlit never shuts those down
    except Exception:  # noqa: BLE001 - a failed close must not break the event loop
        log.exception("could not end a disconnected session")


def _ended(session_id: str) -> None:
    for fn in list(_ON_END):
        try:
            fn(session_id)
        except Exception:  # noqa: BLE001 - one listener's bug must not keep the others from running
            log.exception("session end listener %r", fn)
    _RECLAIM.set()
    _ensure_reclaimer()


# -- giving the memory back --------------------------------------------------------------------------
#: Seconds the reclaimer waits after a session ended, so that a burst of endings costs one pass.
RECLAIM_DELAY = 1.0
_RECLAIM = threading.Event()
_RECLAIMER: list[threading.Thread] = []
_RECLAIMER_LOCK = threading.Lock()


def _ensure_reclaimer() -> None:
    with _RECLAIMER_LOCK:
        if not _RECLAIMER:
            thread = threading.Thread(target=_reclaim_loop, name="fedviz-reclaim", daemon=True)
            _RECLAIMER.append(thread)
            thread.start()


def _reclaim_loop() -> None:
    while True:
        _RECLAIM.wait()
        time.sleep(RECLAIM_DELAY)
        _RECLAIM.clear()
        reclaim()


def reclaim() -> None:
    """Free what ended sessions left and hand it back to the system.

    A Streamlit session sits in reference cycles (its script runner, its callbacks), so its
    state, its uploaded bytes among them, waits for the cycle collector; and glibc keeps freed
    heap pages mapped until asked.  Twenty visitors each uploading a 9.7 MB file and leaving
    (tests/browser/test_session_memory.py) left the server 836 MB larger before sessions were
    ended; ended, with their data sets let go, 460 MB; with this pass too, 38 MB.
    """
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _malloc_trim():
    """glibc's ``malloc_trim`` (None elsewhere: macOS, musl)."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def _version() -> str:
    try:
        import streamlit

        return streamlit.__version__
    except Exception:  # noqa: BLE001
        return "?"
