"""The properties matrix: every registered algorithm × the desirable properties (A)–(D) of
Section 3.1, each cell measured on the property's own data and set beside what the paper says.

Section 3.1 lists four properties an algorithm for federated optimization should have:

(A) "If the algorithm is initialized to the optimal solution, it stays there."
(B) "If all the data is on a single node, the algorithm should converge in O(1) rounds."
(C) "If each feature occurs on a single node [...] the algorithm should converge in O(1) rounds."
(D) "If each node contains an identical dataset, the algorithm should converge in O(1) rounds."

A cell is measured, never looked up, and names what it ran (:attr:`Cell.ran`):

- (A) on the paper's setting in miniature (``google-plus-small`` with 40 nodes: non-IID, unbalanced,
  sparse): the algorithm starts at w* with its state at its fixed point
  (:func:`fedviz.properties.fixed_point_start`: duals α*, control variates ∇F_k(w*)) and the cell
  is the drift ‖w^1 − w*‖₂ after its first iteration; it stays if no iterate of a few moves more than
  a tolerance (:func:`fedviz.properties.stays_at_optimum`).  A method that samples nodes and
  minibatches (FedAvg, FedProx, SCAFFOLD) runs first with every node, full local batches and
  ``drift_epochs`` ≥ 2 local epochs — the deterministic drift, client drift proper — and then with
  its defaults, whose extra drift is sampling noise (:attr:`Cell.runs`).  SCAFFOLD's fixed-point
  start c_k = ∇F_k(w*) is not one a user can set, so it also runs from w* with its default controls;
- (B) on ``one-node``'s 3,000 rows dealt to 10 nodes, one holding 2,991 (:func:`dominant_node_data`):
  with K = 1 every method's local problem is f itself, so the property is trivial there; Section 3.1
  calls (B) an extreme case of the unbalanced federated setting, which K ≥ 2 keeps;
- (C) on ``disjoint-features``: the Appendix's methods at σ = max_j ω^j (= 1 here, the smallest
  σ the Appendix admits: XᵀX ⪯ σB holds with equality of blocks) and CoCoA+/CoCoA at
  σ' = γ·max_j ω^j with an essentially exact local solve (:data:`DUAL_LOCAL_PASSES` passes), each
  beside its default σ = K;
- (D) on ``identical-nodes``;

(B)–(D) start at 0 and the cell is the number of communication rounds until f(w) − f* ≤ ε,
within a budget; "O(1)" is read as at most ``o1_rounds`` rounds (two iterations of a two-round
method such as DANE or FSVRG: "ideally exactly one round", Section 3.1).  A method that stops
communicating (one-shot averaging, after its one round) reads the rounds it used.

Every cell runs each algorithm as a user would, with the registry's defaults as the Run page
offers them, derived from the problem at run time, so a changed default changes the cell with it.
Where a property is about a setting (DANE's (D) at the paper's η = 1, μ = 0; (C)'s σ; (A)'s
deterministic drift), the run pins exactly that setting and says why (:class:`RunSpec`), and the
cell's sentence names every setting it ran, read from the algorithm it ran (:func:`_ran`).

:data:`PAPER` records, per algorithm and property, what the paper says — with the place it says
it — or that it says nothing; :func:`paper_claim` answers for algorithms added to the registry
later (nothing, they are not in the paper).  The registry (:data:`fedviz.algorithms.ALGORITHMS`)
gives the rows, so a new algorithm gets a row and a test without a change here.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import time
import types
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from .. import properties as P
from ..algorithms import ALGORITHMS
from ..data.presets import make_preset, parse_preset_spec
from ..errors import FedvizError, ParameterError
from ..problems.losses import LOSSES
from ..problems.objective import Problem
from ..problems.optimum import solve

__all__ = ["one_thread", "PROPERTIES", "PROPERTY_TEXT", "PROPERTY_QUOTE", "CASE_DATA", "CASE_TEXT", "DOMINANT_NODES",
           "DUAL_LOCAL_PASSES", "WHY", "START_TEXT", "Claim", "PAPER", "paper_claim", "MatrixConfig", "CaseProblem",
           "RunSpec", "Run", "Cell", "Matrix", "case_problem", "dominant_node_data", "PAPER_SETTING",
           "AT_PAPER_SETTING", "run_specs",
           "measure_cell", "properties_matrix", "curve_until", "Curve"]

#: The properties of Section 3.1, in the paper's order.
PROPERTIES = ("A", "B", "C", "D")

#: Section 3.1's wording of each property (the matrix's column help).
PROPERTY_TEXT: Mapping[str, str] = types.MappingProxyType({
    "A": "Started at the optimum, it stays there.",
    "B": "All data on one node (here: one of 10 holds 99.7%): converges in O(1) rounds.",
    "C": "Each feature on a single node: converges in O(1) rounds.",
    "D": "Identical data on every node: converges in O(1) rounds.",
})

#: Section 3.1's own sentence for each property (the LaTeX source's words, macros expanded).
PROPERTY_QUOTE: Mapping[str, str] = types.MappingProxyType({
    "A": "If the algorithm is initialized to the optimal solution, it stays there.",
    "B": "If all the data is on a single node, the algorithm should converge in O(1) rounds of communication.",
    "C": ("If each feature occurs on a single node, so the problems are fully decomposable (each machine is "
          "essentially learning a disjoint block of parameters), then the algorithm should converge in O(1) "
          "rounds of communication."),
    "D": ("If each node contains an identical dataset, then the algorithm should converge in O(1) rounds of "
          "communication."),
})

#: Each property's own data set (a preset spec, :mod:`fedviz.data.presets`); (B)'s rows are then
#: dealt to :data:`DOMINANT_NODES` nodes (:func:`dominant_node_data`).
CASE_DATA: Mapping[str, str] = types.MappingProxyType({
    "A": "google-plus-small?nodes=40",
    "B": "one-node",
    "C": "disjoint-features",
    "D": "identical-nodes",
})

#: (B)'s nodes: one keeps every row but DOMINANT_NODES − 1, which go one to each other node.
DOMINANT_NODES = 10

#: CoCoA+'s and CoCoA's local SDCA passes on (C): enough for an essentially exact local solve
#: (30 passes leave 8e-14 in one round of CoCoA+ with the logistic loss, 100 leave 0).
DUAL_LOCAL_PASSES = 100

#: Each property's data, in words (the page's caption).
CASE_TEXT: Mapping[str, str] = types.MappingProxyType({
    "A": "`preset:google-plus-small?nodes=40` (non-IID, unbalanced, sparse)",
    "B": (f"`preset:one-node` dealt to {DOMINANT_NODES} nodes: all rows but {DOMINANT_NODES - 1} on one node, "
          f"one row on each of the other {DOMINANT_NODES - 1} (seed 0)"),
    "C": "`preset:disjoint-features`",
    "D": "`preset:identical-nodes`",
})

#: The data condition each of (B)–(D) needs (Section 3.1), checked on the case's data.
_CONDITION = {"B": P.dominant_node, "C": P.disjoint_features, "D": P.identical_nodes}


@contextlib.contextmanager
def one_thread():
    """Run the compiled kernels on one thread in this thread (numba's setting is per thread, so
    run workers and other sessions keep theirs).  The cases are small: a parallel region's start
    and barrier cost more than its work, and on a loaded machine they cost everything (the whole
    matrix took 63 s on two contended threads, 3 s on one)."""
    import numba

    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(before)


# =======================================================================================
# What the paper says
# =======================================================================================
@dataclass(frozen=True)
class Claim:
    """What the paper says about one algorithm and one property.

    verdict : "has", "lacks", "aims" (the paper designs the method for it but claims nothing of
              the method as run) or "silent" (the paper says nothing)
    where : the place in the paper (section, algorithm, proposition)
    note : the paper's words, or why nothing is said
    """

    verdict: str
    where: str
    note: str

    @property
    def words(self) -> str:
        return {"has": "the paper: has it", "lacks": "the paper: lacks it",
                "aims": "the paper: designed for it", "silent": "the paper says nothing"}[self.verdict]


def _silent(note: str, where: str = "—") -> Claim:
    return Claim("silent", where, note)


_NOT_IN_PAPER = "not in the paper"

#: Algorithm → property → :class:`Claim`, read from the paper's Section 3 and its Appendix.
PAPER: Mapping[str, Mapping[str, Claim]] = types.MappingProxyType({
    "fsvrg": {
        "A": _silent("Section 3.6 states no property (A) for FSVRG.", "Section 3.6"),
        "B": _silent("Section 3.6 states no property (B) for FSVRG.", "Section 3.6"),
        "C": Claim("aims", "Section 3.6.2, Point 4 (the aggregation A)",
                   "\"Solving each of them locally, and adding up the results would solve the problem in "
                   "single iteration — desired algorithm property (C)\"; FSVRG's per-coordinate A = K/ω^j "
                   "interpolates towards that adding, but its nodes make one SVRG pass, not an exact solve."),
        "D": _silent("Section 3.6 states no property (D) for FSVRG.", "Section 3.6"),
    },
    "gd": {p: _silent("Section 2.1 presents GD as a baseline only.", "Section 2.1") for p in PROPERTIES},
    "cocoa-plus": {p: _silent("Section 2.3.3: CoCoA \"provably converges under any distribution of the data\"; "
                              "nothing on (A)–(D).", "Section 2.3.3") for p in PROPERTIES},
    "cocoa": {p: _silent("Section 2.3.3: CoCoA \"provably converges under any distribution of the data\"; "
                         "nothing on (A)–(D).", "Section 2.3.3") for p in PROPERTIES},
    "naive-fsvrg": {p: _silent("Algorithm 3 is stated without properties; by Proposition 1 it is DANE at η = 1, μ = 0 with one "
                               "SVRG pass, but Section 3.4's claims for DANE are for the exact subproblem.",
                               "Section 3.5") for p in PROPERTIES},
    "dane": {
        "A": Claim("has", "Section 3.4", "\"For any choice of μ and η, DANE also achieves property (A), since in "
                                         "this case ∇f(w^t) = 0\"."),
        "B": Claim("lacks", "Section 3.4", "\"Unfortunately, DANE does not achieve the more federated-specific "
                                           "desirable properties (B) and (C).\""),
        "C": Claim("lacks", "Section 3.4", "\"Unfortunately, DANE does not achieve the more federated-specific "
                                           "desirable properties (B) and (C).\""),
        "D": Claim("has", "Section 3.4", "\"In the default setting when μ = 0 and η = 1, DANE achieves desirable "
                                         "property (D) (immediate convergence when all local datasets are "
                                         "identical)\"."),
    },
    "one-shot": {
        "A": _silent("Section 3.4 says the method \"can't work\" in general, not what it does from w*.",
                     "Section 3.4"),
        "B": _silent("Section 3.4 does not discuss one node.", "Section 3.4"),
        "C": _silent("Section 3.4 does not discuss disjoint features.", "Section 3.4"),
        "D": Claim("has", "Section 3.4", "\"there is no reason to expect that [...] the solution [...] will be a "
                                         "weighted average of the local solutions, unless the local functions "
                                         "are all the same\": then one round gives it."),
    },
    "primal-method": {p: _silent("Appendix A: Algorithm 5 \"converges for any ridge regression problem and any "
                                 "data partitioning\"; nothing on (A)–(D).", "Appendix A, Algorithm 5")
                      for p in PROPERTIES},
    "dual-method": {p: _silent("Appendix A: Algorithm 6 is Algorithm 5 seen from the dual (Theorem 5); nothing "
                               "on (A)–(D).", "Appendix A, Algorithm 6") for p in PROPERTIES},
    "fedavg": {p: _silent(_NOT_IN_PAPER + " (McMahan et al., 2017).") for p in PROPERTIES},
    "fedprox": {p: _silent(_NOT_IN_PAPER + " (Li et al., 2020).") for p in PROPERTIES},
    "scaffold": {p: _silent(_NOT_IN_PAPER + " (Karimireddy et al., 2020, whose control variates aim at (A)).")
                 for p in PROPERTIES},
    "svrg": {p: _silent("Section 3.2 presents SVRG on a single node, without (A)–(D).", "Section 3.2")
             for p in PROPERTIES},
    "sgd": {p: _silent("Section 2.1: \"a diminishing sequence of stepsizes is necessary for convergence\"; "
                       "nothing on (A)–(D).", "Section 2.1") for p in PROPERTIES},
})


def paper_claim(algorithm: str, prop: str) -> Claim:
    """What the paper says about ``algorithm`` and property ``prop``; nothing for an algorithm it
    does not contain (one added to the registry after :data:`PAPER` was written)."""
    if prop not in PROPERTIES:
        raise ParameterError("property", prop, "one of A, B, C, D (Section 3.1)")
    return PAPER.get(algorithm, {}).get(prop) or _silent(_NOT_IN_PAPER + ".")


#: Why a cell measures what it does, where the reason is not the paper's own: each sentence is a
#: checked statement (tests/unit/test_learn_matrix.py holds each against a dense computation).
WHY: Mapping[tuple[str, str], str] = types.MappingProxyType({
    **{(name, "A"): ("Two parts. With every node, full batches and one local epoch a round is one gradient step of f, "
                     "which stays at w* up to rounding; with E ≥ 2 epochs each node follows its own ∇F_k, not ∇f, "
                     "away from w*: client drift, the first run. The defaults' sampled nodes and minibatches add "
                     "sampling noise, most of the second run's drift.") for name in ("fedavg", "fedprox")},
    ("scaffold", "A"): ("SCAFFOLD stays when its control variates start at their fixed point c_k = ∇F_k(w*), "
                        "c = ∇f(w*), a start fedviz's Run page does not offer. From w* with its default controls "
                        "(c − c_k = 0) its first round is FedAvg's with the same step: it moves (the last run)."),
    ("dane", "B"): ("At the paper's μ = 0 (the run beside the defaults that pins it, safeguard off), a "
                    "node with one row has a subproblem (10) curved only by λ = 1/n away from its row: its "
                    "minimiser steps −∇f(wᵗ)/λ there, n gradient steps at once, and Algorithm 2's plain average "
                    "1/K gives the nine such nodes 9/10 of the weight. Section 3.4: DANE's analysis \"relies on "
                    "the assumption that each node has access to iid samples\". The defaults' safeguard drops "
                    "each step that would raise f and multiplies μ by 8, so they fall, slowly."),
    ("fsvrg", "B"): ("Algorithm 4 as printed (the run with the safeguard off, at its default step for that "
                     "setting) climbs: most features appear on the dominant node alone (ω^j = 1), where "
                     "a^j = K/ω^j = 10 multiplies that node's update (weight n_k/n ≈ 1) tenfold; with "
                     "aggregate_scaling off f − f* falls instead. The default safeguard keeps wᵗ and halves "
                     "the step wherever a step raises f, so with the defaults f − f* never rises."),
    **{(name, "C"): ("With each feature on one node, XᵀX = B (σ = 1): the nodes' dual blocks are independent, so "
                     "exact block solves added up are the optimum in one round; the default σ = K weighs each "
                     "block's quadratic term K times more, and its steps fall short.") for name in ("primal-method", "dual-method", "cocoa-plus")},
})


# =======================================================================================
# The configuration
# =======================================================================================
@dataclass(frozen=True)
class MatrixConfig:
    """How the matrix is measured (every field checked; a bad one raises ParameterError).

    loss : the loss of every case ("logistic", the paper's experiment; "squared" lets the
           Appendix's methods, ridge regression only, run too)
    eps : (B)–(D): the cell counts rounds until f(w) − f* ≤ eps
    max_rounds : (B)–(D): the budget of rounds (iterations for the centralised references)
    o1_rounds : (B)–(D): a run that reaches eps within this many rounds has the property
    drift_iterations : (A): iterations run from w*
    drift_tol : (A): it stays if max_t ‖w^t − w*‖₂ ≤ drift_tol · max(1, ‖w*‖₂)
    drift_epochs : (A): E, the local epochs of the deterministic run of a method that samples
                   (every node, full batch); E = 1 would be one gradient step of f, which stays
    seed : seeds every algorithm's random choices (and (B)'s deal of rows)
    """

    loss: str = "logistic"
    eps: float = 1e-6
    max_rounds: int = 20
    o1_rounds: int = 4
    drift_iterations: int = 3
    drift_tol: float = 1e-8
    drift_epochs: int = 10
    seed: int = 0

    def __post_init__(self):
        if self.loss not in MATRIX_LOSSES:
            raise ParameterError("loss", self.loss, "one of " + ", ".join(MATRIX_LOSSES))
        _check("eps", self.eps, 1e-12, 1.0, float)
        _check("max_rounds", self.max_rounds, 1, 200, int)
        _check("o1_rounds", self.o1_rounds, 1, 200, int)
        if self.o1_rounds > self.max_rounds:
            raise ParameterError("o1_rounds", self.o1_rounds,
                                 f"an integer in [1, max_rounds = {self.max_rounds}] (the budget must reach it)")
        _check("drift_iterations", self.drift_iterations, 1, 50, int)
        _check("drift_tol", self.drift_tol, 1e-15, 1.0, float)
        _check("drift_epochs", self.drift_epochs, 2, 100, int)
        _check("seed", self.seed, 0, 2**32 - 1, int)


def _check(name, value, low, high, kind):
    ok = isinstance(value, (int, np.integer)) if kind is int else isinstance(value, (int, float, np.floating))
    if isinstance(value, bool) or not ok or not math.isfinite(value) or not low <= value <= high:
        what = "an integer" if kind is int else "a number"
        raise ParameterError(name, value, f"{what} in [{low:g}, {high:g}]")


# =======================================================================================
# The cases' problems
# =======================================================================================
@dataclass(frozen=True, eq=False)
class CaseProblem:
    """A property's data as a problem, with its optimum (Newton-CG to ‖∇f‖ ≤ 1e-12) and, for
    (B)–(D), whether the data are in the property's case."""

    prop: str
    spec: str
    problem: Problem
    w_star: np.ndarray
    f_star: float
    condition: str            # the data check's one-line description
    condition_holds: bool


