"""One vocabulary for every parameter of fedviz, and one grammar for the texts that set them.

An algorithm's hyperparameters, a partitioner's knobs, the generators' fields and the
settings a link carries are all described by :class:`Param`: name, kind, default (``None``:
derived from the problem, or unset), allowed range, help and an optional label.  The same
record

- validates a value given in Python (:meth:`Param.validate`),
- reads a value given as text (:meth:`Param.parse`; :meth:`Param.convert` without the range
  check), so that a link, a spec string and the command line accept the same words,
- writes a value back as that text (:meth:`Param.format`),
- words its range (:meth:`Param.range_text`, by :func:`fedviz.validation.allowed_text`, as the
  errors word it), and
- tells a UI which input to draw, with its bounds (``fedviz.ui.param_input``), and
- checks a whole set of values once (:func:`check_values`), handing on a :class:`Checked`
  mapping that the layers below trust instead of checking again ("validated once, at the
  edge": see docs/architecture.md, "Where a value is checked").

Texts of the form ``name:key=value,key=value`` (partitioners) and
``name?key=value&key=value`` (presets) are split by one :class:`SpecGrammar`;
``key=value`` items (``--set gd.stepsize=0.5``) by :func:`split_item`.

The words a text may use, everywhere:

- booleans: ``true/false``, ``yes/no``, ``on/off``, ``1/0`` (any case);
- specs (a partitioner's ``dirichlet:alpha=0.5``): the text, read by the parameter's ``reader``;
- integers: ``10``, ``1e1`` or ``10.0`` (but not ``2.5``);
- numbers: anything ``float`` reads that is finite;
- a parameter whose default is ``None`` (derived, or unset): also ``none`` or ``null``.

From Python, a boolean parameter takes ``True``/``False`` (or a numpy bool) only: ``1`` or
``"yes"`` are text, and text goes through :meth:`Param.parse`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Iterable, Iterator, Mapping

import numpy as np

from .errors import ParameterError
from .validation import allowed_text, check_choice, check_int, check_real

__all__ = ["Param", "Checked", "check_values", "KINDS", "TRUE_WORDS", "FALSE_WORDS", "NONE_WORDS", "param_table", "check_key",
           "parse_options", "human_label", "SpecGrammar", "split_item"]

#: The kinds of parameter, as :attr:`Param.kind` names them.
KINDS = ("float", "int", "bool", "choice", "spec")
_KIND_OF_TYPE = {float: "float", int: "int", bool: "bool", str: "choice"}

TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")
#: Words for "no value" of a parameter whose default is None (derived from the problem, or unset).
NONE_WORDS = ("none", "null")


@dataclass(frozen=True)
class Param:
    """One parameter: its kind, default, allowed range and help, for code, text and widgets alike.

    Attributes
    ----------
    name : str
        The key, as written in a spec string, a link and ``__init__``.
    kind : {'float', 'int', 'bool', 'choice', 'spec'}
        The type of the value; the Python types ``float``, ``int``, ``bool`` (and ``str`` for a
        choice) are accepted and stored as these names.  A 'spec' is a text in a grammar of its
        own (a partitioner spec, ``dirichlet:alpha=0.5``), which ``reader`` reads and checks.
    default
        The default value; ``None`` means derived from the problem (e.g. a stepsize 1/L, whose
        help says how), or unset for an optional field.  Either way ``None`` is then a valid value.
    help : str
        One or two sentences for tooltips and ``--help``.
    low, high : float or None
        Bounds of the allowed range (None: unbounded); an integer's bounds are closed.
    low_open, high_open : bool
        Whether the bound itself is excluded (floats only).
    choices : tuple
        The allowed values of a 'choice'; the names a 'spec' may start with (for its range's words).
    log : bool
        The value spans orders of magnitude: a UI lets it be typed as ``1e-3``.
    label : str
        The words a UI shows (default: :func:`human_label` of the name).
    reader : callable or None
        A 'spec''s reader: the text (stripped) → the value, or :class:`ParameterError` naming what in
        it is wrong (an unknown name, an option out of its range).  The grammar and its registry live
        in a higher layer (``fedviz.data.partition``), so the reader is handed in.
    """

    name: str
    kind: str
    default: Any
    help: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple = ()
    log: bool = False
    label: str = ""
    reader: Callable[[str], Any] | None = None

    def __post_init__(self):
        kind = _KIND_OF_TYPE.get(self.kind, self.kind) if isinstance(self.kind, type) else self.kind
        if kind not in KINDS:
            raise TypeError(f"parameter {self.name!r}: unknown kind {self.kind!r} (one of {', '.join(KINDS)})")
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "choices", tuple(self.choices))
        if (kind == "spec") != (self.reader is not None):
            raise TypeError(f"parameter {self.name!r}: a reader is for a 'spec', and a 'spec' needs one")
        if self.default is not None:
            # A default is handed on unchecked (it is not a user's value): it must obey its own
            # rule, checked once here, when the parameter is defined.
            try:
                self.validate(self.default, "")
            except ParameterError as e:
                raise TypeError(f"parameter {self.name!r}: its default breaks its own range ({e})") from None

    # -- words --------------------------------------------------------------------------------
    def qualname(self, owner: str) -> str:
        """The name errors show: ``owner.name`` (``dirichlet.alpha``), or the bare name."""
        return f"{owner}.{self.name}" if owner else self.name

    def range_text(self) -> str:
        """The allowed values in words, as the errors of :meth:`validate` word them."""
        return allowed_text(self.kind, self.low, self.high, self.low_open, self.high_open, choices=self.choices)

    @property
    def allowed(self) -> str:
        """:meth:`range_text`, as an attribute."""
        return self.range_text()

    @property
    def shown_label(self) -> str:
        """What a widget is labelled: :attr:`label`, else the name in words."""
        return self.label or human_label(self.name)

    @property
    def bounds(self) -> tuple:
        """(low, high) as values of this kind, for a widget's min and max (None: unbounded)."""
        cast = int if self.kind == "int" else float
        return tuple(None if b is None else cast(b) for b in (self.low, self.high))

    # -- values -------------------------------------------------------------------------------
    def validate(self, value, owner: str = ""):
        """``value`` (a Python value) as this parameter's type, or :class:`ParameterError` naming
        ``owner.name`` and the range.  ``None`` is valid when the default is ``None``."""
        qual = self.qualname(owner)
        if value is None and self.default is None:
            return None
        if self.kind == "float":
            return check_real(qual, value, low=self.low, high=self.high,
                              low_open=self.low_open, high_open=self.high_open)
        if self.kind == "int":
            low, high = self.bounds
            return check_int(qual, value, low=low, high=high)
        if self.kind == "bool":
            if isinstance(value, (bool, np.bool_)):
                return bool(value)
            raise ParameterError(qual, value, self.range_text())
        if self.kind == "spec":
            if not isinstance(value, str):
                raise ParameterError(qual, value, self.range_text())
            return self.reader(value.strip())
        return check_choice(qual, value, self.choices)

    def convert(self, text: str, qualname: str):
        """Text → a value of this kind, not yet checked against the range: the one text parser.

        ``qualname`` is the name an error shows (the caller's spelling, e.g. a preset's alias).
        """
        word = str(text).strip()
        if self.default is None and word.lower() in NONE_WORDS:
            return None
        if self.kind == "bool":
            if word.lower() in TRUE_WORDS:
                return True
            if word.lower() in FALSE_WORDS:
                return False
        elif self.kind in ("choice", "spec"):
            return word
        else:
            try:
                number = float(word)
            except ValueError:
                number = math.nan
            if self.kind == "float" and not math.isnan(number):
                return number
            if self.kind == "int":
                try:
                    return int(word)  # exact beyond 2**53
                except ValueError:
                    if math.isfinite(number) and number.is_integer():
                        return int(number)  # "1e4", "10.0"
        raise ParameterError(qualname, text, self.range_text())

    def parse(self, text: str, owner: str = ""):
        """Text (a link's, a spec string's, the command line's) → a validated value."""
        return self.validate(self.convert(text, self.qualname(owner)), owner)

    def format(self, value) -> str:
        """The text :meth:`parse` reads back as ``value`` (text is kept as it is)."""
        if isinstance(value, str):
            return value.strip()
        if value is None:
            return "none"
        if self.kind == "bool":
            return "true" if value else "false"
        if self.kind == "float":
            return repr(float(value))
        return str(value)


class Checked(Mapping):
    """A frozen ``{name: value}`` of one owner's parameters, every value passed by its :class:`Param`.

    Made only by validation (:func:`check_values`, e.g. through
    :meth:`fedviz.algorithms.base.Algorithm.validate`), never by hand: a layer that receives
    one from its ``owner`` trusts it instead of checking again, so a value is checked once, at
    the edge where it entered (a widget, a link, the command line, a spec file, a Python call).

    Attributes
    ----------
    owner : object
        Whose parameters these are (an Algorithm class); another owner's Checked is not trusted.
    given : tuple of str
        The names given explicitly, in the order given (the others hold their defaults).
    """

    __slots__ = ("owner", "given", "_values")

    def __init__(self, *args, **kwargs):
        raise TypeError("Checked values are made by validation (check_values, Algorithm.validate), not by hand")

    @classmethod
    def _make(cls, owner, values: Mapping[str, Any], given: Iterable[str]) -> "Checked":
        obj = object.__new__(cls)
        object.__setattr__(obj, "owner", owner)
        object.__setattr__(obj, "given", tuple(given))
        object.__setattr__(obj, "_values", dict(values))
        return obj

    def __setattr__(self, name, value):
        raise AttributeError("Checked values are frozen")

    def __getitem__(self, key: str):
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __hash__(self) -> int:
        return hash(tuple(self._values.items()))

    def __repr__(self) -> str:
        return f"Checked({self._values!r})"

    def __reduce__(self):  # a job travels to a Dask worker pickled, and stays trusted there
        return (_checked, (self.owner, self._values, self.given))

    def given_items(self) -> tuple[tuple[str, Any], ...]:
        """The values given explicitly, as sorted ``(name, value)`` pairs (a link's and a label's shape)."""
        return tuple(sorted((k, self._values[k]) for k in self.given))


def _checked(owner, values, given) -> Checked:
    return Checked._make(owner, values, given)


def check_values(params: Iterable[Param], given: Mapping[str, Any], owner: str,
                 ) -> tuple[dict[str, Any], dict[str, ParameterError]]:
    """Every value of ``given`` through its Param's :meth:`~Param.validate`, once; the others
    take their defaults.  Returns (values by name in the params' order, errors by name): an
    unknown name is an error too, listing the known ones.  Nothing is raised, so an edge can
    show every error beside its input; :func:`first_error` picks the one to raise."""
    table = {p.name: p for p in params}
    errors: dict[str, ParameterError] = {}
    for name in sorted((k for k in given if k not in table), key=str):
        errors[name] = ParameterError(f"{owner}.{name}", given[name],
                                      "a known hyperparameter: " + (", ".join(table) or "none"))
    values: dict[str, Any] = {}
    for name, p in table.items():
        if name not in given:
            values[name] = p.default
            continue
        try:
            values[name] = p.validate(given[name], owner)
        except ParameterError as e:
            errors[name] = e
    return values, errors


def param_table(*params: Param) -> Mapping[str, Param]:
    """A read-only ``{name: param}`` table, in the order given (the order UIs show)."""
    return MappingProxyType({p.name: p for p in params})


def check_key(owner: str, key: str, known: Iterable[str], noun: str = "key") -> str:
    """``key`` if it is one of ``known``, else :class:`ParameterError` (named ``"<owner> <noun>"``)
    listing the valid keys."""
    known = list(known)
    if key in known:
        return key
    if not known:
        raise ParameterError(f"{owner} {noun}", key, f"none: {owner} takes no parameters")
    raise ParameterError(f"{owner} {noun}", key, "one of " + ", ".join(known))


def parse_options(params: Mapping[str, Param], options: Mapping[str, str], owner: str,
                  noun: str = "key") -> dict:
    """The text options of a spec (see :class:`SpecGrammar`) → validated values, by key."""
    for key in options:
        check_key(owner, key, params, noun)
    return {key: params[key].parse(text, owner) for key, text in options.items()}


#: Words for parameter names whose plain spelling would read wrongly ("alpha" is α in the
#: papers, "sigma" the σ of the lognormal); every other name only loses its underscores.
_HUMAN = {"alpha": "α", "sigma": "σ", "min_size": "fewest rows per node",
          "max_iter": "most k-means iterations", "eta": "η", "mu": "μ", "sigma_prime": "σ′"}


def human_label(name: str) -> str:
    """A parameter name as a person reads it: ``classes_per_node`` → "classes per node",
    ``alpha`` → "α" — for widget labels, so the UI never shows a raw key."""
    return _HUMAN.get(name, name.replace("_", " "))


# -- the spec grammar ---------------------------------------------------------------------------
def split_item(item: str, *, what: str, expected: str) -> tuple[str, str]:
    """``"key=value"`` → (key, value), blanks around both removed; an item without ``=`` or
    without a key is a :class:`ParameterError` named ``what`` that says ``expected``."""
    key, eq, value = item.partition("=")
    if not eq or not key.strip():
        raise ParameterError(what, item.strip(), expected)
    return key.strip(), value.strip()


@dataclass(frozen=True)
class SpecGrammar:
    """``name<head>key=value<sep>key=value``: a name, then text options (their types are the
    named object's business, see :func:`parse_options`).

    Blanks around names, keys and values are ignored, empty items skipped (``"iid:"`` is
    ``"iid"``), a key given twice is refused, and a leading :attr:`prefix` is dropped.
    """

    what: str     # e.g. "partitioner": errors say "partitioner spec"
    head: str     # between the name and the options
    sep: str      # between options
    noun: str     # an option, as errors name it ("option", "override")
    example: str
    prefix: str = ""

    def split(self, spec: str) -> tuple[str, dict[str, str]]:
        if not isinstance(spec, str) or not spec.strip():
            raise ParameterError(f"{self.what} spec", spec, f"a non-empty string such as {self.example!r}")
        text = spec.strip()
        if self.prefix and text.startswith(self.prefix):
            text = text[len(self.prefix):]
        name, _, rest = text.partition(self.head)
        name = name.strip()
        expected = f"key=value pairs joined by {self.sep!r}, e.g. {self.example!r}"
        options: dict[str, str] = {}
        for item in rest.split(self.sep):
            if not item.strip():
                continue
            key, value = split_item(item, what=f"{name} {self.noun}", expected=expected)
            if key in options:
                raise ParameterError(f"{name}.{key}", value, "to be given once",
                                     hint=f"it was also given as {options[key]!r}")
            options[key] = value
        return name, options

    def join(self, name: str, options: Mapping[str, str]) -> str:
        """The spec :meth:`split` reads back as ``(name, options)`` (options already text)."""
        items = self.sep.join(f"{k}={v}" for k, v in options.items())
        return f"{name}{self.head}{items}" if items else name
