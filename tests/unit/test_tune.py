"""Tuning by pilot runs (fedviz.runner.tune): which hyperparameter, how the grid grows, what is excluded.

Oracles: GD on ridge regression has a closed form, f(w_T) − f* = ½ e_Tᵀ H e_T with
e_T = (I − hH)^T (w0 − w*), computed here from an eigendecomposition of H, independently
of fedviz's code; a scripted one-feature algorithm whose f − f* per iteration is written by
hand (the choice between a default and a candidate is then known without running anything);
on agaricus, the full-length runs of every pilot value.  The acceptance tests on a9a (its optimum
from tests/data/README.md): tests/integration/test_tune_a9a.py.
"""

import math

import numpy as np
import pytest
import scipy.sparse as sp

from conftest import DATA
from fedviz.algorithms import ALGORITHMS
from fedviz.algorithms.base import Algorithm, Param, StopRequested
from fedviz.data.build import DataSpec, build
from fedviz.data.dataset import FederatedDataset
from fedviz.errors import ParameterError
from fedviz.problems.objective import Problem
from fedviz.problems.optimum import solve
from fedviz.runner import iterate
from fedviz.runner import tune as tune_module
from fedviz.runner.tune import (FLOOR, NOT_TUNED, PILOT_SEEDS, PREFER, Pilot, TuneResult, pilot_iterations,
                                pilot_seeds, safer_side, tunable_params, tune, tuning_cap)


# -- which hyperparameter ---------------------------------------------------------------------------
def _step_like(p) -> bool:
    """Independent of tune's rule: a float whose name says it is a step or a quadratic weight."""
    return p.kind == "float" and any(w in p.name for w in ("step", "eta", "sigma", "lr", "learning_rate"))


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_every_step_like_hyperparameter_is_tuned_or_excused(name):
    """Walks the registry, so an algorithm added later is covered: each step-named float is tuned
    or listed in NOT_TUNED with a reason, and at most one is tuned."""
    cls = ALGORITHMS[name]
    tuned = tunable_params(cls)
    floats = {p.name for p in cls.params if p.kind == "float"}
    assert set(tuned) <= floats and len(tuned) <= 1
    for p in cls.params:
        if _step_like(p):
            assert p.name in tuned or NOT_TUNED.get((name, p.name)), f"{name}.{p.name} neither tuned nor excused"
    hint = cls.divergence_hint
    if tuned and hint is not None and hint[0] == tuned[0]:
        # The direction that the divergence message gives is the safer side of the grid.
        assert safer_side(cls, tuned[0]) == (1 if hint[1] == "raise" else -1)


def test_not_tuned_names_real_hyperparameters():
    for (name, param), reason in NOT_TUNED.items():
        assert param in {p.name for p in ALGORITHMS[name].params} and reason


def test_the_paper_line_up_tunes_its_steps():
    assert tunable_params(ALGORITHMS["fsvrg"]) == ("stepsize",)
    assert tunable_params(ALGORITHMS["gd"]) == ("stepsize",)
    assert tunable_params(ALGORITHMS["cocoa-plus"]) == ("sigma_prime",)
    assert tunable_params(ALGORITHMS["one-shot"]) == ()


# -- the search, against GD's closed form on ridge regression ----------------------------------------
#: GD with fixed steps, whose final gap on a quadratic has a closed form (the default's Barzilai–Borwein
#: steps do not).
FIXED = {"steps": "fixed"}


@pytest.fixture(scope="module")
def ridge():
    ds = build(DataSpec(source=str(DATA / "heart_scale"), nodes=5, test_fraction=0, task="regression"))
    problem = Problem(ds, "squared", 1e-3)
    X = ds.X.toarray()
    H = X.T @ X / ds.n + problem.lam * np.eye(ds.d)
    w_star = np.linalg.solve(H, X.T @ ds.y / ds.n)
    f_star = 0.5 * np.mean((X @ w_star - ds.y) ** 2) + 0.5 * problem.lam * w_star @ w_star
    evals, evecs = np.linalg.eigh(H)
    c = evecs.T @ (0 - w_star)

    def gap(h, T):
        """f(w_T) − f* of GD with step h from w0 = 0, in closed form."""
        return 0.5 * float(np.sum(evals * ((1 - h * evals) ** (2 * T)) * c * c))

    return problem, f_star, gap, evals.max()


def _geomean(values):
    return math.exp(np.mean(np.log(values)))


