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
    """The preset's form first (the first click's), then a file's forms.

    The file-like matrices have enough nonzeros for the row-block products (two blocks,
    :class:`fedviz.problems._blocks.RowBlocks`) and each value form the products are
    compiled for: all ones (no values), float32-exact, float64.
    """
    from ..data.dataset import FederatedDataset
    from ..data.presets import make_preset
    from ..problems._blocks import MIN_BLOCK_NNZ
    from ..problems.objective import Problem

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
