"""The built-in experiments: one click each, each checking a published claim and saying whether it held.

Each :class:`Builtin` makes its :class:`~fedviz.experiments.spec.Experiment` at a scale
("small": minutes on a laptop; "full": the published protocol's length) and judges the
results with a :class:`Verdict` made of named checks, each a measured comparison with its
numbers, so a reader sees what held, by how much, and what did not.

* ``fedprox-figure2``: Li et al. (2020, FedProx), Figure 2: on Synthetic(α, β) from IID to
  (1, 1), FedAvg degrades as heterogeneity grows and the proximal term (μ > 0, the best of
  their grid {0.001, 0.01, 0.1, 1}) helps.  μ is chosen on seeds of its own (from
  :data:`SELECTION_SEED0` up) and the claim judged on the others, pair by pair (the same seed:
  the same data and client sampling for both methods), so a μ that did nothing would pass
  with probability 2⁻ⁿ for n judged seeds, not the ~4/5 of a best-of-four chosen on them.  Their protocol: 30 devices, 10 per round, E = 20
  local epochs, B = 10, η = 0.01 for both methods.  fedviz does not model stragglers
  (systems heterogeneity), so this is their 0%-stragglers panel.
* ``dirichlet-sweep``: FedAvg, SCAFFOLD and FSVRG on google-plus-small split by Dirichlet(α)
  over 100 nodes, α from 0.01 (each node nearly one label) to 100 (IID), each tuned in each
  setting: FedAvg's client drift grows as α falls (Karimireddy et al., 2020); SCAFFOLD's
  control variates and FSVRG's corrections (Section 3.6) are meant to resist it.
* ``paper-figure2``: Konečný et al. (2016), Figure 2 (Section 4.1), with bands over seeds:
  FSVRG, GD and CoCoA+ on the authors' natural nodes, and FSVRG on the same rows reshuffled
  over nodes of the same sizes (FSVRGR): CoCoA+ is worse than GD, FSVRG beats both, and
  the difference between FSVRG and FSVRGR is subtle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from ..data.build import DataSpec
from ..errors import ParameterError
from .results import Results
from .spec import Arm, Axis, Experiment

SCALES = ("small", "full")


@dataclass(frozen=True)
class Check:
    """One measured comparison of a verdict: what it says, whether it held, the numbers."""

    claim: str
    held: bool | None          # None: not measurable (cells missing)
    numbers: str


@dataclass(frozen=True)
class Verdict:
    """Whether a built-in's claim held: every check held (None if one could not be measured).

    ``scale`` is the scale the grid was run at ("small", "full"; None: not a built-in's own
    grid); ``published`` says what the published claim is about (its data, K, length).  At a
    scale other than "full" the verdict says that it did not test the published claim, and a
    check that did not hold there is no refutation of it (:attr:`refutes` is False)."""

    claim: str
    checks: tuple[Check, ...]
    scale: str | None = None
    published: str = ""

    @property
    def held(self) -> bool | None:
        if any(c.held is None for c in self.checks):
            return None
        return all(c.held for c in self.checks)

    @property
    def at_published_scale(self) -> bool:
        return self.scale in (None, "full")

    @property
    def refutes(self) -> bool:
        """The claim did not hold at the scale it is about (a page shows this one in red)."""
        return self.held is False and self.at_published_scale

    @property
    def text(self) -> str:
        if self.at_published_scale:
            head = {True: "The claim held", False: "The claim did not hold",
                    None: "Not enough cells to judge"}[self.held]
            return f"{head}: {self.claim}"
        failed = sum(c.held is False for c in self.checks)
        head = {True: f"At {self.scale} scale every check held",
                False: f"At {self.scale} scale {failed} of {len(self.checks)} checks did not hold",
                None: f"At {self.scale} scale: not enough cells to judge"}[self.held]
        return (f"{head}. This does not test the published claim ({self.claim}): it is about "
                f"{self.published}; run at full scale to test it.")

    def lines(self) -> list[str]:
        mark = {True: "held", False: "did not hold", None: "not measured"}
        return [f"{c.claim}: {mark[c.held]} ({c.numbers})" for c in self.checks]

    def for_report(self) -> "ShownVerdict":
        """This verdict as the HTML report styles it (by ``held``): below the published scale a check
        that did not hold is shown as a note (held None: amber), not as a refutation (red)."""
        shown = self.held if self.held is not False or self.refutes else None
        return ShownVerdict(shown, self.text, tuple(self.lines()))


@dataclass(frozen=True)
class ShownVerdict:
    """A verdict's text and lines with the ``held`` a report colours it by (:meth:`Verdict.for_report`)."""

    held: bool | None
    text: str
    checks: tuple[str, ...]

    def lines(self) -> list[str]:
        return list(self.checks)


