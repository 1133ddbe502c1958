"""The Streamlit adapter: the only module of fedviz that imports streamlit.

It owns the cached loaders (keyed by content: data sets and problems are one read-only
object shared by every session asking for the same content, optima and baselines are
``st.cache_data`` copies), the widgets generated from parameter
metadata, the live run view (a fragment that redraws every 0.5 s from the run
manager's snapshot; worker threads never call ``st.*``), the query-string sync and the
error guard that turns every exception into a message instead of a traceback.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from dataclasses import replace

import numpy as np
import streamlit as st

from ..algorithms import ALGORITHMS, get_algorithm
from ..data.build import DataSpec, check_budget
from ..errors import FedvizError
from ..learn.chart_notes import chart_notes
from ..params import Param
from ..personal import Personaliser
from ..plots import X_AXES, suboptimality_figure, test_error_figure
from ..problems.objective import Problem
from ..runner import ProblemSpec, RunJob, cache, get_manager
from ..runner.execute import CRITERION, background_os_thread
from ..runner.config import RunConfig, from_query, to_query
from ..runner.sweep import sweep_outcome, sweep_plan
from ..markup import escape, literal
from .pernode import per_node_view
from ..validation import env_int

log = logging.getLogger("fedviz.ui")

#: Largest upload accepted (also set as server.maxUploadSize in .streamlit/config.toml).
MAX_UPLOAD_MB = 200
#: Rows accepted from an upload: keeps one classroom user from exhausting the server.
MAX_UPLOAD_ROWS = 3_000_000
#: Cells one experiment may have when launched from the page (the CLI has no bound); every built-in
#: at full scale has at most 160.  ``FEDVIZ_MAX_CELLS`` sets it.
MAX_EXPERIMENT_CELLS = 500


#: Entries (stored nonzeros) of a data set this server builds for a page or a run: the paper-scale
#: google-plus preset holds 41 million; 50 million is ~600 MB of CSR.  ``FEDVIZ_MAX_ENTRIES`` sets it.
MAX_DATA_ENTRIES = 50_000_000


def max_data_entries() -> int:
    return env_int("FEDVIZ_MAX_ENTRIES", MAX_DATA_ENTRIES, low=1)


def max_experiment_cells() -> int:
    return env_int("FEDVIZ_MAX_CELLS", MAX_EXPERIMENT_CELLS, low=1)
#: Seconds between two redraws of a run's live view while it runs, and while it is queued.
LIVE_INTERVAL = 0.5
QUEUED_INTERVAL = 2.0
#: Points per curve in the live figures, and markers drawn on each: the browser redraws both
#: figures twice a second, and every marker is an SVG element (two figures of 150 points with
#: all their markers cost twice as much to redraw as with 25).  The history keeps every point.
LIVE_POINTS = 500
LIVE_MARKERS = 25


# -- navigation ------------------------------------------------------------------------------
def through_navigation() -> None:
    """Make sure this page runs inside app.py's ``st.navigation``; call first on every page.

    While no session has called ``st.navigation`` since the server started, Streamlit
    treats a ``pages/`` directory as its older multipage layout and runs a page's script
    on its own, without app.py: a shared link to /run, the first request after a restart,
    got no page config and a sidebar of file names.  The first such run switches that
    off (what ``st.navigation`` itself does) and reruns, now through app.py: in a browser
    session that is a page load, so no widget action is lost.  (AppTest, which has no
    browser and so no request headers, sets the old layout up again before every run;
    a rerun there would drop the click being tested, and its pages run as they did.)
    """
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        if st.context.headers:
            st.rerun()


# -- start-up ----------------------------------------------------------------------------------
@st.cache_resource(show_spinner=False)
def start_warm_up():
    """Compile every kernel in a background thread once per server (``FEDVIZ_WARMUP=0``: never),
    so that the first click of the first user waits no longer than any later one.  The thread
    runs below the server's own threads, as run workers do, and never calls ``st.*``.  Returns
    the warm-up's :class:`~fedviz.runner.serve.warmup.Progress` (None when off), read by
    :func:`warm_up_banner`."""
    import os
    import threading

    from ..runner.serve.warmup import Progress, warm_up

    if os.environ.get("FEDVIZ_WARMUP", "1") == "0":
        return None
    progress = Progress()

    def work():
        background_os_thread("fedviz-warmup")
        warm_up(progress=progress)

    thread = threading.Thread(target=work, name="fedviz-warmup", daemon=True)
    thread.start()
    return progress


#: Seconds between two redraws of the warm-up banner while the kernels compile.
WARM_UP_INTERVAL = 2.0


def warm_up_text(progress) -> str | None:
    """The banner's sentence while the warm-up runs (None once it ended)."""
    if progress is None or progress.finished:
        return None
    left = progress.seconds_left()
    return (f"Warming up the kernels: about {max(1, round(left)):,} s left ({progress.done} of "
            f"{len(progress.plan)} steps compiled); a run started now waits for them. Estimate: the remaining "
            "steps' compile times with an empty cache, scaled by how long the steps so far took.")


