"""Run health: :func:`fedviz.runner.health.assess` on curves whose verdict is known by
construction, the loop's honest end states, the divergence hints of every registered algorithm,
and SCAFFOLD's derived local step against a dense computation of max_k L_k.  The verdicts pinned
on real runs (GD ×4's cycle on google-plus-small, FSVRG's converging wiggle, FedAvg's
client-sampling swings on a9a): tests/integration/test_health_real_runs.py."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st_
import scipy.sparse as sp

from fedviz.algorithms import ALGORITHMS
from fedviz.algorithms.base import HINT_DIRECTIONS, Algorithm, Param
from fedviz.algorithms.scaffold import Scaffold
from fedviz.data.dataset import FederatedDataset
from fedviz.data.presets import make_preset
from fedviz.problems.objective import Problem
from fedviz.runner import iterate
from fedviz.runner.health import WINDOW, Verdict, Watch, assess


# ---------------------------------------------------------------------------------------------
# assess on synthetic curves
# ---------------------------------------------------------------------------------------------

F_STAR = 0.3


def test_geometric_decrease_is_ok():
    curve = [F_STAR + 0.39 * 0.7 ** t for t in range(40)]
    assert assess(curve, F_STAR) == Verdict("ok", "")
    assert assess(curve).status == "ok"


def test_alternating_ten_percent_around_a_plateau_is_oscillating():
    level = 0.1
    curve = [math.log(2)] + [F_STAR + level * (1 + 0.1 * (-1) ** t) for t in range(20)]
    v = assess(curve, F_STAR)
    assert v.status == "oscillating" and v.reason
    # Without f*, f0 − best stands in for the level: still well above 5% here.
    assert assess(curve).status == "oscillating"


def test_a_zig_zag_that_converges_is_ok():
    """Period-2 wiggle of ±30% while the level halves every 2 iterations: steady progress."""
    curve = [F_STAR + 0.4 * 0.7 ** t * (1 + 0.3 * (-1) ** t) for t in range(30)]
    assert assess(curve, F_STAR).status == "ok"


def test_random_noise_is_rarely_a_zig_zag():
    """A noisy plateau (SGD's noise floor) is not a period-2 zig-zag: over many seeded
    plateaus with noise of 10% of the level, few are called oscillating (about 2%, see
    ALTERNATIONS), where a rule of "6 of 7 sign changes" called 16%."""
    rng = np.random.default_rng(0)
    hits = sum(assess([0.69] + list(F_STAR + 0.1 + 0.01 * rng.normal(size=12)), F_STAR).status
               == "oscillating" for _ in range(2000))
    assert hits / 2000 < 0.05


@pytest.mark.parametrize("factor", [400.0, 11.5])
def test_without_f_star_a_climb_above_ten_starting_values_is_diverged(factor):
    """No f*: the scale is |f0| (an upper bound of the gap f0 − f* for these non-negative losses)."""
    f0 = math.log(2)
    curve = [f0, 0.61, 0.9, 5.0, f0 * factor]
    v = assess(curve)
    assert v.status == "diverged" and f"{f0 * factor:.4g}" in v.reason and v.iteration == 4


def test_with_f_star_the_climb_is_measured_in_gaps_f0_minus_f_star():
    """With f* the bar is f0 + 10 (f0 − f*): 10.5 gaps above the start is divergence at that
    iteration, 9.5 gaps is not (mid-run); |f0| = log 2 would have allowed 17.6 gaps here."""
    f0 = math.log(2)
    gap = f0 - F_STAR
    high = [f0, 0.5, f0 + 10.5 * gap, 0.45]
    v = assess(high, F_STAR, ended=False)
    assert v.status == "diverged" and v.iteration == 2
    assert f"to {10.5 * gap + gap:.4g}" in v.reason and f"from {gap:.4g} at the start" in v.reason
    assert assess(high, ended=False).ok                     # without f*: under the |f0| bar
    assert assess([f0, 0.5, f0 + 9.5 * gap, 0.45], F_STAR, ended=False).ok
    # The whole-curve verdict agrees: the peak is a transient the run came back from.
    assert assess([f0, 0.5, f0 + 9.5 * gap] + [F_STAR + 0.1 * 0.8 ** t for t in range(20)], F_STAR).ok


def test_the_dane_case_of_the_brief_is_diverged():
    # μ = 0 DANE on non-IID data: f − f* = 297 from f(w0) = log 2.
    assert assess([math.log(2), 0.61, 3.0, 297.0 + F_STAR], F_STAR).status == "diverged"


def test_a_climb_below_ten_starting_values_is_not_diverged_mid_run():
    """9 f0 is under the bar of no-f* |f0| scaling: the run goes on.  Ending there, above its
    start, it is diverged at the end (the end rule); coming back down, it is ok."""
    f0 = math.log(2)
    assert assess([f0, 0.5, 0.4, f0 * 9.0], ended=False).ok
    v = assess([f0, 0.5, f0 * 9.0, f0 * 9.0, f0 * 8.0, f0 * 9.0, f0 * 8.0, f0 * 9.0, f0 * 8.0])
    assert v.status == "diverged" and v.iteration is None and "ends above its start" in v.reason
    # Shorter than WINDOW iterations: too short to call a trend, said as a warning.
    v = assess([f0, 0.5, f0 * 9.0, f0 * 9.0, f0 * 8.0])
    assert v.status == "ok" and "ends above its start" in v.warning
    assert assess([f0, 0.5, 0.4, f0 * 9.0, 0.35, 0.3, 0.31, 0.3]).ok


# -- the end rules: never below the start, ends clearly above it -------------------------------------

@pytest.mark.parametrize("f_star", [None, F_STAR])
def test_a_run_that_never_gets_below_its_start_is_diverged_or_warned_and_the_reason_reads_the_curve(f_star):
    """Every iterate above the start: diverged when the last quarter's median (at least 8 values) lies
    more than half the scale above it and the run has at least WINDOW iterations, else ok with a
    warning; both cite start, lowest and last."""
    rng = np.random.default_rng(5)
    f0 = math.log(2)
    scale = f0 - F_STAR if f_star is not None else f0     # max(|f0|, f0 − best) = |f0| here
    seen = set()
    for _ in range(60):
        curve = [f0] + list(f0 + rng.uniform(0.001, 1.2 * scale, size=int(rng.integers(1, 40))))
        v = assess(curve, f_star)
        arr = np.asarray(curve)
        k = min(len(arr) - 1, max(8, math.ceil(0.25 * (len(arr) - 1))))
        above = np.median(arr[-k:]) > f0 + 0.5 * scale and len(arr) >= WINDOW + 1  # the oracle of the rule
        low = 1 + int(np.argmin(arr[1:]))
        shift = 0.0 if f_star is None else f_star
        text = v.reason if above else v.warning
        assert (v.status, v.iteration) == (("diverged", None) if above else ("ok", None)), (curve, v)
        assert f"never got below its start {f0:.4g} in {len(curve) - 1} iterations" in text
        assert f"lowest {arr[low] - shift:.4g} at iteration {low}" in text and f"last {arr[-1] - shift:.4g}" in text
        seen.add(bool(above))
    assert seen == {True, False}


def test_a_flat_curve_and_rounding_above_the_start_are_not_a_climb():
    f0 = math.log(2)
    assert assess([f0] * 12, F_STAR).ok
    assert assess([f0] + [f0 * (1 + 1e-12)] * 11, F_STAR).ok


@pytest.mark.parametrize("f_star", [None, F_STAR])
def test_ends_clearly_above_its_start_compares_the_tails_median_with_half_the_scale(f_star):
    """Dips, then hovers above the start: the median of the last quarter (at least 8 values) against
    f0 + 0.5 · scale, scale = f0 − f* with f*, else max(|f0|, f0 − best)."""
    f0 = math.log(2)
    best = 0.45
    scale = f0 - F_STAR if f_star is not None else max(abs(f0), f0 - best)
    bar = f0 + 0.5 * scale
    for level, expected, length in ((bar * 1.02, "diverged", 40), (bar * 0.98, "ok", 40), (bar * 1.02, "diverged", 12)):
        rng = np.random.default_rng(6)
        curve = [f0, best] + list(level + 0.002 * rng.standard_normal(length))
        k = max(8, math.ceil(0.25 * (len(curve) - 1)))
        assert (np.median(curve[-k:]) > bar) == (expected == "diverged")  # the oracle of the rule
        v = assess(curve, f_star)
        assert v.status == expected, (level, v)
        if expected == "diverged":
            assert f"the median of its last {k} values is {np.median(curve[-k:]):.4g}" in v.reason


def test_a_noisy_run_ending_on_a_spike_is_not_diverged():
    """FedAvg with 5% of nodes on google-plus-small ends at f − f* 0.95 from a start 0.24, the rest
    of its tail near 0.13: one round's sample, not where the run is."""
    gaps = [0.24] + [0.13 + 0.01 * (t % 3) for t in range(30)] + [0.95]
    assert assess([F_STAR + g for g in gaps], F_STAR).ok


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_is_diverged(bad):
    v = assess([0.69, 0.5, bad])
    assert v.status == "diverged" and "iteration 2" in v.reason


def test_rounding_noise_at_the_optimum_is_ok():
    """f − f* ≈ 1e-13 jittering in sign every iteration: rounding, not oscillation."""
    rng = np.random.default_rng(1)
    tail = F_STAR + 1e-13 * (1 + 0.5 * (-1) ** np.arange(20)) + 1e-14 * rng.random(20)
    curve = [math.log(2)] + [F_STAR + 0.1 * 0.1 ** t for t in range(12)] + list(tail)
    assert assess(curve, F_STAR).status == "ok"
    assert assess(curve).status == "ok"


def test_short_and_empty_curves_are_ok():
    assert assess([]).status == "ok"
    assert assess([0.69, 0.7, 0.6, 0.7, 0.6]).status == "ok"


def test_scale_does_not_change_the_verdict():
    """Ridge regression on unnormalised labels: every objective ×1e4 — same verdicts."""
    base = [math.log(2)] + [F_STAR + 0.1 * (1 + 0.1 * (-1) ** t) for t in range(20)]
    for curve in (base, [F_STAR + 0.39 * 0.7 ** t for t in range(40)], [0.69, 0.5, 300.0]):
        assert assess([1e4 * f for f in curve], 1e4 * F_STAR).status == assess(curve, F_STAR).status


# -- relapses: cycles longer than period 2 ----------------------------------------------------------

#: One period of GD ×4's cycle on google-plus-small (f − f*), from a start of 0.225.
CYCLE = [0.12, 0.16, 0.3, 0.7, 1.6]


def _gaps_to_curve(gaps):
    return [F_STAR + g for g in gaps]


def test_a_period_five_cycle_above_the_start_is_oscillating_even_ending_on_its_lowest_value():
    gaps = [0.225] + CYCLE * 6
    gaps[-1] = 0.115  # the last value is the lowest of all, as GD ×4's is
    v = assess(_gaps_to_curve(gaps), F_STAR)
    assert v.status == "oscillating" and "relapsed to 1.6 after reaching 0.12, above its start 0.225" in v.reason
    assert assess(_gaps_to_curve(gaps)).status == "oscillating"  # without f*: f − best, same verdict
    # The period-2 test alone misses it: no window of 8 differences alternates in sign.
    assert "zig-zags" not in assess(_gaps_to_curve(gaps), F_STAR).reason
    # Counted in the later half (iterations 15–30), a run of consecutive relapses once: 1.6 at 15;
    # 0.7, 1.6 at 19–20 and 24–25 (0.7 is above the start and 4 × 0.12 too); 0.7 at 29.
    assert "(4 times, 6 of the last 16 iterations)" in assess(_gaps_to_curve(gaps), F_STAR).reason


def test_one_relapse_is_not_enough_nor_are_rare_spikes():
    """A single excursion above the start (a transient) is not an unstable run; nor are two
    one-iteration spikes in 16 (12.5% of the later half: sampling noise, below RELAPSE_SHARE).
    Relapses in 4 of the 16 iterations (25%) are."""
    gaps = [0.225] + [0.2 * 0.8 ** t for t in range(30)]
    gaps[25] = 1.0
    assert assess(_gaps_to_curve(gaps), F_STAR).status == "ok"
    gaps[20] = 1.0  # a second, separate one
    assert assess(_gaps_to_curve(gaps), F_STAR).status == "ok"
    gaps[21] = gaps[26] = 1.0  # each relapse two iterations long: 4 of 16
    v = assess(_gaps_to_curve(gaps), F_STAR)
    assert v.status == "oscillating" and "(2 times, 4 of the last 16 iterations)" in v.reason


def test_swings_below_the_start_are_sampling_noise_not_relapses():
    """FedAvg-like: f − f* jumps between 0.014 and 0.24 (17×) at random, but never back above
    the start 0.37, so the run is ok; the same swings reaching 1.4 > 0.37 in a quarter of the
    later half are not."""
    rng = np.random.default_rng(3)
    verdicts = []
    for _ in range(200):
        gaps = [0.37] + list(np.exp(rng.uniform(np.log(0.014), np.log(0.24), size=30)))
        verdicts.append(assess(_gaps_to_curve(gaps), F_STAR))
    # None relapses; the rare one called oscillating is a chance period-2 zig-zag of the last window.
    assert not any("relapsed" in v.reason for v in verdicts)
    assert sum(v.ok for v in verdicts) >= 0.95 * len(verdicts)
    gaps = [0.37] + list(np.exp(rng.uniform(np.log(0.014), np.log(0.24), size=30)))
    gaps[18] = gaps[24] = 1.4
    assert assess(_gaps_to_curve(gaps), F_STAR).ok  # two spikes in 16: noise (12.5%)
    gaps[20] = gaps[28] = 1.4
    assert assess(_gaps_to_curve(gaps), F_STAR).status == "oscillating"  # four: 25%


def test_noisy_but_converging_curves_are_ok():
    """Geometric decrease times noise of up to 3× either way: relapses relative to the best so far,
    but never above the start."""
    rng = np.random.default_rng(4)
    verdicts = []
    for _ in range(200):
        gaps = 0.3 * 0.85 ** np.arange(40) * np.exp(rng.uniform(-np.log(3), np.log(3), size=40))
        gaps[0] = 0.4
        verdicts.append(assess(_gaps_to_curve(gaps), F_STAR))
    assert not any("relapsed" in v.reason for v in verdicts)
    assert sum(v.ok for v in verdicts) >= 0.95 * len(verdicts)


def test_relapses_too_small_against_the_best_are_not_counted():
    """A run that made little progress (best 0.2 from 0.225) cycling just above its start is not
    relapsing: its peaks are not 4× the best.  The same cycle from a best of 0.05 is."""
    assert assess(_gaps_to_curve([0.225] + [0.2, 0.21, 0.24] * 8), F_STAR).status == "ok"
    assert assess(_gaps_to_curve([0.225] + [0.05, 0.1, 0.24] * 8), F_STAR).status == "oscillating"


def test_a_zig_zag_whose_envelopes_both_fall_is_ok():
    """FSVRG's wiggle: ±30% around a level that falls 3% per turn (not the quarter step the
    first progress test asks for); the same wiggle around a constant level is oscillating."""
    falling = [math.log(2)] + [F_STAR + 0.01 * 0.97 ** t * (1 + 0.3 * (-1) ** t) for t in range(30)]
    flat = [math.log(2)] + [F_STAR + 0.01 * (1 + 0.3 * (-1) ** t) for t in range(30)]
    assert assess(falling, F_STAR).status == "ok"
    assert assess(flat, F_STAR).status == "oscillating"
    # A wiggle falling too slowly (0.3% per iteration: 2.4% over the window) is not steady progress.
    slow = [math.log(2)] + [F_STAR + 0.01 * 0.997 ** t * (1 + 0.3 * (-1) ** t) for t in range(30)]
    assert assess(slow, F_STAR).status == "oscillating"


# ---------------------------------------------------------------------------------------------
# The loop's end states
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dane_problem():
    """Li et al.'s Synthetic(1, 1) on 10 devices of ~30 rows: so few rows per node that with
    λ = 1/n a node's own minimiser is far from w*; DANE with μ = 0 overshoots at once."""
    ds = make_preset("fedprox-synthetic-binary", n_nodes=10, size_log_mean=2, size_log_sigma=0.5, size_offset=20)
    return Problem(ds, "logistic")


def test_dane_without_mu_diverges_and_the_hint_says_raise_mu(dane_problem):
    # Algorithm 2 as printed (the safeguard off): the paper's μ = 0, fixed.
    recs = list(iterate(dane_problem, "dane", iterations=10, hyper={"mu": 0.0, "safeguard": False, "local_tol": 1e-6}))
    last = recs[-1]
    assert last.status == "diverged" and last.iteration < 10
    assert last.message.endswith("raise mu (now 0)")
    # The hint names the right direction: the paper's remedy (Section 3.4) cures it, and
    # lowering η, which the old hint advised, does not.
    cured = list(iterate(dane_problem, "dane", iterations=10, hyper={"mu": 10.0, "safeguard": False,
                                                                       "local_tol": 1e-6}))
    assert cured[-1].status == "done" and cured[-1].objective < cured[0].objective
    lower_eta = list(iterate(dane_problem, "dane", iterations=10,
                             hyper={"mu": 0.0, "eta": 0.5, "safeguard": False, "local_tol": 1e-6}))
    assert lower_eta[-1].status == "diverged"
    # The default, whose safeguard raises μ after a rising step, does not diverge, and its f never rises.
    default = list(iterate(dane_problem, "dane", iterations=10, hyper={"local_tol": 1e-6}))
    f = [r.objective for r in default]
    assert default[-1].status == "done" and f[-1] < f[0] and all(b <= a for a, b in zip(f, f[1:]))


def test_gd_with_too_large_a_step_diverges_at_the_climb_and_says_lower_stepsize(dane_problem):
    """GD with fixed steps (the safeguarded default drops a rising step).  2/L is its stability limit on a quadratic: at 50/L the error along the Hessian's top eigenvector is
    multiplied by |1 − 50| = 49 every iteration, so the objective grows geometrically whatever the last bits,
    and the run ends long before 200.  (Not the logistic loss: its gradient is bounded, so 50/L there makes a
    chaotic, bounded oscillation whose verdict follows the machine's rounding — it was `diverged` on one CPU and
    an oscillation warning on another.)"""
    quadratic = Problem(dane_problem.data, "squared")
    h = 50.0 / quadratic.smoothness
    recs = list(iterate(quadratic, "gd", iterations=200, hyper={"stepsize": h, "steps": "fixed"}))
    assert recs[-1].status == "diverged" and f"lower stepsize (now {h:.4g})" in recs[-1].message
    objs = [r.objective for r in recs]
    # It ends at the first iteration assess calls diverged, not later.
    assert assess(objs[:-1]).status != "diverged" and assess(objs).status == "diverged"


class _Zigzag(Algorithm):
    """w alternates between two points of different objective: an oscillation by construction."""

    name = "zigzag"
    title = "Zigzag"
    divergence_hint = ("gain", "lower")
    params = (Param("gain", "float", 1.0, "amplitude", low=0),)

    def _step(self):
        self.w = np.array([self.hp["gain"] if self.iteration % 2 == 0 else 0.5 * self.hp["gain"]])


class _Settling(_Zigzag):
    """The same zig-zag with an amplitude that halves every iteration: converging to w = 0."""

    def _step(self):
        self.w = np.array([self.hp["gain"] * 0.5 ** self.iteration * (1 if self.iteration % 2 == 0 else -1)])


def _one_feature_problem():
    X = sp.csr_matrix(np.ones((40, 1)))
    y = np.zeros(40)
    return Problem(FederatedDataset.from_assignment(X, y, np.arange(40) % 4), "squared", 1e-3)


class _Cycle(_Zigzag):
    """w cycles through five points (period 5) of f − f* 0.12 … 1.6 from w0 = 1 (f − f* ≈ 0.5)."""

    def _step(self):
        gaps = [0.12, 0.16, 0.3, 0.7, 1.6]
        self.w = np.array([math.sqrt(gaps[self.iteration % 5] / (0.5 + 0.5e-3))])


def test_a_run_that_cycles_with_period_five_ends_done_with_an_oscillating_message():
    p = _one_feature_problem()
    recs = list(iterate(p, _Cycle, iterations=30, f_star=0.0, w0=np.array([1.0])))
    assert recs[-1].status == "done" and recs[-1].message.startswith("oscillating: f − f* relapsed to 1.6")


def test_a_run_that_oscillates_ends_done_with_an_oscillating_message():
    p = _one_feature_problem()       # f(w) = (1/2 + λ/2) w² for the loss (1/2)(z − y)²; w* = 0
    recs = list(iterate(p, _Zigzag, iterations=20, f_star=0.0, w0=np.array([1.0])))
    assert [r.status for r in recs[-2:]] == ["running", "done"]
    assert recs[-1].message.startswith("oscillating: ") and recs[-2].message == ""
    settled = list(iterate(p, _Settling, iterations=20, f_star=0.0, w0=np.array([1.0])))
    assert settled[-1].status == "done" and settled[-1].message == ""


class _Stuck(_Zigzag):
    """w jumps from w0 = 1 to 1.5·gain and stays: f never gets below its start (under the climb)."""

    def _step(self):
        self.w = np.array([1.5 * self.hp["gain"]])


class _StuckOneShot(_Stuck):
    """The same curve from a method that declares it cannot diverge (as one-shot averaging does)."""

    divergence_hint = None


def test_a_run_that_never_gets_below_its_start_ends_diverged_with_its_hint_and_a_no_hint_method_warns():
    p = _one_feature_problem()       # f(w) = (1/2 + λ/2) w², f* = 0
    recs = list(iterate(p, _Stuck, iterations=12, f_star=0.0, w0=np.array([1.0])))
    f0, f1 = 0.5 * (1 + 1e-3), 0.5 * (1 + 1e-3) * 2.25   # 1.25 gaps f0 − f* above the start
    assert [r.status for r in recs[-2:]] == ["running", "diverged"] and len(recs) == 13
    assert recs[-1].message == (f"Zigzag diverged: f never got below its start {f0:.4g} in 12 iterations "
                                f"(f − f*: start {f0:.4g}, lowest {f1:.4g} at iteration 1, last {f1:.4g}); "
                                f"lower gain (now 1)")
    warned = list(iterate(p, _StuckOneShot, iterations=12, f_star=0.0, w0=np.array([1.0])))
    assert warned[-1].status == "done" and warned[-1].message.startswith("warning: f never got below its start")
    # Above its start by 0.21 gaps (w = 1.1), under half a gap: done, with the same words as a warning.
    near = list(iterate(p, _Stuck, iterations=12, f_star=0.0, w0=np.array([1.0]), hyper={"gain": 1.1 / 1.5}))
    assert near[-1].status == "done" and near[-1].message.startswith("warning: f never got below its start")


# ---------------------------------------------------------------------------------------------
# Divergence hints of the registry
# ---------------------------------------------------------------------------------------------

def test_every_algorithm_has_a_valid_divergence_hint():
    """(parameter, direction) with a parameter the class accepts; None only where a class
    declares it itself (a method that cannot diverge), never inherited from the base."""
    for name, cls in ALGORITHMS.items():
        hint = cls.divergence_hint
        if hint is None:
            declared = next(k for k in cls.__mro__ if "divergence_hint" in k.__dict__)
            assert declared is cls, f"{name}: no divergence_hint of its own"
            continue
        assert isinstance(hint, tuple) and len(hint) == 2, name
        param, direction = hint
        assert param in {p.name for p in cls.params}, f"{name}: hint names unknown {param!r}"
        assert direction in HINT_DIRECTIONS, name


def test_the_hints_follow_the_papers():
    assert ALGORITHMS["dane"].divergence_hint == ("mu", "raise")          # Section 3.4
    assert ALGORITHMS["cocoa-plus"].divergence_hint == ("sigma_prime", "raise")
    assert ALGORITHMS["dual-method"].divergence_hint == ("sigma", "raise")  # eq. (15)
    for name in ("gd", "fsvrg", "naive-fsvrg", "fedavg", "scaffold", "svrg", "sgd"):
        assert ALGORITHMS[name].divergence_hint == ("stepsize", "lower"), name


# ---------------------------------------------------------------------------------------------
# SCAFFOLD's derived default
# ---------------------------------------------------------------------------------------------

def _node_problem(seed=0, K=7):
    rng = np.random.default_rng(seed)
    n, d = 180, 24
    dense = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.3)
    dense[np.arange(n), rng.integers(0, d, n)] += 1.0
    nodes = np.sort(rng.integers(0, K, size=n))
    y = np.where(dense @ rng.normal(size=d) > 0, 1.0, -1.0)
    return Problem(FederatedDataset.from_assignment(sp.csr_matrix(dense), y, nodes), "logistic"), dense, nodes


