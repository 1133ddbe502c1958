"""Rare features and the FSVRG ablation: where the error sits, by how many nodes see a feature.

Section 3.6 of the paper (Algorithm 4, FSVRG) adds four modifications to naive federated SVRG
(Algorithm 3), listed in Section 3.6.2: (1) the local stepsize h_k = h/n_k, (2) the aggregation
weights n_k/n, (3) the scaling S_k = Diag(φ^j/φ_k^j) of the local gradient differences and (4) the
per-coordinate scaling A = Diag(K/ω^j) of the aggregated update, ω^j the number of nodes whose data
hold feature j (Section 3.6.1; the paper's Figure 1 is the distribution of ω^j).  Point 4 is about
rare features: a feature seen on ω^j of the K nodes is moved only by those ω^j nodes, and an average
over all K shrinks its step by ω^j/K; A undoes the shrinking ("the less nodes a particular variable
appear on, the more we want to trust those few nodes").

This module makes that visible while a run runs:

- :func:`omega_buckets` groups the features by ω^j in powers of two (1, 2–3, 4–7, …, up to K),
  the bins of Figure 1's histogram on a log scale;
- :func:`bucket_errors` measures how far an iterate w still is from the optimum w* in each bucket
  (:data:`METRICS`): the remaining share ‖w_B − w*_B‖ / ‖w*_B‖ (1 at the start w = 0), the mean
  |w_j − w*_j|, and the bucket's share of ‖w − w*‖²;
- :data:`VARIANTS` and :class:`AblationConfig` make the ablation one job: FSVRG, FSVRG with each
  modification off on its own, and naive FSVRG, as ordinary :class:`AlgorithmSpec` s
  (:func:`ablation_job`) run by the run manager, so the curves stream live like the Run page's;
- :class:`BucketTracker` receives the iterate after every iteration: :func:`observed` wraps an
  algorithm class so that its ``setup`` and ``step`` report ``w`` to the tracker.  The wrapper is a
  subclass made here, so the iteration loop, the records and the history are exactly those of an
  ordinary run (the per-bucket figures live beside the records, in the tracker).  The tracker reads
  w* from :func:`fedviz.problems.optimum.solve`, whose cache the run's own f* filled.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from ..algorithms import get_algorithm
from ..algorithms.base import Algorithm
from ..algorithms.spec import AlgorithmSpec
from ..data.build import DataSpec
from ..errors import FedvizError, ParameterError
from ..problems.losses import make_loss
from ..problems.objective import Problem
from ..runner.config import DEFAULT_DATA, RunConfig
from ..runner.job import ProblemSpec, RunJob
from ..validation import check_int, check_real

log = logging.getLogger(__name__)

#: Most iterations an ablation takes from the page (six algorithms of this many iterations).
MAX_ITERATIONS = 500

#: The per-bucket measures of distance to w*, key → the words the page shows.
METRICS = {
    "relative": "remaining error ‖w_B − w*_B‖ / ‖w*_B‖ (1 = no progress since w = 0)",
    "mean_abs": "mean |w_j − w*_j| over the bucket's features",
    "share": "the bucket's share of ‖w − w*‖²",
}


# =======================================================================================
# Buckets of ω^j and the error per bucket
# =======================================================================================
@dataclass(frozen=True)
class Buckets:
    """Features grouped by ω^j (Section 3.6.1), the number of nodes they appear on, in powers of two.

    Bucket b holds the features with 2^b ≤ ω^j < 2^(b+1) (the last one ends at K); features in no
    example (ω^j = 0) belong to no bucket (index −1): nothing moves them from w = 0 but the
    regulariser, and w*_j = 0 for them.

    Attributes
    ----------
    n_nodes : int            K
    index : ndarray (d,)     each feature's bucket, −1 for ω^j = 0
    low, high : ndarray      the smallest and largest ω^j a bucket can hold
    counts : ndarray         features per bucket
    """

    n_nodes: int
    index: np.ndarray = field(repr=False)
    low: np.ndarray
    high: np.ndarray
    counts: np.ndarray

    @property
    def size(self) -> int:
        return int(self.counts.size)

    @property
    def labels(self) -> tuple[str, ...]:
        """'1', '2–3', '4–7', …, '256–500': the ω^j each bucket holds."""
        return tuple(f"{lo:,}" if lo == hi else f"{lo:,}–{hi:,}" for lo, hi in zip(self.low, self.high))

    @property
    def populated(self) -> np.ndarray:
        """The indices of the buckets that hold at least one feature."""
        return np.flatnonzero(self.counts > 0)


def omega_buckets(omega: np.ndarray, n_nodes: int) -> Buckets:
    """The power-of-two buckets of ω^j for K = ``n_nodes`` (see :class:`Buckets`)."""
    K = check_int("n_nodes", n_nodes, low=1)
    omega = np.asarray(omega)
    if omega.ndim != 1 or (omega.size and (omega.min() < 0 or omega.max() > K)):
        raise ParameterError("omega", f"values from {omega.min()} to {omega.max()}" if omega.size else "empty",
                             f"a vector of node counts from 0 to K = {K}")
    m = K.bit_length()                      # buckets 0 … m−1 cover 1 … K
    low = 2 ** np.arange(m, dtype=np.int64)
    high = np.minimum(2 * low - 1, K)
    index = np.full(omega.size, -1, dtype=np.int64)
    seen = omega > 0
    index[seen] = np.floor(np.log2(omega[seen])).astype(np.int64)
    counts = np.bincount(index[seen], minlength=m).astype(np.int64)
    index.setflags(write=False)
    return Buckets(n_nodes=K, index=index, low=low, high=high, counts=counts)


@dataclass(frozen=True)
class BucketErrors:
    """The distance of one iterate to w* in each bucket of ω^j (each array has one value per bucket;
    NaN where a bucket is empty, and for ``relative`` where w*_B = 0)."""

    relative: np.ndarray
    mean_abs: np.ndarray
    share: np.ndarray

    def metric(self, name: str) -> np.ndarray:
        if name not in METRICS:
            raise ParameterError("metric", name, "one of " + ", ".join(METRICS))
        return getattr(self, name)


def bucket_errors(w: np.ndarray, w_star: np.ndarray, buckets: Buckets) -> BucketErrors:
    """:class:`BucketErrors` of ``w`` against ``w_star``: O(dC), one weighted bincount per measure.

    A softmax model (issue 22) is flat d × C, row-major: feature j's C weights are one row, moved by the
    same ω^j nodes (A scales the row), so a bucket's squared error sums its features' rows and its mean
    |w_j − w*_j| is over the bucket's d_B × C weights; for C = 1 this is the vector's own."""
    w, w_star = np.asarray(w, dtype=float), np.asarray(w_star, dtype=float)
    d = buckets.index.size
    if w.shape != w_star.shape or w.ndim != 1 or w.size % max(d, 1) or w.size == 0:
        raise ParameterError("w", f"shape {w.shape}", f"a vector of length d = {d} (or a flat d × C model)")
    C = w.size // d
    keep = buckets.index >= 0
    b = buckets.index[keep]
    diff, ref_rows = (w - w_star).reshape(d, C)[keep], w_star.reshape(d, C)[keep]
    m = buckets.size
    sq = np.bincount(b, weights=np.sum(diff * diff, axis=1), minlength=m)
    ab = np.bincount(b, weights=np.sum(np.abs(diff), axis=1) / C, minlength=m)
    ref = np.bincount(b, weights=np.sum(ref_rows * ref_rows, axis=1), minlength=m)
    with np.errstate(invalid="ignore", divide="ignore"):
        counts = buckets.counts.astype(float)
        mean_abs = np.where(counts > 0, ab / np.where(counts > 0, counts, 1), np.nan)
        relative = np.where((counts > 0) & (ref > 0), np.sqrt(sq) / np.sqrt(np.where(ref > 0, ref, 1)), np.nan)
        total = sq.sum()
        share = np.where(counts > 0, sq / total if total > 0 else np.zeros(m), np.nan)
    return BucketErrors(relative=relative, mean_abs=mean_abs, share=share)


# =======================================================================================
# The ablation: FSVRG with each modification off, and naive FSVRG
# =======================================================================================
@dataclass(frozen=True)
class Variant:
    """One curve of the ablation: a label, the algorithm and its hyperparameters, and what it shows."""

    label: str
    algorithm: str
    hyper: Mapping[str, Any]
    what: str


#: The ablation's variants, key → :class:`Variant`, in the order of Section 3.6.2's list.
VARIANTS: Mapping[str, Variant] = MappingProxyType({
    "fsvrg": Variant("FSVRG", "fsvrg", {}, "Algorithm 4, with all four modifications of Section 3.6.2."),
    "no-local-stepsize": Variant(
        "FSVRG without h/n_k", "fsvrg", {"local_stepsize": False},
        "Modification 1 off: every node steps with the same h (the default h divided by the mean node size), "
        "so a large node moves much farther in its pass than a small one."),
    "no-size-weights": Variant(
        "FSVRG without n_k/n", "fsvrg", {"size_weights": False},
        "Modification 2 off: the updates are averaged with 1/K, not n_k/n, so the aggregate is no longer an "
        "unbiased gradient step on unbalanced nodes."),
    "no-gradient-scaling": Variant(
        "FSVRG without S_k", "fsvrg", {"gradient_scaling": False},
        "Modification 3 off: S_k = I, so a feature over-represented on a node overshoots there."),
    "no-aggregate-scaling": Variant(
        "FSVRG without A", "fsvrg", {"aggregate_scaling": False},
        "Modification 4 off: A = I, so a feature seen on ω^j of K nodes gets ω^j/K of its step — rare "
        "features lag far behind."),
    "naive": Variant("Naive FSVRG", "naive-fsvrg", {}, "Algorithm 3: none of the four modifications."),
})


@dataclass(frozen=True)
class AblationConfig:
    """One click of the ablation: the problem (data, loss, λ), the variants, iterations, seed, tuning.

    ``tune``: choose each variant's stepsize by pilot runs first (:mod:`fedviz.runner.tune`), so
    every variant runs at its own best h rather than at a default derived for Algorithm 4.
    """

    data: DataSpec = DEFAULT_DATA
    loss: str = "logistic"
    lam: float | None = None
    variants: tuple[str, ...] = tuple(VARIANTS)
    iterations: int = 30
    seed: int = 0
    tune: bool = False

    def __post_init__(self):
        if not isinstance(self.data, DataSpec):
            raise ParameterError("data", type(self.data).__name__, "a DataSpec")
        make_loss(self.loss)
        if self.lam is not None:
            check_real("lam", self.lam, low=0, low_open=True)
        variants = tuple(self.variants)
        if not variants:
            raise ParameterError("variants", "none", "at least one of " + ", ".join(VARIANTS))
        for v in variants:
            if v not in VARIANTS:
                raise ParameterError("variants", v, "one of " + ", ".join(VARIANTS))
        object.__setattr__(self, "variants", tuple(dict.fromkeys(variants)))
        check_int("iterations", self.iterations, low=1, high=MAX_ITERATIONS)
        check_int("seed", self.seed, low=0, high=2**32 - 1)
        if not isinstance(self.tune, bool):
            raise ParameterError("tune", self.tune, "true or false")
        for v in self.variants:
            cls = get_algorithm(VARIANTS[v].algorithm)
            why = cls.loss_refusal(self.loss, dict(VARIANTS[v].hyper))  # FSVRG and naive FSVRG take softmax
            if why is not None:
                raise ParameterError(f"{VARIANTS[v].algorithm} with loss", self.loss,
                                     "one of " + ", ".join(cls.losses), hint=why)

    @classmethod
    def of(cls, config: RunConfig, **changes) -> "AblationConfig":
        """The ablation on the session's problem (data, loss, λ and seed of ``config``)."""
        base = dict(data=config.data, loss=config.loss, lam=config.lam, seed=config.seed)
        return cls(**{**base, **changes})

    def specs(self) -> tuple[AlgorithmSpec, ...]:
        """One :class:`AlgorithmSpec` per variant, labelled by it (FSVRG's variants via ``with_hyper``)."""
        fsvrg = AlgorithmSpec.of("fsvrg")
        out = []
        for key in self.variants:
            v = VARIANTS[key]
            if v.algorithm == "fsvrg":
                out.append(fsvrg.with_hyper(v.hyper, label=v.label, group=v.label))
            else:
                out.append(AlgorithmSpec.of(v.algorithm, v.hyper, label=v.label))
        return tuple(out)

    def as_json(self) -> dict:
        """The stored config: a Run config's shape (the history and its exports read it alike), its
        algorithms at their defaults (each run's own hyperparameters, which name its variant, are stored
        with it), marked as the Learn page's."""
        names = tuple(dict.fromkeys(VARIANTS[v].algorithm for v in self.variants))
        run = RunConfig(data=self.data, loss=self.loss, lam=self.lam, algorithms=tuple((n, ()) for n in names),
                        iterations=self.iterations, seed=self.seed, tune=self.tune)
        return {**run.as_json(), "learn": "rare-features"}