def warm_up_banner(progress) -> None:
    """While the kernels compile, every page says so with the time left (redrawn every
    :data:`WARM_UP_INTERVAL` s); once done, one full rerun draws the page without it."""
    if warm_up_text(progress) is None:
        return

    @st.fragment(run_every=WARM_UP_INTERVAL)
    def _banner():
        text = warm_up_text(progress)
        if text is None:
            st.rerun()  # ended: the page again, without the banner and its timer
        st.info(text, icon=":material/hourglass_top:")

    _banner()


# -- errors ----------------------------------------------------------------------------------
@contextlib.contextmanager
def guard(what: str = "That"):
    """Show any error as a message; never let a traceback reach the page."""
    try:
        yield
    except FedvizError as e:
        st.error(escape(str(e)), icon=":material/error:")  # it may quote a visitor's text: shown as text
    except MemoryError:
        st.error(f"{what} needs more memory than this server has. Try a smaller data set.", icon=":material/error:")
    except Exception as e:  # noqa: BLE001 - the UI shows a message, the log keeps the traceback
        log.exception("unexpected error")
        st.error(f"{what} failed unexpectedly ({type(e).__name__}: {escape(e)}). The details are in the server log.",
                 icon=":material/error:")


# -- data sets and what they cost (content-keyed, shared safely) ----------------------------------
#: Seconds between two redraws of the "waiting for a free slot" notice of a page's build.
SLOT_INTERVAL = 0.5


def _under_cap(ready, what: str, make):
    """``make()`` at once when ``ready()`` (already built: costs nothing), else in one of the server's
    run slots (:meth:`fedviz.runner.serve.manager.RunManager.slot`), after the runs and builds queued
    before it: a visitor's link to a large data set waits its turn rather than building beside
    every run.  While it waits the page says where it is in the queue, and stops waiting as soon
    as another page or a run has built it; leaving the page (or changing a widget) gives the
    place up."""
    if ready():
        return make()
    with manager().slot(session_id()) as slot:
        if not slot.wait(0):
            box = st.empty()
            while not slot.wait(SLOT_INTERVAL) and not ready():  # each redraw lets Streamlit stop this run
                box.info(slot_wait_text(what, slot.position, manager().max_concurrent),
                         icon=":material/hourglass_empty:")
            box.empty()
        with st.spinner(f"{what[0].upper()}{what[1:]}…"):
            return make()


def slot_wait_text(what: str, position: int, slots: int) -> str:
    """The sentence of a page waiting for a slot (:func:`_under_cap`)."""
    busy = "its one slot is busy" if slots == 1 else f"all {slots:,} of them are busy"
    return (f"Waiting for a free slot to {what}: position {position:,} in the queue. Runs and data-set builds "
            f"share this server's slots, and {busy}.")


def load_dataset(spec: DataSpec):
    """The data set of ``spec``: one object for every session and run that asks for it.

    A data set is never modified (a frozen dataclass of arrays nobody writes), so it is
    shared rather than copied (a copy per session cost 36 MB each for google-plus-small with
    2,000 nodes, far more at paper scale).  Refused over the entry budget before anything is
    built; built under the run cap; held for this session until it ends
    (:func:`fedviz.runner.cache.release`, called by :mod:`fedviz.ui.sessions`).
    """
    check_budget(spec, max_data_entries())  # a link's 200,000 nodes: a sentence, not gigabytes
    owner = session_id()
    return _under_cap(lambda: cache.built(spec), "build the data set", lambda: cache.dataset(spec, owner=owner))


def load_problem(spec: DataSpec, loss: str, lam: float | None) -> Problem:
    """The problem on the shared data set; what it derives lazily (row blocks, row norms, the
    smoothness) is then computed once for all the runs that share it, which only read it."""
    load_dataset(spec)
    return cache.problem(spec, loss, lam, owner=session_id())


def load_optimum(spec: DataSpec, loss: str, lam: float | None) -> dict:
    """w*, f* and the optimum's errors (Newton-CG), solved under the run cap."""
    if not cache.built(spec, loss, lam):
        load_dataset(spec)  # first the data set, under the cap and with its own notice
    owner = session_id()
    opt = _under_cap(lambda: cache.built(spec, loss, lam), "compute the optimum (Newton-CG)", lambda: cache.optimum(spec, loss, lam, owner=owner))
    return {"w": opt.w, "objective": opt.objective, "test_error": opt.test_error,
            "train_error": opt.train_error, "grad_norm": opt.grad_norm, "seconds": opt.seconds,
            "lam": cache.problem(spec, loss, lam, owner=owner).lam}


