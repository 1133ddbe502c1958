"""Compiling the numba kernels ahead of the first click.

Every kernel is compiled on its first call and cached on disk (``cache=True``), so on a
fresh install the first Run waited about 15 s while the kernels of the chosen algorithms
compiled ("Compiling kernels…"), and every later click took a fraction of a second.
:func:`warm_up` makes that first call for every registered algorithm on two tiny problems,
one for each form the kernels are specialised on (a generated bag-of-words preset, stored
as indicators with narrow column indices, and a file-like data set with real values), and
softmax (issue 22) on the file-like forms with three classes, since a d × C model runs its own
kernels (:mod:`fedviz.algorithms._softmax_kernels`, the softmax loss's); so
that a server that starts it in the background at start-up serves the first click as fast
as every later one.  It is idempotent and cheap once the disk cache is warm (≈ 1 s).
"""

from __future__ import annotations

import logging
import time
from typing import Callable

import numpy as np
import scipy.sparse as sp

log = logging.getLogger(__name__)


def _problems():
    """The preset's form first (the first click's), then a file's forms.

    The file-like matrices have enough nonzeros for the row-block products (two blocks,
    :class:`fedviz.problems._blocks.RowBlocks`) and each value form the products are
    compiled for: all ones (no values), float32-exact, float64.  Softmax comes last, on the
    all-ones form (dna.scale's) and the float64 form (fedprox-synthetic's), with labels coded
    0..2 as :func:`fedviz.data.labels.map_labels` codes a multiclass file.
    """
    from ...data.dataset import FederatedDataset
    from ...data.presets import make_preset
    from ...problems._blocks import MIN_BLOCK_NNZ
    from ...problems.objective import Problem

    yield Problem(make_preset("google-plus-small", nodes=8, seed=1), "logistic")
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


#: The loss of each problem of :func:`_problems`, in its order.
LOSSES = ("logistic", "logistic", "logistic", "logistic", "squared", "smoothed-hinge", "softmax", "softmax")


def _takes(cls, loss: str) -> bool:
    """Whether the algorithm runs on the loss (softmax: :meth:`Algorithm.softmax_refusal`)."""
    return cls.loss_refusal(loss) is None


def steps() -> list[tuple[int, str]]:
    """The warm-up's steps in order: (problem index in :func:`_problems`, algorithm name)."""
    from ...algorithms import ALGORITHMS

    return [(i, name) for i, loss in enumerate(LOSSES) for name, cls in ALGORITHMS.items() if _takes(cls, loss)]


