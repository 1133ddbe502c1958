"""Partitioners: the registry of ways to spread training rows over nodes.

This package owns the explicit registry :data:`PARTITIONERS` (spec name → class) and
:func:`make_partitioner`, which builds a partitioner from a spec string such as
``"iid"`` or ``"dirichlet:alpha=0.5,min_size=10"``.  Each partitioner lives in its own
module; :mod:`.base` holds the interface.

Typical use::

    part = make_partitioner("dirichlet:alpha=0.1", n_nodes=100, seed=0)
    ds = FederatedDataset.from_assignment(X, y, part.assign(X, y))

A data source's own grouping (LETOR query ids, a generator's node ids) is used with
``make_partitioner("natural", n_nodes=None, seed=0).assign(X, y, groups=ids)``.
"""

from __future__ import annotations

from ...params import human_label
from ...validation import check_choice
from .base import PARTITION_SPEC, ParamSpec, Partitioner, parse_spec
from .dirichlet import DirichletPartitioner
from .iid import IIDPartitioner
from .iid_unbalanced import IIDUnbalancedPartitioner
from .natural import NaturalPartitioner
from .reshuffle import ReshufflePartitioner
from .shards import ShardsPartitioner
from .topic import TopicPartitioner

#: Every partitioner by its spec name, in the order a UI lists them.
PARTITIONERS: dict[str, type[Partitioner]] = {
    cls.name: cls for cls in (
        IIDPartitioner,
        IIDUnbalancedPartitioner,
        DirichletPartitioner,
        ShardsPartitioner,
        TopicPartitioner,
        NaturalPartitioner,
        ReshufflePartitioner,
    )
}


def make_partitioner(spec: str, *, n_nodes: int | None, seed: int = 0) -> Partitioner:
    """Build the partitioner a spec string names.

    Parameters
    ----------
    spec : str
        ``name`` or ``name:key=value,key=value``; values are read as the parameter's
        type (see each class's ``params``), unspecified ones take their defaults.
    n_nodes : int or None
        K.  Partitioners whose nodes come from ``groups`` (``natural``, ``reshuffle``)
        ignore it and accept None.
    seed : int

    Raises
    ------
    ParameterError
        For an unknown name (the message lists the valid names), an unknown key (it
        lists the valid keys) or a value out of range (it gives the allowed range).
    """
    name, options = parse_spec(spec)
    check_choice("partitioner", name, tuple(PARTITIONERS))
    return PARTITIONERS[name].from_options(options, n_nodes=n_nodes, seed=seed)


__all__ = [
    "PARTITIONERS", "PARTITION_SPEC", "ParamSpec", "Partitioner", "human_label", "make_partitioner", "parse_spec",
    "DirichletPartitioner", "IIDPartitioner", "IIDUnbalancedPartitioner", "NaturalPartitioner",
    "ReshufflePartitioner", "ShardsPartitioner", "TopicPartitioner",
]
