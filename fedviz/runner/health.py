"""Is a run's objective curve healthy?  One cheap verdict on the objective per iteration.

The loop feeds every objective to :class:`Watch` (a run that blows up ends ``diverged``
there and then) and calls :func:`assess` on the whole curve at the end; stepsize tuning
uses :func:`assess` to drop candidates that diverge or oscillate: a curve that ends low by
luck of an oscillation's phase is not a good stepsize.  The rules are scale-aware
(multiples of the objective's own scale, never absolute numbers), so they mean the same
for logistic regression (f(0) = log 2) and ridge regression on unnormalised labels.

The scale.  With f* known it is the gap ``f0 − f*`` the run has to close (``f0`` = f(w0)):
on google-plus-small 0.225 for the logistic loss, where f0 = log 2 is three times
larger.  Without f*, ``max(|f0|, f0 − best)`` stands in (``best`` the lowest objective so
far): the losses here are non-negative, so ``|f0|`` bounds f0 − f* from above and the
rules only get more cautious.  A floor of ``NOISE · max(|f0|, 1)`` keeps a run started at
the optimum from dividing by zero.

Diverged
    Any of four facts.  *Mid-run* (the loop stops the run at the iteration it happens):
    a non-finite objective, or a climb above ``f0 + CLIMB · scale`` (ten gaps: no
    transient overshoot; DANE with μ = 0 on non-IID nodes, the paper's Section 3.2
    failure, climbs from 0.69 to ~300).  The scale used to be ``|f0|`` even with f*
    known, a bar of f = 7.6 for the logistic loss that GD at 8× its step on
    google-plus-small (peak f − f* 4.8) never reached.
    *At the end* (``ended=True``): the run ends clearly above its start: the median of
    its last quarter (at least its last ``WINDOW`` iterates) lies above
    ``f0 + CLEAR · scale``, half a gap; said as "never got below its start" when every
    iterate lies above f0 (by more than rounding), else after the oscillation tests (a
    cycle is named as one, even when its typical value lies above the start, as GD at 4×
    its step's does).  A run that never got below its start but ends within half a gap
    of it is ``ok`` with a ``warning``: CoCoA+ at its safe default σ' = K on
    google-plus-small first overshoots to f − f* 0.49 from 0.225 and is back at 0.228
    after 10 iterations, below its start from the 11th (stepsize tuning's pilots are 10
    iterations long: calling that diverged dropped the default's pilot).  The median, not
    the last value, so a noisy run that happens to end on a spike (FedAvg with 5% of
    500 nodes per round on google-plus-small ends at f − f* 0.95 from a start of 0.24,
    the rest of its tail near 0.13) is not called diverged, and a run whose typical late
    value is worse than doing nothing is.  Over 20 such FedAvg runs (5 data seeds × 4
    seeds) cut at every length from 1 to 400 iterations, 9 of the 8,000 are called
    diverged: one seed's cut at 5–12 iterations, inside a real excursion above its start
    (f − f* 0.47, 0.38, 0.38, 0.56, 0.34, 0.33 at iterations 3–8 from 0.218), and one cut
    at 1 iteration ("never got below", its first round 1% of the gap above the start).
    A quarter gap and a tail of just the last quarter called 17 diverged.  The end rules
    catch what stays under the climb (on runs of at least ``WINDOW`` iterations; a shorter
    run's end is said as a warning, too short to tell a trend from noise): FSVRG at h = 670 on dna (class 3 against the rest,
    12 IID nodes) jumps to 3–4.5 times its start and stays there (never below it); at
    h = 100 on google-plus-small with Dirichlet(0.01) nodes it dips to f − f* 0.07, then
    hovers around 0.5 from a start of 0.225 (ends above it).  GD at 8× its step there
    (f − f* 2.8 at iteration 2) and FSVRG at h = 205 (2.8 at iteration 16) climb past
    ten gaps.
Oscillating
    Either of two patterns.

    *A period-2 zig-zag without progress.*  Over the last ``WINDOW`` differences of the
    objective: every successive pair changes sign, every peak lies above every trough by
    at least the spread within the peaks and within the troughs (a two-point cycle, not
    noise; differences below rounding level, ``NOISE · max(|f0|, |best|)``, count as no
    move), the median step is at least ``AMPLITUDE`` of the suboptimality level (f − f*
    when f* is known; without it the larger f0 − best stands in, which only makes the
    verdict more cautious), and the lower envelope does not make steady progress.  It
    does when the window's second half gets below its first half's minimum by a quarter
    of the median step, or when both envelopes fall at every turn (each trough below the
    one before, each peak too) and the troughs' suboptimality falls by ``ENVELOPE_FALL``
    over the window.  A monotone curve, one converging in a zig-zag (FSVRG as printed, without its
    safeguard, on google-plus-small with 60 nodes wiggles by ±30% while both envelopes fall), or
    rounding noise at f − f* ~ 1e-13 is ``ok``.  The separation condition is what tells
    a cycle from sampling noise: i.i.d. noise alternates in all 7 turns with peaks above
    troughs in about 1% of windows, and also has its envelopes apart by their own spread
    in about 0.02% (FedAvg with 5% of nodes per round on google-plus-small was called
    oscillating at the luck of its last window).

    *Relapses: a cycle of any period.*  In the later half of the curve (from iteration
    ``len // 2``) the objective climbs back above its start f0 and to more than ``RELAPSE``
    times the lowest suboptimality reached before it, at least ``RELAPSES`` separate times
    (a run of consecutive such iterates is one relapse), and such iterates make up at
    least ``RELAPSE_SHARE`` of the later half.  GD with 4× its step on google-plus-small
    cycles every 4–5 iterations between f − f* = 0.12 and 1.6 from a start of 0.225: four
    relapses in its last 16 iterations (6 of its 16 iterates), while its last value
    (0.115) is its lowest.  Climbing above f0 often is what separates instability from
    the noise of client sampling: FedAvg with C = 0.1 on a9a (Dirichlet 0.5, 100 nodes)
    swings between f − f* 0.014 and 0.24 at its default step, more than 10× but always
    below its start (0.37), and that is ``ok``; the same run at 8× the step climbs to 1.4
    after reaching 0.02, in 4 of its last 16 iterations, and is not.  FedAvg with 5% of
    500 nodes per round on google-plus-small spikes above its start now and then (a round
    that samples two unusual nodes), in at most 7% of its later half over 300
    iterations (16% in one short prefix of 37 iterations, 5 data sets × 4 seeds): noise.
    The suboptimality is f − f* with f*, else f − best (the start condition f > f0 is
    the same either way).

Non-finite objectives and the climb look at the whole curve; the end rules need one
iteration, both oscillation tests at least ``WINDOW + 1`` objectives.

Cost: O(len(objectives)) (the minimum, the finiteness check, a median, the running minimum
of the relapse test).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

#: A climb above f0 + CLIMB · scale is divergence (mid-run).
CLIMB = 10.0
#: A run whose last quarter has its median above f0 + CLEAR · scale ends clearly above its start.
CLEAR = 0.5
#: The share of the iterations, counted from the end, whose median says where a run ends (at
#: least the last WINDOW of them, all when the run is shorter).
TAIL = 0.25
#: The number of trailing differences the oscillation test looks at.
WINDOW = 8
#: Sign changes (of WINDOW − 1 successive pairs) that make a zig-zag: all of them, as a
#: period-2 oscillation has.  (Differences of i.i.d. noise alternate with probability 2/3 per
#: pair, so "6 of 7" called 16% of noisy plateaus oscillating; all 7, with the peaks above
#: every trough, calls about 1%, and with the envelopes apart by their spread about 0.02%.)
ALTERNATIONS = WINDOW - 1
#: The median |difference| relative to the suboptimality level that is "non-trivial".
AMPLITUDE = 0.05
#: Differences below NOISE · max(|f0|, |best|) are rounding, not moves.
NOISE = 1e-9
#: A zig-zag whose envelopes both fall at every turn makes progress when its troughs'
#: suboptimality falls by this fraction over the window (FSVRG's wiggle: 11%).
ENVELOPE_FALL = 0.05
#: A relapse climbs above f0 and above RELAPSE × the lowest suboptimality reached before it ...
RELAPSE = 4.0
#: ... and a curve with at least RELAPSES separate relapses in its later half ...
RELAPSES = 2
#: ... which take up at least this share of the later half's iterates is unstable.
RELAPSE_SHARE = 0.2


@dataclass(frozen=True)
class Verdict:
    """``status`` is "ok", "diverged" or "oscillating"; ``reason`` a sentence for people ("" when ok).

    ``iteration`` is where a mid-run divergence happened (the loop stops there); None for the
    verdicts on the whole curve (the end rules, oscillation) and for ok.  ``warning``: an ok
    curve's word for people (it never got below its start, but ends within half a gap of it)."""

    status: str
    reason: str
    iteration: int | None = None
    warning: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


