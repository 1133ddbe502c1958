"""Client drift, traced: every node's local iterate after its local work, and the server's, round by
round, for FedAvg, SCAFFOLD and FSVRG on an IID and a non-IID split of one small problem.

Why.  "Minimise locally, then average" (the paper's Section 3.4) pulls each node towards the optimum
w*_k of its own F_k (Section 3.3, eq. (6)); on non-IID data those optima lie far from w*, so FedAvg's
local models run to their own optima and the average settles away from w*: it lacks property (A) of
Section 3.1.  SCAFFOLD's control variates c − c_k and FSVRG's variance-reduced steps (Algorithm 4,
Section 3.6: each local step is corrected by ∇f(w^t) − ∇f_i(w^t)) pull the local iterates back towards
the global direction.  On an IID split the local optima sit near w* and all three behave alike.

How.  The real algorithm classes run: before each :meth:`~fedviz.algorithms.base.Algorithm.step`,
each node's local loop is run once more on its own, through the algorithm's own engine (the compiled
local SGD of :mod:`fedviz.algorithms._local_sgd_kernels`, the local SVRG of
:mod:`fedviz.algorithms._svrg_kernels`) from the same server model with the same samples (the
algorithms' random streams are pure functions of the seed and the iteration), with aggregation
weight 1, which returns that node's y_k − w^t.  SCAFFOLD's control variates are restored after
these extra passes, so the step then runs exactly as in a normal run; :attr:`DriftRun.server_gap`
records how far the server's w^{t+1} is from the aggregate of the traced y_k (rounding only).

The picture is 2-D: all points (w*, the node optima w*_k, every server and local iterate) are
projected on the plane of their top two principal directions through w* (:class:`Plane`), which
says how much of their spread it shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..algorithms import get_algorithm
from ..algorithms._svrg_kernels import SAMPLE_STREAM, permutation_samples
from ..data.dataset import FederatedDataset
from ..data.labels import dataset_label_counts, positive_share
from ..data.partition import make_partitioner
from ..errors import ParameterError
from ..problems.objective import Problem
from ..problems.optimum import solve
from ..validation import check_int

#: The two splits: fedviz's partitioners, at the extremes of Section 1.2's "non-IID".
SPLITS = {
    "iid": ("IID: rows dealt at random", "iid"),
    "non-iid": ("non-IID: one label per node (label shards)", "shards:classes_per_node=1"),
}
#: The algorithms drawn, in the order of the figure's columns.
ALGORITHMS = ("fedavg", "scaffold", "fsvrg")
#: Hyperparameters the view always sets.  FSVRG runs without its safeguard: the view draws each
#: round's local pass from the server's w^t, and the safeguard's model (the last accepted point,
#: a rejected trial retaken from it) would not be the pass's end; so its stepsize is the cautious
#: default of Algorithm 4 as printed.
AS_PRINTED = {"fsvrg": {"safeguard": False}}
#: The largest settings offered: the view must stay small enough to compute on every change.
MAX_NODES, MAX_ROUNDS, MAX_LOCAL_STEPS = 8, 30, 100


@dataclass(frozen=True)
class DriftSettings:
    """What the drift view computes: the problem's size and split, the rounds and the local work.

    ``local_steps`` is E for FedAvg and SCAFFOLD (full-batch local gradient steps on F_k at the
    shared step 1/max_k L_k, so the two differ only by SCAFFOLD's correction); FSVRG makes its own
    one pass over the node's data (Algorithm 4 as printed: :data:`AS_PRINTED`) at that default stepsize.
    """

    nodes: int = 4
    rows_per_node: int = 60
    features: int = 6
    lam: float = 0.02
    rounds: int = 8
    local_steps: int = 10
    seed: int = 0

    def __post_init__(self):
        check_int("nodes", self.nodes, low=2, high=MAX_NODES)
        check_int("rows_per_node", self.rows_per_node, low=4, high=1000)
        check_int("features", self.features, low=2, high=50)
        check_int("rounds", self.rounds, low=1, high=MAX_ROUNDS)
        check_int("local_steps", self.local_steps, low=1, high=MAX_LOCAL_STEPS)
        check_int("seed", self.seed, low=0, high=2**32 - 1)
        if not (isinstance(self.lam, (int, float)) and np.isfinite(self.lam) and self.lam > 0):
            raise ParameterError("lam", self.lam, "a number > 0")


def drift_problem(split: str, settings: DriftSettings = DriftSettings()) -> Problem:
    """A small logistic problem (features normal, a bias column, labels from a planted model with
    noise, all seeded) on ``settings.nodes`` nodes, split by the partitioner ``SPLITS[split]``."""
    if split not in SPLITS:
        raise ParameterError("split", split, "one of " + ", ".join(SPLITS))
    s = settings
    rng = np.random.default_rng([s.seed, 17])
    n, d = s.nodes * s.rows_per_node, s.features
    X = np.c_[rng.normal(size=(n, d - 1)), np.ones(n)]
    w_true = rng.normal(size=d)
    y = np.where(X @ w_true + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    if np.all(y == y[0]):
        y[0] = -y[0]
    nodes = make_partitioner(SPLITS[split][1], n_nodes=s.nodes, seed=s.seed).assign(X, y)
    ds = FederatedDataset.from_assignment(sp.csr_matrix(X), y, nodes, meta={"source": f"drift ({split})"})
    return Problem(ds, "logistic", s.lam)


def node_optima(problem: Problem) -> np.ndarray:
    """w*_k = argmin F_k (eq. (6): node k's examples, the same loss and λ) for every node, by the
    same Newton-CG that finds w*; shape (K, d)."""
    ds = problem.data
    out = np.empty((ds.n_nodes, problem.d))
    for k in range(ds.n_nodes):
        rows = ds.node_slice(k)
        Xk, yk = ds.X[rows], ds.y[rows]
        local = FederatedDataset.from_assignment(Xk, yk, np.zeros(Xk.shape[0], dtype=np.int64))
        out[k] = solve(Problem(local, problem.loss, problem.lam)).w
    return out


def hyper_for(name: str, problem: Problem, settings: DriftSettings) -> dict:
    """The hyperparameters of ``name`` in the drift view (see :class:`DriftSettings`)."""
    if name in ("fedavg", "scaffold"):
        return {"client_fraction": 1.0, "local_epochs": settings.local_steps, "batch_size": 0,
                "stepsize": 1.0 / problem.max_node_smoothness}
    return {}


@dataclass(frozen=True)
class DriftRun:
    """One algorithm's trace: ``servers[t]`` is w^t (t = 0..R), ``locals[t, k]`` node k's iterate after
    its local work in round t + 1, started from w^t."""

    algorithm: str
    title: str
    servers: np.ndarray
    locals: np.ndarray
    server_gap: float = 0.0   #: max over rounds of ‖w^{t+1} − aggregate of the traced y_k‖∞

    def distance(self, point: np.ndarray) -> np.ndarray:
        """‖w^t − point‖ for t = 0..R."""
        return np.linalg.norm(self.servers - point, axis=1)


def trace(problem: Problem, name: str, *, rounds: int, seed: int = 0, hyper: dict | None = None,
          w0: np.ndarray | None = None) -> DriftRun:
    """Run ``rounds`` rounds of algorithm ``name`` (fedavg, scaffold or fsvrg), recording the server's
    iterate and every node's local iterate in each round (see the module docstring)."""
    if name not in ALGORITHMS:
        raise ParameterError("algorithm", name, "one of " + ", ".join(ALGORITHMS))
    cls = get_algorithm(name)
    algo = cls(problem, seed=seed, w0=w0, **{**dict(hyper or {}), **AS_PRINTED.get(name, {})})
    servers, locals_, gap = [algo.w.copy()], [], 0.0
    for _ in range(int(rounds)):
        ys, expected = _local_sgd(algo) if name != "fsvrg" else _local_svrg(algo)
        algo.step()
        servers.append(algo.w.copy())
        locals_.append(ys)
        gap = max(gap, float(np.max(np.abs(algo.w - expected)))) if np.all(np.isfinite(algo.w)) else np.inf
    return DriftRun(name, cls.title, np.array(servers), np.array(locals_), gap)


def _local_sgd(algo):
    """FedAvg / SCAFFOLD: each sampled node's y_k from the current w (control variates restored),
    and the server model the step should produce from them."""
    x = np.array(algo.w)
    nodes = algo.sample_nodes()
    local = algo.local
    sizes = local.sizes[nodes]
    orders = None
    if local.batch_size != 0:
        every = local.orders(nodes, algo.rng(1))
        cut = np.concatenate([[0], np.cumsum(local.epochs * sizes)])
        orders = [every[cut[b]:cut[b + 1]] for b in range(nodes.size)]
    saved = local.ctrl.copy() if local.control else None
    ys = np.repeat(x[None, :], algo.problem.data.n_nodes, axis=0)
    try:
        for b, k in enumerate(nodes):
            delta, _ = local.round(x, np.array([k]), np.array([1.0]),
                                   orders=None if orders is None else orders[b])
            ys[k] = x + delta
    finally:
        if saved is not None:
            local.ctrl[:] = saved
    p = sizes / sizes.sum()
    step = algo.hp.get("global_stepsize", 1.0)
    expected = x + step * (p @ (ys[nodes] - x))
    return ys, expected


def _local_svrg(algo):
    """FSVRG: each node's w_k after its pass (Algorithm 4, the engine run with α = e_k), and the
    aggregate w^t + A Σ_k α_k (w_k − w^t) the step should produce."""
    pb = algo.problem
    x = np.array(algo.w)
    z, g = algo.margins(), algo.gradient()
    offsets = pb.data.offsets
    samples = permutation_samples(algo.rng(SAMPLE_STREAM), offsets)
    K = pb.data.n_nodes
    ys = np.empty((K, pb.d))
    for k in range(K):
        alpha = np.zeros(K)
        alpha[k] = 1.0
        ys[k] = x + algo.engine.run(algo.w, z, g, g, samples, offsets, algo.sizes, algo.hk, alpha,
                                    lam=pb.lam, rho=pb.lam, phi=algo.phi)
    delta = algo.alpha @ (ys - x)
    if algo.A is not None:
        delta = delta * algo.A
    return ys, x + delta


@dataclass(frozen=True)
class Plane:
    """A plane through ``origin`` spanned by the orthonormal rows of ``basis`` (2, d); ``explained``
    is the share of the points' spread around the origin that it shows (1 when d ≤ 2)."""

    origin: np.ndarray
    basis: np.ndarray
    explained: float

    def project(self, points: np.ndarray) -> np.ndarray:
        """Coordinates (…, 2) of ``points`` (…, d) in the plane."""
        return (np.asarray(points) - self.origin) @ self.basis.T


def principal_plane(points: np.ndarray, origin: np.ndarray) -> Plane:
    """The plane through ``origin`` of the top two principal directions of ``points − origin`` (SVD)."""
    P = np.asarray(points, dtype=float).reshape(-1, origin.size) - origin
    P = P[np.all(np.isfinite(P), axis=1)]
    _, s, vt = np.linalg.svd(P, full_matrices=False)
    basis = np.zeros((2, origin.size))
    basis[: min(2, vt.shape[0])] = vt[:2]
    total = float(np.sum(s ** 2))
    explained = float(np.sum(s[:2] ** 2) / total) if total > 0 else 1.0
    # Fix the signs (an SVD's are arbitrary): the first node optimum's side is positive.
    for i in range(basis.shape[0]):
        j = int(np.argmax(np.abs(basis[i])))
        if basis[i, j] < 0:
            basis[i] = -basis[i]
    return Plane(origin=np.asarray(origin, dtype=float), basis=basis, explained=explained)


@dataclass(frozen=True)
class DriftView:
    """One split: w*, the node optima, each algorithm's trace and the plane that shows them."""

    split: str
    title: str
    w_star: np.ndarray
    optima: np.ndarray
    node_sizes: np.ndarray
    node_labels: np.ndarray        #: the fraction of +1 labels on each node
    runs: tuple[DriftRun, ...]
    plane: Plane
    settings: DriftSettings = field(default_factory=DriftSettings)

    def final_distances(self) -> dict[str, float]:
        """‖w^R − w*‖ of every algorithm: how far its server ended from the optimum."""
        return {r.title: float(r.distance(self.w_star)[-1]) for r in self.runs}

    def drift(self) -> dict[str, float]:
        """The mean over rounds and nodes of ‖y_k − w*‖ / ‖w^0 − w*‖ (how far local work strays)."""
        scale = max(float(np.linalg.norm(self.runs[0].servers[0] - self.w_star)), 1e-300)
        return {r.title: float(np.mean(np.linalg.norm(r.locals - self.w_star, axis=2)) / scale) for r in self.runs}


def drift_view(split: str, settings: DriftSettings = DriftSettings()) -> DriftView:
    """Trace FedAvg, SCAFFOLD and FSVRG on ``split`` and project everything on one plane."""
    problem = drift_problem(split, settings)
    w_star = np.asarray(solve(problem).w)
    optima = node_optima(problem)
    runs = tuple(trace(problem, name, rounds=settings.rounds, seed=settings.seed,
                       hyper=hyper_for(name, problem, settings)) for name in ALGORITHMS)
    points = np.concatenate([optima, *[r.servers for r in runs], *[r.locals.reshape(-1, problem.d) for r in runs]])
    ds = problem.data
    pos = positive_share(dataset_label_counts(ds))
    return DriftView(split=split, title=SPLITS[split][0], w_star=w_star, optima=optima,
                     node_sizes=ds.node_sizes.copy(), node_labels=pos, runs=runs,
                     plane=principal_plane(points, w_star), settings=settings)
