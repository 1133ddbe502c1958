"""The partitioner interface: how the training rows are spread over K nodes.

This module owns :class:`Partitioner`, the abstract base of every partitioner;
:func:`parse_spec`, which reads a ``name:key=value,...`` spec; and the small size helpers the
partitioners share.  A partitioner's parameters are :class:`fedviz.params.Param` records
(``ParamSpec`` here), so the dashboard builds their widgets and the command line and links
parse their values as they do an algorithm's.

A partitioner only decides *which node holds which row* (``node_of_row``); grouping the
rows is :meth:`fedviz.data.dataset.FederatedDataset.from_assignment`'s job.  Keeping the
two apart makes every partitioner a pure function of (data, parameters, seed) that is
easy to test and to cache.
"""

from __future__ import annotations

import zlib
from abc import ABC, abstractmethod
from types import MappingProxyType
from typing import Any, ClassVar, Mapping

import numpy as np
import scipy.sparse as sp

from ...errors import FedvizError, ParameterError
from ...params import Param, SpecGrammar, check_key, param_table, parse_options
from ...validation import check_int

#: Label-skew partitioners treat every distinct label as a class; more distinct values
#: than this means ``y`` holds regression targets, for which label skew is meaningless.
MAX_CLASSES = 1000

#: A partitioner's parameter: the one record of :mod:`fedviz.params` (the name stays for the
#: partitioner modules, which declare theirs as ``ParamSpec("alpha", float, 0.5, help, low=0, ...)``).
ParamSpec = Param

#: ``name:key=value,key=value`` (``"dirichlet:alpha=0.5,min_size=10"``).
PARTITION_SPEC = SpecGrammar("partitioner", ":", ",", "option", "dirichlet:alpha=0.5,min_size=10")


def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    """Split ``"name:key=value,key=value"`` into the name and the (unparsed) options.

    Blanks around names, keys and values are ignored; ``"iid"`` and ``"iid:"`` both
    mean no options.  The values stay text: only the named class knows their types.
    """
    return PARTITION_SPEC.split(spec)


