"""The reshuffled partition: the same node sizes, filled with uniformly random rows.

This is the control of the paper's Section 4.1 (FSVRGR, the red stars of Figure 2):
"we keep the unbalanced number of examples per node, but populate each node with
randomly selected examples".  Comparing an algorithm on a partition and on its
reshuffle separates the effect of non-IID data from that of unbalanced sizes.
"""

from __future__ import annotations

import numpy as np

from .base import Partitioner, fill_nodes


class ReshufflePartitioner(Partitioner):
    """Keep each node's size, taken from ``groups``, and fill it with random rows.

    ``groups`` gives the current node of every row (e.g. a :class:`FederatedDataset`'s
    ``node_of_row``, or query ids).  Nodes are numbered as in
    :class:`~fedviz.data.partition.natural.NaturalPartitioner`, so node k keeps the
    size of natural node k.  As there, ``n_nodes`` is ignored.
    """

    name = "reshuffle"
    title = "Reshuffled (same sizes, random rows)"
    needs_groups = True
    nodes_from_groups = True

    def _assign(self, X, y, groups, rng):
        sizes = np.bincount(self._dense_groups(groups))
        return fill_nodes(sizes, rng)
