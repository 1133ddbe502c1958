"""The paper's claims as measured figures: the setting (Section 1.2), the desirable
algorithmic properties (A)–(D) (Section 3.1), Proposition 1 (Section 3.5) and the
Appendix's equivalence theorem with its condition on σ (Appendix A).

Konečný, McMahan, Ramage and Richtárik (2016), *Federated Optimization: Distributed Machine
Learning for On-Device Intelligence*.  Section, equation and theorem numbers are those the
LaTeX source produces: sections 1 Introduction (1.2 The Setting of Federated Optimization),
3 Algorithms (3.1 Desirable Algorithmic Properties, 3.3 Distributed Problem Formulation,
3.5 SVRG meets DANE, 3.6.1 Notation), Appendix A; equations numbered through the paper
(eq. (10) DANE's subproblem, (14) w = Xα/(λn), (15) the dual block subproblem); one counter
for propositions, remarks, lemmas and theorems, so Proposition 1, Lemma 4 (Σ_k g_k = 0) and
Theorem 5 (the equivalence of Algorithms 5 and 6; elsewhere in fedviz called "Theorem 1"
and "Lemma 1").

Every function returns a small frozen dataclass of figures with a one-line
:meth:`describe` for people; where the paper states a condition the dataclass has a
``holds: bool``.  The data-set functions take a :class:`~fedviz.data.dataset.FederatedDataset`;
the run functions take an algorithm instance (or a :class:`~fedviz.problems.objective.Problem`)
and step it.

Two groups of letters must not be confused: Section 1.2 names four characteristics of
federated data (massively distributed, non-IID, unbalanced, sparse: :func:`massively_distributed`,
:func:`non_iid`, :func:`unbalanced`, :func:`sparse`); Section 3.1 lists the properties (A)–(D)
an algorithm should have: (A) started at the optimum it stays (:func:`stays_at_optimum`);
(B) all data on one node, (C) each feature on one node, (D) identical nodes — then it
converges in O(1) rounds (:func:`one_node`, :func:`disjoint_features`, :func:`identical_nodes`
check the data condition, :func:`converges_in_few_rounds` the run).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .data.dataset import FederatedDataset
from .data.labels import dataset_label_counts, label_skew
from .errors import ParameterError

__all__ = [
    "MassivelyDistributed", "NonIID", "Unbalanced", "Sparse",
    "massively_distributed", "non_iid", "unbalanced", "sparse",
    "OneNode", "DominantNode", "DisjointFeatures", "IdenticalNodes", "StaysAtOptimum", "FewRounds",
    "one_node", "dominant_node", "disjoint_features", "identical_nodes", "stays_at_optimum",
    "converges_in_few_rounds",
    "SideBySide", "Proposition1", "proposition_1", "SigmaBound", "sigma_bound", "Theorem5", "theorem_5",
]


def _g(x: float) -> str:
    return f"{x:.3g}"


def _nodes(k: int) -> str:
    return f"{k:,} node" + ("s" if k != 1 else "")


# =======================================================================================
# Section 1.2: the characteristics of federated data
# =======================================================================================
@dataclass(frozen=True)
class MassivelyDistributed:
    """Section 1.2, *Massively Distributed*: "the number of nodes can be much bigger than
    the average number of training examples stored on a given node (n/K)".

    Attributes
    ----------
    n_nodes : int            K
    n : int                  training examples
    mean_node_size : float   n/K
    ratio : float            K / (n/K) = K²/n; above 1 when there are more nodes than
                             examples per node
    holds : bool             K > n/K
    """

    n_nodes: int
    n: int
    mean_node_size: float
    ratio: float
    holds: bool

    def describe(self) -> str:
        verb = "more than" if self.holds else "not more than"
        return (f"Massively distributed (Section 1.2): K = {_nodes(self.n_nodes)}, {verb} the "
                f"{_g(self.mean_node_size)} examples per node on average (K ÷ n/K = {_g(self.ratio)}).")


def massively_distributed(ds: FederatedDataset) -> MassivelyDistributed:
    """Section 1.2's *Massively Distributed*: K against the mean node size n/K."""
    K, n = ds.n_nodes, ds.n
    mean = n / K
    return MassivelyDistributed(n_nodes=K, n=n, mean_node_size=mean, ratio=K / mean, holds=K > mean)


@dataclass(frozen=True)
class Unbalanced:
    """Section 1.2, *Unbalanced*: "Different nodes may vary by orders of magnitude in the
    number of training examples they hold."

    Attributes
    ----------
    min_size, median_size, max_size : node sizes n_k
    orders_of_magnitude : float   log10(max n_k / min n_k)
    holds : bool                  at least one order of magnitude (max n_k ≥ 10 min n_k)
    """

    min_size: int
    median_size: float
    max_size: int
    orders_of_magnitude: float
    holds: bool

    def describe(self) -> str:
        return (f"Unbalanced (Section 1.2): nodes hold {self.min_size:,} to {self.max_size:,} examples "
                f"(median {_g(self.median_size)}), {self.orders_of_magnitude:.2f} orders of magnitude apart"
                + ("." if self.holds else " — less than one."))


