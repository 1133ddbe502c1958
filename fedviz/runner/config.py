"""The frozen configuration of a dashboard run, and its round trip through a URL query string.

A :class:`RunConfig` is what the Run page's widgets produce and what a shared link
reproduces (as TensorFlow Playground does): the data (a :class:`DataSpec`), the loss,
λ, the algorithms with their hyperparameters, the number of iterations and the seed.
Query-string values are validated exactly like widget values; a bad one is reported
by name and dropped, never trusted.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping

from ..algorithms import ALGORITHMS, get_algorithm
from ..algorithms.spec import AlgorithmSpec
from ..data.build import PRESET_PREFIX, DataSpec
from ..data.settings import DATA_SETTINGS, in_identity, settings_of, spec_field, with_settings
from ..errors import FedvizError, ParameterError
from ..params import Param, param_table
from ..validation import check_int, check_real

DEFAULT_DATA = DataSpec(source=PRESET_PREFIX + "google-plus-small")
#: The paper's Figure 2 line-up.
DEFAULT_ALGORITHMS = ("fsvrg", "gd", "cocoa-plus")
MAX_ITERATIONS = 10_000


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines a run's curves (given the same machine's floating point).

    ``algorithms`` is a tuple of ``(name, ((param, value), ...))`` with only the
    hyperparameters that differ from the defaults (the link's shape); :meth:`specs` gives
    them as :class:`~fedviz.algorithms.spec.AlgorithmSpec`, the value every runner takes.
    Each is validated once, here (stored as validated), unless it comes as the
    :class:`~fedviz.algorithms.base.Hyper` a widget or a link validated: that is taken as it is.
    """

    data: DataSpec = DEFAULT_DATA
    loss: str = "logistic"
    lam: float | None = None
    algorithms: tuple = tuple((name, ()) for name in DEFAULT_ALGORITHMS)
    iterations: int = 30
    seed: int = 0
    #: Choose each algorithm's step-like hyperparameters by pilot runs before its run (runner.tune).
    tune: bool = False
    #: Run each algorithm at its stepsize × a grid and keep the best (runner.sweep).
    sweep: bool = False
    #: The validated specs, made once in ``__post_init__`` (not an argument; not compared).
    _specs: tuple = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self):
        check_int("iterations", self.iterations, low=1, high=MAX_ITERATIONS)
        check_int("seed", self.seed, low=0, high=2**32 - 1)
        if not isinstance(self.tune, bool) or not isinstance(self.sweep, bool):
            raise ParameterError("tune/sweep", (self.tune, self.sweep), "true or false")
        if self.lam is not None:
            check_real("lam", self.lam, low=0, low_open=True)
        if not self.algorithms:
            raise ParameterError("algorithms", "none", "at least one algorithm")
        specs = []
        for item in self.algorithms:
            if not (isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str)):
                raise ParameterError("algorithms", item, "(name, hyperparameters) pairs")
            name, hyper = item
            specs.append(AlgorithmSpec.of(name, hyper if isinstance(hyper, Mapping) else dict(hyper)))
        object.__setattr__(self, "_specs", tuple(specs))
        # Stored as validated (the link's shape: the given values only), so a config hands them on checked.
        object.__setattr__(self, "algorithms", tuple((s.name, s.hyper) for s in specs))
        for spec in self._specs:
            name, cls = spec.name, spec.cls
            why = cls.loss_refusal(self.loss, spec.values)
            if why is not None:  # refused here, with the remedy, not as a failed run
                allowed = ", ".join(cls.losses) + ("" if cls.softmax_refusal(spec.values) else ", softmax")
                raise ParameterError(f"{name} with loss", self.loss, f"one of {allowed} (the losses {cls.title} "
                                     "supports)", hint=why if self.loss == "softmax" else None)

    def hyper(self, name: str) -> dict:
        return dict(dict(self.algorithms)[name])

    def specs(self) -> tuple[AlgorithmSpec, ...]:
        """One validated :class:`AlgorithmSpec` per algorithm, labelled (and grouped) by its title
        (made once, when the config was)."""
        return self._specs

    def for_data(self, multiclass: bool) -> tuple["RunConfig | None", list[str]]:
        """These settings as a page runs them on data of ``multiclass`` (issue 22): the loss those data
        take (:func:`~fedviz.problems.losses.loss_for`: softmax for many classes, a binary loss otherwise)
        and the algorithms that take it; returns the settings (None when no algorithm is left) and, for
        each algorithm left out, the registry's sentence saying why (:meth:`Algorithm.loss_refusal`)."""
        from ..problems.losses import loss_for

        loss = loss_for(self.loss, multiclass)
        kept, refused = [], []
        for name, hyper in self.algorithms:
            why = get_algorithm(name).loss_refusal(loss, dict(hyper))
            if why is None:
                kept.append((name, hyper))
            else:
                refused.append(why)
        if not kept:
            return None, refused
        return replace(self, loss=loss, algorithms=tuple(kept)), refused

    def as_json(self) -> dict:
        data = self.data
        source = data.source if isinstance(data.source, str) else f"upload:{data.name or 'file'}"
        # Every data setting by its DataSpec field; those added later only when set (the stored configs of
        # before them read the same: data.settings.in_identity).
        settings = {spec_field(name): value for name, value in settings_of(data).items()}
        return {"data": {"source": source, "test": None if data.test is None else
                         (data.test if isinstance(data.test, str) else f"upload:{data.test_name or 'file'}"),
                         **{k: v for k, v in settings.items() if in_identity(k, v)}, "positive": data.positive},
                "loss": self.loss, "lam": self.lam,
                "algorithms": {name: dict(hyper) for name, hyper in self.algorithms},
                "iterations": self.iterations, "seed": self.seed, "tune": self.tune, "sweep": self.sweep}