@dataclass(frozen=True)
class Builtin:
    """A one-click experiment: its grid at each scale, and the judge of its claim.

    ``published``: what the published claim is about, in words (data, K, length), said by a
    verdict at a scale other than "full"."""

    name: str
    title: str
    claim: str
    source: str
    make: Callable[[str], Experiment]
    judge: Callable[[Results], tuple[Check, ...]]
    published: str = "the published protocol"

    def experiment(self, scale: str = "small") -> Experiment:
        if scale not in SCALES:
            raise ParameterError("scale", scale, "one of " + ", ".join(SCALES))
        return self.make(scale)

    def scale_of(self, experiment: Experiment) -> str | None:
        """The scale whose grid ``experiment`` is, by content (:func:`~fedviz.experiments.spec.content_hash`),
        whatever its name; None for any other grid."""
        h = experiment.content_hash
        return next((s for s in SCALES if self.experiment(s).content_hash == h), None)

    def verdict(self, results: Results, scale: str | None = "auto") -> Verdict:
        """Judge ``results`` ("auto": at the scale its grid is, :meth:`scale_of`)."""
        if scale == "auto":
            scale = self.scale_of(results.experiment)
        return Verdict(self.claim, tuple(self.judge(results)), scale, self.published)


# -- helpers ---------------------------------------------------------------------------------------------
def _median(results: Results, arm: str, setting, metric: str = "suboptimality") -> float:
    s = results.summary(arm, setting, metric)
    return math.nan if s is None else s.median


def _fmt(x: float) -> str:
    return "—" if math.isnan(x) else f"{x:.3g}"


def _measured(*xs: float) -> bool:
    return all(not math.isnan(x) for x in xs)


def _setting(results: Results, label: str) -> tuple[int, ...] | None:
    axis = results.experiment.axes[0]
    return (axis.labels.index(label),) if label in axis.labels else None


# -- FedProx, Figure 2 -------------------------------------------------------------------------------------
FEDPROX_SETTINGS = (("IID", {"data.iid": True}), ("(0, 0)", {"data.alpha": 0.0, "data.beta": 0.0}),
                    ("(0.5, 0.5)", {"data.alpha": 0.5, "data.beta": 0.5}),
                    ("(1, 1)", {"data.alpha": 1.0, "data.beta": 1.0}))
FEDPROX_MU_GRID = (0.001, 0.01, 0.1, 1.0)


#: Seeds from this one up choose FedProx's μ; the seeds below it judge the claim.  Choosing the best
#: of four μ on the seeds that judge it would make the check hold about 4 times in 5 even if μ did
#: nothing (the least of four medians below a fifth); chosen apart, it is a fair comparison.
SELECTION_SEED0 = 1000


def _fedprox(scale: str) -> Experiment:
    local = {"client_fraction": 1 / 3, "local_epochs": 20, "batch_size": 10, "stepsize": 0.01}
    full = scale == "full"
    judged = tuple(range(5 if full else 4))
    selection = tuple(range(SELECTION_SEED0, SELECTION_SEED0 + (3 if full else 2)))
    return Experiment(
        "fedprox-figure2" + ("" if full else "-small"),
        DataSpec("preset:fedprox-synthetic"),
        (Arm.of("fedavg", local, label="FedAvg"),
         Arm.of("fedprox", local, label="FedProx", step="grid", values=FEDPROX_MU_GRID, param="mu")),
        (Axis("Synthetic(α, β)", tuple(v for _, v in FEDPROX_SETTINGS), tuple(k for k, _ in FEDPROX_SETTINGS)),),
        seeds=judged + selection, iterations=200 if full else 40, target=1e-2, loss="softmax",
        description="FedAvg against FedProx (the best μ of {0.001, 0.01, 0.1, 1} in each setting, chosen on "
                    f"seeds {SELECTION_SEED0} and up, judged on the others) as Synthetic(α, β) goes from IID "
                    "to (1, 1); ten-class softmax regression as Li et al. built it, 30 devices, 10 per round, "
                    "E = 20, B = 10, η = 0.01; their Figure 2's training loss f(w) and f − f*, and the gradient "
                    "dissimilarity (1/K) Σ_k ‖∇F_k(w) − ∇f(w)‖² of its bottom row.",
        claim=BUILTINS_CLAIMS["fedprox-figure2"], dissimilarity=True)


