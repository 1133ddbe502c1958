"""Sparse products X w and Xᵀ r on every core: compiled kernels over row blocks of X.

SciPy's CSR products run on one core.  GD (Section 4.1) is nothing but these two
products, and every algorithm's metrics need them, so they are the memory-bound floor
every iteration pays: splitting the rows into blocks of about equal nonzeros and running
the blocks on all threads (numba's ``prange``) reaches that floor with every core's
memory bandwidth instead of one.

The kernels read X in its most compact exact form, because a product moves every
nonzero through memory once and that traffic is its cost: column indices as uint16
when d ≤ 65,536 (else uint32), values as float32 when every value is a float32, and
no values at all when every value is 1 (bag-of-words indicators, as in the paper's
Google+ data).  SciPy's CSR moves 12 bytes per nonzero; google-plus needs 2.  Every
narrowing is exact, so the products are unchanged to the last bit.

The model of C > 1 outputs (issue 22) is a row-major d × C matrix W: :meth:`RowBlocks.matmat`
and :meth:`RowBlocks.rmatmat` are the same loops moving C contiguous values per nonzero.

Determinism: the blocks depend on X alone, never on the thread count, and the blocks'
partial Xᵀ r vectors are added in block order, so a result is the same bit for bit
whatever the machine or the scheduling.  X w is summed row by row in SciPy's order;
Xᵀ r differs from SciPy's by rounding only (its per-feature sums are split at block
boundaries).
"""

from __future__ import annotations

import numba
import numpy as np
import scipy.sparse as sp

#: Most blocks per matrix: enough to balance 8 threads, few enough that adding the
#: blocks' partial Xᵀ r vectors stays negligible.
MAX_BLOCKS = 8
#: Fewest nonzeros in a block: below this a thread hand-off costs more than it saves.
MIN_BLOCK_NNZ = 100_000


@numba.njit(cache=True, nogil=True, parallel=True)
def _matvec(indptr, indices, data, w, rows, z):
    for k in numba.prange(rows.size - 1):
        for i in range(rows[k], rows[k + 1]):
            s = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                s += data[p] * w[indices[p]]
            z[i] = s


@numba.njit(cache=True, nogil=True, parallel=True)
def _rmatvec(indptr, indices, data, r, rows, acc):
    for k in numba.prange(rows.size - 1):
        a = acc[k]
        for i in range(rows[k], rows[k + 1]):
            ri = r[i]
            for p in range(indptr[i], indptr[i + 1]):
                a[indices[p]] += data[p] * ri


@numba.njit(cache=True, nogil=True, parallel=True)
def _matvec_pattern(indptr, indices, w, rows, z):
    """:func:`_matvec` for a matrix whose values are all 1."""
    for k in numba.prange(rows.size - 1):
        for i in range(rows[k], rows[k + 1]):
            s = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                s += w[indices[p]]
            z[i] = s


@numba.njit(cache=True, nogil=True, parallel=True)
def _rmatvec_pattern(indptr, indices, r, rows, acc):
    """:func:`_rmatvec` for a matrix whose values are all 1."""
    for k in numba.prange(rows.size - 1):
        a = acc[k]
        for i in range(rows[k], rows[k + 1]):
            ri = r[i]
            for p in range(indptr[i], indptr[i + 1]):
                a[indices[p]] += ri


@numba.njit(cache=True, nogil=True, parallel=True)
def _matmat(indptr, indices, data, W, rows, Z):
    """Z = X W for a row-major d × C model W: C values move per nonzero (issue 22)."""
    C = W.shape[1]
    for k in numba.prange(rows.size - 1):
        for i in range(rows[k], rows[k + 1]):
            for c in range(C):
                Z[i, c] = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                a = data[p]
                j = indices[p]
                for c in range(C):
                    Z[i, c] += a * W[j, c]


@numba.njit(cache=True, nogil=True, parallel=True)
def _rmatmat(indptr, indices, data, R, rows, acc):
    """acc[k] = X_kᵀ R_k for every row block k (d × C each)."""
    C = R.shape[1]
    for k in numba.prange(rows.size - 1):
        a = acc[k]
        for i in range(rows[k], rows[k + 1]):
            for p in range(indptr[i], indptr[i + 1]):
                v = data[p]
                j = indices[p]
                for c in range(C):
                    a[j, c] += v * R[i, c]


@numba.njit(cache=True, nogil=True, parallel=True)
def _matmat_pattern(indptr, indices, W, rows, Z):
    """:func:`_matmat` for a matrix whose values are all 1."""
    C = W.shape[1]
    for k in numba.prange(rows.size - 1):
        for i in range(rows[k], rows[k + 1]):
            for c in range(C):
                Z[i, c] = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                for c in range(C):
                    Z[i, c] += W[j, c]


@numba.njit(cache=True, nogil=True, parallel=True)
def _rmatmat_pattern(indptr, indices, R, rows, acc):
    """:func:`_rmatmat` for a matrix whose values are all 1."""
    C = R.shape[1]
    for k in numba.prange(rows.size - 1):
        a = acc[k]
        for i in range(rows[k], rows[k + 1]):
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                for c in range(C):
                    a[j, c] += R[i, c]