def dominant_node_data(ds, *, nodes: int = DOMINANT_NODES, seed: int = 0):
    """``ds``'s training rows dealt to ``nodes`` nodes: ``nodes − 1`` rows drawn at random (seeded)
    go one to each of nodes 1, …, nodes − 1, every other row to node 0.  Property (B)'s data on
    K ≥ 2 nodes (:func:`fedviz.properties.dominant_node`)."""
    if isinstance(nodes, bool) or not isinstance(nodes, (int, np.integer)) or not 2 <= nodes <= ds.n:
        raise ParameterError("nodes", nodes, f"an integer in [2, n = {ds.n}]")
    node = np.zeros(ds.n, dtype=np.int64)
    small = np.random.default_rng(seed).choice(ds.n, nodes - 1, replace=False)
    node[small] = np.arange(1, nodes)
    return ds.with_nodes(node)


#: The losses the matrix measures: the binary ones, and softmax on the cases' rows given three classes
#: (:func:`three_classes`).
MATRIX_LOSSES = (*LOSSES, "softmax")
def three_classes(ds, *, seed: int = 0):
    """``ds`` with :data:`SOFTMAX_CLASSES` = 3 classes: its −1 rows are class 0, its +1 rows class 1 or 2 by
    the sign of xᵀv for a seeded Gaussian v.  The properties of Section 3.1 are about where the rows and
    features sit (one node, disjoint features, identical nodes), which this keeps — a row's class is a
    function of the row and its label, so identical rows keep identical classes — and the case's own
    labels (with their noise: the classes are not separable) are kept inside the classes; the model
    becomes the d × 3 one of softmax (issue 22)."""
    from ..data.dataset import FederatedDataset

    v = np.random.default_rng([seed, 22]).normal(size=ds.d)

    def classes(X, y):
        return np.where(y < 0, 0.0, np.where(X @ v > 0, 1.0, 2.0)) if y.size else np.zeros(0)

    meta = {**ds.meta, "label_policy": "multiclass", "classes": [0.0, 1.0, 2.0],
            "labels": "3 classes: the −1 rows, and the +1 rows split by the sign of xᵀv (v seeded Gaussian)"}
    return FederatedDataset.from_assignment(ds.X, classes(ds.X, ds.y), ds.node_of_row, X_test=ds.X_test,
                                            y_test=classes(ds.X_test, ds.y_test), test_nodes=ds.test_nodes,
                                            meta=meta)


