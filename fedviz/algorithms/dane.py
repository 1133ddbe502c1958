"""DANE, the Distributed Approximate Newton method: Algorithm 2 of the paper (Section 3.4).

Each iteration takes two rounds.  The server collects ∇f(w^t) (eq. 7) and sends it
back; every node k solves its subproblem (eq. 10)

    w_k = argmin_w  F_k(w) − a_kᵀw + (μ/2)‖w − w^t‖²,   a_k = ∇F_k(w^t) − η∇f(w^t),

and the server averages, w^{t+1} = (1/K) Σ_k w_k.

Two local solvers:

``'exact'``
    Newton-CG on every node's subproblem to a relative gradient tolerance (or to the gradient's
    rounding level, where that is larger), vectorised over
    nodes (:class:`LocalNewton`): the nodes' supports are stacked into one block-diagonal
    matrix, so one sparse product serves all nodes, while each node keeps its own CG
    scalars, line search and stopping test — the same iterates as K separate solvers.
``'svrg'``
    Inexact DANE (Section 3.5): ``local_passes`` passes of SVRG (Algorithm 1) over the
    subproblem, each of ``local_steps`` uniform samples, started at w^t.  The subproblem's
    full gradient at a snapshot w̃ is computed from its definition,
    ∇F_k(w̃) − a_k + μ(w̃ − w^t), with a_k formed from ∇F_k(w^t) as above — at w̃ = w^t it
    equals η∇f(w^t) only up to rounding, so Proposition 1 (one pass with η = 1, μ = 0 is
    naive FSVRG, Algorithm 3; same sample stream, same iterates) is a real check.

Off a node's support (features absent from its data), F_k is the regulariser alone, so
the subproblem there is a one-dimensional quadratic with the closed-form minimiser
(a_k,j + μ w^t_j)/(λ + μ), a_k,j = λw^t_j − η g_j, the same on every such node.  With
μ = 0 and λ = 1/n that is a step of η g_j/λ — one reason DANE fails on sparse,
non-IID data (it has neither property (B) nor (C) of Section 3.1).  With μ = 0 it also
degrades as K grows, even on IID data, since the local Hessians drift apart (the
paper's remark after Algorithm 2, after Shamir et al., Figure 3); a larger μ stabilises
it at the price of shorter steps.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from ..problems.budget import StateSize
from ..problems.objective import Problem
from ._svrg_kernels import (
    SAMPLE_STREAM,
    LocalSVRG,
    uniform_samples,
)
from ..errors import ParameterError
from .base import Algorithm, Param, default_stepsize

#: Newton iterations and CG iterations per Newton step of the exact local solver.
MAX_NEWTON = 50
MAX_CG = 500
#: A node's subproblem gradient is taken for zero once ‖∇Φ_k‖ ≤ ROUNDING · ε · ‖G_k‖, G_k the magnitudes
#: summed into it (:meth:`LocalNewton._magnitudes`): below that its computed value is rounding, and Newton
#: can only wander (measured: it stalls at 0.08–0.25 ε‖G_k‖ on identical-nodes, where after the first
#: round every w^t is the optimum and the relative test alone asked 50 Newton steps of up to 500 CG
#: iterations of every round, 2 s a round on 3,000 rows).
ROUNDING = 4.0
#: The safeguard's μ (see the ``safeguard`` help text): it starts at MU_START · L̄, is multiplied by MU_UP
#: after a step that raised f and divided by MU_DOWN after one that did not — Levenberg–Marquardt's rule
#: on DANE's proximal weight.  Measured (30 iterations; f − f* against the best fixed μ of a ×4 grid from
#: 2⁻¹² to 4, where μ = 0 diverges on all four): 0.87× on google-plus-small, 0.07× on a9a iid (100 nodes),
#: 0.66× on a9a Dirichlet(0.5), 0.99× on dna class 3 — a fixed μ must stay where the first steps are stable,
#: the adapted one shrinks as wᵗ nears w*.  Started at L̄/64 it did as well there, but took 12 iterations
#: to 1e-9 on identical-nodes (8 from L̄/1024; the paper's μ = 0: one).
MU_START = 1.0 / 1024
MU_UP = 8.0
MU_DOWN = 2.0
#: :meth:`DANE.first_iteration_cost`: Newton steps assumed for a non-quadratic loss (4–5 measured on
#: google-plus-small and a9a at local_tol 1e-10), and the passes over the support slots and the rows
#: that one CG iteration makes besides its two products with B (``_cg_update``'s two, the direction's,
#: the element-wise products and the segment sums; D ∘ Bp and the row weights).
NEWTON_STEPS = 5
#: CG iterations a Newton step takes where μ ≥ λ, as a fraction of CG's bound ½√κ·ln(2/ε): counted in DANE's
#: first iteration on google-plus-small and a9a at μ from L̄/4096 to L̄, 0.06–0.17 of the bound (CG converges
#: faster than its worst case on the subproblems' clustered spectra).  Below λ the curvature off a node's
#: rows is about λ alone and CG runs to its cap MAX_CG (counted at μ = 0: 2,000 and 2,428 of 2,500).
CG_PER_BOUND = 0.1
SLOT_OPS = 10
ROW_OPS = 4


@numba.njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def _matvec_plus(indptr, indices, data, x, a, v):
    """A x + a v for a CSR matrix A, rows in parallel.

    Each row is summed left to right from 0, as SciPy's CSR product does, and a v is
    added after, as NumPy's ``A @ x + a * v`` does: bitwise the same result on every
    core (``a = 0`` for a plain product).
    """
    out = np.empty(indptr.size - 1)
    for i in prange(indptr.size - 1):
        acc = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            acc += data[p] * x[indices[p]]
        out[i] = acc + a * v[i] if a != 0.0 else acc
    return out


@numba.njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def _abs_matvec(indptr, indices, data, x):
    """|A| |x| for a CSR matrix A, rows in parallel, without a copy of |A|."""
    out = np.empty(indptr.size - 1)
    for i in prange(indptr.size - 1):
        acc = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            acc += abs(data[p] * x[indices[p]])
        out[i] = acc
    return out


@numba.njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def _segment_sums(ptr, x):
    """out[k] = x[ptr[k]] + ... + x[ptr[k+1] − 1], added left to right from 0.

    Bitwise what ``np.bincount(segment_ids, weights=x)`` gives for contiguous segments,
    but in parallel and without the scatter: several times faster on the paper's 13M
    support slots, which keeps every stretch between two Stop checks short.
    """
    out = np.zeros(ptr.size - 1)
    for k in prange(ptr.size - 1):
        acc = 0.0
        for i in range(ptr[k], ptr[k + 1]):
            acc += x[i]
        out[k] = acc
    return out


@numba.njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def _cg_update(ptr, done, rr, p, Hp, x, r):
    """One CG update of every node at once, in place; returns the new ‖r_k‖².

    α_k = rr_k / (p_k·Hp_k) (0 for a node that is done), x += α p, r −= α Hp: the same
    operations, in the same order, as the NumPy expressions they replace, fused into two
    passes over the slots.
    """
    rr_new = np.zeros(ptr.size - 1)
    for k in prange(ptr.size - 1):
        php = 0.0
        for i in range(ptr[k], ptr[k + 1]):
            php += p[i] * Hp[i]
        alpha = 0.0 if done[k] else rr[k] / php
        acc = 0.0
        for i in range(ptr[k], ptr[k + 1]):
            x[i] += alpha * p[i]
            r[i] -= alpha * Hp[i]
            acc += r[i] * r[i]
        rr_new[k] = acc
    return rr_new


@numba.njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def _cg_direction(ptr, now, beta, r, p):
    """p ← r + β p per node, and 0 for a node that is done, in place."""
    for k in prange(ptr.size - 1):
        for i in range(ptr[k], ptr[k + 1]):
            p[i] = 0.0 if now[k] else r[i] + beta[k] * p[i]


def _never() -> None:
    """A Stop check that never stops (no runner attached)."""


class LocalNewton:
    """Minimise every node's Φ_k(v) = F_k(v) − ℓ_kᵀv + (μ/2)‖v − c_k‖² at once, on its support.

    Vectors live in "slot space": node k's support coordinates, stacked (see
    :class:`~fedviz.data.dataset.NodeSupport`).  B = Diag(X_1, ..., X_K) restricted to the
    supports gives all margins with one product.  Newton-CG (Nocedal & Wright,
    Algorithm 7.1) runs on all nodes in lockstep, but every quantity that couples
    coordinates — CG's α and β, the Armijo backtracking, the stopping test — is a per-node
    segment sum, so nodes never influence each other; a node that has converged is frozen.

    Every operation is on all nodes at once (at the paper's scale a sparse product or a
    pass over the 13M slots takes 50–150 ms), and the solver checks Stop between them.

    Parameters
    ----------
    problem : Problem
    """

    def __init__(self, problem: Problem):
        self.problem = problem
        sup = problem.data.support
        self.support = sup
        self.B = sup.block_matrix()
        self.BT = self.B.T.tocsr()
        ds = problem.data
        self.K = ds.n_nodes
        self.row_node = ds.node_of_row
        self.slot_node = sup.node
        # Slots and rows are contiguous per node: segment sums and per-node spreads need no
        # index arrays.
        self._slot_ptr = np.ascontiguousarray(sup.ptr, dtype=np.int64)
        self._slot_count = np.diff(self._slot_ptr)
        self._row_ptr = np.ascontiguousarray(ds.offsets, dtype=np.int64)
        self._row_count = np.diff(self._row_ptr)
        self.row_weight = 1.0 / np.repeat(ds.node_sizes, ds.node_sizes).astype(np.float64)
        #: Example gradients (and Hessian-vector products, counted the same) of the last solve.
        self.work = 0
        self.newton_iterations = 0
        #: The largest ‖∇Φ_k‖ / ‖∇Φ_k(start)‖ over nodes after the last solve.
        self.residual = 0.0

    def _B(self, x):
        """B x (the margins of every node's own vector), on every core."""
        B = self.B
        return _matvec_plus(B.indptr, B.indices, B.data, x, 0.0, x[:1])

    def _BT(self, x, a=0.0, v=None):
        """Bᵀ x + a v, on every core."""
        BT = self.BT
        return _matvec_plus(BT.indptr, BT.indices, BT.data, x, a, x[:1] if v is None else v)

    def _seg(self, x):
        return _segment_sums(self._slot_ptr, x)

    def _rows(self, x):
        return _segment_sums(self._row_ptr, x)

    def _on_slots(self, per_node):
        """A per-node array spread over the node's slots (``per_node[slot_node]``)."""
        return np.repeat(per_node, self._slot_count)

    def _on_rows(self, per_node):
        return np.repeat(per_node, self._row_count)

    def _curvature(self, z):
        """The row-weighted curvature of the loss at the margins z (φ''(z_i)/n_k for C = 1)."""
        return self.problem.loss.deriv2(z, self.problem.y) * self.row_weight

    def _curvature_product(self, D, u):
        """The curvature applied to margins u: D ∘ u for C = 1."""
        return D * u

    def _active_rows(self, active) -> int:
        return int(self.problem.data.node_sizes[active].sum())

    def _values(self, v, z, lin, center, mu):
        """Φ_k(v) per node, up to terms constant in v."""
        pb = self.problem
        per_slot = 0.5 * pb.lam * v * v - lin * v
        if mu:
            per_slot = per_slot + 0.5 * mu * (v - center) ** 2
        return self._rows(pb.loss.value(z, pb.y) * self.row_weight) + self._seg(per_slot)

    def _grad(self, v, z, lin, center, mu):
        pb = self.problem
        g = self._BT(pb.loss.deriv(z, pb.y) * self.row_weight, pb.lam, v) - lin
        if mu:
            g = g + mu * (v - center)
        return g

    def _magnitudes(self, v, z, lin, center, mu):
        """The magnitudes summed into :meth:`_grad`'s entries, |B|ᵀ|φ'(z)/n_k| + λ|v| + |lin| + μ|v − c|:
        the scale of the gradient's rounding error."""
        pb = self.problem
        BT = self.BT
        out = _abs_matvec(BT.indptr, BT.indices, BT.data, self._row_magnitudes(z))
        out = self._per_entry(out) + pb.lam * np.abs(v) + np.abs(lin)
        return out + mu * np.abs(v - center) if mu else out

    def _row_magnitudes(self, z):
        pb = self.problem
        return np.abs(pb.loss.deriv(z, pb.y)) * self.row_weight

    def _per_entry(self, per_slot):
        return per_slot

    def solve(self, start, lin, center, mu, rtol, check_stop=None) -> np.ndarray:
        """The minimisers in slot space, each to ‖∇Φ_k‖ ≤ rtol · ‖∇Φ_k(start)‖, or to the rounding
        level of ∇Φ_k (:data:`ROUNDING`) where that is larger: a start already at the minimiser up
        to rounding (DANE's w^t once it has converged) takes no Newton step.

        ``check_stop`` is called between the solver's large operations.
        """
        pb = self.problem
        check = check_stop or _never
        lam, seg = pb.lam, self._seg
        v = np.array(start, dtype=np.float64)
        z = self._B(v)
        check()
        g = self._grad(v, z, lin, center, mu)
        check()
        gn = np.sqrt(seg(g * g))
        gn0 = np.where(gn > 0, gn, 1.0)
        quadratic = pb.loss.name == "squared"
        G = self._magnitudes(v, z, lin, center, mu)
        target = np.maximum(rtol * gn, ROUNDING * np.finfo(np.float64).eps * np.sqrt(seg(G * G)))
        active = gn > target
        self.work = self._active_rows(active)
        self.newton_iterations = 0
        for _ in range(MAX_NEWTON):
            if not active.any():
                break
            check()
            D = self._curvature(z)
            # Forcing term min(0.1, √(‖g‖/‖g_0‖))·‖g‖, relative per node: superlinear
            # convergence (Nocedal & Wright, Theorem 7.2) whatever the scale of the node's g.
            # A quadratic (squared loss) is solved by one CG run to the target itself.
            forcing = target if quadratic else np.minimum(0.1, np.sqrt(gn / gn0)) * gn
            b = np.where(self._on_slots(active), -g, 0.0)
            check()
            p = self._cg(D, b, active, forcing, lam + mu, check)
            # Per-node Armijo backtracking along p, blind to changes below the rounding of
            # f (near the minimiser the decrease is not measurable; ‖∇Φ_k‖ decides there).
            f0 = self._values(v, z, lin, center, mu)
            slack = 1e-13 * (np.abs(f0) + 1.0)
            check()
            Bp = self._B(p)
            slope = seg(g * p)
            t = np.where(active, 1.0, 0.0)
            for _ in range(60):
                check()
                v_new = v + self._on_slots(t) * p
                z_new = z + self._on_rows(t) * Bp
                check()
                f_new = self._values(v_new, z_new, lin, center, mu)
                bad = active & (f_new > f0 + 1e-4 * t * slope + slack) & (t > 1e-12)
                if not bad.any():
                    break
                t[bad] *= 0.5
            v, z = v_new, z_new
            check()
            g = self._grad(v, z, lin, center, mu)
            check()
            gn = np.sqrt(seg(g * g))
            self.work += self._active_rows(active)
            self.newton_iterations += 1
            active = active & (gn > target)
        self.residual = float(np.max(gn / gn0, initial=0.0))
        return v

    def _cg(self, D, b, active, tol, shift, check):
        """Per-node conjugate gradients for H_k x = b_k, H = Bᵀ Diag(D) B + shift·I."""
        ptr = self._slot_ptr
        x = np.zeros_like(b)
        r = b.copy()
        p = r.copy()
        rr = self._seg(r * r)
        done = ~active | (np.sqrt(rr) <= tol)
        for _ in range(MAX_CG):
            if done.all():
                break
            check()
            Bp = self._B(p)
            check()
            Hp = self._BT(self._curvature_product(D, Bp), shift, p)
            check()
            self.work += self._active_rows(~done)
            rr_new = _cg_update(ptr, done, rr, p, Hp, x, r)
            now = done | (np.sqrt(rr_new) <= tol)
            beta = np.where(now, 0.0, rr_new / np.where(rr > 0, rr, 1.0))
            _cg_direction(ptr, now, beta, r, p)
            rr = rr_new
            done = now
        return x


class LocalNewtonSoftmax(LocalNewton):
    """:class:`LocalNewton` for the d × C model of softmax regression (issue 22).

    Slot space holds C values per support slot, flat and row-major (node k's entries are
    ``ptr[k]·C .. ptr[k+1]·C``), so the per-node segment sums, CG updates and spreads are the
    binary ones on C-fold segments; the products with B move a slot's C values per nonzero
    (:class:`~fedviz.problems._blocks.RowBlocks`) and the curvature is the loss's per-example
    C × C blocks (:meth:`~fedviz.problems.losses.Loss.curvature_product`), weighted 1/n_k.
    """

    def __init__(self, problem: Problem):
        super().__init__(problem)
        from ..problems._blocks import RowBlocks

        self.C = problem.n_classes
        self._Bb, self._BTb = RowBlocks(self.B), RowBlocks(self.BT)
        self._slot_ptr = self._slot_ptr * self.C
        self._slot_count = self._slot_count * self.C
        self._weight_col = self.row_weight[:, None]

    def _B(self, x):
        return self._Bb.matmat(x.reshape(-1, self.C))

    def _BT(self, x, a=0.0, v=None):
        out = self._BTb.matmat(x).reshape(-1)
        return out + a * v if a != 0.0 else out

    def _on_rows(self, per_node):
        return np.repeat(per_node, self._row_count)[:, None]

    def _grad(self, v, z, lin, center, mu):
        pb = self.problem
        g = self._BT(pb.loss.deriv(z, pb.y) * self._weight_col, pb.lam, v) - lin
        if mu:
            g = g + mu * (v - center)
        return g

    def _curvature(self, z):
        return self.problem.loss.curvature(z, self.problem.y)

    def _row_magnitudes(self, z):
        """Σ_c |∂φ/∂z_c| / n_k per row: a bound on every class's term of the row."""
        pb = self.problem
        return np.abs(pb.loss.deriv(z, pb.y)).sum(axis=1) * self.row_weight

    def _per_entry(self, per_slot):
        return np.repeat(per_slot, self.C)

    def _curvature_product(self, D, u):
        return self.problem.loss.curvature_product(D, u) * self._weight_col

    def slot_index(self) -> np.ndarray:
        """The flat model index j·C + c of every slot-space entry (slot of feature j, class c)."""
        return (self.support.col[:, None] * self.C + np.arange(self.C)).ravel()


def local_newton(problem: Problem) -> LocalNewton:
    """The exact local solver for the problem's model: binary (C = 1) or softmax."""
    return LocalNewton(problem) if problem.n_classes == 1 else LocalNewtonSoftmax(problem)


class DANE(Algorithm):
    name = "dane"
    title = "DANE"
    reference = "Algorithm 2, Section 3.4 (inexact: Section 3.5)"
    #: Section 3.4: "Bigger μ makes the algorithm more stable at the cost of slower
    #: convergence"; μ = 0 diverges as K grows (DANE's Figure 3).  η = 1 gives property (A)
    #: and (D), so lowering it is not the remedy.
    divergence_hint = ("mu", "raise")
    #: Softmax (issue 22): the exact solver on the d × C model; the 'svrg' solver is refused there.
    multiclass = True
    multiclass_reason = ("its inexact solver (solver='svrg') works on one weight vector (binary and regression "
                         "models only); the exact solver takes softmax")
    state = StateSize(entries=2, support=30, rows=18, model=4)  # tracemalloc's peaks × 2.2 (tests/unit/test_budget.py)
    params = (
        Param("eta", "float", 1.0,
              "η, the weight of the global gradient in the linear term a_k = ∇F_k(w^t) − η∇f(w^t).  "
              "Default 1 (the paper's default), with which identical nodes converge in one "
              "iteration (property (D)).", low=0, low_open=True),
        Param("mu", "float", None,
              "μ ≥ 0, the proximal weight (μ/2)‖w − w^t‖² of the subproblem; larger μ is more stable "
              "but slower, and the paper notes μ = 0 can diverge as K grows.  Default with the "
              "safeguard: L̄/1024 to start, then adapted (see safeguard); without it, 0 (the paper's "
              "default).", low=0),
        Param("solver", "choice", "exact",
              "Local solver of the subproblem (10).  'exact': Newton-CG to local_tol (DANE as "
              "stated, slower).  'svrg': local_passes passes of SVRG started at w^t (inexact "
              "DANE; with η = 1, μ = 0 and one pass it is naive FSVRG, Proposition 1).",
              choices=("exact", "svrg")),
        Param("local_tol", "float", 1e-10,
              "'exact' solver: stop when every node's subproblem gradient has shrunk by this "
              "factor from its value at w^t (which is η∇f(w^t)), or to the rounding error of its "
              "computation where that is larger (at the optimum, no Newton step).", low=0, high=1, low_open=True,
              high_open=True, log=True),
        Param("safeguard", "bool", True,
              "Monotone safeguard with an adaptive μ (not in the paper; Levenberg–Marquardt's rule): "
              "the gradient round of each iteration also gives f at the last local round's result "
              "w^{t+1}; if f rose above f(w^t), the server keeps w^t and multiplies μ by 8, else it "
              "adopts w^{t+1} and halves μ.  It costs no extra round (f comes with the gradient) but a "
              "rejected step's rounds and work stay counted, and the model shown is the last accepted "
              "point, one local round behind the newest trial.  Off: Algorithm 2 as printed, with a "
              "fixed μ (default 0)."),
        Param("local_passes", "int", 1,
              "'svrg' solver: SVRG outer iterations on the subproblem (each recomputes its local "
              "full gradient after the first).  Default 1, the setting of Proposition 1.",
              low=1, high=1000),
        Param("local_steps", "int", None,
              "'svrg' solver: stochastic steps per pass on every node.  Default round(n/K), the "
              "mean node size, as for naive FSVRG.", low=1, high=1_000_000),
        Param("stepsize", "float", None,
              "'svrg' solver: stepsize h.  Default 1/(2(L̄ + μ)), L̄ = (1/γ) mean‖x_i‖² + λ: the "
              "subproblem's average component smoothness (naive FSVRG's default when μ = 0).",
              low=0, low_open=True, log=True),
    )

    @classmethod
    def first_iteration_cost(cls, pb: Problem, hyper: dict | None = None) -> dict:
        """An estimate of the work of DANE's first iteration on ``pb`` (the exact solver's cost;
        the 'svrg' solver's is one pass, as naive FSVRG's).

        The exact solver (:class:`LocalNewton`) runs Newton-CG on all nodes in lockstep, so
        its cost is the number of CG iterations of the slowest node times the work of one:
        two products with B (nnz multiply-adds each: B holds X's nonzeros), about
        :data:`SLOT_OPS` passes over the S support slots and :data:`ROW_OPS` over the n rows.
        CG on the subproblem's Hessian (1/n_k)X_kᵀDX_k + (λ + μ)I needs at most about
        ½√κ · ln(2/ε) iterations to shrink the residual by ε (Nocedal & Wright, eq. (5.36)),
        κ ≈ (L̄ + μ)/(λ + μ) with L̄ the average example smoothness, and takes
        :data:`CG_PER_BOUND` of that where μ ≥ λ (counted), capped at :data:`MAX_CG` per Newton step; μ is the
        run's first (the safeguard's start: L̄/1024 by default); the Newton steps (local_tol down to 1e-10) are
        :data:`NEWTON_STEPS` for a non-quadratic loss, one for the squared loss.

        Returns ``{"solver", "cg_iterations", "ops_per_cg", "ops"}``; ``ops`` is multiply-adds.
        """
        hp = {p.name: p.default for p in cls.params}
        hp.update(hyper or {})
        hp["mu"] = cls._start_mu(pb, hp)
        n, nnz, K = pb.n, int(pb.data.X.nnz), pb.data.n_nodes
        if hp["solver"] != "exact":
            m = hp["local_steps"] or pb.mean_node_size
            per_row = nnz / max(1, n)
            ops = 2 * nnz + hp["local_passes"] * K * m * 2 * per_row + (hp["local_passes"] - 1) * 2 * nnz
            return {"solver": "svrg", "cg_iterations": 0, "ops_per_cg": 0, "ops": float(ops)}
        S = int(pb.data.support.col.size)
        mu = float(hp["mu"])
        kappa = (pb.average_example_smoothness + mu) / (pb.lam + mu)
        share = CG_PER_BOUND if mu >= pb.lam else 1.0
        per_newton = min(MAX_CG, int(np.ceil(share * 0.5 * np.sqrt(kappa) * np.log(2.0 / hp["local_tol"]))))
        steps = 1 if pb.loss.name == "squared" else NEWTON_STEPS
        cg = steps * per_newton
        ops_per_cg = 2 * nnz + SLOT_OPS * S + ROW_OPS * n
        return {"solver": "exact", "cg_iterations": cg, "ops_per_cg": ops_per_cg, "ops": float(cg * ops_per_cg)}

    @staticmethod
    def _start_mu(pb, hp) -> float:
        """μ at the start: the given one, else L̄/1024 with the safeguard and the paper's 0 without."""
        if hp["mu"] is not None:
            return float(hp["mu"])
        return MU_START * pb.average_example_smoothness if hp["safeguard"] else 0.0

    @classmethod
    def _derive(cls, pb, hp) -> dict:
        """μ at the start, and the 'svrg' solver's m and h (the exact solver uses neither); h
        follows μ when the safeguard changes it."""
        out = {}
        if hp["mu"] is None:
            out["mu"] = cls._start_mu(pb, hp)
        if hp["solver"] == "exact":
            return out
        if hp["local_steps"] is None:
            out["local_steps"] = pb.mean_node_size
        if hp["stepsize"] is None:
            out["stepsize"] = 0.5 / (pb.average_example_smoothness + cls._start_mu(pb, hp))
        return out

    @classmethod
    def softmax_refusal(cls, hyper=None) -> str | None:
        """Inexact DANE (solver='svrg') does not take softmax; the exact solver does."""
        if dict(hyper or {}).get("solver", "exact") == "exact":
            return None
        return f"inexact DANE does not take softmax: {cls.multiclass_reason}"

    def setup(self):
        pb = self.problem
        K = pb.data.n_nodes
        self.eta = self.hp["eta"]
        #: μ now: the safeguard changes it after every trial (see _check_trial).
        self.mu = self._start_mu(pb, self.hp)
        #: The safeguard's state: the last accepted point (w, X w, f, ∇f, training error, node sums),
        #: the trial point of the last local round, and the number of trials rejected so far.
        self._accepted = None
        self._trial = None
        self.rejected = 0
        if self.hp["solver"] == "exact":
            self.local = local_newton(pb)
            self.h = None
        elif pb.n_classes > 1:
            raise ParameterError("dane.solver", "svrg",
                                 f"'exact' for a softmax model (C = {pb.n_classes}): inexact DANE's SVRG "
                                 "solver takes binary and regression models only")
        else:
            self.m = self.hp["local_steps"] or self.derived["local_steps"]
            self.passes = self.hp["local_passes"]
            self.h = default_stepsize(self.hp["stepsize"], self.derived.get("stepsize"))
            self.engine = LocalSVRG(pb)
            self.steps = np.full(K, self.m, dtype=np.int64)
            self.sample_ptr = np.arange(K + 1, dtype=np.int64) * (self.m * self.passes)

    def _step(self):
        pb = self.problem
        # Round 1: ∇f(w^t) (with the safeguard, at the trial point, which it adopts or not).
        # Round 2: ∇f(w^t) down, the local solutions w_k up.
        if self.hp["safeguard"]:
            self._check_trial()
        z = self.margins()
        g = self.gradient()
        if self.h is not None and self.hp["stepsize"] is None:
            self.h = 0.5 / (pb.average_example_smoothness + self.mu)  # the default h follows μ
        if not (np.all(np.isfinite(g)) and np.all(np.isfinite(self.w))):
            raise FloatingPointError("the iterate or its gradient is not finite")
        # Off a node's support ∇F_k(w^t) is λw^t, so there a_k = λw^t − η∇f(w^t) on every node.
        a_off = pb.lam * self.w - self.eta * g
        if self.hp["solver"] == "exact":
            w_new, work = self._exact(z, g, a_off)
        else:
            w_new, work = self._svrg(z, g, a_off)
        self.grad_evals += pb.n + work
        self.count_round()
        self.count_round()
        if not self.hp["safeguard"]:
            self.w = w_new
            return
        # The server's model stays the last accepted point; the next gradient round judges w_new.
        self.hold_trial(w_new, self._accepted)

    def _check_trial(self) -> None:
        """The safeguard's round 1 (:meth:`judge_trial`): the server adopts the trial point w^{t+1}
        when f(w^{t+1}) ≤ f(w^t) and halves μ, else keeps w^t and multiplies μ by 8.  Leaves
        ``self.w`` at the point the local round starts from, its pass's figures cached."""
        first = self._trial is None
        adopted, self._accepted = self.judge_trial(self._trial, self._accepted)
        if not first:
            if adopted:
                self.mu /= MU_DOWN
            else:
                self.rejected += 1
                self.mu = MU_UP * self.mu if self.mu > 0 else MU_START * self.problem.average_example_smoothness
        self._trial = None
        self.adopt(self._accepted)

    def _exact(self, z, g, a_off):
        """Every subproblem minimised by :class:`LocalNewton`; the plain average of the w_k."""
        pb = self.problem
        loc = self.local
        sup = loc.support
        if pb.n_classes > 1:
            return self._exact_softmax(z, g, a_off)
        wt = self.w[sup.col]
        # a_k on the supports, from its definition: ∇F_k(w^t) − η∇f(w^t).
        grad_Fk = loc._BT(pb.loss.deriv(z, pb.y) * loc.row_weight, pb.lam, wt)
        self.check_stop()
        a_k = grad_Fk - self.eta * g[sup.col]
        self.check_stop()
        v = loc.solve(wt, a_k, wt, self.mu, self.hp["local_tol"], self.check_stop)
        self.check_stop()
        # Off its support node k's minimiser is (a_k,j + μ w^t_j)/(λ + μ), the same on every node.
        w_off = (a_off + self.mu * self.w) / (pb.lam + self.mu)
        K = pb.data.n_nodes
        w_new = w_off + np.bincount(sup.col, weights=v - w_off[sup.col], minlength=pb.d) / K
        return w_new, loc.work

    def _exact_softmax(self, z, g, a_off):
        """:meth:`_exact` on the d × C model: slot space holds a support feature's C values."""
        pb = self.problem
        loc = self.local
        idx = loc.slot_index()
        wt = self.w[idx]
        grad_Fk = loc._BT(pb.loss.deriv(z, pb.y) * loc._weight_col, pb.lam, wt)
        self.check_stop()
        a_k = grad_Fk - self.eta * g[idx]
        v = loc.solve(wt, a_k, wt, self.mu, self.hp["local_tol"], self.check_stop)
        self.check_stop()
        w_off = (a_off + self.mu * self.w) / (pb.lam + self.mu)
        w_new = w_off + np.bincount(idx, weights=v - w_off[idx], minlength=pb.size) / pb.data.n_nodes
        return w_new, loc.work

    def _svrg(self, z, g, a_off):
        """``local_passes`` SVRG passes on every subproblem (the kernel forms a_k on the
        supports); the subproblem's gradient at w^t off the supports is λw^t − a_off."""
        pb = self.problem
        K = pb.data.n_nodes
        c_off = pb.lam * self.w - a_off
        samples = uniform_samples(self.rng(SAMPLE_STREAM), pb.data.node_sizes,
                                  self.steps * self.passes)
        delta = self.engine.run(self.w, z, g, c_off, samples, self.sample_ptr, self.steps,
                                np.full(K, self.h), np.full(K, 1.0 / K), lam=pb.lam,
                                rho=pb.lam + self.mu, passes=self.passes, dane=True,
                                eta=self.eta, mu=self.mu, check_stop=self.check_stop)
        # One example gradient per step, and a local full gradient for every pass after the first.
        work = int(self.steps.sum()) * self.passes + (self.passes - 1) * pb.n
        return self.w + delta, work
