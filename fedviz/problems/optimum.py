"""The optimum w* of a :class:`~fedviz.problems.objective.Problem`: the OPT line of the paper's Figure 2.

A truncated Newton method (Newton-CG with Hessian-vector products and an Armijo line
search, as in Nocedal & Wright, Algorithm 7.1) drives ‖∇f‖ below 1e-10.  f is
λ-strongly convex and smooth, so the Newton steps converge quadratically once close
and the line search keeps the first steps safe.  CG is preconditioned by the Hessian's
diagonal, Σ_i φ''_i x_ij² / n + λ: with λ = 1/n and bag-of-words features whose
frequencies span orders of magnitude, that cuts the Hessian products about threefold.  Results are cached per
(data set fingerprint, loss, λ).

The method works in the model's dC dimensions (issue 22: the model is d × C, flat and
row-major, :class:`~fedviz.problems.objective.Problem`): the gradient is Xᵀ φ'(XW)/n + λW, the
Hessian products go through the loss's per-example curvature blocks
(:meth:`~fedviz.problems.losses.Loss.curvature_product`) and the preconditioner is their
diagonals' Xᵀ-weighted sums.  For C = 1 every one of these is the binary operation it was.

For C > 1 the diagonal preconditioner fails (softmax's Hessian is only λ along W + u1ᵀ, which
it cannot see): FedProx's Synthetic(1, 1) took over a thousand Hessian products.  So a softmax problem
whose model is small (dC ≤ :data:`DENSE_MAX_SIZE`, n (dC)² ≤ :data:`DENSE_MAX_WORK`: every
multiclass file and generator fedviz ships) solves each Newton system exactly with the dense
Hessian (:func:`_dense_newton_direction`; Synthetic in 11 Newton steps and no CG), and a larger
one runs CG preconditioned by each feature's C × C diagonal block (:class:`_BlockPreconditioner`).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

import numba
import numpy as np
import scipy.linalg as sla

from ..errors import FedvizError
from .objective import Problem


@dataclass(frozen=True)
class Optimum:
    """w*, f* = f(w*), ‖∇f(w*)‖, the test error at w*, and how it was found."""

    w: np.ndarray
    objective: float
    grad_norm: float
    test_error: float
    train_error: float
    newton_iterations: int
    hessian_products: int
    seconds: float
    #: Newton steps whose system was solved with the dense Hessian (softmax with a small model dC).
    dense_hessians: int = 0


_CACHE: "OrderedDict[tuple, Optimum]" = OrderedDict()
_CACHE_SIZE = 8


def forget(fingerprint: str) -> int:
    """Drop the cached optima of every problem on the data set of ``fingerprint`` (its data set
    was let go: :func:`fedviz.runner.cache.release`); returns how many."""
    gone = [key for key in list(_CACHE) if key[0][0] == fingerprint]
    for key in gone:
        _CACHE.pop(key, None)
    return len(gone)


#: A Newton step whose predicted decrease is below this many units of rounding of f is taken whole
#: where Armijo's test fails (it cannot tell such a decrease from noise).
ROUNDING_DECREASE = 64.0


def solve(problem: Problem, *, gtol: float = 1e-10, max_iter: int = 100, use_cache: bool = True) -> Optimum:
    """Minimise f to ‖∇f(w)‖₂ ≤ ``gtol`` by Newton-CG from w = 0."""
    key = (problem.key, gtol)
    if use_cache and key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    start = time.perf_counter()
    w, its, hvs, f, gnorm, dense = _newton_cg(problem, gtol=gtol, max_iter=max_iter)
    opt = Optimum(w=w, objective=f, grad_norm=gnorm, test_error=problem.test_error(w),
                  train_error=problem.train_error(w), newton_iterations=its, hessian_products=hvs,
                  seconds=time.perf_counter() - start, dense_hessians=dense)
    w.setflags(write=False)
    if use_cache:
        _CACHE[key] = opt
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return opt


def _newton_cg(problem: Problem, *, gtol: float, max_iter: int):
    X, y, loss, lam, n = problem.X, problem.y, problem.loss, problem.lam, problem.n
    w = problem.zero_model()
    z = np.zeros(problem.margin_shape)
    hvs = 0
    dense = 0
    # X with squared entries, for the diagonal preconditioner (same pattern, new values).
    Xsq_T = type(X)((X.data * X.data, X.indices, X.indptr), shape=X.shape).T
    f = problem.value(w, z)
    for it in range(max_iter + 1):
        g = problem.rmatvec(loss.deriv(z, y) / n) + lam * w
        gnorm = float(np.linalg.norm(g))
        if gnorm <= gtol:
            return w, it, hvs, f, gnorm, dense
        if it == max_iter:
            break
        D = loss.curvature(z, y, divisor=n)
        if problem.n_classes > 1 and _dense_ok(problem):
            p = _dense_newton_direction(problem, D, g)
            dense += 1
        else:
            # Forcing term min(0.5, sqrt‖g‖)‖g‖ gives superlinear convergence (Nocedal & Wright, Thm 7.2).
            if problem.n_classes > 1:
                M = _BlockPreconditioner(problem, D)
            else:
                M = (Xsq_T @ loss.curvature_diagonal(D)).reshape(problem.size) + lam
            p, used = _cg(lambda v: problem.rmatvec(loss.curvature_product(D, problem.matvec(v))) + lam * v, -g, M,
                          tol=min(0.5, np.sqrt(gnorm)) * gnorm, max_iter=max(50, 2 * problem.size))
            hvs += used
        Xp = problem.matvec(p)
        slope = float(g @ p)
        t = 1.0
        # A decrease the full step promises (−slope ≈ gᵀH⁻¹g) below f's rounding is one no Armijo test can
        # see: f_new == f then passes it at any t, and a t the halving happened upon left heart_scale's
        # squared loss at ‖∇f‖ = 3.3e-10 for 100 steps.  Take the full Newton step; the gradient norm, the
        # certificate, decides.
        unseen = -slope <= ROUNDING_DECREASE * np.finfo(float).eps * max(1.0, abs(f))
        while not unseen:
            w_new = w + t * p
            z_new = z + t * Xp
            f_new = problem.value(w_new, z_new)
            if f_new <= f + 1e-4 * t * slope or t < 1e-12:
                break
            t *= 0.5
        if unseen:
            w_new, z_new = w + p, z + Xp
            f_new = problem.value(w_new, z_new)
        w, z, f = w_new, z_new, f_new
        if t < 1e-12:
            break
    raise FedvizError(f"the optimum did not converge: gradient norm {gnorm:.3e} after {it} Newton steps")


def _cg(hessp, b, M, *, tol: float, max_iter: int):
    """Preconditioned conjugate gradients for H x = b from x = 0 with the diagonal
    preconditioner M, stopped at ‖Hx − b‖ ≤ tol (the true residual, not the M-norm)."""
    x = np.zeros_like(b)
    r = b.copy()
    zv = M.solve(r) if isinstance(M, _BlockPreconditioner) else r / M
    p = zv.copy()
    rz = float(r @ zv)
    for k in range(max_iter):
        if np.linalg.norm(r) <= tol:
            return x, k
        Hp = hessp(p)
        alpha = rz / float(p @ Hp)
        x += alpha * p
        r -= alpha * Hp
        zv = M.solve(r) if isinstance(M, _BlockPreconditioner) else r / M
        rz_new = float(r @ zv)
        p = zv + (rz_new / rz) * p
        rz = rz_new
    return x, max_iter


class _BlockPreconditioner:
    """CG's preconditioner for C > 1: the Hessian's diagonal block of each feature's C weights,
    B_j = Σ_i x_ij² (diag p_i − p_i p_iᵀ) / n + λI (C × C), inverted once per Newton step.

    It keeps what the diagonal loses: a softmax Hessian is only λ along W + u1ᵀ (adding one vector
    to every class's weights changes no probability), and the diagonal preconditioner, blind to
    that, made the system worse conditioned than none (dna.scale at w = 0: 1.3e4 against 6.1e3);
    the blocks give 500.  Building them costs nnz · C² multiply-adds, applying them d C².
    """

    def __init__(self, problem, D):
        P, divisor = D
        X = problem.X
        d, C = problem.d, problem.n_classes
        B = np.zeros((d, C, C))
        _block_diag(X.indptr, X.indices, X.data, np.ascontiguousarray(P), B)
        B /= divisor
        B += problem.lam * np.eye(C)
        self.inv = np.linalg.inv(B)
        self.d, self.C = d, C

    def solve(self, r):
        R = r.reshape(self.d, self.C)
        return np.einsum("jce,je->jc", self.inv, R).reshape(-1)


@numba.njit(cache=True, nogil=True)
def _block_diag(indptr, indices, data, P, B):
    """B[j] += x_ij² (diag p_i − p_i p_iᵀ) over the nonzeros x_ij of the CSR rows (P: n × C)."""
    C = P.shape[1]
    for i in range(indptr.size - 1):
        for q in range(indptr[i], indptr[i + 1]):
            j = indices[q]
            a2 = data[q] * data[q]
            for c in range(C):
                pc = a2 * P[i, c]
                B[j, c, c] += pc
                for e in range(C):
                    B[j, c, e] -= pc * P[i, e]


#: The dense Newton system of a softmax problem: at most this many unknowns dC (its Hessian in
#: 8 (dC)² bytes: 72 MB at 3,000) …
DENSE_MAX_SIZE = 3000
#: … and at most this many multiply-adds to form it (n (dC)²: FedProx's Synthetic, n = 7,909 and
#: dC = 610, takes 2.9e9, about a second in BLAS).
DENSE_MAX_WORK = 2e10
#: Rows per slab of the dense Hessian (bounds the n × dC scratch of x_i ⊗ p_i).
_DENSE_ROWS = 2048


def dense_ok(*, n: int, size: int) -> bool:
    """Whether the Newton steps of a softmax problem of n rows and dC = ``size`` unknowns solve with the
    dense Hessian (see the module)."""
    return size <= DENSE_MAX_SIZE and n * size ** 2 <= DENSE_MAX_WORK


def _dense_ok(problem) -> bool:
    return dense_ok(n=problem.n, size=problem.size)


def _dense_newton_direction(problem, D, g):
    """The Newton step −∇²f(w)⁻¹ ∇f(w) for softmax, solved exactly: the dense Hessian
    Σ_i (x_i x_iᵀ) ⊗ (diag p_i − p_i p_iᵀ) / n + λI (rows j·C + c, the model's order), formed as
    the class-diagonal blocks X_rᵀ diag(p_c) X_r minus Y_rᵀ Y_r with the rows x_i ⊗ p_i of Y_r, over
    slabs of rows, then Cholesky (positive definite: λ > 0)."""
    P, divisor = D
    X = problem.X
    d, C, n = problem.d, problem.n_classes, problem.n
    H = np.zeros((d, C, d, C))
    for a in range(0, n, _DENSE_ROWS):
        Xr = X[a:a + _DENSE_ROWS].toarray()
        Pr = P[a:a + _DENSE_ROWS]
        for c in range(C):
            H[:, c, :, c] += Xr.T @ (Xr * Pr[:, c:c + 1])
        Y = (Xr[:, :, None] * Pr[:, None, :]).reshape(Xr.shape[0], d * C)
        H.reshape(d * C, d * C)[...] -= Y.T @ Y
    H = H.reshape(d * C, d * C)
    H /= divisor
    H[np.diag_indices_from(H)] += problem.lam
    return -sla.cho_solve(sla.cho_factor(H, lower=True), g)
