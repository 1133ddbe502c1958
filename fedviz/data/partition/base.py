"""The partitioner interface: how the training rows are spread over K nodes.

This module owns :class:`Partitioner`, the abstract base of every partitioner;
:class:`ParamSpec`, the metadata that lets the dashboard build a widget and the command
line parse a ``name:key=value,...`` spec for any parameter without knowing the
partitioner; :func:`parse_spec`; and the small size helpers the partitioners share.

A partitioner only decides *which node holds which row* (``node_of_row``); grouping the
rows is :meth:`fedviz.data.dataset.FederatedDataset.from_assignment`'s job.  Keeping the
two apart makes every partitioner a pure function of (data, parameters, seed) that is
easy to test and to cache.
"""

from __future__ import annotations

import zlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Mapping

import numpy as np
import scipy.sparse as sp

from ...errors import FedvizError, ParameterError
from ...validation import allowed_text, check_choice, check_int, check_real

#: Label-skew partitioners treat every distinct label as a class; more distinct values
#: than this means ``y`` holds regression targets, for which label skew is meaningless.
MAX_CLASSES = 1000

_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of a configurable object: type, default, allowed range and help.

    The same record validates values given in Python, parses values given as text
    (``make_partitioner("dirichlet:alpha=0.5")``) and describes the widget a UI should
    show, so the three can never disagree.

    Attributes
    ----------
    name : str
        The key, as written in a spec string and passed to ``__init__``.
    kind : {int, float, bool}
        The Python type of the value.
    default : int, float or bool
    help : str
        One sentence for tooltips and ``--help``.
    low, high : float or None
        Bounds of the allowed range (None: unbounded); ignored for bool.
    low_open, high_open : bool
        Whether the bound itself is excluded.
    log : bool
        A hint that the value spans orders of magnitude (a log-scale slider suits it).
    """

    name: str
    kind: type
    default: Any
    help: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    log: bool = False

    @property
    def allowed(self) -> str:
        """The allowed range in words, worded exactly as the error messages word it."""
        return allowed_text(self.kind.__name__, self.low, self.high, self.low_open, self.high_open)

    def validate(self, qualname: str, value):
        """Return ``value`` converted to :attr:`kind`, or raise :class:`ParameterError`.

        ``qualname`` (e.g. ``"dirichlet.alpha"``) is the name the error shows.
        """
        if self.kind is bool:
            if isinstance(value, (bool, np.bool_)):
                return bool(value)
            raise ParameterError(qualname, value, self.allowed)
        if self.kind is int:
            return check_int(qualname, value, low=self.low, high=self.high)
        return check_real(qualname, value, low=self.low, high=self.high,
                          low_open=self.low_open, high_open=self.high_open)

    def parse(self, qualname: str, text: str):
        """Convert the text of a spec string and validate it.

        Integers may be written as ``10`` or ``1e1``; booleans as true/false, yes/no,
        on/off or 1/0.
        """
        word = text.strip()
        if self.kind is bool:
            if word.lower() in _TRUE:
                return True
            if word.lower() in _FALSE:
                return False
            raise ParameterError(qualname, text, self.allowed)
        try:
            value = float(word)
        except ValueError:
            raise ParameterError(qualname, text, self.allowed) from None
        if self.kind is int:
            try:
                value = int(word)
            except ValueError:
                pass  # "1e1" or "2.5": check_int accepts the first, refuses the second
        return self.validate(qualname, value)

    def format(self, value) -> str:
        """The text :meth:`parse` reads back as ``value``."""
        if self.kind is bool:
            return "true" if value else "false"
        return repr(value)


#: Words for parameter names whose plain spelling would read wrongly ("alpha" is α in the
#: papers, "sigma" the σ of the lognormal); every other name only loses its underscores.
_HUMAN = {"alpha": "α", "sigma": "σ", "min_size": "fewest rows per node",
          "max_iter": "most k-means iterations", "eta": "η", "mu": "μ", "sigma_prime": "σ′"}


def human_label(name: str) -> str:
    """A parameter name as a person reads it: ``classes_per_node`` → "classes per node",
    ``alpha`` → "α" — for widget labels, so the UI never shows a raw key."""
    return _HUMAN.get(name, name.replace("_", " "))


def param_table(*specs: ParamSpec) -> Mapping[str, ParamSpec]:
    """A read-only ``{name: spec}`` table, in the order given (the order UIs show)."""
    return MappingProxyType({s.name: s for s in specs})


def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    """Split ``"name:key=value,key=value"`` into the name and the (unparsed) options.

    Blanks around names, keys and values are ignored; ``"iid"`` and ``"iid:"`` both
    mean no options.  The values stay text: only the named class knows their types.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ParameterError("partitioner spec", spec, "a non-empty string such as "
                             "'iid' or 'dirichlet:alpha=0.5,min_size=10'")
    name, _, rest = spec.partition(":")
    name = name.strip()
    options: dict[str, str] = {}
    for item in rest.split(","):
        if not item.strip():
            continue
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ParameterError(f"{name} option", item.strip(),
                                 "key=value pairs separated by commas, "
                                 "e.g. 'dirichlet:alpha=0.5,min_size=10'")
        if key in options:
            raise ParameterError(f"{name}.{key}", value.strip(), "to be given once",
                                 hint=f"it was also given as {options[key]!r}")
        options[key] = value.strip()
    return name, options


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
        values = {key: spec.validate(f"{self.name}.{key}", params.get(key, spec.default))
                  for key, spec in self.params.items()}
        self.config: Mapping[str, Any] = MappingProxyType(values)
        for key, value in values.items():
            setattr(self, key, value)

    @classmethod
    def _check_key(cls, key: str) -> None:
        """Refuse a key that is not a parameter, listing the valid ones."""
        if key not in cls.params:
            if not cls.params:
                raise ParameterError(f"{cls.name} key", key,
                                     f"none: {cls.name} takes no parameters")
            check_choice(f"{cls.name} key", key, tuple(cls.params))

    @classmethod
    def from_options(cls, options: Mapping[str, str], *, n_nodes: int | None,
                     seed: int = 0) -> "Partitioner":
        """Build from the text options of a spec string (see :func:`parse_spec`)."""
        for key in options:
            cls._check_key(key)
        values = {key: cls.params[key].parse(f"{cls.name}.{key}", text)
                  for key, text in options.items()}
        return cls(n_nodes=n_nodes, seed=seed, **values)

    @property
    def spec(self) -> str:
        """The spec string that rebuilds this partitioner (all parameters spelled out)."""
        items = ",".join(f"{k}={self.params[k].format(v)}" for k, v in self.config.items())
        return f"{self.name}:{items}" if items else self.name

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
