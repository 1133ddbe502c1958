"""An experiment: a grid of runs over algorithms, stepsizes, one or two varied settings and seeds.

This module owns the experiment's definition (:class:`Experiment`, :class:`Axis`,
:class:`Arm`), its expansion into :class:`Cell` s (one cell = one algorithm variant, on one
setting, with one seed: one ordinary run) and its TOML form.  Nothing here runs anything:
a cell becomes a :class:`~fedviz.runner.job.RunJob`, the same value a Run click submits, so
that a cell is the same computation as ``fedviz run`` with the same data, algorithm and seed.

A cell's :attr:`Cell.key` is a hash of everything that determines its result (data, loss, λ,
algorithm and hyperparameters, stepsize mode, iterations, seed), never of its position in the
grid.  An experiment as a whole is identified by :func:`content_hash`, a hash of its grid (not of
its name): a stored name is resumed only by the same grid, so two experiments are never mixed
under one name (the driver refuses a stored name with another grid, or replaces it on request).

The settings an axis can vary (keys of an axis value):

``data.<knob>``
    a preset's generator knob (``data.alpha``, ``data.beta``, ``data.iid`` of
    ``fedprox-synthetic``; ``data.dirichlet_concentration`` of ``google-plus-small``, ...);
``partition``, ``partition.<knob>``
    the partitioner (``dirichlet:alpha=0.5``) or one of its knobs (``partition.alpha``: the
    base data's partition spec gives the partitioner);
``nodes``, ``test_fraction``, ``split``, ``unseen``, ``deal_test``
    the other data settings (:data:`fedviz.data.settings.DATA_SETTINGS`, each in its range) but the
    data seed, which the seeds own (:attr:`Experiment.data_seed`);
``loss``, ``lam``
    the loss and the regulariser λ.

An experiment file's data keys are the same data settings, under the same names and in the same
ranges as a link's keys and the command line's flags (``unseen = 0.2``, ``?unseen=0.2``, ``--unseen 0.2``).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

from ..algorithms.spec import AlgorithmSpec
from ..data.build import DataSpec
from ..data.partition.base import PARTITION_SPEC
from ..data.presets import format_preset_spec, parse_preset_spec
from ..data.settings import DATA_SETTINGS, check_settings, in_identity, with_settings
from ..errors import FedvizError, ParameterError
from ..problems.losses import make_loss
from ..runner.job import ProblemSpec, RunJob
from ..validation import check_display_text, check_int, check_real

#: How an arm sets its step-like hyperparameter.
STEP_MODES = ("default", "tuned", "grid", "scales")
#: The settings an axis may vary besides ``data.<knob>`` and ``partition.<knob>``: every data setting but the
#: data seed (the experiment's seeds, or its ``data_seed``, set it), then the problem's loss and λ.
PLAIN_KEYS = (*(name for name in DATA_SETTINGS if name != "data_seed"), "loss", "lam")
#: The most cells one experiment may have (a guard against a typo in a grid).
MAX_CELLS = 20_000
#: A target ε for "rounds to reach ε" when the experiment names none.
DEFAULT_TARGET = 1e-4

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.,()+=-]{0,79}$")


# -- axes ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Axis:
    """One varied setting: a name and its values, each a mapping of setting keys to values.

    ``Axis.of("partition.alpha", [0.1, 1, 10])`` varies one key; an axis whose values set
    several keys at once (FedProx's ``{data.alpha: 0.5, data.beta: 0.5}``) is built directly,
    with ``labels`` naming its values (``"(0.5, 0.5)"``).
    """

    name: str
    values: tuple[tuple[tuple[str, Any], ...], ...]
    labels: tuple[str, ...] = ()

    def __post_init__(self):
        check_display_text("axis.name", self.name)
        values = tuple(_setting(self.name, k, v) for k, v in enumerate(self.values))
        if not values:
            raise ParameterError(f"axis {self.name!r}.values", [], "at least one value")
        object.__setattr__(self, "values", values)
        labels = tuple(self.labels) or tuple(_value_label(v) for v in values)
        if len(labels) != len(values):
            raise ParameterError(f"axis {self.name!r}.labels", list(labels), f"{len(values)} labels, one per value")
        if len(set(labels)) != len(labels):
            raise ParameterError(f"axis {self.name!r}.labels", list(labels), "distinct labels")
        object.__setattr__(self, "labels", tuple(check_display_text(f"axis {self.name!r}.labels", str(x))
                                                for x in labels))

    @classmethod
    def of(cls, key: str, values: Iterable, *, name: str | None = None,
           labels: Sequence[str] = ()) -> "Axis":
        """An axis that varies the one setting ``key`` over ``values``."""
        return cls(name or key, tuple(((key, v),) for v in values), tuple(labels))

    @property
    def keys(self) -> tuple[str, ...]:
        """Every setting key this axis sets, in first-seen order."""
        out: list[str] = []
        for value in self.values:
            out += [k for k, _ in value if k not in out]
        return tuple(out)

    @property
    def numeric(self) -> tuple[float, ...] | None:
        """The values as numbers when the axis varies one numeric key (for a log or linear x axis)."""
        if len(self.keys) != 1:
            return None
        xs = [dict(v)[self.keys[0]] for v in self.values]
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs):
            return tuple(float(x) for x in xs)
        return None

    def as_json(self) -> dict:
        return {"name": self.name, "values": [dict(v) for v in self.values], "labels": list(self.labels)}


def _setting(axis: str, k: int, value) -> tuple[tuple[str, Any], ...]:
    where = f"axis {axis!r}.values[{k}]"
    if isinstance(value, Mapping):
        items = tuple(sorted(value.items()))
    elif isinstance(value, (tuple, list)) and all(isinstance(i, (tuple, list)) and len(i) == 2 for i in value):
        items = tuple(sorted((str(a), b) for a, b in value))
    else:
        raise ParameterError(where, value, "a mapping of setting keys to values, e.g. {'partition.alpha': 0.5}")
    if not items:
        raise ParameterError(where, value, "at least one setting")
    for key, v in items:
        _check_key(f"{where}.{key}", key, v)
    return items


def _check_key(where: str, key: str, value) -> None:
    if not isinstance(key, str):
        raise ParameterError(where, key, "a setting key")
    head, _, knob = key.partition(".")
    if head in ("data", "partition") and knob:
        if not isinstance(value, (bool, int, float, str)):
            raise ParameterError(where, value, "a number, a bool or a string")
        return
    if key not in PLAIN_KEYS:
        raise ParameterError(where, key, "data.<knob>, partition.<knob>, or one of " + ", ".join(PLAIN_KEYS))
    if key in DATA_SETTINGS:  # the data builder's range, checked before launch
        _checked_setting(key, value, where)
    elif key == "lam":
        check_real(where, value, low=0, low_open=True)
    elif key == "loss":
        make_loss(value)


def _checked_setting(name: str, value, where: str):
    """``value`` of data setting ``name`` as written (an experiment's identity holds it so), once its Param
    took it; refused, the error names ``where`` (and what in a partitioner spec is wrong)."""
    try:
        DATA_SETTINGS[name].validate(value)
    except ParameterError as e:
        raise ParameterError(where if e.name == name else f"{where}: {e.name}", e.value, e.allowed) from None
    return value


def _value_label(value: tuple[tuple[str, Any], ...]) -> str:
    if len(value) == 1:
        return _short(value[0][1])
    return "(" + ", ".join(f"{k.rpartition('.')[2]}={_short(v)}" for k, v in value) + ")"


def _short(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


# -- arms: the algorithm lines ------------------------------------------------------------------------
@dataclass(frozen=True)
class Arm:
    """One algorithm line of the experiment and how its step-like hyperparameter is set.

    ``step``: ``"default"`` (the derived or fixed default), ``"tuned"`` (pilot runs choose it
    in each setting and for each seed, :func:`fedviz.runner.tune.tune`), ``"grid"`` (one cell
    per value of ``values``) or ``"scales"`` (one cell per factor in ``values`` × the derived
    default, resolved on the worker).  ``param`` is the varied hyperparameter; by default the
    one tuning varies (:func:`fedviz.runner.tune.tunable_params`).
    """

    spec: AlgorithmSpec
    step: str = "default"
    values: tuple[float, ...] = ()
    param: str | None = None

    def __post_init__(self):
        if not isinstance(self.spec, AlgorithmSpec):
            raise ParameterError("algorithm", self.spec, "an AlgorithmSpec")
        where = f"{self.spec.label}.step"
        if self.step not in STEP_MODES:
            raise ParameterError(where, self.step, "one of " + ", ".join(STEP_MODES))
        values = tuple(check_real(f"{where} values", v, low=0, low_open=True) for v in self.values)
        if self.step in ("grid", "scales") and not values:
            raise ParameterError(f"{where} values", [], f"at least one value for step = {self.step!r}")
        if self.step in ("default", "tuned") and values:
            raise ParameterError(f"{where} values", list(values), f"no values with step = {self.step!r}")
        if len(set(values)) != len(values):
            raise ParameterError(f"{where} values", list(values), "distinct values")
        object.__setattr__(self, "values", values)
        if self.step != "default":
            from ..runner.tune import tunable_params

            names = tunable_params(self.spec.cls)
            param = self.param or (names[0] if names else None)
            if param is None or param not in {p.name for p in self.spec.cls.params}:
                raise ParameterError(f"{self.spec.label}.param", param,
                                     f"a step-like hyperparameter of {self.spec.name}"
                                     + (f" ({', '.join(names)})" if names else " (it has none to vary)"))
            object.__setattr__(self, "param", param)

    @classmethod
    def of(cls, name: str, hyper: Mapping | None = None, *, label: str | None = None, step: str = "default",
           values: Sequence[float] = (), param: str | None = None) -> "Arm":
        return cls(AlgorithmSpec.of(name, hyper or {}, label=label), step, tuple(values), param)

    @property
    def label(self) -> str:
        return self.spec.label

    def variants(self) -> tuple[tuple[float | None, AlgorithmSpec], ...]:
        """(the grid value or factor, or None; the spec) per cell of this arm in one setting."""
        if self.step in ("default", "tuned"):
            return ((None, self.spec),)
        if self.step == "grid":
            return tuple((v, self.spec.with_hyper({self.param: v}, label=f"{self.label} {self.param}={v:g}",
                                                  group=self.label)) for v in self.values)
        return tuple((f, self.spec.with_hyper(label=f"{self.label} ×{f:g}", group=self.label))
                     for f in self.values)

    def as_json(self) -> dict:
        out = {"name": self.spec.name, "label": self.label, "hyper": dict(self.spec.hyper), "step": self.step}
        if self.values:
            out["values"] = list(self.values)
        if self.param and self.step != "default":
            out["param"] = self.param
        return out


# -- cells ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    """One run of the grid: an algorithm variant on one setting with one seed."""

    key: str                                  # content hash: what determines the result
    setting: tuple[int, ...]                  # the value index on each axis
    arm: str                                  # the arm's label (the line in the figures)
    step: float | None                        # the grid value or factor, None for default / tuned
    seed: int
    job: RunJob

    @property
    def label(self) -> str:
        return self.job.algorithms[0].label


@dataclass(frozen=True)
class Experiment:
    """A named grid: ``arms`` × the settings of ``axes`` (one or two, or none) × ``seeds``.

    Parameters
    ----------
    name : str
        Names the experiment in the history; launching a name again resumes it.
    data : DataSpec
        The base data set; the axes change it.
    arms : tuple of Arm
        The algorithm lines (labels unique).
    axes : tuple of Axis
        Zero, one or two varied settings.
    seeds : tuple of int
        Every cell runs once per seed.  A seed seeds the algorithm and, unless ``data_seed``
        is set, the data (generator and partitioner) too, as ``fedviz run --seed`` does.
    iterations : int
    loss, lam
        The base loss and λ (None: 1/n).
    data_seed : int or None
        Keep the data fixed across seeds (the seeds then vary the algorithms only).
    target : float
        ε of "rounds to reach f − f* ≤ ε".
    description, claim : str
        What it shows, and the published claim it checks (built-in experiments).
    dissimilarity : bool
        Record FedProx's gradient dissimilarity in every cell's records (one more full gradient per
        iteration).  It changes what is recorded, not what is computed: no part of the grid's hash.
    """

    name: str
    data: DataSpec
    arms: tuple[Arm, ...]
    axes: tuple[Axis, ...] = ()
    seeds: tuple[int, ...] = (0,)
    iterations: int = 30
    loss: str = "logistic"
    lam: float | None = None
    data_seed: int | None = None
    target: float = DEFAULT_TARGET
    description: str = ""
    claim: str = ""
    dissimilarity: bool = False

    def __post_init__(self):
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ParameterError("name", self.name, "1–80 letters, digits, blanks and _ . , ( ) + = -, "
                                                    "starting with a letter or digit")
        if not isinstance(self.data, DataSpec):
            raise ParameterError("data", self.data, "a DataSpec")
        arms = tuple(self.arms)
        if not arms or not all(isinstance(a, Arm) for a in arms):
            raise ParameterError("algorithms", arms, "at least one Arm")
        labels = [a.label for a in arms]
        if len(set(labels)) != len(labels):
            raise ParameterError("algorithms", labels, "distinct labels (give two lines of one algorithm a label each)")
        object.__setattr__(self, "arms", arms)
        axes = tuple(self.axes)
        if len(axes) > 2 or not all(isinstance(a, Axis) for a in axes):
            raise ParameterError("axes", axes, "at most two Axis values")
        if len(axes) == 2 and set(axes[0].keys) & set(axes[1].keys):
            raise ParameterError("axes", [a.name for a in axes], "two axes that vary different settings")
        object.__setattr__(self, "axes", axes)
        seeds = tuple(check_int("seeds", s, low=0, high=2**32 - 1) for s in self.seeds)
        if not seeds or len(set(seeds)) != len(seeds):
            raise ParameterError("seeds", list(seeds), "at least one seed, each once")
        object.__setattr__(self, "seeds", seeds)
        object.__setattr__(self, "iterations", check_int("iterations", self.iterations, low=1, high=100_000))
        make_loss(self.loss)
        if self.lam is not None:
            object.__setattr__(self, "lam", check_real("lam", self.lam, low=0, low_open=True))
        if self.data_seed is not None:
            object.__setattr__(self, "data_seed", DATA_SETTINGS["data_seed"].validate(self.data_seed))
        object.__setattr__(self, "target", check_real("target", self.target, low=0, low_open=True))
        # The base data's settings, against the ranges the data builder enforces on the workers:
        # out of range, every cell would fail there one by one; here it is one message before launch.
        check_settings(self.data)
        n = self.size
        if n > MAX_CELLS:
            raise ParameterError("experiment", f"{n:,} cells", f"at most {MAX_CELLS:,} cells",
                                 hint="fewer seeds, settings or stepsizes")

    # -- the grid -------------------------------------------------------------------------------------
    @property
    def settings(self) -> list[tuple[int, ...]]:
        """Every setting, as value indices on the axes (the product, first axis slowest)."""
        out: list[tuple[int, ...]] = [()]
        for axis in self.axes:
            out = [s + (i,) for s in out for i in range(len(axis.values))]
        return out

    @property
    def size(self) -> int:
        per_setting = sum(len(a.values) if a.step in ("grid", "scales") else 1 for a in self.arms)
        return len(self.settings) * per_setting * len(self.seeds)

    def setting_label(self, setting: Sequence[int]) -> str:
        return ", ".join(f"{a.name} = {a.labels[i]}" for a, i in zip(self.axes, setting)) or "base"

    def setting_values(self, setting: Sequence[int]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for axis, i in zip(self.axes, setting):
            out.update(dict(axis.values[i]))
        return out

    def problem(self, setting: Sequence[int], seed: int) -> ProblemSpec:
        """The problem of ``setting`` for ``seed``: the base data, loss and λ with the axes' values."""
        values = self.setting_values(setting)
        data = replace(self.data, seed=self.data_seed if self.data_seed is not None else seed)
        data = apply_settings(data, values)
        return ProblemSpec(data, values.get("loss", self.loss), values.get("lam", self.lam))

    def cells(self) -> list[Cell]:
        """Every cell, setting by setting, seed by seed, arm by arm: the order they are submitted in."""
        out = []
        for setting in self.settings:
            for seed in self.seeds:
                problem = self.problem(setting, seed)
                for arm in self.arms:
                    for step, spec in arm.variants():
                        scales = {spec.label: (arm.param, step)} if arm.step == "scales" else {}
                        config = {"experiment": self.name, "setting": self.setting_label(setting),
                                  "values": self.setting_values(setting), "arm": arm.label,
                                  "step_mode": arm.step, "step": step, "source": "experiment"}
                        job = RunJob(problem, (spec,), self.iterations, seed, config, tune=arm.step == "tuned",
                                     scales=scales, dissimilarity=bool(self.dissimilarity))
                        out.append(Cell(cell_key(problem, spec, arm, step, seed, self.iterations), setting,
                                        arm.label, step, seed, job))
        return out

    def check(self, *, presets_only: bool = False) -> None:
        """Refuse, before anything starts, a setting every cell of it would fail on (a preset knob or
        a partitioner option out of range), naming it; with ``presets_only`` also any data that is
        not a preset (a page opens no path a user types; a file runs from the command line)."""
        from ..data.partition import make_partitioner

        for data in {c.job.make_problem.data for c in self.cells()}:
            for name, source in (("data", data.source), ("test", data.test)):
                if presets_only and source is not None and not (isinstance(source, str) and source.startswith("preset:")):
                    raise ParameterError(name, source, "a preset (preset:<name>) on this page",
                                         hint="a data file runs from a terminal: python -m fedviz experiment FILE.toml")
            if data.is_preset:
                parse_preset_spec(data.source)
            if data.partition:
                make_partitioner(data.partition, n_nodes=data.nodes or 1, seed=data.seed)  # its options, K aside
        self.check_losses()

    def check_losses(self) -> None:
        """Refuse, before anything starts, a loss the data cannot take (issue 22: softmax for data of more
        than two classes, a binary or regression loss otherwise) and an algorithm that does not take the
        loss, naming the algorithm and the registry's reason (:meth:`Algorithm.loss_refusal`): else every
        cell of it fails on the workers, one by one."""
        problems = {(c.job.make_problem.data, c.job.make_problem.loss) for c in self.cells()}
        classes: dict[DataSpec, int | None] = {}
        for data, loss in sorted(problems, key=lambda p: (str(p[0].source)[:200], p[1])):
            if data not in classes:
                try:
                    classes[data] = data_classes(data)
                except OSError:  # a file not readable here (a cluster's workers may read it): they say why
                    classes[data] = None
            C, name = classes[data], _data_name(data)
            if C is None:
                continue
            if C > 1 and loss != "softmax":
                raise ParameterError("loss", loss, f"'softmax': {name} holds {C} classes",
                                     hint='write loss = "softmax" in the experiment (softmax regression over '
                                          'the classes), or positive = <a class> for one-vs-rest')
            if C == 1 and loss == "softmax":
                raise ParameterError("loss", loss, f"a binary or regression loss: {name} holds two classes or "
                                                   "real targets (softmax is for data of more classes)")
        for loss in sorted({loss for _, loss in problems}):
            for arm in self.arms:
                for _, spec in arm.variants():
                    why = spec.cls.loss_refusal(loss, spec.values)
                    if why is not None:
                        raise ParameterError(f"algorithm {arm.label!r}", spec.name,
                                             f"an algorithm that takes the {loss} loss", hint=why)

    # -- identity -------------------------------------------------------------------------------------
    @property
    def content_hash(self) -> str:
        """What this grid computes, as a hash (:func:`content_hash`): two experiments with equal
        hashes have the same cells whatever their names; a stored name is reused only by its own."""
        return content_hash(self.as_json())

    # -- text forms -----------------------------------------------------------------------------------
    def as_json(self) -> dict:
        data = {k: v for k, v in vars(self.data).items()  # unseen, deal_test off: the identity of before them
                if k != "loader_options" and v is not None and not isinstance(v, bytes) and in_identity(k, v)}
        out = {"name": self.name, "data": data, "uploaded": isinstance(self.data.source, bytes),
               "algorithms": [a.as_json() for a in self.arms], "axes": [a.as_json() for a in self.axes],
               "seeds": list(self.seeds), "iterations": self.iterations, "loss": self.loss, "lam": self.lam,
               "data_seed": self.data_seed, "target": self.target, "description": self.description,
               "claim": self.claim}
        # An upload's bytes are not kept, but their hash is: two uploads are two experiments.
        uploads = {k: "sha256:" + hashlib.sha256(v).hexdigest()
                   for k, v in (("source", self.data.source), ("test", self.data.test)) if isinstance(v, bytes)}
        if uploads:
            out["uploads"] = uploads
        if self.dissimilarity:  # only when asked: the as_json of every other grid is as before
            out["dissimilarity"] = True
        return out


#: The keys of :meth:`Experiment.as_json` that say what a grid computes and how it is judged; its
#: name, description and claim are words about it, and the data's display names only label an upload.
CONTENT_KEYS = ("data", "uploaded", "uploads", "algorithms", "axes", "seeds", "iterations", "loss", "lam",
                "data_seed", "target")
_DISPLAY_ONLY = ("name", "test_name")


def data_classes(data: DataSpec) -> int:
    """C, the model's outputs on ``data``: the number of classes for multiclass data (issue 22), else 1.
    A preset's is its generator's (``labels = "classes"``: fedprox-synthetic), read off its config
    without drawing it; a file is built (:mod:`fedviz.runner.cache`: the cells' own copy where they run
    in this process) and its labels counted (:mod:`fedviz.data.labels`)."""
    from ..data.presets import preset_config
    from ..runner import cache

    if data.is_preset:
        name, overrides = parse_preset_spec(data.source)
        config = preset_config(name, **overrides)
        return int(config.n_classes) if getattr(config, "labels", None) == "classes" else 1
    ds = cache.dataset(data)
    return int(ds.n_classes) if ds.multiclass else 1


def _data_name(data: DataSpec) -> str:
    if isinstance(data.source, bytes):
        return data.name or "the uploaded file"
    return str(data.source).rsplit("/", 1)[-1]


def content_hash(doc: Mapping[str, Any]) -> str:
    """A hash of the grid that :meth:`Experiment.as_json` wrote in ``doc`` (stored or new): its data,
    lines, axes, seeds, iterations, loss, λ and target, never its name or prose.  Numbers are compared
    as numbers (``1`` and ``1.0`` are one value), so a grid read back from the history, from TOML or
    built in Python hashes alike."""
    content = {k: doc.get(k) for k in CONTENT_KEYS}
    if isinstance(content["data"], Mapping):
        content["data"] = {k: v for k, v in content["data"].items() if k not in _DISPLAY_ONLY}
    text = json.dumps(_canonical(content), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _canonical(x):
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return x
    if isinstance(x, (int, float)):
        return float(x)
    if isinstance(x, Mapping):
        return {str(k): _canonical(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_canonical(v) for v in x]
    return str(x)


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The content keys in which two experiments' ``as_json`` differ ('algorithms', 'seeds', ...)."""
    return [k for k in CONTENT_KEYS if content_hash({k: old.get(k)}) != content_hash({k: new.get(k)})]


def cell_key(problem: ProblemSpec, spec: AlgorithmSpec, arm: Arm, step, seed: int, iterations: int) -> str:
    """A hash of what determines a cell's result (never its place in the grid)."""
    data = problem.data
    source = data.source if isinstance(data.source, str) else "sha256:" + hashlib.sha256(data.source).hexdigest()
    test = data.test if not isinstance(data.test, bytes) else "sha256:" + hashlib.sha256(data.test).hexdigest()
    content = {"data": {**{k: v for k, v in vars(data).items() if k not in ("loader_options", "name", "test_name")
                           and in_identity(k, v)},  # unseen, deal_test off: the key of before them
                        "source": source, "test": test},
               "loss": problem.loss, "lam": problem.lam, "algorithm": spec.name, "hyper": dict(spec.hyper),
               "step_mode": arm.step, "param": arm.param, "step": step, "seed": seed, "iterations": iterations}
    text = json.dumps(content, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def apply_settings(data: DataSpec, values: Mapping[str, Any]) -> DataSpec:
    """``data`` with the setting keys of ``values`` applied (loss and λ are the problem's, not the data's)."""
    changes: dict[str, Any] = {}
    preset = {k.partition(".")[2]: v for k, v in values.items() if k.startswith("data.")}
    if preset:
        if not data.is_preset:
            raise ParameterError(f"data.{next(iter(preset))}", data.name or "a file",
                                 "a preset data set (data.<knob> changes a generator's knob)")
        name, overrides = parse_preset_spec(data.source)
        changes["source"] = "preset:" + format_preset_spec(name, {**overrides, **preset})
    partition = values.get("partition", data.partition)
    knobs = {k.partition(".")[2]: v for k, v in values.items() if k.startswith("partition.")}
    if knobs:
        if partition is None:
            raise ParameterError(f"partition.{next(iter(knobs))}", None,
                                 "a base data set with a partition spec (e.g. partition = 'dirichlet')")
        name, options = PARTITION_SPEC.split(partition)
        partition = PARTITION_SPEC.join(name, {**options, **{k: _short(v) for k, v in knobs.items()}})
    if partition != data.partition:
        changes["partition"] = partition
    data = replace(data, **changes) if changes else data
    return with_settings(data, {k: v for k, v in values.items() if k in DATA_SETTINGS and k != "partition"})


# -- TOML ----------------------------------------------------------------------------------------------
def from_mapping(doc: Mapping[str, Any], *, where: str = "experiment") -> Experiment:
    """An experiment from its TOML document (already parsed); every error names the key.

    ::

        name = "label-skew-sweep"
        data = "preset:google-plus-small"      # or a LIBSVM path
        partition = "dirichlet:alpha=1"        # optional, the base partitioner
        nodes = 100                            # optional; so are test_fraction, split, unseen, deal_test
        loss = "logistic"                      # softmax for a file of more than two classes
        positive = 3                           # optional: that class against the rest (one-vs-rest)
        iterations = 30
        seeds = [0, 1, 2]
        target = 1e-4

        [[algorithm]]
        name = "fedavg"
        step = "tuned"                         # default | tuned | grid | scales

        [[algorithm]]
        name = "fsvrg"
        step = "scales"
        values = [0.25, 1, 4]

        [[axis]]
        key = "partition.alpha"
        values = [0.01, 0.1, 1, 10, 100]
    """
    known = {"name", "data", "test", *DATA_SETTINGS, "loss", "lam", "iterations", "seeds", "target", "description",
             "claim", "algorithm", "axis", "bias", "positive", "dissimilarity"}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise ParameterError(f"{where}.{unknown[0]}", doc[unknown[0]], "one of the keys " + ", ".join(sorted(known)))
    for key in ("name", "data", "algorithm"):
        if key not in doc:
            raise ParameterError(f"{where}.{key}", None, "to be given")
    # The data settings (the one table: names and ranges of the link's keys and the command line's flags), as
    # written; the data seed is the experiment's (it holds the data fixed across the seeds).
    settings = {name: _checked_setting(name, doc[name], f"{where}.{name}") for name in DATA_SETTINGS if name in doc}
    data_seed = settings.pop("data_seed", None)
    data = with_settings(DataSpec(source=doc["data"], test=doc.get("test"), bias=doc.get("bias"),
                                  positive=doc.get("positive")), settings)
    arms = []
    for k, item in enumerate(_tables(doc["algorithm"], f"{where}.algorithm")):
        extra = sorted(set(item) - {"name", "label", "hyper", "step", "values", "param"})
        if extra:
            raise ParameterError(f"{where}.algorithm[{k}].{extra[0]}", item[extra[0]],
                                 "one of name, label, hyper, step, values, param")
        if "name" not in item:
            raise ParameterError(f"{where}.algorithm[{k}].name", None, "to be given")
        with _located(f"{where}.algorithm[{k}]"):
            arms.append(Arm.of(item["name"], item.get("hyper") or {}, label=item.get("label"),
                               step=item.get("step", "default"), values=item.get("values", ()),
                               param=item.get("param")))
    axes = []
    for k, item in enumerate(_tables(doc.get("axis", []), f"{where}.axis")):
        extra = sorted(set(item) - {"key", "name", "values", "labels"})
        if extra:
            raise ParameterError(f"{where}.axis[{k}].{extra[0]}", item[extra[0]], "one of key, name, values, labels")
        if "values" not in item:
            raise ParameterError(f"{where}.axis[{k}].values", None, "to be given")
        with _located(f"{where}.axis[{k}]"):
            if "key" in item:
                axes.append(Axis.of(item["key"], item["values"], name=item.get("name"), labels=item.get("labels", ())))
            else:
                axes.append(Axis(item.get("name", f"axis {k + 1}"), tuple(item["values"]),
                                 tuple(item.get("labels", ()))))
    seeds = doc.get("seeds", [0])
    if isinstance(seeds, int):
        seeds = list(range(seeds))
    return Experiment(doc["name"], data, tuple(arms), tuple(axes), tuple(seeds), doc.get("iterations", 30),
                      doc.get("loss", "logistic"), doc.get("lam"), data_seed,
                      doc.get("target", DEFAULT_TARGET), doc.get("description", ""), doc.get("claim", ""),
                      _flag(doc.get("dissimilarity", False), f"{where}.dissimilarity"))


def _flag(value, where: str) -> bool:
    if not isinstance(value, bool):
        raise ParameterError(where, value, "true or false")
    return value


def from_toml(text: str, *, where: str = "experiment") -> Experiment:
    """Parse an experiment file (see :func:`from_mapping`); a syntax error names its line."""
    import tomllib

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise FedvizError(f"{where}: not a valid TOML document: {e}") from None
    return from_mapping(doc, where=where)


def from_json(doc: Mapping[str, Any]) -> Experiment:
    """The experiment :meth:`Experiment.as_json` wrote (an upload's bytes are not kept: such
    an experiment is reopened for its results, not resumed)."""
    data = dict(doc["data"])
    if doc.get("uploaded") and "source" not in data:
        data["source"] = b""  # the bytes are gone: a stand-in, so the results can be read (never resumed)
    arms = tuple(Arm.of(a["name"], a.get("hyper") or {}, label=a.get("label"), step=a.get("step", "default"),
                        values=a.get("values", ()), param=a.get("param")) for a in doc["algorithms"])
    axes = tuple(Axis(a["name"], tuple(a["values"]), tuple(a.get("labels", ()))) for a in doc.get("axes", ()))
    return Experiment(doc["name"], DataSpec(**data), arms, axes, tuple(doc.get("seeds", (0,))),
                      doc.get("iterations", 30), doc.get("loss", "logistic"), doc.get("lam"), doc.get("data_seed"),
                      doc.get("target", DEFAULT_TARGET), doc.get("description", ""), doc.get("claim", ""),
                      bool(doc.get("dissimilarity", False)))


@contextmanager
def _located(where: str):
    """Prefix a ParameterError's name with where it was found in the file (``experiment.algorithm[1]``)."""
    try:
        yield
    except ParameterError as e:
        raise ParameterError(f"{where}: {e.name}", e.value, e.allowed) from None


def parse_values(text: str, where: str) -> list:
    """An axis's values typed as a comma list: numbers and booleans where they read as TOML values
    (``"0.1, 1, 10"``, ``"true, false"``), words otherwise (``"logistic, squared"``)."""
    import tomllib

    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise ParameterError(where, text, "a comma list of values, e.g. 0.1, 1, 10")
    out = []
    for t in items:
        try:
            out.append(tomllib.loads(f"v = {t}")["v"])
        except tomllib.TOMLDecodeError:
            out.append(t)
    return out


def _tables(value, where: str) -> list[Mapping]:
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise ParameterError(where, value, "one or more tables ([[...]] in TOML)")
    return value


def finite(x: float) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


__all__ = ["Arm", "Axis", "CONTENT_KEYS", "Cell", "DEFAULT_TARGET", "Experiment", "MAX_CELLS", "STEP_MODES",
           "apply_settings", "cell_key", "content_hash", "differences", "from_json", "from_mapping", "from_toml",
           "parse_values"]
