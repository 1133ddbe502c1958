"""The balanced IID partition: the baseline every non-IID split is measured against."""

from __future__ import annotations

import numpy as np

from .base import Partitioner, apportion, fill_nodes


class IIDPartitioner(Partitioner):
    """Shuffle the rows and cut them into K parts whose sizes differ by at most one.

    The first ``n mod K`` nodes hold one row more.  With fewer rows than nodes the last
    ``K - n`` nodes are necessarily empty.
    """

    name = "iid"
    title = "IID, balanced"

    def _assign(self, X, y, groups, rng):
        sizes = apportion(X.shape[0], np.ones(self.n_nodes))
        return fill_nodes(sizes, rng)
