"""What every page does besides its own content: run inside app.py's navigation, say while the kernels
compile at server start, turn any error into a message, and show the notes a configuration or a data set
carries."""

from __future__ import annotations

import contextlib
import logging

import streamlit as st

from ..errors import FedvizError
from ..markup import escape
from ..runner import get_manager
from ..runner.execute import background_os_thread

log = logging.getLogger("fedviz.ui")


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

    from ..runner import get_manager
    from ..runner.serve.warmup import Progress, warm_up

    if os.environ.get("FEDVIZ_WARMUP", "1") == "0":
        return None
    progress = Progress()
    manager = get_manager()

    def runs_computing() -> bool:
        return manager.counts()[0] > 0

    def work():
        background_os_thread("fedviz-warmup")
        warm_up(progress=progress, pause=runs_computing)  # a run's own kernels first (warm_up's docstring)

    thread = threading.Thread(target=work, name="fedviz-warmup", daemon=True)
    thread.start()
    return progress


#: Seconds between two redraws of the warm-up banner while the kernels compile.
WARM_UP_INTERVAL = 2.0


def warm_up_text(progress) -> str | None:
    """The banner's sentence while the warm-up runs (None once it ended)."""
    if progress is None or progress.finished:
        return None
    if progress.paused:
        return (f"Warming up the kernels: paused while runs compute ({progress.done} of {len(progress.plan)} steps "
                "compiled); a run compiles the kernels it needs itself first.")
    left = progress.seconds_left()
    return (f"Warming up the kernels: about {max(1, round(left)):,} s left ({progress.done} of "
            f"{len(progress.plan)} steps compiled); a run started now pauses it and compiles its own kernels "
            "first, after the step under way.")


def compile_text(snap) -> str:
    """What a run waiting for its first iteration says: while the server's warm-up has not compiled its
    algorithms' kernels yet, the seconds they take on this machine (the banner's estimate, for this run's
    steps: :func:`~fedviz.runner.serve.warmup.run_steps`); else that the first iteration is under way."""
    from ..runner.serve.warmup import run_steps

    progress, loss = start_warm_up(), snap.summary.get("loss")
    left = 0.0
    if progress is not None and loss is not None:
        left = progress.seconds_until(run_steps(set(snap.algorithms.values()), loss))
    if left < 0.5:
        return "First iteration under way…"
    return (f"Compiling this run's kernels (once per server): about {max(1, round(left)):,} s in all on this "
            "machine…")


#: How the banner's seconds are estimated, in its tooltip (one line on the page: at 1024×768 a three-line box
#: pushed Home's first button to the screen's bottom edge).
WARM_UP_ESTIMATE = ("The remaining steps' compile times with an empty cache, scaled by how long the steps so far "
                    "took on this machine.")


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
        st.caption(f":material/hourglass_top: {text}", help=WARM_UP_ESTIMATE)

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


def show_cluster_note() -> None:
    """Where runs execute when a Dask cluster is configured (``FEDVIZ_DASK_SCHEDULER``), or why not."""
    note = get_manager().cluster_note
    if note:
        st.caption(f":material/lan: {note[0].upper()}{note[1:]}.")


def show_data_notes(ds) -> None:
    """The data set's warnings for people (a one-class test set, a file without its final line end)."""
    for text in ds.meta.get("warnings", ()) or ():
        st.warning(escape(text), icon=":material/warning:")  # a data set's warnings name its file
