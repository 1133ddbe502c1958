"""The efficiency paradigm of the paper's Section 2.3.1, eq. (3): TIME = I(ε) × (c + T_A(ε)).

Which algorithm is fastest depends on the machine it runs on: with c the cost of one round of
communication, an algorithm of many cheap rounds wins in a data centre (c ≪ T_A) and one of few
expensive rounds wins over phones on a slow network (c ≫ T_A).  This module reads both figures off
runs that ran (the run history's records) and finds, exactly, the costs c where the winner changes.

- I(ε) counts communication *rounds* up to the first record with f(w) − f* ≤ ε (an FSVRG iteration is
  two rounds, Algorithm 4), so that c is the cost of one round as in eq. (3);
- T_A(ε) is the computation of a round, counted as *work*, not read off a clock: the examples the
  average participating node processes up to that record (every gradient of one example, local
  step or product of a local solver counts one; the records' ``grad_evals``), divided by I(ε), times
  one example's cost :attr:`Paradigm.example_seconds`.  The nodes of a round work in parallel, so the
  round takes the time of a node's share, not of the whole: an iteration of Δr rounds in which Δv
  vectors went up and Δg examples were processed gives each of its Δv/Δr nodes Δg·Δr/Δv examples.
  One example's cost is one number for all the runs compared (this server's average over them), so
  who wins where depends on the work alone; a loaded machine moves the seconds, never the order.
  (The paper's Section 2.3.1 lets T_A be "empirically observed" or known "how the time needed per
  iteration varies between different algorithms": the work is the second.)
- TIME(c) = I(ε) c + I(ε) T_A(ε) is then a line in c.

Two lines I_a (c + T_a) and I_b (c + T_b) meet at c = (I_b T_b − I_a T_a) / (I_a − I_b), the only
crossover, which counts when it is positive.  The winners over a range of c are the lower envelope
of the lines (:func:`paradigm`).

Only federated methods are ranked.  Eq. (3) is the paper's *distributed* measure: c is "the time
needed for communication during a single iteration" of an algorithm whose data are on many nodes
(Section 2.3.1), and the distributed setting is the one where "there is no single processing unit
that would have direct access to all the data" (Section 2.3).  A centralised method (SGD, SVRG)
runs on one machine holding every example: it has no round to pay c for, and its cost is eq. (2),
TIME = I × T_A.  Ranking it against eq. (3)'s lines would compare a setting federated optimization
does not have; it is kept as a labelled reference (a flat line: its computation, whatever c is).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from ..errors import FedvizError, ParameterError

#: The round costs drawn when the data ask for nothing wider: from a fast data-centre network
#: (0.1 ms) to phones on a slow network (1,000 s, a round that waits for devices to be idle and
#: charging).  The range is widened to two decades either side of the measured T_A.
C_RANGE = (1e-4, 1e3)

#: The accuracies ε offered: these × 10^k (the E12 series, twelve a decade: a target near every curve).
MANTISSAS = (1, 1.2, 1.5, 1.8, 2.2, 2.7, 3.3, 3.9, 4.7, 5.6, 6.8, 8.2)


@dataclass(frozen=True)
class Efficiency:
    """One run's two figures of eq. (3) at accuracy ε.

    Attributes
    ----------
    label, algorithm : the run's label and its algorithm's registry name
    reached : bool         whether some record has f(w) − f* ≤ ε
    rounds : int           I(ε), communication rounds up to that record (0 if not reached)
    iterations : int       outer iterations up to it
    work : float           examples the average participating node processed up to it (a centralised
                           method: all its examples, on its one machine)
    seconds : float        the computation up to it: work × one example's cost
    compute : float        T_A(ε) = seconds / rounds (NaN for 0 rounds or not reached)
    central : bool         a centralised method: eq. (2)'s TIME = its computation, no c; never ranked
    """

    label: str
    algorithm: str
    reached: bool
    rounds: int
    iterations: int
    work: float
    seconds: float
    compute: float
    central: bool = False

    def time(self, c) -> np.ndarray | float:
        """TIME = I(ε) × (c + T_A(ε)) (eq. (3)); +inf where ε was not reached; for a centralised
        method eq. (2)'s I × T_A, its computation, the same at every c (it has no rounds)."""
        c = np.asarray(c, dtype=float)
        if not self.reached:
            return np.full(c.shape, math.inf) if c.shape else math.inf
        if self.central:
            return np.full(c.shape, self.seconds) if c.shape else self.seconds
        out = self.rounds * c + self.seconds  # = I (c + T_A), exact also for I = 0
        return out if c.shape else float(out)


