"""Every node's proximal subproblem of a softmax model (C > 1) solved by Newton's method with the
node's dense Hessian, node by node.

Minimises, for every node k independently,

    Φ_k(v) = F_k(v) + (μ/2)‖v − c_k‖²,   F_k(v) = (1/n_k) Σ_{i ∈ P_k} φ(x_iᵀV) + (λ/2)‖v‖²  (eq. (6)),

φ the softmax loss (issue 22), on the node's support in slot space (C values per support feature,
the layout of :class:`~fedviz.algorithms.dane.LocalNewtonSoftmax`).  Each Newton system is solved
exactly: the Hessian

    H_k = (1/n_k) Σ_i (x_i x_iᵀ) ⊗ (diag p_i − p_i p_iᵀ) + (λ + μ)I

is formed as the class-diagonal blocks X_kᵀ diag(p_c) X_k minus Y_kᵀY_k with the rows x_i ⊗ p_i
of Y_k (one BLAS rank-k update), as :func:`fedviz.problems.optimum._dense_newton_direction` does for
the global problem, factored by Cholesky (positive definite: λ + μ > 0) and inverted from the factor.
The next Newton steps, and the node's next solve (the next λ_D of a Ditto path, a nearby v and μ),
first run CG on the exact Hessian preconditioned by that inverse: a few Hessian products instead of
forming and factoring H_k again, which they do only when CG stalls.  Then an Armijo backtracking
line search, blind to changes below Φ_k's rounding, and the stop ‖∇Φ_k‖ ≤ rtol·‖∇Φ_k(start)‖ — the
line search and test of :class:`~fedviz.algorithms.dane.LocalNewton` — or a step that no longer
changes v in floating point (the gradient's rounding floor, reached at very large μ).

Why: the lockstep Newton-CG (LocalNewtonSoftmax) needs hundreds of CG iterations per Newton step
on a softmax Hessian (it is only λ along W + u1ᵀ, which CG sees last) and makes every node wait
for the slowest; FedProx's Synthetic(1, 1) (30 nodes, dC = 610) took 45–52 s for the Local models
alone, the λ_D path 46 s.  A node's Hessian there is 610 × 610: milliseconds to form and factor.  Problems
whose nodes are too large for that (:func:`dense_ok`) keep the lockstep solver.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import blas, lapack

from ..errors import FedvizError

MAX_NEWTON = 100
#: CG iterations with an earlier Hessian's factor as preconditioner before the Hessian is refactored.
MAX_PCG = 20
#: At most this many slots a Newton step always forms and factors the Hessian (exact Newton): for
#: a small node that costs less than the Python overhead of CG's iterations.
DIRECT_MAX_SLOTS = 256
#: A node's slot space (support features × C) above which its Hessian is not formed (8 m² bytes:
#: 32 MB at 2,000; a Cholesky of m³/3 multiply-adds, 2.7e9).
DENSE_MAX_SLOTS = 2000
#: The most values of the nodes' inverse Hessians kept from one solve to the next (8 bytes each).
KEPT_MAX_VALUES = 5e7
#: The most multiply-adds one Newton step over all nodes may take, Σ_k n_k m_k² + m_k³/3 (forming
#: and factoring every node's Hessian); the optimum's limit for its one dense Hessian.
DENSE_MAX_WORK = 2e10


def dense_ok(row_ptr: np.ndarray, slot_ptr: np.ndarray, C: int) -> bool:
    """Whether every node's Newton systems are solved with its dense Hessian (see the module)."""
    n_k = np.diff(row_ptr).astype(np.float64)
    m_k = np.diff(slot_ptr).astype(np.float64) * C
    if m_k.size == 0:
        return True
    return bool(m_k.max() <= DENSE_MAX_SLOTS and float(np.sum(n_k * m_k ** 2 + m_k ** 3 / 3)) <= DENSE_MAX_WORK)


