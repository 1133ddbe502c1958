"""The loaders: data sets, problems, optima, baselines and personalisation reports, keyed by content.

A data set and its problem are one read-only object shared by every session asking for the same content
(:mod:`fedviz.runner.cache`); optima and baselines are copies; personalisation reports are kept for the
server without their models.  What is not built yet is built in one of the server's run slots, after the
runs and builds queued before it, and refused before anything is built when it is over the entry budget.
A session that ends lets go of what only it asked for (:func:`session_ended`).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace

import streamlit as st

from ..data.build import DataSpec, check_budget
from ..problems.objective import Problem
from ..runner import cache
from ..validation import env_int
from . import state as ui_state

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
    with ui_state.manager().slot(ui_state.session_id()) as slot:
        if not slot.wait(0):
            box = st.empty()
            while not slot.wait(SLOT_INTERVAL) and not ready():  # each redraw lets Streamlit stop this run
                box.info(slot_wait_text(what, slot.position, ui_state.manager().max_concurrent),
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
    owner = ui_state.session_id()
    return _under_cap(lambda: cache.built(spec), "build the data set", lambda: cache.dataset(spec, owner=owner))


def load_problem(spec: DataSpec, loss: str, lam: float | None) -> Problem:
    """The problem on the shared data set; what it derives lazily (row blocks, row norms, the
    smoothness) is then computed once for all the runs that share it, which only read it."""
    load_dataset(spec)
    return cache.problem(spec, loss, lam, owner=ui_state.session_id())


def load_optimum(spec: DataSpec, loss: str, lam: float | None) -> dict:
    """w*, f* and the optimum's errors (Newton-CG), solved under the run cap."""
    if not cache.built(spec, loss, lam):
        load_dataset(spec)  # first the data set, under the cap and with its own notice
    owner = ui_state.session_id()
    opt = _under_cap(lambda: cache.built(spec, loss, lam), "compute the optimum (Newton-CG)", lambda: cache.optimum(spec, loss, lam, owner=owner))
    return {"w": opt.w, "objective": opt.objective, "test_error": opt.test_error,
            "train_error": opt.train_error, "grad_norm": opt.grad_norm, "seconds": opt.seconds,
            "lam": cache.problem(spec, loss, lam, owner=owner).lam}


def load_baselines(spec: DataSpec) -> dict:
    """The majority and per-node majority test errors (Section 4.1); nothing for regression.  Kept
    apart from the data set: a live view's notes ask for them twice a second."""
    check_budget(spec, max_data_entries())
    owner = ui_state.session_id()
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
