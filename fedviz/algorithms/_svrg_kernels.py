"""Compiled local loops of the SVRG family: FSVRG, naive FSVRG, SVRG, inexact DANE, and SGD.

This module owns the numba kernels, their argument bundles (:class:`NodeData`,
:class:`Snapshot`, :class:`NodePlan`, :class:`Rule`, :class:`Work`), their driver
:class:`LocalSVRG`, and the sampling helpers that let two algorithms draw the same
examples (Proposition 1's remark, Section 3.5).  The per-node supports come from the
data set (:attr:`FederatedDataset.support <fedviz.data.dataset.FederatedDataset.support>`),
the constants the stepsize defaults derive from from :class:`~fedviz.problems.objective.Problem`.

One kernel covers every variance-reduced local loop of the paper.  On node k, with
snapshot w̃ (w^t in the first pass), local displacement v = w − w̃ and an example i
drawn from P_k, a step is (Algorithms 1, 3 and 4, and SVRG on the DANE subproblem (10))

    v ← (1 − h_k ρ) v − h_k c − h_k (φ'(x_iᵀw) − φ'(x_iᵀw̃)) S_k x_i,

where ρ is the curvature of the dense part (λ, or λ + μ for DANE), c the dense snapshot
gradient (∇f(w^t), or the DANE subproblem's gradient at w̃) and S_k the optional
diagonal scaling of Algorithm 4 (identity elsewhere).  Only the coordinates of x_i take
part in the data term, so the kernel is "just in time": a coordinate j not touched for
Δ steps obeys the affine recurrence v_j ← r v_j − h_k c_j with r = 1 − h_k ρ, whose
closed form v_j ← r^Δ v_j − h_k c_j (1 − r^Δ)/(1 − r) is read from a per-node table
built with log1p/expm1 (λ = 1/n makes h_k ρ tiny, where naive powers lose digits).
Coordinates outside the node's support are never touched: after M steps they hold
−h_k G(M) c_j with G(M) = (1 − r^M)/(1 − r), the same multiple of c for every such
coordinate.  The node therefore reports α_k (u_j + h_k G c_j) on its support and the
scalar α_k h_k G, and the caller subtracts (Σ_k α_k h_k G) c once: a node costs
O(nnz_k + steps · row length + |support_k|), never O(d), and no K × d array is formed.
The kernel works on the node's support slots, so its per-coordinate state is a small
array with one cache line per coordinate.

A step evaluates one new example gradient: φ'(x_iᵀw̃) comes from the snapshot margins
computed with the full gradient.  That is how the algorithms count their work.

``numba.prange`` spreads :data:`~._batches.CHUNKS` contiguous chunks of nodes balanced by
work (a fixed number, so the thread count never changes a result) over the threads,
each chunk with its own accumulator and work arrays, and the chunks advance in batches
between which the caller checks Stop (:mod:`._batches`).  A node's loop can stop after
any step and resume in the next batch, so even the centralised SVRG, one node with n
steps, is interruptible, and the result is bitwise the same however the work is cut.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np
from numba import prange

from ..data.dataset import NodeSupport
from ..problems._compiled import dphi, loss_code
from ..problems.objective import Problem
from ._batches import CHUNKS, batch_target, plan

#: The stream of :meth:`Algorithm.rng` every algorithm of this family draws its samples from,
#: so that two algorithms with the same seed see the same examples (Proposition 1).
SAMPLE_STREAM = 1

#: Work (touched entries, roughly) per thread and batch, between two Stop checks: about
#: 50 ms on a quiet core at the paper's scale.
BATCH_WORK = 2_000_000


# ----------------------------------------------------------------------------- sampling
def permutation_samples(rng: np.random.Generator, ptr: np.ndarray) -> np.ndarray:
    """A uniformly random permutation of every segment ``ptr[s]:ptr[s+1]``, as local indices.

    The contract (relied on by the tests and by the FSVRG ≡ SVRG identity for K = 1):
    draw ``keys = rng.random(ptr[-1])``; segment s is ordered by a stable argsort of its
    keys.
    """
    keys = rng.random(int(ptr[-1]))
    return segment_argsort(keys, np.ascontiguousarray(ptr, dtype=np.int64))


def uniform_samples(rng: np.random.Generator, sizes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``counts[k]`` local indices drawn uniformly with replacement from ``range(sizes[k])``,
    node after node (the contract: one vectorised ``rng.integers(0, highs)`` call)."""
    highs = np.repeat(np.asarray(sizes, dtype=np.int64), np.asarray(counts, dtype=np.int64))
    if highs.size == 0:
        return np.zeros(0, dtype=np.int64)
    return rng.integers(0, highs, dtype=np.int64)


