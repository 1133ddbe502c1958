"""The explicit registry of algorithms: name → class, in display order.

Every entry implements :class:`~fedviz.algorithms.base.Algorithm`; its class attributes
give the display name, the paper reference and the hyperparameters with defaults and
help text.
"""

from __future__ import annotations

from ..errors import ParameterError
from .base import Algorithm, Param
from .gd import GD

ALGORITHMS: dict[str, type[Algorithm]] = {cls.name: cls for cls in (
    GD,
)}


def get_algorithm(name: str) -> type[Algorithm]:
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ParameterError("algorithm", name, "one of " + ", ".join(ALGORITHMS)) from None


__all__ = ["ALGORITHMS", "Algorithm", "Param", "get_algorithm"]