def case_problem(prop: str, loss: str = "logistic", *, seed: int = 0) -> CaseProblem:
    """The problem of property ``prop``'s own data (:data:`CASE_DATA`; (B)'s dealt by
    :func:`dominant_node_data` with ``seed``), λ = 1/n as in Section 4."""
    if prop not in PROPERTIES:
        raise ParameterError("property", prop, "one of A, B, C, D (Section 3.1)")
    name, overrides = parse_preset_spec(CASE_DATA[prop])
    ds = make_preset(name, **overrides)
    if prop == "B":
        ds = dominant_node_data(ds, seed=seed)
    if loss == "softmax":
        ds = three_classes(ds, seed=seed)
    problem = Problem(ds, loss)
    opt = solve(problem, gtol=1e-12, use_cache=False)
    if prop == "A":
        check = P.non_iid(ds)
        condition, holds = check.describe(), True
    else:
        check = _CONDITION[prop](ds)
        condition, holds = check.describe(), bool(check.holds)
    return CaseProblem(prop=prop, spec=CASE_DATA[prop], problem=problem, w_star=opt.w,
                       f_star=float(opt.objective), condition=condition, condition_holds=holds)


# =======================================================================================
# What each cell runs
# =======================================================================================
@dataclass(frozen=True)
class RunSpec:
    """One run of a cell: the hyperparameters it pins (passed to the constructor; every other one
    takes the registry's default, derived from the problem at run time, as on the Run page), why it
    pins them, and its start: "fixed point" (w* with the state at its fixed point,
    :func:`fixed_point_start`), "w*" (w0 = w*, every other state at its default) or "0" (the
    default start)."""

    hyper: Mapping
    start: str
    why: str = ""

    def __post_init__(self):
        if self.hyper and not self.why:
            raise ValueError("a run that pins hyperparameters says why")

    @property
    def label(self) -> str:
        """The run in words, from what it pins (never a separate string that could drift)."""
        if not self.hyper:
            return "its defaults"
        pins = ", ".join(f"{k} = {_value_text(k, v)}" for k, v in self.hyper.items())
        return f"{pins} pinned ({self.why}), its defaults otherwise"

    @property
    def head(self) -> str:
        """The run in words before the values it ran with (:func:`_ran`), which name the pinned ones'."""
        if not self.hyper:
            return "its defaults"
        return f"its defaults but {', '.join(self.hyper)} pinned ({self.why})"


