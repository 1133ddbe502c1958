"""Tuning that makes the race fair: each algorithm's step chosen by short pilot runs.

An algorithm run at its derived default step is not run at its best, and the defaults
are not equally conservative (FSVRG's is 1/32 of its best on a9a, CoCoA+'s σ' = K is the
worst-case safe value), so comparing defaults compares the defaults' authors.  :func:`tune`
gives every algorithm the same budget of pilot runs on the same problem and keeps the
value that is best by one stated criterion.

Which hyperparameter (:func:`tunable_params`), from the registry's own metadata, so an
algorithm added later is covered:

1. the parameter of the algorithm's ``divergence_hint`` (parameter, "lower"/"raise"), when
   it is a float whose default is not 0: the algorithm itself says this value decides
   stability (GD's h to lower, CoCoA's σ' to raise, …).  A default of 0 (DANE's μ) cannot
   centre a geometric grid;
2. else a float hyperparameter named like a step (:data:`STEP_NAMES`: DANE's η);
3. else a float hyperparameter that is an inverse step (:data:`INVERSE_STEP_NAMES`: the
   weight of a local subproblem's quadratic term).

Other step-named float hyperparameters are deliberately left alone; :data:`NOT_TUNED`
says which and why, and a test walks the registry so none is forgotten.

The search (:func:`tune`): pilots of ``min(iterations, PILOT_ITERATIONS)`` iterations
(:func:`fedviz.runner.loop.iterate`, the run's own seed and problem) on a geometric grid
``default × RATIO**k``, k = −1, 0, 1.  While the best pilot sits at the grid's edge the
grid grows by one point on that side (at most :data:`MAX_EXTENSIONS` times; then
``edge=True``); a side stops growing at the hyperparameter's allowed range.  Then the two
midpoints around the winner (× √RATIO) are tried.  Pilots that diverge or oscillate
(:func:`fedviz.runner.health.assess` on the pilot's objectives) are excluded; if every
pilot is excluded, the grid grows towards the safer side (smaller steps, larger σ').  Ten iterations are enough for
health's oscillation window (8 differences) and rank steps as the full run does; the
tests check that the pick is also good after 30 iterations.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Callable, Mapping

from ..algorithms import get_algorithm
from ..algorithms.base import StopRequested
from ..errors import ParameterError
from ..problems.objective import Problem
from .health import assess
from .loop import iterate

#: Iterations of a pilot run (fewer when the run itself is shorter).
PILOT_ITERATIONS = 10
#: Ratio of neighbouring grid points before refinement (the refinement halves it in log scale).
RATIO = 4.0
#: Points added on the winning side at most, while the winner sits at the grid's edge.
MAX_EXTENSIONS = 8
#: Float hyperparameters that are a step length (larger: a longer step).
STEP_NAMES = ("stepsize", "learning_rate", "lr", "local_stepsize", "eta")
#: Float hyperparameters that are an inverse step (larger: a shorter, safer step).
INVERSE_STEP_NAMES = ("sigma_prime", "sigma")
#: Step-named float hyperparameters that :func:`tune` leaves at their value, and why.
NOT_TUNED = {
    ("dane", "stepsize"): "used only by the 'svrg' local solver; η is DANE's step on the global gradient",
    ("dane", "mu"): "the proximal weight its divergence message raises; its default 0 cannot centre a "
                    "geometric grid, and η is DANE's step",
    ("scaffold", "global_stepsize"): "the server's step; 1 (plain averaging) is SCAFFOLD's analysed setting, "
                                     "the local step η_l is tuned",
}
#: The attribute of a built algorithm holding the value a derived default (None) resolves to.
RESOLVED_ATTRIBUTE = {"stepsize": "h"}


@dataclass(frozen=True)
class Pilot:
    """One pilot run: the hyperparameter's value, the final f − f*, and health's verdict."""

    value: float
    final: float
    status: str  # "ok", "diverged" or "oscillating"


@dataclass(frozen=True)
class TuneResult:
    """The chosen value, the full hyperparameters to run with, and the evidence for the choice."""

    name: str
    param: str | None
    value: float | None
    hyper: dict
    criterion: str
    pilots: tuple[Pilot, ...]
    seconds: float
    edge: bool

    @property
    def tuned(self) -> bool:
        """True when a pilot passed and its value was chosen (False: nothing to tune, or none passed)."""
        return self.param is not None and any(p.status == "ok" for p in self.pilots)

    def label(self, title: str) -> str:
        """'FSVRG (stepsize 12.5, tuned)': the chosen value travels with the curve."""
        if self.param is None or self.value is None:
            return title
        if not self.pilots:
            return f"{title} ({self.param} {self.value:.3g}, default)"
        if not self.tuned:
            return f"{title} ({self.param} {self.value:.3g}, default: no pilot passed)"
        return f"{title} ({self.param} {self.value:.3g}, tuned{', at grid edge' if self.edge else ''})"


def tunable_params(cls) -> tuple[str, ...]:
    """The hyperparameters :func:`tune` tunes for algorithm class ``cls`` (empty: none).

    One at most today (see the module's docstring for the rule); a tuple so that a
    second one can be added without changing callers.
    """
    floats = {p.name: p for p in cls.params if p.kind == "float"}
    hint = _hint(cls)
    if hint is not None and hint[0] in floats and floats[hint[0]].default != 0:
        return (hint[0],)
    for names in (STEP_NAMES, INVERSE_STEP_NAMES):
        for name in names:
            if name in floats and (cls.name, name) not in NOT_TUNED:
                return (name,)
    return ()


def safer_side(cls, param: str) -> int:
    """-1 when smaller values of ``param`` are the safer (a step), +1 when larger are (σ', σ)."""
    hint = _hint(cls)
    if hint is not None and hint[0] == param:
        return 1 if hint[1] == "raise" else -1
    return 1 if param in INVERSE_STEP_NAMES else -1


def _hint(cls) -> tuple[str, str] | None:
    hint = cls.divergence_hint
    if isinstance(hint, str):  # the older form: a parameter to lower
        return (hint, "lower")
    return tuple(hint) if hint else None


def resolved_default(cls, problem: Problem, hyper: Mapping, param: str, seed: int = 0) -> float | None:
    """The value ``param`` takes in a run with ``hyper``: the given one, the fixed default, or
    the derived default read off a built algorithm (which costs one construction)."""
    if hyper.get(param) is not None:
        return float(hyper[param])
    spec = cls.param(param)
    if spec.default is not None:
        return float(spec.default)
    algo = cls(problem, seed=seed, **dict(hyper))
    value = getattr(algo, RESOLVED_ATTRIBUTE.get(param, param), None)
    return float(value) if value is not None else None


def pilot_iterations(iterations: int) -> int:
    """The pilots' length for a run of ``iterations``."""
    return min(int(iterations), PILOT_ITERATIONS)


def tune(problem: Problem, name: str, hyper: Mapping | None = None, *, iterations: int, seed: int = 0,
         f_star: float, stop: Callable[[], bool] | None = None) -> TuneResult:
    """Choose ``name``'s step-like hyperparameter on ``problem`` by pilot runs (module docstring).

    ``hyper`` are the other hyperparameters (a value of the tuned one centres the grid);
    ``iterations`` is the length of the run to come (pilots are at most
    :data:`PILOT_ITERATIONS` long); ``f_star`` the optimum's objective.  Raises
    :class:`ParameterError` for bad hyperparameters or iterations, and
    :class:`~fedviz.algorithms.base.StopRequested` when ``stop()`` turns true.
    """
    start = time.perf_counter()
    cls = get_algorithm(name)
    hyper = dict(hyper or {})
    cls.validate(hyper)
    if isinstance(iterations, bool) or not isinstance(iterations, Integral) or not 0 <= iterations <= 100_000:
        raise ParameterError("iterations", iterations, "integer in [0, 100000]")
    if isinstance(f_star, bool) or not isinstance(f_star, Real) or not math.isfinite(f_star):
        raise ParameterError("f_star", f_star, "a finite number (the optimum's objective)")
    params = tunable_params(cls)
    if not params:
        return TuneResult(cls.name, None, None, hyper, "nothing to tune", (), time.perf_counter() - start, False)
    param = params[0]
    spec = cls.param(param)
    base = resolved_default(cls, problem, hyper, param, seed)
    length = pilot_iterations(iterations)
    criterion = (f"lowest f − f* after {length} pilot iterations (seed {seed}) over {param} = "
                 f"{base:.4g} × {RATIO:g}^k, grown while the best is at an edge (at most "
                 f"{MAX_EXTENSIONS} times), refined × {math.sqrt(RATIO):g}; diverging or oscillating "
                 f"pilots excluded")
    if base is None or length == 0:
        return TuneResult(cls.name, param, base, hyper, criterion, (), time.perf_counter() - start, False)

    pilots: dict[float, Pilot] = {}   # by grid exponent k (value = base · RATIO**k)
    refused: set[float] = set()       # exponents outside the allowed range, or refused by the algorithm

    def run(k: float) -> bool:
        """Run the pilot at exponent k; False when its value is not allowed."""
        if k in pilots:
            return True
        if k in refused:
            return False
        value = base * RATIO ** k
        try:
            spec.validate(value, cls.name)
            records = iterate(problem, cls, iterations=length, hyper={**hyper, param: value}, seed=seed,
                              f_star=f_star, stop=stop)
            first = next(records)  # construction errors (e.g. SGD's h·λ ≥ 1) are raised here
        except ParameterError:
            refused.add(k)
            return False
        objectives, last = [first.objective], first
        for last in records:
            objectives.append(last.objective)
        if last.status == "stopped":
            raise StopRequested()
        if last.status in ("diverged", "failed"):
            status = "diverged"
        else:
            status = assess(objectives, f_star).status
        final = last.suboptimality if math.isfinite(last.suboptimality) else math.inf
        pilots[k] = Pilot(value, final, status)
        return True

    def best() -> float | None:
        ok = [k for k, p in pilots.items() if p.status == "ok"]
        return min(ok, key=lambda k: (pilots[k].final, abs(k))) if ok else None

    safer = safer_side(cls, param)
    for k in (-1, 0, 1):
        run(k)
    edge = False
    for extension in range(MAX_EXTENSIONS + 1):
        k = best()
        tried = list(pilots)
        if k is None:  # everything excluded: grow towards the safer side
            side = safer
        elif k == max(tried):
            side = 1
        elif k == min(tried):
            side = -1
        else:
            break
        nxt = (max(tried) + 1) if side > 0 else (min(tried) - 1)
        if nxt in refused:
            break  # the allowed range ends on this side
        if extension == MAX_EXTENSIONS:
            edge = True
            break
        if not run(nxt):
            break  # the allowed range ends here: the winner at its bound is the best allowed
    k = best()
    if k is not None:
        for j in (k - 0.5, k + 0.5):
            run(j)
        k = best()
    if k is None:
        return TuneResult(cls.name, param, base, hyper, criterion, _ordered(pilots),
                          time.perf_counter() - start, True)
    value = pilots[k].value
    return TuneResult(cls.name, param, value, {**hyper, param: value}, criterion, _ordered(pilots),
                      time.perf_counter() - start, edge)


def _ordered(pilots: Mapping[float, Pilot]) -> tuple[Pilot, ...]:
    return tuple(pilots[k] for k in sorted(pilots))
