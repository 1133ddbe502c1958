"""The properties matrix: every registered algorithm × the desirable properties (A)–(D) of
Section 3.1, each cell measured on the property's own data and set beside what the paper says.

Section 3.1 lists four properties an algorithm for federated optimization should have:

(A) "If the algorithm is initialized to the optimal solution, it stays there."
(B) "If all the data is on a single node, the algorithm should converge in O(1) rounds."
(C) "If each feature occurs on a single node [...] the algorithm should converge in O(1) rounds."
(D) "If each node contains an identical dataset, the algorithm should converge in O(1) rounds."

A cell is measured, never looked up:

- (A) on the paper's setting in miniature (``google-plus-small`` with 40 nodes: non-IID, unbalanced,
  sparse): the algorithm starts at w* with its state at its fixed point
  (:func:`fedviz.properties.fixed_point_start`: duals α*, control variates ∇F_k(w*)) and the cell
  is the drift ‖w^1 − w*‖₂ after its first iteration (the issue's "drift after one round"); it stays if
  no iterate of a few moves more than a tolerance (:func:`fedviz.properties.stays_at_optimum`), so a drift
  that grows iteration after iteration is caught too;
- (B), (C), (D) on the presets built for them (``one-node``, ``disjoint-features``,
  ``identical-nodes``, whose conditions :func:`fedviz.properties.one_node` and its siblings check):
  the algorithm starts at 0 and the cell is the number of communication rounds until
  f(w) − f* ≤ ε, within a budget; "O(1)" is read as at most ``o1_rounds`` rounds (two iterations
  of a two-round method such as DANE or FSVRG: "ideally exactly one round", Section 3.1).

:data:`PAPER` records, per algorithm and property, what the paper says — with the place it says
it — or that it says nothing; :func:`paper_claim` answers for algorithms added to the registry
later (nothing, they are not in the paper).  The registry (:data:`fedviz.algorithms.ALGORITHMS`)
gives the rows, so a new algorithm gets a row and a test without a change here.
"""

from __future__ import annotations

import contextlib
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

__all__ = ["one_thread", "PROPERTIES", "PROPERTY_TEXT", "CASE_DATA", "Claim", "PAPER", "paper_claim", "MatrixConfig",
           "CaseProblem", "Cell", "Matrix", "case_problem", "measure_cell", "properties_matrix",
           "curve_until", "Curve"]

#: The properties of Section 3.1, in the paper's order.
PROPERTIES = ("A", "B", "C", "D")

#: Section 3.1's wording of each property (the matrix's column help).
PROPERTY_TEXT: Mapping[str, str] = types.MappingProxyType({
    "A": "Started at the optimum, it stays there.",
    "B": "All data on one node: converges in O(1) rounds.",
    "C": "Each feature on a single node: converges in O(1) rounds.",
    "D": "Identical data on every node: converges in O(1) rounds.",
})

#: Each property's own data set (a preset spec, :mod:`fedviz.data.presets`).
CASE_DATA: Mapping[str, str] = types.MappingProxyType({
    "A": "google-plus-small?nodes=40",
    "B": "one-node",
    "C": "disjoint-features",
    "D": "identical-nodes",
})

