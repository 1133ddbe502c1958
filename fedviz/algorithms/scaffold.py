"""SCAFFOLD: local steps corrected by control variates (Karimireddy et al. 2020, Algorithm 1, option II).

Each round the sampled nodes receive the server model x and control variate c, run

    y ← y − η_l (g_k(y) − c_k + c)                       (T_k local steps)
    c_k⁺ = c_k − c + (x − y_k)/(T_k η_l)                 (option II)

and send Δy_k = y_k − x and Δc_k = c_k⁺ − c_k; the server sets
x ← x + η_g Σ_{k∈S} (n_k/n_S) Δy_k and c ← c + Σ_{k∈S} (n_k/n) Δc_k.  The last is the
n_k-weighted form of the paper's c ← c + (|S|/N)·mean(Δc): it keeps c = Σ_k (n_k/n) c_k
exactly, the weighting under which f = Σ_k (n_k/n) F_k (the paper's Section 3.3, eq. (7)).

Why it matters here.  c − c_k estimates ∇f − ∇F_k, so the corrected local step follows
the global gradient and the client drift of FedAvg disappears: at w* with c_k = ∇F_k(w*)
and c = ∇f(w*) = 0 every local step is zero, which is the paper's property (A)
(Section 3.1).  With full-batch local steps (the default) and a small enough step,
SCAFFOLD converges to w* itself on any partition; minibatch steps add sampling noise that a constant step does
not remove, which is why full batch is the default.

Control variates, as stored.  c_k splits into a data part s_k and the regulariser's part.
The regulariser λw is identical on every node, so it needs no estimate: its part of every
c_k, and of c, is λ·x at the current server model, and it cancels in c − c_k.  Option II
applied to the data term makes s_k⁺ the mean of the data gradients node k used, supported
on the node's features, so the s_k are stored sparsely on the node × feature pattern
(Σ_k |support_k| ≤ nnz numbers; never a dense K × d array, 1.6 GB at the paper's scale).
Within a round this is exactly option II; between rounds it refreshes the regulariser part
of c_k from λȳ_k (the mean of the node's last local path) to λx, removing a drift term
that only stale estimates of a common, known term would cause.  Normal runs start from
zero data parts, i.e. c_k = c = λ·w0: zero control variates for the default w0 = 0, and
the same local steps otherwise, since only c − c_k enters them.  Clients send Δc (its
data part), never c_k itself; the correction is −c_k + c.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..problems.budget import StateSize
from ..errors import ParameterError
from .base import Param
from .fedavg import BatchSizeParam, FedAvg


class Scaffold(FedAvg):
    """SCAFFOLD with option II control variates (see the module docstring).

    Parameters
    ----------
    problem, seed, w0, **hyper
        As for :class:`~fedviz.algorithms.base.Algorithm`.
    control0 : (c, C) or None
        Starting control variates: c of shape (d,) for the server and C of shape (K, d)
        (dC and K × dC, flat and row-major, for a model of C > 1 outputs)
        (dense array or sparse matrix) with C[k] = c_k.  None (the default) starts from zero.
        Each c_k − λ·w0 must vanish off node k's features, since only the data part is
        stored (e.g. c_k = ∇F_k(w0) qualifies).  Meant for tests and small problems, such
        as starting at the optimum with c_k = ∇F_k(w*), c = ∇f(w*) = 0.
    """

    name = "scaffold"
    title = "SCAFFOLD"
    reference = "Karimireddy et al. (2020), Algorithm 1, option II; property (A), Section 3.1"
    divergence_hint = ("stepsize", "lower")
    #: Softmax (issue 22): the model, c and the c_k are d × C, flat; a support entry stores C values.
    multiclass = True
    state = StateSize(entries=1, support=2, rows=2, model=114)  # tracemalloc's peaks × 2.2 (tests/unit/test_budget.py)
    params = (
        Param("client_fraction", "float", 0.1,
              "C: fraction of the nodes sampled (without replacement) each round; round(C·K) "
              "nodes, at least one.  Only they compute, communicate and refresh their control "
              "variates.  Default 0.1, as for FedAvg, so the two compare like for like; the "
              "control variates keep SCAFFOLD exact under partial participation.",
              low=0, high=1, low_open=True),
        Param("local_epochs", "int", 10,
              "E: passes over its local data each sampled node makes per round (with full-batch "
              "steps, E corrected gradient steps).  The control variates remove client drift, so "
              "more local work helps.  Default 10.", low=1, high=10_000),
        BatchSizeParam("batch_size", "int", 0,
                       "B: examples per local step (a fresh shuffle each epoch); 0 or 'full' takes "
                       "full-batch steps on F_k.  Default 'full' (0): the control variates correct "
                       "drift, not sampling noise, so only full-batch steps converge exactly with "
                       "a constant step.", low=0, high=10**9),
        Param("stepsize", "float", None,
              "Local step η_l.  Default with full-batch steps 1/max_k L_k, L_k = "
              "(1/γ) λ_max(X_kᵀX_k)/n_k + λ the smoothness of node k's F_k: the 1/L step of "
              "gradient descent on the worst node (Karimireddy et al. take η_l of order 1/β, β "
              "the local smoothness).  With minibatches 1/L_max, L_max = max_i (1/γ)‖x_i‖² + λ "
              "the smoothness of the worst single example: stable for every minibatch.",
              low=0, low_open=True, log=True),
        Param("global_stepsize", "float", 1.0,
              "η_g: the server moves by η_g times the weighted mean of the nodes' updates.  "
              "Default 1, plain averaging.", low=0, high=10, low_open=True),
    )
    vectors_per_node = (2, 2)

    def __init__(self, problem, *, seed: int = 0, w0=None, control0=None, **hyper):
        self._control0 = control0
        super().__init__(problem, seed=seed, w0=w0, **hyper)

    def uses_control_variates(self) -> bool:
        return True

    @classmethod
    def derived_stepsize(cls, problem, hp) -> float:
        """1/max_k L_k for full-batch local steps (the local functions' own smoothness, so
        every node takes a descent step of the size gradient descent on F_k would); 1/L_max
        for minibatches, as FedAvg.  With the worst example's L_max the full-batch default
        sat 10× below 1/max_k L_k on google-plus-small, and SCAFFOLD barely moved."""
        if hp["batch_size"] == 0:
            return 1.0 / problem.max_node_smoothness
        return super().derived_stepsize(problem, hp)

    def setup(self):
        super().setup()
        if self._control0 is not None:
            self._set_control(*self._control0)
        del self._control0

    # -- control variates --------------------------------------------------------------------------
    def _set_control(self, c, C) -> None:
        """Store (c, C) as s = c − λw, s_k = C[k] − λw on node k's features (checked)."""
        K, d, nc = self.problem.data.n_nodes, self.problem.size, self.problem.n_classes
        lam_w = self.problem.lam * self.w
        c = np.asarray(c, dtype=np.float64)
        if c.shape != (d,):
            raise ParameterError("control0", f"c of shape {c.shape}", f"a vector of length d = {d}")
        if C is None or getattr(C, "shape", None) != (K, d):
            raise ParameterError("control0", f"C of shape {getattr(C, 'shape', None)}",
                                 f"a K × d = {K} × {d} matrix of node control variates")
        C = C.toarray() if sp.issparse(C) else np.asarray(C, dtype=np.float64)
        local = self.local
        rows = np.repeat(np.arange(K), np.diff(local.pat_ptr))
        R = C - lam_w
        if nc == 1:
            on = R[rows, local.pat_ind]
            R[rows, local.pat_ind] = 0.0
        else:  # a support entry (node k, feature j) holds the C values of columns jC .. jC + C − 1
            R3 = R.reshape(K, self.problem.d, nc)
            on = R3[rows, local.pat_ind]
            R3[rows, local.pat_ind] = 0.0
        scale = max(1.0, float(np.abs(C).max(initial=0.0)))
        bad = np.abs(R) > 1e-12 * scale
        if np.any(bad):
            k, j = map(int, np.argwhere(bad)[0])
            raise ParameterError(
                "control0", f"C[{k}, {j}] = {C[k, j]!r}",
                f"λ·w0[{j}] = {lam_w[j]!r} where node {k} has no data on feature {j // nc}: only the "
                "data part of a control variate, which lives on the node's features, is stored")
        local.ctrl[:] = on
        local.s[:] = c - lam_w

    def control_variates(self) -> tuple[np.ndarray, sp.csr_matrix]:
        """(c, S): the server's c = s + λw, and the nodes' data parts, c_k = S[k] + λw.

        S is K × d CSR (K × dC for C > 1) on the node × feature pattern.  At all times c = Σ_k (n_k/n) c_k
        up to rounding when started from zero or from consistent values.
        """
        local = self.local
        K, d, nc = self.problem.data.n_nodes, self.problem.d, self.problem.n_classes
        if nc == 1:
            S = sp.csr_matrix((local.ctrl.copy(), local.pat_ind, local.pat_ptr), shape=(K, d))
        else:  # K × dC: entry (k, j) of the support spans columns jC .. jC + C − 1
            cols = (local.pat_ind[:, None] * nc + np.arange(nc)).ravel()
            S = sp.csr_matrix((local.ctrl.ravel().copy(), cols, local.pat_ptr * nc), shape=(K, d * nc))
        return local.s + self.problem.lam * self.w, S

    # -- one round -----------------------------------------------------------------------------------
    def _step(self):
        nodes = self.sample_nodes()
        delta, ds = self.local_round(nodes)
        self.sampled = nodes
        self.w = self.w + self.hp["global_stepsize"] * delta
        self.local.s += ds
