"""CoCoA+ (Ma et al. 2015, "Adding vs. averaging in distributed primal-dual optimization"): Figure 2's COCOA.

CoCoA+ works on the dual (eq. 13): node k owns the dual variables α_[k] of its
examples, and every iteration (one round) it

1. receives w = (1/(λn)) Xᵀα (eq. 14);
2. approximately maximises its local subproblem (Ma et al., eq. 9)

       G_k^{σ'}(Δα_[k]) = −(1/n) Σ_{i∈P_k} φ_i*(−α_i − Δα_i) − (1/K)(λ/2)‖w‖²
                          − (1/n) wᵀX_kᵀΔα_[k] − (λσ'/2) ‖(1/(λn)) X_kᵀΔα_[k]‖²

   by ``local_passes`` passes of SDCA over its examples in random order, each
   coordinate step an exact 1-D maximisation (:func:`~._sdca_kernels.sdca_step`);
3. sets α_[k] ← α_[k] + γΔα_[k] and sends Δw_k = (1/(λn)) X_kᵀΔα_[k], supported on
   its features (one vector up);

and the server sets w ← w + γ Σ_k Δw_k.  CoCoA+ *adds* (γ = 1) with the safe σ' = γK;
:class:`~.cocoa.CoCoA` *averages* (γ = 1/K, σ' = 1).  As the Appendix remarks after
Theorem 1, this is Algorithm 6 (:class:`~.dual_method.DualMethod`) with σ = σ' and the
block step done inexactly.  The paper's Figure 2 shows it slower than GD on sparse,
non-IID data: its rate degrades with σ', which sparse data cannot lower below
max_j ω^j ≈ K.

Dual feasibility: for the logistic loss α_i y_i ∈ (0, 1) and for the smoothed hinge
α_i y_i ∈ [0, 1]; every coordinate step returns a point of the domain (strictly inside
it for the logistic loss), so the iterates never leave it.  The default start α = 0
(so w = 0) lies on the boundary for the logistic loss, where φ* is still finite.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..problems.budget import StateSize
from ._batches import CHUNKS, batch_target, plan
from ..problems._compiled import loss_code
from ._sdca_kernels import (
    DUAL_LOSSES,
    DualData,
    DualScratch,
    LocalRule,
    cocoa_local_sdca,
    cocoa_local_sdca_serial,
    node_permutations,
)
from .base import Param
from .dual_method import DualAlgorithm

#: Coordinate steps (weighted by row nonzeros) per thread and compiled call; Stop is checked
#: after every call.  About 50 ms of work on a quiet core at the paper's scale.
_BATCH_WORK = 1 << 20
#: Below this much work per iteration the nodes run on one thread: waking the thread pool
#: costs more than it saves (and far more on a loaded machine).
_PARALLEL_MIN_WORK = 1 << 16


def _params(sigma_default: str) -> tuple[Param, ...]:
    return (
        Param("local_passes", "int", 1,
              "Passes of local SDCA over the node's examples per round (random order each "
              "pass).  More passes solve the local subproblem more accurately (smaller Θ) "
              "at more local work per round; default 1 (one local epoch).", low=1, high=10_000),
        Param("sigma_prime", "float", None,
              f"σ', the weight of the local subproblem's quadratic term.  Default {sigma_default}, "
              "the value Ma et al. prove safe for every partition; by Cauchy–Schwarz "
              "γ·max_j ω^j (features shared by fewer nodes) is also safe, and smaller values "
              "can diverge.", low=0.0, low_open=True, log=True),
    )


class CoCoAPlus(DualAlgorithm):
    """CoCoA+ with local SDCA: adding (γ = 1), σ' = K by default.

    Parameters
    ----------
    problem, seed, w0, alpha0, **hyper
        As for :class:`~fedviz.algorithms.dual_method.DualAlgorithm`; ``alpha0`` starts
        at given dual variables (w^0 = (1/(λn))Xᵀα^0), e.g. α* = −φ'(Xw*).

    Attributes
    ----------
    alpha : ndarray (n,)
    aggregation : float
        The aggregation weight γ of Ma et al. (not the smoothed hinge's γ).
    sigma_prime : float
    duality_gap : float
        P(w) − D(α), see :attr:`DualAlgorithm.duality_gap`.
    """

    name = "cocoa-plus"
    title = "CoCoA+"
    reference = "CoCoA+ (Ma et al. 2015), Section 2.3; the COCOA line of Figure 2, Section 4.1"
    state = StateSize(entries=1, rows=4, model=8)  # tracemalloc's peaks × 2.2 (tests/unit/test_budget.py)
    params = _params("γK = K")
    #: The losses local SDCA has a coordinate step for.
    losses = DUAL_LOSSES
    multiclass_reason = ("the local SDCA step solves each example's dual problem in closed form, and softmax's "
                         "C-dimensional conjugate has none (binary and regression models only)")
    #: Ma et al.: σ' ≥ γK is safe for every partition, smaller σ' takes longer steps and
    #: can diverge (the Appendix's σ, Algorithm 6, plays the same role).
    divergence_hint = ("sigma_prime", "raise")
    #: γ is 1 (adding) or 1/K (averaging).
    averaging: ClassVar[bool] = False

    def setup(self) -> None:
        super().setup()
        p = self.problem
        ds = p.data
        self.K = K = ds.n_nodes
        self.aggregation = 1.0 / K if self.averaging else 1.0
        sp_ = self.hp["sigma_prime"]
        self.sigma_prime = self.derived["sigma_prime"] if sp_ is None else float(sp_)
        self.passes = int(self.hp["local_passes"])
        X = p.X
        code, smoothing = loss_code(p.loss)
        self._data = DualData(indptr=X.indptr, indices=X.indices, data=X.data, y=p.y,
                              sqnorm=p.row_norms_sq, offsets=ds.offsets, loss=code, smoothing=smoothing)
        work = self.passes * (np.diff(X.indptr[ds.offsets]) + ds.node_sizes)
        # A fixed number of chunks, not the thread count: the same sums, bit for bit, on every machine.
        self._n_chunks = CHUNKS if work.sum() >= _PARALLEL_MIN_WORK else 1
        # Per batch, the first and the end node of every chunk.
        self._batches = [(lo[:, 0].copy(), hi[:, 0].copy())
                         for lo, hi in plan(work, self._n_chunks,
                                            batch_target(_BATCH_WORK) if self._n_chunks > 1 else _BATCH_WORK)]
        C, nk_max = self._n_chunks, int(ds.node_sizes.max())
        self._scratch = DualScratch(acc=np.zeros((C, p.d)), dw=np.zeros((C, p.d)),
                                    a_loc=np.zeros((C, nk_max)), perm=np.zeros((C, nk_max), dtype=np.int64))

    @classmethod
    def _derive(cls, p, hp) -> dict:
        """σ' = γK, the safe value for every partition (γ = 1/K averaging, 1 adding)."""
        if hp["sigma_prime"] is not None:
            return {}
        K = p.data.n_nodes
        return {"sigma_prime": (1.0 / K if cls.averaging else 1.0) * K}

    def _node_seeds(self) -> np.ndarray:
        """One seed per node for the coming iteration, from :meth:`rng`."""
        return self.rng().integers(0, 2**64, size=self.K, dtype=np.uint64)

    def visit_orders(self) -> list[np.ndarray]:
        """The rows each node will visit in the coming iteration: for node k a
        (local_passes, n_k) array of global row indices (for tests and inspection)."""
        off = self.problem.data.offsets
        seeds = self._node_seeds()
        return [off[k] + node_permutations(seeds[k], int(off[k + 1] - off[k]), self.passes)
                for k in range(self.K)]

    def _step(self) -> None:
        p = self.problem
        z0 = self.margins()
        seeds = self._node_seeds()
        alpha = self.alpha.copy()  # a stopped iteration leaves α and w untouched
        acc = self._scratch.acc
        acc.fill(0.0)
        rule = LocalRule(passes=self.passes, sigma_p=float(self.sigma_prime), aggregation=float(self.aggregation),
                         lam_n=p.lam * p.n)
        kernel = cocoa_local_sdca if self._n_chunks > 1 else cocoa_local_sdca_serial
        for lo, hi in self._batches:
            kernel(self._data, rule, z0, alpha, seeds, lo, hi, self._scratch)
            self.check_stop()
        self.alpha = alpha
        self.w = self.w + acc.sum(axis=0)
        self.count_round()
        self.grad_evals += self.passes * p.n