@numba.njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def segment_argsort(keys, ptr):
    """Per segment, the stable argsort of ``keys`` (indices local to the segment)."""
    out = np.empty(keys.size, dtype=np.int64)
    for s in prange(ptr.size - 1):
        a, b = ptr[s], ptr[s + 1]
        out[a:b] = np.argsort(keys[a:b], kind="mergesort")
    return out


# ----------------------------------------------------------------------------- losses


@numba.njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _geom(a, steps):
    """(r^M, (1 − r^M)/(1 − r)) for r = 1 − a, accurate for tiny a."""
    if a < 1.0:
        e = steps * math.log1p(-a)
        return math.exp(e), -math.expm1(e) / a
    p = (1.0 - a) ** steps
    return p, (1.0 - p) / a


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _geom_table(a, m, pw, ge):
    """pw[Δ] = r^Δ and ge[Δ] = (1 − r^Δ)/(1 − r) = 1 + r + ... + r^(Δ−1) for Δ = 0..m, r = 1 − a.

    Every 64th entry is exact (log1p/expm1); the ones between follow by the stable
    recursions pw ← r pw, ge ← r ge + 1, so the relative error stays below ~64 ulp
    without a transcendental per entry.
    """
    r = 1.0 - a
    if a < 1.0:
        lg = math.log1p(-a)
        for b0 in range(0, m + 1, 64):
            e = b0 * lg
            p = math.exp(e)
            g = -math.expm1(e) / a
            pw[b0] = p
            ge[b0] = g
            for dlt in range(b0 + 1, min(b0 + 64, m + 1)):
                g = r * g + 1.0
                p = r * p
                pw[dlt] = p
                ge[dlt] = g
    else:
        p = 1.0
        g = 0.0
        for dlt in range(m + 1):
            pw[dlt] = p
            ge[dlt] = g
            g = r * g + 1.0
            p = r * p


# ----------------------------------------------------------------------------- local SVRG
# Fields of the per-slot work record, one 64-byte row per slot: v (displacement from the
# snapshot), us (snapshot minus w^t), c (snapshot gradient), a_k (DANE's linear term), a
# scratch sum, s_k^j, and the step the slot was last brought up to date.
_V, _US, _CN, _AA, _DK, _SC, _LAST = range(7)
_FIELDS = 8


class NodeData(NamedTuple):
    """What the local loops read of the data, fixed per problem.

    ``indptr``, ``data`` and ``slot`` are the support entries
    (:class:`~fedviz.data.dataset.SupportEntries`): the stored nonzeros of every row and
    their node-local slots; ``sptr``, ``scol`` and ``scnt`` the supports themselves
    (:class:`~fedviz.data.dataset.NodeSupport` ``ptr``, ``col``, ``count``).
    """

    offsets: np.ndarray
    indptr: np.ndarray
    data: np.ndarray
    slot: np.ndarray
    sptr: np.ndarray
    scol: np.ndarray
    scnt: np.ndarray
    y: np.ndarray
    loss: int          #: the loss code (:mod:`fedviz.problems._compiled`)
    smoothing: float   #: the smoothed hinge's γ (1 for the other losses)


class Snapshot(NamedTuple):
    """The server's state the nodes start from, for one iteration."""

    z0: np.ndarray      #: margins X w^t
    wt: np.ndarray      #: w^t
    gvec: np.ndarray    #: ∇f(w^t)
    c_off: np.ndarray   #: the snapshot gradient off a node's support
    phi: np.ndarray     #: φ^j for the scaling S_k (unused unless ``Rule.use_s``)


class NodePlan(NamedTuple):
    """Per node: its samples and its step counts, stepsizes and aggregation weights."""

    samples: np.ndarray     #: local example indices, node k's from ``sample_ptr[k]``
    sample_ptr: np.ndarray
    steps: np.ndarray       #: steps per pass
    hk: np.ndarray          #: local stepsize h_k
    alpha: np.ndarray       #: aggregation weight α_k


class Rule(NamedTuple):
    """The scalars of the local step (see :meth:`LocalSVRG.run`)."""

    lam: float
    rho: float
    passes: int
    dane: bool
    eta: float
    mu: float
    use_s: bool


