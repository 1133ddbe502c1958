"""Scoring personalised models (issue 23, point 3): each node's test rows by its own model.

This module owns the per-node test error and own loss of a :class:`~fedviz.personal.models.PersonalModels`
and of the per-node majority baseline (Section 4.1's "per-author majority").  Node k's test rows
T_k (``ds.test_nodes == k``) are scored with v_k, so the margin of a test row x_i of node k is

    x_iᵀv_k = Σ_{j ∈ S_k} x_ij v_k,j + scale_k Σ_{j ∉ S_k} x_ij off_j,

one compiled pass over the test set's nonzeros, every row looking its features up in its node's
sorted support (binary search): no K × dC array and no loop over nodes in Python.  A test row of
no node (a separate test file: ``test_nodes == −1``) has no personal model and is scored by none.

The per-node errors are then :class:`~fedviz.problems.pernode.NodeEvaluator`'s from those margins
(the same error metric as the pooled test error: sign error on ±1 labels, argmax error for
C > 1 classes, squared error on real targets), and the pooled error is the row-weighted mean
over the nodes' test rows.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import prange

from ..data.baselines import node_majority_labels
from ..problems.objective import Problem
from ..problems.pernode import NodeEvaluator
from .models import PersonalModels


@numba.njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def _personal_margins(indptr, indices, data, test_node, col, ptr, slots, off, scale, C, out):
    """out[i, c] = x_iᵀ v_{k(i)} (column c of the d × C model) for every test row i of a node."""
    for i in prange(indptr.size - 1):
        k = test_node[i]
        if k < 0:
            for c in range(C):
                out[i, c] = 0.0
            continue
        a = ptr[k]
        b = ptr[k + 1]
        s = scale[k]
        for c in range(C):
            out[i, c] = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            x = data[p]
            # binary search of j in node k's sorted support col[a:b]
            lo = a
            hi = b
            while lo < hi:
                mid = (lo + hi) // 2
                if col[mid] < j:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < b and col[lo] == j:
                for c in range(C):
                    out[i, c] += x * slots[lo * C + c]
            else:
                for c in range(C):
                    out[i, c] += x * s * off[j * C + c]


class PersonalEvaluator:
    """Per-node scores of model sets on one problem (built once: the node evaluator and the supports)."""

    def __init__(self, problem: Problem):
        self.problem = problem
        self.nodes = NodeEvaluator(problem)
        ds = problem.data
        self.col = np.ascontiguousarray(ds.support.col, dtype=np.int64)
        self.sup_ptr = np.ascontiguousarray(ds.support.ptr, dtype=np.int64)
        Xt = ds.X_test.tocsr()
        self._Xt = (np.ascontiguousarray(Xt.indptr, dtype=np.int64), np.ascontiguousarray(Xt.indices, dtype=np.int64),
                    np.ascontiguousarray(Xt.data, dtype=np.float64))
        self.test_node = np.ascontiguousarray(ds.test_nodes, dtype=np.int64)
        #: Test rows with a node: those the personal models score (the pooled error's denominator).
        self.scored_rows = int(np.count_nonzero(self.test_node >= 0))

    @property
    def untested(self) -> int:
        """Nodes without a test row (their error is NaN, counted, never dropped silently)."""
        return self.nodes.untested

    def test_margins(self, models: PersonalModels) -> np.ndarray:
        """x_iᵀ v_{k(i)} for every test row (n_test, or n_test × C); 0 on the rows of no node."""
        C = models.C
        out = np.empty((self.test_node.size, C))
        if self.test_node.size:
            indptr, indices, data = self._Xt
            _personal_margins(indptr, indices, data, self.test_node, self.col, self.sup_ptr,
                              np.ascontiguousarray(models.slots), np.ascontiguousarray(models.off),
                              np.ascontiguousarray(models.scale), C, out)
        return out[:, 0] if C == 1 else out

    def errors(self, models: PersonalModels) -> np.ndarray:
        """e_k: node k's test error under its own model v_k (NaN without test rows)."""
        return self.nodes.node_test_error(self.test_margins(models))

    def global_errors(self, w: np.ndarray) -> np.ndarray:
        """e_k under one model w for all nodes (the global model): NodeEvaluator's own computation."""
        return self.nodes.node_test_error(self.nodes.test_margins(w))

    def losses(self, models: PersonalModels, solver) -> np.ndarray:
        """F_k(v_k), eq. (6), for every node, from the slot values (``solver``: the problem's
        :class:`~fedviz.algorithms.dane.LocalNewton`, whose block matrix gives every node's margins)."""
        pb = self.problem
        with np.errstate(over="ignore", invalid="ignore"):  # a diverged model's loss is inf, said by the caller
            z = solver._B(models.slots)
            data_term = solver._rows(pb.loss.value(z, pb.y) * solver.row_weight)
            return data_term + 0.5 * pb.lam * models.sq_norms()

    def majority_errors(self) -> np.ndarray:
        """Each node's test error when it predicts its own majority training label (NaN without
        test rows; NaN everywhere for real-valued targets, scored by squared error, which have no majority)."""
        ds = self.problem.data
        K = ds.n_nodes
        if self.problem.error_metric != "error":
            return np.full(K, math.nan)
        known = self.test_node >= 0
        pred = node_majority_labels(ds)[self.test_node[known]]
        wrong = (pred != ds.y_test[known]).astype(np.float64)
        sums = np.bincount(self.test_node[known], weights=wrong, minlength=K)
        out = np.full(K, math.nan)
        np.divide(sums, self.nodes.test_counts, out=out, where=self.nodes.tested)
        return out

    def pooled(self, errors: np.ndarray) -> float:
        """The row-weighted mean of per-node errors: the test error over every test row of a node."""
        counts = self.nodes.test_counts
        ok = self.nodes.tested & np.isfinite(errors)
        total = counts[ok].sum()
        return float((errors[ok] * counts[ok]).sum() / total) if total > 0 else math.nan