@pytest.mark.parametrize("seed", [0, 1])
def test_scaffold_full_batch_step_is_one_over_the_worst_local_smoothness(seed):
    """η_l = 1/max_k L_k, L_k = (1/4) λ_max(X_kᵀX_k)/n_k + λ for the logistic loss, from
    dense eigenvalues here (the code uses a power iteration, rounded up by 1%)."""
    p, dense, nodes = _node_problem(seed)
    L = [0.25 * np.linalg.eigvalsh(dense[nodes == k].T @ dense[nodes == k])[-1] / np.sum(nodes == k) + p.lam
         for k in np.unique(nodes)]
    expected = 1.0 / max(L)
    eta = Scaffold(p).eta
    assert eta == pytest.approx(expected, rel=0.015) and eta <= expected
    # The worst single example's 1/L_max stays the minibatch default.
    L_max = 0.25 * np.max(np.sum(dense ** 2, axis=1)) + p.lam
    assert Scaffold(p, batch_size=5).eta == pytest.approx(1.0 / L_max, rel=1e-12)
    assert Scaffold(p, stepsize=0.123).eta == 0.123


@settings(max_examples=300, deadline=None)
@given(st_.lists(st_.one_of(st_.floats(-1e6, 1e6), st_.sampled_from([float("nan"), float("inf")])),
                 min_size=1, max_size=40))
def test_the_loops_incremental_watch_says_diverged_exactly_when_assess_does(values):
    """The loop's O(1)-per-iteration Watch against the full assess on every prefix (the oracle)."""
    watch = Watch(values[0])
    for t in range(1, len(values)):
        fast = watch.add(values[t])
        full = assess(values[: t + 1])
        # A mid-run divergence is a whole-curve one too (the end rules add to it, never remove).
        assert fast.status != "diverged" or full == fast, (values[: t + 1], fast, full)
        assert fast == assess(values[: t + 1], ended=False)
        if fast.status == "diverged":
            break
