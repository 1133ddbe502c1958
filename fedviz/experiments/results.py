"""An experiment's results read back from the history, in the shapes its figures need.

:func:`load` returns :class:`Results`: one :class:`CellResult` per stored cell (its final
f − f*, test error, rounds to reach the target ε, the stepsize it ran with) and the
aggregations a researcher publishes: per setting and line, the median and min–max band over
seeds of a curve (:meth:`Results.band`) or of a final figure (:meth:`Results.summary`).

A line with a stepsize grid (``grid`` or ``scales``) has several variants per setting; the
figures against the varied axis take each setting's best variant (lowest median final
f − f* over seeds, as the paper chose its stepsizes), :meth:`Results.best_step`, and the
stepsize-sensitivity view shows them all (:meth:`Results.sensitivity`).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from typing import Collection, Iterable, Mapping, Sequence

import numpy as np

from ..errors import ParameterError
from ..problems import metrics as pernode_metrics
from ..runner.codec import to_json
from ..runner.history.experiment_store import CellInfo, ExperimentInfo
from ..runner.history.store import RunStore
from .spec import Experiment, from_json

#: The final figures a view can show, and how each reads.
METRICS = {"suboptimality": "final f − f*", "test_error": "final test error", "rounds": "rounds to reach ε",
           "objective": "final objective"}


def per_node_title(key: str) -> str:
    """How a per-node summary (a key of :data:`fedviz.problems.metrics.KEYS`) reads as a final figure:
    "final test error per node: worst10"."""
    for m in pernode_metrics.METRICS:
        for s in m.summaries:
            if m.key(s) == key:
                return f"final {m.title[:1].lower()}{m.title[1:]}: {s}"
    raise KeyError(key)


@dataclass(frozen=True)
class CellResult:
    """One stored cell, summarised."""

    key: str
    run_id: int
    setting: tuple[int, ...]
    arm: str
    label: str
    step: float | None          # the grid value or factor (None: default or tuned)
    stepsize: float | None      # the value of the arm's varied hyperparameter it ran with, if known
    seed: int
    status: str
    suboptimality: float        # at the last iteration
    test_error: float
    objective: float
    rounds: float               # rounds to reach f − f* ≤ ε (inf: never)
    iterations: int
    worker: str
    #: The last record's per-node summaries (:data:`fedviz.problems.metrics.KEYS`; NaN where not measured).
    final: Mapping[str, float] = field(default_factory=dict, compare=False, repr=False)

    def value(self, metric: str) -> float:
        """A final figure: one of :data:`METRICS` or a per-node summary's key."""
        return self.final.get(metric, math.nan) if metric in _PER_NODE else getattr(self, metric)


@dataclass(frozen=True)
class Summary:
    """A figure over seeds: median, min, max and how many seeds."""

    median: float
    low: float
    high: float
    n: int