def unbalanced(ds: FederatedDataset) -> Unbalanced:
    """Section 1.2's *Unbalanced*: the spread of n_k in orders of magnitude."""
    sizes = ds.node_sizes
    lo, hi = int(sizes.min()), int(sizes.max())
    orders = math.log10(hi / lo)
    return Unbalanced(min_size=lo, median_size=float(np.median(sizes)), max_size=hi,
                      orders_of_magnitude=orders, holds=hi >= 10 * lo)


@dataclass(frozen=True)
class NonIID:
    """Section 1.2, *Non-IID*: "the data points available locally are far from being a
    representative sample of the overall distribution".

    The paper states no threshold, so there is no ``holds``; the figures are set against
    the same rows dealt at random over nodes of the same sizes (the paper's FSVRGR control,
    Section 4.1), which is what "a representative sample" of each node's size looks like.

    Attributes
    ----------
    label_skew : float or None
        Σ_k (n_k/n) |p_k − p|, p_k the share of positive labels on node k and p overall
        (the total-variation distance of the label distributions); None for regression.
    feature_skew : float
        Σ_k (n_k/n) TV(q_k, q): q^j = n^j / Σ_j n^j is the share of all feature appearances
        that are of feature j, q_k^j = n_k^j / Σ_j n_k^j the same on node k (Section 3.6.1's
        n^j, n_k^j), TV = ½ Σ_j |q_k^j − q^j|.  Nodes without any nonzero are left out.
    reshuffled_label_skew, reshuffled_feature_skew : the same figures after a random deal
    seed : int   the deal's seed
    """

    label_skew: float | None
    feature_skew: float
    reshuffled_label_skew: float | None
    reshuffled_feature_skew: float
    seed: int

    def describe(self) -> str:
        parts = []
        if self.label_skew is not None:
            parts.append(f"labels {_g(self.label_skew)} (reshuffled {_g(self.reshuffled_label_skew)})")
        parts.append(f"features {_g(self.feature_skew)} (reshuffled {_g(self.reshuffled_feature_skew)})")
        return ("Non-IID (Section 1.2): mean distance of a node's data from the whole, "
                + ", ".join(parts) + "; 0 = every node a perfect sample.")




def _feature_skew(stats) -> float:
    nkj = stats.node_feature_counts
    total = nkj.data.sum()
    if total == 0:
        return 0.0
    q = stats.feature_counts / total
    row_tot = np.asarray(nkj.sum(axis=1)).ravel()
    row = np.repeat(np.arange(nkj.shape[0]), np.diff(nkj.indptr))
    qk = nkj.data / row_tot[row]
    # ½ Σ_j |q_k^j − q^j| = ½ (1 + Σ_{j on node k} (|q_k^j − q^j| − q^j)).
    inner = np.bincount(row, weights=np.abs(qk - q[nkj.indices]) - q[nkj.indices], minlength=nkj.shape[0])
    tv = 0.5 * (1.0 + inner)
    seen = row_tot > 0
    w = stats.node_sizes[seen].astype(np.float64)
    return float(np.sum(w * tv[seen]) / w.sum())


def non_iid(ds: FederatedDataset, *, seed: int = 0) -> NonIID:
    """Section 1.2's *Non-IID*: label and feature skew, and the same after a random deal."""
    classification = ds.task != "regression"
    deal = np.random.default_rng(seed).permutation(ds.node_of_row)
    shuffled = ds.with_nodes(deal)
    return NonIID(
        label_skew=label_skew(dataset_label_counts(ds)) if classification else None,
        feature_skew=_feature_skew(ds.stats),
        reshuffled_label_skew=label_skew(dataset_label_counts(shuffled)) if classification else None,
        reshuffled_feature_skew=_feature_skew(shuffled.stats),
        seed=seed)


@dataclass(frozen=True)
class Sparse:
    """Section 1.2, *sparse*: "some features occur on a small subset of nodes or data points
    only"; ω^j of Section 3.6.1 (the paper's Figure 1, Section 4.1: "over 88% of features are
    present on fewer than 1,000 nodes" of 10,000).

    Attributes
    ----------
    d : int                     features
    appearing : int             features with n^j > 0
    density : float             nnz / (n d)
    omega_max : int             max_j ω^j (the bound on CoCoA+'s σ', Section 4.1)
    omega_median : float        median ω^j over appearing features
    few_nodes : float           K/10, the paper's 1,000 of 10,000
    share_on_few_nodes : float  share of appearing features with ω^j ≤ K/10
    share_in_few_rows : float   share of appearing features with n^j ≤ n/10
    holds : bool                some appearing feature is on at most K/10 nodes or n/10 rows
    """

    d: int
    appearing: int
    density: float
    omega_max: int
    omega_median: float
    few_nodes: float
    share_on_few_nodes: float
    share_in_few_rows: float
    holds: bool

    def describe(self) -> str:
        return (f"Sparse (Section 1.2): {self.share_on_few_nodes:.1%} of the {self.appearing:,} features "
                f"in use appear on at most {_g(self.few_nodes)} nodes (a tenth), {self.share_in_few_rows:.1%} "
                f"in at most a tenth of the rows; ω^j at most {self.omega_max:,}; "
                f"density {_g(self.density)}.")


