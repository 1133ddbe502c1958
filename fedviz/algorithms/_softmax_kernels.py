"""Compiled per-example loops on the d × C model of softmax regression (issue 22, point 3).

The binary kernels (:mod:`._svrg_kernels`) move one weight per nonzero; these move the row of C
weights of the nonzero's feature, contiguous in the row-major model W (the layout the problem
owns, :class:`~fedviz.problems.objective.Problem`).  The regulariser λ‖W‖²_F is separable, so
the lazy catch-up of an untouched feature multiplies its whole row by the same factor as the
binary kernel's single weight.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import prange

from ..data.dataset import NodeSupport
from ._batches import CHUNKS, batch_target, plan
from ._local_sgd_kernels import LocalSGD, geometric_tables
from ._svrg_kernels import BATCH_WORK, _geom, _geom_table


@numba.njit(cache=True, nogil=True, error_model="numpy")
def sgd_epoch_softmax(indptr, indices, data, y, W, samples, h, lam, last, cum, t0, t1, p):
    """Steps ``t0 .. t1 − 1`` of an epoch of plain SGD on softmax regression, in place:

        W ← (1 − h_t λ) W − h_t x_i (softmax(Wᵀx_i) − e_{y_i})ᵀ,

    with the lazy regulariser of :func:`._svrg_kernels.sgd_epoch` applied to whole rows of W
    (``last``, ``cum`` as there).  ``p`` is a scratch vector of length C.
    """
    n_steps = samples.size
    C = W.shape[1]
    if t0 == 0:
        cum[0] = 0.0
        for t in range(n_steps):
            cum[t + 1] = cum[t] + math.log1p(-h[t] * lam)
        last[:] = 0
    for t in range(t0, t1):
        i = samples[t]
        for c in range(C):
            p[c] = 0.0
        for q in range(indptr[i], indptr[i + 1]):
            j = indices[q]
            if last[j] < t:
                f = math.exp(cum[t] - cum[last[j]])
                for c in range(C):
                    W[j, c] *= f
                last[j] = t
            a = data[q]
            for c in range(C):
                p[c] += a * W[j, c]
        # p ← softmax(p) − e_y, stably (the largest margin subtracted first).
        m = p[0]
        for c in range(1, C):
            m = max(m, p[c])
        s = 0.0
        for c in range(C):
            p[c] = math.exp(p[c] - m)
            s += p[c]
        for c in range(C):
            p[c] /= s
        p[int(y[i])] -= 1.0
        ht = h[t]
        r = 1.0 - ht * lam
        for q in range(indptr[i], indptr[i + 1]):
            j = indices[q]
            a = ht * data[q]
            for c in range(C):
                W[j, c] = r * W[j, c] - a * p[c]
            last[j] = t + 1
    if t1 == n_steps:
        for j in range(W.shape[0]):
            if last[j] < n_steps:
                f = math.exp(cum[n_steps] - cum[last[j]])
                for c in range(C):
                    W[j, c] *= f
                last[j] = n_steps


# ----------------------------------------------------------------------------- local SVRG
@numba.njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _softmax_into(z, out):
    """out = softmax(z), stably (the largest margin subtracted first)."""
    C = z.size
    m = z[0]
    for c in range(1, C):
        m = max(m, z[c])
    s = 0.0
    for c in range(C):
        out[c] = math.exp(z[c] - m)
        s += out[c]
    for c in range(C):
        out[c] /= s


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _node_softmax(k, g0, g1, offsets, indptr, data, slot, sptr, scol, scnt, z0, p0, gvec, c_off, phi,
                  use_s, samples, sample_ptr, steps, hks, alphas, rho, acc, V, CN, US, SC, LAST, pw, ge,
                  cur, hd):
    """Steps ``g0 .. g1 − 1`` of node k's local SVRG loop on the d × C model (one pass of m steps):

        V ← (1 − h_k ρ) V − h_k G − h_k S_k x_i (softmax(W_kᵀx_i) − softmax(W̃ᵀx_i))ᵀ,

    V = W_k − W̃ on the node's support slots (C values a slot), G the snapshot gradient, the
    e_{y_i} of the two example gradients cancelling.  Everything else is
    :func:`._svrg_kernels._node`'s, row by row: the lazy catch-up from the per-node tables
    ``pw``, ``ge`` (one Δ per slot, applied to its C values), the resumable state, and the
    result α_k (U + h_k G(m) c_off) on the support, returning α_k h_k G(m).
    """
    C = V.shape[1]
    r0, r1 = offsets[k], offsets[k + 1]
    a0, a1 = sptr[k], sptr[k + 1]
    ns = a1 - a0
    m = steps[k]
    s0 = sample_ptr[k]
    hk, alpha = hks[k], alphas[k]
    nk = r1 - r0
    a = hk * rho
    r = 1.0 - a
    if g0 == 0:
        for s in range(ns):
            j = scol[a0 + s]
            for c in range(C):
                V[s, c] = 0.0
                US[s, c] = 0.0
                CN[s, c] = gvec[j * C + c]
            LAST[s] = 0
            # s_k^j = φ^j / φ_k^j with φ_k^j = n_k^j / n_k, as the binary kernel evaluates it.
            if use_s and scnt[a0 + s] > 0:
                SC[s] = phi[j] / (scnt[a0 + s] / nk)
            else:
                SC[s] = 1.0
        _geom_table(a, m, pw, ge)
    for g in range(g0, g1):
        i = r0 + samples[s0 + g]
        p_start = indptr[i]
        p_end = indptr[i + 1]
        for c in range(C):
            cur[c] = z0[i, c]
        for p in range(p_start, p_end):
            s = slot[p]
            dlt = g - LAST[s]
            x = data[p]
            for c in range(C):
                v = pw[dlt] * V[s, c] - hk * CN[s, c] * ge[dlt]
                V[s, c] = v
                cur[c] += x * v
        _softmax_into(cur, hd)
        for c in range(C):
            hd[c] = hk * (hd[c] - p0[i, c])
        for p in range(p_start, p_end):
            s = slot[p]
            x = data[p] * SC[s]
            for c in range(C):
                V[s, c] = r * V[s, c] - hk * CN[s, c] - hd[c] * x
            LAST[s] = g + 1
        if g == m - 1:
            for s in range(ns):
                dlt = m - LAST[s]
                for c in range(C):
                    v = V[s, c]
                    if dlt > 0:
                        v = pw[dlt] * v - hk * CN[s, c] * ge[dlt]
                    US[s, c] += v
                    V[s, c] = 0.0
                LAST[s] = 0
    if g1 < m:
        return 0.0
    _, g_tot = _geom(a, m)
    hg = hk * g_tot
    for s in range(ns):
        j = scol[a0 + s]
        for c in range(C):
            acc[j * C + c] += alpha * (US[s, c] + hg * c_off[j * C + c])
    return alpha * hg


@numba.njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def _batch_softmax(lo, hi, offsets, indptr, data, slot, sptr, scol, scnt, z0, p0, gvec, c_off, phi, use_s,
                   samples, sample_ptr, steps, hks, alphas, rho, acc, beta, V, CN, US, SC, LAST, pw, ge, cur, hd):
    """One batch: chunk c runs from ``lo[c]`` up to ``hi[c]`` (node, step) on its own workspace."""
    for c in prange(lo.shape[0]):
        k, g = lo[c, 0], lo[c, 1]
        k1, g1 = hi[c, 0], hi[c, 1]
        while k < k1 or (k == k1 and g < g1):
            end = steps[k] if k < k1 else g1
            beta[c] += _node_softmax(k, g, end, offsets, indptr, data, slot, sptr, scol, scnt, z0, p0, gvec,
                                     c_off, phi, use_s, samples, sample_ptr, steps, hks, alphas, rho, acc[c],
                                     V[c], CN[c], US[c], SC[c], LAST[c], pw[c], ge[c], cur[c], hd[c])
            k += 1
            g = 0


class LocalSVRGSoftmax:
    """:class:`._svrg_kernels.LocalSVRG` for the d × C model of softmax regression: the same
    :meth:`run` (one pass, no DANE), with the model, its gradient and the result flat (length dC,
    row-major) and the margins n × C.  FSVRG (Algorithm 4), naive FSVRG (Algorithm 3) and SVRG
    (Algorithm 1, ``pooled``) run on it."""

    def __init__(self, problem, pooled: bool = False):
        X = problem.X
        self.problem = problem
        self.support = NodeSupport.whole(X) if pooled else problem.data.support
        self.offsets = self.support.offsets
        self.sizes = np.diff(self.offsets)
        self.node_nnz = np.diff(X.indptr[self.offsets]).astype(np.float64)

    def run(self, wt, z0, gvec, c_off, samples, sample_ptr, steps, hk, alpha, *, lam, rho,
            passes=1, dane=False, eta=1.0, mu=0.0, phi=None, check_stop=None) -> np.ndarray:
        """Σ_k α_k (W_k − W^t), flat; the parameters as :meth:`LocalSVRG.run`'s (``passes`` = 1, no DANE)."""
        if passes != 1 or dane:
            raise ValueError("the softmax local loop runs one pass without DANE's subproblem")
        pb = self.problem
        C = pb.n_classes
        sup = self.support
        entries = sup.entries
        steps = np.ascontiguousarray(steps, dtype=np.int64)
        T = CHUNKS  # not the thread count: the same sums, bit for bit, on every machine
        S = int(sup.max_size)
        M = int(steps.max()) + 1
        acc, beta = np.zeros((T, pb.size)), np.zeros(T)
        V, CN, US = np.zeros((T, S, C)), np.zeros((T, S, C)), np.zeros((T, S, C))
        SC, LAST = np.zeros((T, S)), np.zeros((T, S), dtype=np.int64)
        pw, ge, cur, hd = np.zeros((T, M)), np.zeros((T, M)), np.zeros((T, C)), np.zeros((T, C))
        z0 = np.ascontiguousarray(z0, dtype=np.float64)
        p0 = np.exp(z0 - z0.max(axis=1, keepdims=True))
        p0 /= p0.sum(axis=1, keepdims=True)
        use_s = phi is not None
        phi_ = np.ascontiguousarray(phi if use_s else np.ones(1), dtype=np.float64)
        row_len = self.node_nnz / np.maximum(self.sizes, 1)
        work = self.node_nnz + 2.0 * C * steps * row_len + C * sup.sizes + 1.0
        for lo, hi in plan(work, T, batch_target(BATCH_WORK), steps=steps, step_work=2.0 * C * row_len):
            _batch_softmax(lo, hi, self.offsets, entries.indptr, entries.data, entries.slot, sup.ptr, sup.col,
                           sup.count, z0, p0, np.ascontiguousarray(gvec, dtype=np.float64),
                           np.ascontiguousarray(c_off, dtype=np.float64), phi_, use_s,
                           np.ascontiguousarray(samples, dtype=np.int64),
                           np.ascontiguousarray(sample_ptr, dtype=np.int64), steps,
                           np.ascontiguousarray(hk, dtype=np.float64), np.ascontiguousarray(alpha, dtype=np.float64),
                           float(rho), acc, beta, V, CN, US, SC, LAST, pw, ge, cur, hd)
            if check_stop is not None:
                check_stop()
        return acc.sum(axis=0) - beta.sum() * c_off


