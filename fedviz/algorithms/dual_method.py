"""The Appendix's dual method (Algorithm 6, Dual Block Proximal Gradient Ascent) and the dual family's base class.

The dual of f(w) = (1/n) Σ φ_i(x_iᵀw) + (λ/2)‖w‖² (eq. 11) is eq. (13),

    max_α  D(α) = −(1/(2λn²)) ‖Σ_i α_i x_i‖² − (1/n) Σ_i φ_i*(−α_i),

with one dual variable α_i per example, and a dual point maps to the primal point
w(α) = (1/(λn)) Σ_i α_i x_i (eq. 14; the paper's X is d × n, so this is its (1/(λn))Xα).
At the optimum α*_i = −φ_i'(x_iᵀw*) and w(α*) = w*.

This module owns :class:`DualAlgorithm`, the state every method of the family keeps
(α, w = w(α), the starting point, the duality gap), and :class:`DualMethod`, Algorithm 6
for ridge regression: every node maximises the separable lower bound of D built from
XᵀX ⪯ σ·Diag(X_kᵀX_k) exactly over its own block (eq. 15, which for the squared loss is
the linear system (36)), and α^{t+1} = α^t + h^t.  Theorem 1 of the Appendix says its
image w(α^t) is the primal method's iterate (:mod:`.primal_method`); CoCoA+
(:mod:`.cocoa_plus`) is the same scheme with the block step done inexactly.
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from ..problems.objective import Problem
from ..problems.budget import StateSize, node_block_bytes
from ._sdca_kernels import FACTOR_CACHE_BYTES, NodeBlocks
from .base import Algorithm, Param


def initial_dual(problem: Problem, alpha0, w0) -> np.ndarray:
    """The starting dual variables α^0, checked for dual feasibility.

    ``alpha0`` is taken as given.  A primal start ``w0`` is honoured through the dual:
    α^0 = −φ'(X w0), the dual point that is optimal when w0 is, whose image
    w(α^0) = w0 − ∇f(w0)/λ equals w0 exactly at the optimum (so a run started at w*
    stays there) but not elsewhere.  Neither: α^0 = 0, so w^0 = 0.
    """
    n = problem.n
    if alpha0 is not None and w0 is not None:
        raise ParameterError("alpha0", "given together with w0",
                             "either alpha0 or w0, not both: a dual method starts at w0 = (1/(λn))Xᵀα0")
    if w0 is not None:
        return np.asarray(-problem.loss.deriv(problem.X @ w0, problem.y), dtype=np.float64)
    if alpha0 is None:
        return np.zeros(n)
    alpha = np.array(alpha0, dtype=np.float64, copy=True)
    if alpha.shape != (n,):
        raise ParameterError("alpha0", f"shape {alpha.shape}", f"a vector of length n = {n}")
    bad = np.flatnonzero(~np.isfinite(alpha))
    if bad.size:
        raise ParameterError(f"alpha0[{bad[0]}]", alpha[bad[0]], "a finite number")
    if problem.loss.task == "classification":
        # The domain of φ_i*(−α_i) for the logistic loss and the smoothed hinge.
        b = alpha * problem.y
        bad = np.flatnonzero((b < 0) | (b > 1))
        if bad.size:
            i = bad[0]
            raise ParameterError(f"alpha0[{i}]", alpha[i],
                                 f"α_i·y_i in [0, 1] (the domain of φ*; y_{i} = {problem.y[i]:g})")
    return alpha


def primal_image(problem: Problem, alpha: np.ndarray) -> np.ndarray:
    """w(α) = (1/(λn)) Σ_i α_i x_i, eq. (14)."""
    return problem.XT @ alpha / (problem.lam * problem.n)


def duality_gap(problem: Problem, alpha: np.ndarray, z: np.ndarray) -> float:
    """P(w) − D(α) for w = w(α) and margins z = Xw, as a mean of Fenchel–Young gaps.

    With w = (1/(λn))Xᵀα, λ‖w‖² = (1/n) Σ_i α_i z_i, so
    P(w) − D(α) = (1/n) Σ_i [φ_i(z_i) + φ_i*(−α_i) + α_i z_i], every term ≥ 0 by the
    Fenchel–Young inequality.  Summing the terms, rather than subtracting two nearly
    equal objectives, keeps the gap accurate (and nonnegative) down to rounding.
    """
    loss, y = problem.loss, problem.y
    terms = loss.value(z, y) + loss.conjugate(-alpha, y) + alpha * z
    return float(np.mean(terms))


class DualAlgorithm(Algorithm):
    """Base of the dual family: dual variables α (one per example) and w = w(α).

    Parameters
    ----------
    problem, seed, **hyper
        As for :class:`~fedviz.algorithms.base.Algorithm`.
    w0 : ndarray or None
        A primal start, honoured through α^0 = −φ'(X w0) (see :func:`initial_dual`).
    alpha0 : ndarray of shape (n,) or None
        The starting dual variables (the Appendix's "Choose α_k^0"); the start is then
        w^0 = (1/(λn)) Xᵀα^0.  Give at most one of ``w0`` and ``alpha0``.

    Attributes
    ----------
    alpha : ndarray (n,)
        The current dual variables; ``w`` is their image (eq. 14), maintained
        incrementally.
    """

    def __init__(self, problem: Problem, *, seed: int = 0, w0: np.ndarray | None = None,
                 alpha0: np.ndarray | None = None, **hyper):
        self._alpha0 = alpha0
        self._w0 = None if w0 is None else np.asarray(w0, dtype=np.float64)
        super().__init__(problem, seed=seed, w0=w0, **hyper)

    def setup(self) -> None:
        self.alpha = initial_dual(self.problem, self._alpha0, self._w0)
        self._alpha0 = self._w0 = None
        self.w = primal_image(self.problem, self.alpha)
        self.w.setflags(write=False)

    @property
    def dual_objective(self) -> float:
        """D(α) of eq. (13), with ‖Σ α_i x_i‖²/(λn)² taken as ‖w‖²."""
        p = self.problem
        return float(-0.5 * p.lam * (self.w @ self.w) - np.mean(p.loss.conjugate(-self.alpha, p.y)))

    @property
    def duality_gap(self) -> float:
        """P(w) − D(α) ≥ 0, a certificate: f(w) − f* never exceeds it (see :func:`duality_gap`)."""
        return duality_gap(self.problem, self.alpha, self.margins())


def _sigma_param() -> Param:
    return Param("sigma", "float", None,
                 "σ ∈ [1, K] with XᵀX ⪯ σ·Diag(X_kᵀX_k), the separable bound behind the local "
                 "problems.  Default K, which holds for every partition (Cauchy–Schwarz); a "
                 "smaller valid σ gives longer steps, too small a σ can diverge.", low=1.0)


def check_sigma(owner: str, sigma: float | None, K: int) -> float:
    """σ (default K), checked against [1, K] now that K is known."""
    if sigma is None:
        return float(K)
    if sigma > K:
        raise ParameterError(f"{owner}.sigma", sigma, f"number in [1, K = {K}]")
    return float(sigma)


class DualMethod(DualAlgorithm):
    """Algorithm 6 of the Appendix for ridge regression: exact dual block proximal ascent.

    Each iteration is one round.  Node k receives w^t, solves eq. (19),

        (I + τ X_kᵀX_k) h_k = y_k − X_kᵀw^t − α_k^t,   τ = σ/(λn),

    exactly (in the paper's notation, X_k is d × n_k; a Cholesky factor of the smaller of
    I + τX_kᵀX_k and I + τX_kX_kᵀ on the node's features, computed once), sets
    α_k ← α_k + h_k and sends (1/(λn)) X_k h_k, a vector supported on its features; the
    server adds them up.  The reported iterate is w(α^t), eq. (14).
    """

    #: Linear terms fitted to tracemalloc's peaks × 2.2, plus the node blocks, quadratic in a node's size.
    state = StateSize(entries=13, rows=8, model=4)

    @classmethod
    def state_bytes(cls, problem) -> int:
        return super().state_bytes(problem) + node_block_bytes(problem, FACTOR_CACHE_BYTES)

    name = "dual-method"
    title = "Dual method (Alg. 6)"
    reference = "Algorithm 6 (Dual Block Proximal Gradient Ascent), Appendix, eqs. (13)–(15)"
    losses = ("squared",)
    multiclass_reason = ("it is the Appendix's dual method for ridge regression (the squared loss on one "
                         "weight vector: binary and regression models only)")
    params = (_sigma_param(),)
    #: The local problems rest on XᵀX ⪯ σ·Diag(X_kᵀX_k) (eq. 15): a σ below the true bound
    #: oversteps, σ = K always holds, so the remedy is a larger σ.
    divergence_hint = ("sigma", "raise")

    @classmethod
    def _derive(cls, p, hp) -> dict:
        """σ = K, safe for every partition (see the ``sigma`` help text)."""
        return {} if hp["sigma"] is not None else {"sigma": check_sigma(cls.name, None, p.data.n_nodes)}

    def setup(self) -> None:
        super().setup()
        p = self.problem
        self.K = p.data.n_nodes
        sigma = self.hp["sigma"]
        self.sigma = self.derived["sigma"] if sigma is None else check_sigma(self.name, sigma, self.K)
        self.blocks = NodeBlocks(p.data.support, self.sigma / (p.lam * p.n))

    def _step(self) -> None:
        p = self.problem
        h = self.blocks.solve_rows(p.y - self.margins() - self.alpha, between=self.check_stop)
        self.check_stop()
        self.alpha = self.alpha + h
        self.w = self.w + p.XT @ h / (p.lam * p.n)
        self.count_round()
        self.grad_evals += p.n