@dataclass(frozen=True)
class Crossover:
    """Where the TIME lines of two runs meet: below ``c`` one of them is faster, above it the other."""

    c: float
    faster_below: str
    faster_above: str
    time: float          #: TIME at c (the same for both)


@dataclass(frozen=True)
class Regime:
    """A range of round costs [c_from, c_to] over which one run is fastest."""

    label: str
    c_from: float
    c_to: float


@dataclass(frozen=True)
class Paradigm:
    """Every run's I(ε) and T_A(ε), the crossovers of their lines and who wins where.

    ``crossovers`` are the pairwise meetings inside ``c_range``; ``switches`` the ones on the lower
    envelope (where the fastest run changes), in increasing c; ``regimes`` the envelope's pieces.
    """

    epsilon: float
    entries: tuple[Efficiency, ...]
    c_range: tuple[float, float]
    crossovers: tuple[Crossover, ...]
    switches: tuple[Crossover, ...]
    regimes: tuple[Regime, ...]
    #: One example's cost (seconds), the unit of every run's T_A (:func:`example_seconds`).
    example_seconds: float = math.nan

    def entry(self, label: str) -> Efficiency:
        for e in self.entries:
            if e.label == label:
                return e
        raise KeyError(label)

    @property
    def ranked(self) -> tuple[Efficiency, ...]:
        """The federated runs: the ones eq. (3) ranks."""
        return tuple(e for e in self.entries if not e.central)

    @property
    def references(self) -> tuple[Efficiency, ...]:
        """The centralised runs: drawn for reference, never ranked."""
        return tuple(e for e in self.entries if e.central)

    def winner(self, c: float) -> str | None:
        """The fastest federated run at round cost c (None if none reached ε)."""
        best, label = math.inf, None
        for e in self.ranked:
            t = e.time(c)
            if t < best:
                best, label = t, e.label
        return label

    def describe(self) -> str:
        """Who wins where, in one sentence (among the federated runs), and which runs are references."""
        return self._ranking() + self._reference_note()

    def _ranking(self) -> str:
        if not self.regimes:
            return f"No {'federated ' if self.references else ''}run reached f − f* ≤ {self.epsilon:.3g}."
        if len(self.regimes) == 1:
            return (f"{self.regimes[0].label} is fastest to f − f* ≤ {self.epsilon:.3g} at every round cost "
                    f"from {seconds_text(self.c_range[0])} to {seconds_text(self.c_range[1])}.")
        parts = [f"{self.regimes[0].label} is fastest below c = {seconds_text(self.switches[0].c)}"]
        for r, s in zip(self.regimes[1:-1], self.switches[1:]):
            parts.append(f"{r.label} up to {seconds_text(s.c)}")
        parts.append(f"{self.regimes[-1].label} above")
        return f"To f − f* ≤ {self.epsilon:.3g}: " + ", ".join(parts) + "."

    def _reference_note(self) -> str:
        refs = [e.label for e in self.references]
        if not refs:
            return ""
        names = ", ".join(refs)
        verb = "is" if len(refs) == 1 else "are"
        return (f" {names} {verb} centralised, drawn for reference and not ranked: all the data on one machine, "
                "no round to pay c for (eq. (2), Section 2.3.1).")


def seconds_text(s: float) -> str:
    """3e-8 → '30 ns', 0.00012 → '120 µs', 0.5 → '500 ms', 3 → '3 s', 4000 → '4,000 s'."""
    if not math.isfinite(s):
        return "∞"
    if s < 1e-6:
        return f"{s * 1e9:.3g} ns"
    if s < 1e-3:
        return f"{s * 1e6:.3g} µs"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    return f"{s:,.0f} s" if s >= 1000 else f"{s:.3g} s"


