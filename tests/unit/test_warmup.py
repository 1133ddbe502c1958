"""The kernels' warm-up at server start (app.py → ui.start_warm_up → runner.serve.warmup.warm_up)."""

import numpy as np
import pytest

from fedviz.algorithms import ALGORITHMS
from fedviz.problems._blocks import RowBlocks
from fedviz.runner.serve import warmup


@pytest.fixture(scope="module")
def warmed():
    """One full warm-up for the module's tests (each takes seconds): the seconds it returns, the
    progress it reports, and (problem's classes, all-ones values, algorithm) of every run it makes,
    read by a spy on the loop's ``iterate``."""
    from fedviz.runner import loop

    ran, real = [], loop.iterate

    def spy(problem, name, **kw):
        ran.append((problem.n_classes, bool(np.all(problem.data.X.data == 1.0)), name))
        return real(problem, name, **kw)

    progress = warmup.Progress()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(loop, "iterate", spy)
        seconds = warmup.warm_up(progress=progress)
    return seconds, progress, ran


def test_warm_up_runs_every_registered_algorithm_and_the_row_block_products(warmed):
    seconds, _, _ = warmed
    assert set(seconds) == set(ALGORITHMS)  # an algorithm added later is warmed up too
    # The file-like problems are large enough for the compiled row-block products (not SciPy's).
    problems = list(warmup._problems())
    kinds = {(RowBlocks(p.data.X).n_blocks > 1, p.loss.name) for p in problems[1:]}
    assert kinds == {(True, "logistic"), (True, "squared"), (True, "smoothed-hinge"), (True, "softmax")}


def test_warm_up_stops_when_asked():
    assert warmup.warm_up(stop=lambda: True) == {}


# -- the banner's estimate of the time left (issue 20: the first click waited 29 s without a word) -----------
def test_the_plan_is_the_first_click_first_then_every_problem_and_the_cold_table_covers_it():
    """Issue 31, point 1: the default run's kernels (Home's Reproduce: RunConfig()'s algorithms on the preset's
    form) come first, so a click some seconds after the start finds them compiled; then every other step."""
    from fedviz.runner.config import RunConfig

    every = [(i, name) for i, problem in enumerate(warmup._problems())
             for name, cls in ALGORITHMS.items() if cls.loss_refusal(problem.loss.name) is None]
    first = [(0, name) for name, _ in RunConfig().algorithms]
    assert RunConfig().data.source == "preset:google-plus-small" and next(warmup._problems()).loss.name == "logistic"
    assert warmup.steps() == first + [step for step in every if step not in first]
    assert set(warmup.COLD_SECONDS) == set(every)  # re-measure (python -m fedviz.runner.serve.warmup --measure) when it grows


def test_a_run_is_told_the_seconds_its_own_steps_still_need():
    """Steps a, b on logistic and c on softmax, cold 1, 3, 6 s; the first took 2 s (ratio 2): a logistic run of b
    and c still needs 2 × 3 = 6 s, and 1 s into b, 5; a softmax run of c, 12; once done, nothing."""
    clock = Clock()
    plan = [(0, "a"), (0, "b"), (6, "c")]
    p = warmup.Progress(plan, cold={(0, "a"): 1.0, (0, "b"): 3.0, (6, "c"): 6.0}, clock=clock)
    assert warmup.run_steps({"b", "c"}, "logistic") >= {(0, "b"), (0, "c")}
    assert all(warmup.LOSSES[i] == "softmax" for i, _ in warmup.run_steps({"c"}, "softmax"))
    p.start_step()
    clock.now += 2.0
    p.end_step()
    assert p.seconds_until(warmup.run_steps({"b", "c"}, "logistic")) == 6.0
    assert p.seconds_until(warmup.run_steps({"c"}, "softmax")) == 12.0
    assert p.seconds_until(None) == p.seconds_left() == 18.0
    p.start_step()
    clock.now += 1.0
    assert p.seconds_until(warmup.run_steps({"b"}, "logistic")) == 5.0
    p.finish()
    assert p.seconds_until(warmup.run_steps({"c"}, "softmax")) == 0.0


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_the_time_left_is_the_cold_table_scaled_by_the_steps_so_far():
    """Cold seconds 1, 3, 6: the first step took 2 s (twice its cold time), so 2 × (3 + 6) = 18 s are left;
    1 s into the second, 2 × 3 − 1 + 2 × 6 = 17; a step missing from the table counts as the median."""
    clock = Clock()
    p = warmup.Progress([(0, "a"), (0, "b"), (0, "c")], cold={(0, "a"): 1.0, (0, "b"): 3.0, (0, "c"): 6.0},
                        clock=clock)
    assert p.seconds_left() == 10.0  # before any step: the table as it is
    p.start_step()
    clock.now += 2.0
    p.end_step()
    assert p.ratio() == 2.0 and p.seconds_left() == 18.0
    p.start_step()
    clock.now += 1.0
    assert p.seconds_left() == 17.0
    clock.now += 10.0  # far over its estimate: the step under way counts 0, not less
    assert p.seconds_left() == 12.0
    p.end_step()
    p.start_step()
    p.end_step()
    assert p.done == 3 and p.seconds_left() == 0.0
    q = warmup.Progress([(0, "a"), (0, "new")], cold={(0, "a"): 1.0, (1, "x"): 3.0, (1, "y"): 5.0})
    assert q.cold == [1.0, 3.0]


def test_a_warm_up_reports_every_step_and_its_end(warmed):
    _, p, _ = warmed
    assert p.finished and p.done == len(p.plan) and p.seconds_left() == 0.0
    stopped = warmup.Progress()
    warmup.warm_up(stop=lambda: True, progress=stopped)
    assert stopped.finished and stopped.done == 0  # a stopped warm-up ends too: no banner left behind


