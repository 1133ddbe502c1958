"""From a user's data choices to a :class:`FederatedDataset`: the one entry point the CLI and the UI share.

:class:`DataSpec` is the frozen description (source, test set, partition, seed, bias);
:func:`build` turns it into a data set.  A source is a LIBSVM file (path or uploaded
bytes) or a generator preset ``preset:NAME?key=value&...``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..errors import DataFormatError, FedvizError, ParameterError
from ..validation import check_int, check_real
from .dataset import FederatedDataset, chronological_split
from .labels import class_codes, dataset_classes, format_label, format_labels, label_counts, map_labels
from .libsvm import DEFAULT_MAX_BYTES, load_libsvm, load_libsvm_pair
from .partition import make_partitioner
from .presets import make_preset, parse_preset_spec, preset_config
from .settings import check_settings
from .split import SPLITS, _percent, deal_test_rows, describe_split, random_split
from .synthetic import MAX_NODES, estimate_entries
from .unseen import hold_out

PRESET_PREFIX = "preset:"
__all__ = ["DataSpec", "build", "default_nodes", "PRESET_PREFIX", "MAX_NODES", "SPLITS",
           "DEFAULT_TEST_FRACTION", "MIN_ROWS_PER_NODE", "MAX_DEFAULT_NODES", "SMALL_NODE_ROWS",
           "small_node_warnings", "deal_test", "deal_sentence", "unassigned_test_rows_possible"]
# MAX_NODES: the generator's bound, also the most nodes a partitioner may split a data set into
# (the Data page's widgets allow as many)

#: A preset split into other nodes: its test rows keep the generator's nodes, none of the new ones
#: (said in ``meta["split"]``; :func:`deal_test` replaces it when it deals them).
PRESET_TEST_NOTE = "; the test rows stay those of the generator's nodes"
#: A file's test fraction when none is given (each node's last or random quarter).
DEFAULT_TEST_FRACTION = 0.25
#: Fewer training rows than this on a node is warned about (:func:`small_node_warnings`): "a handful".
SMALL_NODE_ROWS = 5
#: :func:`default_nodes`: the fewest rows a node gets by default, and the most nodes.
MIN_ROWS_PER_NODE = 20
MAX_DEFAULT_NODES = 100


@dataclass(frozen=True)
class DataSpec:
    """Everything that determines a federated data set.

    The data settings among these fields (``partition``, ``nodes``, ``seed``, ``test_fraction``,
    ``split``, ``unseen``, ``deal_test``) are the table :data:`fedviz.data.settings.DATA_SETTINGS`,
    whose ranges :func:`build` enforces and from which the link, the command line, an experiment
    file and the Data page take their names, ranges and help.

    Parameters
    ----------
    source : str or bytes
        ``preset:NAME[?key=value&...]``, a LIBSVM path, or the bytes of an upload.
    test : str or bytes or None
        A separate LIBSVM test file (path or bytes).
    test_fraction : float or None
        Without a test file: this fraction of each node's rows, ⌊f·m_k⌋ of its m_k,
        becomes the test set (which rows: ``split``); 0 keeps every row for training.
        In [0, 1); None means 0.25 for files.  Presets split by their own
        ``test_fraction`` parameter.
    split : {"auto", "random", "chronological"}
        Which of each node's rows are the test rows, without a test file.  "random": a
        seeded random draw within each node, stratified by label for classification
        (:func:`fedviz.data.split.random_split`; ``seed`` seeds it).  "chronological":
        the last rows in file order (the paper's per-author split), right only when the
        file's order is a time order.  "auto": chronological where the order is known to
        mean time — presets (the generator's stream) and files partitioned into their
        own qid groups (sessions or queries) — and random for every other file, since
        many files are sorted (by label, say) and their last rows are no sample.
        Presets accept "auto" and "chronological" only.  Ignored with a test file.
    partition : str or None
        A partitioner spec, e.g. ``dirichlet:alpha=0.5``.  None keeps the generator's own
        nodes for presets, and for files means ``natural`` when the file has ``qid:``
        groups and ``iid`` otherwise.
    nodes : int or None
        K for the partitioner (None: :func:`default_nodes` for files, the preset's own
        for presets).  More nodes than training rows are cut to one row per node.
    seed : int
        Seeds the partitioner, the random test split (a stream of its own), and the
        generator unless the preset spec sets ``seed``.
    bias : bool or None
        Append a constant-1 bias feature.  None: no for files (so figures match other
        tools' 'no intercept' fits), the preset's own choice for presets.
    positive : float or None
        For files with more than two classes, the class that becomes +1 (one-vs-rest).  None
        keeps every class, coded 0..C−1 (the ``"multiclass"`` policy of
        :func:`fedviz.data.labels.map_labels`, for softmax); two-class files are binary either way.
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
    max_entries : int or None
        Refuse a data set that would hold more stored entries (nonzeros) than this: a preset
        from its node sizes before a row is drawn (:func:`~fedviz.data.synthetic.estimate_entries`),
        a file once read.  None: only the generator's own limit.  The dashboard sets its
        budget here, so a link asking for 200,000 nodes costs a sentence, not gigabytes.
    unseen : float
        The share of whole nodes held out of training (issue 23, point 2; pFL-Bench holds out 20%),
        in [0, 1): ⌊unseen·K + ½⌋ nodes, a draw seeded by ``seed``, leave the training problem and
        become ``ds.unseen``, scored as new clients (:mod:`fedviz.data.unseen`).  0 (the default)
        holds out none.
    deal_test : bool
        Give every test row that belongs to no node a node (issue 23, point 1): a row of class c goes
        to node k with probability n_k^c / n^c, k's share of the training rows of class c (regression:
        n_k / n), a seeded draw of its own (:func:`~fedviz.data.split.deal_test_rows`).  Such rows
        are a separate test file's, or a preset's split into other nodes (its test rows stay with the
        generator's nodes); without a node, no node can be scored on its own.  The rows, hence the
        pooled test error, are unchanged; dealt before ``unseen`` holds nodes out, so an unseen node
        keeps the test rows dealt to it.  False (the default) leaves them with no node.
    wider_test : bool
        Accept a test file with features beyond the training file's last (see
        :func:`~fedviz.data.libsvm.load_libsvm_pair`); refused by default, because that
        is what the test file of another data set looks like.
    """

    source: str | bytes
    test: str | bytes | None = None
    test_fraction: float | None = None
    split: str = "auto"
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
    wider_test: bool = False
    max_entries: int | None = None
    unseen: float = 0.0
    deal_test: bool = False
    loader_options: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def is_preset(self) -> bool:
        return isinstance(self.source, str) and self.source.startswith(PRESET_PREFIX)


def default_nodes(n_rows: int, test_fraction: float) -> int:
    """K for a file when the user gives none: ``n_rows // R`` nodes, between 1 and 100.

    R = max(20, ⌈2 / f⌉) rows per node: a balanced (iid) split then leaves every node at
    least 20 rows, and at least two test rows (⌊f·R⌋ ≥ 2) to train and test on.  Files of
    2,000 rows or more get the 100 nodes fedviz always gave them; a 150-row file gets 7
    nodes of 21–22 rows instead of 100 nodes of one or two.  With f = 0 (or a separate
    test file: pass 0) only the 20 rows count.  A file smaller than R is one node.
    """
    n_rows = check_int("n_rows", n_rows, low=0)
    f = check_real("test_fraction", test_fraction, low=0.0, high=1.0, high_open=True)
    per_node = MIN_ROWS_PER_NODE if f == 0 else max(MIN_ROWS_PER_NODE, math.ceil(2 / f))
    return max(1, min(MAX_DEFAULT_NODES, n_rows // per_node))


def build(spec: DataSpec) -> FederatedDataset:
    """Build the data set that ``spec`` describes (deterministic in ``spec``).

    Besides the data, ``ds.meta`` says what a reader of the curves must know:
    ``meta["split"]``, the test set in force as a sentence, and ``meta["warnings"]``,
    a list (empty if all is well) of sentences saying what looks wrong and what to do.
    """
    check_settings(spec)  # the one table's ranges, as every front end checked them (data/settings.py)
    if spec.is_preset:
        ds = _build_preset(spec)
    else:
        ds = _build_file(spec)
    if spec.deal_test:  # before unseen: a held-out node keeps the test rows dealt to it
        ds = deal_test(ds, spec.seed)
    if spec.unseen:  # the held-out nodes leave last, after the partition and the test split (0: ds untouched)
        ds = hold_out(ds, spec.unseen, spec.seed)
    ds.meta["warnings"] = list(ds.meta.get("warnings", ())) + small_node_warnings(ds, spec) + _test_set_warnings(ds)
    return ds


def unassigned_test_rows_possible(spec: DataSpec) -> bool:
    """Whether ``spec``'s test rows can belong to no node, read from the spec alone (no data built):
    a separate test file, or a preset split into other nodes.  Where this is False every test row is
    a node's, and :attr:`DataSpec.deal_test` changes nothing."""
    return spec.test is not None or (spec.is_preset and spec.partition is not None)


def deal_test(ds: FederatedDataset, seed: int) -> FederatedDataset:
    """``ds`` with its test rows of no node dealt to the nodes by class share (regression: by node
    size), :func:`~fedviz.data.split.deal_test_rows` seeded by ``seed``; the rows that have a node
    keep it.  ``meta["dealt"]`` counts the rows dealt (0: ``ds`` unchanged but for that count), and
    ``meta["split"]`` says so."""
    tn = np.asarray(ds.test_nodes)
    orphans = np.flatnonzero(tn < 0)
    if orphans.size == 0:
        ds.meta["dealt"] = 0
        return ds
    classes = dataset_classes(ds)
    if classes is None:
        dealt = deal_test_rows(ds.node_of_row, ds.n_nodes, seed=seed, n_test=orphans.size)
    else:
        dealt = deal_test_rows(ds.node_of_row, ds.n_nodes, seed=seed, train_classes=class_codes(ds.y, classes),
                               test_classes=class_codes(ds.y_test[orphans], classes), n_classes=len(classes))
    nodes = tn.copy()
    nodes[orphans] = dealt
    by = "node size" if classes is None else "class share"
    meta = {**ds.meta, "dealt": int(orphans.size), "deal_seed": int(seed),
            "split": f"{ds.meta.get('split', 'its own').removesuffix(PRESET_TEST_NOTE)}; its {orphans.size:,} test "
                     f"rows, which belonged to no node, dealt to the nodes by {by} (seed {seed})",
            "params": {**ds.meta.get("params", {}), "deal_test": True}}
    return FederatedDataset.from_assignment(ds.X, ds.y, ds.node_of_row, X_test=ds.X_test, y_test=ds.y_test,
                                            test_nodes=nodes, meta=meta)


def partition_words(ds: FederatedDataset) -> str:
    """How ``ds``'s rows were dealt to its nodes, as every page names it: the partition in force, which for a
    file without a partition is its qid groups ("natural") or, with none, iid — not "its own nodes", which a
    file without qid groups does not have (a preset's users and a file's groups are)."""
    partition = ds.meta.get("partition")
    if not partition:
        return "the data set's own nodes"
    if partition == "natural":
        return "natural (the file's qid groups)"
    return str(partition)


def deal_sentence(ds: FederatedDataset) -> str:
    """What :attr:`DataSpec.deal_test` did to ``ds``, in a sentence, or '' when it dealt no row."""
    m = int(ds.meta.get("dealt") or 0)
    if not m:
        return ""
    by = ("their shares of all training rows (real targets)" if ds.task == "regression"
          else "their shares of each class among the training rows")
    seed = ds.meta.get("deal_seed")
    return (f"{m:,} test rows that belonged to no node are dealt to the nodes by {by}"
            + (f" (seed {seed})" if seed is not None else "") + ": a node holding a dealt row is scored on its own, "
            "and the pooled test error is that of the same rows.")


def small_node_warnings(ds: FederatedDataset, spec: DataSpec | None = None) -> list[str]:
    """A sentence when some node holds fewer than :data:`SMALL_NODE_ROWS` training rows.

    Such a node's local steps (FSVRG's pass, FedAvg's epochs: Algorithm 4's n_k-step loop) fit
    a row or two, and its per-node statistics (n_k^j / n_k, Section 3.6.1) are all or nothing;
    Dirichlet label skew with a small α leaves many (a9a, α = 0.1: one-row nodes).  Says how
    many, how many hold a single row, and what to change."""
    sizes = np.asarray(ds.node_sizes)
    small = int(np.count_nonzero(sizes < SMALL_NODE_ROWS))
    if not small or ds.n_nodes <= 1:
        return []
    ones = int(np.count_nonzero(sizes == 1))
    fix = "use fewer nodes"
    name = (spec.partition or "").split(":", 1)[0] if spec is not None else ""
    if name == "dirichlet":
        fix = "raise dirichlet's min_size (or alpha), or use fewer nodes"
    return [f"{small:,} of {ds.n_nodes:,} nodes hold fewer than {SMALL_NODE_ROWS} training rows"
            + (f" ({ones:,} hold a single row)" if ones else "")
            + f", smallest {int(sizes.min()):,}: their local steps fit a handful of examples and their "
              f"per-node statistics are noise; {fix}"]


def _build_preset(spec: DataSpec) -> FederatedDataset:
    if spec.test is not None:
        raise ParameterError("test", "file", "no test file with a preset: presets make their own test set")
    if spec.split == "random":
        raise ParameterError("split", spec.split, "'auto' or 'chronological' for a preset",
                             hint="a preset's test set is its generator's time order; "
                                  "its rows are exchangeable, so that split is random in distribution")
    name, overrides = _preset_overrides(spec)
    if spec.max_entries is not None:
        check_budget(spec, spec.max_entries)
    ds = make_preset(name, **overrides)
    fraction = ds.meta["params"]["test_fraction"]
    who, rows = ("author", "posts") if ds.meta.get("generator") == "bag-of-words" else ("node", "rows")
    ds.meta["split"] = (f"the generator's time order: each {who}'s last {_percent(fraction)} of {rows} "
                        "(the newest; the rows are exchangeable, so this is a random split in distribution)"
                        if fraction else "no test set: test fraction 0 keeps every row for training")
    if spec.partition is None:
        return ds
    ds.meta["split"] += PRESET_TEST_NOTE
    node_of_row = _assign(spec.partition, ds.X, ds.y, groups=ds.node_of_row,
                          nodes=spec.nodes or ds.n_nodes, seed=spec.seed)
    return ds.with_nodes(node_of_row, meta_update={"partition": spec.partition})


def _build_file(spec: DataSpec) -> FederatedDataset:
    opts = dict(n_features=spec.n_features, zero_based=spec.zero_based, max_rows=spec.max_rows,
                max_bytes=spec.max_bytes, **spec.loader_options)
    if spec.test is not None:
        train, test = load_libsvm_pair(spec.source, spec.test, names=(spec.name, spec.test_name),
                                       wider_test=spec.wider_test, **opts)
    else:
        train, test = load_libsvm(spec.source, name=spec.name, **opts), None
    if spec.max_entries is not None:
        rows = train.X.shape[0] + (test.X.shape[0] if test is not None else 0)
        entries = train.X.nnz + (test.X.nnz if test is not None else 0)
        _check_entries(entries, rows, spec.max_entries, "this file", "a smaller file")
    # More than two classes and no positive class: every class kept, coded 0..C-1 (softmax, issue 22);
    # a positive class makes it one-vs-rest, and two classes stay binary, as before.
    multiclass = (spec.positive is None and spec.task != "regression"
                  and np.unique(train.y[np.isfinite(train.y)]).size > 2)
    y, mapping = map_labels(train.y, task=spec.task, positive=spec.positive, source=train.source,
                            multiclass=bool(multiclass))
    y_test = None
    if test is not None:
        _check_test_labels(test, train, mapping)
        y_test = mapping.apply(test.y)
    X = train.X
    X_test = test.X if test is not None else None
    if spec.bias:
        X = _with_bias(X)
        X_test = _with_bias(X_test) if X_test is not None else None

    partition = spec.partition or ("natural" if train.qid is not None else "iid")
    fraction = DEFAULT_TEST_FRACTION if spec.test_fraction is None else spec.test_fraction
    n_rows = X.shape[0]
    nodes = spec.nodes if spec.nodes is not None else \
        default_nodes(n_rows, 0.0 if test is not None else fraction)
    nodes = min(nodes, n_rows)  # at most one node per row
    node_of_row = _assign(partition, X, y, groups=train.qid, nodes=nodes, seed=spec.seed)
    meta = {
        "source": train.source, "task": mapping.task, "labels": mapping.description,
        "label_policy": mapping.policy, "classes": list(mapping.classes),
        "partition": partition, "seed": spec.seed, "bias": bool(spec.bias),
        "zero_based": train.zero_based, "groups": train.qid is not None,  # reshuffle and natural need them
        "params": {"test": test.source if test is not None else None, "nodes": nodes,
                   "test_fraction": spec.test_fraction, "split": spec.split},
        "warnings": list(train.warnings) + (list(test.warnings) if test is not None else []),
    }
    if test is not None:
        meta["split"] = f"the separate test file {test.source}"
        test_nodes = None
        if partition == "natural" and test.qid is not None and train.qid is not None:
            # Same groups, same nodes: a test row of query q sits on q's node.
            test_nodes = _group_nodes(train.qid, node_of_row, test.qid)
        return FederatedDataset.from_assignment(X, y, node_of_row, X_test=X_test, y_test=y_test,
                                                test_nodes=test_nodes, meta=meta)
    meta["params"]["test_fraction"] = fraction
    kind = spec.split
    if kind == "auto":  # qid groups as nodes are sessions or queries: their order is kept
        kind = "chronological" if partition == "natural" and train.qid is not None else "random"
    meta["params"]["split"] = kind
    if fraction == 0:
        is_test = np.zeros(n_rows, dtype=bool)
        meta["split"] = "no test set: test fraction 0 keeps every row for training"
    elif kind == "random":
        stratified = mapping.task == "classification"
        # Strata are the classes of the mapped y (one-vs-rest: +1 and the rest), as the model sees them.
        is_test = random_split(node_of_row, fraction, seed=spec.seed,
                               labels=class_codes(y, mapping.model_classes) if stratified else None,
                               n_classes=len(mapping.model_classes) if stratified else None)
        meta["split"] = describe_split(kind, fraction, seed=spec.seed, stratified=stratified)
    else:
        is_test = chronological_split(node_of_row, fraction)
        meta["split"] = describe_split(kind, fraction)
    if np.all(is_test):
        raise FedvizError("the test fraction leaves no training rows")
    train_rows = np.flatnonzero(~is_test)
    test_rows = np.flatnonzero(is_test)
    return FederatedDataset.from_assignment(
        X[train_rows], y[train_rows], node_of_row[train_rows], X_test=X[test_rows], y_test=y[test_rows],
        test_nodes=node_of_row[test_rows], meta=meta)


def _test_set_warnings(ds: FederatedDataset) -> list[str]:
    """What is wrong with the test set, and what to do, in sentences for people."""
    out = []
    fraction = ds.meta.get("params", {}).get("test_fraction")
    has_file = bool(ds.meta.get("params", {}).get("test"))
    if ds.y_test.size == 0:
        if has_file:
            out.append("the test file holds no rows: test error cannot be measured; upload a test file "
                       "with rows")
        elif not fraction:
            out.append("the test set has no rows (test fraction 0 keeps every row for training): test "
                       "error cannot be measured; raise the test fraction or upload a test file")
        else:
            out.append(f"the test set has no rows: no node has the {math.ceil(1 / fraction)} rows that "
                       f"a test fraction of {fraction:g} needs to hold one out; use fewer nodes, raise "
                       "the test fraction or upload a test file")
        return out
    if ds.task == "classification" and ds.y_test.size:
        classes = dataset_classes(ds)
        counts = label_counts(ds.y_test, classes)  # a comparison per row, no sort at paper scale
        if np.count_nonzero(counts) == 1:
            top = int(np.argmax(counts))
            label = ds.class_names[top] if ds.multiclass else _signed(classes[top])
            fix = ("upload a test file with both classes" if has_file else
                   "the rows are probably sorted by label: use the random split (split='random'), "
                   "raise the test fraction or upload a test file"
                   if ds.meta.get("params", {}).get("split") == "chronological" else
                   "raise the test fraction or upload a test file")
            out.append(f"the test set holds one class only (all {ds.y_test.size:,} test rows are "
                       f"{label}): test error and the majority baseline say little; {fix}")
        elif not has_file:
            out += _label_shift_warning(ds)
    known = ds.test_nodes[ds.test_nodes >= 0]
    if known.size and (fraction or ds.meta.get("dealt")):
        missing = int(np.count_nonzero(np.bincount(known, minlength=ds.n_nodes) == 0))
        if missing and ds.meta.get("dealt"):  # the test rows were dealt by class share, not held out per node
            out.append(f"{missing:,} of {ds.n_nodes:,} nodes were dealt no test row (each of the "
                       f"{int(ds.meta['dealt']):,} dealt rows goes to a node by its share of the row's class, "
                       "so a node with few training rows may draw none): their per-node test error is "
                       "undefined; use fewer nodes")
        elif missing:
            out.append(f"{missing:,} of {ds.n_nodes:,} nodes have no test rows (a node needs "
                       f"{math.ceil(1 / fraction)} rows to hold one out at test fraction {fraction:g}): "
                       "their per-node test error is undefined; use fewer nodes or raise the test fraction")
    return out


def _label_shift_warning(ds: FederatedDataset) -> list[str]:
    """A held-out set whose share of +1 is far from the training set's: a sorted file split in order.

    Far means both more than 10 points and more than 5 standard errors of a random
    split's test share (the two-proportion z statistic), so sampling noise alone, in a
    small test set, is not reported.
    """
    classes = dataset_classes(ds)
    if len(classes) != 2:  # a share of +1 means nothing for C > 2 classes
        return []
    p_train, p_test = (float(label_counts(y, classes)[1] / y.size) for y in (ds.y, ds.y_test))
    n_train, n_test = ds.y.size, ds.y_test.size
    p = (p_train * n_train + p_test * n_test) / (n_train + n_test)
    se = math.sqrt(p * (1 - p) * (1 / n_train + 1 / n_test))
    if abs(p_test - p_train) <= 0.1 or se == 0 or abs(p_test - p_train) <= 5 * se:
        return []
    return [f"the test set is {100 * p_test:.1f}% +1 but the training set {100 * p_train:.1f}%: the held-out "
            "rows are no sample of the data (is the file sorted?); use the random split (split='random') "
            "or upload a test file"]


def _assign(partition: str, X, y, *, groups, nodes: int, seed: int) -> np.ndarray:
    partitioner = make_partitioner(partition, n_nodes=nodes, seed=seed)
    return partitioner.assign(X, y, groups=groups)


def _group_nodes(train_groups, node_of_row, test_groups) -> np.ndarray:
    groups, first = np.unique(train_groups, return_index=True)
    node_of_group = node_of_row[first]
    pos = np.clip(np.searchsorted(groups, test_groups), 0, len(groups) - 1)
    return np.where(groups[pos] == test_groups, node_of_group[pos], -1)


def _preset_overrides(spec: DataSpec) -> tuple[str, dict]:
    """A preset spec's name and the overrides its generator gets (the spec's seed, bias and test fraction)."""
    name, overrides = parse_preset_spec(spec.source[len(PRESET_PREFIX):])
    overrides.setdefault("seed", spec.seed)
    if spec.bias is not None:
        overrides.setdefault("bias_feature", spec.bias)
    if spec.test_fraction is not None:
        overrides.setdefault("test_fraction", spec.test_fraction)
    return name, overrides


def check_budget(spec: DataSpec, max_entries: int) -> None:
    """Refuse a preset ``spec`` whose data would hold more than ``max_entries`` entries, in
    milliseconds and before anything is drawn (:func:`~fedviz.data.synthetic.estimate_entries`).
    A file's cost is bounded where it is read (its bytes, rows and width), so files pass."""
    if not spec.is_preset:
        return
    name, overrides = _preset_overrides(spec)
    rows, entries = estimate_entries(preset_config(name, **overrides))
    _check_entries(entries, rows, check_int("max_entries", max_entries, low=1), "this preset",
                   "fewer nodes or smaller nodes")


def _check_entries(entries: int, rows: int, budget: int, what: str, fix: str) -> None:
    if entries > budget:
        raise FedvizError(
            f"{what} would hold about {entries / 1e6:,.1f} million entries in {rows:,} rows "
            f"(~{entries * 12 / 1e6:,.0f} MB), over this server's budget of {budget / 1e6:,.1f} million "
            f"(FEDVIZ_MAX_ENTRIES); use {fix}")


def _check_test_labels(test, train, mapping) -> None:
    """Refuse a classification test file with a label its training file does not have.

    The one-vs-rest mapping would otherwise send every unknown label to -1 without a
    word (dna.scale.t's 1, 2, 3 against heart_scale's -1, +1: every test row one class).
    Naming the line lets the user find the mix-up.  Regression targets are free.
    """
    bad = np.flatnonzero(mapping.unknown(test.y))  # none for regression: targets are free
    if bad.size:
        row = int(bad[0])
        known_text = format_labels(mapping.classes, limit=len(mapping.classes))
        raise DataFormatError(
            f"label {format_label(test.y[row])} is not among the training file {train.source}'s labels "
            f"({known_text}); {bad.size:,} of {test.y.size:,} test rows carry such labels. "
            "Is it the test file of another data set?",
            line=None if test.row_lines is None else int(test.row_lines[row]), source=test.source)


def _signed(c: float) -> str:
    """A class of the mapped y as the warnings write it: "+1", "-1" (a code as itself)."""
    return {1.0: "+1", -1.0: "-1"}.get(float(c), format_label(c))


def _with_bias(X: sp.csr_matrix) -> sp.csr_matrix:
    ones = sp.csr_matrix(np.ones((X.shape[0], 1)))
    return sp.hstack([X, ones], format="csr")