def work_text(e: Efficiency) -> str:
    """An entry's work per round, for a table: examples per node per round ('—' where ε was not reached
    or no round was needed; a centralised run's whole work, on its one machine)."""
    if not e.reached or not math.isfinite(e.work):
        return "—"
    if e.central:
        return f"{e.work:,.0f} in all, one machine"
    return f"{e.work / e.rounds:,.0f}" if e.rounds else "—"


def work_caption(p: "Paradigm") -> str:
    """What T_A is made of, with this view's cost of an example."""
    each = seconds_text(p.example_seconds) if math.isfinite(p.example_seconds) else "an unknown time"
    return ("T_A counts work, not the clock: the examples the average node taking part processes in a round "
            "(each gradient of one example, local step or product of a local solver counts one), at "
            f"{each} an example, this server's average over these runs. Who wins where follows from the work "
            "alone; on a device k times slower every crossover moves to k times the c.")


def is_central(algorithm: str) -> bool:
    """Whether the registry's ``algorithm`` is a centralised method (its class says ``federated =
    False``); an unknown name counts as federated (a run of an algorithm since removed)."""
    from ..algorithms import ALGORITHMS

    cls = ALGORITHMS.get(algorithm)
    return cls is not None and not cls.federated


def node_work(cols: Mapping[str, Sequence], *, central: bool = False) -> np.ndarray:
    """At each record, the examples the average participating node has processed since the start.

    Over the interval before a record (one iteration: Δr rounds, Δv vectors sent up, Δg examples
    processed) Δv/Δr nodes took part in each round and shared the Δg between them, Δg·Δr/Δv each; an
    interval without a vector sent up counts its Δg whole.  A centralised method (``central``) has one
    machine: its work is every example it processed (``grad_evals`` itself)."""
    g = np.asarray(cols["grad_evals"], dtype=float)
    if central:
        return g
    dg = np.diff(g, prepend=0.0)
    dr = np.diff(np.asarray(cols["rounds"], dtype=float), prepend=0.0)
    dv = np.diff(np.asarray(cols["vectors_up"], dtype=float), prepend=0.0)
    share = np.where(dv > 0, dg * dr / np.where(dv > 0, dv, 1.0), dg)
    return np.cumsum(share)


def example_seconds(runs: Mapping[str, Mapping[str, Sequence]]) -> float:
    """One example's cost on this server, the same for every run compared: all the runs' wall seconds
    over all the examples they processed (their last records).  NaN when no run processed any."""
    seconds = examples = 0.0
    for cols in runs.values():
        s, g = np.asarray(cols["seconds"], dtype=float), np.asarray(cols["grad_evals"], dtype=float)
        if s.size and g.size and math.isfinite(s[-1]) and g[-1] > 0:
            seconds, examples = seconds + float(s[-1]), examples + float(g[-1])
    return seconds / examples if examples > 0 and seconds > 0 else math.nan


def efficiency(label: str, cols: Mapping[str, Sequence], epsilon: float, *, algorithm: str = "",
               per_example: float | None = None) -> Efficiency:
    """I(ε) and T_A(ε) of one run from its record columns (``rounds``, ``suboptimality``, ``grad_evals``,
    ``vectors_up``, ``seconds``, ``iteration``: :meth:`RunStore.columns
    <fedviz.runner.history.store.RunStore.columns>`): T_A from the work (:func:`node_work`) at
    ``per_example`` seconds an example (None: :func:`example_seconds` of this run alone); a centralised
    ``algorithm`` is marked (:attr:`Efficiency.central`)."""
    _check_epsilon(epsilon)
    central = is_central(algorithm)
    sub = np.asarray(cols["suboptimality"], dtype=float)
    hit = np.flatnonzero(np.isfinite(sub) & (sub <= epsilon))
    if hit.size == 0:
        return Efficiency(label, algorithm, False, 0, 0, math.nan, math.nan, math.nan, central)
    i = int(hit[0])
    t = example_seconds({label: cols}) if per_example is None else float(per_example)
    rounds = int(np.asarray(cols["rounds"])[i])
    work = float(node_work(cols, central=central)[i])
    seconds = work * t if work > 0 else 0.0  # no work yet (the start): no time, whatever t is
    iterations = int(np.asarray(cols["iteration"])[i]) if "iteration" in cols else i
    compute = seconds / rounds if rounds > 0 else math.nan
    return Efficiency(label, algorithm, True, rounds, iterations, work, seconds, compute, central)