def test_pilot_scores_match_the_closed_form_and_the_best_one_is_chosen(ridge):
    """Each pilot's final and score (f − f* at iteration 30, the run's length: what the run is judged on)
    from the closed form; the choice is the lowest score among the default and the values that beat it
    by PREFER in score (GD is deterministic: one pilot seed, so 'on every seed' adds nothing)."""
    problem, f_star, gap, _ = ridge
    result = tune(problem, "gd", FIXED, iterations=30, seed=0, f_star=f_star)
    assert result.param == "stepsize" and result.pilots and result.seconds > 0
    ok = [p for p in result.pilots if p.status == "ok"]
    for p in ok:
        assert p.final == pytest.approx(gap(p.value, 30), rel=1e-6, abs=1e-12)
        assert p.score == pytest.approx(max(gap(p.value, 30), FLOOR), rel=1e-6)
    default = 1 / problem.smoothness

    def clearly(v):
        return max(gap(v, 30), FLOOR) * PREFER <= max(gap(default, 30), FLOOR)

    eligible = [p for p in ok if p.value == pytest.approx(default, rel=1e-12) or clearly(p.value)]
    oracle_best = min(eligible, key=lambda p: (max(gap(p.value, 30), FLOOR), abs(math.log(p.value / default))))
    assert result.value == oracle_best.value and result.hyper == {**FIXED, "stepsize": result.value}
    assert not result.edge
    assert ("lowest final f − f* (its mean over the pilot seeds) of 30-iteration pilots (the run's length)"
            in result.criterion)
    assert f"beats it by {PREFER:g}× in that mean and on every pilot seed" in result.criterion
    assert len(result.seeds) == 1 and result.seeds[0] != 0  # deterministic: one seed, not the run's
    # The default ran on a second seed too (identical curve: deterministic); GD takes one round per
    # iteration, so that run's 30 rounds join the pilots' own.
    assert result.runs == len(result.pilots) + 1 and "+ 1 to find it deterministic" in result.cost()
    assert result.rounds == sum(p.rounds for p in result.pilots) + 30 and result.run_rounds == 30
    kept = result.value == pytest.approx(default, rel=1e-12)
    assert result.kept_default == kept  # the label says whether the pilots moved the value
    assert result.label("GD") == f"GD (stepsize {result.value:.3g}, {'tuned, default kept' if kept else 'tuned'})"


@pytest.mark.parametrize("iterations, length", [(0, 0), (1, 1), (12, 12), (30, 30), (100, 100), (101, 100),
                                               (300, 100)])
def test_pilots_grow_with_the_run(iterations, length):
    assert pilot_iterations(iterations) == length


def test_a_run_longer_than_the_longest_pilot_is_judged_at_the_pilots_end(ridge):
    problem, f_star, gap, _ = ridge
    result = tune(problem, "gd", FIXED, iterations=300, seed=0, f_star=f_star)
    for p in result.pilots:
        if p.status == "ok":
            assert p.final == pytest.approx(gap(p.value, 100), rel=1e-6, abs=1e-12)
            assert p.score == pytest.approx(max(gap(p.value, 100), FLOOR), rel=1e-6)
    assert "of 100-iteration pilots (the run's first 100)" in result.criterion


# -- the default is kept unless beaten clearly: a scripted algorithm ----------------------------------
LAM = 1e-3


def _base_gap(t):
    return 0.3 * 0.8 ** t


class _Scripted(Algorithm):
    """One feature, y = 1, squared loss: f(w) − f* = ½(1 + λ)(w − w*)², w* = 1/(1 + λ).  Each step
    puts w where f − f* is ``script(h, t)``: the curve of every step h is written by hand."""

    name = "scripted"
    title = "Scripted"
    divergence_hint = ("stepsize", "lower")
    params = (Param("stepsize", "float", 1.0, "step", low=0),)
    script = None

    def _step(self):
        t = self.iteration + 1
        gap = type(self).script(self.hp["stepsize"], t, self.seed)
        self.w = np.array([1 / (1 + LAM) + math.sqrt(2 * gap / (1 + LAM))])


def _scripted_problem():
    X = sp.csr_matrix(np.ones((40, 1)))
    return Problem(FederatedDataset.from_assignment(X, np.ones(40), np.arange(40) % 4), "squared", LAM)


