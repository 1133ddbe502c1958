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
from ..plots import X_AXES
from ..runner.config import RunConfig, from_query, to_query


def session_id() -> str:
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else "bare"


#: The session key that marks a tab as the operator's (it presented the token: :func:`claim_operator`).
OPERATOR_KEY = "operator:tab"
#: The session key of a refused token, said once by :func:`claim_operator`'s caller.
REFUSED_KEY = "operator:refused"
#: FEDVIZ_OPERATOR's values: "token" (default), the tab that presented the operator's token; "none", nobody.
OPERATOR_SETTINGS = ("token", "none")


def _operator_setting() -> str:
    import os

    setting = os.environ.get("FEDVIZ_OPERATOR", "token").strip().lower() or "token"
    if setting not in OPERATOR_SETTINGS:
        raise FedvizError(f"FEDVIZ_OPERATOR={setting!r}: expected 'token' (default: the tab that presents the "
                          "operator's token) or 'none' (nobody)")
    return setting


def claim_operator() -> bool | None:
    """Read a link's ``?operator=<token>`` (:mod:`fedviz.runner.serve.operator`) and take it out of the address
    at once, so that a copied link never carries it.  The right token makes this tab the operator for as
    long as it is open; returns True then, False for a wrong one, None when the link presented none.  Who
    the browser is, or where it connects from, plays no part: a relay on this machine (``ssh -L``, socat, a
    proxy without X-Forwarded-For) made every visitor the operator when the address decided."""
    from ..runner.serve.operator import LINK_KEY, is_operator_token

    presented = st.query_params.get(LINK_KEY)
    if presented is None:
        return None
    del st.query_params[LINK_KEY]
    ok = _operator_setting() == "token" and is_operator_token(presented)
    st.session_state[OPERATOR_KEY if ok else REFUSED_KEY] = True
    return ok


def history_viewer() -> str | None:
    """The session the run history is filtered for (``RunStore.list_runs(visible_to=)``), or None for
    the operator, the tab that presented the operator's token (:func:`claim_operator`), who sees every run
    as the command line does.  Everyone else is a visitor and sees only its own tab's runs and the command
    line's (issue 21, point 4): no student reads another's file names, whatever machine it comes from."""
    if _operator_setting() == "token" and st.session_state.get(OPERATOR_KEY):
        return None
    return session_id()


def announce_operator() -> None:
    """Print the operator's link in the server's terminal, once per process (the first page served)."""
    from ..runner.serve.operator import announce

    host = st.get_option("browser.serverAddress") or "localhost"
    port = st.get_option("browser.serverPort") or st.get_option("server.port")
    base = (st.get_option("server.baseUrlPath") or "").strip("/")
    announce(f"http://{host}:{port}" + (f"/{base}" if base else ""))


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
        query = dict(st.query_params)
        view, view_problems = read_view(query)  # takes the view's keys out of ``query``
        config, problems = from_query(query)
        st.session_state.update(view)
        st.session_state.config = config
        st.session_state.query_problems = view_problems + problems
    return st.session_state.config


# -- the view in the link ------------------------------------------------------------------------------
#: The costs of a communication round the simulated-time axis offers (seconds, a 1-2-5 scale from a
#: millisecond to 100 s, and 0), and the one it starts at (see :func:`fedviz.ui.live.axis_controls`).
ROUND_COSTS = (0.0, *(round(m * 10.0 ** e, 12) for e in range(-3, 3) for m in (1, 2, 5)), 100.0)
DEFAULT_ROUND_COST = 0.01
DEFAULT_AXIS = next(iter(X_AXES))
#: The view's choices a link carries beside the run's settings (a new tab draws the curves against the same
#: axis): link key → the session key that keeps it while no page draws its control.  The Run and Home pages'
#: axis controls (:func:`fedviz.ui.live.axis_controls` with its default keys) read and write them.
VIEW_KEYS = {"axis": "view:axis", "round_cost": "view:round_cost"}


def read_view(query: dict) -> tuple[dict, list[str]]:
    """The view's choices of a link (:data:`VIEW_KEYS`), removed from ``query``, as session values; and a
    problem per value that is not one the controls offer (the value then left at its default)."""
    view, problems = {}, []
    axis = query.pop("axis", None)
    if axis is not None:
        if axis in X_AXES:
            view[VIEW_KEYS["axis"]] = axis
        else:
            problems.append(f"axis: {axis!r:.40} is not an x axis ({', '.join(X_AXES)})")
    cost = query.pop("round_cost", None)
    if cost is not None:
        try:
            value = float(cost)
        except ValueError:
            value = float("nan")
        if value in ROUND_COSTS:
            view[VIEW_KEYS["round_cost"]] = value
        else:
            problems.append(f"round_cost: {cost!r:.40} is not a cost the axis offers (seconds: "
                            f"{', '.join(f'{c:g}' for c in ROUND_COSTS)})")
    return view, problems


def view_query() -> dict[str, str]:
    """The view's choices in force, as link keys: only those that differ from where a new tab starts."""
    state, out = st.session_state, {}
    axis = state.get(VIEW_KEYS["axis"], DEFAULT_AXIS)
    if axis != DEFAULT_AXIS:
        out["axis"] = axis
    cost = state.get(VIEW_KEYS["round_cost"], DEFAULT_ROUND_COST)
    if axis == "simulated" and cost != DEFAULT_ROUND_COST:
        out["round_cost"] = f"{cost:g}"
    return out


def set_config(config: RunConfig) -> None:
    """Make ``config`` the session's settings and the address bar's link."""
    st.session_state.config = config
    sync_link()


def sync_link(extra: dict[str, str] | None = None) -> None:
    """Rewrite the address bar from the settings in force (every page calls it last, so the link
    survives sidebar navigation, which clears the query string); ``extra``: a page's own choices
    (Compare's What-if partitions), kept in its link too."""
    query = {**to_query(current_config()), **view_query(), **(extra or {})}
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
