"""What to run: a :class:`RunJob` as a caller submits it, validated into a :class:`Job`.

A :class:`Job` is a frozen value: the algorithms (:class:`Entry`, their hyperparameters
checked and completed), the iterations, the seed, the stored config, and how to get the
problem.  The problem is not built by the caller: the job carries a callable that builds
or fetches it, ideally a :class:`ProblemSpec` (data spec, loss, λ), which the worker turns
into a problem through the process-wide cache (:mod:`fedviz.runner.cache`), under the run
cap.  f* likewise: None means the worker computes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

from ..algorithms.base import Algorithm
from ..algorithms.spec import AlgorithmSpec
from ..data.build import DataSpec
from ..errors import ParameterError
from ..data.presets import check_preset_loss
from ..problems.losses import MULTICLASS_LOSSES, make_loss
from ..problems.objective import Problem
from ..problems.optimum import Optimum
from ..validation import check_int, check_real
from . import cache
from .codec import to_json


@dataclass(frozen=True)
class ProblemSpec:
    """A problem by content: data set, loss and λ.  Calling it returns the (cached) problem.

    Pass it as :attr:`RunJob.make_problem`: the run's worker then builds the data set and the
    problem (or takes them from :mod:`fedviz.runner.cache`) under the run cap, and computes f*
    there too when the job gives none.
    """

    data: DataSpec
    loss: str = "logistic"
    lam: float | None = None

    def __call__(self) -> Problem:
        return cache.problem(self.data, self.loss, self.lam)

    def optimum(self) -> Optimum:
        return cache.optimum(self.data, self.loss, self.lam)

    def check(self) -> None:
        """Refuse a malformed spec before anything is built (a bad file shows only when built)."""
        if not isinstance(self.data, DataSpec):
            raise ParameterError("data", type(self.data).__name__, "a DataSpec")
        make_loss(self.loss)
        if self.lam is not None:
            check_real("lam", self.lam, low=0, low_open=True)
        if self.data.is_preset:  # a binary loss on a preset of many classes: say which preset is binary
            check_preset_loss(self.data.source, self.loss, MULTICLASS_LOSSES)


@dataclass(frozen=True)
class RunJob:
    """One Run click, as submitted: several algorithms on one problem, for the same iterations and seed.

    Parameters
    ----------
    make_problem : ProblemSpec or callable () -> Problem
        The problem, built in the worker: a :class:`ProblemSpec` (preferred: built and cached
        by content under the run cap), or any callable returning a Problem.
    algorithms : tuple of AlgorithmSpec (or of (label, algorithm, hyper) triples)
        One :class:`~fedviz.algorithms.spec.AlgorithmSpec` per curve, labels unique within
        the job.  A triple is read as ``AlgorithmSpec.of(algorithm, hyper, label=label)``:
        ``algorithm`` a registry name or an :class:`~fedviz.algorithms.base.Algorithm`
        subclass, ``hyper`` a mapping (missing ones take their defaults).
    iterations : int
        Outer iterations per algorithm.
    seed : int
    config : mapping
        The frozen setup (data spec, loss, λ, ...), JSON-serialisable; stored with each
        run, completed with ``iterations`` and ``seed``.
    f_star : float or None
        The optimal value, if known; else computed by Newton-CG in the worker.
    tune : bool
        Choose each algorithm's step-like hyperparameters by pilot runs first
        (:func:`fedviz.runner.tune.tune`), in the worker, under the run cap.  The chosen
        value joins the label, the stored hyperparameters and the algorithm's note; the
        pilots' time is reported apart from the run's.
    scales : mapping label → (hyperparameter, factor)
        Hyperparameters set to ``factor`` × their derived default, resolved in the worker once
        the problem is built (a sweep's variants of a derived stepsize: the page never builds
        the problem to know the default).
    dissimilarity : bool
        Record FedProx's gradient dissimilarity at every iteration
        (:mod:`fedviz.problems.dissimilarity`; one more full gradient per record).
    personal_targets : bool
        Measure each algorithm that has an exact personal target (Ditto: v_k(λ_D) = argmin F_k(v) +
        (λ_D/2)‖v − w*‖², :mod:`fedviz.personal.target`) against it: the worker solves the target once,
        before the first iteration, and the records carry the distance to it.  On by default, so that
        every path (a Run click, ``fedviz run``, an experiment's cells) measures the same; False
        spares the exact solve.
    """

    make_problem: ProblemSpec | Callable[[], Problem]
    algorithms: tuple[AlgorithmSpec | tuple[str, str | type[Algorithm], Mapping[str, Any]], ...]
    iterations: int
    seed: int = 0
    config: Mapping[str, Any] = field(default_factory=dict)
    f_star: float | None = None
    tune: bool = False
    scales: Mapping[str, tuple[str, float]] = field(default_factory=dict)
    dissimilarity: bool = False
    personal_targets: bool = True

    def validate(self) -> "Job":
        """The validated job; raises :class:`ParameterError` naming the offending parameter."""
        return Job.of(self)


@dataclass(frozen=True)
class Entry:
    """One algorithm of a job: its :class:`AlgorithmSpec` and the hyperparameters resolved."""

    spec: AlgorithmSpec
    resolved: Mapping[str, Any]    # defaults filled in: what the history records (spec.hp, read-only)

    @property
    def label(self) -> str:
        return self.spec.label

    @property
    def cls(self) -> type[Algorithm]:
        return self.spec.cls

    @property
    def hyper(self) -> Mapping[str, Any]:
        """As given (the values that differ from the defaults)."""
        return MappingProxyType(self.spec.values)

    @property
    def hp(self):
        """Every hyperparameter as validated where the spec was made: what the algorithm is
        constructed with, not checked again (:class:`~fedviz.algorithms.base.Hyper`)."""
        return self.spec.hp

    @property
    def name(self) -> str:
        return self.cls.name or self.cls.__name__

    @classmethod
    def of(cls, spec: AlgorithmSpec) -> "Entry":
        return cls(spec, MappingProxyType(spec.resolved))

    @classmethod
    def make(cls, label: str, algorithm: str | type[Algorithm], hyper: Mapping[str, Any]) -> "Entry":
        return cls.of(AlgorithmSpec.of(algorithm, hyper, label=label))


@dataclass(frozen=True)
class Job:
    """A validated :class:`RunJob`: everything a worker needs, frozen."""

    make_problem: Callable[[], Problem]
    entries: tuple[Entry, ...]
    iterations: int
    seed: int
    config: Mapping[str, Any]  # completed with iterations and seed; JSON-serialisable
    f_star: float | None
    tune: bool
    scales: Mapping[str, tuple[str, float]] = field(default_factory=dict)
    dissimilarity: bool = False
    personal_targets: bool = True

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(e.label for e in self.entries)

    @classmethod
    def of(cls, job: RunJob) -> "Job":
        """Refuse a bad job before anything starts: every error names the offending parameter."""
        if not isinstance(job, RunJob):
            raise ParameterError("job", type(job).__name__, "a RunJob")
        if isinstance(job.make_problem, ProblemSpec):
            job.make_problem.check()
        elif not callable(job.make_problem):
            raise ParameterError("make_problem", job.make_problem,
                                 "a ProblemSpec or a callable returning a Problem")
        iterations = check_int("iterations", job.iterations, low=0)
        seed = check_int("seed", job.seed, low=0, high=2**63 - 1)
        f_star = None if job.f_star is None else check_real("f_star", job.f_star)
        algos = tuple(job.algorithms)
        if not algos:
            raise ParameterError("algorithms", algos, "at least one AlgorithmSpec")
        entries, seen = [], set()
        for k, item in enumerate(algos):
            spec = _spec(k, item)
            if spec.label in seen:
                raise ParameterError(f"algorithms[{k}].label", spec.label, "a label not used by another algorithm")
            seen.add(spec.label)
            if isinstance(job.make_problem, ProblemSpec) and job.make_problem.loss == "softmax":
                why = spec.cls.softmax_refusal(spec.values)  # refused here, not as a failed run
                if why is not None:
                    raise ParameterError(f"algorithms[{k}]", spec.name, "an algorithm that takes softmax", hint=why)
            entries.append(Entry.of(spec))
        scales = {}
        for label, item in dict(job.scales or {}).items():
            entry = next((e for e in entries if e.label == label), None)
            if entry is None:
                raise ParameterError(f"scales[{label!r}]", label, "the label of one of the job's algorithms")
            param, factor = item
            if param not in {p.name for p in entry.cls.params}:
                raise ParameterError(f"scales[{label!r}]", param, f"a hyperparameter of {entry.name}")
            scales[label] = (str(param), check_real(f"scales[{label!r}]", factor, low=0, low_open=True))
        if not isinstance(job.personal_targets, bool):
            raise ParameterError("personal_targets", job.personal_targets, "True or False")
        config = {**dict(job.config or {}), "iterations": iterations, "seed": seed}
        try:
            to_json(config)
        except (TypeError, ValueError) as e:
            raise ParameterError("config", type(job.config).__name__,
                                 f"a JSON-serialisable mapping ({e})") from None
        return cls(job.make_problem, tuple(entries), iterations, seed, MappingProxyType(config), f_star,
                   bool(job.tune), MappingProxyType(scales), dissimilarity=bool(job.dissimilarity),
                   personal_targets=job.personal_targets)


def _spec(k: int, item) -> AlgorithmSpec:
    """``algorithms[k]`` of a :class:`RunJob` as a spec (a spec as is; a triple checked part by part)."""
    if isinstance(item, AlgorithmSpec):
        return item
    if not (isinstance(item, (tuple, list)) and len(item) == 3):
        raise ParameterError(f"algorithms[{k}]", item, "an AlgorithmSpec or a (label, algorithm, hyper) triple")
    label, algo, hyper = item
    if not isinstance(label, str) or not label.strip():
        raise ParameterError(f"algorithms[{k}].label", label, "a non-empty string")
    if not (isinstance(algo, str) or (isinstance(algo, type) and issubclass(algo, Algorithm))):
        raise ParameterError(f"algorithms[{k}].algorithm", algo,
                             "a registered algorithm name or an Algorithm subclass")
    if hyper is None:
        hyper = {}
    if not isinstance(hyper, Mapping):
        raise ParameterError(f"algorithms[{k}].hyper", hyper, "a mapping of hyperparameters")
    return AlgorithmSpec.of(algo, hyper, label=label)


__all__ = ["Entry", "Job", "ProblemSpec", "RunJob"]
