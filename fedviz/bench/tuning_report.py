"""docs/tuning.md, written by a command so that it cannot go stale: ``python -m fedviz tuning-report``.

Every algorithm of the registry runs 30 iterations on a9a and agaricus (each with its test
file), split iid and by Dirichlet(0.5) over 100 nodes, λ = 1/n, first at its default and then
at the value :func:`fedviz.runner.tune.tune` chooses; the table gives both final f − f* and
test errors, the chosen value, and what the pilots cost next to the run (runs, communication
rounds, seconds).  The closing remarks are computed from the same rows.  The primal and dual
methods of the Appendix run the squared loss (their analysed setting).  Every algorithm runs the
registry's defaults (DANE too: its exact solver, whose safeguard starts μ at L̄/1024, takes about
0.25 s an iteration on a9a with 100 nodes, where μ = 0 took 38 s for its first).
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from ..algorithms import ALGORITHMS
from ..data.build import DataSpec, build
from ..problems.objective import Problem
from ..problems.optimum import solve
from ..runner.loop import iterate
from ._common import default_data
from ..runner.tune import MAX_PILOT_ITERATIONS, PILOT_SEEDS, PREFER, TuneResult, resolved_default, tune

#: The command that writes the document (its first line says so).
COMMAND = "python -m fedviz tuning-report --data DIR > docs/tuning.md"

#: (training file, test file, partition): the document's four tables.
CASES = (("a9a", "a9a.t", "iid"), ("a9a", "a9a.t", "dirichlet:alpha=0.5"),
         ("agaricus_zero_based.train", "agaricus_zero_based.test", "iid"),
         ("agaricus_zero_based.train", "agaricus_zero_based.test", "dirichlet:alpha=0.5"))

#: Algorithms run on the squared loss (the Appendix's primal and dual methods).
SQUARED = ("primal-method", "dual-method")
#: Hyperparameters set for the report in place of the defaults (none today).
SETTINGS: dict[str, dict] = {}

HEADER = ("| algorithm | default f − f* | default test err | tuned value | pilots: runs, rounds (the run's), s "
          "| tuned f − f* | tuned test err | notes |")
RULE = "|---|---:|---:|---|---|---:|---:|---|"
NOTE_CHARS = 90


@dataclass(frozen=True)
class Row:
    """One algorithm on one case: the default run's and the tuned run's last records, and the tuning."""

    name: str
    default_sub: float
    default_err: float
    tuning: TuneResult
    tuned_sub: float
    tuned_err: float
    notes: str
    default_value: float | None = None
    #: What the test errors measure (:meth:`Problem.error_metric`): "error" (sign error rate) or "mse".
    metric: str = "error"


def algorithms() -> tuple[str, ...]:
    """Every registered algorithm, in the registry's order: a new one joins the report by itself."""
    return tuple(ALGORITHMS)


def row(problem: Problem, f_star: float, name: str, *, iterations: int = 30, seed: int = 0) -> Row:
    """Run ``name`` at its default and tuned, ``iterations`` each, on ``problem``; see :class:`Row`."""
    hyper = SETTINGS.get(name, {})
    default = list(iterate(problem, name, iterations=iterations, hyper=hyper, seed=seed, f_star=f_star))
    result = tune(problem, name, hyper, iterations=iterations, seed=seed, f_star=f_star)
    tuned = list(iterate(problem, name, iterations=iterations, hyper=result.hyper, seed=seed, f_star=f_star))
    notes = []
    for which, recs in (("default", default), ("tuned", tuned)):
        last = recs[-1]
        if last.status != "done" or last.message:
            notes.append(f"{which}: {_short(f'{last.status} {last.message}'.strip())}")
    param = result.param
    base = None if param is None else resolved_default(ALGORITHMS[name], problem, hyper, param)
    return Row(name, default[-1].suboptimality, default[-1].test_error, result, tuned[-1].suboptimality,
               tuned[-1].test_error, "; ".join(notes), base, problem.error_metric)


def _short(text: str) -> str:
    """At most NOTE_CHARS characters, cut at a word ('…' when cut); '|' would break the table."""
    text = text.replace("|", "/")
    if len(text) <= NOTE_CHARS:
        return text
    return text[:NOTE_CHARS].rsplit(" ", 1)[0] + " …"


def format_row(r: Row) -> str:
    """The table line of ``r`` (the columns of :data:`HEADER`)."""
    t = r.tuning
    value = f"{t.param} = {t.value:.6g}" if t.param is not None and t.value is not None else "nothing to tune"
    if t.param is not None and t.pilots and not t.tuned:
        value += " (default: no pilot passed)"
    elif t.param is not None and t.pilots and t.edge:
        value += " (grid edge)"
    if t.pilots:
        run = "" if t.run_rounds is None else f" ({t.run_rounds})"
        pilots = f"{t.runs}, {t.rounds}{run}, {t.seconds:.1f}"
    else:
        pilots = "0"
    return (f"| {r.name} | {r.default_sub:.3e} | {_err(r.default_err, r.metric)} | {value} | {pilots} | "
            f"{r.tuned_sub:.3e} | {_err(r.tuned_err, r.metric)} | {r.notes} |")


def _err(value: float, metric: str) -> str:
    """A test error as the report prints it: a rate in %, or a mean squared error named as such."""
    return f"{100 * value:.2f}%" if metric == "error" else f"MSE {value:.4g}"