def crossover(a: Efficiency, b: Efficiency) -> Crossover | None:
    """The c > 0 where I_a (c + T_a) = I_b (c + T_b), or None (parallel lines, a meeting at c ≤ 0,
    or a run that never reached ε, or a centralised run).  Exact: c = (I_b T_b − I_a T_a) / (I_a − I_b)."""
    if not (a.reached and b.reached) or a.central or b.central or a.rounds == b.rounds:
        return None
    c = (b.seconds - a.seconds) / (a.rounds - b.rounds)
    if not (c > 0 and math.isfinite(c)):
        return None
    # Below c the run with fewer rounds loses (its line is steeper only if it has more rounds).
    below, above = (a, b) if a.rounds > b.rounds else (b, a)
    return Crossover(c=c, faster_below=below.label, faster_above=above.label, time=float(a.time(c)))


def c_range_for(entries: Sequence[Efficiency]) -> tuple[float, float]:
    """:data:`C_RANGE`, widened to two decades below the smallest T_A and above the largest."""
    t = [e.compute for e in entries if e.reached and not e.central and math.isfinite(e.compute) and e.compute > 0]
    lo, hi = C_RANGE
    if t:
        lo = min(lo, 10.0 ** math.floor(math.log10(min(t)) - 2))
        hi = max(hi, 10.0 ** math.ceil(math.log10(max(t)) + 2))
    return lo, hi


def paradigm(runs: Mapping[str, Mapping[str, Sequence]], epsilon: float, *,
             algorithms: Mapping[str, str] | None = None,
             c_range: tuple[float, float] | None = None, per_example: float | None = None) -> Paradigm:
    """Eq. (3) for every run of ``runs`` (label → record columns) at accuracy ε; ``algorithms`` (label →
    registry name) marks the centralised runs, which are measured but never ranked (see the module).
    Every run's T_A is its work at one cost per example, ``per_example`` seconds (None: this server's
    average over ``runs``, :func:`example_seconds`).

    The lower envelope is found exactly: its breakpoints are among the pairwise crossovers, and
    between two consecutive candidates the fastest run is the same, so it is read at their
    geometric midpoint.  Ties (identical lines) go to the run listed first.
    """
    _check_epsilon(epsilon)
    algorithms = dict(algorithms or {})
    t = example_seconds(runs) if per_example is None else float(per_example)
    entries = tuple(efficiency(label, cols, epsilon, algorithm=algorithms.get(label, ""), per_example=t)
                    for label, cols in runs.items())
    lo, hi = c_range or c_range_for(entries)
    if not (0 < lo < hi):
        raise ParameterError("c_range", (lo, hi), "0 < low < high")
    ranked = [e for e in entries if not e.central]
    crossovers = []
    for i, a in enumerate(ranked):
        for b in ranked[i + 1:]:
            x = crossover(a, b)
            if x is not None and lo < x.c < hi:
                crossovers.append(x)
    crossovers.sort(key=lambda x: x.c)
    reached = [e for e in ranked if e.reached]
    regimes: list[Regime] = []
    switches: list[Crossover] = []
    if reached:
        cuts = [lo] + sorted({x.c for x in crossovers}) + [hi]
        result = Paradigm(epsilon, entries, (lo, hi), tuple(crossovers), (), (), t)
        for c0, c1 in zip(cuts[:-1], cuts[1:]):
            label = result.winner(math.sqrt(c0 * c1))
            if regimes and regimes[-1].label == label:
                regimes[-1] = Regime(label, regimes[-1].c_from, c1)
            else:
                if regimes:  # the envelope is continuous: the two lines meet at the cut
                    x = crossover(result.entry(regimes[-1].label), result.entry(label))
                    switches.append(x if x is not None else
                                    Crossover(c0, regimes[-1].label, label, float(result.entry(label).time(c0))))
                regimes.append(Regime(label, c0, c1))
    return Paradigm(epsilon, entries, (lo, hi), tuple(crossovers), tuple(switches), tuple(regimes), t)


