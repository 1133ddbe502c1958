"""Distributed gradient descent: the GD baseline of the paper's Figure 2 (Section 4.1).

Each iteration is one round: nodes send ∇F_k(w^t) weighted by n_k/n, the server forms
∇f(w^t) (eq. 7) and steps w^{t+1} = w^t − h ∇f(w^t).  The same step on the flat d × C model
of softmax regression (issue 22): ∇f is the problem's, whatever C.
"""

from __future__ import annotations

from ..problems.budget import StateSize
from .base import Algorithm, Param, default_stepsize


class GD(Algorithm):
    name = "gd"
    title = "GD"
    reference = "Distributed gradient descent (Section 4.1, Figure 2)"
    divergence_hint = ("stepsize", "lower")
    multiclass = True
    state = StateSize(entries=0.5, support=0.5, rows=5, model=7)  # tracemalloc's peaks × 2.2 (tests/unit/test_budget.py)
    params = (
        Param("stepsize", "float", None, "Step h. Default 1/L, L = (1/γ)·λ_max(XᵀX)/n + λ, the "
              "smoothness constant of f; steps up to 2/L are stable.", low=0, low_open=True, log=True),
    )

    @classmethod
    def _derive(cls, problem, hp) -> dict:
        return {} if hp["stepsize"] is not None else {"stepsize": 1.0 / problem.smoothness}

    def setup(self):
        self.h = default_stepsize(self.hp["stepsize"], self.derived.get("stepsize"))

    def _step(self):
        g = self.full_gradient()
        self.count_round()
        self.w = self.w - self.h * g