# ----------------------------------------------------------------------------- local minibatch SGD
@numba.njit(cache=True, nogil=True, error_model="numpy")
def _node_pass_softmax(k, obase, offsets, indptr, indices, data, labels, pat_ptr, pat_ind, eta, lam, mu,
                       epochs, bsize, x, order, y, last, a, coef, rpow, qsum, zc, ctrl, s, use_ctrl, G):
    """Node k's local minibatch SGD on the d × C model (FedAvg, FedProx, SCAFFOLD), as
    :func:`._local_sgd_kernels._node_pass`: a step is

        Y ← Y − η [ (1/|b|) Σ_{i∈b} x_i (softmax(Yᵀx_i) − e_{y_i})ᵀ + λ Y + μ (Y − X) + V_k ],

    V_k = S − S_k SCAFFOLD's correction of the data parts (``use_ctrl``; S_k's rows on the node's
    support entries, ``ctrl``), the affine part applied just in time to a feature's whole row of
    C values.  On return the rows of the node's support hold its final iterate (and with
    ``use_ctrl`` G the sum of the data gradients used); returns T, the number of steps."""
    C = y.shape[1]
    start = offsets[k]
    nk = offsets[k + 1] - start
    p0 = pat_ptr[k]
    p1 = pat_ptr[k + 1]
    for p in range(p0, p1):
        j = pat_ind[p]
        for c in range(C):
            y[j, c] = x[j, c]
            v = 0.0
            if use_ctrl:
                v = s[j, c] - ctrl[p, c]
                G[j, c] = 0.0
            a[j, c] = eta * (mu * x[j, c] - v)
        last[j] = 0
    full = bsize == 0 or bsize >= nk
    B = nk if full else bsize
    nb = (nk + B - 1) // B
    T = epochs * nb
    h = eta * (lam + mu)
    geometric_tables(h, T, rpow, qsum)
    r = 1.0 - h
    t = 0
    for e in range(epochs):
        ebase = obase + e * nk
        for bi in range(nb):
            lo = bi * B
            hi = min(lo + B, nk)
            inv = 1.0 / (hi - lo)
            for q in range(lo, hi):
                i = start + (q if bsize == 0 else order[ebase + q])
                for c in range(C):
                    zc[c] = 0.0
                for p in range(indptr[i], indptr[i + 1]):
                    val = data[p]
                    if val == 0.0:
                        continue
                    j = indices[p]
                    m = t - last[j]
                    if m > 0:
                        for c in range(C):
                            y[j, c] = rpow[m] * y[j, c] + a[j, c] * qsum[m]
                        last[j] = t
                    for c in range(C):
                        zc[c] += val * y[j, c]
                _softmax_into(zc, coef[q - lo])
                coef[q - lo, int(labels[i])] -= 1.0
                for c in range(C):
                    coef[q - lo, c] *= inv
            for q in range(lo, hi):
                i = start + (q if bsize == 0 else order[ebase + q])
                for p in range(indptr[i], indptr[i + 1]):
                    val = data[p]
                    if val == 0.0:
                        continue
                    j = indices[p]
                    if last[j] == t:
                        for c in range(C):
                            y[j, c] = r * y[j, c] + a[j, c]
                        last[j] = t + 1
                    for c in range(C):
                        y[j, c] -= eta * coef[q - lo, c] * val
                    if use_ctrl:
                        for c in range(C):
                            G[j, c] += coef[q - lo, c] * val
            t += 1
    for p in range(p0, p1):
        j = pat_ind[p]
        m = T - last[j]
        if m > 0:
            for c in range(C):
                y[j, c] = rpow[m] * y[j, c] + a[j, c] * qsum[m]
            last[j] = T
    return T