def load_baselines(spec: DataSpec) -> dict:
    """The majority and per-node majority test errors (Section 4.1); nothing for regression.  Kept
    apart from the data set: a live view's notes ask for them twice a second."""
    check_budget(spec, max_data_entries())
    owner = session_id()
    # From a built data set they cost one pass over the labels: no slot needed for that.
    return _under_cap(lambda: cache.built(spec, baselines=True) or cache.built(spec), "build the data set",
                      lambda: cache.baselines(spec, owner=owner))


#: Personalisation reports kept for the whole server (a class opening one lesson computes it once), by
#: content: (data spec, loss, λ, PersonaliseConfig).  Kept without their models (every node's v_k: at
#: paper scale hundreds of MB); what a page draws is the per-node errors, a few K-vectors.
MAX_PERSONAL = 8
_PERSONAL: dict = {}
_PERSONAL_LOCK = threading.Lock()


def personal_ready(spec: DataSpec, loss: str, lam: float | None, config) -> bool:
    """Whether :func:`load_personal` of these arguments is at hand (costs nothing)."""
    with _PERSONAL_LOCK:
        return (spec, loss, lam, config) in _PERSONAL


def load_personal(spec: DataSpec, loss: str, lam: float | None, config):
    """The :class:`~fedviz.personal.report.PersonalReport` of ``config`` (a frozen
    :class:`~fedviz.personal.report.PersonaliseConfig`) on the session's data set: the data set, the
    problem and w* through the shared caches (each under the run cap), then the personalised models
    (:func:`fedviz.personal.personalise`, from that w*) in one of the server's run slots.  Kept
    without its models (:data:`MAX_PERSONAL` reports, least recently used out)."""
    from ..personal import personalise, personalise_unseen

    key = (spec, loss, lam, config)
    with _PERSONAL_LOCK:
        if key in _PERSONAL:
            _PERSONAL[key] = _PERSONAL.pop(key)  # most recently used last
            return _PERSONAL[key][0]
    problem = load_problem(spec, loss, lam)
    w = load_optimum(spec, loss, lam)["w"]

    def make():
        with _PERSONAL_LOCK:  # another page computed it while this one waited for its slot
            kept = _PERSONAL.get(key)
        if kept is not None:
            return kept
        # The unseen nodes (issue 23, point 2), if the data set holds any, as new clients of the same w*.
        unseen = personalise_unseen(problem, config, w_star=w)
        return (replace(personalise(problem, config, w_star=w), models={}),
                None if unseen is None else replace(unseen, models={}))

    both = _under_cap(lambda: personal_ready(spec, loss, lam, config), "compute the personalised models", make)
    with _PERSONAL_LOCK:
        _PERSONAL[key] = both
        while len(_PERSONAL) > MAX_PERSONAL:
            _PERSONAL.pop(next(iter(_PERSONAL)))
    return both[0]


def personal_unseen(spec: DataSpec, loss: str, lam: float | None, config):
    """The unseen nodes' report that :func:`load_personal` computed with the same arguments (the
    held-out nodes scored as new clients of its w*, :func:`fedviz.personal.personalise_unseen`), or
    None: no unseen nodes, or not computed yet (costs nothing)."""
    with _PERSONAL_LOCK:
        both = _PERSONAL.get((spec, loss, lam, config))
    return None if both is None else both[1]


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


def session_ended(session_id: str) -> None:
    """A browser session ended (:mod:`fedviz.ui.sessions`): the data sets it alone asked for (an
    upload, a link's preset) leave the caches with their problems and optima."""
    gone = cache.release(session_id)
    if gone:
        let_go = set(gone)
        with _PERSONAL_LOCK:  # their personalisation reports too (an upload's spec holds its bytes)
            for key in [k for k in _PERSONAL if k[0] in let_go]:
                del _PERSONAL[key]
        log.info("session ended: %d data set(s) let go", len(gone))


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


def show_cluster_note() -> None:
    """Where runs execute when a Dask cluster is configured (``FEDVIZ_DASK_SCHEDULER``), or why not."""
    note = get_manager().cluster_note
    if note:
        st.caption(f":material/lan: {note[0].upper()}{note[1:]}.")