def sparse(ds: FederatedDataset) -> Sparse:
    """Section 1.2's *sparse*, measured with ω^j and n^j of Section 3.6.1."""
    st = ds.stats
    used = st.feature_counts > 0
    m = int(used.sum())
    few = ds.n_nodes / 10
    omega = st.omega[used]
    on_few = float(np.mean(omega <= few)) if m else 0.0
    in_few = float(np.mean(st.feature_counts[used] <= ds.n / 10)) if m else 0.0
    return Sparse(d=ds.d, appearing=m, density=st.nnz / max(1, ds.n * ds.d),
                  omega_max=int(st.omega.max(initial=0)),
                  omega_median=float(np.median(omega)) if m else 0.0, few_nodes=few,
                  share_on_few_nodes=on_few, share_in_few_rows=in_few,
                  holds=bool(on_few > 0 or in_few > 0))


# =======================================================================================
# Section 3.1: the desirable algorithmic properties (A)–(D)
# =======================================================================================
@dataclass(frozen=True)
class OneNode:
    """The data condition of property (B), Section 3.1: "all the data is on a single node"."""

    n_nodes: int
    holds: bool

    def describe(self) -> str:
        return (f"Property (B)'s case (Section 3.1): {'all data on one node' if self.holds else f'{_nodes(self.n_nodes)}'}"
                "; there a good algorithm converges in O(1) rounds.")


def one_node(ds: FederatedDataset) -> OneNode:
    """Property (B)'s condition, Section 3.1: K = 1."""
    return OneNode(n_nodes=ds.n_nodes, holds=ds.n_nodes == 1)


@dataclass(frozen=True)
class DominantNode:
    """Property (B)'s case with K ≥ 2 nodes: Section 3.1 calls (B) and (C) "extreme cases of
    the federated optimization setting (non-IID, unbalanced, and sparse)", and (B)'s
    "all the data is on a single node" is the limit of one node holding nearly every row
    while the others hold a few (with K = 1 there is nothing to distribute: every method's
    local problem is f itself).

    Attributes
    ----------
    n_nodes : int       K
    n : int             training rows
    largest : int       max_k n_k
    share : float       max_k n_k / n
    threshold : float   the share asked for
    holds : bool        K ≥ 2 and share ≥ threshold
    """

    n_nodes: int
    n: int
    largest: int
    share: float
    threshold: float
    holds: bool

    def describe(self) -> str:
        rest = self.n - self.largest
        text = (f"one of {_nodes(self.n_nodes)} holds {self.largest:,} of the {self.n:,} rows ({self.share:.1%}), "
                f"the other {self.n_nodes - 1:,} hold {rest:,}")
        if self.holds:
            return (f"Property (B)'s case on K ≥ 2 nodes (Section 3.1, all the data on a single node, approached): "
                    f"{text}.")
        return f"Not property (B)'s case on K ≥ 2 nodes: {text} (asked: K ≥ 2 and at least {self.threshold:.1%})."


def dominant_node(ds: FederatedDataset, *, share: float = 0.99) -> DominantNode:
    """Property (B)'s case on K ≥ 2 nodes: one node holds at least ``share`` of the rows."""
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        raise ParameterError("share", share, "a number in (0, 1]")
    sizes = ds.node_sizes
    largest = int(sizes.max())
    frac = largest / ds.n
    return DominantNode(n_nodes=ds.n_nodes, n=ds.n, largest=largest, share=frac, threshold=float(share),
                        holds=bool(ds.n_nodes >= 2 and frac >= share))


@dataclass(frozen=True)
class DisjointFeatures:
    """The data condition of property (C), Section 3.1: "each feature occurs on a single
    node, so the problems are fully decomposable", i.e. ω^j ≤ 1 for every j (Section 3.6.1).

    Attributes
    ----------
    n_nodes : int
    appearing : int          features with ω^j ≥ 1
    shared_features : int    features with ω^j > 1
    omega_max : int          max_j ω^j
    holds : bool             ω^j ≤ 1 for every j; then FSVRG's a^j = K/ω^j = K undoes the
                             n_k/n averaging on every used coordinate (Section 3.6.2)
    """

    n_nodes: int
    appearing: int
    shared_features: int
    omega_max: int
    holds: bool

    def describe(self) -> str:
        if self.holds:
            return (f"Property (C)'s case (Section 3.1): each of the {self.appearing:,} features in use is on a "
                    f"single node, so the {_nodes(self.n_nodes)} learn disjoint blocks of w.")
        return (f"Not property (C)'s case (Section 3.1): {self.shared_features:,} of {self.appearing:,} features "
                f"appear on several nodes (up to {self.omega_max:,}).")


