"""Values in and out of a Param's range, read off the Param itself: the tests that walk the data settings'
table (fedviz.data.settings) take them from here, so a new setting is walked without a line of test."""

from __future__ import annotations

import math

from fedviz.params import Param


def inside(p: Param) -> list:
    """Values the range takes: its ends where closed, a point within, every choice, both booleans."""
    if p.kind == "bool":
        return [True, False]
    if p.kind in ("choice", "spec"):  # a spec's bare names are specs
        return list(p.choices)
    low, high = p.bounds
    if p.kind == "int":
        return [low, low + 1, high]
    out = [low, (low + high) / 2 if not p.high_open else low + (high - low) / 3]
    return out + ([high] if not p.high_open else [math.nextafter(high, low)])


def outside(p: Param) -> list:
    """Values the range refuses, as Python values (a text where the kind takes none): past each end (or on
    an open one), text where a number is due, a word that is no choice."""
    if p.kind == "bool":
        return ["maybe", 2]
    if p.kind == "choice":
        return ["nope", p.choices[0].upper()]
    if p.kind == "spec":
        return ["nope", f"{p.choices[0]}:no_such_option=1"]
    low, high = p.bounds
    if p.kind == "int":
        return [low - 1, high + 1, "abc"]
    return [low - 1 if not p.low_open else low, high if p.high_open else high + 1, "abc", math.nan]


def text(p: Param, value) -> str:
    """A value as a link's or the command line's text (a text as it is)."""
    return value if isinstance(value, str) else repr(value) if isinstance(value, float) else str(value)


def other_value(p: Param):
    """A value in range other than the default (a config that differs from the default in every setting)."""
    return next(v for v in reversed(inside(p)) if v != p.default)