def show_data_notes(ds) -> None:
    """The data set's warnings for people (a one-class test set, a file without its final line end)."""
    for text in ds.meta.get("warnings", ()) or ():
        st.warning(escape(text), icon=":material/warning:")  # a data set's warnings name its file


# -- widgets from parameter metadata -------------------------------------------------------------
class InvalidInput(Exception):
    """An input holds an invalid value (the input already showed why, as an error beneath it)."""


def param_help(p: Param) -> str:
    """A Param's tooltip: its help, then (for a number or a spec) the allowed values in the errors' words."""
    return p.help + (f" Allowed: {p.range_text()}." if p.kind in ("int", "float", "spec") else "")


def checked(p: Param, value, owner: str = ""):
    """``value`` through ``p``'s :meth:`~fedviz.params.Param.validate`; refused, an error beneath the input
    naming ``owner.name`` and the range, and :class:`InvalidInput`."""
    try:
        return p.validate(value, owner)
    except FedvizError as e:
        st.error(escape(str(e)))
        raise InvalidInput(str(e)) from e


def param_input(p: Param, *, key: str, owner: str, start=None, label: str | None = None, check: bool = True):
    """The one input for a parameter, drawn from its :class:`~fedviz.params.Param`: returns its value.

    A bool is a checkbox, a choice a selectbox, an integer a number input bounded by the range,
    a float a number input bounded by the range — or, when its default is derived (``None``:
    from the problem, e.g. a stepsize 1/L) or it spans orders of magnitude (``log``), a text box
    where ``1e-3`` is typed as people write it, and an empty box means the default; a spec a text
    box.  Labels and help come from the Param (:func:`param_help`).

    The widget owns its value through ``key``: ``start`` (default: the Param's default) seeds
    it the first time it is drawn (:func:`seeded`), and it is never given ``value=``.  A value
    the Param refuses is shown as an error naming ``owner.name`` and raises :class:`InvalidInput`.
    With ``check=False`` the value is returned as read (text converted, range not checked): the
    caller checks the whole set once (an algorithm's :meth:`~fedviz.algorithms.base.Algorithm.check`).
    """
    label = label or p.shown_label
    value = p.default if start is None else start
    derived = p.default is None
    low, high = p.bounds if p.kind in ("int", "float") else (None, None)
    tip = param_help(p)
    blank = " (blank: derived)" if derived else ""
    placeholder = "derived from the data" if derived else None
    try:
        if p.kind == "bool":
            out = st.checkbox(label, help=tip, key=seeded(key, bool(value)))
        elif p.kind == "choice":
            out = st.selectbox(label, list(p.choices), help=tip, key=seeded(key, value))
        elif p.kind == "int":
            out = st.number_input(label + blank, step=1, min_value=low, max_value=high, help=tip,
                                  placeholder=placeholder, key=seeded(key, None if value is None else int(value)))
        elif p.kind == "spec":
            text = st.text_input(label, help=tip, key=seeded(key, "" if value is None else str(value)))
            out = p.default if text.strip() == "" else p.convert(text, p.qualname(owner))
        elif derived or p.log:
            text = st.text_input(label + blank, help=tip, placeholder=placeholder,
                                 key=seeded(key, "" if value is None else repr(float(value))))
            out = p.default if text.strip() == "" else p.convert(text, p.qualname(owner))
        else:
            out = st.number_input(label, min_value=low, max_value=high, format="%g", help=tip,
                                  key=seeded(key, float(value)))
        return p.validate(out, owner) if check else out
    except FedvizError as e:
        st.error(escape(str(e)))
        raise InvalidInput(str(e)) from e


def param_inputs(params, *, owner: str, key, start=None, defaults=None, slots: dict | None = None) -> dict:
    """Inputs for every Param of ``params`` (:func:`param_input`); returns ``{name: value}`` for the
    values that differ from ``defaults`` (each Param's own default where not given).

    ``key(name)`` is each input's widget key; ``start`` seeds the inputs (else ``defaults``).
    Every input is drawn; then, if one was invalid, :class:`InvalidInput` is raised.  With
    ``slots`` (a dict) the values are returned as read, not range-checked, and each input gets
    a place beneath it, ``slots[name]``, where the caller shows the error its one check finds.
    """
    start, defaults = dict(start or {}), dict(defaults or {})
    out, invalid = {}, None
    for p in params:
        base = defaults.get(p.name, p.default)
        try:
            value = param_input(p, key=key(p.name), owner=owner, start=start.get(p.name, base),
                                check=slots is None)
        except InvalidInput as e:
            invalid = e
            continue
        finally:
            if slots is not None:
                slots[p.name] = st.empty()
        if value is not None and value != base:
            out[p.name] = value
    if invalid is not None:
        raise invalid
    return out