def _best_and_start(runs: Mapping[str, Mapping[str, Sequence]]) -> tuple[list[float], list[float]]:
    """Each run's lowest and first finite suboptimality (runs without one left out)."""
    best, start = [], []
    for cols in runs.values():
        sub = np.asarray(cols["suboptimality"], dtype=float)
        fin = sub[np.isfinite(sub)]
        if fin.size:
            best.append(float(fin.min()))
            start.append(float(fin[0]))
    return best, start


def default_epsilon(runs: Mapping[str, Mapping[str, Sequence]], *, at_least: int = 2) -> float | None:
    """The smallest ε on the scale of :func:`epsilon_scale` that ``at_least`` runs reach (all of them if fewer), below
    their common start: the hardest target on which eq. (3) still compares two runs.  None when no
    run has a finite suboptimality after its start."""
    best, start = _best_and_start(runs)
    if not best:
        return None
    need = min(max(1, at_least), len(best))
    target = sorted(best)[need - 1]          # the need-th best run's best value
    for eps in epsilon_scale(max(target, 1e-14), max(start)):
        if eps >= target:
            return eps
    return target


def suggested_epsilon(runs: Mapping[str, Mapping[str, Sequence]], *,
                      algorithms: Mapping[str, str] | None = None) -> float | None:
    """The ε a view opens at: the smallest of :func:`epsilon_choices` at which the fastest federated run
    changes with c (where eq. (3) has something to teach), else :func:`default_epsilon` of the federated
    runs (``algorithms``: label → registry name; the centralised runs are not ranked)."""
    algorithms = dict(algorithms or {})
    ranked = {k: v for k, v in runs.items() if not is_central(algorithms.get(k, ""))} or runs
    for eps in epsilon_choices(ranked):
        p = paradigm(ranked, eps, algorithms=algorithms)
        if p.switches and sum(e.reached for e in p.entries) >= 2:
            return eps
    return default_epsilon(ranked)


def epsilon_choices(runs: Mapping[str, Mapping[str, Sequence]]) -> list[float]:
    """The values of ε (:func:`epsilon_scale`) worth asking for: from the best value any run reached up to the
    largest start (a smaller ε no run reaches, a larger one every run holds at its start)."""
    best, start = _best_and_start(runs)
    if not best:
        return []
    lo = max(min(best), 1e-14)
    return [e for e in epsilon_scale(lo, max(start)) if e >= lo and e < max(start)] or [lo]


def epsilon_scale(low: float, high: float) -> list[float]:
    """The values of :data:`MANTISSAS` × 10^k from the largest one ≤ ``low`` to the smallest one ≥ ``high``."""
    low, high = max(low, 1e-14), max(high, 1e-14)
    out = []
    for e in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1):
        for m in MANTISSAS:
            out.append(float(f"{m}e{e}"))
    keep = [v for v in out if v <= low]
    start = out.index(keep[-1]) if keep else 0
    stop = next((i for i, v in enumerate(out) if v >= high), len(out) - 1)
    return out[start:stop + 1]


def _check_epsilon(epsilon: float) -> None:
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise ParameterError("epsilon", epsilon, "a number > 0 (the suboptimality f − f* to reach)")