def _value_text(name: str, value) -> str:
    """A hyperparameter's value as the cells print it."""
    if name == "batch_size" and value == 0:
        return "full"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


#: The settings the paper states its claims about, where they are not the registry's defaults:
#: algorithm → (hyperparameters, where the paper sets them).  A cell whose property the paper
#: claims *at* that setting (:data:`AT_PAPER_SETTING`) runs it first, for the verdict; the other
#: (B)–(D) cells run the defaults first and this setting beside them, so the page still shows what
#: the paper's algorithm does.  Neither run is added when the setting is the registry's default.
PAPER_SETTING: Mapping[str, tuple[Mapping, str]] = types.MappingProxyType({
    "dane": (types.MappingProxyType({"eta": 1.0, "mu": 0.0, "safeguard": False}),
             "the paper's DANE, \"the default setting when μ = 0 and η = 1\" of Section 3.4"),
})

#: The cells whose property the paper states at :data:`PAPER_SETTING` (DANE's (D): "In the default
#: setting when μ = 0 and η = 1, DANE achieves desirable property (D)", Section 3.4).
AT_PAPER_SETTING = frozenset({("dane", "D")})

#: Why (B)–(D) also run a safeguarded method with its safeguard off (FSVRG's monotone safeguard).
_AS_PRINTED = "{reference} as printed; the safeguard, not in the paper, keeps wᵗ wherever a step would raise f"