def algorithm_widgets(names: list[str], config: RunConfig) -> tuple | None:
    """Hyperparameter inputs for each chosen algorithm: ``(name, Hyper)`` pairs, every value checked
    once here (the edge) and handed on validated; None if any is invalid (each error is shown
    beneath its input, a combination's beneath them all)."""
    current = dict(config.algorithms)
    out, ok = [], True
    for name in names:
        cls = get_algorithm(name)
        with st.expander(f"{cls.title} — {cls.reference}" + ("" if cls.federated else " · not federated")):
            slots: dict = {}
            try:
                hyper = param_inputs(cls.params, owner=name, key=lambda p, name=name: f"hp-{name}-{p}",
                                     start=dict(current.get(name, ())), slots=slots)
            except InvalidInput:  # a text that is no number: shown beneath its input
                ok = False
                continue
            hp, errors = cls.check(hyper)
            for param, e in errors.items():
                (slots[param] if param in slots else st).error(escape(str(e)))
            if errors:
                ok = False
                continue
        out.append((name, hp))
    return tuple(out) if ok else None


def algorithm_choices(multiclass: bool) -> tuple[list[str], dict[str, str]]:
    """The algorithms a picker offers, and those left out with the reason (issue 22, point 3):
    every algorithm for binary and regression data; for multiclass data (softmax) those that take
    softmax, the others left out with :meth:`~fedviz.algorithms.base.Algorithm.softmax_refusal`."""
    if not multiclass:
        return list(ALGORITHMS), {}
    refused = {name: cls.softmax_refusal() for name, cls in ALGORITHMS.items()}
    return [n for n, why in refused.items() if why is None], {n: why for n, why in refused.items() if why}


def left_out_text(left_out: dict[str, str], n_classes: int) -> str:
    """The caption under a picker that left algorithms out: which, and why (algorithms of one reason
    together), and the algorithms refused with some hyperparameters only (DANE's inexact solver)."""
    by_reason: dict[str, list[str]] = {}
    for name in left_out:
        cls = ALGORITHMS[name]
        by_reason.setdefault(cls.multiclass_reason, []).append(cls.title or name)
    parts = [f"{' and '.join(titles)}: {reason}" for reason, titles in by_reason.items()]
    # Offered, but refused with some hyperparameters (DANE's inexact solver): said too.
    partly = dict.fromkeys(why for cls in ALGORITHMS.values() if cls.softmax_refusal() is None
                           for p in cls.params if p.kind == "choice" for value in p.choices
                           for why in [cls.softmax_refusal({p.name: value})] if why is not None)
    return (f"Not offered for these {n_classes} classes (softmax): " + "; ".join(parts) + "."
            + "".join(f" {why[0].upper()}{why[1:]}." for why in partly))


def algorithm_label(name: str) -> str:
    """An algorithm's title for pickers: "(centralised)" unless its title says so, and the losses it
    is limited to."""
    cls = ALGORITHMS[name]
    only = "" if "logistic" in cls.losses else f" ({', '.join(cls.losses)} loss only)"
    central = "" if cls.federated or "centralised" in cls.title.lower() else " (centralised)"
    return cls.title + central + only


def partitioner_label(name: str) -> str:
    """A partitioner's title for pickers, with its spec name where the title does not already hold it
    (not "Label skew (Dirichlet) (dirichlet)")."""
    from ..data.partition import PARTITIONERS

    title = PARTITIONERS[name].title
    return title if name.lower() in title.lower() else f"{title} ({name})"


# -- runs ------------------------------------------------------------------------------------------
def show_slow_run_warnings(config: RunConfig) -> None:
    """Before Run: a warning for each chosen algorithm whose first iteration is estimated to take
    long (:func:`fedviz.runner.slow.slow_run_warnings`: DANE's exact solver on a large problem),
    since no curve is drawn until every first iteration ended.  The problem is loaded (shared,
    cached) only when such an algorithm is chosen."""
    from ..runner.slow import slow_run_warnings

    if not any(hasattr(ALGORITHMS.get(name), "first_iteration_cost") for name, _ in config.algorithms):
        return
    with guard("Estimating the first iteration"):
        problem = load_problem(config.data, config.loss, config.lam)
        for text in slow_run_warnings(problem, config.specs()):
            st.warning(text, icon=":material/schedule:")


