"""From a user's data choices to a :class:`FederatedDataset`: the one entry point the CLI and the UI share.

:class:`DataSpec` is the frozen description (source, test set, partition, seed, bias);
:func:`build` turns it into a data set.  A source is a LIBSVM file (path or uploaded
bytes) or a generator preset ``preset:NAME?key=value&...``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..errors import FedvizError, ParameterError
from ..validation import check_int, check_real
from .dataset import FederatedDataset, chronological_split
from .libsvm import DEFAULT_MAX_BYTES, load_libsvm, load_libsvm_pair, map_labels
from .partition import make_partitioner
from .presets import make_preset, parse_preset_spec
from .synthetic import MAX_NODES

PRESET_PREFIX = "preset:"
__all__ = ["DataSpec", "build", "PRESET_PREFIX", "MAX_NODES"]  # MAX_NODES: the generator's bound,
# also the most nodes a partitioner may split a data set into (the Data page's widgets allow as many)


@dataclass(frozen=True)
class DataSpec:
    """Everything that determines a federated data set.

    Parameters
    ----------
    source : str or bytes
        ``preset:NAME[?key=value&...]``, a LIBSVM path, or the bytes of an upload.
    test : str or bytes or None
        A separate LIBSVM test file (path or bytes).
    test_fraction : float or None
        Without a test file: the last fraction of each node's rows (in input order, the
        paper's chronological split) becomes the test set; 0 keeps every row for
        training.  None means 0.25 for files.  Presets split by their own
        ``test_fraction`` parameter.
    partition : str or None
        A partitioner spec, e.g. ``dirichlet:alpha=0.5``.  None keeps the generator's own
        nodes for presets, and for files means ``natural`` when the file has ``qid:``
        groups and ``iid`` otherwise.
    nodes : int or None
        K for the partitioner (None: 100 for files, the preset's own for presets).
    seed : int
        Seeds the partitioner (and the generator, unless the preset spec sets ``seed``).
    bias : bool or None
        Append a constant-1 bias feature.  None: no for files (so figures match other
        tools' 'no intercept' fits), the preset's own choice for presets.
    positive : float or None
        For multiclass files, the class that becomes +1 (one-vs-rest).
    task : str
        'classification', 'regression' or 'auto' (from the labels).
    name, test_name : str or None
        Display names for uploaded bytes; only ever shown, never opened as paths.
    n_features : int or None
        Width of the files' matrices (None: from the largest index).
    zero_based : True, False or "auto"
        The files' index base: 0-based, 1-based (index 0 is then refused, naming its line),
        or detected as scikit-learn does.
    max_rows : int or None
        Refuse a file with more data rows than this.
    max_bytes : int or None
        Refuse a file larger than this, before or after decompression (a guard against
        decompression bombs); the loader's 1 GiB by default.
    """

    source: str | bytes
    test: str | bytes | None = None
    test_fraction: float | None = None
    partition: str | None = None
    nodes: int | None = None
    seed: int = 0
    bias: bool | None = None
    positive: float | None = None
    task: str = "auto"
    name: str | None = None
    test_name: str | None = None
    n_features: int | None = None
    zero_based: bool | str = "auto"
    max_rows: int | None = None
    max_bytes: int | None = DEFAULT_MAX_BYTES
    loader_options: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def is_preset(self) -> bool:
        return isinstance(self.source, str) and self.source.startswith(PRESET_PREFIX)


def build(spec: DataSpec) -> FederatedDataset:
    """Build the data set that ``spec`` describes (deterministic in ``spec``)."""
    check_int("seed", spec.seed, low=0, high=2**32 - 1)
    if spec.nodes is not None:
        check_int("nodes", spec.nodes, low=1, high=MAX_NODES)
    if spec.test_fraction is not None:
        check_real("test_fraction", spec.test_fraction, low=0.0, high=1.0, high_open=True)
    if spec.is_preset:
        return _build_preset(spec)
    return _build_file(spec)


def _build_preset(spec: DataSpec) -> FederatedDataset:
    if spec.test is not None:
        raise ParameterError("test", "file", "no test file with a preset: presets make their own test set")
    name, overrides = parse_preset_spec(spec.source[len(PRESET_PREFIX):])
    overrides.setdefault("seed", spec.seed)
    if spec.bias is not None:
        overrides.setdefault("bias_feature", spec.bias)
    if spec.test_fraction is not None:
        overrides.setdefault("test_fraction", spec.test_fraction)
    ds = make_preset(name, **overrides)
    if spec.partition is None:
        return ds
    node_of_row = _assign(spec.partition, ds.X, ds.y, groups=ds.node_of_row,
                          nodes=spec.nodes or ds.n_nodes, seed=spec.seed)
    return ds.with_nodes(node_of_row, meta_update={"partition": spec.partition})


def _build_file(spec: DataSpec) -> FederatedDataset:
    opts = dict(n_features=spec.n_features, zero_based=spec.zero_based, max_rows=spec.max_rows,
                max_bytes=spec.max_bytes, **spec.loader_options)
    if spec.test is not None:
        train, test = load_libsvm_pair(spec.source, spec.test, names=(spec.name, spec.test_name), **opts)
    else:
        train, test = load_libsvm(spec.source, name=spec.name, **opts), None
    y, mapping = map_labels(train.y, task=spec.task, positive=spec.positive, source=train.source)
    y_test = None
    if test is not None:
        y_test = _apply_mapping(test.y, mapping)
    X = train.X
    X_test = test.X if test is not None else None
    if spec.bias:
        X = _with_bias(X)
        X_test = _with_bias(X_test) if X_test is not None else None

    partition = spec.partition or ("natural" if train.qid is not None else "iid")
    nodes = spec.nodes or 100
    node_of_row = _assign(partition, X, y, groups=train.qid, nodes=min(nodes, X.shape[0]), seed=spec.seed)
    meta = {
        "source": train.source, "task": mapping.task, "labels": mapping.description,
        "partition": partition, "seed": spec.seed, "bias": bool(spec.bias),
        "zero_based": train.zero_based,
        "params": {"test": test.source if test is not None else None, "nodes": nodes,
                   "test_fraction": spec.test_fraction},
    }
    if test is not None:
        test_nodes = None
        if partition == "natural" and test.qid is not None and train.qid is not None:
            # Same groups, same nodes: a test row of query q sits on q's node.
            test_nodes = _group_nodes(train.qid, node_of_row, test.qid)
        return FederatedDataset.from_assignment(X, y, node_of_row, X_test=X_test, y_test=y_test,
                                                test_nodes=test_nodes, meta=meta)
    fraction = 0.25 if spec.test_fraction is None else spec.test_fraction
    meta["params"]["test_fraction"] = fraction
    is_test = chronological_split(node_of_row, fraction)
    if np.all(is_test):
        raise FedvizError("the test fraction leaves no training rows")
    train_rows = np.flatnonzero(~is_test)
    test_rows = np.flatnonzero(is_test)
    return FederatedDataset.from_assignment(
        X[train_rows], y[train_rows], node_of_row[train_rows], X_test=X[test_rows], y_test=y[test_rows],
        test_nodes=node_of_row[test_rows], meta=meta)


def _assign(partition: str, X, y, *, groups, nodes: int, seed: int) -> np.ndarray:
    partitioner = make_partitioner(partition, n_nodes=nodes, seed=seed)
    return partitioner.assign(X, y, groups=groups)


def _group_nodes(train_groups, node_of_row, test_groups) -> np.ndarray:
    groups, first = np.unique(train_groups, return_index=True)
    node_of_group = node_of_row[first]
    pos = np.clip(np.searchsorted(groups, test_groups), 0, len(groups) - 1)
    return np.where(groups[pos] == test_groups, node_of_group[pos], -1)


def _apply_mapping(y_raw: np.ndarray, mapping) -> np.ndarray:
    if mapping.task == "regression":
        return np.asarray(y_raw, dtype=np.float64)
    return np.where(y_raw == mapping.positive, 1.0, -1.0)


def _with_bias(X: sp.csr_matrix) -> sp.csr_matrix:
    ones = sp.csr_matrix(np.ones((X.shape[0], 1)))
    return sp.hstack([X, ones], format="csr")
