"""The labels in one place: how a file's raw labels become the y a loss takes, and how many of each
class every node holds.

This module owns the label policy (issue 22, point 5):

* :class:`LabelMap`, the frozen record of a mapping: the classes found in the file (the sorted
  raw values), the policy in force and its sentence for people (the Data page's caption);
* :func:`map_labels`, which chooses the policy from the raw labels;
* the counts every label view reads: :func:`node_label_counts` (the K × C table of the rows of
  each class on each node), :func:`majority_class` and :func:`node_majority` (Section 4.1's
  predict-majority and per-node-majority baselines), :func:`label_skew` (Section 1.2's
  non-IID measure) and :func:`dataset_classes` (the classes of a data set's y).

The policies (Konečný et al., 2016, Section 1.1: y_i ∈ {−1, 1} for logistic regression and
SVMs, y_i ∈ R for linear regression):

* ``"binary"``: a file with two classes; the positive one (the larger, unless named) becomes +1,
  the other −1, and labels that already are −1 and +1 are kept;
* ``"one-vs-rest"``: a file with more classes and a named positive class, which becomes +1, every
  other class −1;
* ``"multiclass"``: every class kept, coded 0..C−1 in increasing order of the raw value (what
  scikit-learn's ``LabelEncoder`` does), for softmax models (issue 22, point 1); what
  :func:`fedviz.data.build.build` does with a file of more than two classes and no positive class;
* ``"regression"``: real targets kept as they are; there are no classes.

Binary and one-vs-rest data sets hold y ∈ {−1, +1}; their classes, in count order, are
(−1, +1), and a row counts as +1 when y > 0, the sign rule of the losses' error count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import DataFormatError, ParameterError
from ..validation import check_choice, check_real

__all__ = ["LabelMap", "POLICIES", "BINARY_CLASSES", "map_labels", "format_label", "format_labels",
           "class_codes", "label_counts", "node_label_counts", "dataset_classes", "dataset_label_counts",
           "majority_class", "node_majority", "label_skew", "positive_share"]

POLICIES = ("binary", "one-vs-rest", "multiclass", "regression")
#: The classes of a binary or one-vs-rest y, in the order of the counts' columns.
BINARY_CLASSES = (-1.0, 1.0)


def format_label(v) -> str:
    """A raw label as people write it: 3 as "3", 0.5 as "0.5"."""
    v = float(v)
    return str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)


def format_labels(values, limit: int = 5) -> str:
    """The first ``limit`` labels, comma-separated, and how many there are when more."""
    values = np.asarray(values).reshape(-1)
    shown = ", ".join(format_label(v) for v in values[:limit])
    return shown if values.size <= limit else f"{shown}, ... ({values.size} in all)"


@dataclass(frozen=True)
class LabelMap:
    """How a file's raw labels became the values a loss expects (:func:`map_labels`).

    Attributes
    ----------
    policy : {"binary", "one-vs-rest", "multiclass", "regression"}
        The mapping in force (module docstring).
    classes : tuple of float
        The distinct raw labels found in the (training) file, in increasing order; empty for
        regression.
    positive : float or None
        The raw label mapped to +1 (binary and one-vs-rest), else None.
    """

    policy: str
    classes: tuple[float, ...] = ()
    positive: float | None = None

    def __post_init__(self):
        check_choice("policy", self.policy, POLICIES)
        classes = tuple(float(c) for c in self.classes)
        if list(classes) != sorted(set(classes)):
            raise ParameterError("classes", classes, "distinct labels in increasing order")
        object.__setattr__(self, "classes", classes)
        if self.policy == "regression":
            if classes or self.positive is not None:
                raise ParameterError("classes", classes, "none for regression")
            return
        if len(classes) < 2:
            raise ParameterError("classes", classes, "at least two labels")
        if self.policy in ("binary", "one-vs-rest"):
            if self.positive not in classes:
                raise ParameterError("positive", self.positive, f"one of the classes {format_labels(classes)}")
            object.__setattr__(self, "positive", float(self.positive))
            if (self.policy == "binary") != (len(classes) == 2):
                raise ParameterError("policy", self.policy, "'binary' for two classes, 'one-vs-rest' for more")
        elif self.positive is not None:
            raise ParameterError("positive", self.positive, "None for the multiclass policy")

    # -- what the policy means ------------------------------------------------------------
    @property
    def task(self) -> str:
        """"regression" or "classification" (every other policy)."""
        return "regression" if self.policy == "regression" else "classification"

    @property
    def negative(self) -> tuple[float, ...]:
        """The raw labels mapped to −1, in increasing order (empty unless binary or one-vs-rest)."""
        if self.positive is None:
            return ()
        return tuple(c for c in self.classes if c != self.positive)

    @property
    def n_outputs(self) -> int:
        """C, the model's number of columns: the number of classes for multiclass, else 1."""
        return len(self.classes) if self.policy == "multiclass" else 1

    @property
    def model_classes(self) -> tuple[float, ...]:
        """The values the mapped y takes, in the order of the counts' columns: (−1, +1) for
        binary and one-vs-rest, the codes 0..C−1 for multiclass, none for regression."""
        if self.policy == "regression":
            return ()
        if self.policy == "multiclass":
            return tuple(float(c) for c in range(len(self.classes)))
        return BINARY_CLASSES

    @property
    def description(self) -> str:
        """The mapping as one sentence for people, e.g. "label 1 became +1, label 0 became −1"
        (the Data page's caption, ``ds.meta["labels"]``)."""
        if self.policy == "regression":
            return "real-valued targets kept as they are"
        if self.policy == "multiclass":
            codes = np.arange(len(self.classes))
            return (f"{len(self.classes)} classes: labels {format_labels(self.classes)} became "
                    f"classes {format_labels(codes)}")
        if self.classes == BINARY_CLASSES and self.positive == 1.0:
            return "labels -1 and +1 kept as they are"
        neg = self.negative
        neg_word = "label" if len(neg) == 1 else "labels"
        return f"label {format_label(self.positive)} became +1, {neg_word} {format_labels(neg)} became -1"

    # -- applying it ----------------------------------------------------------------------
    def unknown(self, y_raw) -> np.ndarray:
        """A mask of the raw labels that are none of :attr:`classes` (all False for regression)."""
        y_raw = np.asarray(y_raw, dtype=np.float64)
        if self.policy == "regression":
            return np.zeros(y_raw.shape, dtype=bool)
        return ~np.isin(y_raw, np.asarray(self.classes))

    def apply(self, y_raw) -> np.ndarray:
        """The mapped y (float64) of raw labels: ±1, codes 0..C−1, or the targets themselves.

        Binary and one-vs-rest send every label other than the positive one to −1, so check
        :meth:`unknown` first where a label may come from another file."""
        y_raw = np.asarray(y_raw, dtype=np.float64)
        if self.policy == "regression":
            return y_raw.copy()
        if self.policy == "multiclass":
            bad = self.unknown(y_raw)
            if np.any(bad):
                raise ParameterError("y", format_label(y_raw[bad][0]),
                                     f"one of the classes {format_labels(self.classes)}")
            return np.searchsorted(np.asarray(self.classes), y_raw).astype(np.float64)
        return np.where(y_raw == self.positive, 1.0, -1.0)


