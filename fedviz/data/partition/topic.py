"""Feature skew: nodes are clusters of rows that look alike (spherical k-means).

On text-like sparse data, rows with similar words are the rows one user would write,
so clustering the rows by cosine similarity gives nodes whose features differ from node
to node: the feature-level non-IID-ness the paper's Section 3.6 corrects for with the
scalings S_k and A, where the label-skew partitioners do not exercise it.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import scipy.sparse as sp

from .base import ParamSpec, Partitioner, param_table

#: Most entries of a dense (centres × features) matrix; above it the features are
#: folded by a signed hash (see ``_fold``).  2^21 doubles are 16 MiB.
_DENSE_BUDGET = 1 << 21


class TopicPartitioner(Partitioner):
    """Spherical k-means on the L2-normalised rows, one node per cluster.

    Seeding works on a random sample of rows: greedy k-means++ (Arthur and
    Vassilvitskii 2007, ``2 + ln K`` candidates per centre as in scikit-learn) picks 2K
    centres, Lloyd's steps refine them, and the 2K clusters are merged pairwise, least
    loss of objective first, down to K (see ``_initial_centres`` for why).  Then up to
    ``max_iter`` Lloyd steps run on all rows, stopping early when no row moves.  A step
    is one fused pass over the nonzeros (nnz × K multiply-adds, never storing the n × K
    similarities) and one bincount for the centres.

    A cluster left empty takes the rows furthest from their centres (never a cluster's
    last row), so no node is empty unless there are fewer rows than nodes.  Rows with no
    nonzero feature have no direction; they are spread uniformly at random.

    Features that never occur are dropped first; if 2K × d is still beyond a memory
    budget, the features are folded into fewer columns by a seeded signed hash
    (Weinberger et al. 2009), which keeps inner products in expectation, so the dense
    centres stay small for any d.
    """

    name = "topic"
    title = "Feature clusters (topics)"
    params = param_table(
        ParamSpec("max_iter", int, 5, "Most Lloyd iterations of the k-means.", low=1,
                  high=1000),
    )

    def _assign(self, X, y, groups, rng):
        K = self.n_nodes
        X = _compact(sp.csr_matrix(X, dtype=np.float64, copy=True))
        n, d = X.shape
        if 2 * K * d > _DENSE_BUDGET:  # 2K: the seeding over-clusters (_initial_centres)
            X = _fold(X, max(1, _DENSE_BUDGET // (2 * K)), rng)
        Z, has_direction = _normalise_rows(X)
        labels = rng.integers(0, K, size=n)
        sim = np.full(n, -np.inf)  # directionless rows are the first to fill empty nodes
        if Z.shape[0]:
            centres = _initial_centres(Z, K, rng)
            labels[has_direction], sim[has_direction] = _lloyd(Z, centres, self.max_iter)
        return _fill_empty(labels, sim, K)


def _compact(X: sp.csr_matrix) -> sp.csr_matrix:
    """Canonical form (``X`` is a private copy) without the columns that hold no nonzero.

    Unused features change no inner product, and dropping them keeps the dense centres
    as small as the data allow.
    """
    X.sum_duplicates()
    X.eliminate_zeros()
    used = np.bincount(X.indices, minlength=X.shape[1]) > 0
    column = np.cumsum(used) - 1  # new index of each used feature
    return sp.csr_matrix((X.data, column[X.indices], X.indptr),
                         shape=(X.shape[0], int(used.sum())))


def _fold(X: sp.csr_matrix, width: int, rng: np.random.Generator) -> sp.csr_matrix:
    """Map feature j to column h(j) with sign s(j): X_folded = X H, H[j, h(j)] = s(j)."""
    d = X.shape[1]
    column = rng.integers(0, width, size=d)
    sign = rng.choice(np.array([-1.0, 1.0]), size=d)
    H = sp.csr_matrix((sign, (np.arange(d), column)), shape=(d, width))
    return (X @ H).tocsr()


def _normalise_rows(X: sp.csr_matrix) -> tuple[sp.csr_matrix, np.ndarray]:
    """Return the unit-norm rows of ``X`` that are not zero, and the mask of those rows."""
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    keep = norms > 0
    Z = sp.diags(1.0 / norms[keep]) @ X[keep]
    return Z.tocsr(), keep


def _initial_centres(Z: sp.csr_matrix, K: int, rng: np.random.Generator) -> np.ndarray:
    """K unit centres: over-cluster a sample of rows into 2K, then merge down to K.

    k-means++ alone often puts two centres in one true cluster and none in another
    when clusters are wide (a cosine of 0.4 inside a cluster against 0 across), and
    Lloyd's steps cannot undo that.  With twice the centres every cluster almost surely
    gets one, and merging by the least loss of objective pairs the centres back up
    within clusters, since merging across nearly orthogonal clusters costs the most.
    """
    n = Z.shape[0]
    sample = Z[np.sort(rng.choice(n, size=min(n, max(2048, 8 * K)), replace=False))]
    over = min(2 * K, sample.shape[0])
    labels, _ = _lloyd(sample, _kmeans_pp(sample, over, rng), max_iter=10)
    return _unit_rows(_merge(_cluster_sums(sample, labels, over), K))


def _kmeans_pp(Z: sp.csr_matrix, K: int, rng: np.random.Generator) -> np.ndarray:
    """Greedy k-means++ seeding on unit rows; returns K dense unit centres (rows of Z).

    For unit vectors ||z - c||^2 = 2 (1 - z.c), so sampling in proportion to
    ``1 - max similarity`` is k-means++'s D^2 sampling.
    """
    m = Z.shape[0]
    trials = 2 + int(math.log(K))
    chosen = [int(rng.integers(m))]
    best = _similarity(Z, Z[chosen]).ravel()
    for _ in range(1, K):
        gap = np.clip(1.0 - best, 0.0, None)
        total = gap.sum()
        p = gap / total if total > 0 else None  # every row already a centre: duplicates
        candidates = rng.choice(m, size=trials, p=p)
        sims = np.maximum(best[:, None], _similarity(Z, Z[candidates]))
        pick = int(np.argmax(sims.sum(axis=0)))  # the candidate that lowers the cost most
        chosen.append(int(candidates[pick]))
        best = sims[:, pick]
    return Z[chosen].toarray()


def _merge(sums: np.ndarray, K: int) -> np.ndarray:
    """Merge clusters, given by their row sums, greedily down to K.

    The spherical k-means objective (sum of each row's cosine to its cluster's mean
    direction) is the sum of the norms of the cluster sums, so merging a and b loses
    ||s_a|| + ||s_b|| - ||s_a + s_b||.  Each step merges the pair that loses least,
    updating the Gram matrix of the sums in place of recomputing it.
    """
    sums = sums.copy()
    gram = sums @ sums.T
    norms = np.sqrt(np.clip(np.diag(gram), 0.0, None))
    alive = np.ones(len(sums), dtype=bool)

    def merge_loss(rows):  # loss of merging each of `rows` with every cluster
        joint = norms[rows, None] ** 2 + norms[None, :] ** 2 + 2 * gram[rows]
        loss = norms[rows, None] + norms[None, :] - np.sqrt(np.clip(joint, 0.0, None))
        loss[:, ~alive] = np.inf
        loss[np.arange(len(rows)), rows] = np.inf
        return loss

    loss = merge_loss(np.arange(len(sums)))
    for _ in range(len(sums) - K):
        a, b = np.unravel_index(np.argmin(loss), loss.shape)
        sums[a] += sums[b]
        gram[a] += gram[b]
        gram[:, a] = gram[a]
        gram[a, a] = sums[a] @ sums[a]
        norms[a] = np.sqrt(gram[a, a])
        alive[b] = False
        loss[b, :] = loss[:, b] = np.inf
        loss[a, :] = loss[:, a] = merge_loss(np.array([a]))[0]
    return sums[alive]


def _cluster_sums(Z: sp.csr_matrix, labels: np.ndarray, K: int) -> np.ndarray:
    """Dense K × d matrix of the sum of each cluster's rows."""
    d = Z.shape[1]
    row_label = np.repeat(labels, np.diff(Z.indptr))
    sums = np.bincount(row_label * d + Z.indices, weights=Z.data, minlength=K * d)
    return sums.reshape(K, d)


