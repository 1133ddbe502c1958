"""Compiling the numba kernels ahead of the first click.

Every kernel is compiled on its first call and cached on disk (``cache=True``), so on a
fresh install the first Run waited about 15 s while the kernels of the chosen algorithms
compiled ("Compiling kernels…"), and every later click took a fraction of a second.
:func:`warm_up` makes that first call for every registered algorithm on two tiny problems,
one for each form the kernels are specialised on (a generated bag-of-words preset, stored
as indicators with narrow column indices, and a file-like data set with real values), so
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
    from ..data.dataset import FederatedDataset
    from ..data.presets import make_preset
    from ..problems.objective import Problem

    yield Problem(make_preset("google-plus-small", nodes=8, seed=1), "logistic")
    rng = np.random.default_rng(0)
    X = sp.random(240, 30, density=0.2, format="csr", random_state=rng, dtype=np.float64)
    y = np.where(rng.random(240) < 0.4, 1.0, -1.0)
    ds = FederatedDataset.from_assignment(X, y, np.repeat(np.arange(8), 30), X_test=X[:40], y_test=y[:40],
                                          test_nodes=np.repeat(np.arange(8), 5))
    for loss in ("logistic", "squared", "smoothed-hinge"):
        yield Problem(ds, loss)


def warm_up(stop: Callable[[], bool] | None = None) -> dict[str, float]:
    """One iteration of every registered algorithm on each warm-up problem; returns seconds per
    algorithm.  Never raises: a kernel that fails here fails, with its message, in the real run."""
    from ..algorithms import ALGORITHMS
    from .loop import iterate

    seconds: dict[str, float] = {}
    start = time.perf_counter()
    for problem in _problems():
        for name, cls in ALGORITHMS.items():
            if stop is not None and stop():
                return seconds
            if problem.loss.name not in cls.losses:
                continue
            t0 = time.perf_counter()
            try:
                for _ in iterate(problem, name, iterations=1, f_star=0.0):
                    pass
            except Exception:  # noqa: BLE001 - warming must never take the server down
                log.exception("warm-up of %s failed", name)
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - t0
    log.info("kernels warmed up in %.1f s", time.perf_counter() - start)
    return seconds