class Partitioner(ABC):
    """Decide the node of every training row.

    Subclasses set the class attributes below and implement :meth:`_assign`.  All
    configuration happens in ``__init__`` (validated there, so a bad value fails before
    any data are touched); :meth:`assign` is then a pure function of the data and the
    seed.

    Parameters
    ----------
    n_nodes : int or None
        K, the number of nodes.  Partitioners whose nodes are the distinct values of
        ``groups`` (:attr:`nodes_from_groups`) take None and ignore any other value.
    seed : int
        Seed of the partitioner's random stream (see :meth:`_rng`); every call of
        :meth:`assign` starts it afresh, so equal inputs give equal outputs.
    **params
        The partitioner's parameters, as described by :attr:`params`.  Unspecified
        parameters take their defaults.

    Attributes
    ----------
    name : str
        Registry key, as written in spec strings (``"iid-unbalanced"``).
    title : str
        Display name.
    params : Mapping[str, ParamSpec]
        Parameter metadata, in display order.
    needs_labels, needs_groups : bool
        Whether :meth:`assign` reads ``y`` / needs ``groups``.
    nodes_from_groups : bool
        Whether the nodes are the distinct values of ``groups``, so that ``n_nodes`` is
        ignored (a UI should hide its K control).
    randomized : bool
        Whether the seed matters.
    config : Mapping[str, object]
        The validated parameter values (also set as attributes of the same names).
    """

    name: ClassVar[str]
    title: ClassVar[str]
    params: ClassVar[Mapping[str, ParamSpec]] = param_table()
    needs_labels: ClassVar[bool] = False
    needs_groups: ClassVar[bool] = False
    nodes_from_groups: ClassVar[bool] = False
    randomized: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Parameters become attributes: a parameter called "spec" or "assign" would
        # shadow the interface, so refuse it when the class is defined.
        clash = [key for key in cls.params if hasattr(Partitioner, key)]
        if clash:
            raise TypeError(f"{cls.__name__}: parameter names {clash} clash with Partitioner")

    def __init__(self, *, n_nodes: int | None = None, seed: int = 0, **params):
        if self.nodes_from_groups:
            self.n_nodes = None  # the groups decide K
        elif n_nodes is None:
            raise ParameterError("n_nodes", None, "integer >= 1")
        else:
            self.n_nodes = check_int("n_nodes", n_nodes, low=1)
        self.seed = check_int("seed", seed, low=0)
        for key in params:
            self._check_key(key)
        values = {key: spec.validate(params.get(key, spec.default), self.name)
                  for key, spec in self.params.items()}
        self.config: Mapping[str, Any] = MappingProxyType(values)
        for key, value in values.items():
            setattr(self, key, value)

    @classmethod
    def _check_key(cls, key: str) -> None:
        """Refuse a key that is not a parameter, listing the valid ones."""
        check_key(cls.name, key, cls.params)

    @classmethod
    def from_options(cls, options: Mapping[str, str], *, n_nodes: int | None,
                     seed: int = 0) -> "Partitioner":
        """Build from the text options of a spec string (see :func:`parse_spec`)."""
        return cls(n_nodes=n_nodes, seed=seed, **parse_options(cls.params, options, cls.name))

    @property
    def spec(self) -> str:
        """The spec string that rebuilds this partitioner (all parameters spelled out)."""
        return PARTITION_SPEC.join(self.name, {k: self.params[k].format(v) for k, v in self.config.items()})

    def __repr__(self) -> str:
        args = [f"n_nodes={self.n_nodes!r}", f"seed={self.seed!r}"]
        args += [f"{k}={v!r}" for k, v in self.config.items()]
        return f"{type(self).__name__}({', '.join(args)})"

    # -- the work ----------------------------------------------------------------------
    def assign(self, X, y, *, groups=None) -> np.ndarray:
        """Return the node of every row.

        Parameters
        ----------
        X : sparse matrix or array-like, shape (n, d)
            Training examples; only their number is read, except by partitioners that
            cluster on features.
        y : array-like, shape (n,), or None
            Labels; may be None for partitioners that do not read them.
        groups : array-like of int, shape (n,), optional
            A grouping of the rows known in advance: query ids, a generator's node ids
            or the current node of each row.

        Returns
        -------
        node_of_row : ndarray of int64, shape (n,)
            Values in ``[0, K)``.  Inputs are never modified.
        """
        if not sp.issparse(X):
            X = np.asarray(X)
        if X.ndim != 2:
            raise FedvizError(f"X must be a 2-D matrix of examples, got shape {X.shape}")
        n = X.shape[0]
        if y is not None:
            y = np.asarray(y)
            if y.shape != (n,):
                raise FedvizError(f"y must hold one label per row: X has {n} rows, "
                                  f"y has shape {y.shape}")
        elif self.needs_labels:
            raise FedvizError(f"the {self.name!r} partitioner splits by label and needs y")
        if groups is not None:
            groups = np.asarray(groups)
            if groups.shape != (n,) or groups.dtype.kind not in "iu":
                raise FedvizError(f"groups must hold one integer per row ({n} rows), got "
                                  f"shape {groups.shape} and dtype {groups.dtype}")
        elif self.needs_groups:
            raise FedvizError(f"the {self.name!r} partitioner needs groups (query ids, a "
                              "generator's node ids or the current nodes); none were given")
        node_of_row = self._assign(X, y, groups, self._rng())
        return np.asarray(node_of_row, dtype=np.int64)

    def _rng(self) -> np.random.Generator:
        """A fresh generator for one call, from the seed and the partitioner's name.

        Keying the stream by name keeps it independent of other users of the same seed:
        a data set shuffled with ``default_rng(0).permutation`` and then split by an
        ``iid`` partitioner seeded 0 would otherwise line labels up with nodes exactly.
        """
        return np.random.default_rng([self.seed, zlib.crc32(self.name.encode())])

    @abstractmethod
    def _assign(self, X, y, groups, rng: np.random.Generator) -> np.ndarray:
        """Return ``node_of_row`` for validated inputs and a freshly seeded generator."""

    # -- helpers for subclasses ----------------------------------------------------------
    @staticmethod
    def _dense_groups(groups: np.ndarray) -> np.ndarray:
        """Renumber ``groups`` 0..G-1 in increasing order of value."""
        _, dense = np.unique(groups, return_inverse=True)
        return dense.astype(np.int64).reshape(-1)


def label_codes(y: np.ndarray, who: str) -> tuple[np.ndarray, int]:
    """Return (class index of every row, number of classes) for label-skew partitioners."""
    classes, codes = np.unique(y, return_inverse=True)
    if len(classes) > MAX_CLASSES:
        raise FedvizError(
            f"the {who!r} partitioner splits by class, but y has {len(classes)} distinct "
            f"values (more than {MAX_CLASSES}); are these regression targets?")
    return codes.astype(np.int64).reshape(-1), len(classes)


def apportion(total: int, weights) -> np.ndarray:
    """Split the integer ``total`` in proportion to ``weights`` (Hamilton's method).

    Each share is its quota rounded down, and the remainder goes one apiece to the
    largest fractional parts (ties to the lower index), so shares never differ from their
    quota by 1 or more and equal weights give sizes that differ by at most one.
    """
    w = np.asarray(weights, dtype=np.float64)
    quota = w * (total / w.sum())
    shares = np.floor(quota).astype(np.int64)
    short = int(total - shares.sum())
    order = np.argsort(shares - quota, kind="stable")  # largest fractional part first
    shares[order[:short]] += 1
    return shares


def fill_nodes(sizes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Give node k ``sizes[k]`` rows chosen uniformly at random (``sum(sizes) == n``)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    in_order = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    return in_order[rng.permutation(len(in_order))]
