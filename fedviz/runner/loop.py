"""The iteration loop: runs an algorithm and yields one :class:`IterationRecord` per iteration.

This module owns the record format, the metrics (objective, suboptimality, errors,
gradient norm) and the run's end states: ``done``, ``diverged``, ``stopped`` and
``failed``.  It never raises for a run that goes wrong: the last record says why.

Honest statuses (the rules: :mod:`fedviz.runner.health`): after every iteration the
objective goes to a :class:`~fedviz.runner.health.Watch`.  A run whose objective is
non-finite or climbs far above its start (ten times the gap f0 − f*) ends ``diverged`` at
that iteration, its message naming the algorithm's
:attr:`~fedviz.algorithms.base.Algorithm.divergence_hint` (e.g. "lower stepsize (now 2.5)",
DANE's "raise mu (now 0)").  At the last iteration :func:`~fedviz.runner.health.assess`
reads the whole curve: a run that ends clearly above its start (typically, over its last
quarter) ends ``diverged`` too ("GD diverged: f never got below its start …; lower stepsize (now
30.7)"; for a method that cannot diverge, one-shot averaging, ``done`` with "warning: …"); one that
never got below its start but ends near it ends ``done`` with "warning: f never got below its
start …"; a run that zig-zags without progress or keeps relapsing above its start ends
``done`` with the message "oscillating: …": its final numbers are the luck of the
oscillation's phase, not a converged value.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator, Mapping

import numpy as np

from ..algorithms import get_algorithm
from ..algorithms.base import Algorithm, StopRequested
from ..errors import ParameterError
from ..problems.dissimilarity import local_dissimilarity
from ..problems.objective import Problem
from ..problems import metrics, pernode
from .health import Watch, assess, personal_verdict

log = logging.getLogger(__name__)

STATUSES = ("running", "done", "diverged", "stopped", "failed")


@dataclass(frozen=True)
class IterationRecord:
    """The state after ``iteration`` outer iterations (iteration 0 is the starting point).

    ``summaries`` holds the per-node metrics' summaries by record key (issue 23; the registry
    :mod:`fedviz.problems.metrics` says which: e.g. ``node_error_p50``, the median node's test error,
    ``nodes_untested``, ``unseen_test_error``, ``personal_distance``), each also read as an attribute
    (``rec.node_error_p50``); a key the record lacks (a record written before its metric) reads NaN.
    The pooled values of the seen nodes' test error and own loss are ``test_error`` and ``objective``.
    ``dissimilarity`` is FedProx's (1/K) Σ_k ‖∇F_k(w) − ∇f(w)‖²
    (:func:`~fedviz.problems.dissimilarity.local_dissimilarity`), NaN unless the run asked for it.
    ``nodes`` holds the per-node vectors themselves (:class:`~fedviz.problems.pernode.NodeScores`, every
    metric's) in memory only: it is no field of :data:`FIELDS`, the store and the exports leave it out.
    """

    algorithm: str
    iteration: int
    objective: float
    suboptimality: float
    test_error: float
    train_error: float
    grad_norm: float
    rounds: int
    vectors_up: int
    vectors_down: int
    grad_evals: int
    passes: float
    seconds: float
    status: str
    message: str = ""
    dissimilarity: float = math.nan
    summaries: Mapping[str, float] = field(default_factory=dict, hash=False)
    nodes: pernode.NodeScores | None = field(default=None, compare=False, repr=False)

    def __getattr__(self, name: str):
        # Only called when the ordinary lookup fails: a per-node key reads from the summaries.
        if name in _KEYS:
            return self.__dict__.get("summaries", {}).get(name, math.nan)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def as_dict(self) -> dict:
        """The fields of :data:`FIELDS`, the summaries spread out (not the in-memory per-node vectors)."""
        return {f: getattr(self, f) for f in FIELDS}

    @classmethod
    def from_dict(cls, d: Mapping) -> "IterationRecord":
        """The record of an :meth:`as_dict` (a per-node key absent from ``d`` reads NaN; others are ignored)."""
        return cls(**{f: d[f] for f in CORE_FIELDS if f in d},
                   summaries={k: d[k] for k in metrics.KEYS if k in d})


#: The record's own fields (without the per-node summaries and vectors).
CORE_FIELDS = tuple(f for f in IterationRecord.__dataclass_fields__ if f not in ("summaries", "nodes"))
#: Every field of a record as :meth:`IterationRecord.as_dict` spreads it: the core fields, then every
#: per-node key of the registry (:data:`fedviz.problems.metrics.KEYS`).
FIELDS = CORE_FIELDS + metrics.KEYS
_KEYS = frozenset(metrics.KEYS)


def iterate(problem: Problem, algorithm: str | type[Algorithm], *, iterations: int,
            hyper: Mapping | None = None, seed: int = 0, w0: np.ndarray | None = None,
            f_star: float | None = None, stop: Callable[[], bool] | None = None,
            label: str | None = None, personal_target: np.ndarray | None = None,
            dissimilarity: bool = False) -> Iterator[IterationRecord]:
    """Run ``iterations`` outer iterations, yielding the start and then every iteration.

    ``hyper`` is a mapping of hyperparameters, checked here, or the
    :class:`~fedviz.algorithms.base.Hyper` an edge validated (taken as it is).

    ``dissimilarity``: also record FedProx's gradient dissimilarity at every iteration (one more
    full gradient per record, :mod:`fedviz.problems.dissimilarity`); it never changes the run.
    Hyperparameter errors are raised before the first record (refused before the run
    starts); after that nothing is raised: the last record's status says how it ended.
    ``f_star`` defaults to NaN suboptimality when not given.  ``personal_target`` (K × d), for an
    algorithm with personal models only, is the exact model of each node (the exact Ditto v_k(λ)):
    every record's ``personal_distance`` is then the distance of the run's personal models to it.
    """
    cls = get_algorithm(algorithm) if isinstance(algorithm, str) else algorithm
    algo = cls(problem, seed=seed, w0=w0, hp=hyper if hyper is not None else {})
    algo.stop_requested = stop
    label = label or cls.name
    f_star = float("nan") if f_star is None else float(f_star)
    # The clock counts only this run's own work: while the generator is suspended at a
    # yield (another algorithm's turn, a slow consumer) the start is moved forward.
    start = time.perf_counter()
    nodes = pernode.NodeEvaluator(problem)
    unseen = pernode.UnseenEvaluator.of(problem)  # None when the data set holds no unseen nodes
    # A model per node (Ditto, APFL): scored node by node beside the global model; carried on the
    # evaluator so that _record and _final keep their signatures.
    if algo.personal_models() is not None:
        nodes.personal = pernode.PersonalEvaluator(nodes, personal_target)
    elif personal_target is not None:
        raise ParameterError("personal_target", f"an array of shape {np.shape(personal_target)}",
                             f"only for an algorithm with a model per node (Ditto, APFL), not {cls.title}")
    algo.node_sums = nodes.wants_node_sums  # the nodes' own losses from the pass that computes f(w)
    first = _record(algo, label, f_star, start, "running" if iterations else "done", nodes, unseen, dissimilarity)
    objectives = [first.objective]
    # The personal models' own verdict (personal_verdict), on their distance to the exact models and their error.
    personal = getattr(nodes, "personal", None)
    dkey, ekey = metrics.get("personal_distance").key("rms"), metrics.get("personal_error").key("pooled")
    distances, errors = [first.summaries.get(dkey, math.nan)], [first.summaries.get(ekey, math.nan)]
    watch = Watch(first.objective, None if math.isnan(f_star) else f_star)
    paused = time.perf_counter()
    yield first
    for t in range(1, iterations + 1):
        start += time.perf_counter() - paused
        status, message = "running", ""
        try:
            if stop is not None and stop():
                raise StopRequested()
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                algo.step()
            rec = _record(algo, label, f_star, start, "running", nodes, unseen, dissimilarity)
        except StopRequested:
            yield _final(algo, label, f_star, start, nodes, unseen, "stopped",
                         f"stopped by the user after {t - 1} iterations", dissimilarity)
            return
        except (FloatingPointError, OverflowError, ZeroDivisionError, np.linalg.LinAlgError) as e:
            yield _final(algo, label, f_star, start, nodes, unseen, "diverged", _diverged_text(cls, algo, t, str(e)),
                         dissimilarity)
            return
        except Exception as e:  # noqa: BLE001 - a run never raises; the record says why
            log.exception("run of %s failed", label)
            yield _final(algo, label, f_star, start, nodes, unseen, "failed", f"{type(e).__name__}: {e}", dissimilarity)
            return
        objectives.append(rec.objective)
        verdict = watch.add(rec.objective)  # O(1); the oscillation tests read the whole curve once, at the end
        if verdict.ok and t == iterations:
            verdict = assess(objectives, None if math.isnan(f_star) else f_star)
        if verdict.status == "diverged" and verdict.iteration is None and cls.divergence_hint is None:
            # An end rule on a method with nothing to turn (one-shot averaging): a warning, not a divergence.
            status, message = "done", f"warning: {verdict.reason}"
        elif verdict.status == "diverged":
            # Watch's verdicts happen at an iteration; the end rules are about the whole curve.
            status, message = "diverged", _diverged_text(cls, algo, None if verdict.iteration is None else t,
                                                         verdict.reason)
        elif t == iterations:
            status = "done"
            if verdict.status == "oscillating":
                message = f"oscillating: {verdict.reason}{_hint_text(cls, algo)}"  # what helps, as for a warning
            elif verdict.warning:
                message = f"warning: {verdict.warning}{_hint_text(cls, algo)}"
        if personal is not None and status in ("running", "done"):
            distances.append(rec.summaries.get(dkey, math.nan))
            errors.append(rec.summaries.get(ekey, math.nan))
            own = personal_verdict(distances, errors, finite=bool(np.all(np.isfinite(algo.personal_models()))),
                                   ended=t == iterations, rates=problem.error_metric != "mse")
            if own.status == "diverged":
                status, message = "diverged", f"{cls.title} diverged: {own.reason}{_hint_text(cls, algo)}"
            elif own.warning and not message:
                message = f"warning: {own.warning}{_hint_text(cls, algo)}"
        if status != "running":
            rec = _replace(rec, status=status, message=message)
        paused = time.perf_counter()
        yield rec
        if status != "running":
            return


def _diverged_text(cls, algo, t: int | None, what: str) -> str:
    """"<title> diverged at iteration t (what); <raise|lower> <param> (now <value>)", or with
    ``t`` None (a verdict on the whole curve) "<title> diverged: what; <raise|lower> …".

    The value shown is the one in use: the derived default when none was given (GD's
    stepsize is ``algo.h``, DANE's μ ``algo.mu``, CoCoA+'s σ' ``algo.sigma_prime``).
    """
    text = f"{cls.title} diverged at iteration {t} ({what})" if t is not None else f"{cls.title} diverged: {what}"
    return text + _hint_text(cls, algo)


def _hint_text(cls, algo) -> str:
    """"; <raise|lower> <param> (now <value>)" from the algorithm's ``divergence_hint`` ('' without one): the
    direction that helps, with the value in use (the derived default when none was given)."""
    hint = cls.divergence_hint
    if not hint:
        return ""
    param, direction = hint
    value = getattr(algo, "h" if param == "stepsize" else param, None)  # in use: FSVRG's safeguard halves h
    if value is None:
        value = algo.hp.get(param)
    shown = f" (now {value:.4g})" if isinstance(value, (float, int)) and not isinstance(value, bool) else ""
    return f"; {direction} {param}{shown}"


def _record(algo: Algorithm, label: str, f_star: float, start: float, status: str,
            nodes: pernode.NodeEvaluator, unseen: pernode.UnseenEvaluator | None = None,
            dissimilarity: bool = False) -> IterationRecord:
    p = algo.problem
    w = algo.w
    scores = None
    dissim = math.nan
    if not np.all(np.isfinite(w)):
        nan = float("nan")
        obj = grad_norm = test_err = train_err = nan
        per_node = pernode.nan_fields()
    else:
        z = algo.margins()
        obj, g = algo.objective_and_gradient()
        grad_norm = float(np.linalg.norm(g))
        # One test pass: the pooled test error (Problem.test_error's number) and every node's
        # come from the same margins; the own losses from the pass that computed f(w).
        test_err, per_node, scores = nodes.evaluate(w, z, nodes.test_margins(w), algo.iteration,
                                                    algo.node_loss_sums())
        # The held-out nodes: the same model on their test rows (one product with those rows).
        per_node, scores = unseen.add(w, per_node, scores) if unseen is not None else \
            ({**per_node, **metrics.absent("unseen")}, scores)
        train_err = algo.train_error()
        if dissimilarity:
            dissim = local_dissimilarity(p, w, z=z)
    personal = getattr(nodes, "personal", None)
    per_node, scores = personal.add(algo.personal_models(), per_node, scores) if personal is not None else \
        ({**per_node, **metrics.absent("personal")}, scores)  # NaN without personal models
    return IterationRecord(
        algorithm=label, iteration=algo.iteration, objective=obj, suboptimality=obj - f_star,
        test_error=test_err, train_error=train_err, grad_norm=grad_norm, rounds=algo.rounds,
        vectors_up=algo.vectors_up, vectors_down=algo.vectors_down, grad_evals=algo.grad_evals,
        passes=algo.grad_evals / p.n, seconds=time.perf_counter() - start, status=status,
        dissimilarity=dissim, summaries=per_node, nodes=scores)


def _final(algo, label, f_star, start, nodes, unseen, status, message, dissimilarity=False) -> IterationRecord:
    try:
        rec = _record(algo, label, f_star, start, status, nodes, unseen, dissimilarity)
    except Exception:  # noqa: BLE001 - metrics of a broken state are NaN, not an exception
        nan = float("nan")
        rec = IterationRecord(label, algo.iteration, nan, nan, nan, nan, nan, algo.rounds, algo.vectors_up,
                              algo.vectors_down, algo.grad_evals, algo.grad_evals / algo.problem.n,
                              time.perf_counter() - start, status)
    return _replace(rec, message=message)


def _replace(rec: IterationRecord, **changes) -> IterationRecord:
    return replace(rec, **changes)