def disjoint_features(ds: FederatedDataset) -> DisjointFeatures:
    """Property (C)'s condition, Section 3.1, from the training rows' ω^j."""
    omega = ds.stats.omega
    return DisjointFeatures(n_nodes=ds.n_nodes, appearing=int(np.sum(omega > 0)),
                            shared_features=int(np.sum(omega > 1)), omega_max=int(omega.max(initial=0)),
                            holds=bool(np.all(omega <= 1)))


@dataclass(frozen=True)
class IdenticalNodes:
    """The data condition of property (D), Section 3.1: "each node contains an identical
    dataset" (the same multiset of (x_i, y_i) pairs; row order does not matter).

    Attributes
    ----------
    n_nodes : int
    distinct_datasets : int   how many different node data sets there are
    holds : bool              exactly one
    """

    n_nodes: int
    distinct_datasets: int
    holds: bool

    def describe(self) -> str:
        if self.holds:
            return (f"Property (D)'s case (Section 3.1): all {_nodes(self.n_nodes)} hold the same data, so every "
                    "local objective F_k equals f.")
        return (f"Not property (D)'s case (Section 3.1): the {self.n_nodes:,} nodes hold "
                f"{self.distinct_datasets:,} different data sets.")


def _node_key(ds: FederatedDataset, k: int) -> tuple:
    X = ds.X
    rows = []
    for i in range(int(ds.offsets[k]), int(ds.offsets[k + 1])):
        a, b = X.indptr[i], X.indptr[i + 1]
        keep = X.data[a:b] != 0
        rows.append((float(ds.y[i]), X.indices[a:b][keep].tobytes(), X.data[a:b][keep].tobytes()))
    rows.sort()
    return tuple(rows)


def identical_nodes(ds: FederatedDataset) -> IdenticalNodes:
    """Property (D)'s condition, Section 3.1: the number of distinct node data sets."""
    keys = {_node_key(ds, k) for k in range(ds.n_nodes)}
    return IdenticalNodes(n_nodes=ds.n_nodes, distinct_datasets=len(keys), holds=len(keys) == 1)


@dataclass(frozen=True)
class StaysAtOptimum:
    """Property (A), Section 3.1: "If the algorithm is initialized to the optimal solution,
    it stays there."

    Attributes
    ----------
    algorithm : str
    iterations : int
    drifts : tuple of float     ‖w^t − w*‖₂ for t = 0 (the start) .. iterations
    max_drift : float           their maximum
    max_abs_drift : float       max_t ‖w^t − w*‖_∞
    tol : float
    holds : bool                max_drift ≤ tol
    """

    algorithm: str
    iterations: int
    drifts: tuple[float, ...]
    max_drift: float
    max_abs_drift: float
    tol: float
    holds: bool

    def describe(self) -> str:
        return (f"Property (A) (Section 3.1): {self.algorithm} started at w* moved at most "
                f"{self.max_drift:.2g} in {self.iterations} iterations — "
                + ("it stays." if self.holds else f"more than {self.tol:g}, so it does not stay."))


def stays_at_optimum(algorithm, w_star, *, iterations: int = 3, tol: float = 1e-10) -> StaysAtOptimum:
    """Property (A), Section 3.1: step ``algorithm`` (already started at w*) and measure how
    far its iterates move from ``w_star``."""
    w_star = np.asarray(w_star, dtype=np.float64)
    drifts, abs_drifts = [], []
    for t in range(iterations + 1):
        if t:
            algorithm.step()
        diff = np.asarray(algorithm.w) - w_star
        drifts.append(float(np.linalg.norm(diff)))
        abs_drifts.append(float(np.abs(diff).max(initial=0.0)))
    worst = max(drifts)
    return StaysAtOptimum(algorithm=getattr(algorithm, "name", type(algorithm).__name__),
                          iterations=iterations, drifts=tuple(drifts), max_drift=worst,
                          max_abs_drift=max(abs_drifts), tol=tol, holds=worst <= tol)


_CASES = {"B": one_node, "C": disjoint_features, "D": identical_nodes}


