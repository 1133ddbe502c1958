"""Compiled kernel for n_k^j: a pass over each node's contiguous rows, on all threads.

Building the K × d count matrix through SciPy's COO → CSR conversion sorts all nnz
entries (seconds at paper scale); here each node sorts only its own support.
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


@numba.njit(cache=True, nogil=True, parallel=True)
def node_feature_counts(indptr, indices, data, offsets, d, parts):
    """CSR arrays (indptr, indices, counts) of the K × d matrix n_k^j, indices sorted."""
    K = offsets.size - 1
    sizes = np.zeros(K, dtype=np.int64)
    # Node ranges of about equal nonzeros: node sizes are heavy-tailed, equal node counts are not.
    bounds = np.empty(parts + 1, dtype=np.int64)
    bounds[0] = 0
    bounds[parts] = K
    total = indptr[offsets[K]]
    k = 0
    for p in range(1, parts):
        while k < K and indptr[offsets[k]] < total * p // parts:
            k += 1
        bounds[p] = k
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
