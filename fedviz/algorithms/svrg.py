"""Centralised SVRG: Algorithm 1 of the paper (Section 3.2), on the pooled data.

A reference, not a federated method (``federated = False``): it sees all n examples as
one machine would, so it makes no communication rounds.  Each iteration computes the full
gradient ∇f(w^t) (n example gradients) and then takes m stochastic steps

    w ← w − h (∇f_i(w) − ∇f_i(w^t) + ∇f(w^t)),

with i uniform on {1, ..., n} (Algorithm 1 as stated) or, with ``sampling='permutation'``,
following random permutations of the data (a fresh one every n steps).  FSVRG
(Algorithm 4) with K = 1 is exactly this method with m = n, stepsize h/n and permutation
sampling: both draw from ``rng(SAMPLE_STREAM)`` with the same contract, so their iterates
coincide (property (B) of Section 3.1 made concrete).

A step costs one new example gradient (∇f_i(w^t) reuses the margin x_iᵀw^t of the
full-gradient pass) and O(nnz of x_i): the regulariser and ∇f(w^t) are applied lazily by
the kernel of :mod:`._svrg_kernels`.
"""

from __future__ import annotations

import numpy as np

from ..problems.budget import StateSize
from ._softmax_kernels import LocalSVRGSoftmax
from ._svrg_kernels import (
    SAMPLE_STREAM,
    LocalSVRG,
    permutation_samples,
    uniform_samples,
)
from .base import Algorithm, Param, default_stepsize


class SVRG(Algorithm):
    name = "svrg"
    title = "SVRG (centralised)"
    reference = "Algorithm 1, Section 3.2"
    federated = False
    divergence_hint = ("stepsize", "lower")
    multiclass = True  # softmax: the loop on the d × C model (issue 22)
    state = StateSize(entries=4.5, rows=4, model=114)  # tracemalloc's peaks × 2.2 (tests/unit/test_budget.py)
    params = (
        Param("stepsize", "float", None,
              "Stepsize h.  Default 1/(2L̄), L̄ = (1/γ) mean‖x_i‖² + λ the smoothness of an "
              "average f_i (SVRG's theory asks for a fraction of 1/L_max; on sparse data the "
              "worst example is far above the average and the average is what works).",
              low=0, low_open=True, log=True),
        Param("inner_steps", "int", None,
              "m, stochastic steps per outer iteration.  Default n (the paper: m is 'typically "
              "a small multiple (1-5) of n').", low=1, high=10_000_000),
        Param("sampling", "choice", "uniform",
              "'uniform': i uniform with replacement (Algorithm 1).  'permutation': a random "
              "permutation of the data, renewed every n steps.", choices=("uniform", "permutation")),
    )

    @classmethod
    def _derive(cls, pb, hp) -> dict:
        out = {}
        if hp["inner_steps"] is None:
            out["inner_steps"] = pb.n
        if hp["stepsize"] is None:
            out["stepsize"] = 0.5 / pb.average_example_smoothness
        return out

    def setup(self):
        pb = self.problem
        self.m = self.hp["inner_steps"] or self.derived["inner_steps"]
        self.h = default_stepsize(self.hp["stepsize"], self.derived.get("stepsize"))
        self.engine = LocalSVRG(pb, pooled=True) if pb.n_classes == 1 else LocalSVRGSoftmax(pb, pooled=True)

    def samples(self) -> np.ndarray:
        """This iteration's m example indices (the contract FSVRG with K = 1 shares)."""
        n, m = self.problem.n, self.m
        rng = self.rng(SAMPLE_STREAM)
        if self.hp["sampling"] == "uniform":
            return uniform_samples(rng, np.array([n]), np.array([m]))
        blocks = -(-m // n)
        return permutation_samples(rng, np.arange(blocks + 1, dtype=np.int64) * n)[:m]

    def _step(self):
        pb = self.problem
        z = self.margins()
        g = self.gradient()
        delta = self.engine.run(self.w, z, g, g, self.samples(), np.zeros(1, dtype=np.int64),
                                np.array([self.m]), np.array([self.h]), np.ones(1),
                                lam=pb.lam, rho=pb.lam, check_stop=self.check_stop)
        self.grad_evals += pb.n + self.m
        self.w = self.w + delta
