"""The stepsize sweep: each algorithm at its step × a grid, keeping the best afterwards.

The paper picked FSVRG's stepsize h this way, "retrospectively" (Section 4.1).  The
swept hyperparameter is the one :func:`fedviz.runner.tune.tunable_params` names (a step,
or CoCoA's σ'); a derived default (None) is resolved on the problem first
(:meth:`~fedviz.algorithms.base.Algorithm.derived_defaults`, cached with the problem; no
algorithm is built), so the grid is centred on the value the algorithm would really use.

Keeping "the lowest final f − f*" alone rewards luck: GD beyond its stable 2/L zig-zags,
and its last value may happen to be low.  :func:`sweep_outcome` therefore excludes
variants whose whole curve :func:`fedviz.runner.health.assess` calls diverged or
oscillating, and says when the winner sits at the grid's edge (a better value may lie
beyond).  Groups come from the variants' :attr:`AlgorithmSpec.group` (through
:attr:`SweepPlan.groups`), never from parsing labels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Sequence

import numpy as np

from ..algorithms.spec import AlgorithmSpec
from ..problems.objective import Problem
from .health import assess
from .tune import resolved_default, tunable_params

GRID = (0.25, 0.5, 1.0, 2.0, 4.0)
#: Hyperparameters treated as the stepsize, in order of preference (kept for older callers).
STEP_NAMES = ("stepsize", "learning_rate", "lr")


def step_param(cls):
    """The hyperparameter the sweep varies (a :class:`Param`), or None."""
    names = tunable_params(cls)
    return cls.param(names[0]) if names else None


def resolved_stepsize(cls, problem: Problem, hyper: Mapping, seed: int = 0) -> float | None:
    """The swept hyperparameter's value in a run: the given value, or its derived default."""
    p = step_param(cls)
    return None if p is None else resolved_default(cls, problem, hyper, p.name, seed)


@dataclass(frozen=True)
class SweepPlan:
    """The variants to run (:class:`AlgorithmSpec`, each in its algorithm's group) and each one's
    grid factor, so nothing parses labels.

    ``variants`` is what :func:`fedviz.ui.start_run` submits.  ``factors[label]`` is the grid
    factor, None for an algorithm run once (nothing to sweep).  ``param[group]`` names the swept
    hyperparameter.  ``scales[label]`` = (hyperparameter, factor) for a variant of a derived
    value, left for the worker to resolve on the problem (``RunJob.scales``).  :attr:`groups` is
    label → (group, factor), what :func:`sweep_outcome` takes.
    """

    variants: tuple[AlgorithmSpec, ...]
    factors: Mapping[str, float | None]
    param: dict = field(default_factory=dict)
    scales: Mapping[str, tuple[str, float]] = field(default_factory=dict)

    @property
    def groups(self) -> dict[str, tuple[str, float | None]]:
        return {s.label: (s.group, self.factors[s.label]) for s in self.variants}


def sweep_label_note(param: str, factor: float) -> str:
    """What a variant's label adds to its algorithm's: '×2' for the stepsize, 'sigma_prime ×2' else."""
    return f"×{factor:g}" if param == "stepsize" else f"{param} ×{factor:g}"


def sweep_plan(config, data=None) -> SweepPlan:
    """Every algorithm of ``config`` × :data:`GRID` (algorithms without a step run once, unchanged).

    ``data`` is the problem (preferably the shared, cached one: its derived defaults are
    cached with it) or the data set, on which the config's problem is then built.  Without
    it, a value given or a fixed default is scaled here, and a derived default is left to the
    worker (:attr:`SweepPlan.scales`), which knows it once it has built the problem.
    """
    problem = None if data is None else data if isinstance(data, Problem) else Problem(data, config.loss, config.lam)
    variants, factors, params, scales = [], {}, {}, {}
    for spec in config.specs():
        p = step_param(spec.cls)
        if p is None:
            variants.append(spec)
            factors[spec.label] = None
            continue
        known = spec.values.get(p.name, p.default)
        base = known if known is not None or problem is None else \
            resolved_default(spec.cls, problem, spec.values, p.name)
        if base is None and problem is not None:  # the algorithm derives nothing to scale
            variants.append(spec)
            factors[spec.label] = None
            continue
        params[spec.group] = p.name
        for factor in GRID:
            note = sweep_label_note(p.name, factor)
            if base is None:
                variant = spec.with_hyper({}, note=note)
                scales[variant.label] = (p.name, factor)
            else:
                variant = spec.with_hyper({p.name: base * factor}, note=note)
            variants.append(variant)
            factors[variant.label] = factor
    return SweepPlan(tuple(variants), MappingProxyType(factors), params, MappingProxyType(scales))