def start_run(config: RunConfig, *, key: str = "run"):
    """Submit ``config`` to the server's run manager; the handle lives in the session.

    With ``config.tune`` the worker tunes each algorithm's stepsize before its run; with
    ``config.sweep`` every algorithm runs at its stepsize × the sweep's grid.
    """
    check_budget(config.data, max_data_entries())  # before a worker builds it: refused in milliseconds
    algorithms, groups, scales = config.specs(), None, {}
    if config.sweep and not config.tune:
        # The grid is centred on each derived default, which the worker resolves once it has built
        # the problem (plan.scales): the page builds nothing.
        plan = sweep_plan(config)
        algorithms, groups, scales = plan.variants, plan.groups, plan.scales
    # The problem and f* are built by the worker, under the run cap (the progress bar says so).
    # Ditto runs are measured against their exact v_k(λ_D), solved by the worker (issue 23).
    job = RunJob(ProblemSpec(config.data, config.loss, config.lam), algorithms, iterations=config.iterations,
                 seed=config.seed, config=config.as_json(), tune=config.tune, scales=scales,
                 personal_solver=Personaliser)
    old = st.session_state.get(key)
    if old is not None and not old.done:
        old.stop("replaced by a new run")
    handle = manager().submit(job, session_id())
    st.session_state[key] = handle
    st.session_state[key + "-meta"] = {"data": config.data, "sweep_groups": groups}
    return handle


def live_view(key: str = "run", *, axis_key: str = "axis", cost_key: str = "round_cost", height: int = 420,
              sweep: bool = False, stacked: bool = False, shared: tuple[str, ...] = (), width: int = 340,
              per_node: bool = False):
    """Progress, statuses and the two live figures of the run in ``st.session_state[key]``.

    A fragment redraws them every :data:`LIVE_INTERVAL` seconds while the run runs, every
    :data:`QUEUED_INTERVAL` seconds while it waits in the queue (only its place changes),
    and not at all once it ended; when the run changes state, one full rerun redraws the
    page with the timer the new state needs.  Every redraw costs the server a script run
    and the browser a render, and a figure tens of milliseconds of the server's CPU
    (holding the GIL), so open pages of queued and finished runs must stay cheap: a
    queued run has no charts, and figures are rebuilt only when the snapshot or the axis
    changed.  The fragment only reads the manager's immutable snapshot, and heartbeats
    the session (the manager's fallback sign of life when the runtime cannot say whether
    the browser is connected).

    ``shared``: the session keys of other runs drawn beside this one (Compare's What-if A and B):
    their curves set this view's axes too, so that the panels are on the same x and y ranges, and
    the view redraws while any of them runs.  ``width``: about the narrowest a figure is drawn at
    (its legend's rows are reckoned for it, :func:`fedviz.plots.figures.legend_below`): 340 px, the
    Run page's chart column on a 1024 px screen.  ``per_node``: below them, the "Every node" section
    (:func:`fedviz.ui.pernode.per_node_view`: the per-node band, histogram and node picker).
    """
    handle = st.session_state.get(key)
    state = None if handle is None else handle.status
    others = [st.session_state.get(k) for k in shared if k != key]
    states = [state] + [h.status for h in others if h is not None]
    every = min([{"running": LIVE_INTERVAL, "queued": QUEUED_INTERVAL}[s] for s in states
                 if s in ("running", "queued")], default=None)

    @st.fragment(run_every=every)
    def _view():
        handle = st.session_state.get(key)
        if handle is None:
            return
        manager().touch(session_id())
        snap = handle.snapshot()
        beside = [st.session_state[k].snapshot() for k in shared if k != key and st.session_state.get(k) is not None]
        beside_meta = [st.session_state.get(k + "-meta", {}) for k in shared
                       if k != key and st.session_state.get(k) is not None]
        if every is not None and (snap.status != state or [b.status for b in beside] != states[1:]):
            st.rerun()  # started or ended: the whole page again, with the timer its new state needs
        _progress(snap)
        if snap.status == "queued":
            return
        axis = st.session_state.get(axis_key, "iteration")
        cost = float(st.session_state.get(cost_key, 1.0))
        version = (snap.run_id, snap.version, axis, cost, tuple((b.run_id, b.version) for b in beside))
        cached = st.session_state.get(key + "-figures")
        if cached is None or cached[0] != version:
            figures = _figures(snap, st.session_state.get(key + "-meta", {}), axis, cost, height, sweep,
                               beside=list(zip(beside, beside_meta)), width=width)
            cached = st.session_state[key + "-figures"] = (version, *figures)
        table, sub, err = cached[1:]
        if table:
            with st.expander("Stepsize sweep: final f − f* of every variant (the best is kept)"):
                st.table(table)
        c1, c2 = (st.container(), st.container()) if stacked else st.columns(2)
        c1.plotly_chart(sub, width="stretch", key=f"{key}-sub")
        c2.plotly_chart(err, width="stretch", key=f"{key}-err")
        sub_note, err_note = _notes(snap, st.session_state.get(key + "-meta", {}), axis)
        c1.caption(sub_note)  # what to look at: the axis, the lines, why the curves look as they do
        c2.caption(err_note)
        if per_node:
            styles = {label: ALGORITHMS[name].title for label, name in snap.algorithms.items() if name in ALGORITHMS}
            per_node_view(snap, st.session_state.get(key + "-meta", {}), key, axis, cost, regression=_mse(snap),
                          styles=styles, load_dataset=load_dataset, width=width, height=height)

    _view()