def _is_default(cls, hyper, base=None, problem=None) -> bool:
    """Whether pinning ``hyper`` changes nothing (they are the registry's defaults, or ``base``'s): compared
    as the run would use them, derived defaults filled in (on ``problem``) — DANE's μ left to derive is 0
    without its safeguard, as the paper's setting pins it."""
    def used(given):
        hp = cls.validate(given)
        derived = cls.derived_defaults(problem, given) if problem is not None else {}
        return {k: derived.get(k, v) if v is None else v for k, v in hp.items()}

    start = used(dict(base or {}))
    pinned = used({**(base or {}), **hyper})
    return all(pinned[k] == start[k] for k in hyper)


#: Why a run pins what a caller of :func:`properties_matrix` set in place of the defaults (``base``).
_BASE_WHY = "set in place of the registry's defaults by the caller"


def _omega_max(problem) -> int:
    return int(problem.data.stats.omega.max(initial=0))


def run_specs(name: str, prop: str, problem, config: MatrixConfig, base=None) -> tuple[RunSpec, ...]:
    """The runs of cell ``name`` × ``prop``: the first gives the verdict, the others are shown beside it.
    Every run takes the registry's defaults but for what it pins, and says why it pins it.  ``base``
    (hyperparameters, None for none) replaces the registry's defaults in every run, pinned and said so:
    a recording's settings (tests/data/golden), never the page's."""
    if base:
        return tuple(RunSpec({**base, **s.hyper}, s.start, f"{s.why}; {_BASE_WHY}" if s.why else _BASE_WHY)
                     for s in _run_specs(name, prop, problem, config, dict(base)))
    return _run_specs(name, prop, problem, config, {})