class Results:
    """The stored cells of one experiment, with its definition (see the module docstring)."""

    def __init__(self, info: ExperimentInfo, experiment: Experiment, cells: Sequence[CellResult], store: RunStore,
                 messages: dict[str, str] | None = None):
        self.info, self.experiment, self.cells, self.store = info, experiment, tuple(cells), store
        self.messages = dict(messages or {})  # a cell's stored message, by key (why it failed)

    # -- structure -----------------------------------------------------------------------------------
    @property
    def arms(self) -> list[str]:
        return [a.label for a in self.experiment.arms]

    @property
    def settings(self) -> list[tuple[int, ...]]:
        return self.experiment.settings

    def setting_label(self, setting: Sequence[int]) -> str:
        return self.experiment.setting_label(setting)

    def of(self, arm: str, setting: Sequence[int] | None = None, step: float | None | str = "any",
           seeds: Collection[int] | None = None) -> list[CellResult]:
        """The cells of line ``arm`` (in ``setting``; with grid value ``step`` unless 'any'; of
        ``seeds`` unless None)."""
        return [c for c in self.cells if c.arm == arm and (setting is None or c.setting == tuple(setting))
                and (step == "any" or c.step == step) and (seeds is None or c.seed in seeds)]

    def steps(self, arm: str) -> list[float | None]:
        """The grid values (or factors) of line ``arm``: [None] without a grid."""
        return sorted({c.step for c in self.of(arm)}, key=lambda s: -1 if s is None else s) or [None]

    # -- figures ----------------------------------------------------------------------------------------
    def summary(self, arm: str, setting: Sequence[int], metric: str = "suboptimality",
                step: float | None | str = "best", seeds: Collection[int] | None = None) -> Summary | None:
        """``metric`` over the seeds of ``arm`` in ``setting`` (its best grid value by default; only
        ``seeds`` unless None, and the best value is then chosen on those seeds too: a verdict
        chooses with :meth:`best_step` on other seeds and passes the value as ``step``)."""
        _check_metric(metric)
        if step == "best":
            step = self.best_step(arm, setting, seeds)
        values = [c.value(metric) for c in self.of(arm, setting, step, seeds)
                  if c.status in ("done", "diverged")]
        return summarise(values)

    def best_step(self, arm: str, setting: Sequence[int], seeds: Collection[int] | None = None) -> float | None:
        """The grid value of ``arm`` with the lowest median final f − f* in ``setting`` over ``seeds``
        (every seed when None; None: no grid)."""
        steps = self.steps(arm)
        if steps == [None]:
            return None
        scored = []
        for s in steps:
            sm = summarise([c.suboptimality for c in self.of(arm, setting, s, seeds)
                            if c.status in ("done", "diverged")])
            if sm is not None:
                scored.append((_rank(sm.median), s))
        # By score alone: on a tie the first value wins (comparing the values too would compare a
        # grid value with None, a TypeError, were an arm's cells ever of two kinds).
        return min(scored, key=lambda x: x[0])[1] if scored else steps[0]

    def band(self, arm: str, setting: Sequence[int], metric: str = "suboptimality",
             step: float | None | str = "best") -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """(iterations, median, min, max) of ``metric`` over seeds, iteration by iteration (over the
        seeds that reached each iteration)."""
        if step == "best":
            step = self.best_step(arm, setting)
        cells = self.of(arm, setting, step)
        if not cells:
            return None
        cols = [self.store.columns(c.run_id) for c in cells]
        length = max(len(c["iteration"]) for c in cols)
        if length == 0:
            return None
        table = np.full((len(cols), length), np.nan)
        for i, c in enumerate(cols):
            table[i, :len(c[metric])] = c[metric]
        it = np.arange(length, dtype=float)
        with np.errstate(all="ignore"):
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # an iteration no seed reached: NaN, as meant
                return it, np.nanmedian(table, axis=0), np.nanmin(table, axis=0), np.nanmax(table, axis=0)

    def sensitivity(self, arm: str, setting: Sequence[int], metric: str = "suboptimality") -> list[tuple[float, Summary]]:
        """(grid value, summary over seeds) for each grid value of ``arm`` in ``setting``."""
        out = []
        for s in self.steps(arm):
            if s is None:
                continue
            sm = self.summary(arm, setting, metric, step=s)
            if sm is not None:
                out.append((s, sm))
        return out

    def failures(self) -> list[tuple[int, str]]:
        """The distinct reasons the failed cells give, with their counts (:func:`failure_reasons`)."""
        return failure_reasons(self.messages.get(c.key) for c in self.cells if c.status == "failed")

    def tuned(self) -> list[CellResult]:
        """The cells whose stepsize was chosen by tuning (their label names the value)."""
        modes = {a.label: a.step for a in self.experiment.arms}
        return [c for c in self.cells if modes.get(c.arm) == "tuned"]

    # -- export -------------------------------------------------------------------------------------------
    def rows(self) -> list[dict]:
        """One row per cell: its setting in words and values, its line, seed and final figures."""
        out = []
        for c in self.cells:
            out.append({"experiment": self.experiment.name, "setting": self.setting_label(c.setting),
                        **{f"axis:{a.name}": a.labels[i] for a, i in zip(self.experiment.axes, c.setting)},
                        "line": c.arm, "label": c.label, "step": c.step, "stepsize": c.stepsize, "seed": c.seed,
                        "status": c.status, "iterations": c.iterations, "final_suboptimality": c.suboptimality,
                        "final_test_error": c.test_error, "final_objective": c.objective,
                        f"rounds_to_{self.experiment.target:g}": c.rounds, "run_id": c.run_id, "worker": c.worker,
                        "key": c.key})
        return out

    def to_csv(self) -> str:
        rows = self.rows()
        buf = io.StringIO()
        if rows:
            w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
            w.writeheader()
            for r in rows:
                w.writerow({k: ("" if v is None else v) for k, v in r.items()})
        return buf.getvalue()

    def to_json(self) -> str:
        """The definition, the state and every cell's row, with each cell's records by column."""
        cells = []
        for row, c in zip(self.rows(), self.cells):
            cols = self.store.columns(c.run_id)
            cells.append({**row, "records": {k: v.tolist() for k, v in cols.items()}})
        return to_json({"format": "fedviz-experiment", "version": 1, "experiment": self.experiment.as_json(),
                        "status": self.info.status, "message": self.info.message, "cells": cells}, indent=1)