OK = Verdict("ok", "")


def scale(f0: float, best: float, f_star: float | None = None) -> float:
    """The objective's own scale (module docstring): f0 − f* with f*, else max(|f0|, f0 − best),
    at least NOISE · max(|f0|, 1)."""
    floor = NOISE * max(abs(f0), 1.0)
    if f_star is not None and math.isfinite(f_star):
        return max(f0 - f_star, f0 - best, floor)
    return max(abs(f0), f0 - best, floor)


class Watch:
    """:func:`assess`'s mid-run rules (non-finite, climb) kept up to date in O(1) per value.

    The loop asks after every iteration whether the run diverged; :func:`assess` reads the
    whole curve (O(t)), which over a 10,000-iteration run cost seconds.  The loop feeds each
    objective here and calls :func:`assess` once, at the end, for the end rules and the
    oscillation tests.  ``add`` agrees with ``assess(curve, f_star, ended=False)``.
    """

    def __init__(self, f0: float, f_star: float | None = None):
        self.f0 = self.best = self.peak = float(f0)
        self.f_star = None if f_star is None or not math.isfinite(f_star) else float(f_star)
        self.t = 0

    def add(self, f: float) -> Verdict:
        """The mid-run verdict on the curve so far, ``f`` appended (OK or 'diverged')."""
        self.t += 1
        if not math.isfinite(self.f0):
            return Verdict("diverged", f"f became {self.f0} at iteration 0", 0)
        if not math.isfinite(f):
            return Verdict("diverged", f"f became {f} at iteration {self.t}", self.t)
        self.best, self.peak = min(self.best, f), max(self.peak, f)
        if self.peak > self.f0 + CLIMB * scale(self.f0, self.best, self.f_star):
            return Verdict("diverged", _climb_text(self.peak, self.f0, self.best, self.f_star), self.t)
        return OK