def to_query(config: RunConfig) -> dict[str, str]:
    """The query-string form: short keys, only what differs from the defaults.

    An uploaded file cannot travel in a link; its config is written without the data
    (``data=upload``), and the link then opens on the default data set.
    """
    q: dict[str, str] = {}
    d = config.data
    if isinstance(d.source, bytes) or (isinstance(d.source, str) and not d.source.startswith(PRESET_PREFIX)):
        q["data"] = "upload"
    elif d.source != DEFAULT_DATA.source:
        q["data"] = d.source[len(PRESET_PREFIX):]
    for name, value in settings_of(d).items():  # the data settings, by their names, where not at their defaults
        if value != DATA_SETTINGS[name].default:
            q[name] = _link_text(DATA_SETTINGS[name], value)
    if config.loss != "logistic":
        q["loss"] = config.loss
    if config.lam is not None:
        q["lam"] = repr(config.lam)
    names = [name for name, _ in config.algorithms]
    if tuple(names) != DEFAULT_ALGORITHMS:
        q["algorithms"] = ",".join(names)
    for name, hyper in config.algorithms:
        cls = get_algorithm(name)
        for key, value in hyper:
            q[f"{name}.{key}"] = cls.param(key).format(value)
    if config.iterations != 30:
        q["iterations"] = str(config.iterations)
    if config.seed:
        q["seed"] = str(config.seed)
    if config.tune:
        q["tune"] = "1"
    if config.sweep:
        q["sweep"] = "1"
    return q


def _link_text(p: Param, value) -> str:
    """A value as the link writes it: :meth:`Param.format`, but a boolean as ``1``, the link's word for on
    (``tune=1``; every word of :data:`~fedviz.params.TRUE_WORDS` reads back)."""
    return ("1" if value else "0") if p.kind == "bool" else p.format(value)


#: The keys of a link besides the hyperparameters (``<algorithm>.<name>``), in the order of the pages: the
#: data settings are :data:`~fedviz.data.settings.DATA_SETTINGS`, under their names.
LINK_KEYS = ("data", *DATA_SETTINGS, "loss", "lam", "algorithms", "iterations", "seed", "tune", "sweep")

