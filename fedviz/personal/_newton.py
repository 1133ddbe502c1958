"""Every node's proximal subproblem solved by its own Newton-CG, nodes in parallel (C = 1 models).

Minimises, for every node k at once but independently,

    Φ_k(v) = F_k(v) + (μ/2)‖v − c_k‖²,   F_k(v) = (1/n_k) Σ_{i ∈ P_k} φ(x_iᵀv; y_i) + (λ/2)‖v‖²  (eq. (6)),

on the node's support (slot space, as :class:`~fedviz.algorithms.dane.LocalNewton`), by the same
method as that solver: truncated Newton (Nocedal & Wright, Algorithm 7.1) with CG on
H_k = (1/n_k) X_kᵀ Diag(φ'') X_k + (λ + μ)I, the forcing term min(0.1, √(‖g‖/‖g_0‖))·‖g‖,
Armijo backtracking blind to changes below f's rounding, and the stop ‖∇Φ_k‖ ≤ rtol·‖∇Φ_k(start)‖.
φ, φ' and φ'' are the compiled trio's (:mod:`fedviz.problems._compiled`), the kernels' one definition.

Why not LocalNewton itself: it runs the nodes in lockstep, every operation a pass over all K
nodes' data, so every node pays for the slowest node's CG iterations.  The Local problem
(μ = 0, λ = 1/n) is the worst conditioned a node has, and at the paper's scale (10,000 nodes,
13M support slots) lockstep took over a minute.  Here each thread takes whole nodes: a node's
rows (hundreds, in cache) are visited only for its own iterations, and a node that has
converged costs nothing more.  The tests check both solvers against each other and SciPy.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import prange

from ..problems._compiled import SQUARED, check_code, d2phi, dphi, phi

MAX_NEWTON = 100
MAX_CG = 1000


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _margins(indptr, indices, data, r0, r1, s0, v, out):
    for i in range(r0, r1):
        acc = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            acc += data[p] * v[indices[p] - s0]
        out[i - r0] = acc


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _rmatvec(indptr, indices, data, r0, r1, s0, u, out):
    out[:] = 0.0
    for i in range(r0, r1):
        ui = u[i - r0]
        if ui != 0.0:
            for p in range(indptr[i], indptr[i + 1]):
                out[indices[p] - s0] += data[p] * ui


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _value(code, gamma, y, r0, z, v, c, lam, mu, inv_n):
    s = 0.0
    for i in range(z.size):
        s += phi(code, z[i], y[r0 + i], gamma)
    q = 0.0
    for j in range(v.size):
        q += 0.5 * lam * v[j] * v[j]
        if mu != 0.0:
            dj = v[j] - c[j]
            q += 0.5 * mu * dj * dj
    return s * inv_n + q


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _grad(indptr, indices, data, y, r0, r1, s0, code, gamma, lam, mu, c, v, z, inv_n, u, g):
    """g = ∇Φ_k(v) from the margins z (u: work space); returns ‖g‖."""
    for i in range(r1 - r0):
        u[i] = dphi(code, z[i], y[r0 + i], gamma) * inv_n
    _rmatvec(indptr, indices, data, r0, r1, s0, u, g)
    gg = 0.0
    for j in range(g.size):
        g[j] += lam * v[j]
        if mu != 0.0:
            g[j] += mu * (v[j] - c[j])
        gg += g[j] * g[j]
    return math.sqrt(gg)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _solve_node(indptr, indices, data, y, r0, r1, s0, s1, code, gamma, lam, mu, c, v, rtol):
    """Newton-CG on one node, in place on ``v``; returns (Newton iterations, ‖g‖/‖g_0‖, CG iterations)."""
    n_k = r1 - r0
    m = s1 - s0
    inv_n = 1.0 / n_k
    shift = lam + mu
    z = np.empty(n_k)
    u = np.empty(n_k)
    D = np.empty(n_k)
    g = np.empty(m)
    x = np.empty(m)
    r = np.empty(m)
    p = np.empty(m)
    Hp = np.empty(m)
    v_new = np.empty(m)
    z_new = np.empty(n_k)
    Bx = np.empty(n_k)
    _margins(indptr, indices, data, r0, r1, s0, v, z)
    gn = _grad(indptr, indices, data, y, r0, r1, s0, code, gamma, lam, mu, c, v, z, inv_n, u, g)
    gn0 = gn if gn > 0.0 else 1.0
    target = rtol * gn
    quadratic = code == SQUARED
    newton = 0
    cg_total = 0
    while gn > target and newton < MAX_NEWTON:
        for i in range(n_k):
            D[i] = d2phi(code, z[i], y[r0 + i], gamma) * inv_n
        forcing = target if quadratic else min(0.1, math.sqrt(gn / gn0)) * gn
        rr = 0.0
        for j in range(m):
            x[j] = 0.0
            r[j] = -g[j]
            p[j] = r[j]
            rr += r[j] * r[j]
        for _ in range(MAX_CG):
            if math.sqrt(rr) <= forcing:
                break
            _margins(indptr, indices, data, r0, r1, s0, p, u)
            for i in range(n_k):
                u[i] *= D[i]
            _rmatvec(indptr, indices, data, r0, r1, s0, u, Hp)
            php = 0.0
            for j in range(m):
                Hp[j] += shift * p[j]
                php += p[j] * Hp[j]
            alpha = rr / php
            rr_new = 0.0
            for j in range(m):
                x[j] += alpha * p[j]
                r[j] -= alpha * Hp[j]
                rr_new += r[j] * r[j]
            beta = rr_new / rr
            for j in range(m):
                p[j] = r[j] + beta * p[j]
            rr = rr_new
            cg_total += 1
        # Armijo backtracking along x, blind to changes below the rounding of Φ_k.
        f0 = _value(code, gamma, y, r0, z, v, c, lam, mu, inv_n)
        slack = 1e-13 * (abs(f0) + 1.0)
        slope = 0.0
        for j in range(m):
            slope += g[j] * x[j]
        _margins(indptr, indices, data, r0, r1, s0, x, Bx)
        t = 1.0
        for _ in range(60):
            for j in range(m):
                v_new[j] = v[j] + t * x[j]
            for i in range(n_k):
                z_new[i] = z[i] + t * Bx[i]
            f_new = _value(code, gamma, y, r0, z_new, v_new, c, lam, mu, inv_n)
            if not (f_new > f0 + 1e-4 * t * slope + slack and t > 1e-12):
                break
            t *= 0.5
        v[:] = v_new
        z[:] = z_new
        gn = _grad(indptr, indices, data, y, r0, r1, s0, code, gamma, lam, mu, c, v, z, inv_n, u, g)
        newton += 1
    return newton, gn / gn0, cg_total


@numba.njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def _solve_nodes(indptr, indices, data, y, row_ptr, slot_ptr, nodes, code, gamma, lam, mu, center, v, rtol,
                 newton, residual, cg):
    for t in prange(nodes.size):
        k = nodes[t]
        s0, s1 = slot_ptr[k], slot_ptr[k + 1]
        it, res, c = _solve_node(indptr, indices, data, y, row_ptr[k], row_ptr[k + 1], s0, s1, code, gamma,
                                 lam, mu, center[s0:s1], v[s0:s1], rtol)
        newton[k] = it
        residual[k] = res
        cg[k] = c


def solve_nodes(B, y, row_ptr, slot_ptr, code, gamma, lam, mu, center, start, rtol, check_stop=None,
                chunks: int = 8):
    """Every node's minimiser in slot space (see the module docstring), ``chunks`` groups of nodes
    between two calls of ``check_stop``.  Returns (v, Newton iterations per node, residual per node,
    CG iterations per node).

    The nodes are dealt to the threads largest first in round-robin order within each group, so
    that one thread does not end with all the large nodes (numba splits a range statically).
    """
    code = check_code(code)  # the kernels' dispatch gives NaN for an unknown code: refuse it here
    K = row_ptr.size - 1
    v = np.array(start, dtype=np.float64)
    center = np.ascontiguousarray(center, dtype=np.float64)
    newton = np.zeros(K, dtype=np.int64)
    residual = np.zeros(K)
    cg = np.zeros(K, dtype=np.int64)
    indptr = np.ascontiguousarray(B.indptr, dtype=np.int64)
    indices = np.ascontiguousarray(B.indices, dtype=np.int64)
    data = np.ascontiguousarray(B.data, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    row_ptr = np.ascontiguousarray(row_ptr, dtype=np.int64)
    slot_ptr = np.ascontiguousarray(slot_ptr, dtype=np.int64)
    order = np.argsort(-(np.diff(row_ptr) + np.diff(slot_ptr)), kind="stable")
    threads = max(1, numba.get_num_threads())
    for group in np.array_split(order, max(1, min(chunks, K))):
        if check_stop is not None:
            check_stop()
        # Interleave: thread t of a static split gets every threads-th node of the sorted group.
        inter = np.concatenate([group[i::threads] for i in range(threads)]) if group.size else group
        _solve_nodes(indptr, indices, data, y, row_ptr, slot_ptr, inter.astype(np.int64), code, gamma,
                     float(lam), float(mu), center, v, float(rtol), newton, residual, cg)
    return v, newton, residual, cg
