"""The unbalanced IID partition: random rows, lognormal node sizes.

This is FedLab's "unbalanced IID" split: each node's share of the rows is proportional
to a draw from lognormal(0, σ), so σ = 0 is the balanced split and a larger σ gives the
heavy-tailed sizes of real federated data (the paper's Section 1.2, "unbalanced"),
without any skew in what the rows look like.
"""

from __future__ import annotations

from .base import ParamSpec, Partitioner, apportion, fill_nodes, param_table


class IIDUnbalancedPartitioner(Partitioner):
    """Random rows; node sizes proportional to lognormal(0, σ) draws, each at least one.

    Every node first gets one row, and the other ``n - K`` rows are shared out in
    proportion to the draws (largest-remainder rounding), so no node is empty unless
    there are fewer rows than nodes.
    """

    name = "iid-unbalanced"
    title = "IID, unbalanced sizes"
    params = param_table(
        ParamSpec("sigma", float, 1.0, "Spread of the node sizes: the σ of the lognormal "
                  "(0 gives balanced nodes).", low=0, high=10),
    )

    def _assign(self, X, y, groups, rng):
        n, K = X.shape[0], self.n_nodes
        weights = rng.lognormal(mean=0.0, sigma=self.sigma, size=K)
        floor = 1 if n >= K else 0
        sizes = floor + apportion(n - floor * K, weights)
        return fill_nodes(sizes, rng)
