"""Issue 6, point 3: Stop ends a run within 1 s at the paper's scale, and the iterations it
completed are kept in the history as 'stopped' — for every algorithm of the registry.

The data is the ``google-plus`` preset (n = 2,166,693, d = 20,002, K = 10,000, 26.8M
nonzeros), built once.  Every kernel is compiled (or loaded from numba's cache) by a run on
``google-plus-small`` first — large enough to take the same parallel code paths — so the
timings never include compilation, which the dashboard shows as "Compiling this run's kernels".  DANE
warms on 40 of its nodes: its exact local solver has no path that depends on the size (every
kernel of ``fedviz/algorithms/dane.py`` is a prange kernel taken at any size), and its two
iterations on all 500 nodes took minutes of the file's time (40 nodes: a sixth of it).

Each algorithm runs with its default hyperparameters through a :class:`RunManager` with a
temporary :class:`RunStore`, exactly as the Run page submits it.  After its first record
(the starting point; the algorithm's setup is then done) and a seeded random delay that
lands the press anywhere in an iteration, the test presses Stop (:meth:`RunHandle.stop`)
and measures the seconds until the run has ended (:meth:`RunHandle.wait` returns).  The
bound, 1 s, is the issue's requirement; on this 2-core machine the presses take 0.05–0.4 s.

The optimum f* plays no part in stopping, so it is given (as 0: suboptimality is then the
objective) rather than computed, which would take a minute at this scale.
"""

import gc
import math
import time
from dataclasses import asdict

import numpy as np
import pytest

from fedviz.algorithms import ALGORITHMS
from fedviz.data.presets import make_preset
from fedviz.errors import ParameterError
from fedviz.problems.objective import Problem
from fedviz.runner.loop import iterate
from fedviz.runner.serve.manager import RunJob, RunManager
from fedviz.runner.history.store import RunStore

# The paper's data set: a minute to build, seconds per algorithm to set up.  Stop within a second is timed with no
# other test beside it (``timed_alone``), the setup beside the other worker's tests.
pytestmark = pytest.mark.slow

#: The issue's bound on the time from pressing Stop to the end of the run.
STOP_BOUND = 1.0
#: The press comes up to this many seconds after the first record (seeded, per algorithm).
MAX_DELAY = 1.5
#: Generous bound for things that take seconds (setup at this scale, the end of a run).
WAIT = 120.0


#: Algorithms with a dense personal model per node (``Algorithm.personalised``) refuse the paper's K × d
#: (1.6 GB; their budget and its message: tests/unit/test_ditto.py), so Stop has no run to end there;
#: the last test here checks that they do refuse it.
STOPPABLE = [name for name, cls in ALGORITHMS.items() if not cls.personalised]
REFUSING = [name for name, cls in ALGORITHMS.items() if cls.personalised]


def _loss(name: str) -> str:
    """The Appendix's methods are for ridge regression; everything else runs logistic."""
    return "squared" if ALGORITHMS[name].losses == ("squared",) else "logistic"


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    """The paper-scale problems (logistic and squared loss on one data set), a store and a
    manager; kernels compiled beforehand."""
    small = {"google-plus-small": make_preset("google-plus-small"),
             "40 nodes": make_preset("google-plus-small", nodes=40)}
    for name in ALGORITHMS:
        data = small["40 nodes" if name == "dane" else "google-plus-small"]
        for _ in iterate(Problem(data, _loss(name)), name, iterations=2, f_star=0.0):
            pass
    del small, data
    data = make_preset("google-plus")
    assert (data.X.shape, data.n_nodes) == ((2_166_693, 20_002), 10_000)
    problems = {loss: Problem(data, loss) for loss in ("logistic", "squared")}
    store = RunStore(tmp_path_factory.mktemp("stop") / "runs.sqlite")
    manager = RunManager(1, store=store, reaper=False)
    yield problems, store, manager
    assert manager.close(timeout=WAIT)
    store.close()


def _key(rec):
    """A record as a tuple in which NaN equals NaN."""
    return tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in asdict(rec).values())


@pytest.mark.parametrize("name", STOPPABLE)
def test_stop_ends_the_run_within_a_second_and_keeps_its_iterations(paper, name, timed_alone):
    problems, store, manager = paper
    problem = problems[_loss(name)]
    job = RunJob(make_problem=lambda: problem, algorithms=((name, name, {}),), iterations=10**6,
                 f_star=0.0, config={"test": "stop at paper scale"})
    handle = manager.submit(job, session_id="stop-paper-scale")
    deadline = time.monotonic() + WAIT
    while len(handle.records(name)) < 1:
        assert time.monotonic() < deadline, f"{name}: no first record within {WAIT:g} s"
        assert not handle.done, handle.snapshot().message
        time.sleep(0.005)
    with timed_alone():
        # A different moment for every algorithm (a seeded delay after this test has the machine to itself).
        rng = np.random.default_rng([6, 3, sorted(ALGORITHMS).index(name)])
        time.sleep(rng.uniform(0.0, MAX_DELAY))
        assert not handle.done, f"{name} ended by itself: {handle.snapshot().message}"

        pressed = time.perf_counter()
        handle.stop()
        ended = handle.wait(WAIT)
        latency = time.perf_counter() - pressed
    assert ended, f"{name} did not end within {WAIT:g} s of Stop"
    snap = handle.snapshot()
    records = snap.records(name)
    m = records[-1].iteration
    print(f"\n{name}: stopped {latency:.3f} s after the press, {m} iterations kept")
    assert latency <= STOP_BOUND, f"{name}: the run ended {latency:.2f} s after Stop"

    assert snap.status == "stopped" and snap.statuses[name] == "stopped"
    assert snap.message == "stopped by the user"
    assert [r.iteration for r in records] == list(range(m + 1))
    assert all(r.status == "running" for r in records[:-1])
    assert records[-1].status == "stopped"
    assert records[-1].message == f"stopped by the user after {m} iterations"
    assert all(math.isfinite(r.objective) for r in records)

    run = store.get_run(snap.store_ids[name])
    assert run.status == "stopped" and run.algorithm == name and run.n_records == m + 1
    assert [_key(r) for r in store.records(run.id)] == [_key(r) for r in records]

    del handle, snap, records
    gc.collect()  # the next algorithm's setup must not stack on this one's memory


@pytest.mark.parametrize("name", REFUSING)
def test_the_algorithms_stop_skips_refuse_the_paper_scale(paper, name):
    problems, _, _ = paper
    with pytest.raises(ParameterError, match=rf"{name}\.personal_models.*K × d"):
        ALGORITHMS[name](problems[_loss(name)])
