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

The safeguard (``safeguard``, on by default; not in the paper) is FSVRG's: the full-gradient
pass of iteration t+1 also gives f at the anchor w^{t+1} that iteration t's stochastic steps
produced; the method adopts it if f did not rise, else keeps w^t and halves h for the rest of
the run.  Why: the best fixed h sits just below a cliff whose place no data statistic gives —
measured (f − f* after 30 iterations on a9a, agaricus and dna.scale): the best h is 1/L̄ on a9a
and 2/L̄ on agaricus and dna.scale, where 1/(2L̄) ends 5–2·10⁶× behind, and 2/L̄ on a9a ends at
0.19 (L̄ holds the logistic's curvature bound ¼, which the rows meet only at margin 0; agaricus is
separable, and its margins grow far from 0).  Started at 2/L̄, the safeguard drops the first rising
epoch.  With the
squared loss, whose curvature is its bound everywhere (``Loss.exact_curvature``), it starts at
1/(2L̄): started higher it only dropped epochs (two of the first three on the properties' data).
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

#: The safeguarded default h in units of 1/L̄ (module docstring).
SAFEGUARDED_START = 2.0


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
              "Stepsize h.  Default with the safeguard: 2/L̄ to start (1/(2L̄) for the squared loss, "
              "whose curvature is L̄'s own), halved by the safeguard after an epoch that raised f; "
              "without it 1/(2L̄).  L̄ = (1/γ) mean‖x_i‖² + λ is the "
              "smoothness of an average f_i (SVRG's theory asks for a fraction of 1/L_max; on "
              "sparse data the worst example is far above the average and the average is what works).",
              low=0, low_open=True, log=True),
        Param("inner_steps", "int", None,
              "m, stochastic steps per outer iteration.  Default n (the paper: m is 'typically "
              "a small multiple (1-5) of n').", low=1, high=10_000_000),
        Param("sampling", "choice", "uniform",
              "'uniform': i uniform with replacement (Algorithm 1).  'permutation': a random "
              "permutation of the data, renewed every n steps.", choices=("uniform", "permutation")),
        Param("safeguard", "bool", True,
              "Monotone safeguard (not in the paper; FSVRG's): the full gradient of each iteration "
              "also gives f at the last epoch's result; if f rose, the method keeps the previous "
              "anchor and halves h for the rest of the run.  The rejected epoch's work stays counted, "
              "and the model shown is the last accepted anchor.  Off: Algorithm 1 as printed, at "
              "h = 1/(2L̄)."),
    )

    @classmethod
    def _derive(cls, pb, hp) -> dict:
        out = {}
        if hp["inner_steps"] is None:
            out["inner_steps"] = pb.n
        if hp["stepsize"] is None:
            start = SAFEGUARDED_START if hp["safeguard"] and not pb.loss.exact_curvature else 0.5
            out["stepsize"] = start / pb.average_example_smoothness
        return out

    def setup(self):
        pb = self.problem
        self.m = self.hp["inner_steps"] or self.derived["inner_steps"]
        self.h = default_stepsize(self.hp["stepsize"], self.derived.get("stepsize"))
        self.engine = LocalSVRG(pb, pooled=True) if pb.n_classes == 1 else LocalSVRGSoftmax(pb, pooled=True)
        #: The safeguard's state (FSVRG's): the last accepted anchor's pass, the last epoch's result,
        #: and the number of epochs rejected so far (each one halved h).
        self._accepted = None
        self._trial = None
        self.rejected = 0

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
        w, h = self.w, self.h
        if self.hp["safeguard"]:
            adopted, accepted = self.judge_trial(self._trial, self._accepted)
            w, z, g = accepted[0], accepted[1], accepted[3]
            h = h if adopted else h / 2
        else:
            z = self.margins()
            g = self.gradient()
        delta = self.engine.run(w, z, g, g, self.samples(), np.zeros(1, dtype=np.int64),
                                np.array([self.m]), np.array([h]), np.ones(1),
                                lam=pb.lam, rho=pb.lam, check_stop=self.check_stop)
        # Counted when the epoch completes (a Stop inside it leaves the run as it was).
        self.grad_evals += pb.n + self.m
        if not self.hp["safeguard"]:
            self.w = w + delta
            return
        if h != self.h:
            self.rejected += 1
            self.h = h
        self.hold_trial(w + delta, accepted)  # the model is the last accepted anchor; the next pass judges the trial