def _tune_scripted(monkeypatch, candidate):
    """h = 4 follows ``candidate(t)`` (or ``candidate(t, seed)``), h = 1 (the default) the base curve,
    every other h twice it."""
    seeded = candidate.__code__.co_argcount == 2

    def script(h, t, seed):
        if math.isclose(h, 4.0):
            return candidate(t, seed) if seeded else candidate(t)
        return _base_gap(t) * (1 if math.isclose(h, 1.0) else 2) * (1 + 1e-3 * (seed % 7) if seeded else 1)

    monkeypatch.setattr(_Scripted, "script", staticmethod(script))
    monkeypatch.setattr(tune_module, "get_algorithm", lambda name: _Scripted)
    f_star = 0.5 * LAM / (1 + LAM)  # min_w ½(w − 1)² + ½λw²
    return tune(_scripted_problem(), "scripted", iterations=30, seed=0, f_star=f_star)


def test_a_candidate_ahead_at_every_pilot_iteration_by_a_factor_is_chosen(monkeypatch):
    result = _tune_scripted(monkeypatch, lambda t: _base_gap(t) / 3)
    assert result.value == pytest.approx(4.0)
    by_value = {round(p.value, 9): p for p in result.pilots}
    assert by_value[4.0].final == pytest.approx(_base_gap(30) / 3, rel=1e-6)
    assert by_value[4.0].score == pytest.approx(_base_gap(30) / 3, rel=1e-6)


def test_a_candidate_ahead_until_the_last_iteration_but_behind_there_does_not_replace_the_default(monkeypatch):
    """3× ahead at every iteration but the last, 1.1× behind there: the run is judged on its last record,
    so the pilots are too (a window's geometric mean, the criterion before, would have moved)."""
    result = _tune_scripted(monkeypatch, lambda t: _base_gap(t) * (1.1 if t == 30 else 1 / 3))
    assert result.value == pytest.approx(1.0)
    result = _tune_scripted(monkeypatch, lambda t: _base_gap(t) * (1.1 if t == 29 else 1 / 3))
    assert result.value == pytest.approx(4.0) and result.tuned  # behind before the end: no matter


def _seeded_candidate(loser):
    """3× ahead of the default on every pilot seed except ``loser`` (None: none), where 1.2× behind."""
    def candidate(t, seed):
        return _base_gap(t) * (1.2 if seed == loser else 1 / 3)
    return candidate


def test_a_stochastic_candidate_must_win_on_every_pilot_seed(monkeypatch):
    """The scripted curves depend on the seed (a stochastic method: PILOT_SEEDS seeds, none the
    run's).  3× ahead on every seed: chosen.  Ahead by more than PREFER on the mean over seeds but
    behind on one seed: the default stays (one seed's luck is no gain)."""
    seeds = pilot_seeds(0)
    assert len(seeds) == PILOT_SEEDS == 3
    result = _tune_scripted(monkeypatch, _seeded_candidate(None))
    assert result.value == pytest.approx(4.0) and result.seeds == seeds
    result = _tune_scripted(monkeypatch, _seeded_candidate(seeds[1]))
    four = next(p for p in result.pilots if math.isclose(p.value, 4.0))
    one = next(p for p in result.pilots if math.isclose(p.value, 1.0))
    assert four.score * PREFER <= one.score  # the mean over seeds alone would move
    assert result.value == pytest.approx(1.0) and result.seeds == seeds


def test_a_candidate_ahead_by_less_than_the_factor_does_not_replace_the_default(monkeypatch):
    result = _tune_scripted(monkeypatch, lambda t: _base_gap(t) / 1.3)
    assert 1.3 < PREFER and result.value == pytest.approx(1.0)


def test_diverging_pilots_are_excluded(ridge):
    """Steps beyond 2/λ_max(H) make GD diverge on a quadratic: such pilots are never chosen."""
    problem, f_star, gap, lmax = ridge
    result = tune(problem, "gd", FIXED, iterations=30, seed=0, f_star=f_star)
    unstable = [p for p in result.pilots if p.value > 2.05 / lmax]
    assert unstable and all(p.status != "ok" for p in unstable if gap(p.value, 30) > gap(0, 0))
    assert result.value < 2 / lmax


