"""Is a run's objective curve healthy?  One cheap verdict on the objective per iteration.

The loop calls :func:`assess` after every iteration (a run that blows up ends
``diverged`` there and then), and stepsize tuning uses it to drop candidates that
diverge or oscillate: a curve that ends low by luck of an oscillation's phase is not a
good stepsize.  The rules are scale-aware (multiples of the objective's own scale, never
absolute numbers), so they mean the same for logistic regression (f(0) = log 2) and ridge
regression on unnormalised labels.

Diverged
    A non-finite objective, or a peak above ``f0 + CLIMB · max(|f0|, f0 − best)``, where
    ``f0`` is f(w0) and ``best`` the lowest objective so far.  The losses here are
    non-negative, so ``|f0|`` bounds the gap f0 − f* an algorithm has to close: climbing
    ``CLIMB = 10`` such gaps above the start is no transient overshoot.  (DANE with μ = 0
    on non-IID nodes, the paper's Section 3.2 failure, climbs from 0.69 to ~300.)
Oscillating
    Either of two patterns.

    *A period-2 zig-zag without progress.*  Over the last ``WINDOW`` differences of the
    objective: every successive pair changes sign and every peak lies above every trough (a
    zig-zag, not noise; differences below rounding level, ``NOISE · max(|f0|, |best|)``,
    count as no move), the median step is at least ``AMPLITUDE`` of the suboptimality level
    (f − f* when f* is known; without it the larger f0 − best stands in, which only makes
    the verdict more cautious), and the lower envelope does not make steady progress.  It
    does when the window's second half gets below its first half's minimum by a quarter of
    the median step, or when both envelopes fall at every turn (each trough below the one
    before, each peak too) and the troughs' suboptimality falls by ``ENVELOPE_FALL`` over
    the window.  A monotone curve, one converging in a zig-zag (FSVRG as printed, without its safeguard, on
    google-plus-small with 60 nodes wiggles by ±30% while both envelopes fall), or rounding
    noise at f − f* ~ 1e-13 is ``ok``.

    *Relapses: a cycle of any period.*  In the later half of the curve (from iteration
    ``len // 2``) the objective climbs back above its start f0 and to more than ``RELAPSE``
    times the lowest suboptimality reached before it, at least ``RELAPSES`` separate times
    (a run of consecutive such iterates is one relapse).  GD with 4× its step on
    google-plus-small cycles every 4–5 iterations between f − f* = 0.12 and 1.6 from a
    start of 0.225: four relapses in its last 16 iterations, while its last value (0.115)
    is its lowest.  Climbing above f0 is what separates instability from the noise of
    client sampling: FedAvg with C = 0.1 on a9a (Dirichlet 0.5, 100 nodes) swings between
    f − f* 0.014 and 0.24 at its default step, more than 10× but always below its start
    (0.37), and that is ``ok``; the same run at 8× the step climbs to 1.4 after reaching 0.02,
    three times, and is not.  The suboptimality is f − f* with f*, else f − best (the start condition
    f > f0 is the same either way).

Non-finite objectives and the divergence test look at the whole curve; both oscillation
tests need at least ``WINDOW + 1`` objectives.

Cost: O(len(objectives)) (the minimum, the finiteness check, the running minimum of the
relapse test).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

#: A peak above f0 + CLIMB · max(|f0|, f0 − best) is divergence.
CLIMB = 10.0
#: The number of trailing differences the oscillation test looks at.
WINDOW = 8
#: Sign changes (of WINDOW − 1 successive pairs) that make a zig-zag: all of them, as a
#: period-2 oscillation has.  (Differences of i.i.d. noise alternate with probability 2/3 per
#: pair, so "6 of 7" called 16% of noisy plateaus oscillating; all 7, with the peaks above
#: every trough, calls about 2%.)
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
#: ... and a curve with at least RELAPSES separate relapses in its later half is unstable.
RELAPSES = 2


@dataclass(frozen=True)
class Verdict:
    """``status`` is "ok", "diverged" or "oscillating"; ``reason`` a sentence for people ("" when ok)."""

    status: str
    reason: str

    @property
    def ok(self) -> bool:
        return self.status == "ok"


OK = Verdict("ok", "")


class Watch:
    """:func:`assess`'s divergence rule kept up to date in O(1) per value.

    The loop asks after every iteration whether the run diverged; :func:`assess` reads the
    whole curve (O(t)), which over a 10,000-iteration run cost seconds.  The loop feeds each
    objective here and calls :func:`assess` once, at the end, for the oscillation tests.
    """

    def __init__(self, f0: float):
        self.f0 = self.best = self.peak = float(f0)
        self.t = 0

    def add(self, f: float) -> Verdict:
        """The divergence verdict on the curve so far, ``f`` appended (OK or 'diverged')."""
        self.t += 1
        if not math.isfinite(self.f0):
            return Verdict("diverged", f"f became {self.f0} at iteration 0")
        if not math.isfinite(f):
            return Verdict("diverged", f"f became {f} at iteration {self.t}")
        self.best, self.peak = min(self.best, f), max(self.peak, f)
        scale = max(abs(self.f0), self.f0 - self.best) or 1.0
        if self.peak > self.f0 + CLIMB * scale:
            return Verdict("diverged", f"f rose to {self.peak:.4g} from a start of {self.f0:.4g} (best {self.best:.4g})")
        return OK


def assess(objectives: Sequence[float], f_star: float | None = None) -> Verdict:
    """The verdict on a curve of objectives f(w0), f(w1), … (see the module's docstring for the rules).

    ``f_star`` (the optimum's objective, optional) sharpens the oscillation test; the
    divergence test does not need it.
    """
    n = len(objectives)
    if n == 0:
        return OK
    for t, f in enumerate(objectives):
        if not math.isfinite(f):
            return Verdict("diverged", f"f became {f} at iteration {t}")
    f0 = float(objectives[0])
    best = min(objectives)
    peak = max(objectives)
    scale = max(abs(f0), f0 - best) or 1.0
    if peak > f0 + CLIMB * scale:
        return Verdict("diverged", f"f rose to {peak:.4g} from a start of {f0:.4g} (best {best:.4g})")
    if n < WINDOW + 1:
        return OK
    noise = NOISE * max(abs(f0), abs(best))
    has_star = f_star is not None and math.isfinite(f_star)
    zigzag = _zigzag(objectives, f_star if has_star else None, f0, best, noise)
    if zigzag is not None:
        return Verdict("oscillating", zigzag)
    relapse = _relapses(objectives, f_star if has_star else None, best, noise)
    if relapse is not None:
        return Verdict("oscillating", relapse)
    return OK


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
    # A zig-zag, not noise: every peak of the window lies above every trough.
    first_up = signs[0] > 0                      # tail[0] is a trough when the first move is up
    troughs = tail[0 if first_up else 1::2]
    peaks = tail[1 if first_up else 0::2]
    if min(peaks) <= max(troughs):
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
    """The reason when the later half of the curve relapses RELAPSES times (module docstring), else None."""
    n = len(objectives)
    floor = f_star if f_star is not None else best
    gaps = [float(f) - floor for f in objectives]
    start = n // 2
    lowest = min(gaps[:start])                   # the lowest suboptimality before iteration t
    count, inside, worst = 0, False, None
    for t in range(start, n):
        g = gaps[t]
        relapsed = g > gaps[0] + noise and g > RELAPSE * lowest and g - lowest > noise
        if relapsed:
            count += not inside
            if worst is None or g / max(lowest, noise) > worst[0] / max(worst[1], noise):
                worst = (g, lowest)
        inside = relapsed
        lowest = min(lowest, g)
    if count < RELAPSES:
        return None
    what = "f − f*" if f_star is not None else "f − (its lowest value)"
    return (f"{what} relapsed to {worst[0]:.3g} after reaching {worst[1]:.3g}, above its start "
            f"{gaps[0]:.3g} ({count} times in the last {n - start} iterations)")
