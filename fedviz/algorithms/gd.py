"""Distributed gradient descent: the GD baseline of the paper's Figure 2 (Section 2.1, 4.1).

Each iteration is one round: nodes send ∇F_k(w^t) weighted by n_k/n, the server forms
∇f(w^t) (eq. 7) and steps w^{t+1} = w^t − h_t ∇f(w^t).  The same step on the flat d × C model
of softmax regression (issue 22): ∇f is the problem's, whatever C.

The paper leaves h_t open ("a stepsize parameter", Section 2.1).  ``steps='fixed'`` keeps it at h
(default 1/L, which can never diverge).  The default, ``steps='bb'``, is the Barzilai–Borwein step
h_t = sᵀy / yᵀy (s = w^t − w^{t−1}, y = ∇f(w^t) − ∇f(w^{t−1}); Barzilai and Borwein 1988, their
second formula) under FSVRG's monotone safeguard: the nodes' pass at a new point returns f with ∇f
(the same round, no extra vector), and a point where f rose is dropped — the server goes back to
the last accepted point, which the nodes hold, and halves the step.  Why: 1/L holds the loss's
curvature bound everywhere, and on real data the curvature along most directions is far below it
(the logistic's bound ¼ is met only at margin 0; one dominant direction sets λ_max(XᵀX)), so the
best fixed step was 2/L to 16/L and beyond, file by file, and 1/L ended 5–8× behind it after 30
iterations (docs/defaults.md).  sᵀy / yᵀy lies between 1/L and 1/λ for every smooth λ-strongly
convex f, so it reads the curvature the iterates meet at no cost; the safeguard makes the curve
monotone, as a status reads it.  Each iteration is still one round of n example gradients, the
dropped points' included.
"""

from __future__ import annotations

import numpy as np

from ..problems.budget import StateSize
from .base import Algorithm, Param, default_stepsize


class GD(Algorithm):
    name = "gd"
    title = "GD"
    reference = "Distributed gradient descent (Section 2.1; Figure 2)"
    divergence_hint = ("stepsize", "lower")
    multiclass = True
    state = StateSize(entries=0.5, support=0.5, rows=5, model=7)  # tracemalloc's peaks × 2.2 (tests/unit/test_budget.py)
    params = (
        Param("stepsize", "float", None, "Step h: the first step with Barzilai–Borwein steps, every step with "
              "fixed steps.  Default 1/L, L = (1/γ)·λ_max(XᵀX)/n + λ, the smoothness constant of f; fixed steps up "
              "to 2/L are stable.", low=0, low_open=True, log=True),
        Param("steps", "choice", "bb",
              "'bb': after the first step, h_t = sᵀy/yᵀy from the last two accepted points and their gradients "
              "(Barzilai–Borwein), with a monotone safeguard (not in the paper): a point where f rose is dropped "
              "and the step halved; the model shown is the last accepted point.  'fixed': h every step, the "
              "textbook method.", choices=("bb", "fixed")),
    )

    @classmethod
    def _derive(cls, problem, hp) -> dict:
        return {} if hp["stepsize"] is not None else {"stepsize": 1.0 / problem.smoothness}

    def setup(self):
        self.h = default_stepsize(self.hp["stepsize"], self.derived.get("stepsize"))
        #: The safeguard's state (:meth:`hold_trial`): the last accepted point's pass, the trial point
        #: waiting for its round, and the count of dropped points.
        self._accepted = None
        self._trial = None
        self.rejected = 0

    def _step(self):
        if self.hp["steps"] == "fixed":
            g = self.full_gradient()
            self.count_round()
            self.w = self.w - self.h * g
            return
        adopted, accepted = self.judge_trial(self._trial, self._accepted)
        self.grad_evals += self.problem.n
        self.count_round()
        if not adopted:
            self.h /= 2
            self.rejected += 1
        elif self._accepted is not None:
            self.h = self._bb_step(self._accepted, accepted)
        self.hold_trial(accepted[0] - self.h * accepted[3], accepted)

    def _bb_step(self, old: tuple, new: tuple) -> float:
        """sᵀy / yᵀy between two accepted points; the current h where it is not a positive finite
        number (y = 0 at an optimum, or sᵀy ≤ 0, which a convex f gives only with λ = 0)."""
        s = new[0] - old[0]
        y = new[3] - old[3]
        sy, yy = float(np.dot(s, y)), float(np.dot(y, y))
        if sy > 0 and yy > 0 and np.isfinite(sy / yy):
            return sy / yy
        return self.h