def test_a_far_default_grows_the_grid_until_the_best_is_inside(ridge):
    problem, f_star, gap, lmax = ridge
    start = 1e-3 / lmax  # 2000 times below the stable limit
    result = tune(problem, "gd", {**FIXED, "stepsize": start}, iterations=30, seed=0, f_star=f_star)
    values = sorted(p.value for p in result.pilots)
    assert not result.edge and values[0] == pytest.approx(start / 4)
    # Interior: a tried value above the winner is worse or excluded.
    assert any(v > result.value for v in values)
    # The closed form's best step for 30 iterations lies within one refined grid step (× 2) of the choice.
    grid = np.geomspace(start, 2 / lmax, 4000)
    h_best = grid[np.argmin([gap(h, 30) for h in grid])]
    assert h_best / 2 <= result.value <= h_best * 2


def test_the_edge_is_flagged_when_extensions_run_out(ridge, monkeypatch):
    problem, f_star, _, lmax = ridge
    # 3 extensions reach 4⁴ = 256 × the start: far better than the start, still short of the best step.
    monkeypatch.setattr(tune_module, "MAX_EXTENSIONS", 3)
    result = tune(problem, "gd", {**FIXED, "stepsize": 1e-3 / lmax}, iterations=30, seed=0, f_star=f_star)
    assert result.edge and result.label("GD").endswith("tuned, at grid edge)")
    assert result.value == max(p.value for p in result.pilots if p.status == "ok")


def test_nothing_to_tune_and_bad_arguments(ridge):
    problem, f_star, _, _ = ridge
    r = tune(problem, "one-shot", iterations=5, f_star=f_star)
    assert (r.param, r.value, r.pilots, r.edge, r.label("One-shot")) == (None, None, (), False, "One-shot")
    with pytest.raises(ParameterError, match="iterations"):
        tune(problem, "gd", iterations=-1, f_star=f_star)
    with pytest.raises(ParameterError, match="gd.step"):
        tune(problem, "gd", {"step": 1.0}, iterations=5, f_star=f_star)
    with pytest.raises(ParameterError, match="f_star"):
        tune(problem, "gd", iterations=5, f_star=math.nan)


def test_stop_ends_tuning(ridge):
    problem, f_star, _, _ = ridge
    with pytest.raises(StopRequested):
        tune(problem, "gd", iterations=30, f_star=f_star, stop=lambda: True)


def test_result_types_are_frozen():
    r = TuneResult("gd", "stepsize", 1.0, {"stepsize": 1.0}, "c", (Pilot(1.0, 0.1, "ok"),), 0.0, False)
    with pytest.raises(AttributeError):
        r.value = 2.0


# -- real data ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def agaricus():
    ds = build(DataSpec(source=str(DATA / "agaricus_zero_based.train"),
                        test=str(DATA / "agaricus_zero_based.test"), partition="dirichlet:alpha=0.5",
                        nodes=100, seed=0))
    problem = Problem(ds, "logistic", None)
    return problem, solve(problem).objective


@pytest.mark.parametrize("name", ["fsvrg", "gd"])
def test_the_pilot_choice_also_does_well_at_full_length(agaricus, name):
    """Every pilot value run the full 30 iterations on the run's seed (the pilots ran on others): the
    choice is within 3× of the best healthy result, and no worse than the default."""
    problem, f_star = agaricus
    result = tune(problem, name, iterations=30, seed=0, f_star=f_star)
    full = {}
    for p in result.pilots:
        recs = list(iterate(problem, name, iterations=30, hyper={"stepsize": p.value}, f_star=f_star))
        if recs[-1].status == "done" and not recs[-1].message:
            full[p.value] = recs[-1].suboptimality
    default = list(iterate(problem, name, iterations=30, f_star=f_star))[-1].suboptimality
    assert full[result.value] <= 3 * min(full.values())
    assert full[result.value] <= default


def test_zero_iterations_runs_no_pilot(ridge):
    problem, f_star, _, _ = ridge
    r = tune(problem, "gd", iterations=0, f_star=f_star)
    assert r.pilots == () and not r.tuned and r.label("GD").endswith(", default)")
    assert r.criterion == "no pilot runs: the run has 0 iterations"
    assert r.value == pytest.approx(1 / problem.smoothness)  # GD's documented default 1/L


# -- the pilots' seeds, cost and σ' cap ----------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 7, 2**32 - 1])
def test_pilot_seeds_are_derived_from_the_run_seed_and_never_equal_it(seed):
    seeds = pilot_seeds(seed)
    assert seeds == pilot_seeds(seed)  # deterministic
    assert len(set(seeds)) == PILOT_SEEDS and seed not in seeds
    assert all(0 <= s < 2**32 for s in seeds)
    assert pilot_seeds(seed) != pilot_seeds(seed + 1)


