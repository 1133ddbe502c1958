"""The losses' derivative φ'(z; y) as a compiled scalar function, with one set of loss codes.

Every per-example kernel (local SVRG, local SGD, SDCA, centralised SGD) calls this one
function, so they cannot disagree with each other or with :mod:`.losses`.
"""

from __future__ import annotations

import math

import numba

#: Loss codes understood by every compiled kernel.
LOGISTIC, SQUARED, SMOOTHED_HINGE = 0, 1, 2
LOSS_CODES = {"logistic": LOGISTIC, "squared": SQUARED, "smoothed-hinge": SMOOTHED_HINGE}


def loss_code(loss) -> tuple[int, float]:
    """The kernels' code for a loss and its smoothing parameter γ (1 where unused)."""
    return LOSS_CODES[loss.name], float(getattr(loss, "gamma", 1.0))


@numba.njit(cache=True, nogil=True, inline="always", error_model="numpy")
def dphi(code, z, y, gamma):
    """φ'(z; y): logistic −y σ(−y z) (stable for both signs), squared z − y, smoothed hinge
    −y clip((1 − y z)/γ, 0, 1)."""
    if code == LOGISTIC:
        t = -y * z
        if t >= 0.0:
            s = 1.0 / (1.0 + math.exp(-t))
        else:
            e = math.exp(t)
            s = e / (1.0 + e)
        return -y * s
    if code == SQUARED:
        return z - y
    v = (1.0 - y * z) / gamma
    if v < 0.0:
        v = 0.0
    elif v > 1.0:
        v = 1.0
    return -y * v
