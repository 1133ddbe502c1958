"""An algorithm with its hyperparameters, named: the one value configs, jobs, sweeps, tuning and figures pass.

An :class:`AlgorithmSpec` is frozen and validated: the algorithm (a registry name, or an
unregistered :class:`~fedviz.algorithms.base.Algorithm` subclass for tests and benchmarks),
the hyperparameters given (a sorted tuple of pairs; those left out take their defaults), the
label that names its curve (unique within a run) and the group it belongs to (the variants of
one sweep share their group).  Labels are made from a spec (:meth:`AlgorithmSpec.with_hyper`
with a ``note``: ``"FSVRG ×2"``, ``"FSVRG (stepsize 81.4, tuned)"``) and never parsed back: who
needs the group, the algorithm or the factor reads them off the spec or the plan that made it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..errors import ParameterError
from ..validation import check_display_text
from ..problems.objective import Problem
from . import get_algorithm
from .base import Algorithm, Hyper


@dataclass(frozen=True)
class AlgorithmSpec:
    """One algorithm to run: ``name``, ``hyper`` (given values, sorted pairs), ``label`` and ``group``.

    ``label`` defaults to the algorithm's title and ``group`` to the label.  Construction
    validates: an unknown name or hyperparameter, or a value out of range, raises
    :class:`~fedviz.errors.ParameterError` naming it.  ``hyper`` may also be a mapping, or the
    :class:`~fedviz.algorithms.base.Hyper` an edge validated (taken as it is, not checked again);
    it is stored as the sorted pairs of the given values, and every value, validated, as :attr:`hp`
    (what the algorithm is constructed with).  ``impl`` is the class when it is not in
    the registry (``name`` is then its ``name`` or class name); leave it None otherwise.
    """

    name: str
    hyper: tuple[tuple[str, Any], ...] = ()
    label: str = ""
    group: str = ""
    impl: type[Algorithm] | None = field(default=None, repr=False)
    #: Every hyperparameter, validated once (here, or at the edge that handed ``hyper`` in as a
    #: :class:`~fedviz.algorithms.base.Hyper`): what the algorithm is constructed with, unchecked.
    hp: Hyper = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.impl is not None:
            if not (isinstance(self.impl, type) and issubclass(self.impl, Algorithm)):
                raise ParameterError("algorithm", self.impl, "a registered algorithm name or an Algorithm subclass")
            cls = self.impl
        else:
            if not isinstance(self.name, str):
                raise ParameterError("algorithm", self.name, "a registered algorithm name or an Algorithm subclass")
            cls = get_algorithm(self.name)
        hyper = self.hyper
        if hyper is None:
            hyper = {}
        if not isinstance(hyper, Mapping):
            try:
                hyper = dict(hyper)
            except (TypeError, ValueError):
                raise ParameterError(f"{self.name}.hyper", hyper, "a mapping of hyperparameters") from None
        if not all(isinstance(k, str) for k in hyper):
            raise ParameterError(f"{self.name}.hyper", hyper, "hyperparameter names as strings")
        hp = cls.validate(hyper)  # a Hyper of cls (from an edge) is taken as it is
        object.__setattr__(self, "hp", hp)
        # The given values as given (a stored experiment's content keys hash them: 1 stays 1, not 1.0).
        object.__setattr__(self, "hyper", hyper.given_items() if isinstance(hyper, Hyper) else tuple(sorted(hyper.items())))
        label = self.label or cls.title or self.name
        check_display_text(f"{self.name}.label", label)
        object.__setattr__(self, "label", label)
        group = self.group or label
        if not isinstance(group, str):
            raise ParameterError(f"{self.name}.group", group, "a string")
        object.__setattr__(self, "group", group)

    # -- construction ----------------------------------------------------------------------------
    @classmethod
    def of(cls, algorithm: str | type[Algorithm], hyper: Mapping[str, Any] | None = None, *,
           label: str | None = None, group: str | None = None) -> "AlgorithmSpec":
        """The validated spec of ``algorithm`` (a registry name or an Algorithm subclass) with ``hyper``."""
        if isinstance(algorithm, type) and issubclass(algorithm, Algorithm):
            registered = _registered(algorithm)
            name = algorithm.name or algorithm.__name__
            return cls(name, hyper or {}, label or "", group or "", impl=None if registered else algorithm)
        if isinstance(algorithm, str):
            return cls(algorithm, hyper or {}, label or "", group or "")
        raise ParameterError("algorithm", algorithm, "a registered algorithm name or an Algorithm subclass")

    def with_hyper(self, changes: Mapping[str, Any] | None = None, *, note: str | None = None,
                   label: str | None = None, group: str | None = None) -> "AlgorithmSpec":
        """A variant: ``changes`` merged into the hyperparameters, in the same group.

        Its label is ``label`` if given, else this label with ``note`` appended
        (``"FSVRG" + "×2"`` → ``"FSVRG ×2"``), else this label.
        """
        if label is None:
            label = f"{self.label} {note}" if note else self.label
        # Only the changes are checked: the rest was validated when this spec was made.
        hp = self.cls.validate(dict(changes or {}), base=self.hp) if changes else self.hp
        out = AlgorithmSpec(self.name, hp, label, self.group if group is None else group, impl=self.impl)
        object.__setattr__(out, "hyper", tuple(sorted({**dict(self.hyper), **dict(changes or {})}.items())))
        return out

    # -- what it says ----------------------------------------------------------------------------
    @property
    def cls(self) -> type[Algorithm]:
        return self.impl if self.impl is not None else get_algorithm(self.name)

    @property
    def title(self) -> str:
        """The algorithm's display title ('FSVRG'), whatever the label."""
        return self.cls.title or self.name

    @property
    def values(self) -> dict[str, Any]:
        """The hyperparameters given, as a fresh dict (a link's and a label's values; the
        algorithm is constructed with :attr:`hp`)."""
        return dict(self.hyper)

    @property
    def resolved(self) -> dict[str, Any]:
        """Every hyperparameter, defaults filled in (derived ones still None): what the history records."""
        return dict(self.hp)

    def make(self, problem: Problem, *, seed: int = 0, w0=None, **extra) -> Algorithm:
        """The algorithm on ``problem``, with :attr:`hp` as validated (not checked again)."""
        return self.cls(problem, seed=seed, w0=w0, hp=self.hp, **extra)

    def derived(self, problem: Problem) -> dict[str, Any]:
        """The derived defaults a run on ``problem`` uses (cached with the problem)."""
        return self.cls.derived_defaults(problem, self.hp)

    def effective(self, problem: Problem) -> dict[str, Any]:
        """Every hyperparameter as a run on ``problem`` uses it: :attr:`resolved` with the derived values."""
        return {**self.resolved, **self.derived(problem)}

    def as_json(self) -> dict:
        return {"name": self.name, "hyper": dict(self.hyper), "label": self.label, "group": self.group}


def _registered(algorithm: type[Algorithm]) -> bool:
    from . import ALGORITHMS

    return ALGORITHMS.get(algorithm.name) is algorithm


__all__ = ["AlgorithmSpec"]