def test_pilots_never_run_on_the_run_seed_and_their_rounds_are_counted(agaricus, monkeypatch):
    """Every pilot run of FSVRG (stochastic: 3 seeds) is recorded: none on the run's seed, each
    value on all pilot seeds, and TuneResult.rounds is the sum of their rounds.  FSVRG communicates
    twice per iteration (Algorithm 4: the full gradient, then the average of the local updates),
    so a 30-iteration run takes 60 rounds."""
    problem, f_star = agaricus
    calls = []
    real = tune_module.iterate

    def spy(*args, **kwargs):
        recs = list(real(*args, **kwargs))
        calls.append((kwargs["seed"], kwargs["hyper"]["stepsize"], recs[-1].rounds))
        return iter(recs)

    monkeypatch.setattr(tune_module, "iterate", spy)
    result = tune(problem, "fsvrg", iterations=30, seed=5, f_star=f_star)
    assert result.seeds == pilot_seeds(5) and 5 not in {s for s, _, _ in calls}
    assert len(calls) == result.runs == len(result.pilots) * PILOT_SEEDS
    assert result.rounds == sum(r for _, _, r in calls) == sum(p.rounds for p in result.pilots)
    assert result.run_rounds == 60
    assert result.cost() == (f"{len(calls)} pilot runs ({len(result.pilots)} values × seeds "
                             f"{', '.join(map(str, result.seeds))}): {result.rounds} rounds in "
                             f"{result.seconds:.2f} s, against the run's 60 rounds")


@pytest.fixture(scope="module")
def agaricus20():
    ds = build(DataSpec(source=str(DATA / "agaricus_zero_based.train"), nodes=20, seed=0, test_fraction=0))
    problem = Problem(ds, "logistic", None)
    return problem, solve(problem).objective


def test_sigma_prime_above_the_safe_value_only_slows(agaricus20):
    """Why tuning caps σ' at γK: CoCoA+ at σ' = K, 2K, 4K, 8K on agaricus over 20 nodes; on each of
    three seeds the geometric mean of f − f* over iterations 10–20 grows with σ' (a larger σ' damps
    every local step more)."""
    problem, f_star = agaricus20
    K = problem.data.n_nodes
    for seed in (0, 1, 2):
        scores = []
        for sigma in (K, 2 * K, 4 * K, 8 * K):
            recs = list(iterate(problem, "cocoa-plus", iterations=20, hyper={"sigma_prime": float(sigma)},
                                seed=seed, f_star=f_star))
            scores.append(_geomean([r.suboptimality for r in recs[10:]]))
        assert scores == sorted(scores) and scores[0] < scores[1], (seed, scores)


@pytest.mark.parametrize("name, cap", [("cocoa-plus", "K"), ("cocoa", 1.0)])
def test_tuning_never_tries_sigma_prime_above_the_safe_value(agaricus20, name, cap):
    problem, f_star = agaricus20
    K = problem.data.n_nodes
    cap = float(K) if cap == "K" else cap
    assert tuning_cap(ALGORITHMS[name], problem, {}, "sigma_prime") == cap
    assert tuning_cap(ALGORITHMS[name], problem, {"sigma_prime": 50.0}, "sigma_prime") == cap
    result = tune(problem, name, iterations=15, seed=0, f_star=f_star)
    assert result.pilots and max(p.value for p in result.pilots) <= cap * (1 + 1e-9)
    assert result.value <= cap * (1 + 1e-9)
    assert f"at most the safe {cap:.4g}: larger only slows" in result.criterion
    assert tuning_cap(ALGORITHMS["gd"], problem, {}, "stepsize") is None


def test_the_rule_is_one_for_every_algorithm_and_the_grid_each_one_s(agaricus20):
    """A page says the rule once (issue 20: the 70-word paragraph repeated for each tuned algorithm) and
    each algorithm's grid beside it: the criterion is the rule with the algorithm's grid in its place."""
    problem, f_star = agaricus20
    results = [tune(problem, name, iterations=12, seed=0, f_star=f_star) for name in ("gd", "cocoa-plus")]
    assert results[0].rule == results[1].rule and "each algorithm's grid" in results[0].rule
    for r in results:
        assert r.grid.startswith(f"{r.param} = ") and r.grid in r.criterion
        assert r.criterion == r.rule.replace(
            "each algorithm's grid (its default × 4^k, below its safe value where it has one)", r.grid)
    assert "at most the safe" in results[1].grid and "at most the safe" not in results[0].grid
