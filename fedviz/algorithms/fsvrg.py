"""Federated SVRG (FSVRG): the paper's proposed method, Algorithm 4 (Section 3.6).

Each iteration takes two rounds.  First the server collects ∇f(w^t) (eq. 7).  Then every
node k starts from w_k = w^t and runs one pass over a random permutation of its n_k
examples with the local stepsize h_k = h/n_k,

    w_k ← w_k − h_k ( S_k [∇f_i(w_k) − ∇f_i(w^t)] + ∇f(w^t) ),

and the server aggregates w^{t+1} = w^t + A Σ_k (n_k/n)(w_k − w^t).

Each of the four modifications of Section 3.6.2 that turn naive FSVRG (Algorithm 3) into
Algorithm 4 can be switched off on its own, so the dashboard can show an ablation:

1. ``local_stepsize``: h_k = h/n_k (off: h_k = h);
2. ``size_weights``: aggregation weights n_k/n (off: 1/K);
3. ``gradient_scaling``: S_k = Diag(s_k^j), s_k^j = φ^j/φ_k^j (off: S_k = I);
4. ``aggregate_scaling``: A = Diag(K/ω^j) (off: A = I).

Where S_k applies.  With f_i(w) = φ_i(x_iᵀw) + (λ/2)‖w‖²,
∇f_i(w_k) − ∇f_i(w^t) = (φ_i'(x_iᵀw_k) − φ_i'(x_iᵀw^t)) x_i + λ(w_k − w^t).  s_k^j is defined
only where n_k^j ≠ 0, the support of the data term, so S_k scales the data term only and
the regulariser's difference λ(w_k − w^t) stays unscaled.  This is the reading that keeps
the regulariser a plain shrinkage on every coordinate (it is what the sparse, "just in
time" loop needs), and the choice is immaterial in the limit cases: for K = 1 all
s_k^j = 1 and A = I, so FSVRG is exactly SVRG (Algorithm 1) with m = n, stepsize h/n and
permutation sampling.  Coordinates with ω^j = 0 (in no example) have a^j = 1.

The local loop is the compiled kernel of :mod:`._svrg_kernels`; a node costs
O(nnz_k + |support_k|).  Samples come from ``rng(SAMPLE_STREAM)``: one key per example,
node k visiting its examples in the stable argsort order of its keys.  Work is counted
at the end of an iteration (n example gradients for ∇f(w^t), one per local step), so an
iteration interrupted by Stop leaves the counters as they were.
"""

from __future__ import annotations

import numpy as np

from ._svrg_kernels import SAMPLE_STREAM, LocalSVRG, permutation_samples
from .base import Algorithm, Param, default_stepsize


class FSVRG(Algorithm):
    name = "fsvrg"
    title = "FSVRG"
    reference = "Algorithm 4, Section 3.6"
    divergence_hint = ("stepsize", "lower")
    params = (
        Param("stepsize", "float", None,
              "Stepsize h; node k steps with h_k = h/n_k.  Default min(n̄/(2L̄), 4/L): a node "
              "of average size n̄ = n/K takes steps of 1/(2L̄), L̄ = (1/γ) mean‖x_i‖² + λ the "
              "smoothness of an average example, and the horizon h of a node's pass is capped "
              "at 4/L (L the smoothness of f; no cap for K = 1), beyond which the nodes "
              "over-fit their own data as DANE does.  With local_stepsize off, h is divided "
              "by n̄.  The paper tuned h after the fact (Section 4.1); on the google-plus-like "
              "generator (K = 50 to 1000, IID and not, logistic and ridge) this default sits "
              "2 to 14 times below the largest h that still converges.",
              low=0, low_open=True, log=True),
        Param("local_stepsize", "bool", True,
              "Modification 1 of Section 3.6.2: local stepsize h_k = h/n_k, so every node moves "
              "about as far in its one pass over its data.  Off: h_k = h on every node."),
        Param("size_weights", "bool", True,
              "Modification 2: aggregate the updates with weights n_k/n, which makes the "
              "aggregated step an unbiased gradient step.  Off: the plain average 1/K."),
        Param("gradient_scaling", "bool", True,
              "Modification 3: scale the stochastic gradient differences by S_k = Diag(φ^j/φ_k^j), "
              "so a feature over-represented on a node does not overshoot.  Off: S_k = I."),
        Param("aggregate_scaling", "bool", True,
              "Modification 4: scale the aggregated update per coordinate by a^j = K/ω^j, "
              "trusting the few nodes that see a rare feature.  Off: A = I."),
    )

    def setup(self):
        pb = self.problem
        ds = pb.data
        self.sizes = ds.node_sizes.astype(np.int64)
        self.engine = LocalSVRG(pb)
        self.phi = ds.stats.phi if self.hp["gradient_scaling"] else None
        self.A = ds.stats.A if self.hp["aggregate_scaling"] else None
        self.h = default_stepsize(self.hp["stepsize"], self.derived.get("stepsize"))
        K = ds.n_nodes
        self.hk = self.h / self.sizes if self.hp["local_stepsize"] else np.full(K, self.h)
        self.alpha = self.sizes / pb.n if self.hp["size_weights"] else np.full(K, 1.0 / K)

    @classmethod
    def _derive(cls, pb, hp) -> dict:
        """The default h; see the ``stepsize`` help text."""
        if hp["stepsize"] is not None:
            return {}
        K = pb.data.n_nodes
        n_bar = pb.n / K
        L_bar = pb.average_example_smoothness
        h = n_bar / (2.0 * L_bar)
        if K > 1:
            h = min(h, 4.0 / pb.smoothness)
        if not hp["local_stepsize"]:
            h /= n_bar
        return {"stepsize": h}

    def default_stepsize(self) -> float:
        """The default h for this run's problem and hyperparameters (:meth:`derived_defaults`)."""
        return type(self)._derive(self.problem, {**self.hp, "stepsize": None})["stepsize"]

    def _step(self):
        pb = self.problem
        # Round 1: ∇f(w^t).  Round 2: ∇f(w^t) down, the local solutions w_k up.
        z = self.margins()
        g = self.gradient()
        samples = permutation_samples(self.rng(SAMPLE_STREAM), pb.data.offsets)
        delta = self.engine.run(self.w, z, g, g, samples, pb.data.offsets, self.sizes, self.hk,
                                self.alpha, lam=pb.lam, rho=pb.lam, phi=self.phi,
                                check_stop=self.check_stop)
        if self.A is not None:
            delta *= self.A
        self.grad_evals += 2 * pb.n
        self.count_round()
        self.count_round()
        self.w = self.w + delta