@dataclass(frozen=True)
class FewRounds:
    """Properties (B), (C), (D), Section 3.1: in their case "the algorithm should converge in
    O(1) rounds of communication" ("ideally exactly one round").

    Attributes
    ----------
    case : str              "B", "C" or "D"
    data_condition : bool   the data are in that case (:func:`one_node`, :func:`disjoint_features`,
                            :func:`identical_nodes`)
    algorithm : str
    rounds : int or None    communication rounds when f(w) − f* first fell to ``tol``; None if
                            not within ``max_rounds``
    iterations : int        iterations run
    initial_gap, final_gap : float   f(w) − f* at the start and at the end
    tol : float
    max_rounds : int        the O(1) budget
    holds : bool            data_condition and rounds is not None
    """

    case: str
    data_condition: bool
    algorithm: str
    rounds: int | None
    iterations: int
    initial_gap: float
    final_gap: float
    tol: float
    max_rounds: int
    holds: bool

    def describe(self) -> str:
        done = (f"reached f − f* ≤ {self.tol:g} in {self.rounds} round{'s' * (self.rounds != 1)}"
                if self.rounds is not None else
                f"was still {self.final_gap:.2g} above f* after {self.max_rounds} rounds")
        case = "" if self.data_condition else " (but the data are not in that case)"
        return f"Property ({self.case}) (Section 3.1){case}: {self.algorithm} {done}."


def converges_in_few_rounds(algorithm, f_star: float, *, case: str, tol: float = 1e-6,
                            max_rounds: int = 2) -> FewRounds:
    """Properties (B)–(D), Section 3.1: step ``algorithm`` until f(w) − f* ≤ ``tol`` or its
    ``rounds`` reach ``max_rounds``, and check the data are in ``case``."""
    if case not in _CASES:
        raise ParameterError("case", case, "one of B, C, D (the properties of Section 3.1 about O(1) rounds)")
    problem = algorithm.problem
    condition = _CASES[case](problem.data).holds
    gap0 = gap = problem.value(algorithm.w) - f_star
    iterations = 0
    reached = algorithm.rounds if gap <= tol else None
    while reached is None and algorithm.rounds < max_rounds:
        algorithm.step()
        iterations += 1
        gap = problem.value(algorithm.w) - f_star
        if gap <= tol:
            reached = algorithm.rounds
    if reached is not None and reached > max_rounds:
        reached = None
    return FewRounds(case=case, data_condition=condition,
                     algorithm=getattr(algorithm, "name", type(algorithm).__name__), rounds=reached,
                     iterations=iterations, initial_gap=float(gap0), final_gap=float(gap), tol=tol,
                     max_rounds=max_rounds, holds=bool(condition and reached is not None))


# =======================================================================================
# The two equivalences' runs: Proposition 1 and Theorem 5
# =======================================================================================
@dataclass(frozen=True)
class SideBySide:
    """Two methods stepped together from one start, t = 0 .. T: the run an equivalence of the
    paper is judged on (:func:`proposition_1`, :func:`theorem_5`) and the one the Learn section
    overlays (:mod:`fedviz.learn.equivalences`), so the figure checked and the figure shown are
    the same numbers.

    Attributes
    ----------
    first, second : tuple of float   f(w^t) of each method's iterate (Theorem 5: of the dual
                                     method's image (1/(λn)) X α^t as ``second``)
    distances : tuple of float       how far apart the two iterates are at t, as the statement
                                     measures it (see :class:`Proposition1`, :class:`Theorem5`)
    sizes : tuple of float           ‖w_second^t‖_∞, that the iterates moved at all
    """

    first: tuple[float, ...]
    second: tuple[float, ...]
    distances: tuple[float, ...]
    sizes: tuple[float, ...]


def _side_by_side(problem, first, second, iterations: int, *, distance, iterate_of_second=None,
                  observe=None) -> SideBySide:
    """Step ``first`` and ``second`` ``iterations`` times in lockstep and record, at t = 0 .. T,
    f of both iterates, ``distance(w_first, w_second)`` and ‖w_second‖_∞.

    ``iterate_of_second(second)`` is the second method's iterate in w's space (default its
    ``w``); ``observe()`` is called at every t too, for a figure of the methods' own state."""
    f1, f2, dist, sizes = [], [], [], []
    for t in range(iterations + 1):
        if t:
            first.step()
            second.step()
        w1 = np.asarray(first.w)
        w2 = np.asarray(second.w if iterate_of_second is None else iterate_of_second(second))
        f1.append(float(problem.value(w1)))
        f2.append(float(problem.value(w2)))
        dist.append(distance(w1, w2))
        sizes.append(float(np.abs(w2).max(initial=0.0)))
        if observe is not None:
            observe()
    return SideBySide(first=tuple(f1), second=tuple(f2), distances=tuple(dist), sizes=tuple(sizes))


