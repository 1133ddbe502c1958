"""The session, its settings and the link: who is asking, and what the pages share.

The session's :class:`~fedviz.runner.config.RunConfig` is the one source of truth of every page (see the
comment above :func:`current_config`); the link is read from it and written back by :func:`sync_link`.
Who the session is (:func:`session_id`), whether it is the operator (:func:`history_viewer`) and whether
its tab is still open (:func:`session_connected`, the run manager's liveness probe) are answered here too,
and the other modules of :mod:`fedviz.ui` ask through this module's attributes, so a test that stands in for
a visitor replaces them in one place.
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from ..data.build import DataSpec
from ..errors import FedvizError
from ..markup import literal
from ..runner import get_manager
from ..runner.config import RunConfig, from_query, to_query


def session_id() -> str:
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else "bare"


#: Request headers a reverse proxy adds (docs/sharing.md's Caddy sets X-Forwarded-For): a connection
#: from this machine that carries one is a visitor's, relayed.
PROXY_HEADERS = ("x-forwarded-for", "forwarded", "x-real-ip")


def operator_connection(ip: str | None, headers, setting: str = "local") -> bool:
    """Whether a browser is the server's own user (the operator), who sees the whole run history
    as the command line does: with ``setting`` "local" (``FEDVIZ_OPERATOR``'s default), a browser on
    this machine (Streamlit reports no IP for a loopback connection) that did not come through a
    proxy; with "none", nobody.  Everyone else is a visitor and sees only its own tab's runs and the
    command line's (issue 21, point 4): on a single-user laptop yesterday's runs stay listed, on a
    classroom server no student reads another's file names."""
    if setting == "none":
        return False
    relayed = any(h.lower() in PROXY_HEADERS for h in (headers or {}))
    return ip is None and not relayed


def history_viewer() -> str | None:
    """The session the run history is filtered for (``RunStore.list_runs(visible_to=)``), or None for
    the operator (:func:`operator_connection`), who sees every run."""
    import os

    setting = os.environ.get("FEDVIZ_OPERATOR", "local").strip().lower() or "local"
    if setting not in ("local", "none"):
        raise FedvizError(f"FEDVIZ_OPERATOR={setting!r}: expected 'local' (default) or 'none'")
    try:
        ip, headers = st.context.ip_address, dict(st.context.headers or {})
    except Exception:  # noqa: BLE001 - no request context: treat as a visitor, the safe side
        return session_id()
    if ip is not None and not isinstance(ip, str):
        ip = None  # AppTest's stand-in connection (a mock): no network, as a browser on this machine
    return None if operator_connection(ip, headers, setting) else session_id()


def session_connected(session_id: str) -> bool | None:
    """Whether Streamlit's runtime still has a live websocket for the session (None: no runtime).

    The run manager's liveness probe: a closed tab disconnects at once, whereas a
    heartbeat from a page timer stalls in a throttled background tab.  Thread-safe
    (``Runtime.is_active_session`` is documented callable from any thread).
    """
    from streamlit.runtime import Runtime

    if not Runtime.exists():
        return None
    alive = Runtime.instance().is_active_session(session_id)
    return alive if isinstance(alive, bool) else None  # AppTest's mock runtime answers a mock


def manager():
    """The server's run manager, with Streamlit's liveness probe installed."""
    m = get_manager()
    if m.liveness is None:
        m.liveness = session_connected
    return m


# -- state shared by the pages ----------------------------------------------------------------
#
# One source of truth: the session's RunConfig.  The link is read once, when the session
# opens; each widget owns its value through its key, seeded from the config the first
# time it is drawn (:func:`seeded`); the page builds a new config from the widgets and the
# link is rewritten from the config in force at the end of every page run (:func:`sync_link`),
# after sidebar navigation too.  A widget is never given ``value=`` from the config: a value
# that changes with the config gives the widget a new identity on the next run, and
# Streamlit then drops the edit the user just made (every second edit was lost that way).

def current_config() -> RunConfig:
    """The session's run configuration: from the URL on first visit, then from the widgets."""
    if "config" not in st.session_state:
        config, problems = from_query(dict(st.query_params))
        st.session_state.config = config
        st.session_state.query_problems = problems
    return st.session_state.config


def set_config(config: RunConfig) -> None:
    """Make ``config`` the session's settings and the address bar's link."""
    st.session_state.config = config
    sync_link()


def sync_link(extra: dict[str, str] | None = None) -> None:
    """Rewrite the address bar from the settings in force (every page calls it last, so the link
    survives sidebar navigation, which clears the query string); ``extra``: a page's own choices
    (Compare's What-if partitions), kept in its link too."""
    query = {**to_query(current_config()), **(extra or {})}
    if dict(st.query_params) != query:
        st.query_params.from_dict(query)


def seeded(key: str, value) -> str:
    """``key``, after giving the widget of that key its first value (the config's) if it has none.

    Streamlit forgets the value of a widget that a run did not draw (another page was
    shown), so a widget drawn again starts from the config, which kept it.
    """
    if key not in st.session_state:
        st.session_state[key] = value
    return key


def show_query_problems() -> None:
    """One warning per setting of the link that was ignored; the address bar then shows the
    link of the settings in force, so that a copied link no longer carries them."""
    problems = st.session_state.pop("query_problems", []) or []
    for text in problems:  # the link's own text inside: shown as its characters, never as Markdown
        st.warning(f"Ignored a setting from the link: {literal(text, limit=300)}", icon=":material/link_off:")
    if problems:
        sync_link()


def with_data(config: RunConfig, data: DataSpec) -> RunConfig:
    return replace(config, data=data)
