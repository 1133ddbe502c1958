"""The natural partition: one node per group the data already come with.

The groups are whatever ties rows to a source: the ``qid:`` of a LETOR file (each query
a node), or the node ids a synthetic generator drew its rows from.  This is the setting
of the paper's Section 4.1, where each node is one author's posts.
"""

from __future__ import annotations

from .base import Partitioner


class NaturalPartitioner(Partitioner):
    """One node per distinct value of ``groups``, numbered in increasing order of value.

    The groups decide the number of nodes, so ``n_nodes`` is ignored (pass None):
    merging or splitting groups to reach another K would destroy the very structure
    this partition exists to keep, and callers that hold a default K for the other
    partitioners can pass it along unchanged.  Deterministic: the seed is not used, and
    no node is ever empty.
    """

    name = "natural"
    title = "Natural groups"
    needs_groups = True
    nodes_from_groups = True
    randomized = False

    def _assign(self, X, y, groups, rng):
        return self._dense_groups(groups)