def case_problems(data: Path, train: str, test: str, partition: str, *, nodes: int = 100, seed: int = 0):
    """The logistic and squared problems of one case, with their f*."""
    ds = build(DataSpec(source=str(data / train), test=str(data / test), partition=partition, nodes=nodes,
                        seed=seed))
    out = {}
    for loss in ("logistic", "squared"):
        problem = Problem(ds, loss, None)
        out[loss] = (problem, solve(problem).objective)
    return out


def report(data: Path, *, iterations: int = 30, nodes: int = 100, seed: int = 0,
           names: Sequence[str] | None = None, cases: Iterable[tuple[str, str, str]] = CASES,
           progress: Callable[[str], None] | None = None) -> str:
    """The whole of docs/tuning.md (Markdown)."""
    names = tuple(names or algorithms())
    start = time.perf_counter()
    tables, rows = [], {}
    for train, test, partition in cases:
        problems = case_problems(data, train, test, partition, nodes=nodes, seed=seed)
        lines = [f"### {train} (test file {test}), partition {partition}", "", HEADER, RULE]
        for name in names:
            problem, f_star = problems["squared" if name in SQUARED else "logistic"]
            r = row(problem, f_star, name, iterations=iterations, seed=seed)
            rows[(train, partition, name)] = r
            lines.append(format_row(r))
            if progress:
                progress(f"{train} {partition} {name}: default {r.default_sub:.3e}, tuned {r.tuned_sub:.3e}")
        tables.append("\n".join(lines) + "\n")
    return "\n".join([_intro(iterations, nodes, seed), *tables, _remarks(rows, iterations),
                      f"\n_Written in {time.perf_counter() - start:.0f} s (pilot seconds vary with the machine's load)._\n"])


def _intro(iterations: int, nodes: int, seed: int) -> str:
    settings = "; ".join(f"{n}: " + ", ".join(f"{k} = {v}" for k, v in s.items()) for n, s in SETTINGS.items())
    return f"""<!-- Written by `{COMMAND}`; do not edit by hand: run the command again. -->
# Tuned and default hyperparameters: how fair is the race?

Every figure below is f − f* and test error after {iterations} iterations, {nodes} nodes, λ = 1/n, seed {seed},
logistic loss (the Appendix's primal and dual methods: squared loss). Test error is the sign error rate for every
loss on ±1 labels; a mean squared error, on labels that are not ±1, would be marked "MSE". Each row is the last record of `fedviz run` at the default and with `--tune`. Set for this report in place of the registry's defaults: {settings or "nothing"}.

The whole document is the output of

```bash
{COMMAND}   # DIR: a folder with a9a, a9a.t, agaricus_zero_based.train/.test; not run by the tests: minutes
```

The tuning criterion (`fedviz.runner.tune`): pilot runs as long as the run (at most {MAX_PILOT_ITERATIONS} iterations) on a
geometric grid ×4 around the default, widened while the best sits at its edge and refined ×2, never above the safe
σ'/σ (larger only slows); pilots run on {PILOT_SEEDS} seeds derived from the run's seed and never on it (one when
the method is deterministic); a pilot's score is its final f − f*, what the run is judged on, averaged over
the seeds; pilots that diverge, oscillate or relapse are left out, and the default is kept unless a value beats it
by {PREFER:g}× in that score and on every pilot seed. "pilots" is what tuning cost: pilot runs (values × seeds),
their communication rounds (the run's own rounds in brackets; 0 for SVRG and SGD, centralized baselines that do
not communicate) and their seconds, all apart from the run's.
"""


def _remarks(rows: dict, iterations: int) -> str:
    out = ["## What the table says", ""]
    for (train, partition, name), r in rows.items():
        if name == "fsvrg" and train == "a9a":
            out.append(f"- FSVRG on a9a, {partition}: tuned f − f* {r.tuned_sub:.2e} after {iterations} iterations "
                       f"against {r.default_sub:.2e} at its default; its pilots took {r.tuning.rounds} rounds "
                       f"next to the run's {r.tuning.run_rounds}.")
    worse = [f"{name} on {train}, {partition} ({r.tuned_sub:.2e} against {r.default_sub:.2e})"
             for (train, partition, name), r in rows.items() if r.tuned_sub > r.default_sub * (1 + 1e-9)]
    if worse:
        out.append("- Tuning ends worse than the default on: " + "; ".join(worse) + ". The pilots ran on other "
                   "seeds than the run: their final f − f* is not the run's.")
    else:
        out.append("- Tuning ends no worse than the default on every row.")
    moved = sum(1 for r in rows.values() if r.tuning.tuned and r.default_value is not None
                and not math.isclose(r.tuning.value, r.default_value))
    out.append(f"- Tuning moved {moved} of the {sum(1 for r in rows.values() if r.tuning.param)} tunable rows away "
               "from the default.")
    return "\n".join(out)


def main(args) -> int:
    data = Path(args.data or default_data())
    if not data.is_dir():
        from ..errors import ParameterError
        raise ParameterError("--data", args.data, "a folder holding a9a, a9a.t and agaricus_zero_based.train/.test")
    names = args.algorithms.split(",") if args.algorithms else None
    text = report(data, iterations=args.iterations, nodes=args.nodes, seed=args.seed, names=names,
                  progress=lambda line: print(line, file=sys.stderr, flush=True))
    sys.stdout.write(text)
    return 0



__all__ = ["CASES", "COMMAND", "HEADER", "Row", "format_row", "report", "row"]