class Work(NamedTuple):
    """Per-thread accumulators and workspaces (first axis: the chunk)."""

    acc: np.ndarray
    beta: np.ndarray
    rec: np.ndarray
    zs: np.ndarray
    pw: np.ndarray
    ge: np.ndarray


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _snapshot(ps, r0, r1, scol, nd, sn, rule, rec, zs):
    """Start pass ``ps``: the snapshot's margins, and for ps > 0 the new snapshot w̃ = w^t + us
    and the subproblem's gradient there, ∇F_k(w̃) − a_k + μ(w̃ − w^t) (only DANE runs more
    than one pass)."""
    z0 = sn.z0
    if ps == 0:
        for i in range(r0, r1):
            zs[i - r0] = z0[i]
        return
    indptr, data, slot, y = nd.indptr, nd.data, nd.slot, nd.y
    code, smoothing = nd.loss, nd.smoothing
    wt, lam, mu = sn.wt, rule.lam, rule.mu
    nk = r1 - r0
    for s in range(scol.size):
        rec[s, _DK] = 0.0
    for i in range(r0, r1):
        zi = z0[i]
        for p in range(indptr[i], indptr[i + 1]):
            zi += data[p] * rec[slot[p], _US]
        zs[i - r0] = zi
        dd = dphi(code, zi, y[i], smoothing) / nk
        for p in range(indptr[i], indptr[i + 1]):
            rec[slot[p], _DK] += dd * data[p]
    for s in range(scol.size):
        us = rec[s, _US]
        rec[s, _CN] = (rec[s, _DK] + lam * (wt[scol[s]] + us)) - rec[s, _AA] + mu * us


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _node(k, g0, g1, nd, sn, pl, rule, acc, rec, zs, pw, ge):
    """Steps ``g0 .. g1 − 1`` of node k's local loop (of m · passes; step g is step g mod m
    of pass g // m).

    The node's state lives in ``rec``, ``zs``, ``pw`` and ``ge``, so a later call resumes
    where this one ended, and any cut into calls performs the same operations in the same
    order as one call.  The call with g0 = 0 initialises the node; the one that reaches
    m · passes adds its result to ``acc`` and returns α_k h_k G(m · passes) (see the module
    docstring); the others return 0.
    """
    indptr, data, slot, y = nd.indptr, nd.data, nd.slot, nd.y
    code, smoothing = nd.loss, nd.smoothing
    scol = nd.scol[nd.sptr[k]:nd.sptr[k + 1]]
    scnt = nd.scnt[nd.sptr[k]:nd.sptr[k + 1]]
    r0, r1 = nd.offsets[k], nd.offsets[k + 1]
    z0, wt, gvec, c_off, phi = sn.z0, sn.wt, sn.gvec, sn.c_off, sn.phi
    m, passes = pl.steps[k], rule.passes
    s0 = pl.sample_ptr[k]
    smp = pl.samples[s0:s0 + m * passes]
    hk, alpha = pl.hk[k], pl.alpha[k]
    lam, rho, dane, eta, use_s = rule.lam, rule.rho, rule.dane, rule.eta, rule.use_s
    nk = r1 - r0
    ns = scol.size
    total = m * passes
    a = hk * rho
    r = 1.0 - a
    if g0 == 0:
        for s in range(ns):
            rec[s, _V] = 0.0
            rec[s, _US] = 0.0
            rec[s, _DK] = 0.0
            rec[s, _LAST] = 0.0
            # s_k^j = φ^j / φ_k^j with φ_k^j = n_k^j / n_k, evaluated as DatasetStats does.
            if use_s and scnt[s] > 0:
                rec[s, _SC] = phi[scol[s]] / (scnt[s] / nk)
            else:
                rec[s, _SC] = 1.0
        # The snapshot gradient c on the support.  DANE forms it from the definition of the
        # subproblem (10): ∇F_k(w^t) − a_k with a_k = ∇F_k(w^t) − η∇f(w^t).
        if dane:
            for i in range(r0, r1):
                dd = dphi(code, z0[i], y[i], smoothing) / nk
                for p in range(indptr[i], indptr[i + 1]):
                    rec[slot[p], _DK] += dd * data[p]
            for s in range(ns):
                j = scol[s]
                fk = rec[s, _DK] + lam * wt[j]
                ak = fk - eta * gvec[j]
                rec[s, _AA] = ak
                rec[s, _CN] = fk - ak
        else:
            for s in range(ns):
                rec[s, _CN] = gvec[scol[s]]
        _geom_table(a, m, pw, ge)

    for g in range(g0, g1):
        ps = g // m
        st = g - ps * m
        if st == 0:
            _snapshot(ps, r0, r1, scol, nd, sn, rule, rec, zs)
        li = smp[g]
        i = r0 + li
        p0 = indptr[i]
        p1 = indptr[i + 1]
        dot = 0.0
        for p in range(p0, p1):
            s = slot[p]
            # Bring v_j up to step st (a no-op when Δ = 0: pw[0] = 1, ge[0] = 0).
            dlt = st - int(rec[s, _LAST])
            v = pw[dlt] * rec[s, _V] - hk * rec[s, _CN] * ge[dlt]
            rec[s, _V] = v
            dot += data[p] * v
        zi = zs[li]
        hd = hk * (dphi(code, zi + dot, y[i], smoothing) - dphi(code, zi, y[i], smoothing))
        for p in range(p0, p1):
            s = slot[p]
            rec[s, _V] = r * rec[s, _V] - hk * rec[s, _CN] - hd * rec[s, _SC] * data[p]
            rec[s, _LAST] = st + 1
        if st == m - 1:
            # The end of a pass: every coordinate brought up to step m, then into the snapshot.
            for s in range(ns):
                dlt = m - int(rec[s, _LAST])
                v = rec[s, _V]
                if dlt > 0:
                    v = pw[dlt] * v - hk * rec[s, _CN] * ge[dlt]
                rec[s, _US] += v
                rec[s, _V] = 0.0
                rec[s, _LAST] = 0.0

    if g1 < total:
        return 0.0
    _, g_tot = _geom(a, total)
    hg = hk * g_tot
    for s in range(ns):
        j = scol[s]
        acc[j] += alpha * (rec[s, _US] + hg * c_off[j])
    return alpha * hg