# =======================================================================================
# Section 3.5: Proposition 1
# =======================================================================================
@dataclass(frozen=True)
class Proposition1:
    """Proposition 1, Section 3.5: DANE (Algorithm 2) with η = 1, μ = 0 and one SVRG
    iteration (Algorithm 1, started at w^t) as the solver of eq. (10) generates the same
    iterates as naive FSVRG (Algorithm 3) from the same start, given the same samples
    (the Remark after it).

    Attributes
    ----------
    iterations, local_steps : int     T and m as asked (None: both algorithms' default)
    stepsize : float                  h as asked (None: both algorithms' default)
    m, h : int, float                 the m and h both ran (naive FSVRG's defaults n/K and 1/(2L̄) where
                                      not given, passed to DANE: the proposition pins its setting)
    seed : int                        both algorithms' seed (the same samples)
    differences : tuple of float      ‖w_DANE^t − w_naive^t‖_∞, t = 1..T
    scale : float                     max_t ‖w_naive^t‖_∞, t = 1..T (that the iterates moved)
    rtol : float
    holds : bool                      every difference, t = 0..T, ≤ rtol · max(1, ‖w_naive^t‖_∞)
    run : SideBySide                  DANE first, naive FSVRG second, t = 0..T
    """

    iterations: int
    local_steps: int | None
    stepsize: float | None
    m: int
    h: float
    seed: int
    differences: tuple[float, ...]
    scale: float
    rtol: float
    holds: bool
    run: SideBySide

    def describe(self) -> str:
        return (f"Proposition 1 (Section 3.5): DANE with one SVRG pass and naive FSVRG differ by at most "
                f"{max(self.differences, default=0.0):.2g} over {self.iterations} iterations (iterates up to "
                f"{_g(self.scale)}) — " + ("the same sequence." if self.holds else "not the same sequence."))


def _sup_distance(a, b) -> float:
    return float(np.abs(a - b).max(initial=0.0))


def proposition_1(problem, *, local_steps: int | None = None, stepsize: float | None = None,
                  iterations: int = 5, seed: int = 0, w0=None, rtol: float = 1e-12) -> Proposition1:
    """Proposition 1, Section 3.5: run both algorithms of the proposition side by side."""
    from .algorithms.dane import DANE
    from .algorithms.naive_fsvrg import NaiveFSVRG

    hyper = {k: v for k, v in (("local_steps", local_steps), ("stepsize", stepsize)) if v is not None}
    naive = NaiveFSVRG(problem, seed=seed, w0=w0, **hyper)
    # The proposition's setting, pinned whatever DANE's defaults are: η = 1, μ = 0, one SVRG pass with
    # naive FSVRG's m and h (its defaults where not given), so the two run the same local loop; Algorithm 2
    # as printed (no safeguard: its μ would not stay 0).
    dane = DANE(problem, seed=seed, w0=w0, eta=1.0, mu=0.0, safeguard=False, solver="svrg", local_passes=1,
                local_steps=int(naive.m), stepsize=float(naive.h))
    run = _side_by_side(problem, dane, naive, iterations, distance=_sup_distance)
    holds = all(d <= rtol * max(1.0, s) for d, s in zip(run.distances, run.sizes))
    return Proposition1(iterations=iterations, local_steps=local_steps, stepsize=stepsize, m=int(naive.m),
                        h=float(naive.h), seed=seed, differences=run.distances[1:],
                        scale=max(run.sizes[1:], default=0.0), rtol=rtol, holds=bool(holds), run=run)


# =======================================================================================
# Appendix A: the condition on σ and Theorem 5
# =======================================================================================
@dataclass(frozen=True)
class SigmaBound:
    """Appendix A.3: σ is "a large enough constant for which XᵀX ⪯ σB",
    B = Diag(X_1ᵀX_1, …, X_KᵀX_K) (X_k is d × n_k there), and "it can be shown that
    1 ≤ σ ≤ K"; Algorithms 5 and 6 take σ ∈ [1, K], and their local problems (eq. (15))
    rest on the inequality.

    Attributes
    ----------
    n_nodes : int                     K
    sigma_min : float or None         the smallest valid σ: max over h of ‖Σ_k X_k h_k‖² / Σ_k ‖X_k h_k‖²,
                                      the largest eigenvalue of Σ_k P_k, P_k the projection on the span
                                      of node k's examples; None if the data are too large to measure
    omega_max : int                   max_j ω^j (Section 3.6.1); on sparse data σ_min ≤ ω_max ≤ K
                                      (Cauchy–Schwarz per coordinate; the bound on σ' of Section 4.1)
    blocks_positive_definite : bool   every X_kᵀX_k is positive definite, the Appendix's simplifying
                                      assumption (node k's examples linearly independent)
    holds : bool                      1 ≤ σ_min ≤ ω_max ≤ K (up to rounding)
    """

    n_nodes: int
    sigma_min: float | None
    omega_max: int
    blocks_positive_definite: bool
    holds: bool

    def admits(self, sigma: float) -> bool:
        """Whether XᵀX ⪯ σB holds for this σ (up to rounding)."""
        if self.sigma_min is None:
            return sigma >= min(self.omega_max, self.n_nodes)
        return sigma >= self.sigma_min * (1 - 1e-9)

    def describe(self) -> str:
        if self.sigma_min is None:
            return (f"σ of the Appendix (A.3): not measured here; any σ ≥ max ω^j = {self.omega_max:,} "
                    f"(≤ K = {self.n_nodes:,}) is valid.")
        return (f"σ of the Appendix (A.3): the smallest σ with XᵀX ⪯ σ·Diag(X_kᵀX_k) is {self.sigma_min:.4g}, "
                f"between 1 and max ω^j = {self.omega_max:,} ≤ K = {self.n_nodes:,}"
                + ("" if self.holds else " — NOT as the Appendix states") + ".")


