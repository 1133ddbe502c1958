"""The sentences under the charts and on the Data page, against the data and curves in force.

Each claim is checked against an independent computation on two data sets, the google-plus-small
preset (GD with fixed steps at 33.39% against a 33.51% majority after 30 iterations: the claim holds) and
a9a with its test file (16.81% against 23.62%: it does not; and its test rows belong to no node).  The
majority rate is counted here from the labels (scikit-learn reads a9a); the per-node majority by a
loop over the nodes; the features' spread from the dense matrix.
"""

import re

import numpy as np
import pytest
from sklearn.datasets import load_svmlight_file

from fedviz.data.build import DataSpec
from fedviz.learn.chart_notes import (AXIS_NOTES, MAJORITY_TOLERANCE, OPT_TOLERANCE, RARE_NODES,
                                      SUBOPTIMALITY_NOTES, chart_notes, node_majority_note, rare_features_note)
from fedviz.plots import X_AXES
from fedviz.runner import cache
from fedviz.runner.loop import iterate

from conftest import DATA

GPLUS = DataSpec("preset:google-plus-small")
A9A = DataSpec(str(DATA / "a9a"), test=str(DATA / "a9a.t"))


def _columns(records) -> dict:
    records = list(records)
    return {f: np.array([getattr(r, f) for r in records]) for f in ("iteration", "suboptimality", "test_error")}


@pytest.fixture(scope="module", params=["google-plus-small", "a9a"])
def case(request):
    """(data set, optimum, GD's and FSVRG's columns after 30 and 10 iterations, majority rate counted here).
    GD with fixed steps h = 1/L: on google-plus-small it sits at the majority rate, the case the note is for
    (the default's Barzilai–Borwein steps leave it on both data sets)."""
    spec = GPLUS if request.param == "google-plus-small" else A9A
    ds, problem, opt = cache.dataset(spec), cache.problem(spec), cache.optimum(spec)
    gd = _columns(iterate(problem, "gd", iterations=30, hyper={"steps": "fixed"}, f_star=opt.objective))
    fsvrg = _columns(iterate(problem, "fsvrg", iterations=10, f_star=opt.objective))
    if request.param == "a9a":  # the raw files, read by scikit-learn: labels ±1
        _, y = load_svmlight_file(str(DATA / "a9a"), n_features=123)
        _, y_test = load_svmlight_file(str(DATA / "a9a.t"), n_features=123)
    else:
        y, y_test = ds.y, ds.y_test
    major = 1.0 if np.sum(y > 0) > np.sum(y <= 0) else -1.0
    majority = float(np.mean(y_test != major))
    return request.param, ds, opt, gd, fsvrg, majority


def _node_majority(ds) -> float:
    """Each node's commoner training label (a tie: the global one), for the test rows of that node: a loop."""
    glob = 1.0 if 2 * np.sum(ds.y > 0) > ds.y.size else -1.0
    wrong = total = 0
    for k in range(ds.n_nodes):
        yk = ds.y[ds.offsets[k]:ds.offsets[k + 1]]
        pos, neg = np.sum(yk > 0), np.sum(yk < 0)
        label = 1.0 if pos > neg else -1.0 if neg > pos else glob
        yt = ds.y_test[ds.test_nodes == k]
        wrong += int(np.sum(yt != label))
        total += yt.size
    return wrong / total if total else float("nan")


def _notes(ds, opt, runs: dict, majority):
    algorithms = {label: name for label, (name, _) in runs.items()}
    curves = {label: cols for label, (_, cols) in runs.items()}
    baselines = {"optimum": opt.test_error, "majority": majority, "node_majority": _node_majority(ds)}
    return chart_notes("iteration", algorithms, curves=curves, baselines=baselines)