def split_seeds(seeds) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(judged, selection): the seeds below :data:`SELECTION_SEED0` judge, the others choose."""
    return (tuple(s for s in seeds if s < SELECTION_SEED0), tuple(s for s in seeds if s >= SELECTION_SEED0))


def _spread(sm) -> str:
    """'0.052 (0.045–0.060 over 3 seeds)': a median and the range it rests on."""
    if sm is None:
        return "—"
    return f"{_fmt(sm.median)} ({_fmt(sm.low)}–{_fmt(sm.high)} over {sm.n} seed{'s' if sm.n != 1 else ''})"


def _finals(r: Results, arm: str, setting, step, seeds) -> dict[int, float]:
    """Final f − f* of ``arm`` in ``setting`` at grid value ``step``, by seed (finished cells only)."""
    return {c.seed: c.suboptimality for c in r.of(arm, setting, step, seeds) if c.status in ("done", "diverged")}


def paired_below(lower: dict[int, float], upper: dict[int, float], seeds) -> tuple[bool | None, str]:
    """Whether ``lower`` ends below ``upper`` on every one of ``seeds`` (each seed: the same data and
    client sampling for both, a like-with-like pair), and the per-seed ratios upper / lower as
    'ratio 7.3 (2.1–9.0 over 5 seeds)' (None: a seed is missing).  If both were the same method this
    holds by chance with probability 2⁻ⁿ for n seeds (1/16 for 4, 1/32 for 5)."""
    if not seeds or any(s not in lower or s not in upper for s in seeds):
        return None, "a judged seed is missing"
    ratios = [upper[s] / lower[s] if lower[s] > 0 else math.inf for s in seeds]
    held = all(lower[s] < upper[s] for s in seeds)
    return held, (f"ratio per seed {_fmt(float(np.median(ratios)))} ({_fmt(min(ratios))}–{_fmt(max(ratios))} "
                  f"over {len(ratios)} seeds)")


def _judge_fedprox(r: Results) -> tuple[Check, ...]:
    iid, worst = _setting(r, "IID"), _setting(r, "(1, 1)")
    if iid is None or worst is None:
        return (Check("the settings IID and (1, 1) are in the grid", None, "missing"),)
    judged, selection = split_seeds(r.experiment.seeds)
    if not judged or not selection:
        return (Check(f"seeds below {SELECTION_SEED0} to judge and seeds from {SELECTION_SEED0} to choose μ",
                      None, f"seeds {', '.join(map(str, r.experiment.seeds))}"),)
    a_iid, a_worst = (r.summary("FedAvg", s, seeds=judged) for s in (iid, worst))
    mu = r.best_step("FedProx", worst, seeds=selection)
    p_worst = r.summary("FedProx", worst, step=mu, seeds=judged)
    chosen = r.summary("FedProx", worst, step=mu, seeds=selection)
    hurts, hurts_ratio = paired_below(_finals(r, "FedAvg", iid, None, judged),
                                      _finals(r, "FedAvg", worst, None, judged), judged)
    helps, helps_ratio = paired_below(_finals(r, "FedProx", worst, mu, judged),
                                      _finals(r, "FedAvg", worst, None, judged), judged)
    on = f"seeds {', '.join(map(str, judged))}"

    def median(arm, s, step="best"):
        sm = r.summary(arm, s, step=step, seeds=judged)
        return math.nan if sm is None else sm.median

    per = "; ".join(f"{r.experiment.axes[0].labels[s[0]]}: FedAvg {_fmt(median('FedAvg', s))}, FedProx "
                    f"{_fmt(median('FedProx', s, r.best_step('FedProx', s, seeds=selection)))}" for s in r.settings)
    return (
        Check("heterogeneity hurts FedAvg (final f − f* at (1, 1) above IID on every judged seed)", hurts,
              f"FedAvg's final f − f* on {on}: IID {_spread(a_iid)}, (1, 1) {_spread(a_worst)}; (1, 1) / IID "
              f"{hurts_ratio}"),
        Check("μ > 0 helps at (1, 1) (FedProx's final f − f* below FedAvg's on every judged seed, μ chosen on "
              "other seeds)", helps,
              f"μ = {mu if mu is not None else '—'} chosen on seeds {', '.join(map(str, selection))} "
              f"(there {_spread(chosen)}); on {on}: FedProx {_spread(p_worst)} against FedAvg "
              f"{_spread(a_worst)}, FedAvg / FedProx {helps_ratio}; medians on the judged seeds, μ chosen per "
              f"setting on the others: {per}"),
    )


# -- Dirichlet sweep ----------------------------------------------------------------------------------------
DIRICHLET_ALPHAS = (0.01, 0.1, 1.0, 10.0, 100.0)


def _dirichlet(scale: str) -> Experiment:
    full = scale == "full"
    alphas = DIRICHLET_ALPHAS if full else (0.01, 1.0, 100.0)
    return Experiment(
        "dirichlet-sweep" + ("" if full else "-small"),
        # deal_test: the preset's test rows stay with the generator's nodes, none of the 100 new ones; dealt
        # to them by class share, every node is scored (DataSpec.deal_test, seeded by the cell's data seed).
        DataSpec("preset:google-plus-small", partition="dirichlet:alpha=1", nodes=100, deal_test=True),
        (Arm.of("fedavg", label="FedAvg", step="tuned"), Arm.of("scaffold", label="SCAFFOLD", step="tuned"),
         Arm.of("fsvrg", label="FSVRG", step="tuned")),
        (Axis.of("partition.alpha", alphas, name="Dirichlet α"),),
        seeds=tuple(range(3 if full else 2)), iterations=30 if full else 15, target=1e-3,
        description="FedAvg, SCAFFOLD and FSVRG, each tuned in each setting, on google-plus-small split over "
                    "100 nodes by Dirichlet(α) over the labels, α from 0.01 (one label per node) to 100 (IID).",
        claim=BUILTINS_CLAIMS["dirichlet-sweep"])


def _judge_dirichlet(r: Results) -> tuple[Check, ...]:
    axis = r.experiment.axes[0]
    lo, hi = (0,), (len(axis.values) - 1,)
    ratios = {}
    for arm in r.arms:
        a, b = _median(r, arm, lo), _median(r, arm, hi)
        ratios[arm] = a / b if _measured(a, b) and b > 0 else math.nan
    text = ", ".join(f"{arm} ×{_fmt(x)}" for arm, x in ratios.items())
    fedavg = ratios.get("FedAvg", math.nan)
    others = [a for a in ("SCAFFOLD", "FSVRG") if a in ratios]
    skewed = {arm: _median(r, arm, lo) for arm in r.arms}
    at_lo = ", ".join(f"{arm} {_spread(r.summary(arm, lo))}" for arm in r.arms)
    return (
        Check(f"FedAvg degrades as α falls (final f − f* at α = {axis.labels[0]} over α = {axis.labels[-1]} above 1)",
              fedavg > 1 if _measured(fedavg) else None, f"ratio low α / high α: {text}"),
        Check(f"at α = {axis.labels[0]}, SCAFFOLD and FSVRG end below FedAvg",
              all(skewed[a] < skewed["FedAvg"] for a in others) if _measured(*skewed.values()) else None,
              f"median final f − f* (range over seeds; each cell tuned on pilot seeds apart from its own): "
              f"{at_lo}"),
        Check("SCAFFOLD and FSVRG lose less than FedAvg (a smaller ratio low α / high α)",
              all(ratios[a] < fedavg for a in others) if _measured(fedavg, *(ratios[a] for a in others)) else None,
              f"ratio low α / high α: {text}"),
    )


# -- the paper's Figure 2 --------------------------------------------------------------------------------------
def _figure2(scale: str) -> Experiment:
    full = scale == "full"
    return Experiment(
        "paper-figure2" + ("" if full else "-small"),
        DataSpec("preset:google-plus" if full else "preset:google-plus-small"),
        (Arm.of("fsvrg", label="FSVRG"), Arm.of("gd", label="GD"), Arm.of("cocoa-plus", label="CoCoA+")),
        (Axis.of("partition", ("natural", "reshuffle"), name="nodes", labels=("authors", "reshuffled")),),
        seeds=tuple(range(5 if full else 3)), iterations=30, data_seed=0, target=1e-3,
        description="Figure 2 of the paper (Section 4.1) with bands over the algorithms' seeds: FSVRG, GD and "
                    "CoCoA+ on the authors' own nodes; FSVRG on the rows reshuffled over nodes of the same sizes "
                    "is FSVRGR.",
        claim=BUILTINS_CLAIMS["paper-figure2"])


def _judge_figure2(r: Results) -> tuple[Check, ...]:
    nat, shuf = (0,), (1,)
    f, g, c = (_median(r, a, nat) for a in ("FSVRG", "GD", "CoCoA+"))
    fr = _median(r, "FSVRG", shuf)
    ratio = max(f, fr) / min(f, fr) if _measured(f, fr) and min(f, fr) > 0 else math.nan
    return (
        Check("CoCoA+ is worse than GD", c > g if _measured(c, g) else None,
              f"median final f − f* (range over seeds): CoCoA+ {_spread(r.summary('CoCoA+', nat))}, "
              f"GD {_spread(r.summary('GD', nat))}"),
        Check("FSVRG beats GD and CoCoA+", f < min(g, c) if _measured(f, g, c) else None,
              f"FSVRG {_spread(r.summary('FSVRG', nat))} against GD {_fmt(g)} and CoCoA+ {_fmt(c)}"),
        Check("the difference between FSVRG and FSVRGR is subtle (final f − f* within a factor of 10)",
              ratio <= 10 if _measured(ratio) else None, f"FSVRG {_fmt(f)}, FSVRGR {_fmt(fr)}, ratio {_fmt(ratio)}"),
    )


#: What the paper's Figure 2 is about (Section 4.1): its Google+ data, one node per author.
PAPER_FIGURE2_SCALE = ("the paper's Google+ data: K = 10,000 authors as nodes, n = 2,166,693 training rows, "
                       "d = 20,002 (Section 4.1), which the full scale's google-plus preset matches; the small "
                       "scale runs google-plus-small, K = 500 nodes")

BUILTINS_CLAIMS = {
    "fedprox-figure2": "as Synthetic(α, β) grows more heterogeneous FedAvg converges worse, and the proximal term "
                       "(μ > 0) helps (Li et al., 2020, Figure 2)",
    "dirichlet-sweep": "FedAvg degrades as the label split grows more skewed (Dirichlet α → 0); SCAFFOLD and FSVRG "
                       "resist it (Karimireddy et al., 2020; Konečný et al., 2016, Section 3.6)",
    "paper-figure2": "CoCoA+ is worse than GD, FSVRG beats both, and FSVRG on reshuffled data differs only subtly "
                     "(Konečný et al., 2016, Section 4.1, Figure 2)",
}

BUILTINS: dict[str, Builtin] = {b.name: b for b in (
    Builtin("fedprox-figure2", "FedProx's Figure 2: FedAvg against FedProx as heterogeneity grows",
            BUILTINS_CLAIMS["fedprox-figure2"], "Li et al. (2020), Federated Optimization in Heterogeneous "
            "Networks, Figure 2", _fedprox, _judge_fedprox,
            "their protocol's length: 200 rounds, judged on 5 seeds (the small scale runs 40 rounds on 4)"),
    Builtin("dirichlet-sweep", "FedAvg, SCAFFOLD and FSVRG against Dirichlet α",
            BUILTINS_CLAIMS["dirichlet-sweep"], "Karimireddy et al. (2020), SCAFFOLD; Konečný et al. (2016), "
            "Section 3.6", _dirichlet, _judge_dirichlet,
            "the full sweep: α over 0.01, 0.1, 1, 10, 100, 30 iterations, 3 seeds (the small scale runs 3 values "
            "of α, 15 iterations, 2 seeds)"),
    Builtin("paper-figure2", "The paper's Figure 2 with seed bands and FSVRGR",
            BUILTINS_CLAIMS["paper-figure2"], "Konečný et al. (2016), Section 4.1, Figure 2", _figure2,
            _judge_figure2, PAPER_FIGURE2_SCALE),
)}


def builtin_for(experiment: Experiment) -> Builtin | None:
    """The built-in whose exact grid ``experiment`` is, at either scale, by content and not by name: a
    verdict judges only the grid it was written for (an experiment that shares a built-in's name
    and not its grid gets no verdict)."""
    if not isinstance(experiment, Experiment):
        raise ParameterError("experiment", type(experiment).__name__, "an Experiment")
    for b in BUILTINS.values():
        if b.scale_of(experiment) is not None:
            return b
    return None


__all__ = ["BUILTINS", "Builtin", "Check", "SCALES", "ShownVerdict", "Verdict", "builtin_for"]


# -- Personalisation gain against Dirichlet α (issue 23, point 5) -------------------------------------------
# A post-run hook, not a new cell kind: the grid's cells run FedAvg as any cell does (its pooled test error
# per α is in the history), and the personalised baselines — exact, so independent of any run — are
# computed per (setting, seed) from the cell's own data by fedviz.personal, when the verdict is asked for,
# and kept in this process (personal_cell's cache).
PERSONAL_ALPHAS = (0.1, 0.3, 1.0, 10.0, 1000.0)
#: Ditto's λ_D grid for the experiment: 0 (Local) to ∞ (w*) in decades, the best chosen on the worst 10%.
PERSONAL_LAMBDAS = (0.0, 1e-4, 1e-3, 1e-2, 0.1, 1.0, math.inf)
PERSONAL_CLAIM = ("personalisation pays most where labels are skewed: the best Ditto model's pooled test error "
                  "falls further below the global model's at small Dirichlet α than near IID, and Local alone "
                  "loses to the global model near IID (Li et al., 2021, Ditto; Hsu et al., 2019, Dirichlet α)")


def _personal_dirichlet(scale: str) -> Experiment:
    full = scale == "full"
    alphas = PERSONAL_ALPHAS if full else (0.1, 1.0, 1000.0)
    return Experiment(
        "personalisation-dirichlet" + ("" if full else "-small"),
        # deal_test: the preset's test rows stay with the generator's nodes, none of the 100 new ones; dealt
        # to them by class share, every node is scored (DataSpec.deal_test, seeded by the cell's data seed).
        DataSpec("preset:google-plus-small", partition="dirichlet:alpha=1", nodes=100, deal_test=True),
        (Arm.of("fedavg", label="FedAvg"),),
        (Axis.of("partition.alpha", alphas, name="Dirichlet α"),),
        seeds=tuple(range(3 if full else 2)), iterations=30 if full else 15, target=1e-3,
        description="google-plus-small split over 100 nodes by Dirichlet(α) over the labels, α from 0.1 (few "
                    "labels per node) to 1000 (IID): FedAvg's run, and per cell the global model w*, Local and "
                    "the best exact Ditto model scored node by node (pooled and worst-10% test error).",
        claim=PERSONAL_CLAIM)


_PERSONAL_CELLS: dict = {}


def personal_cell(problem, seed: int) -> dict[str, float]:
    """The personalised baselines of one cell (its :class:`~fedviz.runner.job.ProblemSpec` and seed):
    pooled and worst-10% test error of the per-node majority, w*, Local and the best Ditto, and that
    Ditto's λ_D, on the cell's data with its test rows dealt to the nodes (:attr:`DataSpec.deal_test
    <fedviz.data.build.DataSpec>`, set here too for a problem without it)."""
    from ..personal import PersonaliseConfig, personalise

    key = (problem, int(seed))
    if key not in _PERSONAL_CELLS:
        dealt = replace(problem, data=replace(problem.data, deal_test=True))  # a no-op on its grid
        report = personalise(dealt(),
                             PersonaliseConfig(lambdas=PERSONAL_LAMBDAS, methods=("majority", "global", "local",
                                                                                   "ditto")))
        out = {f"{m}_{k}": float(report.summaries[m][k]) for m in report.methods for k in ("pooled", "worst10")}
        out["ditto_lambda"] = float(report.ditto_lambda)
        _PERSONAL_CELLS[key] = out
    return dict(_PERSONAL_CELLS[key])


def personal_rows(r: Results) -> dict[tuple[int, ...], dict[str, float]]:
    """Per setting, the medians over seeds of :func:`personal_cell`'s values (``ditto_lambdas``: each
    seed's λ_D), and FedAvg's median final pooled test error (NaN without a complete cell)."""
    out = {}
    for setting in r.experiment.settings:
        cells = [personal_cell(r.experiment.problem(setting, seed), seed) for seed in r.experiment.seeds]
        row = {k: float(np.median([c[k] for c in cells])) for k in cells[0]}
        row["ditto_lambdas"] = tuple(c["ditto_lambda"] for c in cells)  # chosen per seed: a median is no grid value
        fed = r.summary("FedAvg", setting, "test_error") if "FedAvg" in r.arms else None
        row["fedavg_pooled"] = math.nan if fed is None else fed.median
        out[setting] = row
    return out


def _judge_personal(r: Results) -> tuple[Check, ...]:
    axis = r.experiment.axes[0]
    rows = personal_rows(r)
    settings = list(rows)
    lo, hi = settings[0], settings[-1]
    pct = lambda x: "—" if math.isnan(x) else f"{100 * x:.1f}%"  # noqa: E731
    # Medians over seeds; in brackets the worst-10% mean.
    table = "; ".join(
        f"α = {axis.labels[s[0]]}: w* {pct(v['global_pooled'])} (worst 10% {pct(v['global_worst10'])}), Local "
        f"{pct(v['local_pooled'])} ({pct(v['local_worst10'])}), Ditto (λ_D "
        f"{', '.join(f'{x:g}' for x in v['ditto_lambdas'])} by seed) "
        f"{pct(v['ditto_pooled'])} ({pct(v['ditto_worst10'])}), per-node majority {pct(v['majority_pooled'])}, "
        f"FedAvg {pct(v['fedavg_pooled'])}" for s, v in rows.items())
    gain = {s: v["global_pooled"] - v["ditto_pooled"] for s, v in rows.items()}
    a, b = axis.labels[lo[0]], axis.labels[hi[0]]
    return (
        Check(f"the best Ditto gains more over w* at α = {a} than at α = {b} (pooled test error, median over "
              "seeds)", gain[lo] > gain[hi] if _measured(gain[lo], gain[hi]) else None,
              f"gain {100 * gain[lo]:.1f} points at α = {a}, {100 * gain[hi]:.1f} at α = {b}; per α: {table}"),
        Check(f"at α = {a} the worst 10% of nodes fare better under the best Ditto than under w*",
              rows[lo]["ditto_worst10"] < rows[lo]["global_worst10"]
              if _measured(rows[lo]["ditto_worst10"], rows[lo]["global_worst10"]) else None,
              f"worst-10% mean: Ditto {pct(rows[lo]['ditto_worst10'])}, w* {pct(rows[lo]['global_worst10'])}"),
        Check(f"at α = {b} (near IID) Local alone is worse than w* (pooled)",
              rows[hi]["local_pooled"] > rows[hi]["global_pooled"]
              if _measured(rows[hi]["local_pooled"], rows[hi]["global_pooled"]) else None,
              f"Local {pct(rows[hi]['local_pooled'])}, w* {pct(rows[hi]['global_pooled'])}"),
    )


BUILTINS_CLAIMS["personalisation-dirichlet"] = PERSONAL_CLAIM
BUILTINS["personalisation-dirichlet"] = Builtin(
    "personalisation-dirichlet", "Personalisation gain against Dirichlet α", PERSONAL_CLAIM,
    "Li et al. (2021), Ditto; Hsu, Qi and Brown (2019), Dirichlet label skew", _personal_dirichlet,
    _judge_personal, "the full sweep: α over 0.1, 0.3, 1, 10, 1000, FedAvg for 30 iterations, 3 seeds (the small "
    "scale runs 0.1, 1 and 1000, 15 iterations, 2 seeds)")
