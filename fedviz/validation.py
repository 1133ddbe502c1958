"""Small checks shared by every configurable object (partitioners, generators, algorithms)."""

from __future__ import annotations

import math
from numbers import Integral, Real

from .errors import ParameterError


def check_int(name: str, value, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as an int in ``[low, high]``, or raise :class:`ParameterError`."""
    allowed = _range_text("integer", low, high, "[", "]")
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
    left = "(" if low_open else "["
    right = ")" if high_open else "]"
    allowed = _range_text("number", low, high, left, right)
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


def check_choice(name: str, value, choices) -> str:
    """Return ``value`` if it is one of ``choices``, or raise :class:`ParameterError`."""
    if value not in choices:
        raise ParameterError(name, value, "one of " + ", ".join(repr(c) for c in choices))
    return value


def _range_text(kind: str, low, high, left: str, right: str) -> str:
    if low is None and high is None:
        return f"any finite {kind}"
    if high is None:
        return f"{kind} {'>' if left == '(' else '>='} {low}"
    if low is None:
        return f"{kind} {'<' if right == ')' else '<='} {high}"
    return f"{kind} in {left}{low}, {high}{right}"
