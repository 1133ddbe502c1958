"""Per-node evaluation of a model (issue 23, point 1): every node's test error and own loss,
and the distribution over nodes that the benchmarks of record report.

The paper's objective is a row-weighted average: f(w) = Σ_k (n_k/n) F_k(w) with the local
objectives F_k(w) = (1/n_k) Σ_{i ∈ P_k} f_i(w) of eq. (6), and its test error is pooled over
all test rows.  A pooled figure hides the nodes a model serves badly (Section 4.1: the best
single model errs 26.4% on google-plus-small while each author's own majority label errs
17.3%).  This module scores each node separately from margins the loop computes anyway,
so the evaluation costs no pass over X or X_test beyond the one the pooled test error
already takes: each node's error count comes from one compiled pass over the test margins
(which also gives the pooled count), each node's loss sum from the pass that computes f(w)
(one addition per row inside the loss kernel, :meth:`Loss.value_deriv_nodes
<fedviz.problems.losses.Loss.value_deriv_nodes>`), and the summaries from one compiled call.
``python -m fedviz bench --pernode`` measures the extra in test passes (issue 23's bar: ≤ 1).

For node k, with T_k its test rows (``ds.test_nodes == k``) and P_k its training rows:

- test error e_k: the :attr:`~fedviz.problems.objective.Problem.error_metric` over T_k, the
  sign error rate (1/|T_k|) Σ [sign(x_iᵀw) ≠ y_i] (a margin of exactly 0 predicts −1, as
  :func:`~fedviz.data.baselines.classification_error`), or the mean squared error on
  regression targets.  Undefined (NaN) when T_k is empty.
- own loss F_k(w) = (1/n_k) Σ_{i ∈ P_k} φ_i(x_iᵀw) + (λ/2)‖w‖², eq. (6) (every node has
  training rows, so every node has one).  Its row-weighted mean is f(w), eq. (1).

The summary of a vector v over the nodes where it is defined (K_t of them), :func:`summarize`:

- ``pooled``: the row-weighted mean.  For the test error it is the pooled test error of
  the whole test set (``Problem.test_error``), computed the same way; test rows with no node
  (−1: a separate test file) count in it but in no node.
- ``mean``: the unweighted mean over the K_t nodes (each node one vote).
- ``std``: the population standard deviation over them (ddof = 0).
- ``p10``, ``p50``, ``p90``: ``numpy.percentile(v, q, method="linear")`` (Hyndman & Fan's
  type 7, numpy's default: linear interpolation between order statistics).
- ``worst10``: the mean of the m = ⌈K_t / 10⌉ worst nodes (the highest values: error and loss
  are both "lower is better"), q-FFL's "worst 10%"; at least one node, so with fewer than
  ten nodes it is the maximum.
- ``min``, ``max``: the best and the worst node.
- ``untested``: the K − K_t nodes without a test row, counted, never silently dropped.

Unseen nodes (issue 23, point 2; :mod:`fedviz.data.unseen`): the nodes a data set holds out of
training are scored apart, by :class:`UnseenEvaluator` (the same :class:`NodeEvaluator` on the
problem of the held-out nodes): the model in force on each unseen node's test rows, every recorded
iteration, as ``unseen_test_error`` (pooled over their test rows) and ``unseen_error_<stat>``.
Their cost is one product with the unseen test rows (a share of the test set the seen nodes no
longer have).

Which vectors a record keeps and which summaries of them is the registry's (:mod:`fedviz.problems.metrics`):
each evaluator here scores one of its *scopes* (:class:`NodeEvaluator` the seen nodes under the global
model, :class:`UnseenEvaluator` the held-out ones, :class:`PersonalEvaluator` each seen node under its own
model) and hands the metrics of that scope a view of its evaluation (:class:`SeenScope`,
:class:`UnseenScope`, :class:`PersonalScope`); :func:`score` computes every metric of the scope and their
summaries, the statistics of all of them in one compiled call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numba
import numpy as np

from ..data.split import DEAL_REMEDY
from ._compiled import LOSS_CODES, check_code, phi
from .losses import segment_sums
from . import metrics
from .metrics import STATS

#: The per-node metrics, their summaries and record keys are the registry's (:mod:`fedviz.problems.metrics`);
#: :data:`STATS` the statistics of one compiled call, :data:`FIELDS` every key a record keeps.
FIELDS = metrics.KEYS

#: The percentiles' interpolation, passed to numpy.percentile.
PERCENTILE_METHOD = "linear"
#: The share of nodes whose mean is the "worst" statistic.
WORST_SHARE = 0.10


def worst_count(k: int) -> int:
    """m = ⌈k · 10%⌉ (at least 1 for k ≥ 1): how many nodes the worst-10% mean averages.

    Computed in integers so that k = 10, 20, … give exactly k/10 (a float product can round up).
    """
    return max(1, -(-k // 10)) if k > 0 else 0


def summarize(values: np.ndarray) -> dict[str, float]:
    """The unweighted statistics :data:`STATS` of ``values`` over its finite entries (all NaN when none).

    A node whose value is NaN (no test rows) or ±inf is left out of every statistic; the caller
    counts the untested nodes.  (A non-finite loss means the model diverged: the record's
    objective says so already.)  One compiled call (:func:`_summaries`): at K = 500 nodes numpy's
    percentile, partition and reductions cost about a test pass of google-plus-small by themselves.
    """
    v = np.ascontiguousarray(values, dtype=np.float64).reshape(1, -1)
    out = np.empty((1, len(STATS)))
    _summaries(v, out)
    return dict(zip(STATS, out[0].tolist()))


@numba.njit(cache=True, nogil=True)
def _summaries(values, out):
    """out[r] = the statistics :data:`STATS` (in that order) of the finite entries of ``values[r]``:
    the mean (their sum in ascending order / K_t), the population standard deviation (two passes),
    numpy's "linear" percentiles (h = (K_t − 1)·q/100 with q/100 a float as numpy takes it, and its
    interpolation a + (b − a)·γ, or b − (b − a)·(1 − γ) when γ ≥ ½, so equal to
    ``numpy.percentile`` bit for bit), the mean of the ⌈K_t/10⌉ largest, the minimum and the maximum."""
    for r in range(values.shape[0]):
        row = values[r]
        buf = np.empty(row.size)
        m = 0
        for x in row:
            if np.isfinite(x):
                buf[m] = x
                m += 1
        if m == 0:
            out[r, :] = np.nan
            continue
        v = np.sort(buf[:m])
        total = 0.0
        for x in v:
            total += x
        mean = total / m
        sq = 0.0
        for x in v:
            sq += (x - mean) * (x - mean)
        out[r, 0] = mean
        out[r, 1] = np.sqrt(sq / m)
        for j, q in enumerate((10.0, 50.0, 90.0)):
            h = (m - 1) * (q / 100.0)
            lo = int(np.floor(h))
            hi = min(lo + 1, m - 1)
            g = h - lo
            a, b = v[lo], v[hi]
            diff = b - a
            out[r, 2 + j] = b - diff * (1.0 - g) if g >= 0.5 else a + diff * g
        top = max(1, -(-m // 10))
        worst = 0.0
        for i in range(m - top, m):
            worst += v[i]
        out[r, 5] = worst / top
        out[r, 6] = v[0]
        out[r, 7] = v[m - 1]


@dataclass(frozen=True, eq=False)
class NodeScores:
    """Every node's value of each per-node metric at one iteration: metric name → vector
    (:data:`metrics.METRICS <fedviz.problems.metrics.METRICS>`; the vectors of one scope have its K entries).

    Stored as float32: enough for a histogram and a curve, half the memory of a run's history
    (:class:`~fedviz.runner.serve.handle.RunHandle` keeps a bounded number of them).
    """

    iteration: int
    values: Mapping[str, np.ndarray]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.values[name]

    def get(self, name: str) -> np.ndarray | None:
        return self.values.get(name)

    def with_values(self, more: Mapping[str, np.ndarray]) -> "NodeScores":
        """These scores and ``more`` (another scope's vectors at the same iteration)."""
        return NodeScores(self.iteration, {**self.values, **more})

    # The three vectors the Run page reads by name (the seen nodes' test error and own loss, the unseen
    # nodes' test error; None where the record has none).
    error = property(lambda self: self.values.get("node_error"))
    loss = property(lambda self: self.values.get("node_loss"))
    unseen = property(lambda self: self.values.get("unseen_error"))


def score(scope: str, view) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Every metric of ``scope`` (:func:`metrics.of_scope <fedviz.problems.metrics.of_scope>`) computed on
    ``view`` (the scope's evaluation): (their summaries by record key, their per-node vectors as float32).

    The statistics :data:`STATS` of all the scope's vectors come from one compiled call (:func:`_summaries`,
    one row per vector); a metric that ``view`` cannot measure (its ``compute`` gives None) keeps NaN.
    """
    chosen = metrics.of_scope(scope)
    computed = [m.compute(view) for m in chosen]
    rows = [v.per_node for m, v in zip(chosen, computed) if v is not None and any(s in STATS for s in m.summaries)]
    table = np.empty((len(rows), view.K))
    for i, r in enumerate(rows):
        table[i] = r
    stats = np.empty((len(rows), len(STATS)))
    if rows:
        _summaries(table, stats)
    stats = iter(stats.tolist())
    fields, vectors = {}, {}
    for m, v in zip(chosen, computed):
        if v is None:
            fields.update({m.key(s): math.nan for s in m.summaries})
            continue
        row = dict(zip(STATS, next(stats))) if any(s in STATS for s in m.summaries) else {}
        if "worst10" in row and m.direction == "higher":
            row["worst10"] = _lowest_mean(v.per_node)  # the worst nodes of a higher-is-better metric are the lowest
        for s in m.summaries:
            if s in row:
                value = row[s]
            elif s == "pooled":
                value = float(v.pooled)
            elif s == "untested":
                value = float(v.untested)
            elif s == "nodes":
                value = float(view.K)
            else:  # "rms"
                value = float(np.sqrt(np.mean(v.per_node ** 2)))
            fields[m.key(s)] = value
        with np.errstate(over="ignore"):  # a value beyond float32 (a blown-up personal model) is kept as inf
            vectors[m.name] = v.per_node.astype(np.float32)
    return fields, vectors


def _lowest_mean(values: np.ndarray) -> float:
    """The mean of the ⌈K_t/10⌉ lowest finite entries (NaN when none), summed in ascending order as
    :func:`_summaries` sums the highest."""
    v = np.sort(values[np.isfinite(values)])
    top = worst_count(v.size)
    return sum(v[:top].tolist()) / top if top else math.nan


class SeenScope:
    """The global model w on the training nodes, as the metrics of the "seen" scope read it: the test
    margins and training margins of the loop's record, each quantity computed once when first asked."""

    def __init__(self, ev: "NodeEvaluator", w, z, z_test, loss_sums=None):
        self.ev, self.w, self.z, self.z_test, self.loss_sums = ev, w, z, z_test, loss_sums
        self.K, self.untested = ev.K, ev.untested
        self._errors = self._losses = None

    def test_errors(self) -> tuple[np.ndarray, float]:
        if self._errors is None:
            self._errors = self.ev.test_errors(self.z_test)
        return self._errors

    def own_losses(self) -> tuple[np.ndarray, float]:
        """F_k(w) per node; the pooled value is the record's objective (not repeated here)."""
        if self._losses is None:
            self._losses = self.ev.node_loss(self.w, self.z, self.loss_sums), math.nan
        return self._losses

    def distances(self) -> None:
        return None


class NodeEvaluator:
    """Scores every node of one problem from the margins the iteration loop has anyway.

    Built once per run (the node ids of the test rows and the row counts are fixed); each call
    to :meth:`evaluate` costs O(n_test + K log K) arithmetic given the nodes' loss sums (else
    O(n) more) and no product with X or X_test.
    """

    #: The loop has the algorithm sum each node's losses in the pass that computes f(w)
    #: (:attr:`Algorithm.node_sums <fedviz.algorithms.base.Algorithm.node_sums>`).
    wants_node_sums = True

    def __init__(self, problem):
        ds = problem.data
        self.problem = problem
        self.K = ds.n_nodes
        self.y_test = ds.y_test
        tn = np.asarray(ds.test_nodes, dtype=np.int64)
        self._assigned = tn >= 0
        self._all_assigned = bool(self._assigned.all())
        self._test_node = tn[self._assigned]
        self.test_counts = np.bincount(self._test_node, minlength=self.K).astype(np.float64)
        self.tested = self.test_counts > 0
        self.untested = int(self.K - np.count_nonzero(self.tested))
        self.unassigned_rows = int(tn.size - np.count_nonzero(self._assigned))
        # Test rows grouped by node (FederatedDataset.from_assignment sorts them so, the rows of no
        # node first): each node's rows are the slice _test_offsets[k]:_test_offsets[k+1].
        self._test_offsets = (np.searchsorted(tn, np.arange(self.K + 1), side="left").astype(np.int64)
                              if tn.size and np.all(tn[1:] >= tn[:-1]) else None)
        # The segments of the compiled error count: the rows of no node, then node 0, …, node K − 1.
        self._test_segments = (np.concatenate([[0], self._test_offsets]).astype(np.int64)
                               if self._test_offsets is not None else None)
        self._row_node = ds.node_of_row
        self._offsets = np.ascontiguousarray(ds.offsets, dtype=np.int64)
        self._sizes = ds.node_sizes.astype(np.float64)

    def test_margins(self, w: np.ndarray) -> np.ndarray:
        """X_test w: the one test pass of an iteration (the pooled error and every node's from it)."""
        if self.y_test.size == 0:
            return np.empty(0)
        if self.problem.n_classes > 1:  # n_test × C margins of the d × C model (softmax)
            return self.problem.test_blocks.matmat(self.problem.as_model(w))
        return self.problem.test_blocks.matvec(w)

    def pooled_test_error(self, z_test: np.ndarray) -> float:
        """``Problem.test_error(w)`` from its margins: the same function on the same numbers."""
        if self.y_test.size == 0:
            return math.nan
        return self.problem._error(z_test, self.y_test)

    def node_test_error(self, z_test: np.ndarray) -> np.ndarray:
        """e_k for every node (NaN where T_k is empty), from the test margins."""
        return self.test_errors(z_test)[0]

    def test_errors(self, z_test: np.ndarray) -> tuple[np.ndarray, float]:
        """(e_k for every node, the pooled test error) from the test margins.

        Test rows grouped by node (as :meth:`FederatedDataset.from_assignment
        <fedviz.data.dataset.FederatedDataset.from_assignment>` leaves them): one compiled pass
        counts every node's errors and those of the rows of no node; the pooled error is their
        total over n_test, the number ``Problem.test_error`` gives (a count over n_test either way;
        for the mean squared error, whose sum depends on its order, ``Problem.test_error``'s own).
        """
        K = self.K
        if self.y_test.size == 0:
            return np.full(K, math.nan), math.nan
        mse = self.problem.error_metric == "mse"
        if self._test_segments is not None:
            sums = np.empty(K + 1)  # [rows of no node, node 0, …, node K − 1]
            z = np.ascontiguousarray(z_test, dtype=np.float64)
            if z.ndim == 2:
                _ARGMAX_SUMS[z.size >= PARALLEL_ROWS](z, self.y_test, self._test_segments, sums)
            else:
                _ERROR_SUMS[z.size >= PARALLEL_ROWS](z, self.y_test, self._test_segments, mse, sums)
            out = np.full(K, math.nan)
            np.divide(sums[1:], self.test_counts, out=out, where=self.tested)
            pooled = self.pooled_test_error(z_test) if mse else float(sums.sum()) / self.y_test.size
            return out, pooled
        y = self.y_test
        pooled = self.pooled_test_error(z_test)
        if not self.tested.any():
            return np.full(K, math.nan), pooled
        if not self._all_assigned:
            z_test, y = z_test[self._assigned], y[self._assigned]
        if z_test.ndim == 2:  # C > 1 classes: the argmax error (a tie predicts the lowest code), as the pooled one
            per_row = (np.argmax(z_test, axis=1) != y.astype(np.int64)).astype(np.float64)
        elif mse:
            per_row = (z_test - y) ** 2
        else:
            per_row = (np.where(z_test > 0, 1.0, -1.0) != y).astype(np.float64)
        sums = np.bincount(self._test_node, weights=per_row, minlength=K)
        out = np.full(K, math.nan)
        np.divide(sums, self.test_counts, out=out, where=self.tested)
        return out, pooled

    def node_loss(self, w: np.ndarray, z: np.ndarray, sums: np.ndarray | None = None) -> np.ndarray:
        """F_k(w) of eq. (6) for every node, from the training margins z = X w.

        ``sums``: each node's Σ_{i ∈ P_k} φ_i when the pass that computed f(w) summed them too
        (:meth:`Algorithm.node_loss_sums <fedviz.algorithms.base.Algorithm.node_loss_sums>`: one
        addition per row inside the loss kernel, the way the loop scores a run).  Without them, a
        node's rows being contiguous (``offsets``), one compiled pass sums each node's losses.
        """
        p = self.problem
        if sums is None:
            code = LOSS_CODES.get(p.loss.name)
            if code is None:  # a loss the kernel does not know (softmax): its values, summed per node
                sums = segment_sums(p.loss.value(z, p.y), self._offsets)
            else:
                sums = np.empty(self.K)
                _node_loss_sums(np.ascontiguousarray(z, dtype=np.float64), p.y, self._offsets, code,
                                float(getattr(p.loss, "gamma", 1.0)), sums)
        return sums / self._sizes + 0.5 * p.lam * float(w @ w)

    def evaluate(self, w: np.ndarray, z: np.ndarray, z_test: np.ndarray, iteration: int = 0,
                 loss_sums: np.ndarray | None = None):
        """(pooled test error, the summaries of the "seen" metrics by record key, :class:`NodeScores`).

        ``loss_sums``: the nodes' loss sums of the pass that computed f(w) (:meth:`node_loss`).
        """
        view = SeenScope(self, w, z, z_test, loss_sums)
        fields, vectors = score("seen", view)
        return view.test_errors()[1], fields, NodeScores(iteration, vectors)


def _node_loss_sums_py(z, y, offsets, code, gamma, out):
    """out[k] = Σ_{i ∈ P_k} φ(z_i; y_i) for the rows offsets[k]:offsets[k+1], φ the compiled trio's
    :func:`~fedviz.problems._compiled.phi` (NaN sums for a code it does not know)."""
    for k in numba.prange(offsets.size - 1):
        s = 0.0
        for i in range(offsets[k], offsets[k + 1]):
            s += phi(code, z[i], y[i], gamma)
        out[k] = s


def _node_error_sums_py(z, y, offsets, mse, out):
    """out[k] = Σ over the test rows offsets[k]:offsets[k+1] of [sign(z_i) ≠ y_i] (a margin of 0
    predicts −1, as classification_error), or of (z_i − y_i)² with ``mse``."""
    for k in numba.prange(offsets.size - 1):
        s = 0.0
        for i in range(offsets[k], offsets[k + 1]):
            if mse:
                r = z[i] - y[i]
                s += r * r
            else:
                pred = 1.0 if z[i] > 0.0 else -1.0
                if pred != y[i]:
                    s += 1.0
        out[k] = s


def _node_argmax_sums_py(z, y, offsets, out):
    """out[k] = Σ over the test rows offsets[k]:offsets[k+1] of [argmax_c z_ic ≠ y_i] (n × C margins;
    a tie predicts the lowest code, as numpy's argmax)."""
    C = z.shape[1]
    for k in numba.prange(offsets.size - 1):
        s = 0.0
        for i in range(offsets[k], offsets[k + 1]):
            m = z[i, 0]
            arg = 0
            for c in range(1, C):
                if z[i, c] > m:
                    m = z[i, c]
                    arg = c
            if arg != int(y[i]):
                s += 1.0
        out[k] = s


#: Rows from which the per-node sums run on every core: below it the thread pool's start costs more
#: than it saves, and a small run never starts numba's threads (they would take the name and the
#: low priority of the run worker that started them; :mod:`fedviz.problems.losses` uses the same).
PARALLEL_ROWS = 50_000

_serial = numba.njit(cache=True, nogil=True, error_model="numpy")
_parallel = numba.njit(cache=True, nogil=True, parallel=True, error_model="numpy")
_LOSS_SUMS = (_serial(_node_loss_sums_py), _parallel(_node_loss_sums_py))
_ERROR_SUMS = (_serial(_node_error_sums_py), _parallel(_node_error_sums_py))
_ARGMAX_SUMS = (_serial(_node_argmax_sums_py), _parallel(_node_argmax_sums_py))


def _node_loss_sums(z, y, offsets, code, gamma, out):
    check_code(code)
    _LOSS_SUMS[z.size >= PARALLEL_ROWS](z, y, offsets, code, gamma, out)


class UnseenEvaluator:
    """Scores the unseen nodes (issue 23, point 2): the global model in force on each held-out node's
    test rows, by a :class:`NodeEvaluator` on the problem of those nodes
    (:func:`fedviz.problems.unseen.unseen_problem`).  Their own losses are not computed: a new
    client is scored on its test rows, and its training rows serve only fine-tuning."""

    def __init__(self, problem):
        self.nodes = NodeEvaluator(problem)
        self.K = self.nodes.K

    @classmethod
    def of(cls, problem) -> "UnseenEvaluator | None":
        """The evaluator of ``problem``'s unseen nodes, or None when its data set holds none."""
        from .unseen import unseen_problem

        u = unseen_problem(problem)
        return None if u is None else cls(u)

    def evaluate(self, w: np.ndarray) -> tuple[dict[str, float], dict[str, np.ndarray]]:
        """(the summaries of the "unseen" metrics by record key, their per-node vectors as float32)."""
        return score("unseen", UnseenScope(self.nodes, w))

    def add(self, w: np.ndarray, fields: dict, scores: "NodeScores | None"):
        """``fields`` with the unseen ones, and ``scores`` with the unseen vectors (the loop's record)."""
        extra, vectors = self.evaluate(w)
        if scores is not None:
            scores = scores.with_values(vectors)
        return {**fields, **extra}, scores


class UnseenScope:
    """The global model w on the unseen nodes' test rows (one product with them), as the metrics of the
    "unseen" scope read it.  Their own losses are not computed (see :class:`UnseenEvaluator`)."""

    def __init__(self, ev: NodeEvaluator, w: np.ndarray):
        self.ev, self.K, self.untested = ev, ev.K, ev.untested
        self.z_test = ev.test_margins(w)

    def test_errors(self) -> tuple[np.ndarray, float]:
        return self.ev.node_test_error(self.z_test), self.ev.pooled_test_error(self.z_test)

    def own_losses(self):
        raise NotImplementedError("the unseen nodes are scored on their test rows only: no own loss F_k")

    def distances(self) -> None:
        return None


def nan_fields() -> dict[str, float]:
    """The per-node keys of a record whose model is not finite: all NaN."""
    return {f: math.nan for f in FIELDS}


def untested_sentence(untested: int, K: int, unassigned_rows: int = 0) -> str:
    """Says which nodes the per-node test error leaves out, or '' when every node has test rows."""
    if untested == 0:
        return ""
    if untested == K:
        why = (f"the test set's {unassigned_rows:,} rows belong to no node (a separate test file, or a preset "
               "split into other nodes)"
               if unassigned_rows else "the test set is empty")
        return (f"No node has test rows ({why}): the per-node test error is undefined; "
                f"the band shows the own losses F_k." + (" " + DEAL_REMEDY if unassigned_rows else ""))
    return (f"{untested:,} of {K:,} nodes have no test rows and are left out of the per-node test error "
            f"(counted, not scored).")


#: The fewest test rows the median scored node may hold before the per-node views are said to show steps, not
#: a trend: with t rows a node's error moves in steps of 1/t, so below t = 10 its percentiles jump by 10 points
#: or more and the band, the histogram and the λ_D path turn into staircases (a 1,000-row file split
#: automatically: 5 test rows a node, every error a multiple of 20%).  google-plus-small's median node holds 17.
MIN_NODE_TEST_ROWS = 10


def few_test_rows_sentence(tested, *, test_file: bool, regression: bool = False) -> str:
    """A warning when the nodes that have test rows (``tested``: test rows per seen node) hold too few to score
    (the median below :data:`MIN_NODE_TEST_ROWS`), with how many and the remedies the Data page offers in force:
    with a separate test file its rows are dealt to the nodes, so fewer nodes hold more of them; without one, a
    larger test fraction too.  '' when they hold enough (or none has any: :func:`untested_sentence` says so)."""
    counts = np.asarray(tested)
    counts = counts[counts > 0]
    if counts.size == 0:
        return ""
    median = float(np.median(counts))
    if median >= MIN_NODE_TEST_ROWS:
        return ""
    lo, hi = int(counts.min()), int(counts.max())
    spread = f"{lo:,} each" if lo == hi else f"{lo:,} to {hi:,}, median {median:g}"
    what = (f"each node's squared error is a mean of {median:g} values or fewer and swings with them"
            if regression else f"a node's test error moves in steps of {100 / max(median, 1):.0f} points or more")
    fewer = "split the rows over fewer nodes ('How the rows are split over nodes', then 'Nodes for the partition')"
    remedy = (f"{fewer} on Data: the test file's rows are shared among them" if test_file
              else f"raise 'Test fraction' on Data, or {fewer}")
    return (f"The nodes hold few test rows each ({spread}; {counts.size:,} nodes scored): {what}, so the "
            f"per-node band and histogram show steps rather than a trend. For at least {MIN_NODE_TEST_ROWS} rows "
            f"a node, {remedy}.")


#: The most per-node values (K × kept iterations) a run keeps per algorithm and per metric for the
#: node picker: 1,000,000 float32 values are 4 MB; two metrics 8 MB per algorithm (a stepsize
#: sweep of three algorithms holds fifteen).  Every iteration is kept while the budget allows
#: (K = 500 nodes: 2,000 iterations; the paper's K = 10,000: 100); beyond it the history is
#: thinned to every 2nd, 4th, … iteration, so it always spans the whole run.  The metrics kept
#: over the iterations are the registry's with ``history`` (the seen nodes' test error and own
#: loss); of the others only the latest vector.
NODE_HISTORY_VALUES = 1_000_000

#: The metrics whose per-node values a run keeps over the iterations (:attr:`Metric.history
#: <fedviz.problems.metrics.Metric.history>`); they share the seen nodes' K.
HISTORY = tuple(m.name for m in metrics.METRICS if m.history)


@dataclass(frozen=True, eq=False)
class NodeTrack:
    """One algorithm's per-node history as a page reads it (read-only arrays).

    ``iterations`` (m,) and ``values`` (metric name → (m, K), the metrics of :data:`HISTORY`): the kept
    iterations, every ``stride``-th one (1: all of them) plus the latest; ``latest``: the per-node
    scores of the last record (every metric's).
    """

    iterations: np.ndarray
    values: Mapping[str, np.ndarray]
    stride: int
    latest: NodeScores | None

    error = property(lambda self: self.values["node_error"])
    loss = property(lambda self: self.values["node_loss"])

    def node(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(iterations, test error, own loss) of node ``k`` over the kept iterations."""
        return self.iterations, self.error[:, k], self.loss[:, k]


class NodeHistory:
    """The per-node scores of one algorithm's records, bounded by ``budget`` values per metric.

    Append-only buffers, as the handle's record columns are: a :meth:`track` holds read-only
    views of their filled rows, which no later :meth:`add` changes (a repeated iteration and a
    thinning copy the buffers first).  A metric of :data:`HISTORY` that a record does not carry
    (not measured at that record) is NaN in its row.
    """

    def __init__(self, budget: int = NODE_HISTORY_VALUES):
        self.budget = int(budget)
        self.stride = 1
        self.n = 0
        self.latest: NodeScores | None = None
        self._it = np.empty(0, dtype=np.int64)
        self._v: dict[str, np.ndarray] | None = None

    def add(self, s: NodeScores) -> None:
        if not any(s.get(name) is not None for name in HISTORY):
            return  # no vector of the seen nodes (their model was not finite)
        K = next(s[name].size for name in HISTORY if s.get(name) is not None)
        if self._v is None:
            rows = max(1, min(64, self.budget // max(K, 1)))
            self._it = np.empty(rows, dtype=np.int64)
            self._v = {name: np.empty((rows, K), dtype=np.float32) for name in HISTORY}
        self.latest = s
        if self.n and s.iteration == self._it[self.n - 1]:
            self._copy()           # the loop's final record re-reports the last iteration
            self.n -= 1
        elif self.n and self._it[self.n - 1] % self.stride:
            self.n -= 1            # the previous latest was kept only as the latest: it gives way
        while self.n == len(self._it):
            if 2 * self.n * K <= self.budget:
                self._grow()
            elif self.n > 1:
                self._thin()
            else:
                self._copy()       # more nodes than the budget: only the latest scores are kept
                self.n = 0
        i = self.n
        self._it[i] = s.iteration
        for name, a in self._v.items():
            v = s.get(name)
            a[i] = np.nan if v is None else v
        self.n += 1

    def track(self) -> NodeTrack:
        n = self.n
        if self._v is None:
            e = np.empty((0, 0), dtype=np.float32)
            return NodeTrack(self._it[:0], {name: e for name in HISTORY}, self.stride, None)
        it = self._it[:n]
        it.flags.writeable = False
        views = {}
        for name, a in self._v.items():
            views[name] = a[:n]
            views[name].flags.writeable = False
        return NodeTrack(it, views, self.stride, self.latest)

    def _copy(self) -> None:
        self._it = self._it.copy()
        self._v = {name: a.copy() for name, a in self._v.items()}

    def _grow(self) -> None:
        self._it = np.concatenate([self._it, np.empty_like(self._it)])
        self._v = {name: np.concatenate([a, np.empty_like(a)]) for name, a in self._v.items()}

    def _thin(self) -> None:
        """Keep the iterations that are multiples of twice the stride (into new buffers)."""
        self.stride *= 2
        keep = np.flatnonzero(self._it[:self.n] % self.stride == 0)
        m = keep.size
        it = np.empty_like(self._it)
        it[:m] = self._it[keep]
        v = {}
        for name, a in self._v.items():
            v[name] = np.empty_like(a)
            v[name][:m] = a[keep]
        self._it, self._v, self.n = it, v, m


# ---------------------------------------------------------------------------------------------
# Personal models (issue 23, point 3): each node scored with its own model
# ---------------------------------------------------------------------------------------------

class PersonalEvaluator:
    """Scores node k's training and test rows with row k of a K × d model array.

    One compiled pass over the stored entries of X and X_test (each row's margin with its node's
    row of V) and one over V for the ‖v_k‖² of F_k: no product with a dense K × d matrix.
    Binary and regression models (C = 1).
    """

    def __init__(self, evaluator: NodeEvaluator, target: np.ndarray | None = None):
        p = evaluator.problem
        self.ev = evaluator
        self.problem = p
        self.K = evaluator.K
        ds = p.data
        self._train = (ds.X.indptr.astype(np.int64), ds.X.indices, ds.X.data,
                       np.ascontiguousarray(ds.node_of_row, dtype=np.int64))
        self._test = (ds.X_test.indptr.astype(np.int64), ds.X_test.indices, ds.X_test.data,
                      np.ascontiguousarray(ds.test_nodes, dtype=np.int64))
        if target is not None:
            target = np.asarray(target, dtype=np.float64)
            if target.shape != (self.K, p.size):
                from ..errors import ParameterError
                raise ParameterError("personal_target", f"shape {target.shape}",
                                     f"one model per node, K × d = {self.K} × {p.size}")
        self.target = target

    def evaluate(self, V: np.ndarray) -> tuple[dict[str, float], dict[str, np.ndarray]]:
        """(the summaries of the "personal" metrics by record key, their per-node vectors as float32) of
        the K models ``V`` (Ditto's v_k, APFL's mixture; :meth:`~fedviz.algorithms.base.Algorithm.personal_models`).
        A non-finite model gives NaN summaries and no vectors (the objective says it diverged)."""
        V = np.ascontiguousarray(V, dtype=np.float64)
        sq = np.empty(self.K)
        if not _row_squares(V, sq):
            return metrics.absent("personal"), {}
        return score("personal", PersonalScope(self, V, sq))

    def add(self, V: np.ndarray, fields: dict, scores: "NodeScores | None"):
        """``fields`` with the personal ones, and ``scores`` (when the global model has some) with the
        personal vectors (the loop's record)."""
        extra, vectors = self.evaluate(V)
        if scores is not None:
            scores = scores.with_values(vectors)
        return {**fields, **extra}, scores


class PersonalScope:
    """Every seen node scored with its own model (row k of V), as the metrics of the "personal" scope read
    it: one compiled pass over the stored entries of X_test for the test margins, of X for the training
    ones (asked for only by a metric of the own losses).

    - ``test_errors()``: each node's error under its model; pooled over the test rows that belong to a
      node (rows of no node have no personal model and are left out);
    - ``own_losses()``: F_k(v_k) of eq. (6), (1/n_k) Σ φ_i(x_iᵀv_k) + (λ/2)‖v_k‖²;
    - ``distances()``: ‖v_k − v_k*‖₂ to the exact target v_k* when the run was given one (the exact
      Ditto v_k(λ)), else None.
    """

    def __init__(self, pe: PersonalEvaluator, V: np.ndarray, sq: np.ndarray):
        self.pe, self.V, self.sq = pe, V, sq
        self.K, self.untested = pe.K, pe.ev.untested

    def test_errors(self) -> tuple[np.ndarray, float]:
        ev = self.pe.ev
        z_test = np.empty(self.pe._test[0].size - 1)
        _personal_margins(*self.pe._test, self.V, z_test)
        err = ev.node_test_error(z_test)
        counts = ev.test_counts
        pooled = (float(np.nansum(err * counts) / counts.sum()) if counts.sum() > 0 else math.nan)
        return err, pooled

    def own_losses(self) -> tuple[np.ndarray, float]:
        z = np.empty(self.pe._train[0].size - 1)
        _personal_margins(*self.pe._train, self.V, z)
        # The data part with no global w (a zero w adds 0), then each node's own (λ/2)‖v_k‖².
        return self.pe.ev.node_loss(_NO_MODEL, z) + 0.5 * self.pe.problem.lam * self.sq, math.nan

    def distances(self) -> np.ndarray | None:
        if self.pe.target is None:
            return None
        return np.linalg.norm(self.V - self.pe.target, axis=1)


_NO_MODEL = np.zeros(1)


@numba.njit(cache=True, nogil=True)
def _personal_margins(indptr, indices, data, row_node, V, out):
    """out[i] = x_iᵀ V[node of row i] (0 for a row of no node: a separate test file's)."""
    for i in range(out.size):
        k = row_node[i]
        s = 0.0
        if k >= 0:
            for p in range(indptr[i], indptr[i + 1]):
                s += data[p] * V[k, indices[p]]
        out[i] = s


@numba.njit(cache=True, nogil=True)
def _row_squares(V, out):
    """out[k] = ‖V[k]‖²; False when an entry is not finite."""
    for k in range(V.shape[0]):
        s = 0.0
        for j in range(V.shape[1]):
            v = V[k, j]
            if not math.isfinite(v):
                return False
            s += v * v
        out[k] = s
    return True
