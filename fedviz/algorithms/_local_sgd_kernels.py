"""Compiled local minibatch SGD for the FedAvg family (FedAvg, FedProx, SCAFFOLD).

This module owns the one local loop the three baselines share and the per-thread
scratch it needs.  Node k, starting from the server model x, takes T_k steps

    y ← y − η [ (1/|b|) Σ_{i∈b} φ_i'(x_iᵀy) x_i + λ y + μ (y − x) + v_k ],

on minibatches b of its own rows (E epochs, each a fresh permutation cut into blocks of B
rows, or the whole node when B = 0), where μ is FedProx's proximal weight and v_k =
c − c_k SCAFFOLD's drift correction (0 for FedAvg).  F_k is the local objective of the
paper's Section 3.3, eq. (6), including the regulariser.

Why it is cheap.  A coordinate j that the minibatch does not touch moves by the affine
recurrence y_j ← r y_j + a_j with r = 1 − η(λ+μ) and a_j = η(μ x_j − v_kj), constant over
the node's loop, so after m such steps y_j = r^m y_j + a_j (1 − r^m)/(1 − r).  The kernel
brings a coordinate up to date only when an example touches it ("just in time"), and at
the end of the loop does so once more for the node's support.  Off the support the node's
whole change has the closed form −η q_T (λ x_j + v_kj) with q_T = (1 − r^T)/(1 − r): a
multiple of one dense vector shared by all nodes, so it is added once per round.  A node
therefore costs O(E·nnz_k + |support_k|), never O(d).  r^m and q_m come from tables
built with log1p/expm1, because λ = 1/n makes 1 − r tiny and naive powers lose digits.

SCAFFOLD's control variates.  c_k = ∇F_k estimates split into the data term and the
regulariser.  The regulariser λw is the same on every node, so it causes no client drift
and needs no estimate: its part of every c_k (and of c) is λ·x, the server model, and it
cancels in c − c_k.  Only the data parts s_k are stored, and option II of Karimireddy et
al. (2020) makes s_k⁺ the mean of the data gradients the node used along its path,
(1/T_k) Σ_t ĝ_t — supported on the node's features.  They are stored sparsely on the
node × feature pattern: Σ_k |support_k| ≤ nnz values, at most 240 MB at the paper's scale
where a dense K × d array would take 1.6 GB.  Then c − c_k = s − s_k, with the dense
s = Σ_k (n_k/n) s_k kept by the server.

Threads.  :meth:`LocalSGD.round` spreads the sampled nodes over the cores with
``numba.prange`` over :data:`~._batches.CHUNKS` contiguous chunks balanced by work (a fixed
number, not the thread count), and the chunks advance in batches between which the
runner's Stop is checked (:mod:`._batches`).  Every chunk owns its scratch and accumulators
and the row orders are drawn node by node from one stream, so results depend neither on
thread timing, nor on the thread count, nor on the batch size.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np
from numba import njit, prange

from ..problems._compiled import NO_CODE, dphi, loss_code
from ..problems.objective import Problem
from ._batches import CHUNKS, batch_target, plan


#: Work units (entries visited) per thread and batch, between two checks of the Stop
#: button: about 50 ms on a quiet core at the paper's scale.
BATCH_WORK = 1_000_000


# ---------------------------------------------------------------------------------------------
# Compiled kernels
# ---------------------------------------------------------------------------------------------



@njit(cache=True, nogil=True)
def geometric_tables(h, T, rpow, qsum):
    """Fill rpow[m] = r^m and qsum[m] = Σ_{i<m} r^i = (1 − r^m)/(1 − r), r = 1 − h, m = 0..T.

    For 0 < h < 1/2 both come from l = m·log1p(−h) as exp(l) and −expm1(l)/h, accurate to a
    few ulps even for h ~ 1e-10 where 1 − r^m would cancel.  Larger h (stepsizes near the
    stability limit) use the plain recurrences, which are accurate there.
    """
    if 0.0 < h < 0.5:
        l1 = math.log1p(-h)
        for m in range(T + 1):
            lm = m * l1
            rpow[m] = math.exp(lm)
            qsum[m] = -math.expm1(lm) / h
    else:
        r = 1.0 - h
        rpow[0] = 1.0
        qsum[0] = 0.0
        for m in range(1, T + 1):
            rpow[m] = rpow[m - 1] * r
            qsum[m] = qsum[m - 1] * r + 1.0


@njit(cache=True, nogil=True)
def shuffle_segments(sizes, epochs, u, out):
    """Per node, ``epochs`` independent permutations of 0..n_k−1, by Fisher–Yates from uniforms.

    ``out`` and ``u`` have length epochs·Σ sizes; node b's block starts at
    epochs·Σ_{b'<b} sizes[b'] and holds its epochs one after another.  Randomness comes
    only from ``u`` (drawn from the algorithm's seeded generator), so the result does not
    depend on threads.
    """
    pos = 0
    for b in range(sizes.shape[0]):
        n = sizes[b]
        for _ in range(epochs):
            for i in range(n):
                out[pos + i] = i
            for i in range(n - 1, 0, -1):
                j = int(u[pos + i] * (i + 1))
                if j > i:
                    j = i
                tmp = out[pos + i]
                out[pos + i] = out[pos + j]
                out[pos + j] = tmp
            pos += n


class NodeRows(NamedTuple):
    """What the local loops read of the problem, fixed per problem."""

    offsets: np.ndarray    #: node row boundaries
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    labels: np.ndarray
    loss: int              #: the loss code (:mod:`fedviz.problems._compiled`)
    smoothing: float       #: the smoothed hinge's γ (1 for the other losses)
    pat_ptr: np.ndarray    #: the node × feature support (:class:`~fedviz.data.dataset.NodeSupport`)
    pat_ind: np.ndarray


class StepRule(NamedTuple):
    """The scalars of a local step."""

    eta: float             #: the local step η
    lam: float             #: λ
    mu: float              #: FedProx's proximal weight μ
    epochs: int            #: E
    bsize: int             #: B, or 0 for full-batch steps


class Control(NamedTuple):
    """SCAFFOLD's data control variates: s_k on the pattern (updated in place) and s."""

    ctrl: np.ndarray
    s: np.ndarray
    use_ctrl: bool


class RoundPlan(NamedTuple):
    """One round: the server model, the sampled nodes, their weights and row orders."""

    x: np.ndarray
    nodes: np.ndarray
    weights: np.ndarray        #: aggregation weights w_k
    pweights: np.ndarray       #: n_k / n, for the control variates
    order: np.ndarray          #: local row orders, node ``nodes[b]``'s from ``order_start[b]``
    order_start: np.ndarray


class Scratch(NamedTuple):
    """Per-chunk scratch and accumulators (first axis: the chunk)."""

    Y: np.ndarray
    LAST: np.ndarray
    A: np.ndarray
    G: np.ndarray
    COEF: np.ndarray
    RPOW: np.ndarray
    QSUM: np.ndarray
    ACC: np.ndarray
    ACC_S: np.ndarray
    QACC: np.ndarray


@njit(cache=True, nogil=True)
def _node_pass(k, obase, rows, rule, ctl, x, order, y, last, a, G, coef, rpow, qsum):
    """Node k's local loop; on return y[j] (j in the node's support) holds its final iterate.

    ``last[j]`` is the step up to which y[j] is current.  Only coordinates of the node's
    support are ever read or written, so the dense scratch arrays need no reset between
    nodes beyond that support.  Returns T, the number of local steps.  With
    ``ctl.use_ctrl`` the data gradients used are summed into G (SCAFFOLD option II).
    """
    offsets, indptr, indices, data, labels = rows.offsets, rows.indptr, rows.indices, rows.data, rows.labels
    code, smoothing, pat_ptr, pat_ind = rows.loss, rows.smoothing, rows.pat_ptr, rows.pat_ind
    eta, lam, mu, epochs, bsize = rule.eta, rule.lam, rule.mu, rule.epochs, rule.bsize
    ctrl, s, use_ctrl = ctl.ctrl, ctl.s, ctl.use_ctrl
    start = offsets[k]
    nk = offsets[k + 1] - start
    p0 = pat_ptr[k]
    p1 = pat_ptr[k + 1]
    for p in range(p0, p1):
        j = pat_ind[p]
        y[j] = x[j]
        last[j] = 0
        v = 0.0
        if use_ctrl:
            v = s[j] - ctrl[p]
            G[j] = 0.0
        a[j] = eta * (mu * x[j] - v)
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
            # 1. Bring the batch's coordinates up to step t and take the margins at y^t
            #    (all of them before any update: a minibatch gradient).
            for q in range(lo, hi):
                i = start + (q if bsize == 0 else order[ebase + q])
                z = 0.0
                for p in range(indptr[i], indptr[i + 1]):
                    val = data[p]
                    if val == 0.0:
                        continue
                    j = indices[p]
                    m = t - last[j]
                    if m > 0:
                        y[j] = rpow[m] * y[j] + a[j] * qsum[m]
                        last[j] = t
                    z += val * y[j]
                coef[q - lo] = dphi(code, z, labels[i], smoothing) * inv
            # 2. The step: the affine part once per coordinate, then the data gradient.
            for q in range(lo, hi):
                i = start + (q if bsize == 0 else order[ebase + q])
                cq = coef[q - lo]
                for p in range(indptr[i], indptr[i + 1]):
                    val = data[p]
                    if val == 0.0:
                        continue
                    j = indices[p]
                    if last[j] == t:
                        y[j] = r * y[j] + a[j]
                        last[j] = t + 1
                    y[j] -= eta * cq * val
                    if use_ctrl:
                        G[j] += cq * val
            t += 1
    for p in range(p0, p1):
        j = pat_ind[p]
        m = T - last[j]
        if m > 0:
            y[j] = rpow[m] * y[j] + a[j] * qsum[m]
            last[j] = T
    return T


@njit(cache=True, nogil=True, parallel=True)
def _round_batch(lo, hi, rows, rule, ctl, plan_, scratch):
    """Run one batch, ``nodes[lo[c]:hi[c]]`` in chunk c, the chunks in parallel, and accumulate
    their weighted updates.

    Per chunk c: ACC[c] += w_k (Δ_k − o_k) on node k's support, where Δ_k = y_k − x and o_k
    the off-support closed form −η q_{T_k}(λx + s), and QACC[c] += w_k q_{T_k}; so the
    round's Σ w_k Δ_k = Σ_c ACC[c] − η (Σ_c QACC[c]) (λx + s).  With ``use_ctrl`` the new
    data control variates s_k⁺ = G/T_k replace ``ctrl`` on the node's pattern and
    ACC_S[c] += p_k (s_k⁺ − s_k).  Node ``nodes[b]`` reads its row orders from
    ``order[order_start[b]:]``.
    """
    # The bundles' arrays are taken out before the parallel loop: numba 0.68 loses writes
    # made inside a prange to an array read from a tuple's field there.
    pat_ptr, pat_ind = rows.pat_ptr, rows.pat_ind
    ctrl, s, use_ctrl = ctl.ctrl, ctl.s, ctl.use_ctrl
    eta, lam = rule.eta, rule.lam
    x, nodes, weights, pweights = plan_.x, plan_.nodes, plan_.weights, plan_.pweights
    order, order_start = plan_.order, plan_.order_start
    Y, LAST, A, G, COEF = scratch.Y, scratch.LAST, scratch.A, scratch.G, scratch.COEF
    RPOW, QSUM, ACC, ACC_S, QACC = scratch.RPOW, scratch.QSUM, scratch.ACC, scratch.ACC_S, scratch.QACC
    for c in prange(lo.shape[0]):
        y = Y[c]
        last = LAST[c]
        a = A[c]
        g = G[c]
        acc = ACC[c]
        acc_s = ACC_S[c]
        rpow = RPOW[c]
        qsum = QSUM[c]
        for b in range(lo[c], hi[c]):
            k = nodes[b]
            T = _node_pass(k, order_start[b], rows, rule, ctl, x, order, y, last, a, g, COEF[c],
                           rpow, qsum)
            w = weights[b]
            qT = qsum[T]
            for p in range(pat_ptr[k], pat_ptr[k + 1]):
                j = pat_ind[p]
                sj = s[j] if use_ctrl else 0.0
                off = -eta * qT * (lam * x[j] + sj)
                acc[j] += w * ((y[j] - x[j]) - off)
                if use_ctrl:
                    new = g[j] / T
                    acc_s[j] += pweights[b] * (new - ctrl[p])
                    ctrl[p] = new
            QACC[c, 0] += w * qT


# ---------------------------------------------------------------------------------------------
# Python driver
# ---------------------------------------------------------------------------------------------

class LocalSGD:
    """Local minibatch SGD on the nodes of one problem, with the per-thread scratch it needs.

    Parameters
    ----------
    problem : Problem
    epochs : int
        E ≥ 1 passes over the node's rows per round.
    batch_size : int
        B ≥ 1 rows per step, or 0 for full-batch steps (one step per epoch).
    stepsize : float
        The local step η > 0.
    mu : float
        FedProx's proximal weight μ ≥ 0 (0 for FedAvg and SCAFFOLD).
    control : bool
        Keep SCAFFOLD's data control variates (sparse, see the module docstring).
    """

    def __init__(self, problem: Problem, *, epochs: int, batch_size: int, stepsize: float,
                 mu: float = 0.0, control: bool = False):
        self.problem = problem
        ds = problem.data
        X = ds.X
        self.epochs = int(epochs)
        self.batch_size = int(batch_size)
        self.eta = float(stepsize)
        self.mu = float(mu)
        self.lam = float(problem.lam)
        self.control = bool(control)
        self.offsets = ds.offsets.astype(np.int64)
        self.sizes = ds.node_sizes.astype(np.int64)
        # Column indices stay in scipy's dtype: an int64 copy would be nnz·8 bytes (240 MB at
        # the paper's scale) for nothing.
        self.indptr = X.indptr.astype(np.int64)
        self.indices = X.indices
        self.data = X.data
        self.labels = ds.y
        support = ds.support                            # the node × feature support, sorted
        self.pat_ptr = support.ptr
        self.pat_ind = support.col
        # No scalar loss code for a model of C > 1 outputs (its loop, LocalSGDSoftmax, needs none).
        code, smoothing = loss_code(problem.loss) if problem.n_classes == 1 else (NO_CODE, 1.0)
        self.rows = NodeRows(offsets=self.offsets, indptr=self.indptr, indices=self.indices, data=self.data,
                             labels=self.labels, loss=code, smoothing=smoothing, pat_ptr=self.pat_ptr,
                             pat_ind=self.pat_ind)
        self.rule = StepRule(eta=self.eta, lam=self.lam, mu=self.mu, epochs=self.epochs,
                             bsize=self.batch_size)
        row_nnz = np.diff(self.indptr)
        self.node_nnz = np.add.reduceat(row_nnz, self.offsets[:-1]) if ds.n else row_nnz
        self.support = np.diff(self.pat_ptr)
        #: The work of a node's round, for batching and balancing chunks.
        self.work = self.epochs * self.node_nnz + 3 * self.support + 1
        B = self.batch_size
        full = B == 0
        per_epoch = np.ones_like(self.sizes) if full else -(-self.sizes // np.minimum(B, self.sizes))
        #: T_k, the number of local steps of node k per round.
        self.steps = self.epochs * per_epoch
        self.chunks = CHUNKS  # not the thread count: the same sums, bit for bit, on every machine
        d = problem.d
        C = self.chunks
        self._Y = np.zeros((C, d))
        self._LAST = np.zeros((C, d), dtype=np.int64)
        self._A = np.zeros((C, d))
        self._G = np.zeros((C, d) if self.control else (C, 1))
        self._ACC = np.zeros((C, d))
        self._ACC_S = np.zeros((C, d) if self.control else (C, 1))
        self._QACC = np.zeros((C, 1))
        maxrows = int(self.sizes.max()) if full else int(min(B, self.sizes.max()))
        self._COEF = np.zeros((C, max(1, maxrows)))
        maxT = int(self.steps.max())
        self._RPOW = np.zeros((C, maxT + 1))
        self._QSUM = np.zeros((C, maxT + 1))
        if self.control:
            #: SCAFFOLD: data control variates s_k on the node × feature pattern, and s.
            self.ctrl = np.zeros(self.pat_ind.shape[0])
            self.s = np.zeros(d)
        else:
            self.ctrl = np.zeros(0)
            self.s = np.zeros(0)

    # -- batching ---------------------------------------------------------------------------
    def plan(self, nodes: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """The batches of a round on ``nodes``: per batch, the first and the end position in
        ``nodes`` of every chunk (see :mod:`._batches`)."""
        if nodes.size == 0:
            return []
        return [(lo[:, 0].copy(), hi[:, 0].copy())
                for lo, hi in plan(self.work[nodes], self.chunks, batch_target(BATCH_WORK))]

    def orders(self, nodes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Local row orders for ``nodes``: E permutations per node (empty for full batch).

        The contract: node after node, E·n_k uniforms from ``rng.random`` shuffled by
        :func:`shuffle_segments`.  :meth:`round` draws them batch by batch with the same
        result.
        """
        if self.batch_size == 0:
            return np.zeros(0, dtype=np.int64)
        sizes = self.sizes[nodes]
        out = np.empty(self.epochs * int(sizes.sum()), dtype=np.int64)
        shuffle_segments(sizes, self.epochs, rng.random(out.size), out)
        return out

    # -- one round ----------------------------------------------------------------------------
    def round(self, x: np.ndarray, nodes: np.ndarray, weights: np.ndarray, *,
              rng: np.random.Generator | None = None, orders: np.ndarray | None = None,
              check_stop: Callable[[], None] | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """Run the local loops of ``nodes`` from x; return (Σ_k w_k Δ_k, Σ_k p_k Δs_k or None).

        Parameters
        ----------
        x : ndarray (d,)
            The server model every node starts from.
        nodes : ndarray of int
            The sampled nodes (distinct).
        weights : ndarray
            Their aggregation weights w_k (n_k / n_S for the FedAvg average).
        rng : Generator, optional
            Draws the local row orders (minibatch SGD only), as :meth:`orders` would.
        orders : ndarray of int, optional
            Explicit local row orders instead of ``rng``: for node ``nodes[b]`` a block of
            E·n_k local row indices (E permutations of 0..n_k−1), blocks in ``nodes``
            order.  Lets a test feed a reference implementation the same samples.
        check_stop : callable, optional
            Called after every batch of nodes; may raise to abandon the round, in which
            case the control variates are restored.

        Returns
        -------
        delta : ndarray (d,)
            Σ_k w_k (y_k − x).
        dS : ndarray (d,) or None
            With control variates: Σ_k (n_k/n) (s_k⁺ − s_k), the change of s.
        """
        nodes = np.asarray(nodes, dtype=np.int64)
        weights = np.asarray(weights, dtype=np.float64)
        x = np.ascontiguousarray(x, dtype=np.float64)
        full = self.batch_size == 0
        # Where each node's row orders start in the round's stream (and in ``orders``).
        block = self.epochs * self.sizes[nodes]
        starts_all = np.concatenate([[0], np.cumsum(block)[:-1]]).astype(np.int64)
        if orders is not None and not full:
            orders = np.asarray(orders, dtype=np.int64)
            if orders.shape != (int(block.sum()),):
                raise ValueError(f"orders must hold {int(block.sum())} local row indices, "
                                 f"got shape {orders.shape}")
        elif not full and rng is None:
            raise ValueError("minibatch steps need rng or orders")
        batches = self.plan(nodes)
        streams = None
        if not full and orders is None and batches:
            # One copy of the stream per chunk, advanced to the chunk's first node, so every
            # node draws the uniforms :meth:`orders` would give it whatever the batches.
            streams = [_stream_at(rng, int(starts_all[b]) if b < nodes.size else 0)
                       for b in batches[0][0]]
        pweights = self.sizes[nodes] / self.problem.n
        self._ACC.fill(0.0)
        self._ACC_S.fill(0.0)
        self._QACC.fill(0.0)
        s = self.s if self.control else np.zeros(0)
        no_order = np.zeros(0, dtype=np.int64)
        scratch = Scratch(Y=self._Y, LAST=self._LAST, A=self._A, G=self._G, COEF=self._COEF, RPOW=self._RPOW,
                          QSUM=self._QSUM, ACC=self._ACC, ACC_S=self._ACC_S, QACC=self._QACC)
        backups: list[tuple[np.ndarray, np.ndarray]] = []
        try:
            for lo, hi in batches:
                if full:
                    order, ostart = no_order, np.zeros(nodes.size, dtype=np.int64)
                elif orders is not None:
                    order, ostart = orders, starts_all
                else:
                    order, ostart = self._draw(nodes, lo, hi, streams)
                if self.control:
                    idx = _pattern_positions(self.pat_ptr, _slices(nodes, lo, hi))
                    backups.append((idx, self.ctrl[idx]))
                self._run_batch(lo, hi, Control(ctrl=self.ctrl, s=s, use_ctrl=self.control),
                                RoundPlan(x=x, nodes=nodes, weights=weights, pweights=pweights, order=order,
                                          order_start=ostart),
                                scratch)
                if check_stop is not None:
                    check_stop()
        except BaseException:
            for idx, old in backups:
                self.ctrl[idx] = old
            raise
        off = self.lam * x + s if self.control else self.lam * x
        delta = self._ACC.sum(axis=0) - self.eta * float(self._QACC.sum()) * off
        return delta, (self._ACC_S.sum(axis=0) if self.control else None)

    def _run_batch(self, lo, hi, ctl: Control, plan_: RoundPlan, scratch: Scratch) -> None:
        """One batch of the round on the compiled loop (a subclass runs another model's)."""
        _round_batch(lo, hi, self.rows, self.rule, ctl, plan_, scratch)

    def _draw(self, nodes, lo, hi, streams) -> tuple[np.ndarray, np.ndarray]:
        """This batch's row orders, chunk by chunk from the chunk's stream, and where each
        node's orders start in them (indexed by position in ``nodes``)."""
        parts = []
        ostart = np.zeros(nodes.size, dtype=np.int64)
        pos = 0
        for c in range(lo.size):
            part = nodes[lo[c]:hi[c]]
            sizes = self.sizes[part]
            block = self.epochs * sizes
            ostart[lo[c]:hi[c]] = pos + np.concatenate([[0], np.cumsum(block)[:-1]])
            out = np.empty(int(block.sum()), dtype=np.int64)
            shuffle_segments(sizes, self.epochs, streams[c].random(out.size), out)
            parts.append(out)
            pos += out.size
        return np.concatenate(parts), ostart


def _stream_at(rng: np.random.Generator, offset: int) -> np.random.Generator:
    """An independent copy of ``rng`` moved ``offset`` doubles ahead (one 64-bit draw each)."""
    bits = type(rng.bit_generator)()
    bits.state = rng.bit_generator.state
    bits.advance(offset)
    return np.random.Generator(bits)


def _slices(nodes: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The nodes of one batch: ``nodes[lo[c]:hi[c]]`` over the chunks."""
    return np.concatenate([nodes[a:b] for a, b in zip(lo, hi)])


def _pattern_positions(pat_ptr: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """Positions in the pattern's data array of the rows ``nodes`` (vectorised ranges)."""
    lo = pat_ptr[nodes]
    lens = pat_ptr[nodes + 1] - lo
    if lens.sum() == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.repeat(lo - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
    return starts + np.arange(int(lens.sum()))
