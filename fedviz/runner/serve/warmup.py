"""Compiling the numba kernels ahead of the first click.

Every kernel is compiled on its first call and cached on disk (``cache=True``), so on a
fresh install the first Run waited about 15 s while the kernels of the chosen algorithms
compiled, and every later click took a fraction of a second.
:func:`warm_up` makes that first call for every registered algorithm on a problem of each form the
kernels are specialised on: the default data set itself (a generated bag-of-words preset, stored as
indicators with narrow column indices: the first click's, with its f*), small file-like data sets
with real values, and softmax (issue 22) on the file-like forms with three classes, since a d × C model
runs its own kernels (:mod:`fedviz.algorithms._softmax_kernels`, the softmax loss's); so that a
server that starts it in the background at start-up serves the first click as fast as every later
one.  It is idempotent and takes a few seconds once the disk cache is warm.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

import numpy as np
import scipy.sparse as sp

log = logging.getLogger(__name__)


def _problems():
    """The first click's own problem first (Home's Reproduce: :class:`RunConfig`'s default data, loss and λ, from
    the server's cache, so that the click also finds its data set built), then a file's forms.  The preset's
    form is the default data set itself, not a smaller one: numba specialises some kernels on what the data
    hold (row blocks take over above a number of nonzeros), and after a warm-up on an 8-node copy the first
    click still compiled for 2.3 s.

    The file-like matrices have enough nonzeros for the row-block products (two blocks,
    :class:`fedviz.problems._blocks.RowBlocks`) and each value form the products are
    compiled for: all ones (no values), float32-exact, float64.  Softmax comes last, on the
    all-ones form (dna.scale's) and the float64 form (fedprox-synthetic's), with labels coded
    0..2 as :func:`fedviz.data.labels.map_labels` codes a multiclass file.
    """
    from ...data.dataset import FederatedDataset
    from ...problems._blocks import MIN_BLOCK_NNZ
    from ...problems.objective import Problem

    from .. import cache
    from ..config import RunConfig

    first = RunConfig()
    yield cache.problem(first.data, first.loss, first.lam)
    rng = np.random.default_rng(0)
    n, d, per_row, nodes = -(-2 * MIN_BLOCK_NNZ // 12), 40, 12, 8
    indices = np.sort(rng.random((n, d)).argsort(axis=1)[:, :per_row], axis=1).ravel()
    indptr = np.arange(0, n * per_row + 1, per_row)
    y = np.where(rng.random(n) < 0.4, 1.0, -1.0)
    node_of_row = np.arange(n) % nodes
    for values, losses in ((np.ones(n * per_row), ("logistic",)),
                           (rng.integers(1, 8, n * per_row) / 4.0, ("logistic",)),
                           (rng.random(n * per_row), ("logistic", "squared", "smoothed-hinge"))):
        X = sp.csr_matrix((values, indices, indptr), shape=(n, d))
        ds = FederatedDataset.from_assignment(X, y, node_of_row, X_test=X[:200], y_test=y[:200],
                                              test_nodes=node_of_row[:200])
        for loss in losses:
            yield Problem(ds, loss)
    codes = rng.integers(0, 3, n).astype(np.float64)
    multiclass = {"label_policy": "multiclass", "classes": [1.0, 2.0, 3.0]}
    for values in (np.ones(n * per_row), rng.random(n * per_row)):
        X = sp.csr_matrix((values, indices, indptr), shape=(n, d))
        ds = FederatedDataset.from_assignment(X, codes, node_of_row, X_test=X[:200], y_test=codes[:200],
                                              test_nodes=node_of_row[:200], meta=multiclass)
        yield Problem(ds, "softmax")


def _first_click_optimum() -> None:
    from .. import cache
    from ..config import RunConfig

    first = RunConfig()
    cache.optimum(first.data, first.loss, first.lam)


#: The loss of each problem of :func:`_problems`, in its order.
LOSSES = ("logistic", "logistic", "logistic", "logistic", "squared", "smoothed-hinge", "softmax", "softmax")


def _takes(cls, loss: str) -> bool:
    """Whether the algorithm runs on the loss (softmax: :meth:`Algorithm.softmax_refusal`)."""
    return cls.loss_refusal(loss) is None


def steps() -> list[tuple[int, str]]:
    """The warm-up's steps in order: (problem index in :func:`_problems`, algorithm name).

    The first click's first: the default run (Home's Reproduce, :data:`~fedviz.runner.config.DEFAULT_ALGORITHMS`
    on the preset's form, problem 0), so that a click some seconds after the start finds its kernels compiled
    (issue 31: FSVRG's, the longest step, came sixth); then every problem's algorithms in the registry's order."""
    from ...algorithms import ALGORITHMS
    from ..config import DEFAULT_ALGORITHMS

    plan = [(i, name) for i, loss in enumerate(LOSSES) for name, cls in ALGORITHMS.items() if _takes(cls, loss)]
    first = [(0, name) for name in DEFAULT_ALGORITHMS if (0, name) in plan]
    return first + [step for step in plan if step not in first]


def run_steps(algorithms, loss: str) -> set[tuple[int, str]]:
    """The steps that compile what a run of ``algorithms`` on ``loss`` needs: every problem of that loss (the
    data's form, preset or file and which values, is not known here, so all of them: an upper bound)."""
    return {(i, name) for i, l in enumerate(LOSSES) if l == loss for name in algorithms}


#: Seconds each warm-up step took with an empty kernel cache (``NUMBA_CACHE_DIR`` a new directory) on
#: the 2-core development machine, all in one session: ``python -m fedviz.runner.serve.warmup --measure`` prints
#: this table (the first step's time holds the first click's f*).  Only their proportions matter (:class:`Progress`
#: rescales them by the steps already timed); a step missing here (an algorithm added later) counts as the
#: median step.
COLD_SECONDS: dict[tuple[int, str], float] = {
    (0, 'apfl'): 1.09, (0, 'cocoa'): 0.01, (0, 'cocoa-plus'): 2.14, (0, 'dane'): 4.9, (0, 'ditto'): 0.86,
    (0, 'fedavg'): 3.55, (0, 'fedprox'): 0, (0, 'fsvrg'): 13.64, (0, 'gd'): 0.02, (0, 'naive-fsvrg'): 0.01,
    (0, 'one-shot'): 0.41, (0, 'scaffold'): 0.02, (0, 'sgd'): 0.45, (0, 'svrg'): 0.01, (1, 'apfl'): 0,
    (1, 'cocoa'): 0.01, (1, 'cocoa-plus'): 0.01, (1, 'dane'): 0.02, (1, 'ditto'): 0, (1, 'fedavg'): 0,
    (1, 'fedprox'): 0, (1, 'fsvrg'): 0.27, (1, 'gd'): 0.01, (1, 'naive-fsvrg'): 0, (1, 'one-shot'): 0.02,
    (1, 'scaffold'): 0.01, (1, 'sgd'): 0, (1, 'svrg'): 0, (2, 'apfl'): 0, (2, 'cocoa'): 0.01,
    (2, 'cocoa-plus'): 0.01, (2, 'dane'): 0.02, (2, 'ditto'): 0, (2, 'fedavg'): 0, (2, 'fedprox'): 0,
    (2, 'fsvrg'): 0.73, (2, 'gd'): 0.01, (2, 'naive-fsvrg'): 0, (2, 'one-shot'): 0.02, (2, 'scaffold'): 0.01,
    (2, 'sgd'): 0.01, (2, 'svrg'): 0, (3, 'apfl'): 0, (3, 'cocoa'): 0.01, (3, 'cocoa-plus'): 0.01, (3, 'dane'): 0.02,
    (3, 'ditto'): 0, (3, 'fedavg'): 0, (3, 'fedprox'): 0, (3, 'fsvrg'): 0.77, (3, 'gd'): 0.01, (3, 'naive-fsvrg'): 0,
    (3, 'one-shot'): 0.01, (3, 'scaffold'): 0.01, (3, 'sgd'): 0, (3, 'svrg'): 0, (4, 'apfl'): 0, (4, 'cocoa'): 0,
    (4, 'cocoa-plus'): 0, (4, 'dane'): 0.01, (4, 'ditto'): 0, (4, 'dual-method'): 0.01, (4, 'fedavg'): 0,
    (4, 'fedprox'): 0, (4, 'fsvrg'): 0, (4, 'gd'): 0.01, (4, 'naive-fsvrg'): 0, (4, 'one-shot'): 0.01,
    (4, 'primal-method'): 0.01, (4, 'scaffold'): 0, (4, 'sgd'): 0, (4, 'svrg'): 0, (5, 'apfl'): 0, (5, 'cocoa'): 0,
    (5, 'cocoa-plus'): 0, (5, 'dane'): 0.01, (5, 'ditto'): 0, (5, 'fedavg'): 0, (5, 'fedprox'): 0, (5, 'fsvrg'): 0,
    (5, 'gd'): 0.01, (5, 'naive-fsvrg'): 0, (5, 'one-shot'): 0.01, (5, 'scaffold'): 0, (5, 'sgd'): 0, (5, 'svrg'): 0,
    (6, 'dane'): 0.75, (6, 'fedavg'): 5.09, (6, 'fedprox'): 0, (6, 'fsvrg'): 6.89, (6, 'gd'): 0.02,
    (6, 'naive-fsvrg'): 0.01, (6, 'one-shot'): 0.1, (6, 'scaffold'): 0.01, (6, 'sgd'): 0.56, (6, 'svrg'): 0.01,
    (7, 'dane'): 0.76, (7, 'fedavg'): 0, (7, 'fedprox'): 0, (7, 'fsvrg'): 1.5, (7, 'gd'): 0.02,
    (7, 'naive-fsvrg'): 0.01, (7, 'one-shot'): 0.08, (7, 'scaffold'): 0.01, (7, 'sgd'): 0.01, (7, 'svrg'): 0.01,
}


class Progress:
    """How far a warm-up is, and an estimate of the seconds it has left.

    The estimate: the cold-cache seconds of the steps still to come (:data:`COLD_SECONDS`)
    times the ratio of the wall seconds the finished steps took (from the first step's start)
    to their cold-cache seconds, so
    a faster or busier machine, or a disk cache already warm, scales the whole table; the
    step under way counts for its scaled seconds less the time it has run, never below 0.
    Before a step has finished the ratio is 1.  Written by the warm-up's thread, read by
    the pages' (a float and a few ints: a read may be one step stale, never torn)."""

    def __init__(self, plan: list[tuple[int, str]] | None = None, cold: dict | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.plan = list(steps() if plan is None else plan)
        cold = COLD_SECONDS if cold is None else cold
        known = [v for v in cold.values() if v > 0]
        median = float(np.median(known)) if known else 1.0
        self.cold = [float(cold.get(step, median)) for step in self.plan]
        self.clock = clock
        self.done = 0                 # steps finished
        self.spent = 0.0              # wall seconds from the start to the end of the last finished step
        self.started: float | None = None
        self.step_started: float | None = None
        self.finished = False
        self.held = 0.0               # seconds paused between steps (runs computing), left out of ``spent``
        self.hold_started: float | None = None

    @property
    def paused(self) -> bool:
        """Whether the warm-up waits, between two steps, for the server's runs to end."""
        return self.hold_started is not None

    def hold(self) -> None:
        if self.hold_started is None:
            self.hold_started = self.clock()

    def resume(self) -> None:
        if self.hold_started is not None:
            self.held += self.clock() - self.hold_started
            self.hold_started = None

    def start_step(self) -> None:
        self.step_started = self.clock()
        if self.started is None:
            self.started = self.step_started

    def end_step(self) -> None:
        # Wall time from the start, so the time between steps (building the next problem) counts too; the
        # pauses for runs do not (they say nothing of how fast this machine compiles).
        self.spent = self.clock() - (self.started if self.started is not None else self.clock()) - self.held
        self.step_started = None
        self.done += 1

    def finish(self) -> None:
        self.finished = True

    def ratio(self) -> float:
        """Measured over cold-table seconds of the finished steps (1 before any finished)."""
        expected = sum(self.cold[:self.done])
        return self.spent / expected if self.done and expected > 0 else 1.0

    def seconds_left(self) -> float:
        return self.seconds_until(None)

    def seconds_until(self, wanted: set[tuple[int, str]] | None) -> float:
        """The estimated seconds the steps of ``wanted`` (None: every step) still need: each one not finished
        at its scaled cold seconds, the one under way less the time it has run (never below 0)."""
        if self.finished or self.done >= len(self.plan):
            return 0.0
        r, total = self.ratio(), 0.0
        for j in range(self.done, len(self.plan)):
            if wanted is not None and self.plan[j] not in wanted:
                continue
            here = r * self.cold[j]
            if j == self.done and self.step_started is not None:
                here = max(0.0, here - (self.clock() - self.step_started))
            total += here
        return total


#: Seconds between two looks at ``pause`` while the warm-up waits for runs to end.
PAUSE_POLL = 0.25


def warm_up(stop: Callable[[], bool] | None = None, progress: Progress | None = None,
            pause: Callable[[], bool] | None = None) -> dict[str, float]:
    """One iteration of every registered algorithm on each warm-up problem; returns seconds per
    algorithm (``progress``, if given, follows the steps of :func:`steps`).  Never raises: a kernel
    that fails here fails, with its message, in the real run.

    ``pause``: while it says True (the server has runs computing), no step starts.  numba compiles
    one kernel at a time in a process, under one lock, so a warm-up that kept compiling competed with
    the first click for that lock and for the cores (issue 31 saw 95.6 s against 9.5 s later); paused,
    the run waits at most for the step under way and then compiles what it needs itself
    (:func:`first_click` measures both)."""
    from ..loop import iterate

    seconds: dict[str, float] = {}
    start = time.perf_counter()
    try:
        problems = list(_problems())  # tiny: built once, stepped through in the plan's order
        for k, (i, name) in enumerate(steps()):
            if stop is not None and stop():
                return seconds
            if pause is not None and pause():
                if progress is not None:
                    progress.hold()
                while pause():
                    if stop is not None and stop():
                        return seconds
                    time.sleep(PAUSE_POLL)
                if progress is not None:
                    progress.resume()
            if progress is not None:
                progress.start_step()
            t0 = time.perf_counter()
            try:
                if k == 0:  # the first step also finds the first click's f* (Newton-CG's kernels, cached)
                    _first_click_optimum()
                for _ in iterate(problems[i], name, iterations=1, f_star=0.0):
                    pass
            except Exception:  # noqa: BLE001 - warming must never take the server down
                log.exception("warm-up of %s failed", name)
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - t0
            if progress is not None:
                progress.end_step()
    finally:
        if progress is not None:
            progress.finish()
    log.info("kernels warmed up in %.1f s", time.perf_counter() - start)
    return seconds


def measure() -> dict[tuple[int, str], float]:
    """Seconds of each warm-up step (run it with an empty ``NUMBA_CACHE_DIR`` for :data:`COLD_SECONDS`)."""
    plan, out = steps(), {}

    class Timer(Progress):
        def end_step(self):
            out[plan[self.done]] = round(self.clock() - self.step_started, 2)
            super().end_step()

    warm_up(progress=Timer(plan, cold={}, clock=time.perf_counter))
    return out


def first_click(delay: float, *, pause: bool = True) -> dict[str, float]:
    """Seconds of the first click — the default run (RunConfig(): google-plus-small, FSVRG, GD and CoCoA+, 30
    iterations) submitted to this process's run manager ``delay`` s after a warm-up started — and of the same
    run once the warm-up ended; ``pause``: the warm-up waits for runs, as the server's does.  Run it with an
    empty ``NUMBA_CACHE_DIR`` (one process per measurement)."""
    import threading

    from ..config import RunConfig
    from ..job import ProblemSpec, RunJob
    from .manager import get_manager

    manager, progress = get_manager(), Progress()
    threading.Thread(target=warm_up, kwargs=dict(progress=progress, pause=(
        (lambda: manager.counts()[0] > 0) if pause else None)), daemon=True).start()
    time.sleep(delay)

    def click() -> float:
        config = RunConfig()
        job = RunJob(ProblemSpec(config.data, config.loss, config.lam), config.specs(),
                     iterations=config.iterations, seed=config.seed, config=config.as_json())
        start = time.monotonic()
        handle = manager.submit(job, "first-click")
        while not handle.done:
            time.sleep(0.05)
        return time.monotonic() - start

    first, steps_then = click(), progress.done
    while not progress.finished:
        time.sleep(0.2)
    return {"first": first, "later": click(), "steps_done_at_first": steps_then}


if __name__ == "__main__":
    # python -m fedviz.runner.serve.warmup --measure | --first-click SECONDS [--no-pause]
    import pprint
    import sys

    if "--measure" in sys.argv:
        pprint.pprint(measure(), width=120, compact=True)
    if "--first-click" in sys.argv:
        delay = float(sys.argv[sys.argv.index("--first-click") + 1])
        pprint.pprint(first_click(delay, pause="--no-pause" not in sys.argv))