def compact_indices(X: sp.csr_matrix) -> np.ndarray:
    """X's column indices in the narrowest unsigned type that holds them: uint16 for
    d ≤ 65,536, else uint32 (a view when X's are int32).  Unsigned, the compiled gathers
    also skip the negative-index wraparound test (measured: twice as fast as signed)."""
    ind = X.indices
    if X.shape[1] <= 1 << 16:
        return ind.astype(np.uint16)
    return ind.view(np.uint32) if ind.dtype == np.int32 else ind.astype(np.uint64)


def compact_values(X: sp.csr_matrix) -> np.ndarray | None:
    """X's values in the narrowest exact form: None when all are 1, float32 when all are
    float32 numbers, else float64."""
    data = X.data
    if data.size and np.all(data == 1.0):
        return None
    narrow = data.astype(np.float32)
    if np.array_equal(narrow, data):
        return narrow
    return np.ascontiguousarray(data, dtype=np.float64)


class RowBlocks:
    """``X`` (CSR, float64) seen as row blocks of about equal nonzeros.

    The number of blocks depends on the matrix only: ``nnz // MIN_BLOCK_NNZ`` capped at
    :data:`MAX_BLOCKS`, and at ``nnz // (2 d)`` so that the blocks' partial Xᵀ r vectors
    (d floats each) never cost more than the product itself.  With one block the products
    are SciPy's.
    """

    def __init__(self, X: sp.csr_matrix):
        if not sp.issparse(X) or X.format != "csr":
            raise TypeError("RowBlocks needs a CSR matrix")
        self.X = X
        n, d = X.shape
        nnz = int(X.nnz)
        k = int(max(1, min(MAX_BLOCKS, nnz // MIN_BLOCK_NNZ, nnz // max(1, 2 * d), n)))
        rows = np.searchsorted(X.indptr, np.linspace(0, nnz, k + 1), side="left") if k > 1 else [0, n]
        rows = np.unique(np.asarray(rows, dtype=np.int64))
        rows[0], rows[-1] = 0, n
        self.rows = np.unique(rows)
        self.n_blocks = self.rows.size - 1
        if self.n_blocks > 1:
            self._indices = compact_indices(X)
            self._data = compact_values(X)

    def matvec(self, w: np.ndarray) -> np.ndarray:
        """X w (bitwise equal to SciPy's ``X @ w``)."""
        if self.n_blocks <= 1:
            return self.X @ w
        z = np.empty(self.X.shape[0])
        w = np.ascontiguousarray(w, dtype=np.float64)
        if self._data is None:
            _matvec_pattern(self.X.indptr, self._indices, w, self.rows, z)
        else:
            _matvec(self.X.indptr, self._indices, self._data, w, self.rows, z)
        return z

    def rmatvec(self, r: np.ndarray) -> np.ndarray:
        """Xᵀ r, the blocks' partial sums added in block order."""
        if self.n_blocks <= 1:
            return self.X.T @ r
        acc = np.zeros((self.n_blocks, self.X.shape[1]))
        r = np.ascontiguousarray(r, dtype=np.float64)
        if self._data is None:
            _rmatvec_pattern(self.X.indptr, self._indices, r, self.rows, acc)
        else:
            _rmatvec(self.X.indptr, self._indices, self._data, r, self.rows, acc)
        out = acc[0]
        for k in range(1, self.n_blocks):
            out += acc[k]
        return out

    def matmat(self, W: np.ndarray) -> np.ndarray:
        """X W for a d × C model W (n × C, C-contiguous): the model's C weights of a feature are
        contiguous, so each nonzero moves one row of C values (issue 22)."""
        if self.n_blocks <= 1:
            return np.ascontiguousarray(self.X @ W)
        W = np.ascontiguousarray(W, dtype=np.float64)
        Z = np.empty((self.X.shape[0], W.shape[1]))
        if self._data is None:
            _matmat_pattern(self.X.indptr, self._indices, W, self.rows, Z)
        else:
            _matmat(self.X.indptr, self._indices, self._data, W, self.rows, Z)
        return Z

    def rmatmat(self, R: np.ndarray) -> np.ndarray:
        """Xᵀ R for margins R (n × C): d × C, C-contiguous, the blocks' partial sums added in block order."""
        if self.n_blocks <= 1:
            return np.ascontiguousarray(self.X.T @ R)
        R = np.ascontiguousarray(R, dtype=np.float64)
        acc = np.zeros((self.n_blocks, self.X.shape[1], R.shape[1]))
        if self._data is None:
            _rmatmat_pattern(self.X.indptr, self._indices, R, self.rows, acc)
        else:
            _rmatmat(self.X.indptr, self._indices, self._data, R, self.rows, acc)
        out = acc[0]
        for k in range(1, self.n_blocks):
            out += acc[k]
        return out
