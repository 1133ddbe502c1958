"""Label skew by Dirichlet proportions (Hsu, Qi and Brown 2019; as flwr-datasets does it).

For each class c, the shares p_c ~ Dirichlet(α, ..., α) over the K nodes decide how
the class's rows are dealt out.  A large α gives every node nearly the global label
mix; a small α gives each class to a few nodes, the label skew of the paper's
Section 1.2 ("non-IID").
"""

from __future__ import annotations

import numpy as np

from ...errors import FedvizError, ParameterError
from .base import ParamSpec, Partitioner, label_codes, param_table


class DirichletPartitioner(Partitioner):
    """Deal each class over the nodes in Dirichlet(α) proportions.

    A draw is accepted only if every node gets at least ``min_size`` rows; otherwise the
    proportions of all classes are drawn again, up to ``max_attempts`` times.  Only the
    C × K table of counts is redrawn, so attempts are cheap.  Within a class, which rows
    go to which node is uniformly random.

    With ``self_balancing``, classes are dealt in turn and a node that already holds its
    fair share ``n / K`` gets no more rows of later classes, which keeps the node sizes
    from drifting far apart at small α.
    """

    name = "dirichlet"
    title = "Label skew (Dirichlet)"
    needs_labels = True
    params = param_table(
        ParamSpec("alpha", float, 0.5, "Concentration: small values give each node few "
                  "classes, large values the global label mix.", low=0, low_open=True,
                  log=True),
        ParamSpec("min_size", int, 1, "Fewest rows any node may get; draws that leave a "
                  "node smaller are redrawn.", low=0),
        ParamSpec("self_balancing", bool, False, "Give no more rows to nodes that already "
                  "hold n/K rows."),
        ParamSpec("max_attempts", int, 1000, "How many draws to try before giving up.",
                  low=1, high=1_000_000),
    )

    def _assign(self, X, y, groups, rng):
        codes, C = label_codes(y, self.name)
        n, K = len(codes), self.n_nodes
        if self.min_size * K > n:
            raise ParameterError(f"{self.name}.min_size", self.min_size,
                                 f"integer <= {n // K} ({n} rows over {K} nodes)")
        class_sizes = np.bincount(codes, minlength=C)
        smallest = -1
        for _ in range(self.max_attempts):
            counts = self._draw_counts(class_sizes, rng)
            node_sizes = counts.sum(axis=0)
            if node_sizes.min() >= self.min_size:
                break
            smallest = max(smallest, int(node_sizes.min()))
        else:
            raise FedvizError(
                f"dirichlet: none of {self.max_attempts} draws with alpha={self.alpha:g} gave "
                f"each of the {K} nodes at least min_size={self.min_size} rows (the best "
                f"draw's smallest node had {smallest}); use a larger alpha, fewer nodes or "
                "a smaller min_size")
        # Rows grouped by class, in random order within each class; then class c's block
        # is cut into runs of counts[c, 0], counts[c, 1], ... rows for nodes 0, 1, ...
        shuffled = rng.permutation(n)
        order = shuffled[np.argsort(codes[shuffled], kind="stable")]
        node_of_row = np.empty(n, dtype=np.int64)
        node_of_row[order] = np.repeat(np.tile(np.arange(K, dtype=np.int64), C), counts.ravel())
        return node_of_row

    def _draw_counts(self, class_sizes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Draw the C × K table of how many rows of each class each node gets."""
        C, K = len(class_sizes), self.n_nodes
        shares = rng.dirichlet(np.full(K, self.alpha), size=C)
        if not self.self_balancing:
            return _split_counts(shares, class_sizes)
        counts = np.zeros((C, K), dtype=np.int64)
        held = np.zeros(K, dtype=np.int64)
        fair = class_sizes.sum() / K
        for c in range(C):
            # Fewer than n rows are dealt so far, so some node is below its fair share
            # and the masked shares cannot all vanish.
            p = np.where(held < fair, shares[c], 0.0)
            if p.sum() <= 0:  # every open node drew a share that underflowed to zero
                p = (held < fair).astype(np.float64)
            counts[c] = _split_counts(p[None, :] / p.sum(), class_sizes[c:c + 1])[0]
            held += counts[c]
        return counts


def _split_counts(shares: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Cut each ``totals[c]`` at the cumulative shares: counts that sum exactly to totals."""
    cuts = np.floor(np.cumsum(shares, axis=1) * totals[:, None]).astype(np.int64)
    cuts[:, -1] = totals  # the cumulative sum may end a rounding error short of 1
    np.minimum(cuts, totals[:, None], out=cuts)
    return np.diff(cuts, axis=1, prepend=0)