def sweep_variants(config, data) -> tuple[AlgorithmSpec, ...]:
    """Every algorithm × grid point as specs (:func:`sweep_plan`'s variants)."""
    return sweep_plan(config, data).variants


@dataclass(frozen=True)
class GroupOutcome:
    """The sweep's verdict for one algorithm.

    ``best``: the kept label (None when every variant was excluded); ``edge``: the best
    factor is the grid's smallest or largest; ``note``: a sentence for the UI ("" when
    there is nothing to say); ``excluded``: label → health's reason.
    """

    best: str | None
    factor: float | None
    edge: bool
    note: str
    excluded: dict


def sweep_outcome(columns: Mapping[str, Mapping[str, Sequence]],
                  groups: Mapping[str, tuple[str, float | None]]) -> dict[str, GroupOutcome]:
    """Per group: the healthy variant with the lowest final f − f*, whether it is at the grid's edge,
    and why variants were excluded (``columns``: label → the run's columns, with 'objective' and
    'suboptimality'; ``groups``: :attr:`SweepPlan.groups`)."""
    members: dict[str, list[str]] = {}
    for label in columns:
        if label in groups:
            members.setdefault(groups[label][0], []).append(label)
    out = {}
    for group, labels in members.items():
        excluded, finals = {}, {}
        for label in labels:
            cols = columns[label]
            objective = [float(v) for v in cols.get("objective", [])]
            sub = np.asarray(cols.get("suboptimality", []), dtype=float)
            f_star = objective[0] - sub[0] if sub.size and objective else None
            verdict = assess(objective, f_star if f_star is not None and math.isfinite(f_star) else None)
            if not verdict.ok:
                excluded[label] = f"{verdict.status}: {verdict.reason}"
                continue
            final = float(sub[-1]) if sub.size else math.nan
            finals[label] = final if math.isfinite(final) else math.inf
        factors = [groups[label][1] for label in labels if groups[label][1] is not None]
        if not finals:
            out[group] = GroupOutcome(None, None, False, "every variant diverged or oscillated", excluded)
            continue
        best = min(finals, key=lambda label: (finals[label], abs(math.log(groups[label][1] or 1.0))))
        factor = groups[best][1]
        edge = factor is not None and len(factors) > 1 and factor in (min(factors), max(factors))
        note = ""
        if edge:
            side = "largest" if factor == max(factors) else "smallest"
            note = f"the best is the grid's {side} factor ×{factor:g}: a value beyond it may be better"
        out[group] = GroupOutcome(best, factor, edge, note, excluded)
    return out


def best_variants(final: Mapping[str, float], groups: Mapping[str, tuple]) -> dict[str, str]:
    """For each group, the label with the lowest final suboptimality (NaN/inf last).

    Final values only: no health check (use :func:`sweep_outcome`).  ``groups`` as in
    :attr:`SweepPlan.groups`; a label it does not name is a group of its own.
    """
    best: dict[str, tuple[float, str]] = {}
    for label, value in final.items():
        v = value if value is not None and math.isfinite(value) else math.inf
        g = groups[label][0] if label in groups else label
        if g not in best or v < best[g][0]:
            best[g] = (v, label)
    return {g: label for g, (_, label) in best.items()}


def final_suboptimality(columns: Mapping[str, Mapping[str, Sequence]]) -> dict[str, float]:
    out = {}
    for label, cols in columns.items():
        sub = np.asarray(cols.get("suboptimality", []), dtype=float)
        out[label] = float(sub[-1]) if sub.size else math.nan
    return out