#: The data condition each of (B)–(D) needs (Section 3.1), checked on the case's data.
_CONDITION = {"B": P.one_node, "C": P.disjoint_features, "D": P.identical_nodes}


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
    "naive-fsvrg": {p: _silent("Algorithm 3 is stated without properties; by Proposition 1 it is DANE with one "
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
    seed : seeds every algorithm's random choices
    """

    loss: str = "logistic"
    eps: float = 1e-6
    max_rounds: int = 20
    o1_rounds: int = 4
    drift_iterations: int = 3
    drift_tol: float = 1e-8
    seed: int = 0

    def __post_init__(self):
        if self.loss not in LOSSES:
            raise ParameterError("loss", self.loss, "one of " + ", ".join(LOSSES))
        _check("eps", self.eps, 1e-12, 1.0, float)
        _check("max_rounds", self.max_rounds, 1, 200, int)
        _check("o1_rounds", self.o1_rounds, 1, 200, int)
        if self.o1_rounds > self.max_rounds:
            raise ParameterError("o1_rounds", self.o1_rounds,
                                 f"an integer in [1, max_rounds = {self.max_rounds}] (the budget must reach it)")
        _check("drift_iterations", self.drift_iterations, 1, 50, int)
        _check("drift_tol", self.drift_tol, 1e-15, 1.0, float)
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


def case_problem(prop: str, loss: str = "logistic") -> CaseProblem:
    """The problem of property ``prop``'s own data (:data:`CASE_DATA`), λ = 1/n as in Section 4."""
    if prop not in PROPERTIES:
        raise ParameterError("property", prop, "one of A, B, C, D (Section 3.1)")
    name, overrides = parse_preset_spec(CASE_DATA[prop])
    ds = make_preset(name, **overrides)
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
class Cell:
    """One algorithm × one property, measured.

    status : "measured", "unsupported" (the algorithm cannot run this loss) or "failed"
    value : (A) the drift ‖w^1 − w*‖₂ after the first iteration; (B)–(D) the rounds to reach eps
            (None: not within the budget, or not measured)
    has : the measured verdict (None when not measured)
    x, y : the cell's curve: (A) iterations and ‖w^t − w*‖₂; (B)–(D) rounds and f(w) − f*
    x_label : what x counts
    text : the cell's short label in the matrix
    detail : one line for people
    claim : what the paper says (:func:`paper_claim`)
    agreement : "agrees", "disagrees" (the paper says has/lacks and the measurement says the
                opposite), "recorded" (the paper says nothing or only designs for it), or "—"
    seconds : the measurement's wall time
    threshold : the line the curve is judged by: (A) the drift tolerance, (B)–(D) eps
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


def _agreement(claim: Claim, has: bool | None) -> str:
    if has is None:
        return "—"
    if claim.verdict == "has":
        return "agrees" if has else "disagrees"
    if claim.verdict == "lacks":
        return "disagrees" if has else "agrees"
    return "recorded"


def measure_cell(name: str, case: CaseProblem, config: MatrixConfig) -> Cell:
    """Measure algorithm ``name`` (a registry key) on property ``case.prop``'s data."""
    cls = ALGORITHMS[name]
    prop = case.prop
    claim = paper_claim(name, prop)
    base = dict(algorithm=name, title=cls.title, prop=prop, claim=claim)
    problem = case.problem
    if problem.loss.name not in cls.losses:
        only = ", ".join(cls.losses)
        return Cell(status="unsupported", value=None, has=None, text=f"{only} loss only",
                    detail=f"{cls.title} supports the {only} loss only; choose it above to measure this cell.",
                    **base)
    start = time.perf_counter()
    try:
        with one_thread():
            return _measure(cls, case, config, claim, base, start)
    except FedvizError as e:
        return Cell(status="failed", value=None, has=None, text="could not run", detail=str(e), **base)


def _measure(cls, case, config, claim, base, start) -> Cell:
    """The measurement of :func:`measure_cell` (its algorithm can run the case)."""
    problem, prop = case.problem, case.prop
    if prop == "A":
        algorithm = P.fixed_point_start(cls, problem, case.w_star, seed=config.seed)
        tol = config.drift_tol * max(1.0, float(np.linalg.norm(case.w_star)))
        r = P.stays_at_optimum(algorithm, case.w_star, iterations=config.drift_iterations, tol=tol)
        seconds = time.perf_counter() - start
        has = bool(r.holds)
        first = r.drifts[1]
        return Cell(status="measured", value=first, has=has,
                    x=tuple(range(len(r.drifts))), y=r.drifts, x_label="iterations from w*",
                    text=f"drift {first:.1e}",
                    detail=(f"Started at w* (‖w*‖ = {np.linalg.norm(case.w_star):.3g}) with its state at its "
                            f"fixed point, {cls.title} moved {first:.2g} in its first iteration and at most "
                            f"{r.max_drift:.2g} in {r.iterations} — "
                            + ("it stays." if has else "it does not stay.")),
                    claim=claim, agreement=_agreement(claim, has), seconds=seconds, threshold=tol,
                    **{k: v for k, v in base.items() if k != "claim"})
    algorithm = cls(problem, seed=config.seed)
    c = curve_until(algorithm, case.f_star, eps=config.eps, max_rounds=config.max_rounds)
    seconds = time.perf_counter() - start
    unit = "rounds" if cls.federated else "iterations (centralised: no rounds)"
    has = c.reached is not None and c.reached <= config.o1_rounds
    if c.reached is not None:
        text = f"{c.reached} round{'s' * (c.reached != 1)}" if cls.federated else f"{c.reached} it."
        detail = f"{cls.title} reached f − f* ≤ {config.eps:g} after {c.reached} {unit}"
    elif c.diverged:
        text = "diverged"
        detail = f"{cls.title} diverged (f − f* = {c.gaps[-1]:.2g} after {c.x[-1]} {unit})"
    else:
        text = f"> {config.max_rounds}"
        detail = f"{cls.title} was still {c.gaps[-1]:.2g} above f* after {c.x[-1]} {unit}"
    detail += (f"; O(1) here means at most {config.o1_rounds} — "
               + ("it has the property." if has else "it does not have it."))
    if not case.condition_holds:
        detail += " (The data are not in the property's case.)"
    return Cell(status="measured", value=None if c.reached is None else float(c.reached), has=has,
                x=c.x, y=c.gaps, x_label=unit, text=text, detail=detail, claim=claim,
                agreement=_agreement(claim, has), seconds=seconds, threshold=config.eps,
                **{k: v for k, v in base.items() if k != "claim"})


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
    specs: dict                         # property → its data set (preset spec)
    seconds: float

    def cell(self, algorithm: str, prop: str) -> Cell:
        for c in self.cells:
            if c.algorithm == algorithm and c.prop == prop:
                return c
        raise ParameterError("cell", f"{algorithm} × {prop}",
                             "an algorithm of " + ", ".join(self.algorithms) + " and a property A–D")

    def disagreements(self) -> tuple[Cell, ...]:
        return tuple(c for c in self.cells if c.agreement == "disagrees")


def properties_matrix(config: MatrixConfig = MatrixConfig(), algorithms=None) -> Matrix:
    """Measure every cell: the registry's algorithms (or ``algorithms``) × (A)–(D)."""
    names = tuple(ALGORITHMS) if algorithms is None else tuple(algorithms)
    for name in names:
        if name not in ALGORITHMS:
            raise ParameterError("algorithm", name, "one of " + ", ".join(ALGORITHMS))
    start = time.perf_counter()
    with one_thread():
        cases = {prop: case_problem(prop, config.loss) for prop in PROPERTIES}
        cells = tuple(measure_cell(name, cases[prop], config) for name in names for prop in PROPERTIES)
    return Matrix(config=config, algorithms=names, cells=cells,
                  cases={p: c.condition for p, c in cases.items()}, specs=dict(CASE_DATA),
                  seconds=time.perf_counter() - start)