def _notes(snap, meta: dict, axis: str) -> tuple[str, str]:
    """The sentences under the two charts, computed from the run's curves and its data's baselines
    (:func:`fedviz.learn.chart_notes.chart_notes`: a claim about a value only where it holds)."""
    data = meta.get("data")
    baselines = {"optimum": snap.optimum_test_error}
    if data is not None and snap.summary and not _mse(snap):
        baselines.update(load_baselines(data), test_file=data.test is not None)
    curves = {label: snap.columns[label] for label in snap.labels if label in snap.columns}
    return chart_notes(axis, dict(snap.algorithms), regression=_mse(snap), curves=curves, baselines=baselines)


def _figures(snap, meta: dict, axis: str, cost: float, height: int, sweep: bool, beside=(), width: int = 340):
    """(sweep table or None, suboptimality figure, test error figure) of a snapshot; the runs of the
    (snapshot, meta) pairs ``beside`` it share its axes' ranges."""
    runs = {label: snap.columns[label] for label in snap.columns}
    table = None
    groups = meta.get("sweep_groups")
    if sweep and groups and snap.finished:
        outcome = sweep_outcome(runs, groups)
        kept = {o.best for o in outcome.values()}
        excluded = {label: why for o in outcome.values() for label, why in o.excluded.items()}
        final = {label: float(cols["suboptimality"][-1]) if len(cols["suboptimality"]) else math.nan
                 for label, cols in runs.items()}
        table = {"variant": list(final), "final f − f*": [f"{v:.3e}" for v in final.values()],
                 "kept": ["✓" if label in kept else "" for label in final],
                 "note": [excluded.get(label, "") or next((o.note for o in outcome.values() if o.best == label), "")
                          for label in final]}
        runs = {label: runs[label] for label in runs if label in kept or groups.get(label, (None, 0))[1] is None}
    runs = {label: _thin(cols) for label, cols in runs.items()}
    nodes = snap.summary.get("nodes", 1)
    data = meta.get("data")
    baselines = {**(load_baselines(data) if data is not None and snap.summary else {}),
                 "optimum": snap.optimum_test_error}
    # Each curve styled as its algorithm (a label such as 'FSVRG ×2' or 'GD (stepsize 3.6, tuned)'
    # is made from a spec and never parsed): the snapshot names every label's algorithm.
    styles = {label: ALGORITHMS[name].title for label, name in snap.algorithms.items() if name in ALGORITHMS}
    # A run the health check called diverged is cut at the axes' edge and marked, whatever its values.
    diverged = {label for label, status in snap.statuses.items() if status == "diverged"}
    # The runs beside this one, for the ranges: each at its own x (nodes: its own K), with its baselines.
    also = [({label: _thin(b.columns[label]) for label in b.columns}, b.summary.get("nodes", 1),
             {**(load_baselines(m["data"]) if m.get("data") is not None and b.summary else {}),
              "optimum": b.optimum_test_error}) for b, m in beside]
    sub = suboptimality_figure(runs, axis=axis, nodes=nodes, round_cost=cost, height=height, styles=styles,
                               diverged=diverged, also=also, width=width)
    err = test_error_figure(runs, baselines=baselines, axis=axis, nodes=nodes, round_cost=cost,
                            height=height, regression=_mse(snap), loss=snap.summary.get("loss"), styles=styles,
                            diverged=diverged, also=also, width=width)
    for fig in (sub, err):
        fig.update_traces(marker_maxdisplayed=LIVE_MARKERS)  # evenly spread, as in the paper's Figure 2
    return table, sub, err


def _mse(snap) -> bool:
    """Whether the run's test error is a mean squared error (real targets), not a sign error rate:
    the problem's error_metric (older runs in the history: their data's task)."""
    metric = snap.summary.get("error_metric")
    return metric == "mse" if metric else snap.summary.get("task") == "regression"