@numba.njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def _batch(lo, hi, nd, sn, pl, rule, wk):
    """One batch: chunk c runs from position ``lo[c]`` up to ``hi[c]`` (node, step; see
    :func:`._batches.plan`) on its own thread, accumulator and workspace."""
    # The bundles' arrays are taken out before the parallel loop: numba 0.68 loses writes
    # made inside a prange to an array read from a tuple's field there.
    steps, passes = pl.steps, rule.passes
    acc, beta, rec, zs, pw, ge = wk.acc, wk.beta, wk.rec, wk.zs, wk.pw, wk.ge
    for c in prange(lo.shape[0]):
        k, g = lo[c, 0], lo[c, 1]
        k1, g1 = hi[c, 0], hi[c, 1]
        while k < k1 or (k == k1 and g < g1):
            total = steps[k] * passes
            end = total if k < k1 else g1
            beta[c] += _node(k, g, end, nd, sn, pl, rule, acc[c], rec[c], zs[c], pw[c], ge[c])
            k += 1
            g = 0


class LocalSVRG:
    """Runs the local loops of all K nodes for one problem and returns Σ_k α_k (w_k − w^t).

    Work arrays (per thread: one record per support slot of the largest node, and the
    step tables) are allocated once and reused.

    Parameters
    ----------
    problem : Problem
    pooled : bool
        Treat all the data as one node (centralised SVRG, Algorithm 1).
    """

    def __init__(self, problem: Problem, pooled: bool = False):
        X = problem.X
        self.problem = problem
        self.support = NodeSupport.whole(X) if pooled else problem.data.support
        sup = self.support
        entries = sup.entries
        code, smoothing = loss_code(problem.loss)
        self.offsets = sup.offsets
        self.data = NodeData(offsets=sup.offsets, indptr=entries.indptr, data=entries.data,
                             slot=entries.slot, sptr=sup.ptr, scol=sup.col, scnt=sup.count,
                             y=problem.y, loss=code, smoothing=smoothing)
        self.sizes = np.diff(self.offsets)
        self.node_nnz = np.diff(X.indptr[self.offsets]).astype(np.float64)
        self._work = None

    def _workspace(self, max_steps: int):
        T = CHUNKS  # not the thread count: the same sums, bit for bit, on every machine
        w = self._work
        if w is None or w[0].shape[0] != T or w[2].shape[1] < max_steps + 1:
            w = (np.zeros((T, self.support.max_size, _FIELDS)), np.zeros((T, int(self.sizes.max()))),
                 np.zeros((T, max_steps + 1)), np.zeros((T, max_steps + 1)))
            self._work = w
        return w

    def run(self, wt, z0, gvec, c_off, samples, sample_ptr, steps, hk, alpha, *, lam, rho,
            passes=1, dane=False, eta=1.0, mu=0.0, phi=None, check_stop=None) -> np.ndarray:
        """Σ_k α_k (w_k − w^t) after every node's local loop.

        Parameters
        ----------
        wt, z0 : ndarray
            The server's w^t and its margins X w^t.
        gvec : ndarray
            ∇f(w^t): the dense snapshot gradient (DANE forms its subproblem's from it).
        c_off : ndarray
            The snapshot gradient on coordinates outside a node's support (``gvec`` for
            FSVRG; the subproblem's gradient for DANE, identical across nodes there).
        samples, sample_ptr : ndarray of int64
            Node k's local example indices for all its passes start at ``sample_ptr[k]``.
        steps, hk, alpha : ndarray (K,)
            Steps per pass, local stepsize and aggregation weight of every node.
        lam, rho : float
            λ, and the curvature of the dense part of a step (λ, or λ + μ for DANE).
        passes, dane, eta, mu :
            DANE with the SVRG solver: passes over the subproblem (10), and its η, μ.
        phi : ndarray or None
            φ^j (DatasetStats.phi) to scale the data term by S_k (Algorithm 4); None: S = I.
        check_stop : callable or None
            Called after every batch (see :mod:`._batches`; the result does not depend on
            how the work is cut).
        """
        plan_ = NodePlan(samples=np.ascontiguousarray(samples, dtype=np.int64),
                         sample_ptr=np.ascontiguousarray(sample_ptr, dtype=np.int64),
                         steps=np.ascontiguousarray(steps, dtype=np.int64),
                         hk=np.ascontiguousarray(hk, dtype=np.float64),
                         alpha=np.ascontiguousarray(alpha, dtype=np.float64))
        steps = plan_.steps
        rec, zs, pw, ge = self._workspace(int(steps.max()))
        T = rec.shape[0]
        work_ = Work(acc=np.zeros((T, self.problem.d)), beta=np.zeros(T), rec=rec, zs=zs, pw=pw, ge=ge)
        use_s = phi is not None
        snap = Snapshot(z0=z0, wt=wt, gvec=gvec, c_off=c_off, phi=phi if use_s else np.ones(1))
        rule = Rule(lam=float(lam), rho=float(rho), passes=int(passes), dane=bool(dane), eta=float(eta),
                    mu=float(mu), use_s=use_s)
        # Work of a node: its entries once per pass, two sweeps over each sampled row, its
        # slots.  Batches may end inside a node (the centralised SVRG is a single node).
        row_len = self.node_nnz / np.maximum(self.sizes, 1)
        total_steps = steps * passes
        work = self.node_nnz * passes + 2.0 * total_steps * row_len + self.support.sizes + 1.0
        batches = plan(work, T, batch_target(BATCH_WORK), steps=total_steps, step_work=2.0 * row_len)
        for lo, hi in batches:
            _batch(lo, hi, self.data, snap, plan_, rule, work_)
            # Also after the last batch: Stop pressed during it need not wait for the metrics.
            if check_stop is not None:
                check_stop()
        return work_.acc.sum(axis=0) - work_.beta.sum() * c_off