def ablation_job(config: AblationConfig, tracker: "BucketTracker | None" = None) -> RunJob:
    """The ablation as one run: every variant on the same problem, seed and iterations; with a
    ``tracker``, each variant reports its iterate to it (:func:`observed`)."""
    specs = config.specs()
    if tracker is not None:
        specs = tuple(observed(s, tracker) for s in specs)
    return RunJob(ProblemSpec(config.data, config.loss, config.lam), specs, iterations=config.iterations,
                  seed=config.seed, config=config.as_json(), tune=config.tune)


# =======================================================================================
# The live per-bucket error
# =======================================================================================
@dataclass(frozen=True)
class TrackerSnapshot:
    """What a :class:`BucketTracker` holds at one instant (immutable).

    ``iterations[label]`` is an int array, ``values[label][metric]`` an (iterations × buckets)
    array; ``buckets`` is None until the first iterate arrived; ``message`` says why the figures
    are unavailable (no optimum), else ''.
    """

    buckets: Buckets | None
    labels: tuple[str, ...]
    iterations: Mapping[str, np.ndarray]
    values: Mapping[str, Mapping[str, np.ndarray]]
    message: str
    version: int

    def latest(self, metric: str) -> dict[str, np.ndarray]:
        """label → the per-bucket values at that label's latest iteration."""
        if metric not in METRICS:
            raise ParameterError("metric", metric, "one of " + ", ".join(METRICS))
        return {label: self.values[label][metric][-1] for label in self.labels if len(self.iterations[label])}