# -- the run history -----------------------------------------------------------------------------
@dataclass(frozen=True)
class RunGroup:
    """The runs one Run click started (one ``group_id``), all on one problem: what eq. (3) compares."""

    group_id: str
    created: str
    description: str
    run_ids: tuple[int, ...]
    labels: tuple[str, ...]
    algorithms: tuple[str, ...]
    #: The settings the group was started with (its first run's stored config).
    config: Mapping = field(default_factory=dict, compare=False, repr=False)

    def title(self) -> str:
        when = self.created[:16].replace("T", " ")
        return f"{when} · {', '.join(self.labels)} · {self.description}"


def history_groups(store, *, limit: int = 500, visible_to: str | None = None) -> list[RunGroup]:
    """The groups of the history that eq. (3) can compare, newest first: at least two finished runs
    with a known f* (so f − f* is measured) and records past the start.  ``visible_to``: a browser
    session, to keep to the runs that visitor may see (:meth:`RunStore.list_runs`)."""
    from ..runner.history.describe import describe_run

    by_group: dict[str, list] = {}
    for r in store.list_runs(limit=limit, visible_to=visible_to):
        if r.active or r.n_records < 2 or not math.isfinite(r.f_star) or r.status == "failed":
            continue
        by_group.setdefault(r.group_id, []).append(r)
    groups = []
    for gid, runs in by_group.items():
        runs.sort(key=lambda r: r.id)
        if len(runs) < 2 or len({r.dataset_fingerprint for r in runs}) != 1:
            continue
        groups.append(RunGroup(
            group_id=gid, created=runs[0].created,
            description=describe_run({k: v for k, v in runs[0].config.items() if k != "algorithms"}),
            run_ids=tuple(r.id for r in runs), labels=tuple(r.label for r in runs),
            algorithms=tuple(r.algorithm for r in runs), config=runs[0].config))
    groups.sort(key=lambda g: max(g.run_ids), reverse=True)
    return groups


def setup_key(config: Mapping) -> str:
    """A stored config's identity: its content as canonical JSON, without what a run adds to it after
    the start (``tuning``: how tuning chose, written by the worker)."""
    return json.dumps({k: v for k, v in dict(config).items() if k != "tuning"}, sort_keys=True, default=str)


def setup_group(groups: Sequence[RunGroup], config) -> RunGroup | None:
    """The newest group of ``groups`` (newest first, :func:`history_groups`) started with exactly
    ``config`` (a :class:`~fedviz.runner.config.RunConfig`): a lesson's own runs, identified by the
    content of their settings, never merely the newest group."""
    key = setup_key(json.loads(json.dumps(config.as_json(), default=str)))
    return next((g for g in groups if setup_key(g.config) == key), None)


def group_runs(store, group: RunGroup) -> dict[str, dict[str, np.ndarray]]:
    """The record columns of each run of ``group``, by label (labels made unique with the run id)."""
    out = {}
    for run_id, label in zip(group.run_ids, group.labels):
        key = label if label not in out else f"{label} #{run_id}"
        out[key] = store.columns(run_id)
    if not out:
        raise FedvizError("the group has no runs")
    return out


#: The federated methods the page runs when the settings in force name fewer than two: the paper's
#: three of Figure 2 (FSVRG, GD, CoCoA+) and FedAvg.
DEFAULT_METHODS = ("fsvrg", "gd", "cocoa-plus", "fedavg")


def page_setup(config, multiclass: bool = False):
    """The run the Efficiency page compares: the settings in force (a :class:`RunConfig`) as data of
    ``multiclass`` take them (:meth:`RunConfig.for_data`: softmax and the algorithms that take it, issue 22)
    when they name at least two federated methods, else the same settings with :data:`DEFAULT_METHODS`
    (those that take the loss: CoCoA+ is left out on softmax)."""
    from dataclasses import replace

    from ..algorithms import ALGORITHMS
    from ..problems.losses import loss_for

    fitted, _ = config.for_data(multiclass)
    if fitted is not None and sum(not is_central(n) for n, _ in fitted.algorithms) >= 2:
        return fitted
    loss = loss_for(config.loss, multiclass)
    methods = tuple((n, ()) for n in DEFAULT_METHODS if ALGORITHMS[n].loss_refusal(loss) is None)
    return replace(config, loss=loss, algorithms=methods)