class DenseSoftmaxNodes:
    """Each node's rows densified in its slot space once, for every solve of one problem."""

    def __init__(self, B, y, row_ptr, slot_ptr, C: int, lam: float):
        self.C = int(C)
        self.lam = float(lam)
        self.row_ptr = np.asarray(row_ptr, dtype=np.int64)
        self.slot_ptr = np.asarray(slot_ptr, dtype=np.int64)
        B = B.tocsr()
        self.X = []
        self.Y = []
        codes = np.asarray(y).astype(np.intp)
        for k in range(self.row_ptr.size - 1):
            r0, r1 = self.row_ptr[k], self.row_ptr[k + 1]
            s0, s1 = self.slot_ptr[k], self.slot_ptr[k + 1]
            self.X.append(np.ascontiguousarray(B[r0:r1, s0:s1].toarray()))
            self.Y.append(codes[r0:r1])
        #: Each node's last inverse Hessian, the preconditioner of its next solve's first Newton
        #: steps; kept between solves only while all of them fit in :data:`KEPT_MAX_VALUES`.
        self.factors = [None] * (self.row_ptr.size - 1)
        m_k = np.diff(self.slot_ptr).astype(np.float64) * self.C
        self.keep = float(np.sum(m_k ** 2)) <= KEPT_MAX_VALUES

    def solve(self, start, center, mu, rtol, check_stop=None):
        """Every node's minimiser of Φ_k in slot space (C values per slot, node after node) from
        ``start``; returns (v, Newton iterations per node, ‖∇Φ_k‖/‖∇Φ_k(start)‖ per node)."""
        C = self.C
        K = self.row_ptr.size - 1
        v = np.array(start, dtype=np.float64)
        center = np.asarray(center, dtype=np.float64)
        newton = np.zeros(K, dtype=np.int64)
        residual = np.zeros(K)
        for k in range(K):
            if check_stop is not None:
                check_stop()
            a, b = self.slot_ptr[k] * C, self.slot_ptr[k + 1] * C
            if b == a or self.X[k].shape[0] == 0:
                # No support or no rows: Φ_k is (λ/2)‖v‖² + (μ/2)‖v − c‖², minimised in closed form.
                lm = self.lam + mu
                v[a:b] = mu * center[a:b] / lm if lm > 0 else 0.0
                continue
            v[a:b], newton[k], residual[k], factor = _solve_node(
                self.X[k], self.Y[k], C, self.lam, float(mu), center[a:b], v[a:b], float(rtol), self.factors[k],
                check_stop)
            if self.keep:
                self.factors[k] = factor
        return v, newton, residual


def _softmax_parts(Z, y):
    """Σ_i φ_i, the probabilities P and P − E_y at the margins Z (n_k × C)."""
    m = Z.max(axis=1, keepdims=True)
    E = np.exp(Z - m)
    s = E.sum(axis=1, keepdims=True)
    P = E / s
    rows = np.arange(Z.shape[0])
    total = float(np.sum(m[:, 0] + np.log(s[:, 0]) - Z[rows, y]))
    D = P.copy()
    D[rows, y] -= 1.0
    return total, P, D


def _value(Z, y, v, c, lam, mu, inv_n):
    m = Z.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(Z - m).sum(axis=1))
    total = float(np.sum(lse - Z[np.arange(Z.shape[0]), y]))
    q = 0.5 * lam * float(v @ v)
    if mu != 0.0:
        dv = v - c
        q += 0.5 * mu * float(dv @ dv)
    return total * inv_n + q


def _factor(X, P, C, inv_n, shift):
    """The inverse (its lower triangle, LAPACK's layout) of H = (1/n_k)[Σ_c X_kᵀ diag(p_c) X_k − Y_kᵀY_k]
    + shift·I, Y_k's rows x_i ⊗ p_i."""
    n_k, s = X.shape
    m = s * C
    Y = (X[:, :, None] * P[:, None, :]).reshape(n_k, m)
    # dsyrk returns a Fortran array with its lower triangle set; its transpose is a C-ordered
    # view (upper triangle set) that the symmetric additions below reshape without a copy.
    H = blas.dsyrk(-inv_n, Y, trans=1, lower=1)
    Hc = H.T
    H4 = Hc.reshape(s, C, s, C)
    for cc in range(C):
        H4[:, cc, :, cc] += (X.T @ (X * P[:, cc:cc + 1])) * inv_n
    diag = np.arange(m)
    Hc[diag, diag] += shift
    L, info = lapack.dpotrf(H, lower=1, overwrite_a=1, clean=0)
    if info == 0:
        # The inverse from the factor (2m³/3 more): applying it is one symmetric product, several
        # times faster than the two triangular solves, and CG applies it many times per factor.
        L, info = lapack.dpotri(L, lower=1, overwrite_c=1)
    if info != 0:
        raise FedvizError(f"a node's softmax Hessian is not positive definite (LAPACK dpotrf/dpotri info {info})")
    return L


