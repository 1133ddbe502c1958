"""Ditto: a global model trained as FedAvg, and one personal model per node tied to it
(Li, Hu, Beirami & Smith 2021, "Ditto: Fair and Robust Federated Learning Through
Personalization", Algorithm 1; the update order of litian96/ditto, flearn/trainers_MTL/ditto.py).

Ditto solves, for every node k, the personal problem

    min_v  h_k(v; w*) = F_k(v) + (λ_D/2)‖v − w*‖²,

F_k the local objective of the paper's Section 3.3, eq. (6) (regulariser λ included), w* the
global model.  Its minimiser v_k(λ_D) runs from the Local model argmin F_k (λ_D = 0) to w*
(λ_D → ∞); :mod:`fedviz.personal` computes it exactly.  The iterative algorithm:

- the global model trains as FedAvg (:class:`~fedviz.algorithms.fedavg.FedAvg`): the same
  sampled nodes, the same local minibatches and the same local loop, so with the same seed and
  hyperparameters its iterate is FedAvg's, bit for bit;
- each sampled node k, in the same round, takes the same T_k local steps on its personal model
  with the same minibatches b (litian96/ditto steps both models on each ``data_batch``)::

      v_k ← v_k − η [ ∇f_b(v_k) + λ v_k + λ_D (v_k − w^t) ],

  w^t the global model the node received that round (not its local FedAvg iterate) and η the
  local step the global model uses (one learning rate in litian96/ditto).  Nodes not sampled
  keep their v_k; every v_k starts at w0.

With every node, full local batches and one epoch, the global model is GD on f, so w^t → w*,
and each v_k takes gradient steps on h_k(·; w^t): v_k → v_k(λ_D), the exact answer.

Memory.  The personal models are a dense K × d array (row k is v_k).  A sparse store per node
support does not suffice: off its support v_k still moves every round, toward the w^t of that
round (v_kj ← r^T v_kj + ηλ_D q_T w^t_j), so v_k off its support is a node-specific mixture of
every global model it has received, i.e. it needs the history of w^t (R × d, growing with the
run).  Dense models are exact and simple, and evaluation reads v_k on the node's test
features, which need not be on its training support.  So the run is refused when K·d exceeds
:data:`PERSONAL_VALUES` (200 MB of float64): google-plus-small (K = 500 × d = 5,002, 20 MB) fits,
the paper's K = 10,000 × d = 20,002 (1.6 GB) does not; its exact v_k(λ_D) comes from
:mod:`fedviz.personal` instead.

Cost per round: FedAvg's, plus the personal loop, O(E·nnz_k + d) per sampled node: a
coordinate moves by a constant affine map r·v + ηλ_D w^t_j (r = 1 − η(λ + λ_D)) between the
examples that touch it, brought up to date "just in time" with the tables of
:func:`~fedviz.algorithms._local_sgd_kernels.geometric_tables`, and the whole row once at the
end of the node's loop.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..problems.budget import StateSize
from ..errors import ParameterError
from ..problems._compiled import dphi
from ._local_sgd_kernels import geometric_tables
from .base import Param
from .fedavg import BATCH_SIZE, CLIENT_FRACTION, LOCAL_EPOCHS, FedAvg

#: The most personal-model values (K · d) a run keeps: 25,000,000 float64 are 200 MB.  Above it
#: Ditto and APFL refuse the problem (see the module docstring for why the models are dense).
PERSONAL_VALUES = 25_000_000


def _size(values: int) -> str:
    """The memory of ``values`` float64 numbers, in GB or MB."""
    b = 8 * values
    return f"{b / 1e9:.2g} GB" if b >= 1e9 else f"{b / 1e6:.3g} MB"


def check_personal_budget(algorithm, problem, copies: int = 1) -> None:
    """Refuse a problem whose ``copies`` K × d arrays of personal models exceed :data:`PERSONAL_VALUES`."""
    K, size = problem.data.n_nodes, problem.size
    values = copies * K * size
    if values > PERSONAL_VALUES:
        times = f"{copies} × " if copies > 1 else ""
        raise ParameterError(
            f"{algorithm.name}.personal_models",
            f"{times}K × d = {times}{K:,} × {size:,} = {values:,} values ({_size(values)})",
            f"at most {PERSONAL_VALUES:,} values ({_size(PERSONAL_VALUES)}): "
            f"{algorithm.title} keeps {'two dense arrays' if copies > 1 else 'a dense model'} per node",
            hint="use fewer nodes or features (the exact personalised models need no such run)")


@njit(cache=True, nogil=True)
def _ditto_personal(V, x, nodes, order, order_start, offsets, indptr, indices, data, labels, code,
                    smoothing, eta, lam, lam_d, epochs, bsize, last, coef, rpow, qsum):
    """Node ``nodes[b]``'s T local steps on its personal model V[k] (in place), from its row
    orders ``order[order_start[b]:]`` (its rows in order when ``bsize`` is 0, full batch).

    Step: v ← v − η[(1/|b|) Σ_{i∈b} φ'(x_iᵀv) x_i + λv + λ_D(v − x)], x = w^t; the margins of a
    minibatch are all taken at v^t before it moves.  A coordinate no example of the step touches
    moves by v_j ← r v_j + a_j, r = 1 − η(λ + λ_D), a_j = ηλ_D x_j: applied lazily, m steps at
    once as r^m v_j + a_j (1 − r^m)/(1 − r).
    """
    d = V.shape[1]
    h = eta * (lam + lam_d)
    r = 1.0 - h
    for b in range(nodes.shape[0]):
        k = nodes[b]
        v = V[k]
        start = offsets[k]
        nk = offsets[k + 1] - start
        obase = order_start[b]
        full = bsize == 0 or bsize >= nk
        B = nk if full else bsize
        nb = (nk + B - 1) // B
        T = epochs * nb
        geometric_tables(h, T, rpow, qsum)
        for j in range(d):
            last[j] = 0
        t = 0
        for e in range(epochs):
            ebase = obase + e * nk
            for bi in range(nb):
                lo = bi * B
                hi = min(lo + B, nk)
                inv = 1.0 / (hi - lo)
                for q in range(lo, hi):
                    i = start + (q if bsize == 0 else order[ebase + q])
                    z = 0.0
                    for p in range(indptr[i], indptr[i + 1]):
                        val = data[p]
                        if val == 0.0:
                            continue
                        j = indices[p]
                        m = t - last[j]
                        if m > 0:
                            v[j] = rpow[m] * v[j] + eta * lam_d * x[j] * qsum[m]
                            last[j] = t
                        z += val * v[j]
                    coef[q - lo] = dphi(code, z, labels[i], smoothing) * inv
                for q in range(lo, hi):
                    i = start + (q if bsize == 0 else order[ebase + q])
                    cq = coef[q - lo]
                    for p in range(indptr[i], indptr[i + 1]):
                        val = data[p]
                        if val == 0.0:
                            continue
                        j = indices[p]
                        if last[j] == t:
                            v[j] = r * v[j] + eta * lam_d * x[j]
                            last[j] = t + 1
                        v[j] -= eta * cq * val
                t += 1
        for j in range(d):
            m = T - last[j]
            if m > 0:
                v[j] = rpow[m] * v[j] + eta * lam_d * x[j] * qsum[m]


class Ditto(FedAvg):
    """Ditto: FedAvg's global model, and per node a personal model pulled toward it by λ_D.

    Attributes
    ----------
    V : ndarray (K, d)
        The personal models, row k node k's v_k (read through :meth:`personal_models`).
    """

    name = "ditto"
    title = "Ditto"
    reference = ("Li, Hu, Beirami & Smith (2021), Algorithm 1 (litian96/ditto's update order); "
                 "the global model is FedAvg's")
    divergence_hint = ("stepsize", "lower")
    personalised = True
    multiclass = False
    multiclass_reason = ("its personal-model loop works on one weight vector per node "
                         "(binary and regression models only)")
    state = StateSize(support=0.5, rows=3, model=84, node_models=1.2)  # tracemalloc's peaks × 2.2 (tests/unit/test_budget.py)
    params = (
        CLIENT_FRACTION, LOCAL_EPOCHS, BATCH_SIZE,
        Param("stepsize", "float", None,
              "Local step η of both the global and the personal models.  Default 1/(L_max + λ_D), "
              "L_max = max_i (1/γ)‖x_i‖² + λ: the personal objective F_k + (λ_D/2)‖v − w‖² is "
              "(L_max + λ_D)-smooth on every minibatch.", low=0, low_open=True, log=True),
        Param("ditto_lambda", "float", 1.0,
              "λ_D ≥ 0: weight of (λ_D/2)‖v_k − w‖², which ties each node's personal model v_k to "
              "the global model w.  0 trains each v_k on its own data alone (Local); large λ_D "
              "keeps v_k at w.  Default 1, litian96/ditto's run scripts' λ.", low=0, high=1e6),
    )

    @classmethod
    def derived_stepsize(cls, problem, hp) -> float:
        return 1.0 / (problem.max_example_smoothness + float(hp["ditto_lambda"]))

    def setup(self):
        check_personal_budget(self, self.problem)
        super().setup()
        self.lam_d = float(self.hp["ditto_lambda"])
        K, d = self.problem.data.n_nodes, self.problem.size
        # Every v_k starts where the global model starts (litian96/ditto: local_models = initial params).
        self.V = np.tile(self.w, (K, 1))
        L = self.local
        self._last = np.zeros(d, dtype=np.int64)
        self._coef = np.zeros(L._COEF.shape[1])
        self._rpow = np.zeros(L._RPOW.shape[1])
        self._qsum = np.zeros(L._QSUM.shape[1])

    def personal_models(self) -> np.ndarray:
        """The personal models v_k (K × d, row k node k's), read-only."""
        out = self.V.view()
        out.flags.writeable = False
        return out

    def _step(self):
        nodes = self.sample_nodes()
        # One draw of the round's row orders feeds both loops (the same minibatches, as
        # litian96/ditto's data_batch); LocalSGD.orders is the stream its round draws itself.
        orders = self.local.orders(nodes, self.rng(1))
        sizes = self.problem.data.node_sizes[nodes]
        delta, _ = self.local.round(self.w, nodes, sizes / sizes.sum(), orders=orders,
                                    check_stop=self.check_stop)
        self.grad_evals += 2 * self.hp["local_epochs"] * int(sizes.sum())   # global and personal
        up, down = self.vectors_per_node
        self.count_round(up, down, nodes=nodes.size)
        self._personal_round(nodes, orders)
        self.sampled = nodes
        self.w = self.w + delta

    def _personal_round(self, nodes, orders):
        L = self.local
        block = L.epochs * L.sizes[nodes]
        starts = np.concatenate([[0], np.cumsum(block)[:-1]]).astype(np.int64)
        if orders.size == 0:
            orders = np.zeros(1, dtype=np.int64)
        x = np.ascontiguousarray(self.w, dtype=np.float64)
        _ditto_personal(self.V, x, nodes, orders, starts, L.offsets, L.indptr, L.indices, L.data,
                        L.labels, L.rows.loss, L.rows.smoothing, L.eta, L.lam, self.lam_d, L.epochs,
                        L.batch_size, self._last, self._coef, self._rpow, self._qsum)