# ----------------------------------------------------------------------------- SGD
@numba.njit(cache=True, nogil=True, error_model="numpy")
def sgd_epoch(indptr, indices, data, y, code, smoothing, w, samples, h, lam, last, cum, t0, t1):
    """Steps ``t0 .. t1 − 1`` of an epoch of plain SGD, w ← (1 − h_t λ) w − h_t φ'(x_iᵀw) x_i,
    in place.

    The regulariser is applied lazily: ``last[j]`` is the step up to which w_j is current,
    and an untouched coordinate is multiplied by Π(1 − h_s λ), read off the prefix sums
    ``cum`` of log1p(−h_s λ) over the whole epoch.  The call with t0 = 0 starts the epoch
    (fills ``cum``, resets ``last``); the one that reaches the epoch's end brings every
    coordinate up to date.  Between calls the state is in ``w``, ``last`` and ``cum``, so
    any cut of the epoch into calls gives bitwise the same w.
    """
    n_steps = samples.size
    if t0 == 0:
        cum[0] = 0.0
        for t in range(n_steps):
            cum[t + 1] = cum[t] + math.log1p(-h[t] * lam)
        last[:] = 0
    for t in range(t0, t1):
        i = samples[t]
        dot = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            if last[j] < t:
                w[j] *= math.exp(cum[t] - cum[last[j]])
                last[j] = t
            dot += data[p] * w[j]
        ht = h[t]
        step = ht * dphi(code, dot, y[i], smoothing)
        r = 1.0 - ht * lam
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            w[j] = r * w[j] - step * data[p]
            last[j] = t + 1
    if t1 == n_steps:
        for j in range(w.size):
            if last[j] < n_steps:
                w[j] *= math.exp(cum[n_steps] - cum[last[j]])