@numba.njit(cache=True, nogil=True, parallel=True)
def _round_batch_softmax(lo, hi, offsets, indptr, indices, data, labels, pat_ptr, pat_ind, eta, lam, mu, epochs,
                         bsize, x, nodes, weights, pweights, order, order_start, Y, LAST, A, COEF, RPOW, QSUM, ACC,
                         QACC, ZC, ctrl, s, use_ctrl, GG, ACC_S):
    """:func:`._local_sgd_kernels._round_batch` on the d × C model: ACC[c] += w_k (Δ_k − o_k) on
    node k's support rows (flat, row-major), QACC[c] += w_k q_{T_k}; with ``use_ctrl`` the new data
    control variates S_k⁺ = G/T_k replace ``ctrl`` on the node's entries and ACC_S[c] += p_k (S_k⁺ − S_k)."""
    C = x.shape[1]
    for ch in prange(lo.shape[0]):
        y = Y[ch]
        acc = ACC[ch]
        qsum = QSUM[ch]
        for b in range(lo[ch], hi[ch]):
            k = nodes[b]
            g = GG[ch]
            acc_s = ACC_S[ch]
            T = _node_pass_softmax(k, order_start[b], offsets, indptr, indices, data, labels, pat_ptr, pat_ind,
                                   eta, lam, mu, epochs, bsize, x, order, y, LAST[ch], A[ch], COEF[ch],
                                   RPOW[ch], qsum, ZC[ch], ctrl, s, use_ctrl, g)
            w = weights[b]
            qT = qsum[T]
            for p in range(pat_ptr[k], pat_ptr[k + 1]):
                j = pat_ind[p]
                for c in range(C):
                    sj = s[j, c] if use_ctrl else 0.0
                    off = -eta * qT * (lam * x[j, c] + sj)
                    acc[j * C + c] += w * ((y[j, c] - x[j, c]) - off)
                    if use_ctrl:
                        new = g[j, c] / T
                        acc_s[j * C + c] += pweights[b] * (new - ctrl[p, c])
                        ctrl[p, c] = new
            QACC[ch, 0] += w * qT


