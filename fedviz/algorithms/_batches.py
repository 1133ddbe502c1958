"""How a round's local work is cut into chunks (:data:`CHUNKS` of them) and batches (between Stop checks).

Every compiled local loop (:mod:`._svrg_kernels`, :mod:`._sdca_kernels`,
:mod:`._local_sgd_kernels`) spreads nodes over the threads in *chunks*: contiguous ranges of
nodes of about equal work, each with its own accumulator that receives its nodes'
contributions in node order.  The chunks are fixed for the whole round.  A *batch* is one
consecutive slice of every chunk; the caller checks Stop between batches.

Because the chunks do not depend on the batch size, neither does the order of any
floating-point sum, so a round gives bitwise the same result whatever the batch size: the
batch size sets only how soon Stop takes effect.  (With batches cut first and chunks inside
each batch, as before, every batch size summed the nodes in a different order.)

A slice boundary is a position (node, step): "node has taken ``step`` of its local steps".
Kernels that can resume a node mid-loop (the SVRG family's, whose centralised variant is
one node with n steps) pass ``steps``, and a boundary may then fall inside a node; the
others get boundaries at whole nodes (step 0).
"""

from __future__ import annotations

import math

import numba
import numpy as np

#: The chunks a round's nodes are cut into: a fixed number, not the thread count, so that the
#: grouping of every floating-point sum, hence every result, is the same bit for bit whatever the
#: thread count (a cluster worker pinned to one thread, a laptop, a server with many).  Eight keep
#: up to eight threads busy, as the products' eight row blocks do (:mod:`fedviz.problems._blocks`).
CHUNKS = 8


def batch_target(target: float) -> float:
    """Work per chunk per batch for a ``target`` meant per thread: the threads then share the
    :data:`CHUNKS` chunks and a batch takes the same wall time, hence the same Stop latency, as
    with one chunk per thread.  (The batch size never changes a result; see the module docstring.)"""
    return target * min(CHUNKS, max(1, numba.get_num_threads())) / CHUNKS


def chunk_bounds(work: np.ndarray, n_chunks: int) -> np.ndarray:
    """Node boundaries (length n_chunks + 1) of ``n_chunks`` contiguous chunks of about equal work.

    A boundary is the first node whose cumulative work reaches the chunk's share, so a chunk
    may be empty (fewer nodes than chunks, or one node heavier than a share).
    """
    work = np.asarray(work, dtype=np.float64)
    K = work.size
    cum = np.concatenate([[0.0], np.cumsum(work)])
    goals = cum[-1] * np.arange(1, n_chunks) / n_chunks
    inner = np.clip(np.searchsorted(cum, goals, side="left"), 0, K)
    return np.concatenate([[0], inner, [K]]).astype(np.int64)


def plan(work: np.ndarray, n_chunks: int, target: float, *, steps: np.ndarray | None = None,
         step_work: np.ndarray | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Cut the nodes' work into batches of at most about ``target`` work per chunk.

    Parameters
    ----------
    work : ndarray (K,)
        Each node's work (any unit; only ratios matter).
    n_chunks : int
        Chunks (threads).  Chunk boundaries come from :func:`chunk_bounds` and are the same
        for every ``target``.
    target : float
        Work per chunk per batch; the number of batches is ⌈(largest chunk's work) / target⌉
        (at least one).
    steps, step_work : ndarray (K,), optional
        A node's local steps and the work of one step.  When given, a slice boundary may
        fall inside a node, at the step where its cumulative work reaches the goal (a
        node's fixed work ``work − steps·step_work`` counts before its first step).
        Without them boundaries fall between nodes.

    Returns
    -------
    list of (lo, hi)
        One pair per batch, each an (n_chunks, 2) int64 array of positions (node, step):
        in this batch chunk c runs from ``lo[c]`` up to, not including, ``hi[c]``.  Batches
        in which every chunk is empty are left out; the positions of chunk c are
        non-decreasing from (its first node, 0) to (its end, 0), consecutive batches
        sharing a boundary, and a step is always below the node's ``steps``.
    """
    work = np.asarray(work, dtype=np.float64)
    K = work.size
    cum = np.concatenate([[0.0], np.cumsum(work)])
    bounds = chunk_bounds(work, n_chunks)
    chunk_work = cum[bounds[1:]] - cum[bounds[:-1]]
    n_batches = max(1, int(math.ceil(float(chunk_work.max(initial=0.0)) / max(float(target), 1e-300))))
    frac = np.arange(1, n_batches) / n_batches
    # pos[c, b] = (node, step) where batch b of chunk c starts; b = n_batches is the end.
    pos = np.zeros((n_chunks, n_batches + 1, 2), dtype=np.int64)
    pos[:, 0, 0] = bounds[:-1]
    pos[:, -1, 0] = bounds[1:]
    for c in range(n_chunks):
        a, b = int(bounds[c]), int(bounds[c + 1])
        if a == b:
            pos[c, 1:-1, 0] = a
            continue
        goals = cum[a] + (cum[b] - cum[a]) * frac
        if steps is None:
            # The first node boundary at or after the goal.
            pos[c, 1:-1, 0] = np.clip(np.searchsorted(cum, goals, side="left"), a, b)
            continue
        # The node whose work contains the goal, and the step inside it.
        k = np.clip(np.searchsorted(cum, goals, side="right") - 1, a, b - 1)
        st = np.asarray(steps, dtype=np.int64)[k]
        per = np.asarray(step_work, dtype=np.float64)[k]
        fixed = work[k] - st * per
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.where(per > 0, np.floor((goals - cum[k] - fixed) / per), 0.0)
        s = np.clip(s, 0, st).astype(np.int64)
        # "All steps of node k taken" is the start of node k + 1.
        done = s >= st
        k = np.where(done & (st > 0), k + 1, k)
        s = np.where(done, 0, s)
        pos[c, 1:-1, 0] = k
        pos[c, 1:-1, 1] = s
    out = []
    for b in range(n_batches):
        lo, hi = pos[:, b].copy(), pos[:, b + 1].copy()
        if np.any((lo[:, 0] != hi[:, 0]) | (lo[:, 1] != hi[:, 1])):
            out.append((lo, hi))
    return out
