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
    Over the last ``WINDOW`` differences of the objective: every successive pair changes
    sign and every peak lies above every trough (a period-2 zig-zag, not noise; differences
    below rounding level, ``NOISE · max(|f0|, |best|)``, count as no move), the median step is at least
    ``AMPLITUDE`` of the suboptimality level (f − f* when f* is known; without it the
    larger f0 − best stands in, which only makes the verdict more cautious), and the lower
    envelope does not make steady progress: the window's second half does not get below
    its first half's minimum by a quarter of the median step.  A monotone curve, or one
    converging in a zig-zag, or rounding noise at f − f* ~ 1e-13, is ``ok``.

Cost: O(len(objectives)) for the minimum and the finiteness check, O(WINDOW) otherwise.
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


@dataclass(frozen=True)
class Verdict:
    """``status`` is "ok", "diverged" or "oscillating"; ``reason`` a sentence for people ("" when ok)."""

    status: str
    reason: str

    @property
    def ok(self) -> bool:
        return self.status == "ok"


OK = Verdict("ok", "")


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
    tail = [float(f) for f in objectives[n - WINDOW - 1:]]
    noise = NOISE * max(abs(f0), abs(best))
    diffs = [b - a for a, b in zip(tail, tail[1:])]
    signs = [0 if abs(d) <= noise else (1 if d > 0 else -1) for d in diffs]
    changes = sum(1 for s, u in zip(signs, signs[1:]) if s * u < 0)
    if changes < ALTERNATIONS:
        return OK
    # A zig-zag, not noise: every peak of the window lies above every trough.
    first_up = signs[0] > 0                      # tail[0] is a trough when the first move is up
    troughs = tail[0 if first_up else 1::2]
    peaks = tail[1 if first_up else 0::2]
    if min(peaks) <= max(troughs):
        return OK
    step = sorted(abs(d) for d in diffs)[WINDOW // 2]  # the upper median
    if f_star is not None and math.isfinite(f_star):
        level = sorted(tail)[len(tail) // 2] - f_star
    else:
        level = f0 - best
    if not step >= AMPLITUDE * level:  # also False for a NaN level
        return OK
    half = len(tail) // 2
    if min(tail[half:]) <= min(tail[:half + 1]) - step / 4:
        return OK
    return Verdict("oscillating", f"f zig-zags by {step:.2g} around {tail[-1]:.6g} over the last {WINDOW} "
                                  f"iterations ({changes} of {WINDOW - 1} turns) without steady progress")
