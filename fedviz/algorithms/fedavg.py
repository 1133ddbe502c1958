"""FedAvg: Federated Averaging (McMahan et al. 2017, Algorithm 1 "FederatedAveraging").

Each round the server samples a fraction C of the nodes, each sampled node runs E epochs
of minibatch SGD on its local objective F_k (the paper's Section 3.3, eq. (6), regulariser
included) from the server model, and the server averages the results with weights
n_k / Σ_{l∈S} n_l.  This is the "minimise locally, then average" idea the paper discusses
at the start of Section 3.4, made practical by stopping the local work early.  Because the
local optima of F_k differ on non-IID data, FedAvg does NOT have the paper's property (A)
(Section 3.1): started at w*, it drifts away ("client drift"), and with a constant step it
settles at a point whose distance to w* grows with the local work.  It is exact on
identical nodes (property (D)).

This module also holds what FedProx and SCAFFOLD share: the hyperparameters and the
sampling of nodes.  The local loop itself is in
:mod:`fedviz.algorithms._local_sgd_kernels`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..problems.budget import StateSize
from ..errors import ParameterError
from ._local_sgd_kernels import LocalSGD
from ._softmax_kernels import LocalSGDSoftmax
from .base import Algorithm, Param, default_stepsize


@dataclass(frozen=True)
class BatchSizeParam(Param):
    """An integer batch size that also accepts the word 'full' (stored as 0: full batch)."""

    def _allowed(self) -> str:
        return f"{super().range_text()} (a node takes at most its own rows), or 'full' (= 0: full-batch local steps)"

    def validate(self, value, owner: str = ""):
        if isinstance(value, str) and value.strip().lower() == "full":
            return 0
        try:
            return super().validate(value, owner)
        except ParameterError as err:
            raise ParameterError(err.name, err.value, self._allowed()) from None

    def convert(self, text: str, qualname: str):
        # The word 'full' as text (a link, --set); a bad word is refused with range_text below.
        return 0 if str(text).strip().lower() == "full" else super().convert(text, qualname)

    def range_text(self) -> str:
        return self._allowed()


CLIENT_FRACTION = Param(
    "client_fraction", "float", 0.1,
    "C: fraction of the nodes sampled (without replacement) each round; round(C·K) nodes, "
    "at least one.  Only they compute and communicate.  Default 0.1, McMahan et al.'s usual "
    "choice.", low=0, high=1, low_open=True)
LOCAL_EPOCHS = Param(
    "local_epochs", "int", 1,
    "E: passes over its local data each sampled node makes per round.  More local work means "
    "fewer rounds but more client drift on non-IID data.  Default 1.", low=1, high=10_000)
BATCH_SIZE = BatchSizeParam(
    "batch_size", "int", 10,
    "B: examples per local step (a fresh shuffle each epoch, so ⌈n_k/B⌉ steps per epoch); "
    "0 or 'full' takes full-batch gradient steps on F_k (one per epoch).  Default 10, "
    "McMahan et al.'s usual choice.", low=0, high=10**9)
STEPSIZE = Param(
    "stepsize", "float", None,
    "Local step η.  Default 1/L_max, L_max = max_i (1/γ)‖x_i‖² + λ the smoothness of the "
    "worst single example: stable for every minibatch of every node.", low=0, low_open=True,
    log=True)


class FedAvg(Algorithm):
    """Federated Averaging: E epochs of local minibatch SGD on sampled nodes, then a weighted mean.

    Attributes
    ----------
    sampled : ndarray of int
        The nodes sampled in the last round (sorted).
    """

    name = "fedavg"
    title = "FedAvg"
    reference = "McMahan et al. (2017), Algorithm 1; cf. local solve-and-average, Section 3.4"
    divergence_hint = ("stepsize", "lower")
    #: Softmax (issue 22): the local loop on the d × C model (FedProx inherits it, SCAFFOLD not).
    multiclass = True
    state = StateSize(entries=0.5, rows=2, model=70)  # tracemalloc's peaks × 2.2 (tests/unit/test_budget.py)
    params = (CLIENT_FRACTION, LOCAL_EPOCHS, BATCH_SIZE, STEPSIZE)
    #: Vectors each sampled node sends up / receives per round.
    vectors_per_node = (1, 1)

    def setup(self):
        hp = self.hp
        self.eta = default_stepsize(hp["stepsize"], self.derived.get("stepsize"))
        self.h = self.eta   # the effective step under GD's name, which the runner's messages read
        engine = LocalSGD if self.problem.n_classes == 1 else LocalSGDSoftmax
        self.local = engine(self.problem, epochs=hp["local_epochs"], batch_size=hp["batch_size"],
                              stepsize=self.eta, mu=self.proximal_weight(hp),
                              control=self.uses_control_variates())
        self.sampled = np.zeros(0, dtype=np.int64)

    @classmethod
    def _derive(cls, problem, hp) -> dict:
        return {} if hp["stepsize"] is not None else {"stepsize": cls.derived_stepsize(problem, hp)}

    # -- hooks for FedProx and SCAFFOLD ---------------------------------------------------------
    @classmethod
    def derived_stepsize(cls, problem, hp) -> float:
        """The default local step: 1/(L_max + μ), since F_k + (μ/2)‖w − w^t‖² on any minibatch
        is (L_max + μ)-smooth (a minibatch may hold just the worst example)."""
        return 1.0 / (problem.max_example_smoothness + cls.proximal_weight(hp))

    @classmethod
    def proximal_weight(cls, hp) -> float:
        """μ of the proximal term (μ/2)‖w − w^t‖² in the local objective: 0 for FedAvg."""
        return 0.0

    def uses_control_variates(self) -> bool:
        return False

    # -- one round ---------------------------------------------------------------------------------
    def sample_nodes(self) -> np.ndarray:
        """round(C·K) distinct nodes (at least one), drawn from stream 0 of :meth:`rng`, sorted."""
        K = self.problem.data.n_nodes
        m = min(K, max(1, int(round(self.hp["client_fraction"] * K))))
        if m == K:
            return np.arange(K, dtype=np.int64)
        return np.sort(self.rng(0).choice(K, size=m, replace=False)).astype(np.int64)

    def local_round(self, nodes: np.ndarray):
        """Run the sampled nodes' local loops from the current w; (Σ w_k Δ_k, Σ p_k Δs_k)."""
        sizes = self.problem.data.node_sizes[nodes]
        weights = sizes / sizes.sum()
        out = self.local.round(self.w, nodes, weights, rng=self.rng(1), check_stop=self.check_stop)
        self.grad_evals += self.hp["local_epochs"] * int(sizes.sum())
        up, down = self.vectors_per_node
        self.count_round(up, down, nodes=nodes.size)
        return out

    def _step(self):
        nodes = self.sample_nodes()
        delta, _ = self.local_round(nodes)
        self.sampled = nodes
        self.w = self.w + delta
