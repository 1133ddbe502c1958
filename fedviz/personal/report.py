"""One call for personalisation (issue 23, points 3 and 5): :class:`PersonaliseConfig` → :func:`personalise`
→ :class:`PersonalReport`, on any problem.

This module owns the configuration's parameters (:data:`PARAMS`, validated by
:class:`~fedviz.params.Param`), the report and the table the command line prints.  The report
holds, for every method, every node's test error and own loss and their summary (the statistics
of :func:`fedviz.problems.pernode.summarize` plus ``pooled``):

``majority``   each node predicts its own majority training label (Section 4.1's per-author majority)
``global``     the global model w (w* of :func:`fedviz.problems.optimum.solve` unless one is given)
``local``      v_k = argmin F_k (Local, pFL-Bench's "Isolated")
``finetune``   m local steps from w (pFL-Bench's FedAvg-FT, "fine-tune before evaluation")
``ditto``      the exact Ditto model v_k(λ_D) (Li et al. 2021) at the λ_D of the config, or by
               default at the λ_D of the path that serves the worst 10% of nodes best
``apfl``       APFL's mixture α v_k + (1 − α) w (Deng et al. 2020) with the Local v_k

(:mod:`fedviz.personal.models` defines each.)  The λ path is exact Ditto at every λ_D of the
config's grid, from 0 (Local) to ∞ (the global model), each with its per-node errors and summary;
``best_lambda`` is the λ_D whose worst-10% mean error is lowest (ties: the smallest λ_D).  It is
chosen on the test rows, as every "best λ" of a plotted path is: an oracle choice that says how
far Ditto can go, not a tuned model.

Any problem: the data's own nodes, a partition, a file, or the held-out (unseen) nodes of a data
set, for which the caller passes the global model trained without them as ``w_star``: the
``global`` column is then how a new client is served by the federation's model, and ``finetune``
and the personalised columns what its own rows add.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from ..errors import ParameterError
from ..params import Param, param_table
from ..problems.objective import Problem
from ..problems.pernode import STATS, summarize
from .evaluate import PersonalEvaluator
from .models import Personaliser, PersonalModels, _check_lambda

#: The methods, in the order the table shows them.
METHODS = ("majority", "global", "local", "finetune", "ditto", "apfl")
#: What each method is, in the words of a table or a legend.
TITLES = {"majority": "per-node majority", "global": "global model", "local": "Local",
          "finetune": "fine-tuned", "ditto": "Ditto", "apfl": "APFL mixture"}
#: The default λ_D grid: 0 (Local), 10⁻⁵ … 10² in half decades, ∞ (the global model).
DEFAULT_LAMBDAS = (0.0,) + tuple(float(f"{10.0 ** (e / 2):.3g}") for e in range(-10, 5)) + (math.inf,)
#: Most λ_D values a path may hold: each is one exact solve per node (5,000 values ran past 90 s); the
#: default grid has 17.
MAX_LAMBDAS = 200
#: The λ_D at which the report checks that Ditto has reached the global model (F_k(v_k) − F_k(w*) is
#: of order ‖∇F_k(w*)‖²/λ_D).
LIMIT_LAMBDA = 1e10
#: The summary keys of every method: pooled, then :data:`fedviz.problems.pernode.STATS`.
SUMMARY_KEYS = ("pooled",) + STATS

PARAMS = param_table(
    Param("finetune_steps", "int", 5,
          "m, the local steps each node takes from the global model before it is evaluated "
          "(pFL-Bench's fine-tuning).  0 evaluates the global model itself.", low=0, high=100_000),
    Param("finetune_step", "float", None,
          "h, the fine-tuning step.  Default 1/L_k on node k (L_k: the smoothness of F_k), "
          "a descent step on every node.", low=0, low_open=True, log=True),
    Param("finetune_batch", "int", None,
          "Rows per fine-tuning step, drawn with replacement from the node's rows (minibatch SGD, "
          "seeded), at most the node's own number of rows.  Default: all of the node's rows (plain "
          "gradient descent).", low=1, high=1_000_000_000),
    Param("apfl_alpha", "float", 0.5,
          "α, APFL's mixing weight: the model α v_k + (1 − α) w (0: the global model, 1: Local).",
          low=0, high=1),
    Param("ditto_lambda", "float", None,
          "λ_D of the Ditto column (inf: the global model w*, Ditto's limit).  Default: the λ_D of the "
          "path whose worst-10% mean error is lowest.", low=0),
    Param("seed", "int", 0, "Seed of the fine-tuning minibatches (finetune_batch).", low=0, high=2**32 - 1),
)


@dataclass(frozen=True)
class PersonaliseConfig:
    """What :func:`personalise` computes (frozen; validated on construction).

    ``lambdas``: the λ_D grid of the Ditto path (numbers ≥ 0, ``inf`` allowed: the global model;
    sorted and deduplicated); ``methods``: the columns to compute, a subset of :data:`METHODS`
    (``majority`` and ``global`` cost nothing extra); the rest: :data:`PARAMS`.
    """

    lambdas: tuple = DEFAULT_LAMBDAS
    finetune_steps: int = 5
    finetune_step: float | None = None
    finetune_batch: int | None = None
    apfl_alpha: float = 0.5
    ditto_lambda: float | None = None
    seed: int = 0
    methods: tuple = METHODS

    def __post_init__(self):
        for name, p in PARAMS.items():
            value = getattr(self, name)
            if name == "ditto_lambda" and _is_plus_inf(value):
                # λ_D = ∞ is Ditto's limit, the global model itself (the path's last point); a
                # Param takes finite numbers only, so it is let through here.
                object.__setattr__(self, name, math.inf)
                continue
            try:
                object.__setattr__(self, name, p.validate(value))
            except ParameterError:
                if name != "ditto_lambda":
                    raise
                raise ParameterError(name, value, "a number ≥ 0, or inf (the global model)") from None
        try:
            lams = tuple(sorted({_check_lambda(x) for x in self.lambdas}))
        except (TypeError, ParameterError):
            raise ParameterError("lambdas", self.lambdas, "a list of numbers ≥ 0 (inf: the global model)") from None
        if not lams:
            raise ParameterError("lambdas", self.lambdas, "at least one number ≥ 0")
        if len(lams) > MAX_LAMBDAS:
            raise ParameterError("lambdas", f"{len(lams):,} values", f"at most {MAX_LAMBDAS} values (each is "
                                 "one exact solve per node)")
        object.__setattr__(self, "lambdas", lams)
        methods = tuple(self.methods) if not isinstance(self.methods, str) else (self.methods,)
        bad = [m for m in methods if m not in METHODS]
        if bad or not methods:
            raise ParameterError("methods", ",".join(map(str, bad or methods)), "some of " + ", ".join(METHODS))
        object.__setattr__(self, "methods", tuple(m for m in METHODS if m in methods))


@dataclass(frozen=True, eq=False)
class PersonalReport:
    """Everything :func:`personalise` measured (frozen; arrays are read-only).

    Attributes
    ----------
    config : PersonaliseConfig
    methods : tuple[str, ...]            the columns computed, in :data:`METHODS` order
    errors : {method: ndarray (K,)}      each node's test error under its own model (NaN: no test rows)
    losses : {method: ndarray (K,)}      each node's own training loss F_k (eq. (6)) under it (NaN for majority)
    summaries : {method: {key: float}}   :data:`SUMMARY_KEYS` of ``errors[method]``
    loss_summaries : {method: {key: float}}  the same of ``losses[method]`` (``pooled``: the row-weighted
                                          mean Σ (n_k/n) F_k, which for ``global`` is f(w), eq. (1))
    lambdas : ndarray (L,)               the λ_D grid, increasing (0: Local; inf: the global model)
    path_errors : ndarray (L, K)         per-node test error of exact Ditto at each λ_D
    path_losses : ndarray (L, K)         F_k of exact Ditto at each λ_D
    path_summaries : tuple of dicts      :data:`SUMMARY_KEYS` of each row of ``path_errors``
    best_lambda : float                  the λ_D whose worst-10% mean error is lowest (NaN if untested)
    ditto_lambda : float                 the λ_D of the ``ditto`` column
    models : {method: PersonalModels}    the models of every column but ``majority``
    w : ndarray (dC,)                    the global model the methods start from
    objective : float                    f(w)
    lam : float                          the problem's λ
    nodes, untested, scored_rows : int   K; nodes without test rows; test rows that belong to a node
    unassigned_rows : int                test rows of no node (a separate test file): scored by no personal model
    checks : {name: float}               the identities of exact Ditto measured on this problem (with ``ditto``):
        ``ditto0_minus_local``: max_k |F_k(v_k(0)) − F_k(v_k^Local)|, Ditto at λ_D = 0 solved from w*
        against Local solved from 0; ``ditto_limit_minus_global``: max_k |F_k(v_k(λ_D)) − F_k(w)| at
        λ_D = ``ditto_limit_lambda`` (:data:`LIMIT_LAMBDA`; the gap is of order ‖∇F_k(w)‖²/λ_D);
        ``residual``: the largest ‖∇Φ_k‖/‖∇Φ_k(start)‖ any exact solve behind a column or the path left
        (the λ_D = 10¹⁰ check's solve aside: it starts at its answer);  ``finetune_nodes_worse``
        (with ``finetune``): the nodes whose own loss F_k fine-tuning raised above the global model's.
    seconds : {method: float}            wall time of each column (``path``: the whole λ path)
    """

    config: PersonaliseConfig
    methods: tuple
    errors: Mapping[str, np.ndarray]
    losses: Mapping[str, np.ndarray]
    summaries: Mapping[str, Mapping[str, float]]
    loss_summaries: Mapping[str, Mapping[str, float]]
    lambdas: np.ndarray
    path_errors: np.ndarray
    path_losses: np.ndarray
    path_summaries: tuple
    best_lambda: float
    ditto_lambda: float
    models: Mapping[str, PersonalModels]
    w: np.ndarray
    objective: float
    lam: float
    nodes: int
    untested: int
    scored_rows: int
    unassigned_rows: int
    checks: Mapping[str, float] = field(default_factory=dict)
    seconds: Mapping[str, float] = field(default_factory=dict)

    def sentence(self) -> str:
        """One sentence on what the table shows: the global model's pooled and worst-10% test error, and
        the personalised method that serves the worst 10% of nodes best with its two figures ('' when
        no node has test rows)."""
        g = self.summaries.get("global")
        personal = [m for m in ("local", "finetune", "ditto", "apfl") if m in self.methods
                    and math.isfinite(self.summaries[m]["worst10"])]
        if g is None or not math.isfinite(g["worst10"]):
            return ""
        text = (f"The global model errs {_pct(g['pooled'])} over the nodes' test rows and "
                f"{_pct(g['worst10'])} on its worst 10% of nodes")
        if personal:
            best = min(personal, key=lambda m: (self.summaries[m]["worst10"], personal.index(m)))
            b = self.summaries[best]
            name = TITLES[best] + (f" ({self.ditto_label()})" if best == "ditto" else "")
            text += (f"; {name} serves the worst 10% best of the personalised models: {_pct(b['worst10'])} "
                     f"there, {_pct(b['pooled'])} pooled")
        return text + "."

    def ditto_label(self) -> str:
        """How the Ditto column's λ_D was set: given, or chosen on the very test rows it is scored on
        (the λ_D of the path with the lowest worst-10% error, an oracle's choice, said wherever shown)."""
        lam = f"λ_D = {_lam_text(self.ditto_lambda)}"
        return lam if self.config.ditto_lambda is not None else lam + ", chosen on these test rows"

    def table(self) -> list[dict]:
        """One row per method: ``method``, ``title`` and the summary's keys."""
        return [{"method": m, "title": TITLES[m], **self.summaries[m]} for m in self.methods]

    def to_dict(self) -> dict:
        """The report as JSON-ready values (per-node vectors as lists, NaN as None)."""
        def clean(x):
            if isinstance(x, float):
                return x if math.isfinite(x) else (None if math.isnan(x) else ("inf" if x > 0 else "-inf"))
            return x

        def vec(a):
            return [clean(float(v)) for v in np.asarray(a, dtype=np.float64).ravel()]

        return {
            "methods": list(self.methods), "titles": {m: TITLES[m] for m in self.methods},
            "summaries": {m: {k: clean(v) for k, v in s.items()} for m, s in self.summaries.items()},
            "loss_summaries": {m: {k: clean(v) for k, v in s.items()} for m, s in self.loss_summaries.items()},
            "errors": {m: vec(e) for m, e in self.errors.items()},
            "lambdas": vec(self.lambdas),
            "path_summaries": [{k: clean(v) for k, v in s.items()} for s in self.path_summaries],
            "best_lambda": clean(self.best_lambda), "ditto_lambda": clean(self.ditto_lambda),
            "objective": clean(self.objective), "lam": self.lam, "nodes": self.nodes, "untested": self.untested,
            "scored_rows": self.scored_rows, "unassigned_rows": self.unassigned_rows,
            "checks": {k: clean(v) for k, v in self.checks.items()},
            "seconds": {k: clean(v) for k, v in self.seconds.items()},
            "config": {"lambdas": vec(self.config.lambdas), **{n: clean(getattr(self.config, n)) for n in PARAMS},
                       "methods": list(self.config.methods)},
        }


def _is_plus_inf(x) -> bool:
    """Whether ``x`` is the number +∞ (a float or NumPy number, not a bool or text)."""
    return isinstance(x, (float, np.floating)) and math.isinf(x) and x > 0


def _summary(values: np.ndarray, pooled: float) -> dict[str, float]:
    return {"pooled": pooled, **summarize(values)}


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    a.setflags(write=False)
    return a


def personalise(problem: Problem, config: PersonaliseConfig | None = None, w_star: np.ndarray | None = None,
                *, check_stop: Callable[[], None] | None = None) -> PersonalReport:
    """Every personalised model of ``config`` on ``problem``, scored node by node.

    ``w_star``: the global model the methods start from and the Ditto path ends at; default the
    problem's own optimum w* (:func:`fedviz.problems.optimum.solve`).  Pass the federation's model
    to score held-out nodes as new clients, on a problem built from their rows with the federation's
    λ (``Problem(held_out, loss, lam=federation.lam)``: the default λ = 1/n would be their own n's).
    With ``methods=("global", "finetune")`` nothing else is solved.  ``check_stop`` is called between the solver's
    large operations (a page's Stop).
    """
    from ..problems.optimum import solve

    config = config or PersonaliseConfig()
    pb = problem
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    if w_star is None:
        w = np.array(solve(pb).w)
    else:
        w = np.array(w_star, dtype=np.float64)  # a copy: the report's is read-only, the caller's stays as it was
        if w.shape != (pb.size,):
            raise ParameterError("w_star", f"shape {w.shape}", f"a flat model of length dC = {pb.size}")
        if not np.all(np.isfinite(w)):
            raise ParameterError("w_star", "a model with non-finite entries", "a finite model")
    seconds["optimum"] = time.perf_counter() - t
    ev = PersonalEvaluator(pb)
    solver = Personaliser(pb, check_stop)
    sizes = pb.data.node_sizes.astype(np.float64)
    methods = config.methods
    errors: dict[str, np.ndarray] = {}
    losses: dict[str, np.ndarray] = {}
    models: dict[str, PersonalModels] = {}

    def score(name, m: PersonalModels):
        models[name] = m
        errors[name] = ev.errors(m)
        losses[name] = ev.losses(m, solver.solver)

    if "majority" in methods:
        errors["majority"] = ev.majority_errors()
        losses["majority"] = np.full(pb.data.n_nodes, math.nan)
    t = time.perf_counter()
    glob = solver.global_models(w)
    score("global", glob)
    seconds["global"] = time.perf_counter() - t

    # Local, for its column, APFL's mixture and the check that Ditto at λ_D = 0 is Local.
    residual = 0.0
    local = None
    if {"local", "apfl"} & set(methods) or ("ditto" in methods):
        t = time.perf_counter()
        local = solver.local()
        residual = max(residual, solver.residual)
        seconds["local"] = time.perf_counter() - t
        if "local" in methods:
            score("local", local)
    lams = np.array(config.lambdas, dtype=np.float64)
    K = pb.data.n_nodes
    path_err = np.full((0, K), math.nan)
    path_loss = path_err
    path_summaries: tuple = ()
    checks: dict[str, float] = {}
    best_lambda = ditto_lambda = math.nan
    if "ditto" in methods:
        t = time.perf_counter()
        path_err, path_loss = np.empty((lams.size, K)), np.empty((lams.size, K))
        summaries_at = []
        # Only the models still needed are kept (at the paper's scale one is 13M values): the first
        # (λ_D = 0 for the check, and the column when no node is tested), the best so far for the
        # worst 10% (ties: the smaller λ_D) and the configured λ_D's.
        first = best = chosen = None
        best_worst = math.inf
        prev = None  # the path starts at w*; each λ_D warm-starts the next larger one
        for i, lam_d in enumerate(lams):
            m = solver.ditto(lam_d, w, start=prev)
            if lam_d < math.inf:
                residual = max(residual, solver.residual)
            path_err[i], path_loss[i] = ev.errors(m), ev.losses(m, solver.solver)
            summaries_at.append(_summary(path_err[i], ev.pooled(path_err[i])))
            worst_i = summaries_at[-1]["worst10"]
            if i == 0:
                first = m
            if worst_i < best_worst:
                best, best_worst, best_lambda = m, worst_i, float(lam_d)
            if config.ditto_lambda is not None and lam_d == config.ditto_lambda:
                chosen = m
            prev = m
        path_summaries = tuple(summaries_at)
        seconds["path"] = time.perf_counter() - t
        # The two ends of the path, measured (issue 23's acceptance): Ditto(0) solved from w* against
        # Local solved from 0, and Ditto at λ_D = LIMIT_LAMBDA against the global model.
        local_loss = ev.losses(local, solver.solver)
        zero_loss = path_loss[0] if lams[0] == 0.0 else ev.losses(solver.ditto(0.0, w), solver.solver)
        checks["ditto0_minus_local"] = float(np.max(np.abs(zero_loss - local_loss)))
        # Not counted in the residual: at λ_D = 10¹⁰ the start w* is already the answer to within
        # rounding, so no solve can shrink ‖∇Φ_k‖ relative to it (the check reads the objective gap).
        limit = solver.ditto(LIMIT_LAMBDA, w)
        checks["ditto_limit_lambda"] = LIMIT_LAMBDA
        checks["ditto_limit_minus_global"] = float(np.max(np.abs(ev.losses(limit, solver.solver)
                                                                 - losses["global"])))
        if config.ditto_lambda is not None:
            ditto_lambda = config.ditto_lambda
            m = chosen if chosen is not None else solver.ditto(ditto_lambda, w, start=local)
        elif best is not None:
            ditto_lambda, m = best_lambda, best
        else:  # no node has test rows: the column is the path's first model
            ditto_lambda, m = float(lams[0]), first
        score("ditto", m)
    checks["residual"] = residual

    if "finetune" in methods:
        t = time.perf_counter()
        score("finetune", solver.finetune(w, config.finetune_steps, config.finetune_step,
                                          config.finetune_batch, config.seed))
        seconds["finetune"] = time.perf_counter() - t
        # Plain gradient descent at h_k < 2/L_k never raises F_k; a node where it rose took too large
        # a step (or, with minibatches, the noise of one): counted, for the sentence that says so.
        gl, ft = losses["global"], losses["finetune"]
        checks["finetune_nodes_worse"] = float(np.count_nonzero(~(ft <= gl + 1e-12 * (1.0 + np.abs(gl)))))
    if "apfl" in methods:
        score("apfl", solver.apfl(config.apfl_alpha, w, local))

    shown = tuple(m for m in METHODS if m in methods)
    summaries = {}
    loss_summaries = {}
    for name in shown:
        summaries[name] = _summary(errors[name], ev.pooled(errors[name]))
        lv = losses[name]
        pooled_loss = float(lv @ sizes / sizes.sum()) if np.all(np.isfinite(lv)) else math.nan
        loss_summaries[name] = {"pooled": pooled_loss, **summarize(lv)}
    objective = float(losses["global"] @ sizes / sizes.sum())
    return PersonalReport(
        config=config, methods=shown,
        errors={k: _readonly(errors[k]) for k in shown}, losses={k: _readonly(losses[k]) for k in shown},
        summaries=summaries, loss_summaries=loss_summaries,
        lambdas=_readonly(lams), path_errors=_readonly(path_err), path_losses=_readonly(path_loss),
        path_summaries=path_summaries, best_lambda=best_lambda, ditto_lambda=ditto_lambda,
        models={k: v for k, v in models.items() if k in shown}, w=_readonly(w), objective=objective,
        lam=pb.lam, nodes=pb.data.n_nodes, untested=ev.untested, scored_rows=ev.scored_rows,
        unassigned_rows=int(pb.data.y_test.size - ev.scored_rows), checks=checks, seconds=seconds)


def format_table(report: PersonalReport, percent: bool = True) -> str:
    """The table the command line prints: method × pooled / unweighted mean / std / p10 / worst-10% / min."""
    keys = ("pooled", "mean", "std", "p10", "worst10", "min")
    heads = ("pooled", "mean", "std", "p10", "worst 10%", "min")
    rows = [("method",) + heads]
    unit = 100.0 if percent else 1.0
    for m in report.methods:
        s = report.summaries[m]
        label = TITLES[m]
        if m == "ditto":
            label += f" ({report.ditto_label()})"
        elif m == "apfl":
            label += f" (α = {report.config.apfl_alpha:g})"
        elif m == "finetune":
            label += f" ({report.config.finetune_steps} steps)"
        rows.append((label,) + tuple("n/a" if not math.isfinite(s[k]) else f"{unit * s[k]:.2f}" + ("%" if percent else "")
                                      for k in keys))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def _lam_text(x: float) -> str:
    return "∞" if x == math.inf else ("n/a" if not math.isfinite(x) else f"{x:g}")


def personalise_unseen(problem: Problem, config: PersonaliseConfig | None = None,
                       w_star: np.ndarray | None = None, **kw) -> PersonalReport | None:
    """The nodes held out of training (issue 23, point 2) scored as new clients: every method of
    ``config`` on the unseen nodes' problem (:func:`fedviz.problems.unseen.unseen_problem`: their
    rows, the federation's loss, λ and model shape), starting from the federation's model
    ``w_star`` (default: the optimum of ``problem``, the seen nodes).  "global" is the federation's
    model as a new client receives it; "finetune", Local and Ditto use the new client's own
    training rows, as pFL-Bench's fine-tune-before-evaluation does.  None without unseen nodes."""
    from ..problems.optimum import solve
    from ..problems.unseen import unseen_problem

    u = unseen_problem(problem)
    if u is None:
        return None
    w = np.array(solve(problem).w) if w_star is None else w_star
    return personalise(u, config, w_star=w, **kw)
