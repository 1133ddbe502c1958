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
s_k^j = 1 and A = I, so FSVRG without the safeguard is exactly SVRG (Algorithm 1) with
m = n, stepsize h/n and permutation sampling.

The safeguard (``safeguard``, on by default; not in the paper).  The stepsize the paper
tuned after the fact is started high, at 4 n̄/L̄, and the objective decides: the
full-gradient pass of iteration t+1 also gives f at the trial point w^{t+1} that
iteration t's local round produced.  If f(w^{t+1}) ≤ f(w^t) the server adopts it;
otherwise it keeps w^t (whose margins and gradient it kept), halves h for the rest of
the run, and runs the local round from w^t again.  Every iteration still costs two
rounds and 2n example gradients, a rejected trial included, and the model
(``self.w``, what the records show) is the last accepted point: a rejection shows as an
iteration where f stays put while the counters advance, and the curve never rises.  Coordinates with ω^j = 0 (in no example) have a^j = 1.

The local loop is the compiled kernel of :mod:`._svrg_kernels`; a node costs
O(nnz_k + |support_k|).  Samples come from ``rng(SAMPLE_STREAM)``: one key per example,
node k visiting its examples in the stable argsort order of its keys.  Work is counted
at the end of an iteration (n example gradients for ∇f(w^t), one per local step), so an
iteration interrupted by Stop leaves the counters as they were.
"""

from __future__ import annotations

import numpy as np

from ..problems.budget import StateSize
from ._softmax_kernels import LocalSVRGSoftmax
from ._svrg_kernels import SAMPLE_STREAM, LocalSVRG, permutation_samples
from .base import Algorithm, Param, default_stepsize


#: The safeguarded default h in units of n̄/L̄ (see the ``stepsize`` help text).
SAFEGUARDED_START = 4.0


class FSVRG(Algorithm):
    name = "fsvrg"
    title = "FSVRG"
    reference = "Algorithm 4, Section 3.6"
    divergence_hint = ("stepsize", "lower")
    #: Softmax (issue 22): the same loop on the d × C model; S_k and A scale a feature's row of C
    #: values (the support and ω^j are the data's, shared by all classes).
    multiclass = True
    state = StateSize(entries=1.5, rows=11, model=26)  # tracemalloc's peaks × 2.2 (tests/unit/test_budget.py)
    params = (
        Param("stepsize", "float", None,
              "Stepsize h; node k steps with h_k = h/n_k.  Default with the safeguard: 4 n̄/L̄, "
              "n̄ = n/K the mean node size and L̄ = (1/γ) mean‖x_i‖² + λ the smoothness of an "
              "average example, so a node of average size steps by 4/L̄; the safeguard halves it "
              "each time the objective rises.  Why: the best h of a ×2 grid (f − f* after 30 "
              "iterations) lies at 0.4 to 12 × n̄/L̄ on google-plus-small, a9a (100 nodes, IID and "
              "Dirichlet 0.5), dna (class 3) and google-plus-small with Dirichlet(0.01), but at "
              "8 to 256 × 1/L; starting high and halving on a rise lands within 3× of that best "
              "on each, and converges on disjoint features, where Algorithm 4 as printed diverges "
              "from h = 2/L up (python -m fedviz.bench.stepsize_check).  Without the safeguard the default is "
              "the cautious min(n̄/(2L̄), 4/L) (no cap for K = 1): it has no step to take back, "
              "and on the first four of those data sets the 4/L cap binds and leaves f − f* 13 to 262 times "
              "the grid's best.  With local_stepsize off, h is "
              "divided by n̄.  The paper tuned h after the fact (Section 4.1).",
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
        Param("safeguard", "bool", True,
              "Monotone safeguard (not in the paper): the full-gradient round of each iteration "
              "also gives f at the last local round's result w^{t+1}; if f rose above f(w^t), "
              "the server discards w^{t+1}, keeps w^t and halves h for the rest of the run.  It "
              "costs no extra round (f comes with the gradient) but a rejected step's rounds and "
              "work stay counted, and the model shown is the last accepted point, one local round "
              "behind the newest trial.  Off: Algorithm 4 exactly as printed, with the cautious "
              "default h of the stepsize help."),
    )

    def setup(self):
        pb = self.problem
        ds = pb.data
        self.sizes = ds.node_sizes.astype(np.int64)
        self.engine = LocalSVRG(pb) if pb.n_classes == 1 else LocalSVRGSoftmax(pb)
        self.phi = ds.stats.phi if self.hp["gradient_scaling"] else None
        self.A = ds.stats.A if self.hp["aggregate_scaling"] else None
        self.h = default_stepsize(self.hp["stepsize"], self.derived.get("stepsize"))
        K = ds.n_nodes
        self.hk = self.h / self.sizes if self.hp["local_stepsize"] else np.full(K, self.h)
        self.alpha = self.sizes / pb.n if self.hp["size_weights"] else np.full(K, 1.0 / K)
        #: The safeguard's state: the last accepted point (w, X w, f, ∇f, training error), the
        #: trial point of the last local round, and the number of trials rejected so far (each
        #: one halved h).
        self._accepted = None
        self._trial = None
        self.rejected = 0

    @classmethod
    def _derive(cls, pb, hp) -> dict:
        """The default h; see the ``stepsize`` help text."""
        if hp["stepsize"] is not None:
            return {}
        K = pb.data.n_nodes
        n_bar = pb.n / K
        L_bar = pb.average_example_smoothness
        if hp["safeguard"]:
            h = SAFEGUARDED_START * n_bar / L_bar
        else:
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
        # Round 1: ∇f at the server's point, and f with it (the same pass).
        w, hk = self.w, self.hk
        if self.hp["safeguard"]:
            w, z, g, hk, accepted = self._check_trial()
        else:
            z = self.margins()
            g = self.gradient()
        # Round 2: ∇f(w^t) down, the local solutions w_k up.
        samples = permutation_samples(self.rng(SAMPLE_STREAM), pb.data.offsets)
        delta = self.engine.run(w, z, g, g, samples, pb.data.offsets, self.sizes, hk,
                                self.alpha, lam=pb.lam, rho=pb.lam, phi=self.phi,
                                check_stop=self.check_stop)
        if self.A is not None and pb.n_classes == 1:
            delta *= self.A
        elif self.A is not None:
            delta = (pb.as_model(delta) * self.A[:, None]).reshape(pb.size)
        # Counted when the iteration completes (a Stop inside the local round leaves the run
        # as it was): the gradient round is made and counted whether its point is accepted
        # or not, and a rejected step's local round was counted in the iteration that took it.
        self.grad_evals += 2 * pb.n
        self.count_round()
        self.count_round()
        if not self.hp["safeguard"]:
            self.w = w + delta
            return
        if hk is not self.hk:
            self.rejected += 1
            self.h, self.hk = self.h / 2, hk
        # The server's model is the last accepted point (see _check_trial); its metrics come
        # from the pass that accepted it, so the runner does not recompute them.
        self.hold_trial(w + delta, accepted)

    def _check_trial(self):
        """The safeguard's round 1 (:meth:`judge_trial`): the trial point w^{t+1} of the last local
        round is accepted as the server's model when f(w^{t+1}) ≤ f(w^t) (w^t the last accepted
        point); else the server keeps w^t and this and every later local round use h/2.  Returns the
        point the local round starts from, its margins and gradient, the local stepsizes and the new
        accepted state."""
        adopted, state = self.judge_trial(self._trial, self._accepted)
        return state[0], state[1], state[3], self.hk if adopted else self.hk / 2, state