#: Seconds each warm-up step took with an empty kernel cache (``NUMBA_CACHE_DIR`` a new directory) on
#: the 2-core development machine: ``python -m fedviz.runner.serve.warmup --measure`` prints this table.  Only
#: their proportions matter (:class:`Progress` rescales them by the steps already timed); a step
#: missing here (an algorithm added later) counts as the median step.
COLD_SECONDS: dict[tuple[int, str], float] = {
    (0, 'cocoa'): 0, (0, 'cocoa-plus'): 2.24, (0, 'dane'): 3.22, (0, 'fedavg'): 4.12, (0, 'fedprox'): 0.01,
    (0, 'fsvrg'): 22.91, (0, 'gd'): 0.01, (0, 'naive-fsvrg'): 0, (0, 'one-shot'): 0.01, (0, 'scaffold'): 0.01,
    (0, 'sgd'): 0.34, (0, 'svrg'): 0.02,
    (1, 'cocoa'): 0.04, (1, 'cocoa-plus'): 1.28, (1, 'dane'): 0.22, (1, 'fedavg'): 0.01, (1, 'fedprox'): 0,
    (1, 'fsvrg'): 1.43, (1, 'gd'): 0.08, (1, 'naive-fsvrg'): 0.04, (1, 'one-shot'): 0.58, (1, 'scaffold'): 0.15,
    (1, 'sgd'): 0.06, (1, 'svrg'): 0.02,
    (2, 'cocoa'): 0.05, (2, 'cocoa-plus'): 0.04, (2, 'dane'): 0.38, (2, 'fedavg'): 0.01, (2, 'fedprox'): 0,
    (2, 'fsvrg'): 2.22, (2, 'gd'): 0.04, (2, 'naive-fsvrg'): 0.05, (2, 'one-shot'): 0.03, (2, 'scaffold'): 0.05,
    (2, 'sgd'): 0.04, (2, 'svrg'): 0.06,
    (3, 'cocoa'): 0.04, (3, 'cocoa-plus'): 0.03, (3, 'dane'): 1.18, (3, 'fedavg'): 0.09, (3, 'fedprox'): 0.02,
    (3, 'fsvrg'): 1.67, (3, 'gd'): 0.07, (3, 'naive-fsvrg'): 0.01, (3, 'one-shot'): 1.38, (3, 'scaffold'): 0.03,
    (3, 'sgd'): 0.04, (3, 'svrg'): 0.02,
    (4, 'cocoa'): 0.02, (4, 'cocoa-plus'): 0.03, (4, 'dane'): 0.08, (4, 'dual-method'): 0.1, (4, 'fedavg'): 0,
    (4, 'fedprox'): 0.09, (4, 'fsvrg'): 0.02, (4, 'gd'): 0.21, (4, 'naive-fsvrg'): 0, (4, 'one-shot'): 0.03,
    (4, 'primal-method'): 0.13, (4, 'scaffold'): 0.06, (4, 'sgd'): 0.05, (4, 'svrg'): 0.19,
    (5, 'cocoa'): 0.09, (5, 'cocoa-plus'): 0.09, (5, 'dane'): 0.13, (5, 'fedavg'): 0.02, (5, 'fedprox'): 0.1,
    (5, 'fsvrg'): 0.03, (5, 'gd'): 0.13, (5, 'naive-fsvrg'): 0, (5, 'one-shot'): 1, (5, 'scaffold'): 0.2,
    (5, 'sgd'): 0.08, (5, 'svrg'): 0.07,
    # Ditto and APFL: measured on a busier machine, scaled by its ratio to the steps above.
    (0, 'apfl'): 0.87, (0, 'ditto'): 0.88, (1, 'apfl'): 0.05, (1, 'ditto'): 0.04, (2, 'apfl'): 0.05,
    (2, 'ditto'): 0.06, (3, 'apfl'): 0.14, (3, 'ditto'): 0.18, (4, 'apfl'): 0.15, (4, 'ditto'): 0.05,
    (5, 'apfl'): 0.14, (5, 'ditto'): 0.09,
    # Softmax (issue 22), measured with the rest in one cold session and scaled to this table by the
    # ratio of the two measurements over the steps both hold (×0.116: a loaded machine).
    (6, 'dane'): 5.19, (6, 'fedavg'): 13.21, (6, 'fedprox'): 0.02, (6, 'fsvrg'): 10.18, (6, 'gd'): 0.15,
    (6, 'naive-fsvrg'): 0.09, (6, 'one-shot'): 3.75, (6, 'scaffold'): 0.03, (6, 'sgd'): 1.02, (6, 'svrg'): 0.04,
    (7, 'dane'): 1.83, (7, 'fedavg'): 0.04, (7, 'fedprox'): 0.03, (7, 'fsvrg'): 1.5, (7, 'gd'): 0.03,
    (7, 'naive-fsvrg'): 0.03, (7, 'one-shot'): 0.96, (7, 'scaffold'): 0.05, (7, 'sgd'): 0.04, (7, 'svrg'): 0.09,
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
        if self.finished or self.done >= len(self.plan):
            return 0.0
        r = self.ratio()
        current = r * self.cold[self.done]
        if self.step_started is not None:
            current = max(0.0, current - (self.clock() - self.step_started))
        return current + r * sum(self.cold[self.done + 1:])


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
    from ...algorithms import ALGORITHMS
    from ..loop import iterate

    seconds: dict[str, float] = {}
    start = time.perf_counter()
    try:
        for problem in _problems():
            for name, cls in ALGORITHMS.items():
                if stop is not None and stop():
                    return seconds
                if not _takes(cls, problem.loss.name):
                    continue
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
                    for _ in iterate(problem, name, iterations=1, f_star=0.0):
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