class BucketTracker:
    """Receives iterates from a run's worker (:meth:`observe`), gives pages snapshots (:meth:`snapshot`).

    Thread-safe.  An iterate at iteration 0 starts a label's series again: a tuned variant's pilot
    runs (Section 4.1's "we tried a set of stepsizes") report too, and the real run comes last.
    Nothing here may stop a run: a failure to measure is kept as :attr:`message`, never raised.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._series: dict[str, tuple[list[int], list[BucketErrors]]] = {}
        self._reference: tuple[Problem, Buckets, np.ndarray] | None = None
        self._message = ""
        self._version = 0
        self._snapshot: TrackerSnapshot | None = None

    def _ref(self, problem: Problem) -> tuple[Buckets, np.ndarray]:
        ref = self._reference
        if ref is None or ref[0] is not problem:
            from ..problems.optimum import solve

            stats = problem.data.stats
            buckets = omega_buckets(stats.omega, problem.data.n_nodes)
            w_star = solve(problem).w   # cached: the run computed it for f* before its first iteration
            ref = self._reference = (problem, buckets, w_star)
        return ref[1], ref[2]

    def observe(self, label: str, algo: Algorithm) -> None:
        """Record ``algo.w`` (after ``algo.iteration`` iterations) for the curve ``label``."""
        if self._message:
            return
        try:
            buckets, w_star = self._ref(algo.problem)
            errors = bucket_errors(algo.w, w_star, buckets)
        except Exception as e:  # noqa: BLE001 - the run goes on without the figure; the page says why
            log.warning("per-bucket error unavailable: %s", e)
            with self._lock:
                why = str(e) if isinstance(e, FedvizError) else type(e).__name__
                self._message = f"the per-bucket error is unavailable ({why})"
                self._version += 1
            return
        with self._lock:
            its, errs = self._series.setdefault(label, ([], []))
            if algo.iteration == 0 or (its and algo.iteration <= its[-1]):
                its.clear()
                errs.clear()
            its.append(int(algo.iteration))
            errs.append(errors)
            self._version += 1

    def snapshot(self) -> TrackerSnapshot:
        with self._lock:
            snap = self._snapshot
            if snap is not None and snap.version == self._version:
                return snap
            labels = tuple(self._series)
            iterations = {k: np.asarray(self._series[k][0], dtype=np.int64) for k in labels}
            values = {}
            for k in labels:
                errs = self._series[k][1]
                values[k] = MappingProxyType({m: (np.vstack([e.metric(m) for e in errs]) if errs else np.empty((0, 0)))
                                              for m in METRICS})
            buckets = None if self._reference is None else self._reference[1]
            snap = self._snapshot = TrackerSnapshot(buckets, labels, MappingProxyType(iterations),
                                                    MappingProxyType(values), self._message, self._version)
            return snap


def observed(spec: AlgorithmSpec, tracker: BucketTracker) -> AlgorithmSpec:
    """``spec`` whose algorithm reports its iterate to ``tracker`` after ``setup`` and every ``step``.

    The class is a subclass of the spec's algorithm that changes nothing else: same name, title,
    hyperparameters, iterates and counters; its derived defaults are the base class's (one cache).
    """
    base = spec.cls
    label = spec.label

    class Observed(base):  # type: ignore[misc, valid-type]
        __doc__ = f"{base.__name__}, reporting its iterate to a BucketTracker as {label!r}."

        def setup(self):
            super().setup()
            tracker.observe(label, self)

        def step(self):
            super().step()
            tracker.observe(label, self)

        @classmethod
        def _derived(cls, problem, hp):
            return base._derived(problem, hp)

    Observed.__name__ = Observed.__qualname__ = f"Observed{base.__name__}"
    return AlgorithmSpec(spec.name, spec.hyper, spec.label, spec.group, impl=Observed)


def _times(ratio: float) -> str:
    return f"{ratio:,.0f}×" if ratio >= 10 else f"{ratio:.1f}×"


def ablation_findings(final: Mapping[str, float], *, iteration: int, reference: str = "FSVRG",
                      rare: Mapping[str, float] | None = None, rare_bin: str = "", same: float = 1.5,
                      lag: float = 2.0) -> str:
    """What the ablation's curves show, in sentences generated from them (never written for one data set).

    ``final``: each curve's f(w) − f* at ``iteration``; each other curve is said to end ``k×`` above or
    below ``reference`` (FSVRG, Algorithm 4), or about level with it when within a factor ``same``.
    ``rare``: each curve's remaining error ‖w_B − w*_B‖/‖w*_B‖ in the rarest bin of ω^j (features on
    ``rare_bin`` nodes); the curves above ``lag`` × the reference's lag behind on rare features, the
    case the paper's A = Diag(K/ω^j) is for (Section 3.6.1, point 4).
    """
    ref = final.get(reference)
    if ref is None or not (math.isfinite(ref) and ref > 0):
        return ""
    above, below, level = [], [], []
    for label, v in final.items():
        if label == reference:
            continue
        if not math.isfinite(v):
            above.append((math.inf, f"{label} diverged"))
            continue
        ratio = max(v, 1e-300) / ref
        if ratio >= same:
            above.append((ratio, f"{label} {_times(ratio)} above"))
        elif ratio <= 1 / same:
            below.append((1 / ratio, f"{label} {_times(1 / ratio)} below"))
        else:
            level.append(label)
    parts = [f"**At iteration {iteration}**, FSVRG's f − f* is {ref:.2g}"]
    ends = [t for _, t in sorted(above, reverse=True)] + [t for _, t in sorted(below, reverse=True)]
    if ends:
        parts.append(": " + ", ".join(ends) + " it")
    if level:
        parts.append(("; " if ends else ": ") + ", ".join(level) + (" ends" if len(level) == 1 else " end")
                     + " within a factor 1.5 of it")
    text = "".join(parts) + "."
    if below:
        text += (" A curve below FSVRG is a modification that does not help on these data at this stepsize "
                 "and iteration (tuning each curve, or more iterations, can change that).")
    if rare and reference in rare and math.isfinite(rare[reference]):
        r0 = rare[reference]
        lagging = sorted(((v, k) for k, v in rare.items() if k != reference and math.isfinite(v) and
                          v > lag * max(r0, 1e-12)), reverse=True)
        where = f"the rarest features (those on {rare_bin} node{'s' * (rare_bin != '1')})"
        if lagging:
            text += (f"  \nOn {where}, FSVRG has {r0:.2g} of the way to w* still to go; "
                     + ", ".join(f"{k} {v:.2g}" for v, k in lagging)
                     + f": {'it lags' if len(lagging) == 1 else 'they lag'} behind there.")
        else:
            text += f"  \nOn {where}, no curve has more than {lag:g}× FSVRG's remaining {r0:.2g} of the way to w*."
    return text


def rare_share(omega: np.ndarray, n_nodes: int, fraction: float = 0.1) -> float:
    """The share of the features seen (ω^j > 0) that appear on fewer than ``fraction`` × K nodes:
    Section 4.1's "over 88% of features are present on fewer than 1,000 nodes" (K = 10,000)."""
    omega = np.asarray(omega)
    seen = omega[omega > 0]
    if not seen.size:
        return math.nan
    return float(np.mean(seen < fraction * n_nodes))


__all__ = ["AblationConfig", "ablation_findings", "BucketErrors", "BucketTracker", "Buckets", "MAX_ITERATIONS",
           "METRICS",
           "TrackerSnapshot", "VARIANTS", "Variant", "ablation_job", "bucket_errors", "observed",
           "omega_buckets", "rare_share"]
