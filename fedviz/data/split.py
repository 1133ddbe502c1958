"""Which of each node's rows become test rows, when there is no separate test file.

This module owns the random split (:func:`random_split`), the allowed split names
(:data:`SPLITS`) and the sentences that describe a split to people
(:func:`describe_split`).  The chronological split, the paper's per-author rule, is
:func:`fedviz.data.dataset.chronological_split`.

Why a random split by default: many public LIBSVM files are sorted (by label, by
source, by date of collection), and the last rows of a node in file order are then no
sample of its rows at all — a file sorted by label gets a test set of one class.  File
order is a time order only where the file says so (a generator's stream, or qid
groups that are sessions), and there the chronological split stays.

Both splits hold out the same number of rows per node, ⌊f·m_k⌋ of node k's m_k rows,
so every node keeps at least one training row when f < 1 and the choice of split
changes which rows are held out, never how many.
"""

from __future__ import annotations

import zlib

import numpy as np

from ..errors import ParameterError
from ..validation import check_choice, check_int, check_real

__all__ = ["SPLITS", "random_split", "describe_split", "deal_test_rows", "DEAL_STREAM", "DEAL_LABEL",
           "DEAL_REMEDY"]

#: "auto": random for files, chronological for files whose nodes are their qid groups
#: (sessions or queries, whose order means something) and for presets (the generator's
#: own time order); "random" and "chronological" force one.
SPLITS = ("auto", "random", "chronological")


def random_split(node_of_row, fraction: float, *, seed: int, labels=None, n_classes: int | None = None
                 ) -> np.ndarray:
    """A mask of test rows: a seeded random ⌊f·m_k⌋ of each node's m_k rows.

    With ``labels`` (classification), the split is stratified within each node: each
    (node, label) stratum of c rows gives ⌊f·c⌋ or ⌈f·c⌉ test rows, the node's extra rows
    going to the strata with the largest remainders (Hamilton's largest-remainder rule,
    ties broken at random), so every stratum's test count is within 1 of f·c while the
    node's total stays ⌊f·m_k⌋, the count :func:`chronological_split` holds out.
    Without ``labels`` (regression), the rows are drawn uniformly within each node.

    ``labels`` are the classes of the rows: any values (their distinct values are the
    classes), booleans (two classes), or, with ``n_classes`` = C, the codes 0..C−1 of
    :func:`fedviz.data.labels.class_codes`, which the builder passes so that the strata
    are the label module's classes, also those absent from the file.

    The random stream is keyed by the seed and the word "split", so it is independent of
    a partitioner seeded alike (which would otherwise line the two shuffles up).
    Same inputs and seed, same mask.
    """
    node = np.asarray(node_of_row).reshape(-1)
    fraction = check_real("test_fraction", fraction, low=0.0, high=1.0, high_open=True)
    seed = check_int("seed", seed, low=0, high=2**32 - 1)
    n = node.size
    if n == 0:
        return np.zeros(0, dtype=bool)
    if node.dtype.kind not in "iu" or node.min() < 0 or node.max() >= 2 * n:
        node = np.unique(node, return_inverse=True)[1].reshape(-1)  # else: a partitioner's 0..K-1
    node = node.astype(np.int64, copy=False)
    if labels is None:
        n_classes, cls = 1, np.zeros(n, dtype=np.int64)
    else:
        labels = np.asarray(labels).reshape(-1)
        if labels.shape != (n,):
            raise ValueError("labels must hold one label per row")
        if n_classes is not None:  # codes of the labels module: no sort needed
            n_classes = check_int("n_classes", n_classes, low=1)
            if labels.dtype.kind not in "iub" or labels.min() < 0 or labels.max() >= n_classes:
                raise ParameterError("labels", f"{labels.dtype} values", f"class codes 0..{n_classes - 1} "
                                     f"(n_classes={n_classes})")
            cls = labels.astype(np.int64)
        elif labels.dtype == bool:  # two classes: no sort needed
            n_classes, cls = 2, labels.astype(np.int64)
        else:
            classes, cls = np.unique(labels, return_inverse=True)
            n_classes, cls = len(classes), cls.reshape(-1).astype(np.int64)
    # Strata are (node, class) pairs, as a dense K × C table (a node has few classes).
    K = int(node.max()) + 1
    key = node * n_classes + cls
    counts = np.bincount(key, minlength=K * n_classes).reshape(K, n_classes)
    n_test = np.floor(fraction * counts.sum(1)).astype(np.int64)  # chronological_split's count
    quota = fraction * counts
    take = np.minimum(np.floor(quota).astype(np.int64), counts)
    remainder = quota - take
    extra = n_test - take.sum(1)

    rng = np.random.default_rng([seed, zlib.crc32(b"split")])
    # In each node, strata by decreasing remainder (random among equal ones): the first
    # extra_k of node k get one row more.  They all have a positive remainder, since the
    # remainders (each < 1) sum to at least extra_k.
    order = np.lexsort((rng.random((K, n_classes)), -remainder), axis=-1)
    gets = np.zeros_like(take)
    np.put_along_axis(gets, order, np.arange(n_classes)[None, :] < extra[:, None], axis=-1)
    take = np.minimum(take + gets, counts)
    for k in np.flatnonzero(take.sum(1) > n_test):  # only through rounding in f·c: never seen
        for c in np.argsort(remainder[k]):
            if take[k].sum() > n_test[k] and take[k, c] > 0:
                take[k, c] -= 1

    # Within each stratum, its first take_s rows in a random order are the test rows.
    perm = rng.permutation(n)
    narrow = np.uint16 if K * n_classes <= 1 << 16 else np.uint32 if K * n_classes <= 1 << 32 else np.int64
    rows = perm[np.argsort(key[perm].astype(narrow), kind="stable")]  # uint16: numpy's radix sort
    flat = counts.reshape(-1)
    start = np.cumsum(flat) - flat
    rank = np.arange(n) - start[key[rows]]
    mask = np.empty(n, dtype=bool)
    mask[rows] = rank < take.reshape(-1)[key[rows]]
    return mask