def test_gd_is_said_to_sit_at_the_majority_rate_only_where_it_does(case):
    """The issue: on a9a 'GD sits at the majority rate' was printed while GD was at 16% against 23.6%."""
    name, ds, opt, gd, _, majority = case
    _, err = _notes(ds, opt, {"GD": ("gd", gd)}, majority)
    gd_now = gd["test_error"][-1]
    near = abs(gd_now - majority) <= MAJORITY_TOLERANCE
    assert near == (name == "google-plus-small"), (name, gd_now, majority)  # the data sets differ as measured
    claim = [line for line in err.split("  \n") if line.startswith("**GD**")]
    if near:
        assert claim == [f"**GD** is at {100 * gd_now:.2f}% at iteration 30, within 1 point of predict majority "
                         f"({100 * majority:.2f}%): it errs about as often as one label for everyone."]
    else:
        assert claim == [] and "majority rate" not in err
    assert f"**predict majority** ({100 * majority:.2f}%)" in err
    assert f"**OPT** ({100 * opt.test_error:.2f}%)" in err


def test_the_per_node_majority_is_compared_with_opt_or_explained_where_it_is_n_a(case):
    name, ds, opt, gd, _, majority = case
    _, err = _notes(ds, opt, {"GD": ("gd", gd)}, majority)
    node = _node_majority(ds)
    line = next(x for x in err.split("  \n") if "per-node majority" in x)
    if name == "a9a":  # the test file's rows belong to no node
        assert np.all(ds.test_nodes < 0) and np.isnan(node)
        assert "n/a" in line and "separate test file" in line and "below OPT" not in line
    else:
        assert node < opt.test_error - OPT_TOLERANCE  # 17.3% against 26.4%: the paper's finding holds here
        assert f"({100 * node:.2f}%)" in line and f"below OPT ({100 * opt.test_error:.2f}%)" in line
        assert "personalised" in line


def test_fsvrg_s_distance_to_opt_is_read_off_its_curve(case):
    name, ds, opt, gd, fsvrg, majority = case
    _, err = _notes(ds, opt, {"FSVRG": ("fsvrg", fsvrg)}, majority)
    line = next(x for x in err.split("  \n") if x.startswith("**FSVRG**"))
    e = fsvrg["test_error"][-1]
    assert f"at {100 * e:.2f}% at iteration 10" in line
    if abs(e - opt.test_error) <= OPT_TOLERANCE:
        assert "within 0.5 points of OPT" in line
    else:
        gap = re.search(r"([\d.]+) points (above|below) OPT", line)
        assert gap and float(gap[1]) == pytest.approx(100 * abs(e - opt.test_error), abs=0.006)
        assert gap[2] == ("above" if e > opt.test_error else "below")


def test_the_lowest_suboptimality_is_named_from_the_curves(case):
    name, ds, opt, gd, fsvrg, majority = case
    gd10 = {k: v[:11] for k, v in gd.items()}  # both at iteration 10, as in a live run's round robin
    sub, _ = _notes(ds, opt, {"GD": ("gd", gd10), "FSVRG": ("fsvrg", fsvrg)}, majority)
    at = {"GD": gd["suboptimality"][10], "FSVRG": fsvrg["suboptimality"][10]}
    best = min(at, key=at.get)
    assert f"At iteration 10 the lowest f − f* is **{best}**'s ({at[best]:.2e})." in sub
    assert "falls fastest" not in sub  # no claim written for one data set
    # A run that ended early (diverged at iteration 1, say) does not hold the comparison back.
    early = {k: v[:2] for k, v in gd.items()}
    sub, _ = _notes(ds, opt, {"GD": ("gd", gd10), "FSVRG": ("fsvrg", fsvrg), "DANE": ("dane", early)}, majority)
    assert f"At iteration 10 the lowest f − f* (of the 2 runs that got there) is **{best}**'s" in sub


def test_cocoa_s_overshoot_is_said_only_when_its_curve_rises():
    rising = {"iteration": np.arange(3), "suboptimality": np.array([1.0, 3.0, 0.5]), "test_error": np.zeros(3)}
    falling = {**rising, "suboptimality": np.array([1.0, 0.8, 0.5])}
    sub, _ = chart_notes("iteration", {"CoCoA+": "cocoa-plus"}, curves={"CoCoA+": rising})
    assert "**CoCoA+** overshoots in its first round here: f − f* rises from 1.00e+00 to 3.00e+00." in sub
    sub, _ = chart_notes("iteration", {"CoCoA+": "cocoa-plus"}, curves={"CoCoA+": falling})
    assert "overshoots" not in sub


