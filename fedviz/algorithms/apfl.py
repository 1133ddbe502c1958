"""APFL: Adaptive Personalized Federated Learning with a fixed mixing weight α
(Deng, Kamani & Mahdavi 2020, Algorithm 1 with α_i = α fixed; cf. litian96/ditto,
flearn/trainers_MTL/apfl.py).

Every node k keeps a local model v_k besides its copy w_k of the global model, and is served
the mixture

    v̄_k = α v_k + (1 − α) w,

(α = 0: the global model, α = 1: a local model trained through the mixture).  In a round, each
sampled node starts w_k at the server's w^t and takes T_k local steps, each on one minibatch b
shared by both models (as litian96/ditto's ``data_batch``), both from the same pre-step point::

    w_k ← w_k − η [ ∇f_b(w_k) + λ w_k ]                       (FedAvg's local step)
    v_k ← v_k − η α [ ∇f_b(v̄) + λ v̄ ],   v̄ = α v_k + (1 − α) w_k,

the second being the gradient of F_k(α v + (1 − α) w_k) in v (chain rule: the factor α); F_k is
the local objective of the paper's Section 3.3, eq. (6), regulariser included.  The server
averages the w_k as FedAvg does, so the global model is FedAvg's, bit for bit, with the same seed
and hyperparameters (its loop runs in :class:`~._local_sgd_kernels.LocalSGD`; this module's loop
repeats the w_k path for the mixture, so a round costs about three FedAvg local passes).  Nodes
not sampled keep their v_k; every v_k starts at w0.  The personal model a node is scored with is
the mixture with the current global model, α v_k + (1 − α) w.

Memory: the v_k are a dense K × d array (why: :mod:`.ditto`), and the mixtures another, so the
run is refused when 2·K·d exceeds :data:`~.ditto.PERSONAL_VALUES`.

Lazy steps.  A coordinate no example of the step touches moves by the linear map
(w_j, v_j) ← (r_w w_j, r_v v_j + c w_j), r_w = 1 − ηλ, r_v = 1 − ηα²λ, c = −ηα(1 − α)λ: m such
steps are the lower-triangular matrix power with entries r_w^m, r_v^m and c_m
(c_0 = 0, c_{m+1} = c r_w^m + r_v c_m), applied when an example next touches it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..problems.budget import StateSize
from ..problems._compiled import dphi
from .base import Param
from .ditto import PERSONAL_VALUES, check_personal_budget
from .fedavg import BATCH_SIZE, CLIENT_FRACTION, LOCAL_EPOCHS, STEPSIZE, FedAvg


@njit(cache=True, nogil=True)
def _apfl_personal(V, x, nodes, order, order_start, offsets, indptr, indices, data, labels, code,
                   smoothing, eta, lam, alpha, epochs, bsize, w, last, cw, cm, rw_pow, rv_pow, c_pow):
    """The T local steps of node ``nodes[b]`` on (w_k, v_k = V[k]), V[k] updated in place;
    w (scratch) holds w_k, started at x = w^t.  Row orders as :func:`.ditto._ditto_personal`."""
    d = V.shape[1]
    rw = 1.0 - eta * lam
    rv = 1.0 - eta * alpha * alpha * lam
    c1 = -eta * alpha * (1.0 - alpha) * lam
    beta = 1.0 - alpha
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
        rw_pow[0] = 1.0
        rv_pow[0] = 1.0
        c_pow[0] = 0.0
        for m in range(T):
            c_pow[m + 1] = c1 * rw_pow[m] + rv * c_pow[m]
            rw_pow[m + 1] = rw_pow[m] * rw
            rv_pow[m + 1] = rv_pow[m] * rv
        for j in range(d):
            w[j] = x[j]
            last[j] = 0
        t = 0
        for e in range(epochs):
            ebase = obase + e * nk
            for bi in range(nb):
                lo = bi * B
                hi = min(lo + B, nk)
                inv = 1.0 / (hi - lo)
                # Margins of both models at the pre-step point (a minibatch gradient).
                for q in range(lo, hi):
                    i = start + (q if bsize == 0 else order[ebase + q])
                    zw = 0.0
                    zm = 0.0
                    for p in range(indptr[i], indptr[i + 1]):
                        val = data[p]
                        if val == 0.0:
                            continue
                        j = indices[p]
                        m = t - last[j]
                        if m > 0:
                            wj = w[j]
                            w[j] = rw_pow[m] * wj
                            v[j] = rv_pow[m] * v[j] + c_pow[m] * wj
                            last[j] = t
                        zw += val * w[j]
                        zm += val * (alpha * v[j] + beta * w[j])
                    cw[q - lo] = dphi(code, zw, labels[i], smoothing) * inv
                    cm[q - lo] = dphi(code, zm, labels[i], smoothing) * inv
                for q in range(lo, hi):
                    i = start + (q if bsize == 0 else order[ebase + q])
                    gw = cw[q - lo]
                    gm = cm[q - lo]
                    for p in range(indptr[i], indptr[i + 1]):
                        val = data[p]
                        if val == 0.0:
                            continue
                        j = indices[p]
                        if last[j] == t:
                            wj = w[j]
                            w[j] = rw * wj
                            v[j] = rv * v[j] + c1 * wj
                            last[j] = t + 1
                        w[j] -= eta * gw * val
                        v[j] -= eta * alpha * gm * val
                t += 1
        for j in range(d):
            m = T - last[j]
            if m > 0:
                wj = w[j]
                w[j] = rw_pow[m] * wj
                v[j] = rv_pow[m] * v[j] + c_pow[m] * wj


class APFL(FedAvg):
    """APFL with a fixed α: FedAvg's global model, a local model per node, served as their mixture.

    Attributes
    ----------
    V : ndarray (K, d)
        The local models v_k (the mixtures are :meth:`personal_models`).
    """

    name = "apfl"
    title = "APFL"
    reference = "Deng, Kamani & Mahdavi (2020), Algorithm 1 with a fixed α; the global model is FedAvg's"
    divergence_hint = ("stepsize", "lower")
    personalised = True
    multiclass = False
    multiclass_reason = ("its local-model loop works on one weight vector per node "
                         "(binary and regression models only)")
    state = StateSize(rows=3, model=86, node_models=2.4)  # tracemalloc's peaks × 2.2 (tests/unit/test_budget.py)
    params = (
        CLIENT_FRACTION, LOCAL_EPOCHS, BATCH_SIZE, STEPSIZE,
        Param("alpha", "float", 0.5,
              "α ∈ [0, 1]: the mixing weight of the model each node is served, α v_k + (1 − α) w "
              "(0: the global model; 1: the local model alone).  Fixed here (Deng et al. also adapt it).  "
              "Default 0.5: the two weigh the same.", low=0, high=1),
    )

    def setup(self):
        check_personal_budget(self, self.problem, copies=2)
        super().setup()
        self.alpha = float(self.hp["alpha"])
        K, d = self.problem.data.n_nodes, self.problem.size
        self.V = np.tile(self.w, (K, 1))
        self._mix = np.empty_like(self.V)
        self._mix_of = None        # the (w, iteration) the mixtures were computed for
        L = self.local
        T1 = L._RPOW.shape[1]
        self._scratch = (np.zeros(d), np.zeros(d, dtype=np.int64), np.zeros(L._COEF.shape[1]),
                         np.zeros(L._COEF.shape[1]), np.zeros(T1), np.zeros(T1), np.zeros(T1))

    def personal_models(self) -> np.ndarray:
        """The mixtures α v_k + (1 − α) w with the current global model (K × d), read-only."""
        key = (id(self.w), self.iteration)
        if self._mix_of != key:
            np.multiply(self.V, self.alpha, out=self._mix)
            self._mix += (1.0 - self.alpha) * self.w
            self._mix_of = key
        out = self._mix.view()
        out.flags.writeable = False
        return out

    def _step(self):
        nodes = self.sample_nodes()
        orders = self.local.orders(nodes, self.rng(1))   # the same minibatches for w_k and v_k
        sizes = self.problem.data.node_sizes[nodes]
        delta, _ = self.local.round(self.w, nodes, sizes / sizes.sum(), orders=orders,
                                    check_stop=self.check_stop)
        self.grad_evals += 2 * self.hp["local_epochs"] * int(sizes.sum())   # at w_k and at the mixture
        up, down = self.vectors_per_node
        self.count_round(up, down, nodes=nodes.size)
        L = self.local
        block = L.epochs * L.sizes[nodes]
        starts = np.concatenate([[0], np.cumsum(block)[:-1]]).astype(np.int64)
        order = orders if orders.size else np.zeros(1, dtype=np.int64)
        _apfl_personal(self.V, np.ascontiguousarray(self.w, dtype=np.float64), nodes, order, starts, L.offsets,
                       L.indptr, L.indices, L.data, L.labels, L.rows.loss, L.rows.smoothing, L.eta, L.lam,
                       self.alpha, L.epochs, L.batch_size, *self._scratch)
        self.sampled = nodes
        self.w = self.w + delta


__all__ = ["APFL", "PERSONAL_VALUES"]