def map_labels(y, *, task: str = "auto", positive: float | None = None, source: str | None = None,
               multiclass: bool = False) -> tuple[np.ndarray, LabelMap]:
    """Map raw labels to {−1, +1} for classification (or to codes 0..C−1), or keep real targets.

    The losses of Section 1.1 (Konečný et al., 2016) take y_i in {−1, 1} for logistic
    regression and SVMs and y_i in R for linear regression.

    Parameters
    ----------
    y : array_like, 1-D
        Raw labels, e.g. :attr:`fedviz.data.libsvm.LibsvmData.y`.
    task : {"auto", "classification", "regression"}
        ``"auto"`` means classification when every label is an integer (or when
        ``positive`` is given) and regression otherwise.
    positive : float, optional
        The raw label that becomes +1; every other label becomes −1 (one-vs-rest).
        Default for two classes: the larger one.  Required for more than two classes
        unless ``multiclass``, because no choice of positive class is neutral.
    source : str, optional
        Where the labels come from (a file name), named in error messages.
    multiclass : bool
        Without ``positive``, keep every class, coded 0..C−1 (the ``"multiclass"`` policy; for
        softmax models, which fedviz does not train yet).

    Returns
    -------
    y_mapped : ndarray of float64
    mapping : LabelMap

    Raises
    ------
    DataFormatError
        A single class, more than two classes without ``positive`` or ``multiclass``, no
        labels, or non-finite labels.
    ParameterError
        ``positive`` not among the labels, or given for regression.
    """
    check_choice("task", task, ("auto", "classification", "regression"))
    if not isinstance(multiclass, (bool, np.bool_)):
        raise ParameterError("multiclass", multiclass, "True or False")
    try:
        y = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterError("y", type(y).__name__, "a 1-D array of numbers") from None
    if y.ndim != 1:
        raise ParameterError("y.ndim", y.ndim, "1")
    if y.size == 0:
        raise DataFormatError("there are no labels to map", source=source)
    if not np.all(np.isfinite(y)):
        raise DataFormatError(f"labels must be finite, found {format_label(y[~np.isfinite(y)][0])}",
                              source=source)
    if positive is not None:
        positive = check_real("positive", positive)
    if task == "auto":
        integral = bool(np.all(y == np.round(y)))
        task = "classification" if integral or positive is not None else "regression"
    if task == "regression":
        if positive is not None:
            raise ParameterError("positive", positive, "None when task='regression'")
        mapping = LabelMap("regression")
        return mapping.apply(y), mapping

    classes = np.unique(y)
    if classes.size == 1:
        raise DataFormatError(f"classification needs two classes, but every label is {format_label(classes[0])} "
                              f"(all {y.size:,} rows)", source=source)
    if positive is None:
        if multiclass:
            mapping = LabelMap("multiclass", tuple(classes))
            return mapping.apply(y), mapping
        if classes.size > 2:
            raise DataFormatError(
                f"the labels hold {classes.size} classes ({format_labels(classes)}); binary classification "
                "needs a positive class: choose one with positive=<label> (one-vs-rest)", source=source)
        positive = float(classes[1])
    elif positive not in classes:
        raise ParameterError("positive", positive, f"one of the labels found: {format_labels(classes)}")
    mapping = LabelMap("binary" if classes.size == 2 else "one-vs-rest", tuple(classes), positive)
    return mapping.apply(y), mapping


