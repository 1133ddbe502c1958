"""Centralised SGD: the plain stochastic gradient baseline of Section 2.1, on the pooled data.

A reference, not a federated method (``federated = False``; no communication rounds).
One iteration is one epoch of n steps

    w ← w − h_t (φ_i'(x_iᵀw) x_i + λ w),

with i uniform with replacement or following a fresh random permutation each epoch.  The
stepsize is either constant, h_t = h, or decaying, h_t = h / (1 + h λ t) with t the
number of steps taken since the start (Bottou, "Stochastic gradient descent tricks",
2012): for the λ-strongly convex f this behaves like 1/(λt) late on, the rate-optimal
schedule, while starting at h.  A constant stepsize stalls at a noise floor of order h;
the decaying one keeps converging, slowly — which is the point of the variance-reduced
methods the paper builds on.

A step costs O(nnz of x_i): the shrinkage by (1 − h_t λ) of untouched coordinates is
applied lazily (:func:`._svrg_kernels.sgd_epoch`).

Softmax regression (issue 22): the same epoch on the d × C model, a step moving the C weights of
each feature of x_i by h_t x_ij (softmax(Wᵀx_i) − e_{y_i}) (:func:`._softmax_kernels.sgd_epoch_softmax`).
"""

from __future__ import annotations

import numpy as np

from ..problems.budget import StateSize
from ..errors import ParameterError
from ..problems._compiled import loss_code
from ._softmax_kernels import sgd_epoch_softmax
from ._svrg_kernels import (
    SAMPLE_STREAM,
    permutation_samples,
    sgd_epoch,
    uniform_samples,
)
from .base import Algorithm, Param, default_stepsize

#: SGD steps per kernel call; Stop is checked after every call (about 50 ms of work on a
#: quiet core at the paper's scale, where the rows are ~12 entries long).
STEPS_PER_CALL = 1 << 15


class SGD(Algorithm):
    name = "sgd"
    title = "SGD (centralised)"
    reference = "Stochastic gradient descent (Section 2.1)"
    federated = False
    divergence_hint = ("stepsize", "lower")
    multiclass = True
    state = StateSize(entries=0.5, rows=2, model=5)  # tracemalloc's peaks × 2.2 (tests/unit/test_budget.py)
    params = (
        Param("stepsize", "float", None,
              "Initial stepsize h.  Default 1/(2L̄), L̄ = (1/γ) mean‖x_i‖² + λ the smoothness of "
              "an average f_i; it must stay below 1/λ so the shrinkage 1 − hλ is positive.",
              low=0, low_open=True, log=True),
        Param("schedule", "choice", "decaying",
              "'decaying': h_t = h/(1 + hλt), t the step count (about 1/(λt) late on).  "
              "'constant': h_t = h (converges only to a neighbourhood of w*).",
              choices=("decaying", "constant")),
        Param("sampling", "choice", "uniform",
              "'uniform': examples with replacement.  'permutation': a fresh random order of "
              "the data every epoch.", choices=("uniform", "permutation")),
    )

    @classmethod
    def _derive(cls, pb, hp) -> dict:
        return {} if hp["stepsize"] is not None else {"stepsize": 0.5 / pb.average_example_smoothness}

    def setup(self):
        pb = self.problem
        self.h = default_stepsize(self.hp["stepsize"], self.derived.get("stepsize"))
        if self.h * pb.lam >= 1.0:
            raise ParameterError(f"{self.name}.stepsize", self.h,
                                 f"number in (0, 1/λ) = (0, {1.0 / pb.lam:.6g})")
        X = pb.X
        if pb.n_classes == 1:
            self._kernel_args = (X.indptr, X.indices, X.data, pb.y, *loss_code(pb.loss))
        else:
            self._kernel_args = (X.indptr, X.indices, X.data, pb.y)
        self._last = np.zeros(pb.d, dtype=np.int64)
        self._cum = np.zeros(pb.n + 1)

    def stepsizes(self) -> np.ndarray:
        """h_t for the n steps of this epoch."""
        n = self.problem.n
        if self.hp["schedule"] == "constant":
            return np.full(n, self.h)
        t = self.iteration * n + np.arange(n, dtype=np.float64)
        return self.h / (1.0 + self.h * self.problem.lam * t)

    def samples(self) -> np.ndarray:
        n = self.problem.n
        rng = self.rng(SAMPLE_STREAM)
        if self.hp["sampling"] == "uniform":
            return uniform_samples(rng, np.array([n]), np.array([n]))
        return permutation_samples(rng, np.array([0, n], dtype=np.int64))

    def _step(self):
        pb = self.problem
        w = np.array(self.w)
        samples, h = self.samples(), self.stepsizes()
        # The epoch in pieces, so Stop takes effect between them; the kernel keeps its lazy
        # state across calls, so the cut points do not change the iterates at all.
        n = samples.size
        if pb.n_classes > 1:
            W, scratch = pb.as_model(w), np.empty(pb.n_classes)  # a view: the kernel updates w
        for a in range(0, n, STEPS_PER_CALL):
            if pb.n_classes == 1:
                sgd_epoch(*self._kernel_args, w, samples, h, pb.lam, self._last, self._cum,
                          a, min(a + STEPS_PER_CALL, n))
            else:
                sgd_epoch_softmax(*self._kernel_args, W, samples, h, pb.lam, self._last, self._cum,
                                  a, min(a + STEPS_PER_CALL, n), scratch)
            self.check_stop()
        self.grad_evals += self.problem.n
        self.w = w