#: The key of the dealing's random stream, beside the seed: 23, for issue 23, the stream the built-in
#: experiment personalisation-dirichlet dealt with before the option existed (so its numbers stand).
#: No other draw uses it, so dealing changes no other random choice.
DEAL_STREAM = 23


#: The Data page's checkbox of :attr:`DataSpec.deal_test <fedviz.data.build.DataSpec>`.
DEAL_LABEL = "Deal the test rows to the nodes"
#: The remedy for test rows of no node, named wherever a per-node view is n/a for want of them.
DEAL_REMEDY = (f"To score every node, tick '{DEAL_LABEL}' on Data (fedviz --deal-test): each test row goes to a "
               "node drawn by the nodes' shares of its class, and the pooled test error stays as it is.")


def deal_test_rows(node_of_row, n_nodes: int, *, seed: int, train_classes=None, test_classes=None,
                   n_classes: int | None = None, n_test: int | None = None) -> np.ndarray:
    """A node for each test row that belongs to none: drawn by the nodes' shares of the training rows.

    Classification (``train_classes`` and ``test_classes``, the codes 0..C−1 of
    :func:`fedviz.data.labels.class_codes` of the training and the test rows, ``n_classes`` = C):
    a test row of class c goes to node k with probability n_k^c / n^c, node k's share of the
    training rows of class c — the split a per-node random split of the same rows would make in
    distribution when the nodes differ only in their label mix (Dirichlet label skew).  A class no
    training row holds goes to a node drawn uniformly.  Regression (no classes; ``n_test`` rows):
    node k with probability n_k / n, its share of the training rows (eq. (1)'s weights).

    The draws are independent, class by class in code order (``rng.choice``), from a stream of
    their own, ``[seed, DEAL_STREAM]``: same inputs and seed, same nodes.  Returns int64 node ids.
    """
    node = np.asarray(node_of_row, dtype=np.int64).reshape(-1)
    K = check_int("n_nodes", n_nodes, low=1)
    seed = check_int("seed", seed, low=0, high=2**32 - 1)
    if node.size and (node.min() < 0 or node.max() >= K):
        raise ParameterError("node_of_row", f"ids {node.min()}..{node.max()}", f"node ids 0..{K - 1}")
    rng = np.random.default_rng([seed, DEAL_STREAM])
    if test_classes is None:  # regression: by node size
        n_test = check_int("n_test", n_test, low=0)
        sizes = np.bincount(node, minlength=K).astype(np.float64)
        p = sizes / sizes.sum() if sizes.sum() > 0 else np.full(K, 1.0 / K)
        return rng.choice(K, size=n_test, p=p).astype(np.int64)
    C = check_int("n_classes", n_classes, low=1)
    train = np.asarray(train_classes, dtype=np.int64).reshape(-1)
    test = np.asarray(test_classes, dtype=np.int64).reshape(-1)
    if train.shape != node.shape:
        raise ValueError("train_classes must hold one class code per training row")
    for name, codes in (("train_classes", train), ("test_classes", test)):
        if codes.size and (codes.min() < 0 or codes.max() >= C):
            raise ParameterError(name, f"codes {codes.min()}..{codes.max()}", f"class codes 0..{C - 1}")
    counts = np.zeros((C, K))
    np.add.at(counts, (train, node), 1.0)
    out = np.empty(test.size, dtype=np.int64)
    for c in range(C):
        rows = np.flatnonzero(test == c)
        if rows.size == 0:  # no draw (rng.choice of none draws nothing either)
            continue
        total = counts[c].sum()
        p = counts[c] / total if total > 0 else np.full(K, 1.0 / K)
        out[rows] = rng.choice(K, size=rows.size, p=p)
    return out


def describe_split(kind: str, fraction: float, *, seed: int | None = None, stratified: bool = False) -> str:
    """The split in force as a sentence for people (``ds.meta["split"]``)."""
    check_choice("split", kind, ("random", "chronological"))
    share = _percent(fraction)
    if kind == "random":
        how = ", stratified by label" if stratified else ""
        return f"random {share} of each node's rows{how} (seed {seed})"
    return f"chronological: the last {share} of each node's rows in file order"


def _percent(fraction: float) -> str:
    """0.25 as '25%', 0.125 as '12.5%'."""
    return f"{100 * fraction:.4g}%"