def sigma_bound(ds: FederatedDataset, *, max_entries: int = 20_000_000) -> SigmaBound:
    """Appendix A.3's σ: the smallest σ with XᵀX ⪯ σB, measured; against 1, max ω^j and K.

    Node k's block on its own features is factored by an SVD (O(n_k s_k min(n_k, s_k))); when
    Σ_k n_k s_k exceeds ``max_entries`` nothing is factored and ``sigma_min`` is None.
    """
    from threadpoolctl import threadpool_limits

    from .problems._cores import blas_threads

    # fedviz's BLAS policy (one thread unless asked): threaded BLAS spins against numba's.
    with threadpool_limits(blas_threads(), user_api="blas"):
        return _sigma_bound(ds, max_entries)


def _sigma_bound(ds: FederatedDataset, max_entries: int) -> SigmaBound:
    from scipy.sparse.linalg import svds

    K = ds.n_nodes
    st = ds.stats
    omega_max = int(st.omega.max(initial=0))
    supports = [ds.X[ds.node_slice(k)] for k in range(K)]
    cols = [np.unique(b.indices[b.data != 0]) for b in supports]
    entries = sum(b.shape[0] * c.size for b, c in zip(supports, cols))
    pd = True
    if entries > max_entries:
        return SigmaBound(n_nodes=K, sigma_min=None, omega_max=omega_max,
                          blocks_positive_definite=False, holds=1 <= omega_max <= K)
    # Q = [Q_1 … Q_K], Q_k an orthonormal basis of node k's span in R^d: Σ_k P_k = QQᵀ.
    rows, colidx, vals = [], [], []
    offset = 0
    for block, c in zip(supports, cols):
        if c.size == 0:
            pd = False
            continue
        A = block[:, c].toarray()
        _, s, vt = np.linalg.svd(A, full_matrices=False)
        r = int(np.sum(s > s.max() * max(A.shape) * np.finfo(float).eps)) if s.size else 0
        pd = pd and r == A.shape[0]
        Qk = vt[:r].T                                    # |c| × r
        rr, cc = np.meshgrid(c, np.arange(r), indexing="ij")
        rows.append(rr.ravel())
        colidx.append(cc.ravel() + offset)
        vals.append(Qk.ravel())
        offset += r
    if offset == 0:
        return SigmaBound(n_nodes=K, sigma_min=0.0, omega_max=omega_max, blocks_positive_definite=False,
                          holds=False)
    Q = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(colidx))),
                      shape=(ds.d, offset))
    if min(Q.shape) <= 300:
        G = (Q.T @ Q).toarray() if Q.shape[1] <= Q.shape[0] else (Q @ Q.T).toarray()
        lam_max = float(np.linalg.eigvalsh(G)[-1])
    else:  # Lanczos on the largest singular value only
        lam_max = float(svds(Q, k=1, tol=1e-12, return_singular_vectors=False,
                             random_state=0)[0]) ** 2
    eps = 1e-9
    holds = (1 - eps) <= lam_max <= omega_max * (1 + eps) and omega_max <= K
    return SigmaBound(n_nodes=K, sigma_min=lam_max, omega_max=omega_max,
                      blocks_positive_definite=bool(pd), holds=bool(holds))