def _run_specs(name, prop, problem, config, base) -> tuple[RunSpec, ...]:
    cls = ALGORITHMS[name]
    accepts = {p.name for p in cls.params}
    defaults = RunSpec({}, "fixed point" if prop == "A" else "0")
    if prop == "A":
        if {"client_fraction", "batch_size", "local_epochs"} <= accepts:
            E = config.drift_epochs
            det = dict(client_fraction=1.0, batch_size=0, local_epochs=E)
            specs = [RunSpec(det, "fixed point", "no sampling and E ≥ 2 epochs, the deterministic drift"),
                     defaults]
            if "control0" in inspect.signature(cls.__init__).parameters:
                specs.append(RunSpec(det, "w*", "as in the first run, now from w* with the default control "
                                                "variates c_k = c = λw*, a start a user can make"))
            return tuple(specs)
        return (defaults,)
    if prop == "C" and ("sigma" in accepts or "sigma_prime" in accepts):
        omega = _omega_max(problem)
        K = problem.data.n_nodes
        if "sigma" in accepts:
            sigma = float(min(max(omega, 1), K))
            return (RunSpec({"sigma": sigma}, "0", "σ = max_j ω^j, the smallest σ the Appendix admits on this "
                                                   "data"),
                    defaults)
        gamma = 1.0 / K if getattr(cls, "averaging", False) else 1.0
        sigma_p = gamma * max(omega, 1)
        return (RunSpec({"sigma_prime": sigma_p, "local_passes": DUAL_LOCAL_PASSES}, "0",
                        f"σ' = γ·max_j ω^j with γ = {gamma:g}, and an essentially exact local solve"),
                RunSpec({"sigma_prime": sigma_p}, "0", "σ' = γ·max_j ω^j, with the default local solver"),
                defaults)
    specs = [defaults]
    if name in PAPER_SETTING and not _is_default(cls, PAPER_SETTING[name][0], base, problem):
        paper = RunSpec(dict(PAPER_SETTING[name][0]), "0", PAPER_SETTING[name][1])
        specs = [paper, defaults] if (name, prop) in AT_PAPER_SETTING else [defaults, paper]
    elif name in PAPER_SETTING and (name, prop) in AT_PAPER_SETTING:
        specs = [RunSpec(dict(PAPER_SETTING[name][0]), "0", PAPER_SETTING[name][1])]
    # A safeguarded method also runs as printed, unless a run above already does (DANE's paper setting).
    if "safeguard" in accepts and cls.validate(base)["safeguard"] and \
            not any(s.hyper.get("safeguard") is False for s in specs):
        specs.append(RunSpec({"safeguard": False}, "0", _AS_PRINTED.format(reference=cls.reference)))
    return tuple(specs)


def _ran(algorithm, spec: RunSpec) -> str:
    """What a run ran, in words: its label, then every hyperparameter ``algorithm`` runs with (those
    it does not use left out), derived defaults filled in and marked, pinned ones marked."""
    cls = type(algorithm)
    derived = algorithm.derived
    parts = []
    for p in cls.params:
        value = algorithm.hp[p.name]
        tag = ""
        if value is None:
            if p.name not in derived:
                continue
            value, tag = derived[p.name], " (derived)"
        if p.name in spec.hyper:
            tag = " (pinned)"
        parts.append(f"{p.name} = {_value_text(p.name, value)}{tag}")
    return f"{spec.head}: " + (", ".join(parts) if parts else "no hyperparameters")


# =======================================================================================
# One cell
# =======================================================================================
@dataclass(frozen=True)
class Curve:
    """A run from 0 until f − f* ≤ eps: x = rounds (or iterations for a centralised reference),
    y = f(w) − f* after each iteration (the start first)."""

    x: tuple[int, ...]
    gaps: tuple[float, ...]
    reached: int | None        # the x at which the gap first fell to eps; None if not within budget
    diverged: bool


def curve_until(algorithm, f_star: float, *, eps: float, max_rounds: int, divergence: float = 1e6) -> Curve:
    """Step ``algorithm`` until f(w) − f* ≤ ``eps``, its rounds (iterations for a method without
    communication, ``federated = False``) reach ``max_rounds``, or it diverges (f − f* not finite, or
    ``divergence`` times its start).  At most ``max_rounds`` iterations: one-shot averaging's later
    iterations count no round (Section 3.4) and must still end."""
    problem = algorithm.problem
    counts = (lambda: algorithm.rounds) if getattr(algorithm, "federated", True) else (lambda: algorithm.iteration)
    gap0 = problem.value(np.asarray(algorithm.w)) - f_star
    xs, gaps = [counts()], [gap0]
    reached = counts() if gap0 <= eps else None
    diverged = False
    iterations = 0
    while reached is None and counts() < max_rounds and iterations < max_rounds:
        algorithm.step()
        iterations += 1
        gap = problem.value(np.asarray(algorithm.w)) - f_star
        xs.append(counts())
        gaps.append(float(gap))
        if gap <= eps:
            reached = counts()
        elif not math.isfinite(gap) or gap > divergence * max(gap0, 1e-300):
            diverged = True
            break
    if reached is not None and reached > max_rounds:
        reached = None
    return Curve(x=tuple(int(v) for v in xs), gaps=tuple(float(g) for g in gaps), reached=reached,
                 diverged=diverged)


@dataclass(frozen=True)
class Run:
    """One run of a cell, measured: (A) the drift from w* at every iteration; (B)–(D) f − f*
    against rounds.

    label, start : as in :class:`RunSpec`
    ran : its label, then every hyperparameter it ran with, derived defaults filled in (:func:`_ran`)
    x, y : the curve
    value : (A) the drift after the first iteration; (B)–(D) the rounds to reach eps (None: not reached)
    has : the verdict this run alone would give
    text : its short label
    peak : (B)–(D) the largest f − f* after the start; a run that ends above its start "climbs"
    rounds : (B)–(D) the communication rounds the algorithm counted (iterations for a centralised one)
    """

    label: str
    start: str
    ran: str
    x: tuple
    y: tuple
    value: float | None
    has: bool
    text: str
    peak: float | None = None
    rounds: int | None = None


