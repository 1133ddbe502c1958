"""Compiled per-example loops on the d × C model of softmax regression (issue 22, point 3).

The binary kernels (:mod:`._svrg_kernels`) move one weight per nonzero; these move the row of C
weights of the nonzero's feature, contiguous in the row-major model W (the layout the problem
owns, :class:`~fedviz.problems.objective.Problem`).  The regulariser λ‖W‖²_F is separable, so
the lazy catch-up of an untouched feature multiplies its whole row by the same factor as the
binary kernel's single weight.
"""

from __future__ import annotations

import math

import numba


@numba.njit(cache=True, nogil=True, error_model="numpy")
def sgd_epoch_softmax(indptr, indices, data, y, W, samples, h, lam, last, cum, t0, t1, p):
    """Steps ``t0 .. t1 − 1`` of an epoch of plain SGD on softmax regression, in place:

        W ← (1 − h_t λ) W − h_t x_i (softmax(Wᵀx_i) − e_{y_i})ᵀ,

    with the lazy regulariser of :func:`._svrg_kernels.sgd_epoch` applied to whole rows of W
    (``last``, ``cum`` as there).  ``p`` is a scratch vector of length C.
    """
    n_steps = samples.size
    C = W.shape[1]
    if t0 == 0:
        cum[0] = 0.0
        for t in range(n_steps):
            cum[t + 1] = cum[t] + math.log1p(-h[t] * lam)
        last[:] = 0
    for t in range(t0, t1):
        i = samples[t]
        for c in range(C):
            p[c] = 0.0
        for q in range(indptr[i], indptr[i + 1]):
            j = indices[q]
            if last[j] < t:
                f = math.exp(cum[t] - cum[last[j]])
                for c in range(C):
                    W[j, c] *= f
                last[j] = t
            a = data[q]
            for c in range(C):
                p[c] += a * W[j, c]
        # p ← softmax(p) − e_y, stably (the largest margin subtracted first).
        m = p[0]
        for c in range(1, C):
            m = max(m, p[c])
        s = 0.0
        for c in range(C):
            p[c] = math.exp(p[c] - m)
            s += p[c]
        for c in range(C):
            p[c] /= s
        p[int(y[i])] -= 1.0
        ht = h[t]
        r = 1.0 - ht * lam
        for q in range(indptr[i], indptr[i + 1]):
            j = indices[q]
            a = ht * data[q]
            for c in range(C):
                W[j, c] = r * W[j, c] - a * p[c]
            last[j] = t + 1
    if t1 == n_steps:
        for j in range(W.shape[0]):
            if last[j] < n_steps:
                f = math.exp(cum[n_steps] - cum[last[j]])
                for c in range(C):
                    W[j, c] *= f
                last[j] = n_steps