def _climb_text(peak: float, f0: float, best: float, f_star: float | None) -> str:
    if f_star is None:
        return f"f rose to {peak:.4g} from a start of {f0:.4g} (best {best:.4g})"
    return (f"f − f* rose from {f0 - f_star:.4g} at the start to {peak - f_star:.4g}, a climb of more than "
            f"{CLIMB:g}× the start's f − f* (lowest {best - f_star:.4g})")


def assess(objectives: Sequence[float], f_star: float | None = None, *, ended: bool = True) -> Verdict:
    """The verdict on a curve of objectives f(w0), f(w1), … (see the module's docstring for the rules).

    ``f_star`` (the optimum's objective, optional) sets the scale of the climb and of the
    end rules, and sharpens the oscillation test.  ``ended=False`` applies only the mid-run
    rules (non-finite, climb), those :class:`Watch` keeps.
    """
    n = len(objectives)
    if n == 0:
        return OK
    for t, f in enumerate(objectives):
        if not math.isfinite(f):
            return Verdict("diverged", f"f became {f} at iteration {t}", t)
    has_star = f_star is not None and math.isfinite(f_star)
    star = float(f_star) if has_star else None
    f0 = float(objectives[0])
    best = f0
    for t, f in enumerate(objectives):  # the first iteration whose climb crosses the bar (as Watch sees it)
        best = min(best, f)
        if f > f0 + CLIMB * scale(f0, best, star):
            peak = max(objectives[: t + 1])
            return Verdict("diverged", _climb_text(peak, f0, best, star), t)
    if not ended or n < 2:
        return OK
    best = min(objectives)
    noise = NOISE * max(abs(f0), abs(best))
    never = _never_below(objectives, star, noise)
    if n < WINDOW + 1:
        # Too short to tell a trend from noise (FedAvg two rounds from a start near w* sits at its
        # sampling floor above it): what the end rules see is said as a warning, not a verdict.
        above = _ends_above(objectives, star)
        stuck = _never_left(objectives, star, noise)
        warning = never or above or stuck
        return OK if warning is None else Verdict("ok", "", warning=warning)
    if never is not None and _ends_above(objectives, star) is not None:
        return Verdict("diverged", never)
    if n >= WINDOW + 1:
        # A cycle is named as one even when its typical value is above the start (GD ×4).
        zigzag = _zigzag(objectives, star, f0, best, noise)
        if zigzag is not None:
            return Verdict("oscillating", zigzag)
        relapse = _relapses(objectives, star, best, noise)
        if relapse is not None:
            return Verdict("oscillating", relapse)
    above = _ends_above(objectives, star)
    if above is not None:
        return Verdict("diverged", above)
    if never is not None:
        return Verdict("ok", "", warning=never)
    stuck = _never_left(objectives, star, noise)
    return OK if stuck is None else Verdict("ok", "", warning=stuck)


