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
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

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


_CACHE: "OrderedDict[tuple, Optimum]" = OrderedDict()
_CACHE_SIZE = 8


def forget(fingerprint: str) -> int:
    """Drop the cached optima of every problem on the data set of ``fingerprint`` (its data set
    was let go: :func:`fedviz.runner.cache.release`); returns how many."""
    gone = [key for key in list(_CACHE) if key[0][0] == fingerprint]
    for key in gone:
        _CACHE.pop(key, None)
    return len(gone)


def solve(problem: Problem, *, gtol: float = 1e-10, max_iter: int = 100, use_cache: bool = True) -> Optimum:
    """Minimise f to ‖∇f(w)‖₂ ≤ ``gtol`` by Newton-CG from w = 0."""
    key = (problem.key, gtol)
    if use_cache and key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    start = time.perf_counter()
    w, its, hvs, f, gnorm = _newton_cg(problem, gtol=gtol, max_iter=max_iter)
    opt = Optimum(w=w, objective=f, grad_norm=gnorm, test_error=problem.test_error(w),
                  train_error=problem.train_error(w), newton_iterations=its, hessian_products=hvs,
                  seconds=time.perf_counter() - start)
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
    # X with squared entries, for the diagonal preconditioner (same pattern, new values).
    Xsq_T = type(X)((X.data * X.data, X.indices, X.indptr), shape=X.shape).T
    f = problem.value(w, z)
    for it in range(max_iter + 1):
        g = problem.rmatvec(loss.deriv(z, y) / n) + lam * w
        gnorm = float(np.linalg.norm(g))
        if gnorm <= gtol:
            return w, it, hvs, f, gnorm
        if it == max_iter:
            break
        D = loss.curvature(z, y, divisor=n)
        # Forcing term min(0.5, sqrt‖g‖)‖g‖ gives superlinear convergence (Nocedal & Wright, Thm 7.2).
        M = (Xsq_T @ loss.curvature_diagonal(D)).reshape(problem.size) + lam
        p, used = _cg(lambda v: problem.rmatvec(loss.curvature_product(D, problem.matvec(v))) + lam * v, -g, M,
                      tol=min(0.5, np.sqrt(gnorm)) * gnorm, max_iter=max(50, 2 * problem.size))
        hvs += used
        Xp = problem.matvec(p)
        slope = float(g @ p)
        t = 1.0
        while True:
            w_new = w + t * p
            z_new = z + t * Xp
            f_new = problem.value(w_new, z_new)
            if f_new <= f + 1e-4 * t * slope or t < 1e-12:
                break
            t *= 0.5
        if f_new > f and gnorm < 1e-6:
            # The objective is flat to machine precision: accept the (tiny) step anyway, the
            # gradient norm is the certificate that decides.
            pass
        w, z, f = w_new, z_new, f_new
        if t < 1e-12:
            break
    raise FedvizError(f"the optimum did not converge: gradient norm {gnorm:.3e} after {it} Newton steps")


def _cg(hessp, b, M, *, tol: float, max_iter: int):
    """Preconditioned conjugate gradients for H x = b from x = 0 with the diagonal
    preconditioner M, stopped at ‖Hx − b‖ ≤ tol (the true residual, not the M-norm)."""
    x = np.zeros_like(b)
    r = b.copy()
    zv = r / M
    p = zv.copy()
    rz = float(r @ zv)
    for k in range(max_iter):
        if np.linalg.norm(r) <= tol:
            return x, k
        Hp = hessp(p)
        alpha = rz / float(p @ Hp)
        x += alpha * p
        r -= alpha * Hp
        zv = r / M
        rz_new = float(r @ zv)
        p = zv + (rz_new / rz) * p
        rz = rz_new
    return x, max_iter