class LocalSGDSoftmax(LocalSGD):
    """:class:`._local_sgd_kernels.LocalSGD` for the d × C model of softmax regression: the same
    rounds, row orders and batches (so the same samples as the binary loop), the model, the result
    and S flat (length dC, row-major), SCAFFOLD's data control variates ``ctrl`` one row of C values
    per node × feature support entry."""

    def __init__(self, problem, *, epochs: int, batch_size: int, stepsize: float, mu: float = 0.0,
                 control: bool = False):
        super().__init__(problem, epochs=epochs, batch_size=batch_size, stepsize=stepsize, mu=mu,
                         control=control)
        d, C, T = problem.d, problem.n_classes, self.chunks
        self._Y = np.zeros((T, d, C))
        self._A = np.zeros((T, d, C))
        self._ACC = np.zeros((T, d * C))
        self._COEF = np.zeros((T, self._COEF.shape[1], C))
        self._ZC = np.zeros((T, C))
        self._G = np.zeros((T, d, C) if self.control else (T, 1, C))
        self._ACC_S = np.zeros((T, d * C) if self.control else (T, 1))
        if self.control:
            self.ctrl = np.zeros((self.pat_ind.shape[0], C))
            self.s = np.zeros(d * C)
        else:
            self.ctrl = np.zeros((0, C))

    def _run_batch(self, lo, hi, ctl, plan_, scratch) -> None:
        pb = self.problem
        s = pb.as_model(ctl.s) if self.control else np.zeros((1, pb.n_classes))
        _round_batch_softmax(lo, hi, self.offsets, self.indptr, self.indices, self.data, self.labels,
                             self.pat_ptr, self.pat_ind, self.eta, self.lam, self.mu, self.epochs,
                             self.batch_size, pb.as_model(plan_.x), plan_.nodes, plan_.weights, plan_.pweights,
                             plan_.order, plan_.order_start, self._Y, self._LAST, self._A, self._COEF, self._RPOW,
                             self._QSUM, self._ACC, self._QACC, self._ZC, self.ctrl, s, self.control, self._G,
                             self._ACC_S)
