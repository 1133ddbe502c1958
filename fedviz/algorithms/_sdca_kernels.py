"""Numerical kernels of the dual family: CoCoA+/CoCoA's local SDCA and the Appendix's exact block solves.

This module owns

* :func:`sdca_step`: one exact coordinate maximisation of the CoCoA+ local subproblem
  G_k^{σ'} (Ma et al. 2015, eq. 9) for the squared loss and the smoothed hinge (closed
  forms) and the logistic loss (Newton's method on a convex reformulation, since its
  conjugate has no closed-form prox);
* :func:`cocoa_local_sdca`: local SDCA over one batch of nodes, the nodes spread over
  the cores in fixed chunks balanced by work (:mod:`._batches`), each chunk adding its
  nodes' Δw_k into its own accumulator (:func:`cocoa_local_sdca_serial`: the same on one
  thread, for small problems);
* :func:`node_permutations`: the per-node random visiting orders (Fisher–Yates driven
  by SplitMix64 from one seed per node, so a node's order does not depend on which
  thread runs it, and a test can regenerate it);
* :class:`NodeBlocks`: the exact per-node linear solves with I + τ X_kᵀX_k of the
  Appendix's Algorithms 5 and 6, factored once in whichever of the two push-through
  forms is smaller.

Notation: the paper's X is d × n with examples as columns; here ``X`` is the n × d CSR
matrix of the data set, so the paper's X_k h_k is ``X[rows_k].T @ h_k``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from ..data.dataset import NodeSupport
from ..problems._compiled import LOGISTIC, SMOOTHED_HINGE, SQUARED

#: The losses :func:`sdca_step` has a coordinate step for (a closed form or a Newton solve on the
#: conjugate): the dual methods CoCoA and CoCoA+ take these only.
DUAL_LOSSES = ("logistic", "squared", "smoothed-hinge")


# Bounds that keep b = α_i y_i strictly inside (0, 1) in floating point for the logistic
# loss (see :func:`_logistic_dual_b`): u = min(b, 1 − b) ≥ e^V_MIN_LOW ≈ 3e-308 when
# b < 1/2, and ≥ 2^-53 (so that 1 − u < 1) when b > 1/2.  They only bite for margins
# beyond about ±36, where the loss is flat to machine precision.
V_MIN_LOW = -708.0
V_MIN_HIGH = math.log(2.0 ** -53)
_LOG_HALF = math.log(0.5)


# ---------------------------------------------------------------------------------------
# One coordinate step
# ---------------------------------------------------------------------------------------
@numba.njit(cache=True, nogil=True, error_model="numpy")
def _logistic_dual_b(s, q, b0):
    """The maximiser b ∈ (0, 1) of −b log b − (1−b) log(1−b) − s(b − b0) − (q/2)(b − b0)².

    It is the root of the increasing G(b) = log(b/(1−b)) + s + q(b − b0).  The sign of
    G(1/2) says which half holds it; there we write the smaller of b and 1 − b as
    u = e^v, v ≤ log(1/2), and solve

        H(v) = v − log(1 − e^v) + c + q e^v = 0,
        c = s − q b0 (root below 1/2)  or  c = −s − q(1 − b0) (above 1/2),

    a convex increasing function of v (H'' = u/(1−u)² + qu > 0).  Every tangent lies
    below H, so a Newton step from any point lands right of the root, and from there
    the iterates decrease monotonically to it, with no bracket and no domain issue (v is
    unbounded below).  We start at the current value u0 of b0 when it is in the same
    half (a warm start; later passes start next to the root), else at
    v_max = min(log(1/2), −c), which is right of the root (H ≥ 0 there) and from which
    about log(q) + 5 steps suffice; a step beyond v_max is cut back to it.  The loop
    stops when a step no longer moves v beyond rounding, or when H, approached from the
    right, is no longer positive.  Working with u = min(b, 1−b) keeps full relative
    precision on both sides (the idea of Yu, Huang & Lin 2011, "Dual coordinate descent
    methods for logistic regression", here in log coordinates).
    """
    upper = s + q * (0.5 - b0) < 0.0
    c = -s - q * (1.0 - b0) if upper else s - q * b0
    v_max = min(_LOG_HALF, -c)
    u0 = 1.0 - b0 if upper else b0
    v = math.log(u0) if 0.0 < u0 <= 0.5 else v_max
    for it in range(200):
        u = math.exp(v)
        H = v - math.log1p(-u) + c + q * u
        if H == 0.0 or (H < 0.0 and it > 0):
            break
        step = H / (1.0 / (1.0 - u) + q * u)
        v = min(v - step, v_max)
        if abs(step) <= 4e-16 * (1.0 + abs(v)):
            break
    if upper:
        return 1.0 - math.exp(max(v, V_MIN_HIGH))
    return math.exp(max(v, V_MIN_LOW))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def sdca_step(loss, a, z, y, q, smoothing):
    """The maximiser a⁺ = a + δ of −φ*(−(a + δ)) − z δ − (q/2) δ² over δ.

    This is n times the change of the CoCoA+ local subproblem G_k^{σ'} along coordinate
    i, with ``a`` = α_i + Δα_i (the local trial value), ``z`` = x_iᵀ(w + σ'Δw_k) and
    ``q`` = σ'‖x_i‖²/(λn).  ``smoothing`` is the smoothed hinge's γ (unused otherwise).

    * squared, φ*(−α) = α²/2 − αy:  δ = (y − z − a)/(1 + q);
    * smoothed hinge, b = αy ∈ [0, 1], φ*(−α) = −b + (γ/2)b²:
      b⁺ = clip((1 − yz + q b)/(γ + q), 0, 1) (Shalev-Shwartz & Zhang 2013);
    * logistic, b = αy ∈ (0, 1), φ*(−α) = b log b + (1−b) log(1−b): a Newton solve,
      :func:`_logistic_dual_b`.

    Any other loss code gives NaN (the dual methods take only :data:`DUAL_LOSSES`).

    The new value itself is returned, not δ: for the two classification losses it is
    y·b⁺ exactly, so a b⁺ far below the old b (say 1e-30 after 0.5) is not lost to
    cancellation in a + δ and the iterate stays strictly inside the domain.
    """
    if loss == SQUARED:
        return a + (y - z - a) / (1.0 + q)
    b0 = a * y
    if loss == SMOOTHED_HINGE:
        b = (1.0 - z * y + q * b0) / (smoothing + q)
        b = min(max(b, 0.0), 1.0)
    elif loss == LOGISTIC:
        b = _logistic_dual_b(z * y, q, b0)
    else:  # a loss without a dual step here: NaN, never another loss's step (see fedviz.problems._compiled)
        return math.nan
    return y * b


# ---------------------------------------------------------------------------------------
# Random visiting orders
# ---------------------------------------------------------------------------------------
@numba.njit(cache=True, nogil=True, error_model="numpy")
def _splitmix64(state):
    """One SplitMix64 step (Steele, Lea & Flood 2014): returns (new state, 64 random bits)."""
    state = state + np.uint64(0x9E3779B97F4A7C15)
    z = state
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return state, z ^ (z >> np.uint64(31))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _shuffle_identity(perm, m, state):
    """Fill ``perm[:m]`` with a uniformly random permutation of 0..m−1 (Fisher–Yates)."""
    for r in range(m):
        perm[r] = r
    for r in range(m - 1, 0, -1):
        state, bits = _splitmix64(state)
        # 53 random bits scaled to [0, r]: the bias is below 2^-40 for any node size.
        j = int((bits >> np.uint64(11)) * (1.0 / 9007199254740992.0) * (r + 1))
        tmp = perm[r]
        perm[r] = perm[j]
        perm[j] = tmp
    return state


@numba.njit(cache=True, nogil=True, error_model="numpy")
def node_permutations(seed, m, passes):
    """The ``passes`` visiting orders (rows of a (passes, m) array) a node with seed ``seed`` uses."""
    out = np.empty((passes, m), dtype=np.int64)
    state = np.uint64(seed)
    for p in range(passes):
        state = _shuffle_identity(out[p], m, state)
    return out


# ---------------------------------------------------------------------------------------
# CoCoA+ local solver
# ---------------------------------------------------------------------------------------
class DualData(NamedTuple):
    """What local SDCA reads of the problem, fixed per problem."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    y: np.ndarray
    sqnorm: np.ndarray     #: ‖x_i‖²
    offsets: np.ndarray    #: node row boundaries
    loss: int              #: the loss code (:mod:`fedviz.problems._compiled`)
    smoothing: float       #: the smoothed hinge's γ (1 for the other losses)


class LocalRule(NamedTuple):
    """The scalars of a CoCoA(+) round."""

    passes: int            #: local SDCA passes per node
    sigma_p: float         #: σ', the subproblem's quadratic weight
    aggregation: float     #: the aggregation weight (CoCoA+'s γ: 1 adding, 1/K averaging)
    lam_n: float           #: λn


class DualScratch(NamedTuple):
    """Per-chunk accumulators and scratch (first axis: the chunk)."""

    acc: np.ndarray        #: chunks × d, the aggregated Δw
    dw: np.ndarray         #: chunks × d, zero between nodes
    a_loc: np.ndarray      #: chunks × max n_k
    perm: np.ndarray       #: chunks × max n_k, int64


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _sdca_nodes(dd, rule, z0, alpha, seeds, k0, k1, acc, dw, a_loc, perm):
    """Nodes k0..k1−1 of one chunk, serially; see :func:`cocoa_local_sdca`."""
    indptr, indices, data, y, sqnorm, offsets = dd.indptr, dd.indices, dd.data, dd.y, dd.sqnorm, dd.offsets
    loss, smoothing = dd.loss, dd.smoothing
    passes, sigma_p, agg, lam_n = rule.passes, rule.sigma_p, rule.aggregation, rule.lam_n
    q_scale = sigma_p / lam_n  # q = σ'‖x_i‖²/(λn)
    inv_lam_n = 1.0 / lam_n
    for k in range(k0, k1):
        lo = offsets[k]
        m = offsets[k + 1] - lo
        for r in range(m):
            a_loc[r] = alpha[lo + r]
        state = np.uint64(seeds[k])
        for _ in range(passes):
            state = _shuffle_identity(perm, m, state)
            for r0 in range(m):
                r = perm[r0]
                i = lo + r
                z = 0.0
                for e in range(indptr[i], indptr[i + 1]):
                    z += data[e] * dw[indices[e]]
                z = z0[i] + sigma_p * z
                a_old = a_loc[r]
                a_new = sdca_step(loss, a_old, z, y[i], q_scale * sqnorm[i], smoothing)
                if a_new != a_old:
                    a_loc[r] = a_new
                    s = (a_new - a_old) * inv_lam_n
                    for e in range(indptr[i], indptr[i + 1]):
                        dw[indices[e]] += s * data[e]
        for r in range(m):
            i = lo + r
            # α + γ(α_loc − α) as a convex combination: exact for γ = 1, and inside the
            # (convex) domain whenever both ends are.
            alpha[i] = (1.0 - agg) * alpha[i] + agg * a_loc[r]
            for e in range(indptr[i], indptr[i + 1]):
                j = indices[e]
                v = dw[j]
                if v != 0.0:
                    acc[j] += agg * v
                    dw[j] = 0.0


@numba.njit(parallel=True, cache=True, nogil=True, error_model="numpy")
def cocoa_local_sdca(dd, rule, z0, alpha, seeds, lo, hi, scratch):
    """Local SDCA on nodes ``lo[c] .. hi[c] − 1`` of every chunk c, then the aggregation weight
    ``rule.aggregation`` (CoCoA+'s γ) applied.

    Node k makes ``rule.passes`` passes over its rows, each in a fresh random order
    (:func:`node_permutations` of ``seeds[k]``), maximising G_k^{σ'} one coordinate at a
    time (:func:`sdca_step`).  It keeps the trial values α_[k] + Δα_[k] in ``a_loc[c]`` and
    Δw_k = (1/(λn)) X_kᵀΔα_[k] in the dense scratch ``dw[c]``; the margin x_iᵀ(w + σ'Δw_k)
    is ``z0[i]`` (= x_iᵀw) plus σ' x_iᵀΔw_k, so a step costs O(nnz of row i).  At the end
    of the node, α_[k] += γΔα_[k] (in place in ``alpha``), γΔw_k is added to the chunk's
    accumulator ``acc[c]``, and the touched entries of ``dw[c]`` are reset to zero —
    O(nnz_k) — so ``dw`` is never cleared densely (``scratch``: :class:`DualScratch`).
    """
    # The bundle's arrays are taken out before the parallel loop: numba 0.68 loses writes
    # made inside a prange to an array read from a tuple's field there.
    acc, dw, a_loc, perm = scratch.acc, scratch.dw, scratch.a_loc, scratch.perm
    for c in numba.prange(lo.shape[0]):
        _sdca_nodes(dd, rule, z0, alpha, seeds, lo[c], hi[c], acc[c], dw[c], a_loc[c], perm[c])


@numba.njit(cache=True, nogil=True, error_model="numpy")
def cocoa_local_sdca_serial(dd, rule, z0, alpha, seeds, lo, hi, scratch):
    """:func:`cocoa_local_sdca` on the calling thread, every chunk in turn (for small problems)."""
    for c in range(lo.shape[0]):
        _sdca_nodes(dd, rule, z0, alpha, seeds, lo[c], hi[c], scratch.acc[c], scratch.dw[c],
                    scratch.a_loc[c], scratch.perm[c])


# ---------------------------------------------------------------------------------------
# Exact block solves of the Appendix (Algorithms 5 and 6, ridge regression)
# ---------------------------------------------------------------------------------------
#: Matrices up to this size are factored by one LAPACK call (about 5 ms); larger
#: ones panel by panel, FACTOR_TILE columns at a time, with Stop checked in between.
DIRECT_MAX = 512
#: The node factors :class:`NodeBlocks` keeps between iterations, in bytes (beyond it, refactored on use).
FACTOR_CACHE_BYTES = 256 * 2**20
FACTOR_TILE = 256


def _never() -> None:
    """A Stop check that never stops."""


def _cholesky_tiled(M: np.ndarray, tile: int, between) -> np.ndarray:
    """The lower Cholesky factor of the SPD matrix M, in place in its lower triangle.

    The right-looking blocked algorithm (Golub & Van Loan, Algorithm 4.2.4): factor a
    diagonal block, solve for the panel below it, subtract the panel's outer product from
    the trailing matrix one column strip at a time.  Every piece costs at most
    2 · size · tile² flops (about 50 ms for the paper's largest node), and ``between`` is
    called after each.  The upper triangle is left with stale values, as LAPACK's potrf
    leaves it; ``cho_solve`` reads the lower one only.
    """
    size = M.shape[0]
    for j0 in range(0, size, tile):
        j1 = min(j0 + tile, size)
        L11 = sla.cholesky(M[j0:j1, j0:j1], lower=True, check_finite=False)
        M[j0:j1, j0:j1] = L11
        if j1 == size:
            break
        # L21 = A21 L11⁻ᵀ.
        M[j1:, j0:j1] = sla.solve_triangular(L11, M[j1:, j0:j1].T, lower=True,
                                             check_finite=False).T
        between()
        L21 = M[j1:, j0:j1]
        for c0 in range(j1, size, tile):
            c1 = min(c0 + tile, size)
            M[c0:, c0:c1] -= L21[c0 - j1:] @ L21[c0 - j1:c1 - j1].T
            between()
    return M


class NodeBlocks:
    """Per-node solves with M_k = I + τ A_k A_kᵀ (size n_k) and N_k = I + τ A_kᵀA_k (size m_k).

    A_k is node k's block of rows restricted to the m_k features that occur on the node
    (its support S_k; off S_k both systems are the identity).  The two are linked by
    push-through, (I + τAᵀA)⁻¹ = I − τAᵀ(I + τAAᵀ)⁻¹A, so only the smaller of M_k and
    N_k is factored (Cholesky; both are symmetric positive definite with eigenvalues ≥ 1,
    so the factorisation is stable).  Algorithm 6's block step (eq. 19) needs M_k⁻¹ and
    Algorithm 5's local ridge problem, written in the step δ = w − w^t on S_k, needs
    N_k⁻¹ (the Woodbury/dual form when n_k < m_k).

    The blocks A_k are kept side by side as one block-diagonal n × Σm_k matrix B =
    Diag(A_1, ..., A_K), so the products of all nodes at once (B v, Bᵀ v) are single
    sparse products, and the per-node Python work is one triangular solve pair.
    Vectors over the supports are concatenated in the order of ``support_indices``.

    Factors are cached up to ``budget_bytes`` in total; nodes beyond the budget are
    refactored on each use (slower, equally exact).

    Parameters
    ----------
    support : NodeSupport
        The data set's node × feature support (:attr:`FederatedDataset.support
        <fedviz.data.dataset.FederatedDataset.support>`): the rows, grouped by node, and S_k.
    tau : float
        τ = σ/(λn).
    """

    def __init__(self, support: NodeSupport, tau: float, *, budget_bytes: int | None = None):
        self.tau = float(tau)
        self.offsets = support.offsets
        self.K = len(self.offsets) - 1
        # The support S_k of every node (sorted); B's columns are its slots.
        self.support_indptr = support.ptr
        self.support_indices = support.col
        self.B = support.block_matrix()
        self.BT = self.B.T.tocsr()
        sizes = np.diff(self.offsets)
        #: Nodes solved through M_k (n_k ≤ m_k) rather than N_k.
        self.row_form = sizes <= np.diff(self.support_indptr)
        self._budget = int(FACTOR_CACHE_BYTES if budget_bytes is None else budget_bytes)
        self._used = 0
        self._cache: dict[int, tuple] = {}

    def support(self, k: int) -> np.ndarray:
        """S_k: the features occurring on node k (sorted)."""
        return self.support_indices[self.support_indptr[k]:self.support_indptr[k + 1]]

    def block(self, k: int) -> sp.csr_matrix:
        """A_k: node k's rows on its support, n_k × m_k."""
        lo, hi = self.offsets[k], self.offsets[k + 1]
        return self.B[lo:hi, self.support_indptr[k]:self.support_indptr[k + 1]]

    def node_products(self, v: np.ndarray) -> np.ndarray:
        """A_kᵀ v_k for every node k at once (v of length n), concatenated over the supports."""
        return self.BT @ v

    def _factor(self, k: int, between=_never):
        """The Cholesky factor of node k's smaller matrix, (c, lower) as ``cho_factor`` gives it.

        ``between`` (a Stop check) is called between the pieces of a large node's work, so
        no piece takes long: the biggest node of the paper's scale has a 9000 × 9000 matrix,
        whose factorisation is 240 GFlop.
        """
        fac = self._cache.get(k)
        if fac is not None:
            return fac
        A = self.block(k)
        F = A if self.row_form[k] else A.T.tocsr()
        FT = F.T.tocsr()
        size = F.shape[0]
        # τ F Fᵀ + I, a block of rows at a time: a sparse product computes every row on its
        # own, so the blocks give bitwise the one product's rows.
        M = np.empty((size, size))
        for r0 in range(0, size, FACTOR_TILE):
            r1 = min(r0 + FACTOR_TILE, size)
            M[r0:r1] = self.tau * (F[r0:r1] @ FT).toarray()
            if size > FACTOR_TILE:
                between()
        M[np.diag_indices_from(M)] += 1.0
        if size <= DIRECT_MAX:
            fac = sla.cho_factor(M, lower=True, check_finite=False)
        else:
            fac = (_cholesky_tiled(M, FACTOR_TILE, between), True)
        if self._used + M.nbytes <= self._budget:
            self._cache[k] = fac
            self._used += M.nbytes
        return fac

    def _node_solves(self, form_rows: bool, v: np.ndarray, ptr: np.ndarray, between) -> np.ndarray:
        """u with u_k = (factored matrix of node k)⁻¹ v_k on the nodes of the given form, 0 elsewhere."""
        u = np.zeros_like(v)
        for k in np.flatnonzero(self.row_form == form_rows):
            s = slice(ptr[k], ptr[k + 1])
            u[s] = sla.cho_solve(self._factor(k, between), v[s], check_finite=False)
            between()
        return u

    def solve_rows(self, c: np.ndarray, between=None) -> np.ndarray:
        """h with h_k = (I + τ A_k A_kᵀ)⁻¹ c_k for every node (c of length n): the dual block step.

        ``between`` (e.g. a Stop check) is called after every node, and inside a large
        node's factorisation.
        """
        between = between or _never
        h = self._node_solves(True, c, self.offsets, between)
        # N-form nodes: h_k = c_k − τ A_k N_k⁻¹ A_kᵀ c_k (zero slots of u leave other nodes alone).
        Btc = self.BT @ c
        between()
        u = self._node_solves(False, Btc, self.support_indptr, between)
        h_cols = c - self.tau * (self.B @ u)
        between()
        return np.where(np.repeat(self.row_form, np.diff(self.offsets)), h, h_cols)

    def solve_cols(self, r: np.ndarray, between=None) -> np.ndarray:
        """δ with δ_k = (I + τ A_kᵀA_k)⁻¹ r_k for every node (r over the supports): the
        primal local step.  ``between`` as for :meth:`solve_rows`."""
        between = between or _never
        delta = self._node_solves(False, r, self.support_indptr, between)
        # M-form nodes: δ_k = r_k − τ A_kᵀ M_k⁻¹ A_k r_k.
        Br = self.B @ r
        between()
        u = self._node_solves(True, Br, self.offsets, between)
        delta_rows = r - self.tau * (self.BT @ u)
        between()
        return np.where(np.repeat(self.row_form, np.diff(self.support_indptr)), delta_rows, delta)
