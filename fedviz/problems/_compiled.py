"""The scalar losses φ(z; y) as one compiled trio — value :func:`phi`, derivative :func:`dphi`,
curvature :func:`d2phi` — with the one set of loss codes that selects among them.

Every compiled kernel that evaluates a per-example loss calls these three and writes no loss of its
own: the local loops (SVRG and FSVRG, local SGD and the FedAvg family, Ditto, APFL, centralised SGD),
the objective's fused logistic pass (:func:`fedviz.problems.losses._logistic_term`), the evaluator's
per-node loss sums (:mod:`fedviz.problems.pernode`) and the node-by-node Newton solver of the personal
models (:mod:`fedviz.personal._newton`).  So the kernels cannot disagree with each other.  The
:class:`~fedviz.problems.losses.Loss` objects keep their vectorised NumPy forms (the fast path on
whole arrays, and the arithmetic of the recorded figures); ``tests/unit/test_loss_trio.py`` walks the
registry and checks, for every loss with a code, that the two agree to a few ulps on a grid of margins
and labels, and that each derivative is the previous function's.  (CoCoA's dual coordinate step,
:func:`fedviz.algorithms._sdca_kernels.sdca_step`, is the proximal step of the conjugate φ*, a
different function of the loss, written per loss there.)

A scalar loss is added here (its code in :data:`LOSS_CODES` and a branch in each of the three
functions) and in :mod:`.losses` (its class in ``LOSSES``); nothing else dispatches on the code,
except ``sdca_step`` for the dual methods, which take only the losses it knows
(:data:`fedviz.algorithms._sdca_kernels.DUAL_LOSSES`).  numba's on-disk cache keys a kernel on its
own file only, so kernels elsewhere that inline the trio keep the old arithmetic after an edit here:
delete the cached kernels (``find fedviz -name '*.nb[ci]' -delete``) before measuring or testing.

An unknown code fails in two places, by design:

- at the Python boundary, where a kernel's arguments are made: :func:`loss_code` raises a
  :class:`~fedviz.errors.ParameterError` naming the loss and the losses that have a code, and
  :func:`check_code` does the same for a code passed on as a number;
- inside the compiled dispatch, each function returns NaN for a code it has no branch for (never
  the last branch's loss: a loss forgotten in one function must not compute another loss's number).
  Not an exception: a ``raise`` in a function inlined into a ``prange`` loop gives the loop a second
  exit, and numba then runs it serially (``NumbaPerformanceWarning``: "more than one entry to or
  exit from the loop"), so the guard would cost the parallel kernels their cores.  A NaN costs one
  never-taken branch and propagates into every sum and step built on it: f(w) is NaN and the
  runner's health check stops the run rather than showing a plausible wrong curve.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ..errors import ParameterError

#: Loss codes understood by every compiled kernel.
LOGISTIC, SQUARED, SMOOTHED_HINGE = 0, 1, 2
#: The registry name of every loss with a code (:data:`fedviz.problems.losses.LOSSES` has one each).
LOSS_CODES = {"logistic": LOGISTIC, "squared": SQUARED, "smoothed-hinge": SMOOTHED_HINGE}
#: What a kernel whose model has several outputs (softmax) carries in its loss-code field: no code,
#: and so NaN from the trio if ever evaluated.
NO_CODE = -1


def loss_code(loss) -> tuple[int, float]:
    """The kernels' code for a loss and its smoothing parameter γ (1 where unused).

    Raises :class:`~fedviz.errors.ParameterError` for a loss without a code (softmax, or a loss
    added to :mod:`.losses` but not here), before any kernel runs."""
    code = LOSS_CODES.get(getattr(loss, "name", None))
    if code is None:
        raise ParameterError("loss", getattr(loss, "name", loss),
                             "a loss the compiled kernels evaluate: " + ", ".join(LOSS_CODES))
    return code, float(getattr(loss, "gamma", 1.0))


def check_code(code) -> int:
    """``code`` as an int when it is one of :data:`LOSS_CODES`' codes; else a ParameterError.
    For the Python wrappers that take a code as a number, not a loss."""
    if isinstance(code, (int, np.integer)) and not isinstance(code, bool) and int(code) in LOSS_CODES.values():
        return int(code)
    raise ParameterError("loss code", code, "one of " + ", ".join(f"{c} ({name})" for name, c in LOSS_CODES.items()))


@numba.njit(cache=True, nogil=True, inline="always", error_model="numpy")
def phi(code, z, y, gamma):
    """φ(z; y): logistic log(1 + e^(−yz)), squared ½(z − y)², smoothed hinge (a = yz):
    0 for a ≥ 1, 1 − a − γ/2 for a ≤ 1 − γ, (1 − a)²/(2γ) between; NaN for an unknown code.

    The logistic loss with t = yz and e = e^(−|t|) is max(−t, 0) + log1p(e), stable for both
    signs, with log1p(e) by Kahan's identity log1p(e) = log(u)·e/(u ⊖ 1), u = 1 ⊕ e (u = 1:
    log1p(e) = e): accurate to a few ulps with one ``log`` (libm's log1p made the fused objective
    pass twice as slow)."""
    if code == LOGISTIC:
        t = y * z
        e = math.exp(-abs(t))
        u = 1.0 + e
        v = u - 1.0
        return max(-t, 0.0) + (math.log(u) * (e / v) if v != 0.0 else e)
    if code == SQUARED:
        r = z - y
        return 0.5 * r * r
    if code == SMOOTHED_HINGE:
        a = y * z
        if a >= 1.0:
            return 0.0
        if a <= 1.0 - gamma:
            return 1.0 - a - 0.5 * gamma
        return (1.0 - a) * (1.0 - a) / (2.0 * gamma)
    return math.nan


@numba.njit(cache=True, nogil=True, inline="always", error_model="numpy")
def dphi(code, z, y, gamma):
    """φ'(z; y) = ∂φ/∂z: logistic −y σ(−yz), squared z − y, smoothed hinge −y clip((1 − yz)/γ, 0, 1);
    NaN for an unknown code.

    σ(−t) with t = yz and e = e^(−|t|) (the same e as :func:`phi`'s, so a kernel that calls both
    computes one exponential): e/(1 + e) for t ≥ 0, 1/(1 + e) otherwise, stable for both signs."""
    if code == LOGISTIC:
        t = y * z
        e = math.exp(-abs(t))
        return -y * ((e if t >= 0.0 else 1.0) / (1.0 + e))
    if code == SQUARED:
        return z - y
    if code == SMOOTHED_HINGE:
        v = (1.0 - y * z) / gamma
        if v < 0.0:
            v = 0.0
        elif v > 1.0:
            v = 1.0
        return -y * v
    return math.nan


@numba.njit(cache=True, nogil=True, inline="always", error_model="numpy")
def d2phi(code, z, y, gamma):
    """φ''(z; y) = ∂²φ/∂z² (y² = 1 for the classification losses): logistic s(1 − s) with
    s = σ(yz), squared 1, smoothed hinge 1/γ for 1 − γ < yz < 1 and 0 elsewhere (its generalised
    second derivative: φ' is piecewise linear with kinks at yz = 1 − γ and 1); NaN for an unknown
    code."""
    if code == LOGISTIC:
        t = y * z
        e = math.exp(-abs(t))
        s = (1.0 if t >= 0.0 else e) / (1.0 + e)
        return s * (1.0 - s)
    if code == SQUARED:
        return 1.0
    if code == SMOOTHED_HINGE:
        a = y * z
        return 1.0 / gamma if (1.0 - gamma < a < 1.0) else 0.0
    return math.nan
