"""The Appendix's primal method (Algorithm 5), a quadratic perturbation method for ridge regression.

Algorithm 5 is an instance of the perturbation template (eq. 9),

    w_k^{t+1} = argmin_w F_k(w) − (a_k^t)ᵀw + (μ/2)‖w − w^t‖²,   w^{t+1} = (1/K) Σ_k w_k^{t+1},

with η = K/σ, μ = λ(η − 1), a_k^t = ∇F_k(w^t) − (η∇F_k(w^t) + g_k^t) and the
corrections g_k^{t+1} = g_k^t + λη(w_k^{t+1} − w^{t+1}), which sum to zero (Lemma 1).
Theorem 1 says that for the squared loss its iterates are the images w(α^t) of the
dual method's (Algorithm 6), so it converges for every partition, unlike DANE.

Local functions.  The Appendix takes F_k(w) = (K/n) Σ_{i∈P_k} φ_i(x_iᵀw) + (λ/2)‖w‖²
(eq. 12) and assumes equal n_k, so that this F_k is the F_k of eq. (6).  We keep eq. (12)
for every partition: f = (1/K) Σ_k F_k still holds exactly, and neither Lemma 1 nor the
proof of Theorem 1 uses equal n_k, so the method and the equivalence carry over
unchanged to unbalanced nodes (what differs is only that F_k is no longer node k's
average loss).

Sparse representation.  Off node k's support S_k (the features occurring on node k)
the local problem decouples and gives w_k^{t+1} = w^t there; by induction
g_k^t = −λη w^t + r_k^t with r_k^t supported on S_k.  We store only r_k (one number per
(node, feature) pair: the nonzeros of the K × d pattern n_k^j), never a dense K × d
array.  In the step δ = w − w^t on S_k, with A_k the node's rows on S_k and τ = σ/(λn)
(so ητ = K/(λn)), the local optimality condition is

    (I + τ A_kᵀA_k) δ_k = −ητ A_kᵀ(A_k w^t − y_k) − r_k / (λη),

solved exactly (Cholesky, in the n_k × n_k Woodbury form when n_k < |S_k|); then
w^{t+1} = w^t + (1/K) Σ_k δ_k and r_k^{t+1} = r_k^t + λη δ_k.
"""

from __future__ import annotations

import numpy as np

from ..problems.budget import StateSize, node_block_bytes
from ._sdca_kernels import FACTOR_CACHE_BYTES, NodeBlocks
from .base import Algorithm
from .dual_method import _sigma_param, check_sigma, initial_dual, primal_image


class PrimalMethod(Algorithm):
    """Algorithm 5 of the Appendix for ridge regression, with exact local solves.

    One round per iteration: node k needs w^t only (∇F_k(w^t) is local), and sends
    w_k^{t+1} (in practice its change δ_k, supported on the node's features).

    Parameters
    ----------
    problem, seed, **hyper
        As for :class:`~fedviz.algorithms.base.Algorithm`.
    w0 : ndarray or None
        A primal start, honoured through α^0 = y − X w0 (see
        :func:`~fedviz.algorithms.dual_method.initial_dual`).
    alpha0 : ndarray of shape (n,) or None
        Algorithm 5's "Choose α_k^0": then w^0 = (1/(λn)) Xᵀα^0 and
        g_k^0 = η((K/n) X_kᵀα_k^0 − λw^0).  Give at most one of ``w0`` and ``alpha0``.
    """

    #: Linear terms fitted to tracemalloc's peaks × 2.2, plus the node blocks, quadratic in a node's size.
    state = StateSize(entries=13, rows=8, model=4)

    @classmethod
    def state_bytes(cls, problem) -> int:
        return super().state_bytes(problem) + node_block_bytes(problem, FACTOR_CACHE_BYTES)

    name = "primal-method"
    title = "Primal method (Alg. 5)"
    reference = "Algorithm 5 (Primal Method), Appendix, eqs. (9), (12); Lemma 1, Theorem 1"
    losses = ("squared",)
    multiclass_reason = ("it is the Appendix's primal method for ridge regression (the squared loss on one "
                         "weight vector: binary and regression models only)")
    params = (_sigma_param(),)
    #: The local problems rest on XᵀX ⪯ σ·Diag(X_kᵀX_k) (eq. 15): a σ below the true bound
    #: oversteps, σ = K always holds, so the remedy is a larger σ.
    divergence_hint = ("sigma", "raise")

    def __init__(self, problem, *, seed: int = 0, w0: np.ndarray | None = None,
                 alpha0: np.ndarray | None = None, **hyper):
        self._alpha0 = alpha0
        self._w0 = None if w0 is None else np.asarray(w0, dtype=np.float64)
        super().__init__(problem, seed=seed, w0=w0, **hyper)

    @classmethod
    def _derive(cls, p, hp) -> dict:
        """σ = K, safe for every partition (see the ``sigma`` help text)."""
        return {} if hp["sigma"] is not None else {"sigma": check_sigma(cls.name, None, p.data.n_nodes)}

    def setup(self) -> None:
        p = self.problem
        self.K = K = p.data.n_nodes
        sigma = self.hp["sigma"]
        self.sigma = self.derived["sigma"] if sigma is None else check_sigma(self.name, sigma, K)
        self.eta = K / self.sigma
        #: μ of Algorithm 5; the local systems carry λ + μ = λη.
        self.mu = p.lam * (self.eta - 1.0)
        self.blocks = NodeBlocks(p.data.support, self.sigma / (p.lam * p.n))
        alpha0 = initial_dual(p, self._alpha0, self._w0)
        self._alpha0 = self._w0 = None
        self.w = primal_image(p, alpha0)
        self.w.setflags(write=False)
        # r_k^0 = g_k^0 + λη w^0 = η (K/n) A_kᵀα_k^0, on S_k.
        self.r = (self.eta * K / p.n) * self.blocks.node_products(alpha0)

    def correction(self, k: int) -> np.ndarray:
        """g_k^t of Algorithm 5 as a dense vector (for inspection and tests; O(d))."""
        g = -self.problem.lam * self.eta * self.w
        sp_ = self.blocks.support_indptr
        g[self.blocks.support(k)] += self.r[sp_[k]:sp_[k + 1]]
        return g

    def _step(self) -> None:
        p = self.problem
        lam_eta = p.lam * self.eta
        blocks = self.blocks
        # Right-hand sides of every node's system, from one pass over the data.
        rhs = -(self.eta * blocks.tau) * blocks.node_products(self.margins() - p.y) - self.r / lam_eta
        self.check_stop()
        delta = blocks.solve_cols(rhs, between=self.check_stop)
        self.check_stop()
        self.r = self.r + lam_eta * delta
        self.w = self.w + np.bincount(blocks.support_indices, weights=delta, minlength=p.d) / self.K
        self.count_round()
        self.grad_evals += p.n
