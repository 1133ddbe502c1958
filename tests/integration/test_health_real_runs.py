"""Run health on real runs: the verdicts of :func:`fedviz.runner.health.assess` pinned on whole runs
of the algorithms on real data (GD ×4's cycle on google-plus-small, FSVRG's converging wiggle,
FedAvg's client-sampling swings on a9a over 100 nodes).  Each builds and solves a data set and runs
30–40 iterations, so they live here, not with the unit tests of tests/unit/test_health.py."""

import numpy as np
import pytest

from conftest import DATA
from fedviz.algorithms import ALGORITHMS
from fedviz.data.build import DataSpec, build
from fedviz.problems.objective import Problem
from fedviz.problems.optimum import solve
from fedviz.runner import iterate
from fedviz.runner.health import assess


def _curve(problem, name, iterations, f_star, **hyper):
    recs = list(iterate(problem, name, iterations=iterations, hyper=hyper, f_star=f_star))
    return [r.objective for r in recs], recs[-1]


@pytest.fixture(scope="module")
def google_plus():
    problem = Problem(build(DataSpec(source="preset:google-plus-small")), "logistic")
    return problem, solve(problem).objective


def test_gd_beyond_its_limit_on_google_plus_small_is_oscillating(google_plus):
    """GD with 4× its 1/L step cycles every 4–5 iterations between f − f* 0.12 and 1.6; 2× is ok."""
    problem, f_star = google_plus
    h = ALGORITHMS["gd"](problem).h  # its default 1/L
    objs, last = _curve(problem, "gd", 30, f_star, stepsize=4 * h)
    gaps = np.array(objs) - f_star
    assert gaps[-1] == pytest.approx(0.115, abs=0.005) and gaps[15:].max() > 1.3  # the brief's numbers
    v = assess(objs, f_star)
    assert v.status == "oscillating" and "relapsed" in v.reason
    assert last.status == "done" and last.message == f"oscillating: {v.reason}"
    objs2, last2 = _curve(problem, "gd", 30, f_star, stepsize=2 * h)
    assert assess(objs2, f_star).ok and last2.message == ""


def test_fsvrg_converging_wiggle_on_google_plus_small_is_ok():
    """FSVRG as printed (no safeguard, its cautious default h) on 60 nodes wiggles with period 2
    (by ±30%) while both envelopes fall.  (The safeguarded default's curve never rises.)"""
    problem = Problem(build(DataSpec(source="preset:google-plus-small?nodes=60")), "logistic")
    f_star = solve(problem).objective
    objs, last = _curve(problem, "fsvrg", 40, f_star, safeguard=False)
    gaps = np.array(objs[-9:]) - f_star
    d = np.diff(gaps)
    assert np.all(d[:-1] * d[1:] < 0)                    # it does zig-zag ...
    assert np.all(np.diff(gaps[::2]) < 0) and np.all(np.diff(gaps[1::2]) < 0)  # ... with both envelopes falling
    assert assess(objs, f_star).ok and last.status == "done" and last.message == ""


def test_fedavg_client_sampling_on_a9a_is_ok_and_eight_times_its_step_is_not():
    """The decision pinned: FedAvg (C = 0.1) on a9a, Dirichlet 0.5 over 100 nodes, swings over
    10× at its default step but stays below its start: ok.  At 8× the step it relapses above it."""
    ds = build(DataSpec(source=str(DATA / "a9a"), test=str(DATA / "a9a.t"), partition="dirichlet:alpha=0.5",
                        nodes=100, seed=0))
    problem = Problem(ds, "logistic", None)
    f_star = solve(problem).objective
    objs, last = _curve(problem, "fedavg", 30, f_star)
    gaps = np.array(objs) - f_star
    assert gaps[15:].max() > 10 * gaps[:15].min()        # the swings are real ...
    assert gaps[1:].max() < gaps[0]                      # ... and never back above the start
    assert assess(objs, f_star).ok and last.message == ""
    h = ALGORITHMS["fedavg"](problem).h
    objs8, last8 = _curve(problem, "fedavg", 30, f_star, stepsize=8 * h)
    assert assess(objs8, f_star).status == "oscillating" and last8.message.startswith("oscillating: ")
