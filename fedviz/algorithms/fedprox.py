"""FedProx: FedAvg with a proximal term in each local objective (Li et al. 2020, Algorithm 2).

Sampled node k minimises F_k(w) + (μ/2)‖w − w^t‖² by E epochs of minibatch SGD from the
server model w^t; the server averages as FedAvg does.  The proximal term is the
quadratic perturbation (μ/2)‖w − w^t‖² of the paper's Section 3.4 (with a_k^t = 0): it
keeps the local iterates near w^t and so limits client drift, but does not remove it — at
w* every local objective's minimiser still differs from w* on non-IID data, so FedProx
lacks property (A) of Section 3.1 for any μ < ∞.  μ = 0 is FedAvg exactly (same samples
for the same seed).
"""

from __future__ import annotations

from ..problems.budget import StateSize
from .base import Param
from .fedavg import BATCH_SIZE, CLIENT_FRACTION, LOCAL_EPOCHS, FedAvg


class FedProx(FedAvg):
    name = "fedprox"
    title = "FedProx"
    reference = "Li et al. (2020), Algorithm 2; quadratic perturbation of Section 3.4"
    divergence_hint = ("stepsize", "lower")
    state = StateSize(entries=0.5, rows=2, model=70)  # tracemalloc's peaks × 2.2 (tests/unit/test_budget.py)
    params = (
        CLIENT_FRACTION, LOCAL_EPOCHS, BATCH_SIZE,
        Param("stepsize", "float", None,
              "Local step η.  Default 1/(L_max + μ), L_max = max_i (1/γ)‖x_i‖² + λ: the local "
              "objective with its proximal term is (L_max + μ)-smooth on every minibatch.",
              low=0, low_open=True, log=True),
        Param("mu", "float", 0.01,
              "μ ≥ 0: weight of the proximal term (μ/2)‖w − w^t‖² that keeps local iterates near "
              "the server model.  0 is FedAvg.  Default 0.01, from the grid {0.001, 0.01, 0.1, 1} "
              "Li et al. tune over.", low=0),
    )

    @classmethod
    def proximal_weight(cls, hp) -> float:
        return float(hp["mu"])
