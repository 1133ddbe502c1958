"""The pathological non-IID partition of McMahan et al. (2017): a few label shards per node.

The rows are sorted by label and cut into K × s shards, and each node gets s shards
chosen at random, so it sees at most s labels: the most extreme label skew a fixed
number of classes per node allows.
"""

from __future__ import annotations

import numpy as np

from ...errors import ParameterError
from .base import ParamSpec, Partitioner, apportion, label_codes, param_table


class ShardsPartitioner(Partitioner):
    """Sort by label, cut into K × s shards, give each node s random shards.

    Unlike a plain cut of the sorted rows, shards never straddle two labels: each class
    gets a whole number of shards, in proportion to its size (largest-remainder
    rounding, at least one shard per class and at most one per row), and is cut into
    that many near-equal shards.  So every node really sees at most s labels, and shard
    sizes differ only by the rounding of those proportions.  Within a label, rows go to
    shards in random order.

    Needs ``C <= K × s <= n`` (C classes, n rows): every class needs a shard and every
    shard a row.  No node is then empty.
    """

    name = "shards"
    title = "Pathological label shards"
    needs_labels = True
    params = param_table(
        ParamSpec("classes_per_node", int, 2, "Shards per node, hence the most labels a "
                  "node can see.", low=1, high=1000),
    )

    def _assign(self, X, y, groups, rng):
        codes, C = label_codes(y, self.name)
        n, K, s = len(codes), self.n_nodes, self.classes_per_node
        n_shards = K * s
        if not C <= n_shards <= n:
            raise ParameterError(
                f"{self.name}.classes_per_node", s,
                f"integer in [{-(-C // K)}, {n // K}] ({C} classes and {n} rows over "
                f"{K} nodes: every class needs a shard and every shard a row)")
        class_sizes = np.bincount(codes, minlength=C)
        shards_of_class = _shards_per_class(class_sizes, n_shards)
        first_shard = np.cumsum(shards_of_class) - shards_of_class
        first_row = np.cumsum(class_sizes) - class_sizes
        # Rows grouped by class, random within a class; the r-th row of class c goes to
        # shard first_shard[c] + floor(r * m_c / n_c), cutting the class into m_c parts.
        shuffled = rng.permutation(n)
        order = shuffled[np.argsort(codes[shuffled], kind="stable")]
        c = codes[order]
        rank = np.arange(n) - first_row[c]
        shard = first_shard[c] + rank * shards_of_class[c] // class_sizes[c]
        node_of_shard = np.empty(n_shards, dtype=np.int64)
        node_of_shard[rng.permutation(n_shards)] = np.arange(n_shards) // s
        node_of_row = np.empty(n, dtype=np.int64)
        node_of_row[order] = node_of_shard[shard]
        return node_of_row


def _shards_per_class(class_sizes: np.ndarray, n_shards: int) -> np.ndarray:
    """Shards per class: proportional to the class sizes, each in [1, class size].

    One shard per class first, the rest in proportion; a class with very few rows can
    then get more shards than rows (only when shards hold about one row), and its excess
    goes to the classes with room that are furthest below their quota.
    """
    sizes = class_sizes.astype(np.int64)
    m = 1 + apportion(n_shards - len(sizes), sizes)
    excess = int(np.maximum(m - sizes, 0).sum())
    if excess:
        m = np.minimum(m, sizes)
        room = sizes - m
        quota = sizes * (n_shards / sizes.sum())
        by_need = np.argsort(m - quota, kind="stable")
        room_sorted = room[by_need]
        before = np.cumsum(room_sorted) - room_sorted
        m[by_need] += np.clip(excess - before, 0, room_sorted)
    return m
