"""Small checks shared by every configurable object (partitioners, generators, algorithms)."""

from __future__ import annotations

import math
import os
from numbers import Integral, Real

from .errors import ParameterError


def check_int(name: str, value, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as an int in ``[low, high]``, or raise :class:`ParameterError`."""
    allowed = allowed_text("int", low, high)
    if isinstance(value, bool) or not isinstance(value, Integral):
        if isinstance(value, Real) and float(value).is_integer():
            value = int(value)
        else:
            raise ParameterError(name, value, allowed)
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ParameterError(name, value, allowed)
    return value


def check_real(name: str, value, *, low: float | None = None, high: float | None = None,
               low_open: bool = False, high_open: bool = False) -> float:
    """Return ``value`` as a finite float in the given interval, or raise :class:`ParameterError`."""
    allowed = allowed_text("float", low, high, low_open, high_open)
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ParameterError(name, value, allowed)
    value = float(value)
    if not math.isfinite(value):
        raise ParameterError(name, value, allowed)
    if low is not None and (value < low or (low_open and value == low)):
        raise ParameterError(name, value, allowed)
    if high is not None and (value > high or (high_open and value == high)):
        raise ParameterError(name, value, allowed)
    return value


def env_int(name: str, default: int | None, *, low: int = 1) -> int | None:
    """The integer in environment variable ``name`` (``default`` when unset or blank), checked
    like every other parameter: a bad value raises :class:`ParameterError` naming the variable."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ParameterError(name, text, allowed_text("int", low)) from None
    return check_int(name, value, low=low)


#: Punctuation a display name (a label, an axis and its values) may hold besides letters, digits and
#: spaces: enough for "FedProx μ=0.1", "FSVRG ×2", "CoCoA+ sigma_prime ×0.25", "(0.5, 0.5)" or
#: "α = 1e-3", and none of the characters Markdown or Plotly build links, images, HTML, code, math or
#: icons from ([ ] < > ` $ ! # | \ : * ~ &).
DISPLAY_PUNCTUATION = frozenset(" .,()+=-×/%'_")
#: The longest display name: it is a legend entry, not a sentence.
MAX_DISPLAY_CHARS = 80


def check_display_text(name: str, value) -> str:
    """``value`` if it is a display name a page can show as it is: letters and digits of any script,
    spaces and :data:`DISPLAY_PUNCTUATION`, 1 to :data:`MAX_DISPLAY_CHARS` characters (issue 21: an axis
    name made a link for everyone who opened the experiment's results)."""
    if not isinstance(value, str) or not value.strip():
        raise ParameterError(name, value, "a non-empty text")
    if len(value) > MAX_DISPLAY_CHARS:
        raise ParameterError(name, value[:MAX_DISPLAY_CHARS] + "…", f"at most {MAX_DISPLAY_CHARS} characters")
    bad = sorted({c for c in value if not (c.isalnum() or c in DISPLAY_PUNCTUATION)})
    if bad:
        raise ParameterError(name, value, "letters, digits, spaces and " + " ".join(sorted(DISPLAY_PUNCTUATION - {" "})),
                             hint="found " + " ".join(repr(c) for c in bad))
    return value


def check_choice(name: str, value, choices) -> str:
    """Return ``value`` if it is one of ``choices``, or raise :class:`ParameterError`."""
    if value not in choices:
        raise ParameterError(name, value, allowed_text("choice", choices=choices))
    return value


def allowed_text(kind: str, low=None, high=None, low_open: bool = False, high_open: bool = False, *,
                 choices=()) -> str:
    """The allowed values in words, as every error message and help text of fedviz words them.

    ``kind`` is 'int', 'float', 'bool', 'choice' or 'spec' (``choices``: the names a spec may start
    with); an int's bounds are always closed.
    One function, so that a parameter's help and the error its bad value gets can never
    word the same range two ways.
    """
    if kind == "bool":
        return "true or false"
    if kind == "choice":
        return "one of " + ", ".join(repr(c) for c in choices)
    if kind == "spec":
        return "one of " + ", ".join(repr(c) for c in choices) + ", each with or without its options"
    word = {"int": "integer", "float": "number"}[kind]
    left = "(" if low_open and kind == "float" else "["
    right = ")" if high_open and kind == "float" else "]"
    if low is None and high is None:
        return f"any finite {word}"
    if high is None:
        return f"{word} {'>' if left == '(' else '>='} {_number(low)}"
    if low is None:
        return f"{word} {'<' if right == ')' else '<='} {_number(high)}"
    return f"{word} in {left}{_number(low)}, {_number(high)}{right}"


def _number(v) -> str:
    """1000000 as written, not 1e+06; 0.5 and 1e300 as %g writes them."""
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else f"{v:g}"
