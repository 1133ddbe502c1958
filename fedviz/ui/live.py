"""The live view of a run: submitting it to the server's run manager, and the fragment that redraws its
progress, statuses and figures from the manager's immutable snapshot (worker threads never call ``st.*``)."""

from __future__ import annotations

import math

import numpy as np
import streamlit as st

from ..algorithms import ALGORITHMS
from ..data.build import check_budget
from ..learn.chart_notes import chart_notes
from ..plots import X_AXES, suboptimality_figure, test_error_figure
from ..runner import ProblemSpec, RunJob
from ..runner.config import RunConfig
from ..runner.execute import CRITERION
from ..runner.sweep import sweep_outcome, sweep_plan
from . import state as ui_state
from .loaders import load_baselines, load_dataset, load_problem, max_data_entries
from .page import compile_text, guard
from .pernode import per_node_view
from .state import DEFAULT_AXIS, DEFAULT_ROUND_COST, ROUND_COSTS, VIEW_KEYS, seeded

#: Seconds between two redraws of a run's live view while it runs, and while it is queued.
LIVE_INTERVAL = 0.5
QUEUED_INTERVAL = 2.0
#: Points per curve in the live figures, and markers drawn on each: the browser redraws both
#: figures twice a second, and every marker is an SVG element (two figures of 150 points with
#: all their markers cost twice as much to redraw as with 25).  The history keeps every point.
LIVE_POINTS = 500
LIVE_MARKERS = 25


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
    # Ditto runs are measured against their exact v_k(λ_D), solved by the worker (issue 23): the job's
    # personal_targets, on as on every path.
    job = RunJob(ProblemSpec(config.data, config.loss, config.lam), algorithms, iterations=config.iterations,
                 seed=config.seed, config=config.as_json(), tune=config.tune, scales=scales)
    old = st.session_state.get(key)
    if old is not None and not old.done:
        old.stop("replaced by a new run")
    handle = ui_state.manager().submit(job, ui_state.session_id())
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
        ui_state.manager().touch(ui_state.session_id())
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
        value, text = snap.progress, compile_text(snap)
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
    # The Run and Home pages' choice is the link's (state.VIEW_KEYS): seeded from it, written back after.
    linked = axis_key == "axis" and cost_key == "round_cost"
    state = st.session_state
    if linked:
        seeded(axis_key, state.get(VIEW_KEYS["axis"], DEFAULT_AXIS))
    c1, c2 = st.columns([3, 2])
    with c1:
        st.radio("x axis", list(X_AXES), format_func=X_AXES.get, horizontal=True, key=axis_key)
    if linked:
        state[VIEW_KEYS["axis"]] = state[axis_key]
    with c2:
        if state.get(axis_key) == "simulated":
            if linked:
                seeded(cost_key, state.get(VIEW_KEYS["round_cost"], DEFAULT_ROUND_COST))
            if state.get(cost_key) not in ROUND_COSTS:
                state.pop(cost_key, None)  # a value of an older control: back to the default
            if cost_key not in state:
                state[cost_key] = DEFAULT_ROUND_COST
            st.select_slider("c: seconds per communication round", list(ROUND_COSTS), key=cost_key,
                             format_func=lambda c: "0" if c == 0 else f"{c * 1000:g} ms" if c < 1 else f"{c:g} s",
                             help="TIME = I × (c + T_A), the paper's eq. (3): every communication round costs c "
                                  "on top of the measured computation T_A.")
            if linked:
                state[VIEW_KEYS["round_cost"]] = state[cost_key]
            st.caption("c starts at 10 ms, about one round's measured computation here, so both terms count; "
                       "slide right for phones on a slow network (seconds), left for a data centre.")
