"""Warnings before a run whose first iteration will be slow.

A run draws nothing until every algorithm's first iteration ended (the worker takes one
iteration of each in turn), so an algorithm whose first iteration takes minutes leaves the
page silent for minutes.  DANE's exact local solver (Algorithm 2, subproblem (10), solved by
Newton-CG on every node) is the one such algorithm: on google-plus-small it runs thousands of
CG iterations before its first iterate.  An algorithm that can estimate its first iteration's
work defines ``first_iteration_cost(problem, hyper)`` (multiply-adds, :meth:`DANE.first_iteration_cost
<fedviz.algorithms.dane.DANE.first_iteration_cost>`); this module turns it into seconds and a
sentence.  ``python -m fedviz.runner.slow`` measures the seconds per operation against the estimate.
"""

from __future__ import annotations

import time

from ..algorithms import get_algorithm

#: Seconds per multiply-add of DANE's exact solver, measured on the 2-core development machine
#: (``python -m fedviz.runner.slow``: 0.44–0.97 ns over runs on google-plus-small and a9a, as the
#: machine's load varied); about the slowest, so that on a shared machine the estimate errs long.
SECONDS_PER_OP = 1.0e-9
#: A first iteration estimated longer than this is warned about before Run: a click otherwise
#: answers within about 3 s (the first curve points of FSVRG, GD and CoCoA+ on google-plus-small).
SLOW_SECONDS = 3.0


def first_iteration_seconds(problem, spec) -> tuple[float, dict] | None:
    """(estimated seconds, the cost estimate) of ``spec``'s first iteration on ``problem``, or None
    when its algorithm makes no estimate."""
    cls = spec.impl or get_algorithm(spec.name)
    estimate = getattr(cls, "first_iteration_cost", None)
    if estimate is None:
        return None
    cost = estimate(problem, dict(spec.hyper))
    return cost["ops"] * SECONDS_PER_OP, cost


def slow_run_warnings(problem, specs, *, limit: float = SLOW_SECONDS) -> list[str]:
    """A sentence for each algorithm whose first iteration is estimated above ``limit`` seconds."""
    out = []
    for spec in specs:
        found = first_iteration_seconds(problem, spec)
        if found is None or found[0] <= limit:
            continue
        seconds, cost = found
        label = spec.label or get_algorithm(spec.name).title
        how = (f"about {cost['cg_iterations']:,} CG iterations of its exact Newton-CG local solver × "
               f"{cost['ops_per_cg'] / 1e6:.1f} M operations each" if cost["solver"] == "exact"
               else f"{cost['ops'] / 1e6:.0f} M operations")
        fix = " The 'svrg' local solver or a larger μ is much faster." if cost["solver"] == "exact" else ""
        out.append(f"{label}'s first iteration will take about {_duration(seconds)} here (estimated from the data's "
                   f"size: {how}, at {SECONDS_PER_OP * 1e9:.1f} ns each); no curve is drawn until it ends.{fix}")
    return out


def count_cg(work) -> int:
    """How many CG iterations DANE's exact solver makes while ``work()`` runs (one call of its
    per-iteration update kernel each): the count its estimate is checked against."""
    from ..algorithms import dane

    calls = [0]
    update = dane._cg_update

    def counted(*args):
        calls[0] += 1
        return update(*args)

    dane._cg_update = counted
    try:
        work()
    finally:
        dane._cg_update = update
    return calls[0]


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} minutes"


def benchmark(sources=("preset:google-plus-small", "tests/data/a9a")) -> list[dict]:
    """Measured against estimated: DANE's default first iteration on each source (seconds per op)."""
    from ..algorithms.spec import AlgorithmSpec
    from ..data.build import DataSpec
    from . import cache
    from .loop import iterate

    rows = []
    for source in sources:
        problem = cache.problem(DataSpec(source))
        spec = AlgorithmSpec("dane")
        seconds, cost = first_iteration_seconds(problem, spec)
        for _ in iterate(problem, "dane", iterations=0, f_star=0.0):  # set up outside the timing
            pass
        counted = count_cg(lambda: [None for _ in iterate(problem, "dane", iterations=1, f_star=0.0)])
        t0 = time.perf_counter()
        for _ in iterate(problem, "dane", iterations=1, f_star=0.0):
            pass
        took = time.perf_counter() - t0
        rows.append({"source": source, "estimated_s": round(seconds, 2), "measured_s": round(took, 2),
                     "ns_per_op": round(1e9 * took / (counted * cost["ops_per_cg"]), 2),
                     "cg_counted": counted, **cost})
    return rows


if __name__ == "__main__":
    for row in benchmark():
        print(row)