def _never_left(objectives: Sequence[float], f_star: float | None, noise: float) -> str | None:
    """The reason when every iterate equals the start to rounding although the start is not the optimum (FSVRG
    whose safeguard rejects every trial step stays at f(w0)), else None.  Without f* a run started at the
    optimum (property (A)) cannot be told from one that is stuck, so nothing is said."""
    f = [float(v) for v in objectives]
    if f_star is None or f[0] - f_star <= 10 * noise or max(abs(v - f[0]) for v in f) > noise:
        return None
    return (f"f never left its start {f[0]:.4g} in {len(f) - 1} iterations (every iterate within rounding of it, "
            f"f − f* = {f[0] - f_star:.4g}): no step was taken")


#: How far (in points of error rate) the personal models' pooled test error may end above its start before the
#: run is warned: Ditto at 16× its default step on google-plus-small went from 33.5% to 58.5% and ended 'done'.
PERSONAL_RISE = 0.05


def personal_verdict(distances: Sequence[float], errors: Sequence[float], *, finite: bool, ended: bool,
                     rates: bool = True) -> Verdict:
    """The verdict on a run's personal models (Ditto's v_k, APFL's), from their records so far: ``distances``
    the RMS distance to the exact models v_k(λ_D) per iteration (NaN without them), ``errors`` their pooled
    test error, ``finite`` whether the models are finite now.

    Diverged: non-finite models (Ditto at λ_D = 1000 and step 0.27 on google-plus-small: 5e89 after a round,
    NaN after two), or a distance to the exact models that grew past :data:`CLIMB` times its start.  Warned
    (``ended``): a pooled test error (``rates``: an error rate, not a squared error) whose median over the last
    quarter ends :data:`PERSONAL_RISE` above its start.
    """
    t = len(errors) - 1
    if not finite:
        return Verdict("diverged", f"its personal models blew up at iteration {t} (non-finite values)", t)
    d0, d = (float(distances[0]), float(distances[-1])) if len(distances) else (math.nan, math.nan)
    if math.isfinite(d0) and d0 > 0 and (not math.isfinite(d) or d > CLIMB * d0):
        return Verdict("diverged", f"its personal models moved away from the exact models v_k(λ_D): RMS distance "
                                   f"{d0:.3g} at the start, {d:.3g} at iteration {t}", t)
    if not (ended and rates and t >= 1):
        return OK
    e = [float(v) for v in errors if math.isfinite(v)]
    if len(e) < 2:
        return OK
    k = min(len(e) - 1, max(1, math.ceil(TAIL * (len(e) - 1))))
    typical = statistics.median(e[-k:])
    if typical <= e[0] + PERSONAL_RISE:
        return OK
    return Verdict("ok", "", warning=f"the personal models' pooled test error rose from {100 * e[0]:.1f}% to "
                                     f"{100 * typical:.1f}% (the median of its last {k} values)")


def _facts(f: list[float], f_star: float | None) -> str:
    """"lowest … at iteration …, last …" (in f − f* when f* is known): what the end rules' reasons cite."""
    low = min(range(1, len(f)), key=f.__getitem__)   # the lowest iterate after the start
    if f_star is None:
        return f"lowest {f[low]:.4g} at iteration {low}, last {f[-1]:.4g}"
    return f"f − f*: start {f[0] - f_star:.4g}, lowest {f[low] - f_star:.4g} at iteration {low}, last {f[-1] - f_star:.4g}"