def _hessp(X, P, C, inv_n, shift, u):
    """H u without forming H: (1/n_k) X_kᵀ[P ∘ U − P ∘ (P ∘ U)1] + shift·u, U = X_k u (n_k × C)."""
    s = X.shape[1]
    U = X @ u.reshape(s, C)
    PU = P * U
    R = PU - P * PU.sum(axis=1, keepdims=True)
    return (X.T @ R).reshape(-1) * inv_n + shift * u


def _pcg(X, P, C, inv_n, shift, L, b, tol):
    """CG on H x = b preconditioned by the inverse L of an earlier Hessian; returns x, or
    None when ‖Hx − b‖ ≤ tol is not reached in :data:`MAX_PCG` iterations (refactor then)."""
    x = np.zeros_like(b)
    r = b.copy()
    zv = blas.dsymv(1.0, L, r, lower=1)
    p = zv.copy()
    rz = float(r @ zv)
    for _ in range(MAX_PCG):
        if float(np.linalg.norm(r)) <= tol:
            return x
        Hp = _hessp(X, P, C, inv_n, shift, p)
        alpha = rz / float(p @ Hp)
        x += alpha * p
        r -= alpha * Hp
        zv = blas.dsymv(1.0, L, r, lower=1)
        rz_new = float(r @ zv)
        p = zv + (rz_new / rz) * p
        rz = rz_new
    return x if float(np.linalg.norm(r)) <= tol else None


def _solve_node(X, y, C, lam, mu, c, v0, rtol, L=None, check_stop=None):
    """Newton's method on one node (see the module); returns (v, Newton iterations, ‖g‖/‖g_0‖,
    the last inverse Hessian).

    A Newton step first tries CG preconditioned by the inverse ``L`` of an earlier Hessian of this
    node (the previous step's, or the previous solve's at a nearby v and μ): a few Hessian
    products, where forming and factoring H_k costs n_k m² + m³/3.  When that CG stalls the
    Hessian is formed and factored anew and the step solved with it exactly.
    """
    n_k, s = X.shape
    m = s * C
    inv_n = 1.0 / n_k
    shift = lam + mu
    v = np.array(v0, dtype=np.float64)
    Z = X @ v.reshape(s, C)

    def gradient(Z, v):
        _, P, D = _softmax_parts(Z, y)
        g = (X.T @ D).reshape(m) * inv_n + lam * v
        if mu != 0.0:
            g += mu * (v - c)
        return g, P

    g, P = gradient(Z, v)
    gn = float(np.linalg.norm(g))
    gn0 = gn if gn > 0.0 else 1.0
    target = rtol * gn
    newton = 0
    while gn > target and newton < MAX_NEWTON:
        if check_stop is not None:  # a large node's step takes a while: a page's Stop between steps
            check_stop()
        # Forcing term min(0.1, ‖g‖/‖g_0‖)·‖g‖: quadratic convergence (Nocedal & Wright, Thm 7.2);
        # tighter than LocalNewton's √ since a CG iteration here is cheap next to a Newton step.
        forcing = max(min(0.1, gn / gn0) * gn, 0.5 * target)
        p = None if L is None or m <= DIRECT_MAX_SLOTS else _pcg(X, P, C, inv_n, shift, L, -g, forcing)
        if p is None:
            L = _factor(X, P, C, inv_n, shift)
            p = blas.dsymv(-1.0, L, g, lower=1)
        # Armijo backtracking along p, blind to changes below the rounding of Φ_k.
        f0 = _value(Z, y, v, c, lam, mu, inv_n)
        slack = 1e-13 * (abs(f0) + 1.0)
        slope = float(g @ p)
        Xp = X @ p.reshape(s, C)
        t = 1.0
        for _ in range(60):
            v_new = v + t * p
            Z_new = Z + t * Xp
            f_new = _value(Z_new, y, v_new, c, lam, mu, inv_n)
            if not (f_new > f0 + 1e-4 * t * slope + slack and t > 1e-12):
                break
            t *= 0.5
        step = t * float(np.linalg.norm(p))
        v, Z = v_new, Z_new
        g, P = gradient(Z, v)
        gn = float(np.linalg.norm(g))
        newton += 1
        if not math.isfinite(gn):
            raise FedvizError("a node's softmax Newton iterate is not finite")
        if step <= 4e-16 * float(np.linalg.norm(v)):
            # The step no longer changes v in floating point: ‖∇Φ_k‖ is at its rounding floor (at
            # λ_D = 1e10 that is about ε·λ_D‖c‖, above rtol·‖∇Φ_k(start)‖).
            break
    return v, newton, gn / gn0, L
