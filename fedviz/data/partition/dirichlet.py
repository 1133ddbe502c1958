"""Label skew by Dirichlet proportions (Hsu, Qi and Brown 2019; as flwr-datasets does it).

For each class c, the shares p_c ~ Dirichlet(α, ..., α) over the K nodes decide how
the class's rows are dealt out.  A large α gives every node nearly the global label
mix; a small α gives each class to a few nodes, the label skew of the paper's
Section 1.2 ("non-IID").
"""

from __future__ import annotations

import numpy as np

from ...errors import ParameterError
from .base import ParamSpec, Partitioner, label_codes, param_table


class DirichletPartitioner(Partitioner):
    """Deal each class over the nodes in Dirichlet(α) proportions.

    A draw is accepted only if every node gets at least ``min_size`` rows; otherwise the
    proportions of all classes are drawn again, up to ``max_attempts`` times.  Only the
    C × K table of counts is redrawn, so attempts are cheap.  Within a class, which rows
    go to which node is uniformly random.

    Rejection alone need not end: with two classes and a small α, each of K = 200 nodes
    draws a near-zero share of both classes with probability about 1/4, so no draw in a
    thousand leaves every node a row.  So when every attempt fails, the draw with the
    smallest total shortfall is *repaired*: each short node takes the rows it lacks,
    preferring the classes of its own largest shares, from the nodes with the most rows
    to spare.  Since ``K × min_size <= n`` (checked first), this always succeeds; it moves
    only the shortfall (a handful of rows), so the label skew of the draw stays, and the
    result is still a pure function of the seed.

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
                  "node smaller are redrawn.", low=0, high=10_000_000),
        ParamSpec("self_balancing", bool, False, "Give no more rows to nodes that already "
                  "hold n/K rows."),
        ParamSpec("max_attempts", int, 1000, "How many draws to try before topping up the "
                  "short nodes of the best one.", low=1, high=1_000_000),
    )

    def _assign(self, X, y, groups, rng):
        codes, C = label_codes(y, self.name)
        n, K = len(codes), self.n_nodes
        if self.min_size * K > n:
            raise ParameterError(f"{self.name}.min_size", self.min_size,
                                 f"integer <= {n // K} (K × min_size must not exceed the {n} rows; "
                                 f"K = {K} nodes)")
        class_sizes = np.bincount(codes, minlength=C)
        best, best_short = None, None
        for _ in range(self.max_attempts):
            counts, shares = self._draw_counts(class_sizes, rng)
            short = int(np.maximum(self.min_size - counts.sum(axis=0), 0).sum())
            if short == 0:
                break
            if best_short is None or short < best_short:
                best, best_short = (counts, shares), short
        else:
            counts = _top_up(*best, self.min_size)
        # Rows grouped by class, in random order within each class; then class c's block
        # is cut into runs of counts[c, 0], counts[c, 1], ... rows for nodes 0, 1, ...
        shuffled = rng.permutation(n)
        order = shuffled[np.argsort(codes[shuffled], kind="stable")]
        node_of_row = np.empty(n, dtype=np.int64)
        node_of_row[order] = np.repeat(np.tile(np.arange(K, dtype=np.int64), C), counts.ravel())
        return node_of_row

    def _draw_counts(self, class_sizes: np.ndarray, rng: np.random.Generator):
        """Draw the C × K table of how many rows of each class each node gets, and the shares."""
        C, K = len(class_sizes), self.n_nodes
        shares = rng.dirichlet(np.full(K, self.alpha), size=C)
        if not self.self_balancing:
            return _split_counts(shares, class_sizes), shares
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
        return counts, shares


def _top_up(counts: np.ndarray, shares: np.ndarray, min_size: int) -> np.ndarray:
    """Move rows to every node with fewer than ``min_size`` until none has.

    A short node k takes its missing rows class by class, in decreasing order of its own
    share ``shares[c, k]``, each time from the node with the most rows of that class to
    spare (rows beyond its own ``min_size``; ties to the lower index).  Needs
    ``sum(counts) >= K × min_size``: then while a node is short, another holds more than
    ``min_size`` rows, of some class, so every short node is filled.
    """
    counts = counts.copy()
    sizes = counts.sum(axis=0)
    for k in np.flatnonzero(sizes < min_size):
        for c in np.argsort(-shares[:, k], kind="stable"):
            while sizes[k] < min_size:
                spare = np.minimum(counts[c], sizes - min_size)
                spare[k] = 0
                j = int(np.argmax(spare))
                if spare[j] <= 0:
                    break  # no node can give class c: the next class
                m = min(int(min_size - sizes[k]), int(spare[j]))
                counts[c, j] -= m
                counts[c, k] += m
                sizes[j] -= m
                sizes[k] += m
            if sizes[k] >= min_size:
                break
    return counts


def _split_counts(shares: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Cut each ``totals[c]`` at the cumulative shares: counts that sum exactly to totals."""
    cuts = np.floor(np.cumsum(shares, axis=1) * totals[:, None]).astype(np.int64)
    cuts[:, -1] = totals  # the cumulative sum may end a rounding error short of 1
    np.minimum(cuts, totals[:, None], out=cuts)
    return np.diff(cuts, axis=1, prepend=0)
