"""The runner's pieces: results identical to a sequential run of the loop, round-robin order,
FIFO queue, stop, session timeouts, failures that end a run instead of a thread, the
process-wide singleton; the problem and f* prepared in the worker under the cap (a
ProblemSpec, the process-wide cache); execute as a pure function of (job, sink, stop); and
the executor seam, which a second executor implements with one method.  Time enters only as
generous upper bounds ('within 10 s')."""

import math
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from problems import random_rows
from fedviz.algorithms.base import Algorithm, Param
from fedviz.data.build import DataSpec
from fedviz.data.dataset import FederatedDataset
from fedviz.errors import ParameterError
from fedviz.problems.objective import Problem
from fedviz.problems.optimum import solve
from fedviz.runner import cache
from fedviz.runner.serve import manager as manager_mod
from fedviz.runner.history.describe import INTERRUPTED_MESSAGE
from fedviz.runner.execute import Executor, Stop, ThreadExecutor, execute
from fedviz.runner.loop import iterate
from fedviz.runner.serve.manager import ProblemSpec, RunJob, RunManager, get_manager
from fedviz.runner.history.store import NUMERIC_FIELDS, RunStore

WAIT = 10.0  # generous upper bound for anything that should take milliseconds


def _problem(seed=0, n=80, d=5, loss="logistic"):
    X, y, nodes = random_rows(n=n, d=d, density=0.7, seed=seed, regression=loss == "squared", assigned=n // 2)
    # Half the rows form the test set (no test error is NaN in the records, and NaN in the rest).
    data = FederatedDataset.from_assignment(X[: n // 2], y[: n // 2], nodes, X_test=X[n // 2:], y_test=y[n // 2:])
    return Problem(data, loss, 0.1)


PROBLEM = _problem()


def make_problem():
    return PROBLEM


class Slow(Algorithm):
    """A deliberately slow algorithm: sleeps in each step and honours Stop between 'nodes'."""

    name = "slow"
    title = "Slow"

    def _step(self):
        for _ in range(2):
            time.sleep(0.002)
            self.check_stop()
        self.count_round()
        self.w = self.w * 0.5 + 0.01


class Logged(Algorithm):
    """Appends its tag to a shared log at every step: shows the order of interleaving."""

    name = "logged"
    title = "Logged"
    params = (Param("tag", "int", 0, "which algorithm this is"),)
    log: list = []

    def _step(self):
        Logged.log.append(self.hp["tag"])
        self.w = self.w + 0.001


class Breaks(Algorithm):
    """Raises a plain exception at its third step."""

    name = "breaks"
    title = "Breaks"

    def _step(self):
        if self.iteration == 2:
            raise RuntimeError("boom at the third step")
        self.w = self.w + 0.001


class SquaredOnly(Algorithm):
    name = "squared-only"
    title = "Squared only"
    losses = ("squared",)

    def _step(self):
        self.w = self.w + 0.001


def _until(predicate, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached within the time bound")
        time.sleep(0.005)


@pytest.fixture
def store(tmp_path):
    s = RunStore(tmp_path / "runs.sqlite")
    yield s
    s.close()


@pytest.fixture
def managers(store):
    """A factory of managers on the temporary store, all closed (threads joined) at the end."""
    made = []

    def make(**kw):
        kw.setdefault("store", store)
        kw.setdefault("reaper", False)
        m = RunManager(**kw)
        made.append(m)
        return m

    yield make
    for m in made:
        assert m.close(timeout=WAIT)


def _key(rec, seconds=True):
    """The record as a tuple in which NaN equals NaN (optionally without the timing)."""
    d = rec.as_dict()  # the stored fields (not the in-memory per-node vectors)
    if not seconds:
        d.pop("seconds")
    return tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in d.values())


def test_records_equal_a_sequential_run_of_the_loop(managers, store):
    m = managers(max_concurrent=2)
    algos = (("default step", "gd", {}), ("half step", "gd", {"stepsize": 0.5}))
    h = m.submit(RunJob(make_problem, algos, iterations=15, seed=3, config={"data": "toy"}), "s")
    assert h.wait(WAIT)
    snap = h.snapshot()
    assert (snap.status, snap.phase, snap.progress, snap.eta_seconds) == ("done", "finished", 1.0, 0.0)
    f_star = solve(PROBLEM).objective
    assert snap.f_star == f_star
    for label, name, hyper in algos:
        expected = list(iterate(PROBLEM, name, iterations=15, hyper=hyper, seed=3, f_star=f_star,
                                label=label))
        got = snap.records(label)
        assert [_key(r, seconds=False) for r in got] == [_key(r, seconds=False) for r in expected]
        assert snap.statuses[label] == "done" and snap.last[label] == got[-1]
        # Columns are the same numbers, and the algorithm's own time never decreases.
        for f in NUMERIC_FIELDS:
            np.testing.assert_array_equal(snap.columns[label][f], [getattr(r, f) for r in got])
        assert np.all(np.diff(snap.columns[label]["seconds"]) >= 0)
        # The store holds exactly the in-memory records, with the run's setup.
        run = store.get_run(snap.store_ids[label])
        assert (run.status, run.label, run.algorithm, run.group_id) == ("done", label, "gd", h.id)
        assert run.config == {"data": "toy", "iterations": 15, "seed": 3}
        assert run.hyper == {"stepsize": hyper.get("stepsize"), "steps": "bb"}  # every value it ran with
        assert run.f_star == f_star and run.dataset_fingerprint == PROBLEM.data.fingerprint
        assert run.dataset_summary["n"] == PROBLEM.n and run.dataset_summary["lam"] == 0.1
        assert [_key(r) for r in store.records(run.id)] == [_key(r) for r in got]


def test_algorithms_advance_round_robin(managers):
    Logged.log = []
    m = managers(max_concurrent=1)
    algos = tuple((f"tag {k}", Logged, {"tag": k}) for k in range(3))
    h = m.submit(RunJob(make_problem, algos, iterations=4, f_star=0.0), "s")
    assert h.wait(WAIT) and h.status == "done"
    assert Logged.log == [0, 1, 2] * 4


def test_bad_jobs_are_refused_before_anything_starts(managers, store):
    m = managers(max_concurrent=1)
    bad = [
        (RunJob(make_problem, (("a", "gd", {"stepsize": -1.0}),), iterations=5), "gd.stepsize"),
        (RunJob(make_problem, (("a", "gd", {"step": 1.0}),), iterations=5), "gd.step"),
        (RunJob(make_problem, (("a", "no-such", {}),), iterations=5), "algorithm"),
        (RunJob(make_problem, (("a", dict, {}),), iterations=5), "algorithms\\[0\\].algorithm"),
        (RunJob(make_problem, (("a", "gd", {}), ("a", "gd", {})), iterations=5), "label"),
        (RunJob(make_problem, (), iterations=5), "algorithms"),
        (RunJob(make_problem, (("a", "gd", {}),), iterations=-1), "iterations"),
        (RunJob(make_problem, (("a", "gd", {}),), iterations=5, seed=-2), "seed"),
        (RunJob(make_problem, (("a", "gd", {}),), iterations=5, config={"f": object()}), "config"),
        (RunJob("not callable", (("a", "gd", {}),), iterations=5), "make_problem"),
    ]
    for job, name in bad:
        with pytest.raises(ParameterError, match=name):
            m.submit(job, "s")
    assert m.counts() == (0, 0)
    assert store.list_runs() == []


def test_fifo_queue_positions(managers, store):
    m = managers(max_concurrent=1)

    def job():
        return RunJob(make_problem, (("slow", Slow, {}),), iterations=10**6, f_star=0.0)

    a, b, c = (m.submit(job(), "s") for _ in range(3))
    assert [h.queue_position() for h in (a, b, c)] == [0, 1, 2]
    assert a.status == "running"
    snap = b.snapshot()
    assert (snap.status, snap.phase, snap.queue_position, snap.eta_seconds) == ("queued", "queued", 1, None)
    assert store.get_run(b.store_ids["slow"]).status == "queued"
    assert m.counts() == (1, 2)

    b.stop()  # a queued run leaves the queue at once
    assert b.done and b.status == "stopped" and b.snapshot().records("slow") == ()
    assert store.get_run(b.store_ids["slow"]).status == "stopped"
    assert c.queue_position() == 1

    a.stop()
    assert a.wait(WAIT)
    _until(lambda: c.status == "running")
    assert c.queue_position() == 0 and m.counts() == (1, 0)
    c.stop()
    assert c.wait(WAIT) and c.status == "stopped"


def test_stop_ends_the_run_and_keeps_completed_iterations(managers, store):
    m = managers(max_concurrent=2)
    algos = (("slow", Slow, {}), ("gd", "gd", {}))
    h = m.submit(RunJob(make_problem, algos, iterations=10**6, f_star=0.0), "s")
    _until(lambda: len(h.records("slow")) >= 5)
    mid = h.snapshot()
    mid_columns = {f: a.copy() for f, a in mid.columns["slow"].items()}
    mid_records = mid.records("slow")
    assert mid.status == "running" and mid.phase == "iterating" and not mid.compiling
    assert 0 < mid.progress < 1 and mid.eta_seconds is not None and mid.eta_seconds > 0
    h.stop()
    assert h.wait(WAIT)
    snap = h.snapshot()
    assert snap.status == "stopped" and snap.message == "stopped by the user"
    for label in ("slow", "gd"):
        recs = snap.records(label)
        assert len(recs) >= 5
        assert [r.iteration for r in recs] == list(range(len(recs)))
        assert recs[-1].status == "stopped" and snap.statuses[label] == "stopped"
        assert all(r.status == "running" for r in recs[:-1])
        run = store.get_run(snap.store_ids[label])
        assert run.status == "stopped"
        assert [_key(r) for r in store.records(run.id)] == [_key(r) for r in recs]
    # The snapshot taken mid-run did not change, although the final record replaced the
    # last iteration's in place: the buffers were copied, not rewritten.
    assert mid.records("slow") == mid_records and mid_records[-1].status == "running"
    for f, a in mid.columns["slow"].items():
        np.testing.assert_array_equal(a, mid_columns[f])
    with pytest.raises(ValueError):
        mid.columns["slow"]["objective"][0] = 0.0
    h.stop()  # stopping again is harmless


def test_snapshots_are_cached_while_nothing_changes(managers):
    m = managers(max_concurrent=1)
    h = m.submit(RunJob(make_problem, (("gd", "gd", {}),), iterations=3, f_star=0.0), "s")
    assert h.wait(WAIT)
    assert h.snapshot() is h.snapshot()


def test_a_silent_session_is_reaped(managers, store):
    now = [0.0]
    m = managers(max_concurrent=2, session_timeout=30.0, clock=lambda: now[0])
    job = RunJob(make_problem, (("slow", Slow, {}),), iterations=10**6, f_star=0.0)
    gone = m.submit(job, "gone")
    alive = m.submit(job, "alive")
    now[0] = 20.0
    m.touch("alive")
    now[0] = 35.0  # 'gone' is silent for 35 s > 30 s, 'alive' for 15 s
    assert m.reap() == 1
    assert gone.wait(WAIT) and gone.status == "stopped"
    snap = gone.snapshot()
    assert "heartbeat" in snap.message and "heartbeat" in snap.messages["slow"]
    assert "heartbeat" in store.get_run(snap.store_ids["slow"]).message
    assert not alive.done and [h.session_id for h in m.active()] == ["alive"]
    assert m.close_session("alive") == 1
    assert alive.wait(WAIT) and alive.status == "stopped"
    # Every thread of the closed session has ended.
    for h in (gone, alive):
        for t in threading.enumerate():
            if t.name == f"fedviz-run-{h.id[:8]}":
                t.join(WAIT)
                assert not t.is_alive()


def test_the_liveness_probe_overrides_the_heartbeat(managers, store, caplog):
    """Connected sessions keep their runs without heartbeats (a throttled background tab);
    disconnected ones lose them after the grace, unless they reconnect first; sessions the
    probe cannot judge (None, or the probe raising) fall back to the heartbeat timeout."""
    now = [0.0]
    connected = {"tab": True, "closed": True, "unknown": None}

    def probe(sid):
        if sid == "broken":
            raise RuntimeError("a bug in the probe")
        return connected[sid]

    m = managers(max_concurrent=4, session_timeout=30.0, disconnect_grace=5.0, clock=lambda: now[0],
                 liveness=probe)
    job = RunJob(make_problem, (("slow", Slow, {}),), iterations=10**6, f_star=0.0)
    runs = {sid: m.submit(job, sid) for sid in ("tab", "closed", "unknown", "broken")}
    connected["closed"] = False
    now[0] = 3.0
    assert m.reap() == 0  # first seen disconnected at 3 s
    now[0] = 7.5
    assert m.reap() == 0  # 4.5 s ≤ 5 s of grace
    now[0] = 8.5
    assert m.reap() == 1
    closed = runs["closed"]
    assert closed.wait(WAIT) and closed.status == "stopped"
    assert closed.snapshot().message == manager_mod.STOPPED_SESSION_CLOSED
    assert manager_mod.STOPPED_SESSION_CLOSED in store.get_run(closed.store_ids["slow"]).message

    # A reconnect within the grace restarts it: 'tab' is never gone for more than 4 s at a time.
    for t, alive in ((10.0, False), (14.0, True), (18.0, False), (22.0, True)):
        connected["tab"], now[0] = alive, t
        assert m.reap() == 0
    # At 31 s the sessions the probe cannot judge have been silent for 31 s > 30 s.
    now[0] = 31.0
    assert m.reap() == 2
    for sid in ("unknown", "broken"):
        assert runs[sid].wait(WAIT) and "heartbeat" in runs[sid].snapshot().message
    assert "session liveness probe" in caplog.text
    # 'tab' never sent a heartbeat, but it is connected: its run goes on.
    now[0] = 1000.0
    assert m.reap() == 0 and not runs["tab"].done and [h.session_id for h in m.active()] == ["tab"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread names and priorities are Linux's")
def test_run_workers_are_named_and_scheduled_below_the_server(managers):
    def threads():
        """(kernel name, nice) of every thread of this process."""
        out = []
        for task in Path("/proc/self/task").iterdir():
            try:
                stat = (task / "stat").read_text()
            except OSError:  # ended meanwhile
                continue
            out.append((stat[stat.index("(") + 1: stat.rindex(")")], int(stat[stat.rindex(")") + 2:].split()[16])))
        return out

    m = managers(max_concurrent=1)
    h = m.submit(RunJob(make_problem, (("slow", Slow, {}),), iterations=10**6, f_star=0.0), "s")
    _until(lambda: len(h.records("slow")) >= 2)
    name = f"fedviz-run-{h.id[:4]}"  # the kernel keeps 15 bytes
    base = os.getpriority(os.PRIO_PROCESS, 0)  # this thread's
    # The run's thread, and any thread it started (numba's OpenMP pool, when a kernel of the run was the
    # first parallel one of the process: Linux gives a new thread its creator's name and niceness).
    nices = [nice for comm, nice in threads() if comm == name]
    assert nices and set(nices) == {min(19, base + manager_mod.WORKER_NICE)}, nices
    h.stop()
    assert h.wait(WAIT)
    _until(lambda: all(not t.name.startswith(name) for t in threading.enumerate()))  # the run's own thread ended


def test_the_reaper_thread_stops_runs_without_heartbeat(managers):
    m = managers(max_concurrent=1, session_timeout=0.2, reaper=True)
    h = m.submit(RunJob(make_problem, (("slow", Slow, {}),), iterations=10**6, f_star=0.0), "s")
    assert h.wait(WAIT) and h.status == "stopped"


def test_a_failing_problem_builder_fails_the_run(managers, store):
    m = managers(max_concurrent=1)

    def broken():
        raise RuntimeError("the data file vanished")

    h = m.submit(RunJob(broken, (("a", "gd", {}), ("b", "gd", {})), iterations=5), "s")
    assert h.wait(WAIT)
    snap = h.snapshot()
    assert snap.status == "failed" and "the data file vanished" in snap.message
    for label in ("a", "b"):
        run = store.get_run(snap.store_ids[label])
        assert run.status == "failed" and "the data file vanished" in run.message
    # The manager lives on: the next run works.
    h2 = m.submit(RunJob(lambda: "not a problem", (("a", "gd", {}),), iterations=5), "s")
    assert h2.wait(WAIT) and h2.status == "failed" and "not a Problem" in h2.snapshot().message
    h3 = m.submit(RunJob(make_problem, (("a", "gd", {}),), iterations=2, f_star=0.0), "s")
    assert h3.wait(WAIT) and h3.status == "done"


def test_one_failing_algorithm_leaves_the_others_running(managers, store):
    m = managers(max_concurrent=1)
    algos = (("breaks", Breaks, {}), ("wrong loss", SquaredOnly, {}), ("gd", "gd", {}))
    h = m.submit(RunJob(make_problem, algos, iterations=6, f_star=0.0), "s")
    assert h.wait(WAIT)
    snap = h.snapshot()
    assert snap.status == "done"
    assert snap.statuses == {"breaks": "failed", "wrong loss": "failed", "gd": "done"}
    assert "boom at the third step" in snap.messages["breaks"]
    assert "squared-only.loss" in snap.messages["wrong loss"]
    assert [r.iteration for r in snap.records("breaks")] == [0, 1, 2]
    assert snap.records("wrong loss") == ()
    assert len(snap.records("gd")) == 7
    assert store.get_run(snap.store_ids["wrong loss"]).status == "failed"
    assert store.get_run(snap.store_ids["breaks"]).status == "failed"


def test_given_f_star_zero_iterations_and_no_store(managers):
    m = managers(max_concurrent=1, store=None)
    h = m.submit(RunJob(make_problem, (("gd", "gd", {}),), iterations=0, f_star=0.0), "s")
    assert h.wait(WAIT)
    snap = h.snapshot()
    assert snap.status == "done" and snap.progress == 1.0 and dict(snap.store_ids) == {}
    (rec,) = snap.records("gd")
    assert rec.iteration == 0 and rec.suboptimality == rec.objective == pytest.approx(math.log(2))


def test_a_broken_store_leaves_runs_in_memory(managers, tmp_path):
    broken = RunStore(tmp_path / "broken.sqlite")
    broken.close()  # every write now raises sqlite3.ProgrammingError
    m = managers(max_concurrent=1, store=broken)
    h = m.submit(RunJob(make_problem, (("gd", "gd", {}),), iterations=4, f_star=0.0), "s")
    assert h.wait(WAIT)
    snap = h.snapshot()
    assert snap.status == "done" and len(snap.records("gd")) == 5 and dict(snap.store_ids) == {}
    assert "could not be saved" in snap.message


def test_get_manager_is_a_process_wide_singleton(tmp_path, monkeypatch):
    db = tmp_path / "history" / "runs.sqlite"
    with RunStore(db) as s:
        left_running = s.create_run(label="old", algorithm="gd")
    monkeypatch.setenv("FEDVIZ_DB", str(db))
    monkeypatch.setenv("FEDVIZ_MAX_RUNS", "3")
    monkeypatch.setattr(manager_mod, "_MANAGER", None)
    got = []
    threads = [threading.Thread(target=lambda: got.append(get_manager())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert len(got) == 4 and all(g is got[0] for g in got)
        m = got[0]
        assert m.max_concurrent == 3 and m.store is not None and m.store_problem == ""
        old = m.store.get_run(left_running)
        assert (old.status, old.message) == ("interrupted", INTERRUPTED_MESSAGE)
    finally:
        got[0].close(timeout=WAIT)
        got[0].store.close()
    monkeypatch.setattr(manager_mod, "_MANAGER", None)
    monkeypatch.setenv("FEDVIZ_MAX_RUNS", "many")
    with pytest.raises(ParameterError, match="FEDVIZ_MAX_RUNS"):
        get_manager()


# -- the pieces: job, execute, the executor seam, the problem cache -----------------------------------
TINY = DataSpec(source="preset:identical-nodes")


class ListSink:
    """A sink that keeps every call, in order: what execute reported, and nothing else."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        if name not in ("preparing", "warn", "retuned", "started", "record", "end", "tick"):
            raise AttributeError(name)
        return lambda *args, **kw: self.calls.append((name, args, kw))

    def named(self, name):
        return [(args, kw) for n, args, kw in self.calls if n == name]


def test_execute_is_a_pure_function_of_job_sink_and_stop():
    job = RunJob(make_problem, (("a", "gd", {}), ("b", "gd", {"stepsize": 0.5})), iterations=4, seed=1).validate()
    sink = ListSink()
    execute(job, sink, Stop())
    names = [n for n, _, _ in sink.calls]
    # Preparing first (building, then f*), then started once, the records of both in turns, each end once.
    assert names[:2] == ["preparing", "preparing"] and names.index("started") == 2
    assert [a[0] for a, _ in sink.named("preparing")] == ["building the problem",
                                                           "computing the optimum f* (Newton-CG)"]
    ((_, info),) = sink.named("started")
    opt = solve(PROBLEM)
    assert info["f_star"] == opt.objective and info["optimum_test_error"] == opt.test_error
    assert info["fingerprint"] == PROBLEM.data.fingerprint and info["summary"]["lam"] == 0.1
    assert [a[0] for a, _ in sink.named("record")][:4] == ["a", "b", "a", "b"]
    assert [a for a, _ in sink.named("end")] == [("a", "done", ""), ("b", "done", "")]
    assert names.count("tick") == 5 and names[-1] == "tick"
    for label, hyper in (("a", {}), ("b", {"stepsize": 0.5})):
        got = [a[1] for a, _ in sink.named("record") if a[0] == label]
        expected = list(iterate(PROBLEM, "gd", iterations=4, hyper=hyper, seed=1, f_star=opt.objective,
                                label=label))
        assert [_key(r, seconds=False) for r in got] == [_key(r, seconds=False) for r in expected]

    # Stopped before it starts: every algorithm ends 'stopped' with the reason, nothing is built.
    built = []
    stop = Stop()
    assert stop.request("stopped: testing") and not stop.request("again") and stop()
    sink = ListSink()
    execute(RunJob(lambda: built.append(1), (("a", "gd", {}),), iterations=3).validate(), sink, stop)
    assert built == [] and sink.calls == [("end", ("a", "stopped", "stopped: testing (before the first iteration)"),
                                           {})]


def test_the_problem_and_f_star_are_prepared_in_the_worker_under_the_cap(managers):
    m = managers(max_concurrent=1)
    first = m.submit(RunJob(make_problem, (("slow", Slow, {}),), iterations=10**6, f_star=0.0), "s")
    built_in = []

    def make():
        built_in.append(threading.current_thread().name)
        return PROBLEM

    queued = m.submit(RunJob(make, (("gd", "gd", {}),), iterations=3), "s")
    _until(lambda: len(first.records("slow")) >= 2)
    assert queued.snapshot().phase == "queued" and built_in == []  # nothing is built while queued
    first.stop()
    assert queued.wait(WAIT) and queued.status == "done"
    assert built_in == [f"fedviz-run-{queued.id[:8]}"]
    snap = queued.snapshot()
    opt = solve(PROBLEM)
    assert (snap.f_star, snap.optimum_test_error) == (opt.objective, opt.test_error)
    assert snap.summary["n"] == PROBLEM.n and snap.summary["loss"] == "logistic"


def test_a_problem_spec_builds_through_the_process_wide_cache(managers, store):
    spec = ProblemSpec(TINY, "logistic", None)
    m = managers(max_concurrent=2)
    handles = [m.submit(RunJob(spec, (("gd", "gd", {}),), iterations=3, config={"k": k}), "s") for k in range(2)]
    for h in handles:
        assert h.wait(WAIT) and h.status == "done"
    problem = spec()
    assert problem is cache.problem(TINY, "logistic", None) and problem.data is cache.dataset(TINY)
    assert spec.optimum() is spec.optimum() and spec.optimum().objective == solve(problem).objective
    for h in handles:
        snap = h.snapshot()
        assert snap.f_star == solve(problem).objective
        assert store.get_run(snap.store_ids["gd"]).dataset_fingerprint == problem.data.fingerprint
    # Two threads asking at once for a problem not yet built get one object.
    other = DataSpec(source="preset:identical-nodes", seed=5)
    got = []
    threads = [threading.Thread(target=lambda: got.append(cache.problem(other, "squared", 0.5))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 3 and all(p is got[0] for p in got)
    # A malformed spec is refused at submit, like a bad hyperparameter.
    for bad, name in ((ProblemSpec(TINY, "no-such-loss"), "loss"), (ProblemSpec(TINY, lam=-1.0), "lam"),
                      (ProblemSpec("preset:identical-nodes"), "data")):
        with pytest.raises(ParameterError, match=name):
            m.submit(RunJob(bad, (("gd", "gd", {}),), iterations=3), "s")


def test_a_second_executor_is_one_class_implementing_the_seam(managers, store):
    class Plain(Executor):
        """Plain threads, no naming or priority: the smallest other executor."""

        started = []

        def start(self, run_id, job, sink, stop, done):
            def work():
                try:
                    execute(job, sink, stop)
                finally:
                    done()

            Plain.started.append(run_id)
            t = threading.Thread(target=work, daemon=True)
            t.start()
            return t

    m = managers(max_concurrent=1, executor=Plain())
    a = m.submit(RunJob(make_problem, (("slow", Slow, {}),), iterations=10**6, f_star=0.0), "s")
    b = m.submit(RunJob(make_problem, (("gd", "gd", {}),), iterations=5, f_star=0.0), "s")
    assert b.queue_position() == 1 and Plain.started == [a.id]
    _until(lambda: len(a.records("slow")) >= 3)
    a.stop()
    assert a.wait(WAIT) and b.wait(WAIT)
    assert (a.status, b.status) == ("stopped", "done") and Plain.started == [a.id, b.id]
    run = store.get_run(b.snapshot().store_ids["gd"])
    assert run.status == "done" and len(store.records(run.id)) == 6
    assert isinstance(RunManager(1, store=None, reaper=False).executor, ThreadExecutor)


def test_seconds_are_the_loops_own_clock(managers):
    """One clock: the records' seconds are the loop's (the algorithm's own time, paused while the
    others take their turns); the manager adds no timing of its own."""
    m = managers(max_concurrent=1)
    h = m.submit(RunJob(make_problem, (("slow", Slow, {}), ("gd", "gd", {})), iterations=20, f_star=0.0), "s")
    assert h.wait(WAIT)
    slow = h.snapshot().columns["slow"]["seconds"]
    # Slow sleeps 4 ms per step: its own time grows by at least that at every step.
    assert np.all(np.diff(slow) >= 0.004 * 0.9)


def test_a_sweep_planned_without_the_problem_runs_the_grid_the_problem_gives():
    """The page plans a sweep without building the problem (a derived stepsize's variants carry
    their factor); the worker resolves them on the problem: the same hyperparameters as a plan
    made with the problem in hand."""
    from fedviz.runner.config import RunConfig
    from fedviz.runner.sweep import sweep_plan

    config = RunConfig(data=TINY, algorithms=(("gd", ()), ("fedavg", (("stepsize", 0.5),)), ("one-shot", ())),
                       iterations=2)
    deferred, direct = sweep_plan(config), sweep_plan(config, PROBLEM)
    assert [s.label for s in deferred.variants] == [s.label for s in direct.variants]
    assert set(deferred.scales) == {s.label for s in deferred.variants if s.title == "GD"}  # fedavg's 0.5 is known
    job = RunJob(make_problem, deferred.variants, iterations=2, scales=deferred.scales).validate()
    sink = ListSink()
    execute(job, sink, Stop())
    ran = {entry.label: dict(entry.hyper) for (_, entry, _), _ in sink.named("retuned")}
    ran.update({s.label: s.values for s in deferred.variants if s.label not in ran})
    assert ran == {s.label: s.values for s in direct.variants}
    # Every variant ran to its end; the ones that stopped early climbed past ten starting gaps f0 − f*
    # (GD and FedAvg ×4 on this tiny problem, which starts near w*), as health's climb rule says.
    ends = {label: status for (label, status, _), _ in sink.named("end")}
    assert set(ends) == {s.label for s in deferred.variants}
    assert {label for label, status in ends.items() if status != "done"} <= {"GD ×4", "FedAvg ×4"}
    assert all(status in ("done", "diverged") for status in ends.values())


def test_an_algorithm_outside_the_registry_stays_in_this_process(managers):
    """An out-of-process executor (a cluster) sees only registered algorithms: a run of a class that
    exists only here (a test's, the Learn page's observed FSVRG) runs in a thread of this process."""

    class Remote(Executor):
        in_process = False
        started = []

        def start(self, run_id, job, sink, stop, done):
            Remote.started.append(run_id)
            t = threading.Thread(target=lambda: (execute(job, sink, stop), done()), daemon=True)
            t.start()
            return t

    m = managers(max_concurrent=2, executor=Remote())
    local = m.submit(RunJob(make_problem, (("slow", Slow, {}),), iterations=3, f_star=0.0), "s")
    remote = m.submit(RunJob(make_problem, (("gd", "gd", {}),), iterations=3, f_star=0.0), "s")
    assert local.wait(WAIT) and remote.wait(WAIT)
    assert Remote.started == [remote.id]
    assert (local.status, remote.status) == ("done", "done")


def test_the_caches_keep_one_data_set_per_spec_when_data_sets_are_evicted(monkeypatch):
    """Problems outnumber data sets in the caches: a problem whose data set was evicted (or rebuilt
    since) must share the data set the dataset cache holds, never keep a second copy."""
    cache.clear()
    monkeypatch.setattr(cache._DATASETS, "size", 1)
    p = cache.problem(TINY, "logistic", None)
    cache.dataset(DataSpec(source="preset:identical-nodes", seed=5))  # evicts TINY's data set
    assert cache.problem(TINY, "logistic", None).data is cache.dataset(TINY)
    cache.dataset(DataSpec(source="preset:identical-nodes", seed=5))  # evicts it again
    rebuilt = cache.dataset(TINY)                                       # a second build of TINY
    assert cache.problem(TINY, "logistic", None).data is rebuilt and p.data is not rebuilt
    cache.clear()


def test_one_session_cannot_fill_the_queue(managers, store):
    """Issue 21 (inputs budgeted): a session may hold at most ``max_per_session`` live runs; other
    sessions are not affected, and a run asked to stop frees its place at once."""
    from fedviz.errors import FedvizError

    m = managers(max_concurrent=1, max_per_session=2)

    def job():
        return RunJob(make_problem, (("slow", Slow, {}),), iterations=10**6, f_star=0.0)

    a1, a2 = m.submit(job(), "a"), m.submit(job(), "a")
    with pytest.raises(FedvizError, match=r"already has 2 runs running or queued.*FEDVIZ_SESSION_RUNS=2"):
        m.submit(job(), "a")
    b = m.submit(job(), "b")  # another visitor is not refused
    a2.stop()
    a3 = m.submit(job(), "a")
    assert m.counts() == (1, 2)  # a1 running; b and a3 queued
    for h in (a1, b, a3):
        h.stop()
        assert h.wait(WAIT)


def test_get_manager_reads_the_session_cap(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDVIZ_DB", str(tmp_path / "runs.sqlite"))
    monkeypatch.setattr(manager_mod, "_MANAGER", None)
    monkeypatch.setenv("FEDVIZ_SESSION_RUNS", "3")
    m = get_manager()
    try:
        assert m.max_per_session == 3
    finally:
        m.close(timeout=WAIT)
        m.store.close()
        monkeypatch.setattr(manager_mod, "_MANAGER", None)
    monkeypatch.setenv("FEDVIZ_SESSION_RUNS", "0")
    with pytest.raises(ParameterError, match="FEDVIZ_SESSION_RUNS"):
        get_manager()
    monkeypatch.setattr(manager_mod, "_MANAGER", None)


def test_get_manager_connects_to_the_cluster_without_holding_pages(tmp_path, monkeypatch):
    """Issue 21: the manager's lock was held while connecting, so /run never loaded with a silent
    scheduler.  Now get_manager returns at once; runs stay here until the cluster answers, then the
    cluster's executor and slots take over (queued runs start on them)."""
    gate = threading.Event()

    class Cluster(ThreadExecutor):
        slots = 3

    def slow_executor():
        gate.wait(WAIT)
        return Cluster(), "runs execute on the Dask cluster (fake, 3 workers)"

    monkeypatch.setenv("FEDVIZ_DB", str(tmp_path / "runs.sqlite"))
    monkeypatch.setenv("FEDVIZ_DASK_SCHEDULER", "tls://127.0.0.1:8786")
    monkeypatch.setenv("FEDVIZ_MAX_RUNS", "")
    monkeypatch.setattr(manager_mod, "_MANAGER", None)
    monkeypatch.setattr(manager_mod, "_executor", slow_executor)
    m = get_manager()  # returns while the 'connection' waits
    try:
        assert "while it connects to the Dask cluster at tls://127.0.0.1:8786" in m.cluster_note
        assert not isinstance(m.executor, Cluster)
        gate.set()
        _until(lambda: isinstance(m.executor, Cluster))
        assert m.max_concurrent == 3 and m.cluster_note.endswith("(fake, 3 workers)")
    finally:
        m.close(timeout=WAIT)
        m.store.close()
        monkeypatch.setattr(manager_mod, "_MANAGER", None)
