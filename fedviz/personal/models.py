"""The personalised models of issue 23 (point 3), exact where the problem is convex: Local, Ditto,
fine-tuning and APFL's mixture, every node at once.

This module owns :class:`PersonalModels` (K models in a compact form) and the functions that
compute them.  The local objective is the paper's eq. (6) with the problem's regulariser,

    F_k(v) = (1/n_k) Σ_{i ∈ P_k} φ_i(x_iᵀv) + (λ/2)‖v‖²,

on the flat model v ∈ R^{dC} (C = 1: binary and regression; C > 1: softmax, issue 22).

- **Local** (pFL-Bench's "Isolated"): v_k = argmin_v F_k(v), :func:`local_models`.
- **Ditto** (Li, Hu, Beirami & Smith, *Ditto: Fair and Robust Federated Learning Through
  Personalization*, ICML 2021, eq. (2) with the global model at its optimum w*):
  v_k(λ_D) = argmin_v F_k(v) + (λ_D/2)‖v − w*‖², :func:`ditto_models` for any λ_D ≥ 0
  (λ_D = 0 is Local; λ_D = ∞ is w* itself) and :func:`ditto_path` along a grid, warm-started.
- **Fine-tuning** (pFL-Bench, Chen et al. 2022, "FedAvg-FT": every client fine-tunes the received
  global model on its own training rows before evaluation, and the fine-tuned model is used for
  that evaluation only): from w, m local steps v ← v − h_k (∇̃F_k(v)), :func:`finetune_models`.
  pFL-Bench's clients take these steps with their local optimiser, minibatch SGD; here
  ``batch=None`` takes full local gradient steps (plain GD, deterministic, the default) and
  ``batch=b`` minibatch SGD (b rows drawn uniformly with replacement per node and step, seeded; at most
  the node's n_k, so that b's cost is bounded by the data).
- **APFL** (Deng, Kamani & Mahdavi, *Adaptive Personalized Federated Learning*, 2020, eq. (3)):
  the mixture v̄_k = α v_k + (1 − α) w, :func:`apfl_models`.  APFL's local model solves
  v_k = argmin_v F_k(α v + (1 − α) w*): for α > 0 the substitution m = αv + (1 − α)w* is onto,
  so the mixture's minimiser is argmin_m F_k(m), the Local model, whatever α (a test checks this
  with SciPy).  The exact APFL fixed point is therefore the Local column; what this module
  evaluates as "APFL(α)" is the mixture of the Local model and the global one,
  α v_k^Local + (1 − α) w, which moves linearly from global (α = 0) to Local (α = 1) — the
  model APFL's mixing forms when its local model has converged on its own data.

The exact solves minimise Φ_k(v) = F_k(v) + (μ/2)‖v − c_k‖² (μ = λ_D, c_k = w*) on every node's
support S_k (the features that appear in its rows): node by node with Newton-CG for C = 1
(:mod:`._newton`), with Newton on each node's dense Hessian for softmax (:mod:`._softmax`), and with
:class:`~fedviz.algorithms.dane.LocalNewton` (DANE's lockstep per-node Newton-CG) for a softmax
model whose nodes are too large for a dense Hessian.  Off its support F_k is the
regulariser alone, so each coordinate j ∉ S_k has a closed form, the same on every node up to a
per-node factor: 0 for Local, λ_D/(λ + λ_D)·w*_j for Ditto, (1 − h_kλ)^m w_j after m
fine-tuning steps.  :class:`PersonalModels` stores exactly that — the support values of every
node and one shared off-support vector with a per-node scale — so K models cost the memory of
the support slots (13M values for the paper's 10,000 nodes), not K × dC (2·10⁸ there, 1.6 GB).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..algorithms.dane import LocalNewton, local_newton
from ..errors import ParameterError
from ..problems._compiled import LOSS_CODES, loss_code
from ..problems.objective import Problem
from ._newton import solve_nodes
from ._softmax import DenseSoftmaxNodes, dense_ok

#: The exact solves stop when every node's gradient has shrunk by this factor from its start
#: (LocalNewton's relative test): enough for the objective to 1e-10 on google-plus-small.
EXACT_RTOL = 1e-11
#: The largest K × dC that :meth:`PersonalModels.dense` materialises (8 bytes each: 400 MB).
DENSE_LIMIT = 50_000_000


@dataclass(frozen=True, eq=False)
class PersonalModels:
    """K personalised models v_1, …, v_K ∈ R^{dC} in compact form.

    Node k's model is ``slots`` on its support (node k's entries of slot space, C values per
    support feature, the layout of :class:`~fedviz.algorithms.dane.LocalNewton`) and
    ``scale[k] · off`` on every other coordinate.

    Attributes
    ----------
    name : str                     what the models are ("local", "ditto", …)
    slots : ndarray (S·C,)         the support values, node after node
    off : ndarray (dC,)            the off-support vector shared by all nodes
    scale : ndarray (K,)           its per-node factor
    index : ndarray (S·C,)         the flat model index j·C + c of every slot entry
    ptr : ndarray (K + 1,)         node k's slot entries are ``ptr[k]:ptr[k+1]``
    C : int                        outputs per feature
    """

    name: str
    slots: np.ndarray
    off: np.ndarray
    scale: np.ndarray
    index: np.ndarray
    ptr: np.ndarray
    C: int

    @property
    def n_nodes(self) -> int:
        return self.ptr.size - 1

    @property
    def size(self) -> int:
        """dC, the length of one model."""
        return self.off.size

    def node(self, k: int) -> np.ndarray:
        """v_k, the flat model of node ``k`` (length dC)."""
        if not 0 <= int(k) < self.n_nodes:
            raise ParameterError("node", k, f"an integer from 0 to {self.n_nodes - 1}")
        v = self.scale[k] * self.off
        a, b = self.ptr[k], self.ptr[k + 1]
        v[self.index[a:b]] = self.slots[a:b]
        return v

    def dense(self) -> np.ndarray:
        """All models as one K × dC array (row k: v_k); refused above :data:`DENSE_LIMIT` values."""
        K, size = self.n_nodes, self.size
        if K * size > DENSE_LIMIT:
            raise ParameterError("models", f"{K:,} × {size:,}",
                                 f"at most {DENSE_LIMIT:,} values as one dense array; read one node with .node(k)")
        return self.rows(0, K)

    def rows(self, start: int, stop: int) -> np.ndarray:
        """The models of nodes ``start … stop − 1`` as a dense (stop − start) × dC block."""
        start, stop = max(0, int(start)), min(self.n_nodes, int(stop))
        V = self.scale[start:stop, None] * self.off[None, :]
        a, b = self.ptr[start], self.ptr[stop] if stop > start else self.ptr[start]
        node = np.repeat(np.arange(stop - start), np.diff(self.ptr[start:stop + 1]))
        V[node, self.index[a:b]] = self.slots[a:b]
        return V

    def distance_to_dense(self, V: np.ndarray, chunk: int = 256) -> np.ndarray:
        """‖V[k] − v_k‖ for a K × dC array of models (e.g. an iterative Ditto run's personal models
        against the exact ones), ``chunk`` nodes at a time."""
        V = np.asarray(V)
        if V.shape != (self.n_nodes, self.size):
            raise ParameterError("V", f"shape {V.shape}", f"K × dC = {self.n_nodes} × {self.size}")
        out = np.empty(self.n_nodes)
        for s in range(0, self.n_nodes, chunk):
            e = min(self.n_nodes, s + chunk)
            out[s:e] = np.linalg.norm(V[s:e] - self.rows(s, e), axis=1)
        return out

    def _seg(self, x: np.ndarray) -> np.ndarray:
        """Per-node sums of a slot-space vector (0 on a node without support)."""
        return _segment_sums(x, self.ptr)

    def sq_norms(self) -> np.ndarray:
        """‖v_k‖² for every node, without forming the models."""
        off_on = self._seg(self.off[self.index] ** 2)
        return self._seg(self.slots ** 2) + self.scale ** 2 * (float(self.off @ self.off) - off_on)

    def distance_to(self, other: "PersonalModels") -> np.ndarray:
        """‖v_k − u_k‖ for every node, on the same problem (e.g. exact Ditto at two λ_D)."""
        if other.ptr.shape != self.ptr.shape or other.off.shape != self.off.shape:
            raise ParameterError("other", other.name, "models of the same problem")
        # Off the supports the difference is s_k·a − t_k·b, not one vector times a scale:
        # ‖s a − t b‖² = s²‖a‖² − 2st aᵀb + t²‖b‖², each over the coordinates off S_k.
        a, b = self.off, other.off

        def off_support(x, y):
            return float(x @ y) - self._seg(x[self.index] * y[self.index])

        s, t = self.scale, other.scale
        outside = s * s * off_support(a, a) - 2 * s * t * off_support(a, b) + t * t * off_support(b, b)
        inside = self._seg((self.slots - other.slots) ** 2)
        return np.sqrt(np.maximum(inside + outside, 0.0))


def _segment_sums(x: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """out[k] = x[ptr[k]:ptr[k+1]].sum(), 0 for an empty segment (also the last)."""
    out = np.add.reduceat(np.append(x, 0.0), ptr[:-1]) if ptr.size > 1 else np.zeros(0)
    out[ptr[:-1] == ptr[1:]] = 0.0
    return out


class Personaliser:
    """The exact per-node solver of one problem, built once and reused for every model set.

    Wraps :func:`~fedviz.algorithms.dane.local_newton` (DANE's exact solver; binary or softmax) for
    its slot layout and block matrix, which every function below shares, and solves with the
    per-node solver :attr:`method` names: "nodes" (:mod:`._newton`), "dense" (:mod:`._softmax`)
    or "lockstep" (DANE's).
    """

    def __init__(self, problem: Problem, check_stop: Callable[[], None] | None = None, *, lockstep: bool = False):
        self.problem = problem
        self.solver: LocalNewton = local_newton(problem)
        sup = self.solver.support
        self.C = problem.n_classes
        #: Binary and regression models (C = 1) are solved node by node (:mod:`._newton`), softmax
        #: models node by node with each node's dense Hessian (:mod:`._softmax`) where every node's
        #: is small enough (:func:`._softmax.dense_ok`), unless ``lockstep``: then, as larger
        #: softmax models always are, by DANE's lockstep solver.
        if self.C > 1:
            self.method = ("dense" if not lockstep and problem.loss.name == "softmax"
                           and dense_ok(problem.data.offsets, sup.ptr, self.C) else "lockstep")
        else:
            self.method = "lockstep" if lockstep or problem.loss.name not in LOSS_CODES else "nodes"
        self.lockstep = self.method == "lockstep"
        self._dense: DenseSoftmaxNodes | None = None
        self.index = (sup.col.astype(np.int64) if self.C == 1 else self.solver.slot_index().astype(np.int64))
        self.ptr = np.ascontiguousarray(sup.ptr, dtype=np.int64) * self.C
        self.check_stop = check_stop
        #: Newton iterations and the largest relative gradient of the last exact solve.
        self.newton_iterations = 0
        self.residual = 0.0

    @property
    def K(self) -> int:
        return self.problem.data.n_nodes

    def models(self, name: str, slots: np.ndarray, off: np.ndarray, scale) -> PersonalModels:
        scale = np.broadcast_to(np.asarray(scale, dtype=np.float64), (self.K,)).copy()
        return PersonalModels(name, np.asarray(slots, dtype=np.float64), np.asarray(off, dtype=np.float64),
                              scale, self.index, self.ptr, self.C)

    def global_models(self, w: np.ndarray, name: str = "global") -> PersonalModels:
        """Every node holds the same model w (the global model, e.g. w*)."""
        w = _flat(self.problem, w, "w")
        return self.models(name, w[self.index], w, 1.0)

    def _solve(self, start, center, mu) -> np.ndarray:
        if self.lockstep:
            v = self.solver.solve(start, np.zeros_like(start), center, mu, EXACT_RTOL, self.check_stop)
            self.newton_iterations = self.solver.newton_iterations
            self.residual = self.solver.residual
            return v
        pb = self.problem
        if self.method == "dense":
            if self._dense is None:
                self._dense = DenseSoftmaxNodes(self.solver.B, pb.y, pb.data.offsets, self.solver.support.ptr,
                                                self.C, pb.lam)
            v, newton, residual = self._dense.solve(start, center, mu, EXACT_RTOL, self.check_stop)
            self.newton_iterations = int(newton.max(initial=0))
            self.residual = float(residual.max(initial=0.0))
            return v
        code, gamma = loss_code(pb.loss)
        v, newton, residual, _ = solve_nodes(self.solver.B, pb.y, pb.data.offsets, self.solver.support.ptr, code,
                                             gamma, pb.lam, mu, center, start, EXACT_RTOL, self.check_stop)
        self.newton_iterations = int(newton.max(initial=0))
        self.residual = float(residual.max(initial=0.0))
        return v

    def local(self) -> PersonalModels:
        """v_k = argmin F_k (Local): zero off the supports, Newton-CG on them from 0."""
        z = np.zeros(self.index.size)
        return self.models("local", self._solve(z, z, 0.0), np.zeros(self.problem.size), 0.0)

    def ditto(self, lam_d: float, w_star: np.ndarray, start: PersonalModels | None = None) -> PersonalModels:
        """v_k(λ_D) = argmin F_k(v) + (λ_D/2)‖v − w*‖² (Ditto), warm-started from ``start``'s slots."""
        lam_d = _check_lambda(lam_d)
        w_star = _flat(self.problem, w_star, "w_star")
        if math.isinf(lam_d):
            return self.models("ditto", w_star[self.index], w_star, 1.0)
        center = w_star[self.index]
        x0 = center.copy() if start is None else start.slots
        lam = self.problem.lam
        # λ_D = 0 is the Local problem, solved here from w* (or ``start``), not from 0 as
        # :meth:`local` does: two solves of one problem, which the report's check compares.
        return self.models("ditto", self._solve(x0, center, lam_d), lam_d / (lam + lam_d) * w_star,
                           1.0 if lam_d > 0 else 0.0)

    def ditto_path(self, lambdas: Sequence[float], w_star: np.ndarray) -> list[PersonalModels]:
        """:meth:`ditto` at every λ_D of ``lambdas`` (any order), each solve warm-started from the
        solution at the nearest smaller λ_D already solved (the path runs from Local towards w*)."""
        lams = [_check_lambda(x) for x in lambdas]
        out: dict[int, PersonalModels] = {}
        prev = None
        for i in sorted(range(len(lams)), key=lambda i: lams[i]):
            prev = self.ditto(lams[i], w_star, start=prev)
            out[i] = prev
        return [out[i] for i in range(len(lams))]

    def finetune(self, w: np.ndarray, steps: int, step: float | np.ndarray | None = None,
                 batch: int | None = None, seed: int = 0) -> PersonalModels:
        """From w, ``steps`` local steps on every F_k (see :func:`finetune_models`)."""
        pb = self.problem
        w = _flat(pb, w, "w")
        steps = int(steps)
        h = default_finetune_step(pb) if step is None else np.broadcast_to(
            np.asarray(step, dtype=np.float64), (self.K,))
        with np.errstate(over="ignore", invalid="ignore"):
            return self._finetune(w, steps, h, batch, seed, step)

    def _finetune(self, w, steps, h, batch, seed, step):
        pb, loc = self.problem, self.solver
        ds = pb.data
        v = w[self.index].copy()
        h_slots = np.repeat(h, np.diff(self.ptr))
        lam = pb.lam
        if batch is None:
            for _ in range(steps):
                if self.check_stop:
                    self.check_stop()
                z = loc._B(v)
                v = v - h_slots * loc._grad(v, z, 0.0, None, 0.0)
        else:
            rng = np.random.default_rng(seed)
            sizes = ds.node_sizes.astype(np.int64)
            starts = ds.offsets[:-1].astype(np.int64)
            B = loc.B
            y = pb.y
            C = self.C
            for _ in range(steps):
                if self.check_stop:
                    self.check_stop()
                rows, counts = draw_batches(rng, starts, sizes, batch)
                per_row = np.repeat(counts, counts).astype(np.float64)  # each row's node's batch, b or n_k
                Bb = B[rows]
                if C == 1:
                    r = pb.loss.deriv(Bb @ v, y[rows]) / per_row
                    g = Bb.T @ r
                else:
                    Z = Bb @ v.reshape(-1, C)
                    g = (Bb.T @ (pb.loss.deriv(Z, y[rows]) / per_row[:, None])).reshape(-1)
                v = v - h_slots * (g + lam * v)
        scale = (1.0 - h * lam) ** steps
        if not (np.all(np.isfinite(v)) and np.all(np.isfinite(scale))):
            raise ParameterError("finetune_step", step, "a step at which fine-tuning stays finite: "
                                 "at most about 2/L_k on node k (the default 1/L_k is safe)")
        return self.models("finetune", v, w, scale)

    def apfl(self, alpha: float, w: np.ndarray, local: PersonalModels | None = None) -> PersonalModels:
        """α v_k + (1 − α) w with v_k the Local model (see the module docstring for why)."""
        alpha = _check_alpha(alpha)
        w = _flat(self.problem, w, "w")
        loc = self.local() if local is None else local
        # Off the supports α·(s_k off) + (1 − α) w; the Local model's off-support part is 0.
        if np.any(loc.scale != 0.0):
            raise ParameterError("local", loc.name, "Local models (zero off their supports)")
        return self.models("apfl", alpha * loc.slots + (1.0 - alpha) * w[self.index], (1.0 - alpha) * w, 1.0)


def draw_batches(rng: np.random.Generator, starts: np.ndarray, sizes: np.ndarray, batch: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """One minibatch per node: (rows, counts), node k's counts[k] = min(b, n_k) rows drawn uniformly
    with replacement from its own (``starts[k] + floor(u · n_k)``), node after node, from one
    ``rng.random(Σ_k counts[k])``.

    The clamp at n_k bounds a step's work and memory by the training rows, whatever b is asked (b = 10⁸
    on a 270-row file took 22 GB as K × b); below every node's size it changes nothing, and the draw is
    then bitwise ``rng.random((K, b))``'s.
    """
    counts = np.minimum(int(batch), sizes).astype(np.int64)
    node = np.repeat(np.arange(sizes.size), counts)
    u = rng.random(int(counts.sum()))
    return starts[node] + np.minimum((u * sizes[node]).astype(np.int64), sizes[node] - 1), counts


def default_finetune_step(problem: Problem) -> np.ndarray:
    """h_k = 1/L_k, L_k = F_k's smoothness (:attr:`Problem.node_smoothness`): the largest step that
    is a descent step on node k for every start."""
    return 1.0 / np.asarray(problem.node_smoothness, dtype=np.float64)


def local_models(problem: Problem) -> PersonalModels:
    """v_k = argmin F_k(v) for every node (Local)."""
    return Personaliser(problem).local()


def ditto_models(problem: Problem, lam_d: float, w_star: np.ndarray) -> PersonalModels:
    """v_k(λ_D) = argmin F_k(v) + (λ_D/2)‖v − w*‖² for every node (exact Ditto; λ_D = ∞ gives w*)."""
    return Personaliser(problem).ditto(lam_d, w_star)


def ditto_path(problem: Problem, lambdas: Sequence[float], w_star: np.ndarray) -> list[PersonalModels]:
    """Exact Ditto along ``lambdas``, warm-started from small λ_D to large."""
    return Personaliser(problem).ditto_path(lambdas, w_star)


def finetune_models(problem: Problem, w: np.ndarray, steps: int, step=None, batch: int | None = None,
                    seed: int = 0) -> PersonalModels:
    """pFL-Bench's fine-tuning: from w, ``steps`` local steps on every node.

    ``batch=None``: v ← v − h_k ∇F_k(v) (plain GD).  ``batch=b``: v ← v − h_k (g̃ + λv) with
    g̃ = (1/b_k) Σ_{i ∈ batch} ∇φ_i(x_iᵀv) over b_k = min(b, n_k) rows of node k drawn by :func:`draw_batches`
    from ``numpy.random.default_rng(seed)``, one draw per step for all nodes.  ``step``: h_k, a
    number or one per node; None is 1/L_k (:func:`default_finetune_step`).
    """
    return Personaliser(problem).finetune(w, steps, step, batch, seed)


def apfl_models(problem: Problem, alpha: float, w: np.ndarray, local: PersonalModels | None = None) -> PersonalModels:
    """APFL's mixture α v_k + (1 − α) w with the Local models v_k (computed unless given)."""
    return Personaliser(problem).apfl(alpha, w, local)


def _flat(problem: Problem, w, name: str) -> np.ndarray:
    w = np.asarray(w, dtype=np.float64)
    if w.shape != (problem.size,):
        raise ParameterError(name, f"shape {w.shape}", f"a flat model of length dC = {problem.size}")
    return w


def _check_lambda(x) -> float:
    try:
        x = float(x)
    except (TypeError, ValueError):
        raise ParameterError("lambda", x, "a number ≥ 0 (inf: the global model)") from None
    if not (x >= 0.0):
        raise ParameterError("lambda", x, "a number ≥ 0 (inf: the global model)")
    return x


def _check_alpha(x) -> float:
    try:
        x = float(x)
    except (TypeError, ValueError):
        raise ParameterError("apfl_alpha", x, "a number from 0 to 1") from None
    if not (0.0 <= x <= 1.0):
        raise ParameterError("apfl_alpha", x, "a number from 0 to 1")
    return x