def _never_below(objectives: Sequence[float], f_star: float | None, noise: float) -> str | None:
    """The reason when every iterate lies above the start by more than rounding, else None."""
    f = [float(v) for v in objectives]
    if min(f[1:]) <= f[0] + noise:
        return None
    return f"f never got below its start {f[0]:.4g} in {len(f) - 1} iterations ({_facts(f, f_star)})"


def _ends_above(objectives: Sequence[float], f_star: float | None) -> str | None:
    """The reason when the median of the last TAIL of the iterates lies above f0 + CLEAR · scale, else None."""
    f = [float(v) for v in objectives]
    k = min(len(f) - 1, max(WINDOW, math.ceil(TAIL * (len(f) - 1))))
    typical = statistics.median(f[-k:])
    if typical <= f[0] + CLEAR * scale(f[0], min(f), f_star):
        return None
    return (f"f ends above its start {f[0]:.4g}: the median of its last {k} values is {typical:.4g} "
            f"({_facts(f, f_star)})")


def _zigzag(objectives: Sequence[float], f_star: float | None, f0: float, best: float,
            noise: float) -> str | None:
    """The reason when the last WINDOW differences are a period-2 zig-zag without progress, else None."""
    n = len(objectives)
    tail = [float(f) for f in objectives[n - WINDOW - 1:]]
    diffs = [b - a for a, b in zip(tail, tail[1:])]
    signs = [0 if abs(d) <= noise else (1 if d > 0 else -1) for d in diffs]
    changes = sum(1 for s, u in zip(signs, signs[1:]) if s * u < 0)
    if changes < ALTERNATIONS:
        return None
    # A two-point cycle, not noise: the peaks lie above the troughs by more than either spreads.
    first_up = signs[0] > 0                      # tail[0] is a trough when the first move is up
    troughs = tail[0 if first_up else 1::2]
    peaks = tail[1 if first_up else 0::2]
    gap = min(peaks) - max(troughs)
    if gap <= 0 or gap < max(max(peaks) - min(peaks), max(troughs) - min(troughs)):
        return None
    step = sorted(abs(d) for d in diffs)[WINDOW // 2]  # the upper median
    floor = f_star if f_star is not None else best
    if f_star is not None:
        level = sorted(tail)[len(tail) // 2] - f_star
    else:
        level = f0 - best
    if not step >= AMPLITUDE * level:  # also False for a NaN level
        return None
    half = len(tail) // 2
    if min(tail[half:]) <= min(tail[:half + 1]) - step / 4:
        return None
    falling = all(b < a - noise for env in (troughs, peaks) for a, b in zip(env, env[1:]))
    if falling and troughs[-1] - floor <= (1 - ENVELOPE_FALL) * (troughs[0] - floor):
        return None
    return (f"f zig-zags by {step:.2g} around {tail[-1]:.6g} over the last {WINDOW} "
            f"iterations ({changes} of {WINDOW - 1} turns) without steady progress")


def _relapses(objectives: Sequence[float], f_star: float | None, best: float, noise: float) -> str | None:
    """The reason when the later half of the curve relapses RELAPSES separate times, in at least
    RELAPSE_SHARE of its iterates (module docstring), else None."""
    n = len(objectives)
    floor = f_star if f_star is not None else best
    gaps = [float(f) - floor for f in objectives]
    start = n // 2
    lowest = min(gaps[:start])                   # the lowest suboptimality before iteration t
    count, iterates, inside, worst = 0, 0, False, None
    for t in range(start, n):
        g = gaps[t]
        relapsed = g > gaps[0] + noise and g > RELAPSE * lowest and g - lowest > noise
        if relapsed:
            count += not inside
            iterates += 1
            if worst is None or g / max(lowest, noise) > worst[0] / max(worst[1], noise):
                worst = (g, lowest)
        inside = relapsed
        lowest = min(lowest, g)
    if count < RELAPSES or iterates < RELAPSE_SHARE * (n - start):
        return None
    what = "f − f*" if f_star is not None else "f − (its lowest value)"
    return (f"{what} relapsed to {worst[0]:.3g} after reaching {worst[1]:.3g}, above its start "
            f"{gaps[0]:.3g} ({count} times, {iterates} of the last {n - start} iterations)")