@dataclass(frozen=True)
class Theorem5:
    """Theorem 5 (Appendix A, "Equivalence of Algorithms 5 and 6 for Quadratic Loss"): for
    ridge regression and the same α^0, the Primal Method's iterates w^t are the image
    (1/(λn)) X α^t (eq. (14)) of the Dual Method's α^t, for all t; and Lemma 4: the primal
    method's corrections satisfy Σ_k g_k^t = 0.

    Attributes
    ----------
    iterations : int
    sigma : float                     σ used by both methods (default K)
    equal_node_sizes : bool           the Appendix assumes equal n_k; fedviz generalises it
    differences : tuple of float      ‖w_primal^t − (1/(λn))Xα^t‖_∞ / max(1, ‖(1/(λn))Xα^t‖_∞), t = 0..T
    lemma_4_residuals : tuple of float  ‖Σ_k g_k^t‖₂ / Σ_k ‖g_k^t‖₁, t = 0..T (0 when every g_k is 0)
    rtol, lemma_rtol : float
    holds : bool                      every difference ≤ rtol
    lemma_4_holds : bool              every residual ≤ lemma_rtol
    run : SideBySide                  the primal method first, the dual method's image second, t = 0..T
    """

    iterations: int
    sigma: float
    equal_node_sizes: bool
    differences: tuple[float, ...]
    lemma_4_residuals: tuple[float, ...]
    rtol: float
    lemma_rtol: float
    holds: bool
    lemma_4_holds: bool
    run: SideBySide

    def describe(self) -> str:
        return (f"Theorem 5 (Appendix A): with σ = {_g(self.sigma)}, the primal method's iterates and the image "
                f"of the dual method's differ by at most {max(self.differences):.2g} (relative) over "
                f"{self.iterations} iterations — " + ("the same sequence" if self.holds else "NOT the same")
                + f"; Lemma 4's Σ_k g_k is {max(self.lemma_4_residuals):.2g} of the corrections' size.")


def _relative_distance(w, image) -> float:
    return float(np.abs(w - image).max(initial=0.0)) / max(1.0, float(np.abs(image).max(initial=0.0)))


def theorem_5(problem, *, sigma: float | None = None, alpha0=None, iterations: int = 5,
              rtol: float = 1e-9, lemma_rtol: float = 1e-12) -> Theorem5:
    """Theorem 5 and Lemma 4 of the Appendix, on a ridge-regression ``problem`` (the squared
    loss): run Algorithms 5 and 6 from the same α^0 and compare w^t with (1/(λn)) X α^t."""
    from .algorithms.dual_method import DualMethod, primal_image
    from .algorithms.primal_method import PrimalMethod

    if problem.loss.name != "squared":
        raise ParameterError("loss", problem.loss.name, "squared (Theorem 5 is about ridge regression)")
    primal = PrimalMethod(problem, sigma=sigma, alpha0=alpha0)
    dual = DualMethod(problem, sigma=sigma, alpha0=alpha0)
    K = problem.data.n_nodes
    residuals = []

    def lemma_4():
        g = np.array([primal.correction(k) for k in range(K)])
        size = float(np.abs(g).sum())
        residuals.append(float(np.linalg.norm(g.sum(axis=0))) / size if size > 0 else 0.0)

    run = _side_by_side(problem, primal, dual, iterations, distance=_relative_distance,
                        iterate_of_second=lambda d: primal_image(problem, d.alpha), observe=lemma_4)
    sizes = problem.data.node_sizes
    return Theorem5(iterations=iterations, sigma=float(primal.sigma),
                    equal_node_sizes=bool(np.all(sizes == sizes[0])), differences=run.distances,
                    lemma_4_residuals=tuple(residuals), rtol=rtol, lemma_rtol=lemma_rtol,
                    holds=all(x <= rtol for x in run.distances),
                    lemma_4_holds=all(x <= lemma_rtol for x in residuals), run=run)


# =======================================================================================
# Property (A)'s start: an algorithm at w* with its state at its fixed point
# =======================================================================================
def fixed_point_start(cls, problem, w_star, *, seed: int = 0, **hyper):
    """An instance of algorithm ``cls`` started at w* *with its state at its fixed point*, the
    start property (A) of Section 3.1 asks about ("if the algorithm is initialized to the
    optimal solution, it stays there").

    w* alone is not the whole start of a method that keeps state: the dual family (CoCoA+,
    the Appendix's Algorithms 5 and 6) starts at α* = −φ'(Xw*), whose image (eq. (14)) is w*
    (:func:`~fedviz.algorithms.dual_method.initial_dual` does this from ``w0``); SCAFFOLD's
    control variates start at c_k = ∇F_k(w*) (eq. (6)) and c = ∇f(w*) = Σ_k (n_k/n) c_k.
    Every other registered method keeps no state between rounds but w, so ``w0 = w*`` is its
    whole start.  The constructor's signature says which case applies, so an algorithm added
    to the registry later is started the same way without a change here.
    """
    import inspect

    w_star = np.asarray(w_star, dtype=np.float64)
    accepts = inspect.signature(cls.__init__).parameters
    if "control0" in accepts:
        data_part = problem.node_grads_data(w_star).toarray()
        C = data_part + problem.lam * w_star                  # ∇F_k(w*) = (1/n_k) X_kᵀφ'(X_k w*) + λw*
        c = problem.data.node_sizes / problem.n @ C            # ∇f(w*) = Σ_k (n_k/n) ∇F_k(w*)
        return cls(problem, seed=seed, w0=w_star, control0=(c, C), **hyper)
    return cls(problem, seed=seed, w0=w_star, **hyper)
