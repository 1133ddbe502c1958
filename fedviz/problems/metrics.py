"""The registry of per-node metrics (issue 29, point 4): what each node is scored on, and what of it a run keeps.

The paper's objective and test error are row-weighted averages over the nodes (f(w) = Σ_k (n_k/n) F_k(w),
eq. (1) and (6)); a per-node metric is a vector over the nodes, one value each, summarised at every recorded
iteration (:mod:`fedviz.problems.pernode` computes it, from the margins and loss sums the iteration loop has
anyway).  Each :class:`Metric` below says

- its ``name`` (the prefix of its record keys: ``node_error`` → ``node_error_p50``, …);
- its ``scope``, which model scores which nodes (:data:`SCOPES`);
- ``compute``: the per-node vector (and its pooled value, and how many nodes it leaves undefined) from the
  scope's evaluation, whose quantities are listed under :data:`SCOPES`;
- the ``summaries`` a record keeps (:data:`SUMMARIES`);
- how it reads: its ``title``, the ``caption`` under its band on the Run page, whether lower or higher is
  better (``direction``) and how its values print (``kind``).

Everything that reads per-node metrics walks :data:`METRICS`: the loop's records (:func:`fedviz.problems.pernode.score`),
the history (one JSON column of summaries, :mod:`fedviz.runner.history.store`), the exports (one column per key), the
live handle's columns and per-node histories, the cluster's stream, the Run page's "Per node" choice and its
band figure (:mod:`fedviz.plots.pernode`), ``fedviz run``'s progress line and an experiment's final figures.
A new metric is one entry here (and its test): no schema change, no page edit.

The keys of the metrics that existed before this registry keep the names the records, the history's columns
and the exports had (``names``): ``test_error`` and ``objective`` are the pooled test error and own loss,
``nodes_untested``, ``nodes_unseen``, ``unseen_test_error``, ``unseen_untested``, ``personal_test_error`` and
``personal_distance`` the others; every other key is ``<name>_<summary>``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

#: The statistics of a per-node vector computed in one compiled call (:func:`fedviz.problems.pernode.summarize`),
#: in the call's order, over the nodes where the vector is finite (K_t of them).
STATS = ("mean", "std", "p10", "p50", "p90", "worst10", "min", "max")

#: Every summary a metric can keep, and what it is.
SUMMARIES = {
    "pooled": "the value over all rows at once (the row-weighted mean of the per-node values where the metric is "
              "a per-row average)",
    "mean": "the unweighted mean over the nodes (each node one vote)",
    "std": "the population standard deviation over the nodes (ddof = 0)",
    "p10": "the 10th percentile over the nodes (numpy's 'linear' method, Hyndman & Fan's type 7)",
    "p50": "the median node (numpy's 'linear' percentile)",
    "p90": "the 90th percentile over the nodes (numpy's 'linear' method)",
    "worst10": "the mean of the ⌈K_t/10⌉ worst nodes (q-FFL's 'worst 10%'; at least one node): the highest values "
               "of a lower-is-better metric, the lowest of a higher-is-better one",
    "min": "the lowest node value",
    "max": "the highest node value",
    "untested": "the nodes the metric leaves undefined (no test rows): counted, never silently dropped",
    "nodes": "how many nodes the scope holds (0: none, e.g. no unseen nodes)",
    "rms": "the root mean square over the nodes, √((1/K) Σ_k v_k²)",
}

#: Which model scores which nodes, and what the scope's evaluation offers a metric's ``compute``:
#: ``test_errors()`` → (e_k per node, NaN without test rows; the pooled error), ``own_losses()`` →
#: (F_k per node, eq. (6); their row-weighted mean, or NaN), ``distances()`` → ‖v_k − v_k*‖ per node or
#: None without a target, ``untested`` (nodes without test rows) and ``K``.
SCOPES = {
    "seen": "the model in force (the global w) on each training node",
    "unseen": "the global w on each node held out of training (its test rows only; issue 23, point 2)",
    "personal": "each training node's own model v_k (Ditto, APFL; issue 23, point 3)",
}

DIRECTIONS = ("lower", "higher")
#: How a metric's values read: ``error`` is the problem's test error (a rate in %, or the mean squared
#: error on real targets), ``value`` a plain number (4 significant digits), ``distance`` a norm (3 digits,
#: in powers of ten).
KINDS = ("error", "value", "distance")


@dataclass(frozen=True)
class Values:
    """What a metric's ``compute`` returns: the per-node vector (float64; NaN where undefined), the pooled
    value (NaN when the metric has none) and how many nodes it leaves undefined for lack of rows."""

    per_node: np.ndarray
    pooled: float = math.nan
    untested: int = 0


@dataclass(frozen=True)
class Metric:
    """One per-node metric (see the module docstring).  ``compute(scope)`` returns its :class:`Values`, or
    None when the scope cannot measure it at this record (a distance without a target): its keys read NaN.
    ``history``: the Run page keeps its per-node values over the iterations for the node picker (bounded:
    :data:`fedviz.problems.pernode.NODE_HISTORY_VALUES` per metric); otherwise only the latest vector.
    ``choice``: its words in the Run page's "Per node" choice ('' : not offered there), ``help`` a clause of
    that choice's help, joined to the others' by ", or " (e.g. "its own objective F_k(w) …").  ``headline``: the
    summary ``fedviz run`` prints beside f − f* under the label ``cli`` (None: not printed).
    ``names``: summary → key, for keys named before the registry; ``pooled_label``: the pooled value's name
    in a legend, as its caption words it."""

    name: str
    scope: str
    compute: Callable[[Any], Values | None]
    summaries: tuple[str, ...]
    title: str
    caption: str
    direction: str = "lower"
    kind: str = "error"
    axis: str = ""
    choice: str = ""
    help: str = ""
    history: bool = False
    headline: str | None = None
    cli: str = ""
    names: Mapping[str, str] = field(default_factory=dict)
    #: What its pooled value is called in a legend and a tooltip: the words its caption uses for the dotted
    #: line (the own losses' pooled value is the objective f(w) itself).
    pooled_label: str = "pooled"

    def __post_init__(self):
        if self.scope not in SCOPES:
            raise ValueError(f"metric {self.name!r}: scope {self.scope!r} is not one of {', '.join(SCOPES)}")
        unknown = [s for s in self.summaries if s not in SUMMARIES]
        if unknown:
            raise ValueError(f"metric {self.name!r}: unknown summaries {unknown} (allowed: {', '.join(SUMMARIES)})")
        if self.direction not in DIRECTIONS or self.kind not in KINDS:
            raise ValueError(f"metric {self.name!r}: direction one of {DIRECTIONS}, kind one of {KINDS}")
        if self.headline is not None and self.headline not in self.summaries:
            raise ValueError(f"metric {self.name!r}: its headline {self.headline!r} is not one of its summaries")

    def key(self, summary: str) -> str:
        """The record key of one of its summaries (``names``, else ``<name>_<summary>``)."""
        return self.names.get(summary, f"{self.name}_{summary}")

    @property
    def keys(self) -> tuple[str, ...]:
        """The record keys it keeps, in its summaries' order."""
        return tuple(self.key(s) for s in self.summaries)

    @property
    def pooled_key(self) -> str | None:
        """The record key of its pooled value: its own summary, or a core field of the record (``names``)."""
        if "pooled" in self.summaries or "pooled" in self.names:
            return self.key("pooled")
        return None

    @property
    def band(self) -> bool:
        """Whether it keeps the 10th, 50th and 90th percentiles (drawn as a band around the median node)."""
        return all(s in self.summaries for s in ("p10", "p50", "p90"))

    @property
    def needs_test_rows(self) -> bool:
        """Whether it is defined only on nodes with test rows (it counts the untested ones)."""
        return "untested" in self.summaries