#: The link's plain settings, read by the same text parser as every hyperparameter and knob: the data
#: settings' table, then the run's (``data``, ``loss`` and ``algorithms`` are names and specs, read below).
LINK_PARAMS = param_table(
    *DATA_SETTINGS.values(),
    Param("lam", "float", None, "The regulariser λ (none: 1/n).", low=0, low_open=True),
    Param("iterations", "int", 30, "Outer iterations of every algorithm.", low=1, high=MAX_ITERATIONS),
    Param("seed", "int", 0, "Seed of the algorithms' random choices.", low=0, high=2**32 - 1),
    Param("tune", "bool", False, "Choose each algorithm's stepsize by pilot runs first."),
    Param("sweep", "bool", False, "Run each algorithm at its stepsize × a grid and keep the best."),
)


def from_query(query: Mapping[str, str]) -> tuple[RunConfig, list[str]]:
    """Parse a query string into a config.  Returns the config and a list of problems
    (each names the key and what was wrong); a bad key is dropped, the rest is kept."""
    problems: list[str] = []
    read: set[str] = set()

    def take(key, parse):
        if key not in query:
            return None
        read.add(key)
        try:
            return parse(str(query[key]))
        except (FedvizError, ValueError) as e:
            problems.append(f"{key}: {e}")
            return None

    data_kw = {}
    source = take("data", _parse_source)
    if source is not None:
        data_kw["source"] = source
    settings = {}
    for name, p in DATA_SETTINGS.items():
        value = take(name, p.parse)
        if value is not None:
            settings[name] = value
    kw: dict = {}
    if data_kw or settings:
        kw["data"] = with_settings(replace(DEFAULT_DATA, **data_kw), settings)
    loss = take("loss", _parse_loss)
    if loss:
        kw["loss"] = loss
    lam = take("lam", LINK_PARAMS["lam"].parse)
    if lam is not None:
        kw["lam"] = lam
    names = take("algorithms", _parse_algorithms) or list(DEFAULT_ALGORITHMS)
    algos = []
    for name in names:
        cls = get_algorithm(name)
        hyper = {}
        for p in cls.params:  # the text read here; the values checked below, once, all together
            key = f"{name}.{p.name}"
            value = take(key, lambda t, p=p, name=name: p.convert(t, p.qualname(name)))
            if value is not None:
                hyper[p.name] = value
        hp, errors = cls.check(hyper)
        if errors:  # each bad key dropped with its reason; the rest checked again without them
            for param, e in errors.items():
                problems.append(f"{name}.{param}: {e}" if param is not None else str(e))
                hyper.pop(param, None)
            hp, errors = cls.check(hyper)
            if errors:  # a combination still refused: the algorithm at its defaults
                problems.extend(str(e) for e in errors.values())
                hp = cls.validate({})
        algos.append((name, hp))
    kw["algorithms"] = tuple(algos)
    for key in ("iterations", "seed", "tune", "sweep"):
        value = take(key, LINK_PARAMS[key].parse)
        if value is not None:
            kw[key] = value
    # A mistyped key would otherwise be dropped without a word, and the run made with a default.
    for key in (key for key in query if key not in read):
        owner, dot, param = key.partition(".")
        if not dot:
            problems.append(f"{key}: not a setting a link can carry ({', '.join(LINK_KEYS)})")
        elif owner not in names:
            problems.append(f"{key}: not a hyperparameter of a chosen algorithm ({', '.join(names)})")
        else:
            known = ", ".join(p.name for p in get_algorithm(owner).params) or "none"
            problems.append(f"{key}: {owner} has no hyperparameter {param!r} (it has: {known})")
    try:
        return RunConfig(**kw), problems
    except FedvizError as e:  # a combination that is invalid as a whole
        problems.append(str(e))
        return RunConfig(), problems


def _parse_source(text: str):
    if text == "upload":
        raise ValueError("an uploaded file cannot be shared in a link; upload it again on the Data page")
    from ..data.presets import make_preset  # noqa: F401 - the import checks availability
    from ..data.presets import parse_preset_spec

    parse_preset_spec(text)  # validates the name and the overrides
    return PRESET_PREFIX + text


def _parse_loss(text: str):
    from ..problems.losses import make_loss

    return make_loss(text).name


def _parse_algorithms(text: str):
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise ValueError("no algorithm named")
    for name in names:
        if name not in ALGORITHMS:
            raise ParameterError("algorithms", name, "one of " + ", ".join(ALGORITHMS))
    return list(dict.fromkeys(names))
