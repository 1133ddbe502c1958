"""Running algorithms: the iteration loop and its records (:mod:`fedviz.runner.loop`)."""

from .loop import FIELDS, IterationRecord, iterate

__all__ = ["FIELDS", "IterationRecord", "iterate"]