# -- what the scopes offer, as the metrics use it ---------------------------------------------------------------
def _test_error(scope) -> Values:
    per_node, pooled = scope.test_errors()
    return Values(per_node, pooled, scope.untested)


def _own_loss(scope) -> Values:
    per_node, pooled = scope.own_losses()
    return Values(per_node, pooled)


def _distance(scope) -> Values | None:
    d = scope.distances()
    return None if d is None else Values(d)


#: Every per-node metric, in the order of the record's keys, the exports' columns and the Run page's choice.
METRICS: tuple[Metric, ...] = (
    Metric("node_error", "seen", _test_error, STATS + ("untested",),
           title="Test error per node",
           caption="The band spans the nodes' 10th to 90th percentile test error over the nodes with test rows, "
                   "every node counted alike; the solid line is the median node, the dotted one the pooled "
                   "error over all test rows (the chart above).",
           choice="test error", help="each node's test error on its own test rows", history=True,
           names={"pooled": "test_error", "untested": "nodes_untested"}),
    Metric("node_loss", "seen", _own_loss, STATS,
           title="Own loss F_k(w) per node", kind="value", axis="F_k(w)",
           caption="The band spans the nodes' 10th to 90th percentile own loss F_k(w), every node counted alike; "
                   "the solid line is the median node, the dotted one f(w), their mean weighted by the nodes' "
                   "rows n_k/n (eq. (1)).",
           choice="own loss F_k(w)", help="its own objective F_k(w) of the paper's eq. (6) on its training rows",
           history=True, names={"pooled": "objective"}, pooled_label="f(w)"),
    Metric("unseen_error", "unseen", _test_error, ("nodes", "pooled") + STATS + ("untested",),
           title="Test error per unseen node",
           caption="The band spans the unseen nodes' 10th to 90th percentile test error under the model in force, "
                   "every unseen node counted alike; the solid line is the median unseen node, the dotted one the "
                   "error pooled over their test rows.",
           choice="unseen nodes' test error",
           help="the test error of each unseen node (held out of training) under the same model",
           headline="pooled", cli="unseen",
           names={"nodes": "nodes_unseen", "pooled": "unseen_test_error", "untested": "unseen_untested"}),
    Metric("personal_error", "personal", _test_error, ("pooled", "mean", "p10", "p50", "p90", "worst10"),
           title="Personal models: test error per node",
           caption="Each node's test rows scored with its own model (Ditto's v_k; APFL's mixture αv_k + (1 − α)w), "
                   "pooled over the test rows of the nodes.",
           headline="pooled", cli="personal", names={"pooled": "personal_test_error"}),
    Metric("personal_distance", "personal", _distance, ("rms",),
           title="Distance of the personal models to the exact Ditto models", kind="distance",
           axis="RMS ‖v_k − v_k(λ_D)‖",
           caption="The root mean square over the nodes of ‖v_k − v_k(λ_D)‖₂, the distance of each node's model to "
                   "the exact Ditto model the run was given.",
           headline="rms", cli="dist to v_k(λ_D)", names={"rms": "personal_distance"}),
)