def test_rare_features_note_says_something_for_any_k(case):
    """'100.0% of features on fewer than 1,000 nodes' was printed whenever K < 1,000."""
    name, ds, *_ = case
    node_of_row = np.repeat(np.arange(ds.n_nodes), np.diff(ds.offsets))
    X = ds.X.tocsc()
    X.eliminate_zeros()
    omega = np.array([np.unique(node_of_row[X.indices[X.indptr[j]:X.indptr[j + 1]]]).size for j in range(ds.d)])
    np.testing.assert_array_equal(omega, ds.stats.omega)
    note = rare_features_note(ds.stats.omega, ds.n_nodes)
    assert ds.n_nodes < RARE_NODES and "fewer than 1,000 of" not in note
    seen = omega[omega > 0]
    share = np.sum(10 * seen < ds.n_nodes) / seen.size  # on fewer than K/10 nodes, in integers
    assert note.startswith(f"{100 * share:.1f}% of the features seen appear on fewer than a tenth of the "
                           f"{ds.n_nodes:,} nodes")
    assert np.isnan(ds.stats.summary()["features_on_fewer_than_1000_nodes"])  # does not apply: n/a


def test_rare_features_note_keeps_the_paper_s_count_from_1000_nodes():
    omega = np.array([1, 5, 999, 1000, 3000])
    assert rare_features_note(omega, 5000) == "60.0% of features appear on fewer than 1,000 of the 5,000 nodes."
    assert rare_features_note(omega, 1000).startswith("60.0%")


def test_node_majority_note_by_value():
    assert "below OPT (26.00%)" in node_majority_note(0.17, 0.26)
    assert "above OPT (10.00%)" in node_majority_note(0.17, 0.10)
    assert "level with OPT" in node_majority_note(0.171, 0.17)
    assert "n/a" in node_majority_note(float("nan"), 0.2) and "n/a" in node_majority_note(None, 0.2)


# -- what the axis counts and how each algorithm works (moved from test_learn_tour.py) ------------------
def test_every_x_axis_has_its_sentence():
    assert set(AXIS_NOTES) == set(X_AXES)
    for axis in X_AXES:
        sub, _ = chart_notes(axis, [])
        assert AXIS_NOTES[axis] in sub


def test_the_notes_explain_only_the_algorithms_in_the_run():
    sub, err = chart_notes("rounds", ["fsvrg", "gd", "cocoa-plus"])
    for name in ("fsvrg", "gd", "cocoa-plus"):
        assert SUBOPTIMALITY_NOTES[name] in sub
    assert "**OPT**" in err and "predict majority" in err
    assert "majority rate" not in err and "%" not in err  # no curves, no baselines: no claim about a value
    sub, err = chart_notes("rounds", ["fedavg"])
    assert not any(note in sub for note in SUBOPTIMALITY_NOTES.values())
    _, err = chart_notes("iteration", ["gd"], regression=True)
    assert "majority" not in err and "mean squared error" in err
    assert "  \n" in sub  # one idea a line


def test_a_partitioned_preset_s_n_a_is_explained_by_the_partition_not_a_test_file():
    """Reshuffled google-plus-small (the non-IID lesson): the test rows stay with the generator's authors, so
    they belong to none of the new nodes — the sentence must not blame a test file there is none of."""
    spec = DataSpec("preset:google-plus-small", partition="reshuffle")
    ds = cache.dataset(spec)
    assert spec.test is None and np.all(ds.test_nodes < 0) and np.isnan(_node_majority(ds))
    _, err = chart_notes("iteration", {}, baselines={"optimum": 0.26, "majority": 0.335, "node_majority": float("nan"),
                                                     "test_file": spec.test is not None})
    assert "n/a — the partition dealt the training rows to new nodes" in err and "test file" not in err