@dataclass(frozen=True)
class Cell:
    """One algorithm × one property, measured.

    status : "measured", "unsupported" (the algorithm cannot run this loss) or "failed"
    value : (A) the drift ‖w^1 − w*‖₂ after the first iteration; (B)–(D) the rounds to reach eps
            (None: not within the budget, or not measured)
    has : the measured verdict (None when not measured), from the first run
    x, y : the first run's curve: (A) iterations and ‖w^t − w*‖₂; (B)–(D) rounds and f(w) − f*
    x_label : what x counts
    text : the cell's short label in the matrix
    detail : one line for people
    claim : what the paper says (:func:`paper_claim`)
    agreement : "agrees", "disagrees" (the paper says has/lacks and the measurement says the
                opposite), "recorded" (the paper says nothing or only designs for it), or "—"
    seconds : the measurement's wall time
    threshold : the line the curve is judged by: (A) the drift tolerance, (B)–(D) eps
    label, ran, start : the first run's label, hyperparameters and start (:class:`Run`)
    runs : every run, the first included (the others are shown beside it: the sampling noise of
           (A), SCAFFOLD from its default controls, (C)'s default σ)
    why : why it measures what it does, where the reason is not the paper's (:data:`WHY`)
    """

    algorithm: str
    title: str
    prop: str
    status: str
    value: float | None
    has: bool | None
    x: tuple = ()
    y: tuple = ()
    x_label: str = ""
    text: str = ""
    detail: str = ""
    claim: Claim = field(default_factory=lambda: _silent(_NOT_IN_PAPER))
    agreement: str = "—"
    seconds: float = 0.0
    threshold: float | None = None
    label: str = ""
    ran: str = ""
    start: str = ""
    runs: tuple = ()
    why: str = ""


def _agreement(claim: Claim, has: bool | None) -> str:
    if has is None:
        return "—"
    if claim.verdict == "has":
        return "agrees" if has else "disagrees"
    if claim.verdict == "lacks":
        return "disagrees" if has else "agrees"
    return "recorded"


def measure_cell(name: str, case: CaseProblem, config: MatrixConfig, settings=None) -> Cell:
    """Measure algorithm ``name`` (a registry key) on property ``case.prop``'s data: every run of
    :func:`run_specs` (with ``settings`` in place of the defaults, if given), the first giving the verdict."""
    cls = ALGORITHMS[name]
    prop = case.prop
    claim = paper_claim(name, prop)
    base = dict(algorithm=name, title=cls.title, prop=prop, claim=claim)
    problem = case.problem
    if problem.loss.name == "softmax" and cls.softmax_refusal() is not None:
        return Cell(status="unsupported", value=None, has=None, text="no softmax",
                    detail=f"{cls.softmax_refusal()}.", **base)
    if problem.loss.name != "softmax" and problem.loss.name not in cls.losses:
        only = ", ".join(cls.losses)
        return Cell(status="unsupported", value=None, has=None, text=f"{only} loss only",
                    detail=f"{cls.title} supports the {only} loss only; choose it above to measure this cell.",
                    **base)
    start = time.perf_counter()
    try:
        with one_thread():
            runs = tuple(_run(cls, case, config, spec) for spec in run_specs(name, prop, problem, config, settings))
    except FedvizError as e:
        return Cell(status="failed", value=None, has=None, text="could not run", detail=str(e), **base)
    seconds = time.perf_counter() - start
    main = runs[0]
    if prop == "A":
        x_label = "iterations from w*"
        threshold = config.drift_tol * max(1.0, float(np.linalg.norm(case.w_star)))
    else:
        x_label = "rounds" if cls.federated else "iterations (centralised: no rounds)"
        threshold = config.eps
    return Cell(status="measured", value=main.value, has=main.has, x=main.x, y=main.y, x_label=x_label,
                text=main.text, detail=_detail(cls, case, config, runs), agreement=_agreement(claim, main.has),
                seconds=seconds, threshold=threshold, label=main.label, ran=main.ran, start=main.start,
                runs=runs, why=WHY.get((name, prop), ""), **base)


#: A run's start, in words.
START_TEXT: Mapping[str, str] = types.MappingProxyType({
    "fixed point": "w* with its state at its fixed point", "w*": "w* with its default state", "0": "w = 0"})


def _run(cls, case, config, spec: RunSpec) -> Run:
    """One run of a cell (:class:`RunSpec`), measured."""
    problem = case.problem
    if case.prop == "A":
        if spec.start == "fixed point":
            algorithm = P.fixed_point_start(cls, problem, case.w_star, seed=config.seed, **spec.hyper)
        else:
            algorithm = cls(problem, seed=config.seed, w0=case.w_star, **spec.hyper)
        ran = _ran(algorithm, spec)
        tol = config.drift_tol * max(1.0, float(np.linalg.norm(case.w_star)))
        r = P.stays_at_optimum(algorithm, case.w_star, iterations=config.drift_iterations, tol=tol)
        first = r.drifts[1]
        return Run(label=spec.label, start=spec.start, ran=ran, x=tuple(range(len(r.drifts))), y=r.drifts,
                   value=first, has=bool(r.holds), text=f"drift {first:.1e}")
    algorithm = cls(problem, seed=config.seed, **spec.hyper)
    ran = _ran(algorithm, spec)
    c = curve_until(algorithm, case.f_star, eps=config.eps, max_rounds=config.max_rounds)
    has = c.reached is not None and c.reached <= config.o1_rounds
    peak = max(c.gaps[1:], default=None)
    rounds = c.x[-1]                                 # what the algorithm counted (iterations if centralised)
    if c.reached is not None:
        text = f"{c.reached} round{'s' * (c.reached != 1)}" if cls.federated else f"{c.reached} it."
    elif c.diverged:
        text = "diverged"
    elif rounds < config.max_rounds:                 # it stopped communicating (one-shot: after one round)
        text = f"{rounds} round{'s' * (rounds != 1)}, > ε"
    elif c.gaps[-1] > c.gaps[0]:                     # it ends above where it started
        text = f"> {config.max_rounds}, climbs"
    else:
        text = f"> {config.max_rounds}"
    return Run(label=spec.label, start=spec.start, ran=ran, x=c.x, y=c.gaps,
               value=None if c.reached is None else float(c.reached), has=has, text=text, peak=peak,
               rounds=rounds)


