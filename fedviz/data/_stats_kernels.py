"""Compiled kernels of the node × feature support: a pass over each node's contiguous rows, on all threads.

Building the K × d count matrix through SciPy's COO → CSR conversion sorts all nnz
entries (seconds at paper scale); here each node sorts only its own support.  These are
the only kernels that find which features appear on which node: the statistics
(:class:`~fedviz.data.dataset.DatasetStats`) and every algorithm read the result from
:attr:`FederatedDataset.support <fedviz.data.dataset.FederatedDataset.support>`.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _node_support(indptr, indices, data, r0, r1, mark, count, stamp, touched):
    """Distinct nonzero columns of rows r0:r1 into ``touched`` (unsorted); returns how many."""
    m = 0
    for k in range(indptr[r0], indptr[r1]):
        if data[k] != 0.0:
            j = indices[k]
            if mark[j] != stamp:
                mark[j] = stamp
                count[j] = 0
                touched[m] = j
                m += 1
            count[j] += 1
    return m


@numba.njit(cache=True, nogil=True)
def _balanced_bounds(indptr, offsets, parts):
    """Node ranges of about equal nonzeros: node sizes are heavy-tailed, equal node counts are not."""
    K = offsets.size - 1
    bounds = np.empty(parts + 1, dtype=np.int64)
    bounds[0] = 0
    bounds[parts] = K
    total = indptr[offsets[K]]
    k = 0
    for p in range(1, parts):
        while k < K and indptr[offsets[k]] < total * p // parts:
            k += 1
        bounds[p] = k
    return bounds


@numba.njit(cache=True, nogil=True, parallel=True)
def node_feature_counts(indptr, indices, data, offsets, d, parts):
    """CSR arrays (indptr, indices, counts) of the K × d matrix n_k^j, indices sorted."""
    K = offsets.size - 1
    sizes = np.zeros(K, dtype=np.int64)
    bounds = _balanced_bounds(indptr, offsets, parts)
    for c in numba.prange(parts):
        mark = np.full(d, -1, dtype=np.int64)
        count = np.zeros(d, dtype=np.int64)
        touched = np.empty(d, dtype=np.int64)
        for k in range(bounds[c], bounds[c + 1]):
            sizes[k] = _node_support(indptr, indices, data, offsets[k], offsets[k + 1], mark, count, k,
                                     touched)
    out_ptr = np.zeros(K + 1, dtype=np.int64)
    for k in range(K):
        out_ptr[k + 1] = out_ptr[k] + sizes[k]
    out_idx = np.empty(out_ptr[K], dtype=np.int32)
    out_cnt = np.empty(out_ptr[K], dtype=np.int64)
    for c in numba.prange(parts):
        mark = np.full(d, -1, dtype=np.int64)
        count = np.zeros(d, dtype=np.int64)
        touched = np.empty(d, dtype=np.int64)
        for k in range(bounds[c], bounds[c + 1]):
            m = _node_support(indptr, indices, data, offsets[k], offsets[k + 1], mark, count, k, touched)
            cols = np.sort(touched[:m])
            base = out_ptr[k]
            for t in range(m):
                out_idx[base + t] = cols[t]
                out_cnt[base + t] = count[cols[t]]
    return out_ptr, out_idx, out_cnt


@numba.njit(cache=True, nogil=True, parallel=True)
def support_slots(indptr, indices, offsets, sptr, scol, d, parts, slot):
    """``slot[p]``: the position of stored entry p's column in its node's support
    ``scol[sptr[k]:sptr[k+1]]`` (local to the node).  Every stored entry must be a
    nonzero, i.e. its column must be in the support."""
    bounds = _balanced_bounds(indptr, offsets, parts)
    for c in numba.prange(parts):
        where = np.zeros(d, dtype=np.int32)
        for k in range(bounds[c], bounds[c + 1]):
            base = sptr[k]
            for t in range(sptr[k + 1] - base):
                where[scol[base + t]] = t
            for p in range(indptr[offsets[k]], indptr[offsets[k + 1]]):
                slot[p] = where[indices[p]]
