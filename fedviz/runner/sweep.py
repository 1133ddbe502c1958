"""The stepsize sweep: each algorithm at its stepsize × a grid, keeping the best afterwards.

The paper picked FSVRG's stepsize h this way, "retrospectively" (Section 4.1).  A derived
default stepsize (None) is resolved on the problem first, so the grid is centred on the
value the algorithm would really use.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from ..algorithms import get_algorithm
from ..problems.objective import Problem

GRID = (0.25, 0.5, 1.0, 2.0, 4.0)
#: Hyperparameters treated as the stepsize, in order of preference.
STEP_NAMES = ("stepsize", "learning_rate", "lr")


def step_param(cls):
    for name in STEP_NAMES:
        for p in cls.params:
            if p.name == name and p.kind == "float":
                return p
    return None


def resolved_stepsize(cls, problem: Problem, hyper: Mapping, seed: int = 0) -> float | None:
    """The stepsize the algorithm would use: the given value, or its derived default."""
    p = step_param(cls)
    if p is None:
        return None
    if hyper.get(p.name) is not None:
        return float(hyper[p.name])
    if p.default is not None:
        return float(p.default)
    algo = cls(problem, seed=seed, **dict(hyper))
    value = getattr(algo, "h", None)
    return float(value) if value is not None else None


def sweep_variants(config, data) -> list[tuple[str, str, dict]]:
    """(label, algorithm, hyperparameters) for every algorithm × grid point.

    Algorithms without a stepsize run once, unchanged.
    """
    problem = Problem(data, config.loss, config.lam)
    out = []
    for title, name, hyper in config.labels():
        cls = get_algorithm(name)
        p = step_param(cls)
        base = resolved_stepsize(cls, problem, hyper, config.seed) if p else None
        if base is None:
            out.append((title, name, hyper))
            continue
        for factor in GRID:
            out.append((f"{title} ×{factor:g}", name, {**hyper, p.name: base * factor}))
    return out


def group_of(label: str) -> str:
    """'FSVRG ×0.5' → 'FSVRG'."""
    head, sep, tail = label.rpartition(" ×")
    return head if sep else label


def best_variants(final: Mapping[str, float]) -> dict[str, str]:
    """For each group, the label with the lowest final suboptimality (NaN/inf last)."""
    best: dict[str, tuple[float, str]] = {}
    for label, value in final.items():
        v = value if value is not None and math.isfinite(value) else math.inf
        g = group_of(label)
        if g not in best or v < best[g][0]:
            best[g] = (v, label)
    return {g: label for g, (_, label) in best.items()}


def final_suboptimality(columns: Mapping[str, Mapping[str, Sequence]]) -> dict[str, float]:
    out = {}
    for label, cols in columns.items():
        sub = np.asarray(cols.get("suboptimality", []), dtype=float)
        out[label] = float(sub[-1]) if sub.size else math.nan
    return out