def load(store: RunStore, name_or_id: str | int) -> Results:
    """The results of the stored experiment ``name_or_id``: its cells that belong to its grid (a
    history written before experiments were identified by their grid may hold other cells under the
    name; they are left out, so the counts never exceed the grid)."""
    info = store.get_experiment(name_or_id)
    if info is None:
        raise ParameterError("experiment", name_or_id, "the name of a stored experiment")
    experiment = from_json(info.spec)
    params = {a.label: a.param for a in experiment.arms}
    # One stored cell per place of the grid (line, setting, grid value, seed): the one whose key is
    # the grid's own there, else the last stored.
    grid = {(c.arm, c.setting, c.step, c.seed): c.key for c in experiment.cells()}
    chosen: dict[tuple, CellInfo] = {}
    for c in store.experiment_cells(info.id):
        place = (c.arm, tuple(c.setting), c.step, c.seed)
        if place in grid and (place not in chosen or chosen[place].key != grid[place]):
            chosen[place] = c
    cells, messages = [], {}
    for c in sorted(chosen.values(), key=lambda c: (c.finished, c.run_id)):
        cols = store.columns(c.run_id)
        cells.append(_summarise(c, cols, experiment.target, params.get(c.arm)))
        messages[c.key] = c.message
    return Results(info, experiment, cells, store, messages)


def _summarise(c: CellInfo, cols: dict, target: float, param: str | None) -> CellResult:
    sub = cols["suboptimality"]
    last = len(sub) - 1
    hit = np.flatnonzero(sub <= target)
    rounds = float(cols["rounds"][hit[0]]) if hit.size else math.inf
    stepsize = c.hyper.get(param) if param else None
    return CellResult(c.key, c.run_id, c.setting, c.arm, c.label, c.step,
                      float(stepsize) if isinstance(stepsize, (int, float)) else None, c.seed, c.status,
                      float(sub[last]) if last >= 0 else math.nan,
                      float(cols["test_error"][last]) if last >= 0 else math.nan,
                      float(cols["objective"][last]) if last >= 0 else math.nan,
                      rounds, int(cols["iteration"][last]) if last >= 0 else 0, c.worker,
                      {k: float(cols[k][last]) if last >= 0 else math.nan for k in pernode_metrics.KEYS})


#: The longest failure reason shown (characters): a traceback's first line says enough.
REASON_WIDTH = 300


def failure_reasons(messages: Iterable[str | None]) -> list[tuple[int, str]]:
    """The distinct reasons among failed cells' ``messages``, most frequent first, with their counts
    (each on one line, cut at :data:`REASON_WIDTH` characters)."""
    counts: dict[str, int] = {}
    for m in messages:
        text = " ".join((m or "no reason was recorded").split())
        if len(text) > REASON_WIDTH:
            text = text[:REASON_WIDTH - 1] + "…"
        counts[text] = counts.get(text, 0) + 1
    return sorted(((n, text) for text, n in counts.items()), key=lambda x: (-x[0], x[1]))


def failure_text(messages: Sequence[str | None], shown: int = 3) -> str:
    """One sentence for the page, the report and the log: "10 cells failed: 'nodes …' ×10" ('' if
    none), the ``shown`` most frequent distinct reasons with their counts."""
    if not messages:
        return ""
    found = failure_reasons(messages)
    head = f"{len(messages)} cell{'s' if len(messages) != 1 else ''} failed: "
    text = "; ".join(f"'{r}' ×{n}" for n, r in found[:shown])
    rest = found[shown:]
    if rest:
        text += f"; and {len(rest)} other reason{'s' if len(rest) != 1 else ''} over {sum(n for n, _ in rest)} cells"
    return head + text


def summarise(values: Iterable[float]) -> Summary | None:
    """Median, min and max of ``values`` (NaN left out; inf kept: 'never reached' sorts last)."""
    xs = np.array([v for v in values if not (isinstance(v, float) and math.isnan(v))], dtype=float)
    if xs.size == 0:
        return None
    return Summary(float(np.median(xs)), float(xs.min()), float(xs.max()), int(xs.size))


def _rank(x: float) -> float:
    return math.inf if math.isnan(x) else x


def _check_metric(metric: str) -> None:
    if metric not in METRICS and metric not in _PER_NODE:
        raise ParameterError("metric", metric, "one of " + ", ".join(METRICS) + ", or a per-node summary ("
                             + ", ".join(pernode_metrics.KEYS[:3]) + ", …: fedviz.problems.metrics.KEYS)")


_PER_NODE = frozenset(pernode_metrics.KEYS)


__all__ = ["CellResult", "METRICS", "REASON_WIDTH", "Results", "Summary", "failure_reasons", "failure_text", "load",
           "per_node_title", "summarise"]