def test_the_banner_says_the_time_left_and_goes_when_done():
    from fedviz import ui

    clock = Clock()
    p = warmup.Progress([(0, "a"), (0, "b")], cold={(0, "a"): 10.0, (0, "b"): 30.0}, clock=clock)
    p.start_step()
    clock.now += 5.0
    p.end_step()  # half the cold time: 0.5 × 30 = 15 s left
    assert ui.warm_up_text(p).startswith("Warming up the kernels: about 15 s left (1 of 2 steps compiled);")
    p.finish()
    assert ui.warm_up_text(p) is None and ui.warm_up_text(None) is None


def test_a_run_waiting_for_its_kernels_says_how_long_they_take(monkeypatch):
    """The first click said "Compiling kernels (first run only)…" and nothing of how long; it now says the
    seconds its own steps need (the banner's estimate), and no compile once the warm-up has done them."""
    from types import SimpleNamespace

    from fedviz.ui import page

    clock = Clock()
    p = warmup.Progress([(0, "fsvrg"), (0, "gd")], cold={(0, "fsvrg"): 20.0, (0, "gd"): 1.0}, clock=clock)
    monkeypatch.setattr(page, "start_warm_up", lambda: p)
    snap = SimpleNamespace(algorithms={"FSVRG": "fsvrg", "GD": "gd"}, summary={"loss": "logistic"})
    assert page.compile_text(snap) == ("Compiling this run's kernels (once per server): about 21 s in all on this "
                                       "machine…")
    p.start_step()
    clock.now += 15.0
    assert "about 6 s in all" in page.compile_text(snap)  # 20 − 15, and GD's 1
    p.end_step(), p.start_step(), p.end_step()
    assert page.compile_text(snap) == "First iteration under way…"
    monkeypatch.setattr(page, "start_warm_up", lambda: None)  # FEDVIZ_WARMUP=0
    assert page.compile_text(snap) == "First iteration under way…"
    assert page.compile_text(SimpleNamespace(algorithms={"GD": "gd"}, summary={})) == "First iteration under way…"


# -- runs first (issue 31, point 1: the first click waited 95.6 s for the warm-up, 9.5 s later) ---------------
def test_no_step_starts_while_runs_compute_and_the_pause_is_not_counted(monkeypatch):
    """``pause`` says True at its first three looks before the fourth step: the step waits (no iterate call
    meanwhile, two polls), the progress says paused, and the paused seconds stay out of the ratio the
    estimate scales by."""
    from fedviz.runner import loop

    clock = Clock()
    calls, looks, seen = [], {"n": 0}, []
    monkeypatch.setattr(warmup.time, "sleep", lambda s: setattr(clock, "now", clock.now + s))

    def fake_iterate(problem, name, **kw):
        calls.append(name)
        clock.now += 1.0  # every step takes 1 s
        return iter(())

    def pause():
        if len(calls) < 3:
            return False
        looks["n"] += 1
        seen.append(progress.paused)
        return looks["n"] <= 3

    monkeypatch.setattr(loop, "iterate", fake_iterate)
    plan = warmup.steps()
    progress = warmup.Progress(plan, cold={step: 1.0 for step in plan}, clock=clock)
    warmup.warm_up(progress=progress, pause=pause)
    assert len(calls) == len(plan) and progress.finished
    assert seen[:4] == [False, True, True, True]  # held from the first True until the False that ends it
    assert progress.held == pytest.approx(2 * warmup.PAUSE_POLL)  # the looks between the first True and the False
    assert progress.ratio() == pytest.approx(1.0)  # 1 s a step, as the table says: the pause is left out


def test_the_banner_says_when_the_warm_up_waits_for_runs():
    from fedviz import ui

    clock = Clock()
    p = warmup.Progress([(0, "a"), (0, "b")], cold={(0, "a"): 10.0, (0, "b"): 30.0}, clock=clock)
    p.start_step()
    clock.now += 5.0
    p.end_step()
    p.hold()
    assert ui.warm_up_text(p) == ("Warming up the kernels: paused while runs compute (1 of 2 steps compiled); a run "
                                  "compiles the kernels it needs itself first.")
    clock.now += 60.0
    p.resume()
    assert not p.paused and ui.warm_up_text(p).startswith("Warming up the kernels: about 15 s left (1 of 2 steps")


def test_a_stop_during_the_pause_ends_the_warm_up():
    progress = warmup.Progress()
    looks = iter([False, True, True])
    stops = iter([False, False, False, True])
    warmup.warm_up(stop=lambda: next(stops, True), progress=progress, pause=lambda: next(looks, True))
    assert progress.finished and progress.done == 1


# -- softmax (issue 22): the first softmax run is not the one that compiles its kernels -----------------------
def test_every_algorithm_that_takes_softmax_is_warmed_on_a_softmax_problem(warmed):
    """The warm-up runs one softmax iteration of each algorithm the registry says takes softmax, on a
    three-class problem of each value form dna.scale and fedprox-synthetic hold (all ones, float64), and
    none of those it refuses; the softmax kernels then hold compiled code."""
    from fedviz.algorithms import _softmax_kernels

    _, _, ran = warmed
    takes = {name for name, cls in ALGORITHMS.items() if cls.softmax_refusal() is None}
    assert takes and takes != set(ALGORITHMS)  # the registry has both kinds (else this test says little)
    assert {(ones, name) for c, ones, name in ran if c == 3} == {(ones, name) for ones in (True, False)
                                                                  for name in takes}
    assert {c for c, _, _ in ran} == {1, 3}
    for kernel in ("sgd_epoch_softmax", "_batch_softmax", "_round_batch_softmax"):
        assert getattr(_softmax_kernels, kernel).signatures, kernel
