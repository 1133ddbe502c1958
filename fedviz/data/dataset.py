"""The federated data set: training rows grouped by node, a test set, and cached statistics.

This module owns :class:`FederatedDataset`, :class:`NodeSupport` (which features appear
on which node: the one computation of the node × feature support, shared by the
statistics and every algorithm) and :class:`DatasetStats`, the notation of the paper's
Section 3.6.1 (n^j, n_k^j, φ^j, φ_k^j, s_k^j, ω^j, a^j) computed once, sparsely, from the
CSR matrix.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping, NamedTuple

import numba
import numpy as np
import scipy.sparse as sp

from ..errors import FedvizError
from ._stats_kernels import node_feature_counts, support_slots


@dataclass(frozen=True, eq=False)
class FederatedDataset:
    """n training examples on K nodes, plus a test set.

    Attributes
    ----------
    X : scipy.sparse.csr_matrix, shape (n, d), float64
        Training examples.  Rows of node k are ``offsets[k]:offsets[k+1]``, so each
        node's data are contiguous.
    y : ndarray, shape (n,)
        Labels in {-1, +1} for classification, real targets for regression.
    offsets : ndarray of int64, shape (K + 1,)
        Node boundaries; ``offsets[0] == 0`` and ``offsets[-1] == n``.  Every node
        holds at least one training example.
    X_test, y_test : csr_matrix of shape (n_test, d), ndarray of shape (n_test,)
        The test set (possibly empty).
    test_nodes : ndarray of int64, shape (n_test,)
        The node of each test example, or -1 where the test set has no node
        (a separate test file).
    meta : Mapping
        Provenance: ``source``, ``params``, ``seed``, ``task`` ("classification" or
        "regression"), label mapping and anything the builder wants to record.
        :func:`fedviz.data.build.build` adds ``split`` (the test set in force, as a
        sentence) and fills ``warnings``: a list of sentences for people about what
        looks wrong (a cut file, a one-class or empty test set), present and empty
        when nothing does, so that every reader can show ``meta["warnings"]``.
    unseen : FederatedDataset or None
        The nodes held out of training (issue 23, point 2; :func:`fedviz.data.unseen.hold_out`), a
        data set of their own with their own training and test rows; None when none are.
    """

    X: sp.csr_matrix
    y: np.ndarray
    offsets: np.ndarray
    X_test: sp.csr_matrix
    y_test: np.ndarray
    test_nodes: np.ndarray
    meta: Mapping[str, Any] = field(default_factory=dict)
    unseen: "FederatedDataset | None" = field(default=None, repr=False)

    def __post_init__(self):
        X, X_test = self.X, self.X_test
        if not sp.issparse(X) or X.format != "csr":
            raise TypeError("X must be a CSR matrix")
        if X_test.shape[1] != X.shape[1]:
            raise FedvizError(
                f"the test set has {X_test.shape[1]} features but the training set has {X.shape[1]}")
        off = self.offsets
        if off[0] != 0 or off[-1] != X.shape[0] or np.any(np.diff(off) <= 0):
            raise FedvizError("node offsets must start at 0, end at n and leave no node empty")
        if len(self.y) != X.shape[0] or len(self.y_test) != X_test.shape[0] \
                or len(self.test_nodes) != X_test.shape[0]:
            raise FedvizError("labels and rows differ in number")
        # A private plain-dict copy: picklable (Streamlit's cache_data pickles data sets).
        meta = dict(self.meta)
        meta["warnings"] = list(meta.get("warnings", ()))  # always there; a copy, never shared
        object.__setattr__(self, "meta", meta)

    # -- shape -------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def d(self) -> int:
        return self.X.shape[1]

    @property
    def n_nodes(self) -> int:
        return len(self.offsets) - 1

    @property
    def node_sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def task(self) -> str:
        return self.meta.get("task", "classification")

    @property
    def multiclass(self) -> bool:
        """Whether y holds class codes 0..C−1 of C > 2 classes (the labels' ``"multiclass"`` policy)."""
        return self.meta.get("label_policy") == "multiclass"

    @property
    def n_classes(self) -> int | None:
        """The number of classes of y: C for multiclass data, 2 for binary and one-vs-rest (±1),
        None for regression."""
        if self.task == "regression":
            return None
        return len(self.meta.get("classes", ())) if self.multiclass else 2

    @property
    def class_names(self) -> tuple[str, ...]:
        """The classes as people write them, in the order of the label counts' columns: the file's
        labels for multiclass data ("1", "2", "3" for dna.scale's codes 0, 1, 2), "-1" and "+1"
        otherwise; empty for regression."""
        from .labels import format_label

        if self.task == "regression":
            return ()
        if self.multiclass:
            return tuple(format_label(c) for c in self.meta["classes"])
        return ("-1", "+1")

    def node_slice(self, k: int) -> slice:
        return slice(int(self.offsets[k]), int(self.offsets[k + 1]))

    @cached_property
    def node_of_row(self) -> np.ndarray:
        """The node index of every training row (int64, length n)."""
        return np.repeat(np.arange(self.n_nodes, dtype=np.int64), self.node_sizes)

    @cached_property
    def support(self) -> "NodeSupport":
        """Which features appear on which node (S_k and n_k^j), computed once per data set."""
        return NodeSupport.compute(self.X, self.offsets)

    @cached_property
    def stats(self) -> "DatasetStats":
        return DatasetStats.compute(self)

    @cached_property
    def fingerprint(self) -> str:
        """A SHA-256 of the data themselves: equal data give equal fingerprints."""
        h = hashlib.sha256()
        for a in (self.X.indptr, self.X.indices, self.X.data, self.y, self.offsets,
                  self.X_test.indptr, self.X_test.indices, self.X_test.data, self.y_test,
                  self.test_nodes):
            a = np.ascontiguousarray(a)
            h.update(str(a.dtype).encode())
            h.update(np.int64(a.size).tobytes())
            h.update(a.tobytes())
        if self.unseen is not None:  # the held-out nodes are part of the data (none: the digest as before)
            h.update(b"unseen" + self.unseen.fingerprint.encode())
        return h.hexdigest()[:16]

    # -- construction ----------------------------------------------------------------
    @classmethod
    def from_assignment(cls, X, y, node_of_row, *, X_test=None, y_test=None, test_nodes=None,
                        meta: Mapping | None = None) -> "FederatedDataset":
        """Group rows by node.

        ``node_of_row[i]`` is the node of row i.  Rows keep their relative order within
        a node (a stable sort), so a chronological order in the input survives.  Node
        labels are renumbered 0..K-1 in increasing order, dropping labels with no rows;
        the test nodes are renumbered the same way (a test node without training rows
        becomes -1).
        """
        X = sp.csr_matrix(X, dtype=np.float64)
        X.sum_duplicates()
        X.sort_indices()
        y = np.asarray(y, dtype=np.float64)
        node_of_row = np.asarray(node_of_row, dtype=np.int64)
        if node_of_row.shape != (X.shape[0],):
            raise FedvizError("node_of_row must give one node per training row")
        if X.shape[0] == 0:
            raise FedvizError("the training set is empty")
        labels, dense = np.unique(node_of_row, return_inverse=True)
        order = np.argsort(dense, kind="stable")
        counts = np.bincount(dense, minlength=len(labels))
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        if X_test is None:
            X_test = sp.csr_matrix((0, X.shape[1]), dtype=np.float64)
            y_test = np.zeros(0)
        X_test = sp.csr_matrix(X_test, dtype=np.float64)
        X_test.sum_duplicates()
        X_test.sort_indices()
        y_test = np.asarray(y_test, dtype=np.float64)
        if test_nodes is None:
            tn = np.full(X_test.shape[0], -1, dtype=np.int64)
        else:
            test_nodes = np.asarray(test_nodes, dtype=np.int64)
            pos = np.searchsorted(labels, test_nodes)
            pos_c = np.minimum(pos, len(labels) - 1)
            tn = np.where((test_nodes >= 0) & (labels[pos_c] == test_nodes), pos_c, -1)
        meta = dict(meta or {})
        meta.setdefault("task", "classification")
        if X_test.shape[0]:
            # Sort test rows by node too, so per-node test views are contiguous.
            torder = np.argsort(tn, kind="stable")
            X_test, y_test, tn = X_test[torder], y_test[torder], tn[torder]
        if np.any(order != np.arange(order.size)):  # already grouped (a generator's output): no copy
            X, y = X[order], y[order]
        return cls(X=X, y=y, offsets=offsets, X_test=X_test, y_test=y_test,
                   test_nodes=tn.astype(np.int64), meta=meta)

    def with_nodes(self, node_of_row, *, meta_update: Mapping | None = None) -> "FederatedDataset":
        """The same training rows on a new partition (test nodes become -1 unless kept)."""
        meta = dict(self.meta)
        meta.update(meta_update or {})
        return FederatedDataset.from_assignment(
            self.X, self.y, node_of_row, X_test=self.X_test, y_test=self.y_test,
            test_nodes=None, meta=meta)


class SupportEntries(NamedTuple):
    """The stored nonzeros of X by node-local support slot: row i's entries are
    ``indptr[i]:indptr[i+1]`` of ``data`` and ``slot`` (X's own arrays when X stores no
    explicit zeros), and the column of entry p is ``col[ptr[k] + slot[p]]`` on its node k."""

    indptr: np.ndarray
    data: np.ndarray
    slot: np.ndarray


@dataclass(frozen=True, eq=False)
class NodeSupport:
    """The node × feature support: S_k, the features that appear on node k, and n_k^j.

    A feature appears on a node when one of the node's rows stores a nonzero for it
    (explicit zeros are not appearances).  Node k's support is
    ``col[ptr[k]:ptr[k+1]]``, sorted; the positions there are the node's "slots", so
    kernels can index small per-node work arrays instead of length-d ones.  The stacked
    supports also give the block-diagonal matrix Diag(X_1, ..., X_K) restricted to the
    supports (:meth:`block_matrix`), on which DANE's exact solver, the Appendix's block
    solves and the per-node smoothness work.

    Attributes
    ----------
    X : csr_matrix (n, d)               the rows, grouped by node
    offsets : ndarray (K + 1,) int64    node boundaries in the rows
    ptr : ndarray (K + 1,) int64        node k's slots are ``ptr[k]:ptr[k+1]``
    col : ndarray (Σ_k |S_k|,) int32    the column of each slot, sorted within a node
    count : ndarray (Σ_k |S_k|,) int64  n_k^j: the node's rows with a nonzero in the column
    """

    X: sp.csr_matrix
    offsets: np.ndarray
    ptr: np.ndarray
    col: np.ndarray
    count: np.ndarray

    @classmethod
    def compute(cls, X: sp.csr_matrix, offsets: np.ndarray) -> "NodeSupport":
        """The support of the nodes ``offsets[k]:offsets[k+1]`` of X's rows (one compiled pass)."""
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        K = offsets.size - 1
        ptr, col, count = node_feature_counts(X.indptr.astype(np.int64), X.indices, X.data, offsets,
                                              X.shape[1], max(1, min(numba.get_num_threads(), K)))
        return cls(X=X, offsets=offsets, ptr=ptr, col=col, count=count)

    @classmethod
    def whole(cls, X: sp.csr_matrix) -> "NodeSupport":
        """All rows on one node whose slots are simply the d columns (centralised SVRG)."""
        d = X.shape[1]
        nonzero = X.data != 0
        return cls(X=X, offsets=np.array([0, X.shape[0]], dtype=np.int64),
                   ptr=np.array([0, d], dtype=np.int64), col=np.arange(d, dtype=np.int32),
                   count=np.bincount(X.indices[nonzero], minlength=d).astype(np.int64))

    @property
    def n_nodes(self) -> int:
        return self.ptr.size - 1

    @property
    def sizes(self) -> np.ndarray:
        """|S_k| for every node."""
        return np.diff(self.ptr)

    @cached_property
    def max_size(self) -> int:
        return int(self.sizes.max(initial=0))

    @cached_property
    def node(self) -> np.ndarray:
        """The node of every slot (int64)."""
        return np.repeat(np.arange(self.n_nodes, dtype=np.int64), self.sizes)

    def of_node(self, k: int) -> np.ndarray:
        """S_k: the features occurring on node k (sorted)."""
        return self.col[self.ptr[k]:self.ptr[k + 1]]

    @cached_property
    def entries(self) -> SupportEntries:
        """X's stored nonzeros with the node-local slot of each (see :class:`SupportEntries`)."""
        X = self.X
        if not np.all(X.data != 0):
            X = X.copy()
            X.eliminate_zeros()  # explicit zeros are not part of a node's support
        slot = np.empty(X.nnz, dtype=np.int32)
        support_slots(X.indptr.astype(np.int64), X.indices, self.offsets, self.ptr, self.col,
                      X.shape[1], max(1, min(numba.get_num_threads(), self.n_nodes)), slot)
        return SupportEntries(indptr=X.indptr, data=X.data, slot=slot)

    def block_matrix(self) -> sp.csr_matrix:
        """B = Diag(X_1, ..., X_K) on the supports: n × Σ_k |S_k|, node k's block in rows
        ``offsets[k]:offsets[k+1]`` and columns ``ptr[k]:ptr[k+1]`` (no explicit zeros)."""
        e = self.entries
        n, total = self.X.shape[0], int(self.ptr[-1])
        node_of_entry = np.repeat(np.repeat(np.arange(self.n_nodes), np.diff(self.offsets)), np.diff(e.indptr))
        cols = (self.ptr[node_of_entry] + e.slot).astype(np.int32 if total < 2**31 else np.int64)
        return sp.csr_matrix((e.data, cols, e.indptr), shape=(n, total))


@dataclass(frozen=True, eq=False)
class DatasetStats:
    """Statistics of a federated data set, in the paper's notation (Section 3.6.1).

    Every per-(node, feature) quantity is stored as a sparse K × d CSR matrix with the
    sparsity pattern of n_k^j, never as a dense K × d array.

    Attributes
    ----------
    n, d, nnz, n_nodes : int
    node_sizes : ndarray (K,)            n_k
    feature_counts : ndarray (d,)        n^j, rows with a nonzero j-th coordinate
    node_feature_counts : csr (K, d)     n_k^j
    omega : ndarray (d,)                 ω^j, nodes on which feature j appears
    phi : ndarray (d,)                   φ^j = n^j / n
    phi_local : csr (K, d)               φ_k^j = n_k^j / n_k
    S : csr (K, d)                       s_k^j = φ^j / φ_k^j on the pattern of n_k^j
    A : ndarray (d,)                     a^j = K / ω^j (1 where ω^j = 0: such a
                                         coordinate is moved by the regulariser only)
    """

    n: int
    d: int
    nnz: int
    n_nodes: int
    node_sizes: np.ndarray
    feature_counts: np.ndarray
    node_feature_counts: sp.csr_matrix
    omega: np.ndarray
    phi: np.ndarray
    phi_local: sp.csr_matrix
    S: sp.csr_matrix
    A: np.ndarray

    @classmethod
    def compute(cls, ds: FederatedDataset) -> "DatasetStats":
        n, d, K = ds.n, ds.d, ds.n_nodes
        sizes = ds.node_sizes.astype(np.int64)
        # Explicit zeros are not appearances: the support counts stored nonzeros only.
        sup = ds.support
        nkj = sp.csr_matrix((sup.count, sup.col, sup.ptr), shape=(K, d))
        # n^j = Σ_k n_k^j and ω^j = #{k : n_k^j > 0}, both from the (smaller) K × d pattern.
        feature_counts = np.bincount(nkj.indices, weights=nkj.data, minlength=d).astype(np.int64)
        omega = np.bincount(nkj.indices, minlength=d).astype(np.int64)
        phi = feature_counts / n
        row_of_entry = np.repeat(np.arange(K), np.diff(nkj.indptr))
        phi_k_vals = nkj.data / sizes[row_of_entry]
        phi_local = sp.csr_matrix((phi_k_vals, nkj.indices, nkj.indptr), shape=(K, d))
        S = sp.csr_matrix((phi[nkj.indices] / phi_k_vals, nkj.indices, nkj.indptr), shape=(K, d))
        A = np.ones(d)
        seen = omega > 0
        A[seen] = K / omega[seen]
        return cls(n=n, d=d, nnz=int(feature_counts.sum()), n_nodes=K, node_sizes=sizes,
                   feature_counts=feature_counts, node_feature_counts=nkj, omega=omega,
                   phi=phi, phi_local=phi_local, S=S, A=A)

    def summary(self) -> dict:
        """Scalar figures for tables and JSON."""
        sizes = self.node_sizes
        return {
            "n": self.n, "d": self.d, "nnz": self.nnz, "nodes": self.n_nodes,
            "node_size_min": int(sizes.min()), "node_size_median": float(np.median(sizes)),
            "node_size_max": int(sizes.max()), "node_size_mean": float(sizes.mean()),
            # The paper's statistic (Section 4.1, K = 10,000) says nothing below 1,000 nodes, where every
            # feature qualifies: NaN there (n/a), as a baseline that does not apply.
            "features_on_fewer_than_1000_nodes": float(np.mean(self.omega < 1000)) if self.n_nodes >= 1000
            else float("nan"),
            "features_never_seen": int(np.sum(self.omega == 0)),
            "density": self.nnz / max(1, self.n * self.d),
        }


def chronological_split(node_of_row: np.ndarray, fraction: float) -> np.ndarray:
    """A mask of test rows: the last ``fraction`` of each node's rows, in input order.

    Node k with m_k rows keeps its first m_k − floor(fraction · m_k) rows for training,
    so every node keeps at least one training row when fraction < 1 (the paper takes the
    earlier 75% of each author's posts for training, Section 4.1).  Right only where the
    input order is a time order: a file sorted by label would get a test set of one
    class, so files split at random by default (:func:`fedviz.data.split.random_split`).
    """
    node_of_row = np.asarray(node_of_row)
    order = np.argsort(node_of_row, kind="stable")
    sorted_nodes = node_of_row[order]
    starts = np.flatnonzero(np.r_[True, sorted_nodes[1:] != sorted_nodes[:-1]])
    counts = np.diff(np.r_[starts, len(order)])
    rank = np.arange(len(order)) - np.repeat(starts, counts)
    n_test = np.floor(fraction * counts).astype(np.int64)
    test_sorted = rank >= np.repeat(counts - n_test, counts)
    mask = np.empty(len(order), dtype=bool)
    mask[order] = test_sorted
    return mask