# --------------------------------------------------------------------------- counting

def dataset_classes(ds) -> tuple[float, ...] | None:
    """The classes of a data set's y, in the order of the counts' columns; None for regression.

    Binary and one-vs-rest data sets hold y ∈ {−1, +1}; multiclass ones (``ds.multiclass``) the
    codes 0..C−1.
    """
    if ds.task == "regression":
        return None
    if getattr(ds, "multiclass", False):
        return tuple(float(c) for c in range(ds.n_classes))
    return BINARY_CLASSES


def class_codes(y, classes=BINARY_CLASSES) -> np.ndarray:
    """The column of each label in ``classes`` (int64, 0..C−1).

    For the binary classes (−1, +1) a label is +1 when it is positive, the sign rule of the
    losses' error count, and no label is refused.  Otherwise every label must be one of
    ``classes`` (given in increasing order).
    """
    y = np.asarray(y).reshape(-1)
    classes = np.asarray(classes, dtype=np.float64).reshape(-1)
    if classes.size == 0 or np.any(np.diff(classes) <= 0):
        raise ParameterError("classes", format_labels(classes), "distinct labels in increasing order")
    if classes.size == 2 and classes[0] == -1.0 and classes[1] == 1.0:
        return (y > 0).astype(np.int64)  # a comparison, not a search: paper-scale y costs one pass
    codes = np.searchsorted(classes, y)
    clipped = np.minimum(codes, classes.size - 1)
    bad = classes[clipped] != y
    if np.any(bad):
        raise ParameterError("y", format_label(y[bad][0]), f"one of the classes {format_labels(classes)}")
    return codes.astype(np.int64)