def _thin(cols: dict, limit: int = LIVE_POINTS) -> dict:
    """Every k-th record and the last, so that at most about ``limit`` points remain."""
    n = len(cols["iteration"])
    if n <= limit:
        return cols
    keep = np.r_[np.arange(0, n - 1, -(-n // limit)), n - 1]
    return {field: values[keep] for field, values in cols.items()}


_ICONS = {"queued": ":material/hourglass_empty:", "running": ":material/autorenew:",
          "done": ":green[:material/check_circle:]", "diverged": ":red[:material/warning:]",
          "stopped": ":orange[:material/stop_circle:]", "failed": ":red[:material/cancel:]"}


def _progress(snap) -> None:
    if snap.status == "queued":
        st.info(f"Waiting for a free slot: position {snap.queue_position} in the queue.", icon=":material/hourglass_empty:")
        return
    eta = snap.eta_seconds
    if snap.compiling:
        value, text = snap.progress, "Compiling kernels (first run only)…"
    elif snap.finished and snap.status != "done":
        # Where it ended, not 100%: the iterations each algorithm really completed.
        done = [min(rec.iteration, snap.iterations) for rec in snap.last.values() if rec is not None]
        value = sum(done) / (snap.iterations * len(snap.labels)) if snap.iterations and snap.labels else 0.0
        text = (f"{snap.status} after {min(done):,} of {snap.iterations:,} iterations" if done and min(done) == max(done)
                else f"{snap.status} after {min(done, default=0):,}–{max(done, default=0):,} of {snap.iterations:,} "
                     f"iterations")
    else:
        value = snap.progress
        text = f"{100 * snap.progress:.0f}%" + (f" · about {eta:.0f} s left" if eta and math.isfinite(eta) and
                                                snap.status == "running" else "")
        if snap.phase == "preparing" and snap.message:
            text = snap.message
    st.progress(min(1.0, max(0.0, value)), text=text)
    parts, criteria = [], {}
    for label, status in snap.statuses.items():
        msg = snap.messages.get(label) or ""
        icon = ":orange[:material/warning:]" if msg.startswith(("oscillating", "warning")) else _ICONS.get(status, "")
        parts.append(f"{icon} **{label}**: {status}" + (f" — {msg}" if msg else ""))
        note, _, criterion = (snap.notes.get(label) or "").partition(CRITERION)
        if note:
            parts.append(f"&nbsp;&nbsp;&nbsp;:gray[{note}]")
        if criterion:
            criteria.setdefault(criterion, []).append(label)
    st.markdown("  \n".join(parts))
    for criterion in criteria:  # the same for every tuned algorithm: said once
        st.caption(f"How tuning chose: {criterion}.")
    if snap.message and snap.phase != "preparing" and snap.status not in ("done", "failed"):
        st.caption(snap.message)  # a done or failed run's message repeats the statuses above


def axis_controls(axis_key: str = "axis", cost_key: str = "round_cost") -> None:
    """The x-axis choice and, for the simulated time of the paper's eq. (3) (Section 2.3.1), the cost c
    of a communication round, on a 1-2-5 scale from a millisecond (a data centre) to 100 s (a phone on
    a slow network).

    c defaults to 10 ms, the order of one round's measured computation T_A on google-plus-small
    (2–12 ms per round for GD, FSVRG, FedAvg and CoCoA+ on a 2-core machine: ``python -m fedviz run
    preset:google-plus-small --algorithms fsvrg,gd,cocoa-plus,fedavg --iterations 30``), so both terms
    of I × (c + T_A) show; the former 1 s dwarfed T_A a hundredfold and the axis looked like rounds.
    """
    c1, c2 = st.columns([3, 2])
    with c1:
        st.radio("x axis", list(X_AXES), format_func=X_AXES.get, horizontal=True, key=axis_key)
    with c2:
        if st.session_state.get(axis_key) == "simulated":
            costs = [0.0] + [round(m * 10.0 ** e, 12) for e in range(-3, 3) for m in (1, 2, 5)] + [100.0]
            if st.session_state.get(cost_key) not in costs:
                st.session_state.pop(cost_key, None)  # a value of an older control: back to the default
            st.select_slider("c: seconds per communication round", costs, value=0.01, key=cost_key,
                             format_func=lambda c: "0" if c == 0 else f"{c * 1000:g} ms" if c < 1 else f"{c:g} s",
                             help="TIME = I × (c + T_A), the paper's eq. (3): every communication round costs c "
                                  "on top of the measured computation T_A.")
            st.caption("c starts at 10 ms, about one round's measured computation here, so both terms count; "
                       "slide right for phones on a slow network (seconds), left for a data centre.")


def fmt_pct(v) -> str:
    return "n/a" if v is None or not np.isfinite(v) else f"{100 * v:.2f}%"


def with_data(config: RunConfig, data: DataSpec) -> RunConfig:
    return replace(config, data=data)