#: The core fields of a record that are also the pooled value of a metric (not stored again).
CORE_KEYS = frozenset(m.key("pooled") for m in METRICS if "pooled" in m.names and "pooled" not in m.summaries)
#: Every key the metrics keep, in registry order: the record's summaries, the history's JSON, the exports' columns.
KEYS: tuple[str, ...] = tuple(k for m in METRICS for k in m.keys)
BY_NAME: Mapping[str, Metric] = {m.name: m for m in METRICS}
assert len(BY_NAME) == len(METRICS) and len(set(KEYS)) == len(KEYS) and not CORE_KEYS & set(KEYS), \
    "metric names and keys are unique, and no key is a core field of the record"


def get(name: str) -> Metric:
    """The metric ``name``; a ValueError names the registered ones."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"no per-node metric {name!r}; registered: {', '.join(BY_NAME)}") from None


_BY_SCOPE: Mapping[str, tuple[Metric, ...]] = {s: tuple(m for m in METRICS if m.scope == s) for s in SCOPES}


def of_scope(scope: str) -> tuple[Metric, ...]:
    """The metrics of one scope, in registry order (asked at every record: computed once)."""
    return _BY_SCOPE[scope]


def absent(scope: str) -> dict[str, float]:
    """The keys of a scope a record does not have (no unseen nodes, no personal models): NaN, but for
    ``nodes``, which counts them (0).  A new dict (the caller may change it)."""
    return dict(_ABSENT[scope])


_ABSENT = {scope: {m.key(s): (0.0 if s == "nodes" else math.nan) for m in of_scope(scope) for s in m.summaries}
           for scope in SCOPES}


def format_value(metric: Metric, value: float, *, regression: bool = False) -> str:
    """A value of ``metric`` as the command line prints it: an error as a rate in % (or the MSE on real
    targets), a distance in powers of ten, another value with 4 significant digits."""
    if metric.kind == "error":
        return f"MSE {value:9.4g}" if regression else f"err {100 * value:6.2f}%"
    if metric.kind == "distance":
        return f"{value:9.3e}"
    return f"{value:9.4g}"