def _outcome(cls, run: Run, config) -> str:
    """What a (B)–(D) run did, in words."""
    unit = "rounds" if cls.federated else "iterations"
    if run.value is not None:
        return f"reached f − f* ≤ {config.eps:g} after {run.value:g} {unit}"
    if run.text == "diverged":
        return f"diverged (f − f* = {run.y[-1]:.2g} after {run.x[-1]} {unit})"
    if run.rounds is not None and run.rounds < config.max_rounds:
        iterations = len(run.x) - 1
        return (f"used {run.rounds} round{'s' * (run.rounds != 1)} of communication in {iterations} iterations "
                f"(the later ones communicate nothing) and ended {run.y[-1]:.2g} above f*")
    if run.y[-1] > run.y[0]:
        return (f"climbed: f − f* went from {run.y[0]:.2g} at the start to {run.peak:.2g} and was {run.y[-1]:.2g} "
                f"after {run.x[-1]} {unit}")
    return f"was still {run.y[-1]:.2g} above f* after {run.x[-1]} {unit}"


def _detail(cls, case, config, runs) -> str:
    """The cell's sentence for people: what its runs did, with what they ran."""
    main = runs[0]
    if case.prop == "A":
        norm = float(np.linalg.norm(case.w_star))
        parts = [f"Started at {START_TEXT[main.start]} (‖w*‖ = {norm:.3g}), with {main.ran} — {cls.title} moved "
                 f"{main.value:.2g} in its first iteration and at most {max(main.y):.2g} in {len(main.y) - 1} — "
                 + ("it stays." if main.has else "it does not stay.")]
        for r in runs[1:]:
            parts.append(f"Started at {START_TEXT[r.start]}, with {r.ran} — {r.value:.2g} in the first iteration, "
                         f"at most {max(r.y):.2g}.")
        return " ".join(parts)
    parts = [f"With {main.ran} — {cls.title} {_outcome(cls, main, config)}; O(1) here means at most "
             f"{config.o1_rounds} — " + ("it has the property." if main.has else "it does not have it.")]
    for r in runs[1:]:
        parts.append(f"With {r.ran} — {_outcome(cls, r, config)}.")
    if not case.condition_holds:
        parts.append("(The data are not in the property's case.)")
    return " ".join(parts)


# =======================================================================================
# The matrix
# =======================================================================================
@dataclass(frozen=True)
class Matrix:
    """Every cell, rows in the registry's order, columns A–D; the cases' data descriptions."""

    config: MatrixConfig
    algorithms: tuple[str, ...]
    cells: tuple[Cell, ...]
    cases: dict                         # property → its data condition, described
    specs: dict                         # property → its data set, in words (:data:`CASE_TEXT`)
    seconds: float

    def cell(self, algorithm: str, prop: str) -> Cell:
        for c in self.cells:
            if c.algorithm == algorithm and c.prop == prop:
                return c
        raise ParameterError("cell", f"{algorithm} × {prop}",
                             "an algorithm of " + ", ".join(self.algorithms) + " and a property A–D")

    def disagreements(self) -> tuple[Cell, ...]:
        return tuple(c for c in self.cells if c.agreement == "disagrees")


def properties_matrix(config: MatrixConfig = MatrixConfig(), algorithms=None, *, base=None) -> Matrix:
    """Measure every cell: the registry's algorithms (or ``algorithms``) × (A)–(D), with the registry's
    defaults.  ``base`` maps an algorithm to hyperparameters that replace its defaults in every run, each
    pinned and said so in the cell (a recording's settings, tests/data/golden); the page passes none."""
    names = tuple(ALGORITHMS) if algorithms is None else tuple(algorithms)
    base = dict(base or {})
    for name in (*names, *base):
        if name not in ALGORITHMS:
            raise ParameterError("algorithm", name, "one of " + ", ".join(ALGORITHMS))
    for name, hyper in base.items():
        ALGORITHMS[name].validate(dict(hyper))       # a bad setting is named before anything runs
    start = time.perf_counter()
    with one_thread():
        cases = {prop: case_problem(prop, config.loss, seed=config.seed) for prop in PROPERTIES}
        cells = tuple(measure_cell(name, cases[prop], config, base.get(name)) for name in names
                      for prop in PROPERTIES)
    return Matrix(config=config, algorithms=names, cells=cells,
                  cases={p: c.condition for p, c in cases.items()}, specs=dict(CASE_TEXT),
                  seconds=time.perf_counter() - start)
