"""fedviz.ui.sessions: a stored (disconnected) session's script loop is closed once its run has ended."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from streamlit.runtime.memory_session_storage import MemorySessionStorage

from fedviz.ui import sessions as ui_sessions


def _info(sid: str, running: bool):
    session = SimpleNamespace(id=sid, _script_event_loop=asyncio.new_event_loop(),
                              _scriptrunner=object() if running else None)
    return SimpleNamespace(session=session, client=None, script_run_count=1)


def test_stored_sessions_lose_their_loops_once_their_runs_end():
    assert ui_sessions.install() and ui_sessions.install()  # idempotent
    assert getattr(MemorySessionStorage.save, "__wrapped__", None) is not None
    storage = MemorySessionStorage()
    ended, running = _info("a", running=False), _info("b", running=True)
    storage.save(ended)
    storage.save(running)
    assert ended.session._script_event_loop.is_closed()
    assert not running.session._script_event_loop.is_closed()  # its runner may still use it
    running.session._scriptrunner = None  # the run ended (Streamlit's SHUTDOWN event)
    storage.save(_info("c", running=False))  # the next disconnect sweeps it
    assert running.session._script_event_loop.is_closed()
    assert storage.get("b") is running  # still there for a reconnect; Streamlit makes it a new loop
