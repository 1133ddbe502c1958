"""Tuning that makes the race fair: each algorithm's step chosen by short pilot runs.

An algorithm run at its derived default step is not run at its best, and the defaults
are not equally conservative (FSVRG's is 1/32 of its best on a9a, CoCoA+'s σ' = K is the
worst-case safe value), so comparing defaults compares the defaults' authors.  :func:`tune`
gives every algorithm the same budget of pilot runs on the same problem and keeps the
value that is best by one stated criterion.

Which hyperparameter (:func:`tunable_params`), from the registry's own metadata, so an
algorithm added later is covered:

1. the parameter of the algorithm's ``divergence_hint`` (parameter, "lower"/"raise"), when
   it is a float whose default is not 0 and :data:`NOT_TUNED` does not excuse it: the algorithm
   itself says this value decides stability (GD's h to lower, CoCoA's σ' to raise, …).  DANE's μ
   is excused: its safeguard adapts it within the run;
2. else a float hyperparameter named like a step (:data:`STEP_NAMES`: DANE's η);
3. else a float hyperparameter that is an inverse step (:data:`INVERSE_STEP_NAMES`: the
   weight of a local subproblem's quadratic term).

Other step-named float hyperparameters are deliberately left alone; :data:`NOT_TUNED`
says which and why, and a test walks the registry so none is forgotten.

The search (:func:`tune`): pilots of :func:`pilot_iterations` iterations (as long as the run,
at most :data:`MAX_PILOT_ITERATIONS`; :func:`fedviz.runner.loop.iterate` on the run's own problem) on a geometric grid
``default × RATIO**k``, k = −1, 0, 1.  While the pilot of lowest score (below) sits at
the grid's edge the grid grows by one point on that side (at most :data:`MAX_EXTENSIONS`
times; then ``edge=True``); a side stops growing at the hyperparameter's allowed range,
and an inverse step (σ', σ) stops at its worst-case safe default (:func:`tuning_cap`).
Then the two midpoints around it (× √RATIO) are tried, and the choice is made (below).
Pilots that diverge or oscillate (:func:`fedviz.runner.health.assess` on the pilot's
objectives, which includes its relapse test) are excluded; if every pilot is excluded,
the grid grows towards the safer side (smaller steps, larger σ').

The seeds.  Pilots never run on the run's seed: :func:`pilot_seeds` derives
:data:`PILOT_SEEDS` other seeds from it (deterministically), so the choice is not fitted to
the very client samples the run will draw.  The default's pilot runs on the first two; when
their curves are identical the algorithm is deterministic (GD, the primal and dual methods)
and every pilot runs on the first seed only; otherwise every pilot runs on all of them, the
same seeds for every value (a paired comparison).

The criterion, the same for deterministic and stochastic methods: what the run will be judged
on.  A pilot's score is its final f − f*, the mean over its seeds (:func:`judged`).  Pilots
used to be a third of the run, scored by the geometric mean over their second half; that
measured something else than the run's last record and it misled: FSVRG's safeguard halves
h one iteration after a rise, so a short pilot favoured a smaller h that the whole run pays
for (a9a, IID, 100 nodes: 4.1e-5 tuned against 2.1e-5 at the default), and FedAvg at 2× the
default step was lower over iterations 15–30 on every seed yet higher at the 30th on three of
five (the last iterate is one round's draw).  The lowest score wins, but the default stays
unless a candidate beats it *clearly*: a score lower by :data:`PREFER` and, seed by seed, a
lower final f − f* on every pilot seed (a gain that one seed's luck could give is no gain; for
a deterministic method the two conditions are one).  f − f* below :data:`FLOOR` · max(1, |f*|)
counts as FLOOR · max(1, |f*|) (rounding; also keeps the logarithm finite).

The cost.  :class:`TuneResult` reports the pilots' communication rounds and seconds next
to the run's rounds (:meth:`TuneResult.cost`): tuning FSVRG for a 30-iteration run (60
rounds) spends a multiple of that on pilots, and a comparison of tuned methods should say so.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Callable, Mapping

import numpy as np

from ..algorithms import get_algorithm
from ..algorithms.base import StopRequested
from ..algorithms.spec import AlgorithmSpec
from ..errors import ParameterError
from ..problems.objective import Problem
from .health import assess
from .loop import iterate

#: The longest pilot run: a pilot is as long as the run it tunes, up to this many iterations.
MAX_PILOT_ITERATIONS = 100
#: A candidate replaces the default only with a score lower by this factor (and a lower
#: final f − f* on every pilot seed).
PREFER = 1.5
#: Seeds the pilots of a stochastic method run on (each pilot value on all of them).
PILOT_SEEDS = 3
#: Suboptimality below FLOOR · max(1, |f*|) is rounding: scores and comparisons clamp it there.
FLOOR = 1e-12
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
    ("dane", "mu"): "the proximal weight, which DANE's safeguard adapts within the run (from L̄/1024; without the "
                    "safeguard the paper's 0, which cannot centre a geometric grid); η is DANE's step",
    ("scaffold", "global_stepsize"): "the server's step; 1 (plain averaging) is SCAFFOLD's analysed setting, "
                                     "the local step η_l is tuned",
}


@dataclass(frozen=True)
class Pilot:
    """One pilot value: the hyperparameter's value, the final f − f* (mean over its seeds),
    health's verdict (the worst over its seeds), the criterion's score (the mean final f − f*
    over its seeds, clamped at the floor; inf when a seed diverged), the same score seed by seed,
    and the communication rounds its runs took (all seeds)."""

    value: float
    final: float
    status: str  # "ok", "diverged" or "oscillating"
    score: float = math.nan
    seed_scores: tuple[float, ...] = ()
    rounds: int = 0


@dataclass(frozen=True)
class TuneResult:
    """The chosen value, the full hyperparameters to run with, and the evidence for the choice:
    the pilots, their seeds, how many pilot runs, their total communication rounds and seconds
    (the default's run on a second seed that showed the method deterministic included), and the
    rounds the run itself will take (``run_rounds``; None when no pilot ran)."""

    name: str
    param: str | None
    value: float | None
    hyper: dict
    criterion: str
    pilots: tuple[Pilot, ...]
    seconds: float
    edge: bool
    rounds: int = 0
    seeds: tuple[int, ...] = ()
    run_rounds: int | None = None
    runs: int = 0   # pilot runs: one per value and seed, and the default's second seed when it was one
    rule: str = ""  # the criterion without this algorithm's grid: the same for every algorithm of a run
    grid: str = ""  # this algorithm's grid: "stepsize = 0.5 × 2^k (at most the safe …)"
    kept_default: bool = False  # the pilots chose the default itself (no candidate was clearly better)

    @property
    def tuned(self) -> bool:
        """True when a pilot passed and its value was chosen (False: nothing to tune, or none passed)."""
        return self.param is not None and any(p.status == "ok" for p in self.pilots)


    def cost(self) -> str:
        """'24 pilot runs (values × seeds 3104, 12, 77): 140 rounds in 1.10 s, against the run's 60 rounds'."""
        if not self.pilots:
            return "no pilot runs"
        seeds = ", ".join(str(s) for s in self.seeds)
        against = "" if self.run_rounds is None else f", against the run's {self.run_rounds} rounds"
        extra = self.runs - len(self.pilots) * max(1, len(self.seeds))
        plus = f" + {extra} to find it deterministic" if extra > 0 else ""
        return (f"{self.runs} pilot runs ({len(self.pilots)} values × seed{'s' if len(self.seeds) > 1 else ''} "
                f"{seeds}{plus}): {self.rounds} rounds in {self.seconds:.2f} s{against}")

    def note(self) -> str | None:
        """'(stepsize 12.5, tuned)': what the label of the tuned curve adds (None: nothing tuned); when the
        pilots kept the default, '(stepsize 327, tuned, default kept)', so that a curve equal to the untuned
        one is not read as a changed value."""
        if self.param is None or self.value is None:
            return None
        if not self.pilots:
            return f"({self.param} {self.value:.3g}, default)"
        if not self.tuned:
            return f"({self.param} {self.value:.3g}, default: no pilot passed)"
        if self.kept_default:
            return f"({self.param} {self.value:.3g}, tuned, default kept)"
        return f"({self.param} {self.value:.3g}, tuned{', at grid edge' if self.edge else ''})"

    def apply(self, spec: AlgorithmSpec) -> AlgorithmSpec:
        """``spec`` with the chosen hyperparameters, labelled 'FSVRG (stepsize 12.5, tuned)' (same group)."""
        return spec.with_hyper(self.hyper, note=self.note())

    def label(self, title: str) -> str:
        """'FSVRG (stepsize 12.5, tuned)': the chosen value travels with the curve."""
        note = self.note()
        return f"{title} {note}" if note else title


def tunable_params(cls) -> tuple[str, ...]:
    """The hyperparameters :func:`tune` tunes for algorithm class ``cls`` (empty: none).

    One at most today (see the module's docstring for the rule); a tuple so that a
    second one can be added without changing callers.
    """
    floats = {p.name: p for p in cls.params if p.kind == "float"}
    hint = _hint(cls)
    if hint is not None and hint[0] in floats and floats[hint[0]].default != 0 and (cls.name, hint[0]) not in NOT_TUNED:
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
    the derived default (:meth:`~fedviz.algorithms.base.Algorithm.derived_defaults`, a pure
    function of the problem and ``hyper``, cached with the problem; no algorithm is built).
    None when the run does not use it (DANE's stepsize with the exact solver).  ``seed`` is
    accepted for older callers: no default depends on it."""
    if hyper.get(param) is not None:
        return float(hyper[param])
    spec = cls.param(param)
    if spec.default is not None:
        return float(spec.default)
    value = cls.derived_defaults(problem, hyper).get(param)
    return float(value) if value is not None else None


def pilot_iterations(iterations: int) -> int:
    """The pilots' length for a run of ``iterations``: the run's own, at most
    :data:`MAX_PILOT_ITERATIONS` (30 for the usual 30; 100 for a run of 300)."""
    return min(int(iterations), MAX_PILOT_ITERATIONS)


def judged(length: int) -> range:
    """The iterations of a pilot of ``length`` that its score reads: its last, the one a run of that
    length is judged on (never iteration 0, which every pilot shares)."""
    return range(max(1, length), length + 1)


def pilot_score(gaps, floor: float) -> float:
    """The geometric mean of ``gaps`` (f − f* at the :func:`judged` iterations), each clamped at ``floor``."""
    return math.exp(sum(math.log(max(g, floor)) for g in gaps) / len(gaps))


def pilot_seeds(seed: int, n: int = PILOT_SEEDS) -> tuple[int, ...]:
    """``n`` distinct seeds in [0, 2³²) derived from the run's ``seed`` (the same every time), none
    equal to it: pilots never draw the run's own client samples."""
    state = np.random.SeedSequence([int(seed) % 2**32, _PILOT_SALT]).generate_state(n + 2)
    out: list[int] = []
    for s in (int(x) for x in state):
        if s != seed and s not in out:
            out.append(s)
    return tuple(out[:n])


#: Mixed into the pilot seeds' derivation, so they are not the seeds of any other derived stream.
_PILOT_SALT = 0x70696C6F  # 'pilo'


def tuning_cap(cls, problem: Problem, hyper: Mapping, param: str) -> float | None:
    """The largest value tuning tries for ``param`` (None: no cap but its allowed range).

    An inverse step (σ' of CoCoA/CoCoA+, σ of the primal and dual methods: larger is safer)
    is capped at its worst-case safe default, the derived value for every partition (σ' = γK,
    σ = K): Ma et al. prove that value safe and the rate worsens as σ' grows (the paper's
    Section 4.1: "the overall convergence rate directly depends on the best choice of
    aggregation parameter σ'", bounded by max_j ω^j ≤ K), so a larger one only slows.  Without
    the cap a noisy pilot could choose σ' = 800 with K = 100 (a9a, Dirichlet 0.5).
    """
    if safer_side(cls, param) < 0:
        return None
    spec = cls.param(param)
    if spec.default is not None:
        return None  # a fixed default is not a derived safe bound
    rest = {k: v for k, v in hyper.items() if k != param}
    value = cls.derived_defaults(problem, rest).get(param)
    return float(value) if value is not None else None


def _same_curve(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a, b))


def tune(problem: Problem, name: str | AlgorithmSpec, hyper: Mapping | None = None, *, iterations: int,
         seed: int = 0, f_star: float, stop: Callable[[], bool] | None = None) -> TuneResult:
    """Choose ``name``'s step-like hyperparameter on ``problem`` by pilot runs (module docstring).

    ``name`` is a registry name or an :class:`~fedviz.algorithms.spec.AlgorithmSpec` (whose
    hyperparameters are then ``hyper``; :meth:`TuneResult.apply` makes the tuned spec).
    ``hyper`` are the other hyperparameters (a value of the tuned one centres the grid);
    ``iterations`` is the length of the run to come (:func:`pilot_iterations` sets the pilots'
    length); ``seed`` the run's seed (the pilots run on :func:`pilot_seeds` of it, never on it);
    ``f_star`` the optimum's objective.  Raises :class:`ParameterError` for bad hyperparameters
    or iterations, and :class:`~fedviz.algorithms.base.StopRequested` when ``stop()`` turns true.
    """
    start = time.perf_counter()
    if isinstance(name, AlgorithmSpec):
        if hyper is not None:
            raise ParameterError("hyper", hyper, "None when tuning an AlgorithmSpec (it carries its own)")
        cls, hyper, hp = name.cls, name.values, name.hp
    else:
        cls = get_algorithm(name)
        hp = None
    hyper = dict(hyper or {})
    hp = cls.validate(hyper if hp is None else hp)  # once; each pilot checks only its own value
    if isinstance(iterations, bool) or not isinstance(iterations, Integral) or not 0 <= iterations <= 100_000:
        raise ParameterError("iterations", iterations, "integer in [0, 100000]")
    if isinstance(f_star, bool) or not isinstance(f_star, Real) or not math.isfinite(f_star):
        raise ParameterError("f_star", f_star, "a finite number (the optimum's objective)")
    if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
        raise ParameterError("seed", seed, "a non-negative integer")
    params = tunable_params(cls)
    if not params:
        return TuneResult(cls.name, None, None, hyper, "nothing to tune", (), time.perf_counter() - start, False)
    param = params[0]
    base = resolved_default(cls, problem, hp, param, seed)
    cap = tuning_cap(cls, problem, hyper, param)
    length = pilot_iterations(iterations)
    window = judged(length)
    seeds = pilot_seeds(seed)
    # The rule is the same for every algorithm of a run; the grid is the algorithm's own (its default
    # and cap), so a page can say the rule once and each grid beside its algorithm.
    grid = (f"{param} = {base:.4g} × {RATIO:g}^k" if base is not None else f"{param}: no default to centre on") \
        + (f" (at most the safe {cap:.4g}: larger only slows)" if cap is not None else "")
    as_long = " (the run's length)" if length == iterations else f" (the run's first {length})"
    head = f"lowest final f − f* (its mean over the pilot seeds) of {length}-iteration pilots{as_long} over "
    tail = (f", grown while the lowest is at an edge (at most {MAX_EXTENSIONS} times), refined × "
            f"{math.sqrt(RATIO):g}; the default kept unless a value beats it by {PREFER:g}× in that mean "
            f"and on every pilot seed; seeds {', '.join(map(str, seeds))} (not the run's {seed}), one "
            f"when the method is deterministic; diverging, oscillating or relapsing pilots excluded")
    criterion = head + grid + tail
    rule = head + f"each algorithm's grid (its default × {RATIO:g}^k, below its safe value where it has one)" + tail
    if length == 0:
        criterion = rule = "no pilot runs: the run has 0 iterations"
    if base is None or length == 0:
        return TuneResult(cls.name, param, base, hyper, criterion, (), time.perf_counter() - start, False,
                          rule=rule, grid=grid)

    pilots: dict[float, Pilot] = {}   # by grid exponent k (value = base · RATIO**k)
    curves: dict[float, list[float]] = {}  # k → mean f − f* over the seeds (clamped), at the judged iterations
    refused: set[float] = set()       # exponents outside the allowed range, or refused by the algorithm
    floor = FLOOR * max(1.0, abs(f_star))
    used = list(seeds)                # narrowed to one seed once the method is found deterministic
    per_round = [math.nan]            # rounds per iteration, from the default's first pilot
    spent = {"runs": 0, "rounds": 0}  # every pilot run, the deterministic test's included

    def one(pilot: Mapping, s: int) -> tuple[list[float], object, str]:
        """One pilot run (``pilot``: its validated hyperparameters): its objectives, last record and
        status; ParameterError when refused."""
        records = iterate(problem, cls, iterations=length, hyper=pilot, seed=s,
                          f_star=f_star, stop=stop)
        first = next(records)  # construction errors (e.g. SGD's h·λ ≥ 1) are raised here
        objectives, last = [first.objective], first
        for last in records:
            objectives.append(last.objective)
        if last.status == "stopped":
            raise StopRequested()
        spent["runs"] += 1
        spent["rounds"] += int(last.rounds)
        if last.status in ("diverged", "failed"):
            return objectives, last, "diverged"
        return objectives, last, assess(objectives, f_star).status

    def run(k: float) -> bool:
        """Run the pilot at exponent k on the pilot seeds; False when its value is not allowed."""
        if k in pilots:
            return True
        if k in refused:
            return False
        value = base * RATIO ** k
        if cap is not None and value > cap * (1 + 1e-9):
            refused.add(k)
            return False
        try:
            pilot = cls.validate({param: value}, base=hp)  # the pilot's value, checked once
            runs = [one(pilot, used[0])]
            if k == 0 and len(used) > 1:
                runs.append(one(pilot, used[1]))
                if _same_curve(runs[0][0], runs[1][0]):
                    del used[1:]   # deterministic: the seed changes nothing
                    runs.pop()
                runs += [one(pilot, s) for s in used[2:]]
            else:
                runs += [one(pilot, s) for s in used[1:]]
        except ParameterError:
            refused.add(k)
            return False
        rank = {"ok": 0, "oscillating": 1, "diverged": 2}
        status = max((r[2] for r in runs), key=lambda st: rank.get(st, 2))
        finals = [r[1].suboptimality for r in runs]
        final = sum(finals) / len(finals) if all(math.isfinite(f) for f in finals) else math.inf
        rounds = sum(int(r[1].rounds) for r in runs)
        if k == 0:
            per_round[0] = runs[0][1].rounds / max(1, runs[0][1].iteration)
        whole = [r[0] for r in runs]
        if all(len(o) == length + 1 and all(math.isfinite(f) for f in o) for o in whole):
            gaps = [[max(o[t] - f_star, floor) for t in window] for o in whole]
            curves[k] = [sum(col) / len(col) for col in zip(*gaps)]
            score = pilot_score(curves[k], floor)
            seed_scores = tuple(pilot_score(g, floor) for g in gaps)
        else:  # stopped early (diverged or failed)
            score, seed_scores = math.inf, ()
        pilots[k] = Pilot(value, final, status, score, seed_scores, rounds)
        return True

    def clearly_better(k: float) -> bool:
        """k may replace the default: the default's pilot failed, or k beats it by PREFER in score
        and has a lower score on every pilot seed."""
        default = pilots.get(0)
        if k == 0 or default is None or default.status != "ok" or 0 not in curves:
            return True
        mine = pilots[k]
        return (mine.score * PREFER <= default.score and len(mine.seed_scores) == len(default.seed_scores)
                and all(a < b for a, b in zip(mine.seed_scores, default.seed_scores)))

    def lowest() -> float | None:
        """The healthy pilot of lowest score: where the grid grows and is refined."""
        ok = [k for k, p in pilots.items() if p.status == "ok"]
        return min(ok, key=lambda k: (pilots[k].score, abs(k))) if ok else None

    def best() -> float | None:
        """The choice: the lowest score among the default and the values clearly better than it."""
        ok = [k for k, p in pilots.items() if p.status == "ok" and clearly_better(k)]
        return min(ok, key=lambda k: (pilots[k].score, abs(k))) if ok else None

    safer = safer_side(cls, param)
    for k in (0, -1, 1):  # the default first: it tells whether the method is deterministic
        run(k)
    edge = False
    for extension in range(MAX_EXTENSIONS + 1):
        k = lowest()
        tried = list(pilots)
        if not tried:
            break
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
    k = lowest()
    if k is not None:
        for j in (k - 0.5, k + 0.5):
            run(j)
    k = best()
    run_rounds = None if math.isnan(per_round[0]) else int(round(per_round[0] * iterations))
    extra = dict(rounds=spent["rounds"], seeds=tuple(used), run_rounds=run_rounds, runs=spent["runs"], rule=rule,
                 grid=grid)
    if k is None:
        return TuneResult(cls.name, param, base, hyper, criterion, _ordered(pilots),
                          time.perf_counter() - start, True, **extra)
    value = pilots[k].value
    return TuneResult(cls.name, param, value, {**hyper, param: value}, criterion, _ordered(pilots),
                      time.perf_counter() - start, edge, kept_default=k == 0, **extra)


def _ordered(pilots: Mapping[float, Pilot]) -> tuple[Pilot, ...]:
    return tuple(pilots[k] for k in sorted(pilots))
