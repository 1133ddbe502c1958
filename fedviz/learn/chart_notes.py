"""The sentences under the convergence charts of Home and Run (:func:`fedviz.ui.live_view`), and
the Data page's sentences about the baselines and the features' spread.

Every sentence that states a fact about the data or the curves is computed from the data
and the curves in force, and said only where it holds: "GD is at the majority rate" only
when GD's current test error lies within :data:`MAJORITY_TOLERANCE` of predicting the
majority label; the per-node majority compared with OPT by their values; "fewer than
1,000 nodes" (the paper's statistic, Section 4.1) only where there are at least 1,000
nodes.  What cannot be computed (a per-node majority when the test rows come from a
separate test file and belong to no node) is explained instead.  The other sentences say
what an axis counts and how an algorithm works (Konečný, McMahan, Ramage, Richtárik 2016:
FSVRG is Algorithm 4, CoCoA+'s primal point eq. (14)), true of every run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ..data.split import DEAL_REMEDY

#: How close (absolute, in test-error units: 0.01 is one percentage point) GD's current test
#: error must be to predicting the majority label for the notes to say it sits there.
MAJORITY_TOLERANCE = 0.01
#: How close a run's test error must be to OPT's for the notes to say it has reached OPT, and
#: the per-node majority to OPT for the notes to call them level.
OPT_TOLERANCE = 0.005
#: The paper's rare-feature statistic counts nodes below this (Section 4.1: "over 88% of
#: features are present on fewer than 1,000 nodes", of K = 10,000).
RARE_NODES = 1000

#: What each x axis (fedviz.plots.X_AXES) counts.
AXIS_NOTES = {
    "iteration": "**x: iterations**, not the same work everywhere: an FSVRG iteration is two rounds and a pass over "
                 "every node's data, a GD iteration one round and one gradient.",
    "rounds": "**x: communication rounds**, what federated optimization pays for (Section 1.2): two per FSVRG or "
              "DANE iteration, one per GD or CoCoA+ iteration.",
    "vectors": "**x: vectors of length d** each node sends and receives; a round costs a node at least one each way.",
    "seconds": "**x: wall seconds** of this simulation on the server: computation only, no network.",
    "simulated": "**x: simulated time**, the paper's eq. (3): TIME = I × (c + T_A), each round costing c on top of "
                 "the measured computation.",
}

#: How an algorithm works, by registry name: true of every run (what its curve shows here is
#: computed by :func:`chart_notes`).
SUBOPTIMALITY_NOTES = {
    "fsvrg": "**FSVRG**: between two rounds every node makes a whole pass of variance-reduced steps over its own "
             "data (Algorithm 4; its four modifications one by one: Learn › Rare features).  Its safeguard shows "
             "the last point it accepted, so iteration 1 is flat (the first pass is checked by the next round's "
             "gradient); a later flat step is a pass that raised f, taken back with the stepsize halved, its "
             "rounds counted.",
    "gd": "**GD**: one full-gradient step per round, its length read off the last two points (Barzilai–Borwein).  "
          "Its safeguard shows the last point it accepted, so iteration 1 is flat (the first step is checked by "
          "the next round's gradient) and the curve never rises; a later flat step is a step that raised f, taken "
          "back and halved.",
    "cocoa-plus": "**CoCoA+** improves its dual, not f(w) (w = Xα/(λn), eq. (14)), so f(w) may rise at first, and "
                  "its local steps are damped by σ' = K (Section 4.1).",
    "naive-fsvrg": "**Naive FSVRG** (Algorithm 3) is FSVRG without its four modifications.",
}

#: How an algorithm's test error is read (classification), by registry name, before the computed part.
TEST_ERROR_NOTES = {
    "fsvrg": "FSVRG reaches OPT in 30 iterations on the paper's data (Figure 2)",
}

_OPT_NOTE = "**OPT**{value}: the optimum w*'s test error, where a converged run ends."
_MAJORITY_NOTE = "**predict majority**{value}: the training set's most common label for everyone."


def pct(v: float) -> str:
    return f"{100 * v:.2f}%"


def _finite(v) -> bool:
    return v is not None and isinstance(v, (int, float, np.floating)) and math.isfinite(v)


def _value(v) -> str:
    return f" ({pct(v)})" if _finite(v) else ""


def node_majority_note(node_majority: float | None, optimum: float | None, *, test_file: bool = True) -> str:
    """What the per-node majority line (Section 4.1's "per-author majority") says on this data.

    Compared with OPT by value: below it, knowing the node beats the best global model (the
    paper's finding on Google+, 17.14% against 26.27%); above it, the global model wins; and
    where the test rows belong to no node there is no such baseline, for one of two reasons:
    they come from a separate test file (``test_file``), or a partition dealt the training rows
    to new nodes (a preset's test rows stay with its generator's nodes, none of the new ones).
    """
    if not _finite(node_majority):
        why = ("the test rows come from a separate test file and belong to no node" if test_file else
               "the partition dealt the training rows to new nodes, and the test rows belong to none of them")
        return (f"**per-node majority**: n/a — {why}, so no node's most common label applies to them. "
                f"{DEAL_REMEDY}")
    head = f"**per-node majority** ({pct(node_majority)}): each node's own most common training label for its test rows"
    if not _finite(optimum):
        return head + "."
    if node_majority < optimum - OPT_TOLERANCE:
        return (head + f"; here it lies below OPT ({pct(optimum)}): knowing the node beats the best global model — "
                       "the data are far from IID, the case for personalised models (Section 4.1).")
    if node_majority > optimum + OPT_TOLERANCE:
        return head + f"; here it lies above OPT ({pct(optimum)}): the best global model beats knowing the node."
    return head + f"; here it is level with OPT ({pct(optimum)}, within {100 * OPT_TOLERANCE:g} points)."


def rare_features_note(omega: np.ndarray, n_nodes: int) -> str:
    """The share of features on few nodes, where it says something.

    The paper's figure (the share of features on fewer than 1,000 nodes, Section 4.1) only
    where K ≥ 1,000: with fewer nodes every feature trivially qualifies.  Otherwise the same
    idea relative to K: the share of the features seen that appear on fewer than a tenth of
    the nodes (:func:`fedviz.learn.rare_features.rare_share`, K/10 = 1,000 at the paper's K)."""
    from .rare_features import rare_share

    omega = np.asarray(omega)
    if omega.size == 0:
        return ""
    if n_nodes >= RARE_NODES:
        share = float(np.mean(omega < RARE_NODES))
        return f"{100 * share:.1f}% of features appear on fewer than {RARE_NODES:,} of the {n_nodes:,} nodes."
    share = rare_share(omega, n_nodes)
    if not math.isfinite(share):
        return ""
    return (f"{100 * share:.1f}% of the features seen appear on fewer than a tenth of the {n_nodes:,} nodes. The "
            f"paper counts features on fewer than {RARE_NODES:,} nodes, which says something from {RARE_NODES:,} "
            "nodes up.")


def label_spread_note(counts, names) -> str:
    """How far the nodes' labels are from the whole's, in one sentence under the node × class heatmap.

    Two numbers, over the nodes that hold training rows, each node counting once: how many have a
    majority class other than the whole's (:func:`fedviz.data.labels.node_majority`, the
    per-node-majority baseline of Section 4.1), and the mean total-variation distance
    TV(p_k, p) = ½ Σ_c |p_k,c − p_c| between a node's label distribution p_k and the whole's p
    (0: every node holds the whole's mix; 1: no class in common).  The mean over nodes, not over
    rows: it is the number issue 22 quotes for FedProx's Synthetic (0.76–0.79 with 10 classes),
    whose many small nodes a row-weighted mean would hide.
    """
    from ..data.labels import majority_class, node_majority

    counts = np.asarray(counts, dtype=np.int64)
    sizes = counts.sum(axis=1)
    held = counts[sizes > 0]
    if held.shape[0] == 0:
        return ""
    top = majority_class(held)
    differ = int(np.sum(node_majority(held) != top))
    p = held.sum(axis=0) / held.sum()
    tv = 0.5 * np.abs(held / held.sum(axis=1, keepdims=True) - p).sum(axis=1)
    K = held.shape[0]
    who = f"the {K:,} nodes" if K == counts.shape[0] else f"the {K:,} nodes that hold training rows"
    if differ == 0:
        lead = f"Every one of {who} has the whole's majority class ({names[top]})"
    else:
        share = 100 * differ / K
        lead = (f"{differ:,} of {who} ({share:.1f}%) " if share < 10 else f"{differ:,} of {who} ({share:.0f}%) ")
        lead += f"{'has' if differ == 1 else 'have'} a majority class other than the whole's ({names[top]})"
    return (f"{lead}; a node's label distribution lies on average {tv.mean():.2f} from the whole's in "
            "total variation (0: the same mix of classes, 1: no class in common).")


def _last(cols: Mapping, field: str) -> tuple[int, float] | None:
    """(iteration, value) of the last finite value of ``field`` in a run's columns."""
    ys = np.asarray(cols.get(field, ()), dtype=float)
    its = np.asarray(cols.get("iteration", np.arange(ys.size)))
    ok = np.flatnonzero(np.isfinite(ys))
    if ok.size == 0:
        return None
    return int(its[ok[-1]]), float(ys[ok[-1]])


def _lowest_suboptimality(curves: Mapping[str, Mapping]) -> str:
    """Which run has the lowest f − f* at the furthest iteration two or more runs reached (a run
    that ended early, diverged say, is left out rather than holding the comparison back)."""
    ends = {label: np.asarray(cols.get("iteration", ()), dtype=np.int64) for label, cols in curves.items()}
    ends = {label: e for label, e in ends.items() if e.size}
    if len(ends) < 2:
        return ""
    last = sorted((int(e.max()) for e in ends.values()), reverse=True)
    common = last[1]  # the furthest iteration at least two runs reached
    if common < 1:
        return ""
    at = {}
    for label, e in ends.items():
        idx = np.flatnonzero(e == common)
        if idx.size:
            v = float(np.asarray(curves[label]["suboptimality"], dtype=float)[idx[-1]])
            if math.isfinite(v):
                at[label] = v
    if len(at) < 2:
        return ""
    best = min(at, key=at.get)
    if sum(1 for v in at.values() if v == at[best]) > 1:
        return ""
    among = "" if len(at) == len(curves) else f" (of the {len(at)} runs that got there)"
    return f"At iteration {common:,} the lowest f − f*{among} is **{best}**'s ({at[best]:.2e})."


def _overshoot(label: str, cols: Mapping) -> str:
    """CoCoA+'s first-round overshoot, said only when its curve rises at iteration 1."""
    its = np.asarray(cols.get("iteration", ()), dtype=np.int64)
    sub = np.asarray(cols.get("suboptimality", ()), dtype=float)
    i0, i1 = np.flatnonzero(its == 0), np.flatnonzero(its == 1)
    if i0.size and i1.size and sub[i1[0]] > sub[i0[0]]:
        return (f"**{label}** overshoots in its first round here: f − f* rises from {sub[i0[0]]:.2e} to "
                f"{sub[i1[0]]:.2e}.")
    return ""


def chart_notes(axis: str, algorithms, *, regression: bool = False, curves: Mapping[str, Mapping] | None = None,
                baselines: Mapping[str, float | None] | None = None) -> tuple[str, str]:
    """(the sentences under the f(w) − f* chart, those under the test-error chart).

    ``algorithms`` maps each run's label to its registry name (an iterable of names is read
    as labels equal to the names); ``curves`` maps a label to its columns (``iteration``,
    ``suboptimality``, ``test_error``); ``baselines`` holds ``optimum``, ``majority`` and
    ``node_majority`` (test errors; None or NaN where unknown) and ``test_file`` (whether the
    test rows come from a separate file: why a per-node majority is n/a).  A sentence about a value
    is said only when that value is given and the claim holds for it.  One idea a line
    (Markdown line breaks), so a reader can skip to the algorithm they are looking at.
    """
    names = dict(algorithms) if isinstance(algorithms, Mapping) else {n: n for n in algorithms}
    curves = dict(curves or {})
    base = dict(baselines or {})
    present = list(dict.fromkeys(names.values()))
    sub = ["f(w) − f* on a log scale: a straight falling line is linear convergence.", AXIS_NOTES.get(axis, "")]
    sub += [SUBOPTIMALITY_NOTES[n] for n in present if n in SUBOPTIMALITY_NOTES]
    sub += [_overshoot(label, curves[label]) for label, n in names.items() if n == "cocoa-plus" and label in curves]
    sub.append(_lowest_suboptimality({label: curves[label] for label in names if label in curves}))
    optimum, majority = base.get("optimum"), base.get("majority")
    if regression:
        value = f" ({optimum:.4g})" if _finite(optimum) else ""
        err = [f"Test mean squared error; **OPT**{value} is the optimum w*'s, where a converged run ends."]
        return _join(sub), _join(err)
    err = [_OPT_NOTE.format(value=_value(optimum)), _MAJORITY_NOTE.format(value=_value(majority))]
    if "node_majority" in base:
        err.append(node_majority_note(base.get("node_majority"), optimum, test_file=bool(base.get("test_file", True))))
    for label, name in names.items():
        last = _last(curves[label], "test_error") if label in curves else None
        if last is None:
            continue
        it, e = last
        if name == "gd" and _finite(majority) and abs(e - majority) <= MAJORITY_TOLERANCE:
            err.append(f"**{label}** is at {pct(e)} at iteration {it:,}, within {100 * MAJORITY_TOLERANCE:g} point of "
                       f"predict majority ({pct(majority)}): it errs about as often as one label for "
                       "everyone.")
        if name == "fsvrg" and _finite(optimum):
            head = f"**{label}**: {TEST_ERROR_NOTES[name]}"
            if abs(e - optimum) <= OPT_TOLERANCE:
                err.append(head + f"; here it is at {pct(e)} at iteration {it:,}, within "
                                  f"{100 * OPT_TOLERANCE:g} points of OPT ({pct(optimum)}).")
            else:
                err.append(head + f"; here it is at {pct(e)} at iteration {it:,}, {100 * abs(e - optimum):.2f} "
                                  f"points {'above' if e > optimum else 'below'} OPT ({pct(optimum)}).")
    return _join(sub), _join(err)


def _join(lines) -> str:
    return "  \n".join(s for s in lines if s)


__all__ = ["AXIS_NOTES", "MAJORITY_TOLERANCE", "OPT_TOLERANCE", "RARE_NODES", "SUBOPTIMALITY_NOTES",
           "TEST_ERROR_NOTES", "chart_notes", "node_majority_note", "pct", "rare_features_note"]