def node_label_counts(y, offsets, classes=None) -> np.ndarray:
    """The K × C table of how many rows of each class every node holds.

    Parameters
    ----------
    y : array_like, shape (n,)
        Labels, node k's rows being ``offsets[k]:offsets[k+1]`` (a :class:`FederatedDataset`'s
        ``y`` and ``offsets``).
    offsets : array_like of int, shape (K + 1,)
        Node boundaries, from 0 to n, non-decreasing.
    classes : sequence of float, optional
        The columns, in increasing order (:func:`class_codes`).  Default: the distinct values
        of ``y`` (``np.unique``).

    Returns
    -------
    ndarray of int64, shape (K, C)
        Row k sums to node k's size; column c counts the rows labelled ``classes[c]``.
    """
    y = np.asarray(y).reshape(-1)
    offsets = np.asarray(offsets).reshape(-1)
    if offsets.size < 1 or offsets[0] != 0 or offsets[-1] != y.size or np.any(np.diff(offsets) < 0):
        raise ParameterError("offsets", f"{offsets.size} boundaries ending at {offsets[-1] if offsets.size else None}",
                             f"non-decreasing from 0 to n = {y.size}")
    if classes is None:
        classes = np.unique(y)
    codes = class_codes(y, classes)
    C = len(classes)
    K = offsets.size - 1
    node = np.repeat(np.arange(K, dtype=np.int64), np.diff(offsets))  # empty nodes get no rows
    return np.bincount(node * C + codes, minlength=K * C).reshape(K, C)


def label_counts(y, classes=None) -> np.ndarray:
    """How many rows of each class ``y`` holds (int64, one count per class): one node's row of
    :func:`node_label_counts`."""
    y = np.asarray(y).reshape(-1)
    return node_label_counts(y, [0, y.size], classes)[0]


def dataset_label_counts(ds) -> np.ndarray:
    """:func:`node_label_counts` of a data set's training rows, with :func:`dataset_classes`."""
    classes = dataset_classes(ds)
    if classes is None:
        raise ParameterError("task", ds.task, "classification: regression targets have no classes")
    return node_label_counts(ds.y, ds.offsets, classes)


def majority_class(counts) -> int:
    """The column with the most rows in ``counts`` (one count per class, or a K × C table, summed
    over its nodes); ties go to the lowest class (for binary, −1: 'no comment')."""
    counts = np.asarray(counts)
    total = counts.sum(axis=0) if counts.ndim == 2 else counts
    return int(np.argmax(total))


def node_majority(counts) -> np.ndarray:
    """Each node's majority class (a column index per row of the K × C ``counts``).

    A node whose top classes tie takes, among them, the one with the most rows overall (the
    global majority when it is one of them), and the lowest of those when they tie again.
    """
    counts = np.asarray(counts)
    total = counts.sum(axis=0)
    top = counts == counts.max(axis=1, keepdims=True)
    # Among each node's top classes, the global count decides; argmax takes the lowest of equals.
    return np.argmax(np.where(top, total[None, :], -1), axis=1)


def positive_share(counts) -> np.ndarray | float:
    """The share of +1 rows: of each node for a K × 2 table, or of all rows for one count per class."""
    counts = np.asarray(counts)
    if counts.shape[-1] != 2:
        raise ParameterError("counts", f"{counts.shape[-1]} classes", "2 (binary or one-vs-rest)")
    if counts.ndim == 1:
        return float(counts[1] / counts.sum())
    return counts[:, 1] / counts.sum(axis=1)


def label_skew(counts) -> float:
    """Σ_k (n_k/n) TV(p_k, p): how far the nodes' label distributions p_k lie from the whole's p,
    TV(a, b) = ½ Σ_c |a_c − b_c| (Section 1.2's non-IID, for labels; 0 when every node is a
    perfect sample).  For two classes TV is |p_k,+ − p_+|, computed so."""
    counts = np.asarray(counts, dtype=np.float64)
    sizes = counts.sum(axis=1)
    n = sizes.sum()
    if counts.shape[1] == 2:
        p = counts[:, 1].sum() / n
        return float(np.sum(sizes / n * np.abs(counts[:, 1] / sizes - p)))
    p = counts.sum(axis=0) / n
    tv = 0.5 * np.abs(counts / sizes[:, None] - p[None, :]).sum(axis=1)
    return float(np.sum(sizes / n * tv))