def _unit_rows(A: np.ndarray) -> np.ndarray:
    """Rows scaled to unit norm (zero rows stay zero)."""
    norms = np.linalg.norm(A, axis=1, keepdims=True)
    return np.divide(A, norms, out=np.zeros_like(A), where=norms > 0)


def _similarity(Z: sp.csr_matrix, centres) -> np.ndarray:
    """Dense (rows × centres) matrix of inner products."""
    C = centres.toarray() if sp.issparse(centres) else centres
    return np.asarray(Z @ np.ascontiguousarray(C.T))


def _nearest(Z: sp.csr_matrix, centres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Most similar centre of every row, and that similarity."""
    labels = np.empty(Z.shape[0], dtype=np.int64)
    sim = np.empty(Z.shape[0])
    _nearest_kernel(Z.indptr, Z.indices, Z.data, np.ascontiguousarray(centres.T), labels, sim)
    return labels, sim


@numba.njit(cache=True, nogil=True)
def _nearest_kernel(indptr, indices, data, CT, labels, sim):  # pragma: no cover - compiled
    # Fused product and argmax: the n x K similarity matrix is never stored, and the
    # inner loop runs over K contiguous centre coordinates (SIMD-friendly).  Serial on
    # purpose: a parallel kernel would tie callers to numba's threading layer, which is
    # not safe under fork (process pools) with GNU OpenMP.
    n, K = len(indptr) - 1, CT.shape[1]
    for i in range(n):
        acc = np.zeros(K)
        for p in range(indptr[i], indptr[i + 1]):
            v = data[p]
            row = CT[indices[p]]
            for k in range(K):
                acc[k] += v * row[k]
        best = 0
        for k in range(1, K):
            if acc[k] > acc[best]:
                best = k
        labels[i] = best
        sim[i] = acc[best]


def _lloyd(Z: sp.csr_matrix, centres: np.ndarray, max_iter: int):
    """Spherical Lloyd iterations: assign to the most similar centre, re-average."""
    K = centres.shape[0]
    labels, sim = _nearest(Z, centres)
    for _ in range(max_iter):
        labels = _fill_empty(labels, sim, K)
        new_labels, sim = _nearest(Z, _unit_rows(_cluster_sums(Z, labels, K)))
        if np.array_equal(new_labels, labels):
            break
        labels = new_labels
    return new_labels, sim


def _fill_empty(labels: np.ndarray, sim: np.ndarray, K: int) -> np.ndarray:
    """Move the rows least similar to their centre into empty clusters.

    Each cluster keeps its most similar row, so filling one cluster never empties
    another; with at least K rows every cluster ends non-empty.
    """
    counts = np.bincount(labels, minlength=K)
    empty = np.flatnonzero(counts == 0)
    if not empty.size:
        return labels
    order = np.lexsort((sim, labels))  # by cluster, least similar first
    rank = np.arange(len(order)) - (np.cumsum(counts) - counts)[labels[order]]
    movable = order[rank < counts[labels[order]] - 1]
    movable = movable[np.argsort(sim[movable], kind="stable")][:empty.size]
    labels = labels.copy()
    labels[movable] = empty[:movable.size]
    return labels
