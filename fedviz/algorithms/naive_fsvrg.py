"""Naive federated SVRG: Algorithm 3 of the paper (Section 3.5).

Each iteration takes two rounds.  The server collects ∇f(w^t); every node k starts from
w_k = w^t and takes the same number m of SVRG steps

    w_k ← w_k − h (∇f_i(w_k) − ∇f_i(w^t) + ∇f(w^t)),   i uniform on P_k with replacement,

and the server averages, w^{t+1} = w^t + (1/K) Σ_k (w_k − w^t).  By Proposition 1 this is
DANE (Algorithm 2) with η = 1, μ = 0 and one pass of SVRG as its local solver; the two
draw their samples from the same stream, so they produce the same iterates (see
:mod:`.dane`).  It ignores unbalanced node sizes and sparsity patterns, which is what
Algorithm 4 (:mod:`.fsvrg`) fixes.

The local loop is the compiled kernel of :mod:`._svrg_kernels`.  Samples: node k's m
local indices are drawn by ``uniform_samples(rng(SAMPLE_STREAM), sizes, m)``.  Work is
counted when the iteration completes: n for ∇f(w^t) and one example gradient per local
step (∇f_i(w^t) reuses the margin x_iᵀw^t of the full-gradient pass).
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np

from ..problems.budget import StateSize
from ._softmax_kernels import LocalSVRGSoftmax
from ._svrg_kernels import (
    SAMPLE_STREAM,
    LocalSVRG,
    uniform_samples,
)
from .base import Algorithm, Param, default_stepsize


class NaiveFSVRG(Algorithm):
    name = "naive-fsvrg"
    title = "Naive FSVRG"
    reference = "Algorithm 3, Section 3.5"
    divergence_hint = ("stepsize", "lower")
    multiclass = True  # softmax: the local loop on the d × C model (issue 22)
    state = StateSize(entries=1.5, rows=8, model=24)  # tracemalloc's peaks × 2.2 (tests/unit/test_budget.py)
    kept_defaults = MappingProxyType({
        "stepsize": "1/(2L̄) is kept on purpose, though a larger step ends lower on some files: this is "
                    "Algorithm 3 as printed (by Proposition 1, DANE with one SVRG pass at the same h); FSVRG shows "
                    "what its scalings and safeguard add.",
    })
    params = (
        Param("stepsize", "float", None,
              "Stepsize h of every local step.  Default 1/(2L̄), L̄ = (1/γ) mean‖x_i‖² + λ the "
              "smoothness of an average f_i: the usual SVRG choice of a fraction of 1/L, with "
              "the average in place of the worst example, which sparse data makes far larger.",
              low=0, low_open=True, log=True),
        Param("local_steps", "int", None,
              "m, the number of local steps on every node (Algorithm 3 uses the same m "
              "everywhere).  Default round(n/K), the mean node size: one pass over the data "
              "in total per iteration.", low=1, high=1_000_000),
    )

    @classmethod
    def _derive(cls, pb, hp) -> dict:
        out = {}
        if hp["local_steps"] is None:
            out["local_steps"] = pb.mean_node_size
        if hp["stepsize"] is None:
            out["stepsize"] = 0.5 / pb.average_example_smoothness
        return out

    def setup(self):
        pb = self.problem
        K = pb.data.n_nodes
        self.m = self.hp["local_steps"] or self.derived["local_steps"]
        self.h = default_stepsize(self.hp["stepsize"], self.derived.get("stepsize"))
        self.engine = LocalSVRG(pb) if pb.n_classes == 1 else LocalSVRGSoftmax(pb)
        self.steps = np.full(K, self.m, dtype=np.int64)
        self.sample_ptr = np.arange(K + 1, dtype=np.int64) * self.m
        self.hk = np.full(K, self.h)
        self.alpha = np.full(K, 1.0 / K)

    def _step(self):
        pb = self.problem
        # Round 1: ∇f(w^t).  Round 2: ∇f(w^t) down, the local solutions w_k up.
        z = self.margins()
        g = self.gradient()
        samples = uniform_samples(self.rng(SAMPLE_STREAM), pb.data.node_sizes, self.steps)
        delta = self.engine.run(self.w, z, g, g, samples, self.sample_ptr, self.steps, self.hk,
                                self.alpha, lam=pb.lam, rho=pb.lam, check_stop=self.check_stop)
        self.grad_evals += pb.n + int(self.steps.sum())
        self.count_round()
        self.count_round()
        self.w = self.w + delta
