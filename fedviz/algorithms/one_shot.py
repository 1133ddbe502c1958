"""One-shot averaging: the first display of Section 3.4 (after Zinkevich et al., 2010).

Every node minimises its own local objective F_k (eq. 6) and the server averages the
minimisers with the weights n_k/n of eq. (7),

    w_k = argmin_w F_k(w),   w = Σ_k (n_k/n) w_k.

One round: the nodes send their w_k up; nothing depends on the server's iterate, so
*iterations after the first change nothing and count nothing* — the method "effectively
performs just a single round of communication", as the paper puts it.  It is the
naive baseline that motivates DANE: the average of local minimisers is the global one
only when the local functions agree.

Each F_k is minimised to a relative gradient tolerance by the vectorised Newton-CG of
:class:`.dane.LocalNewton`, on the node's support; off it, F_k is (λ/2)‖w‖², minimised
at 0.  The starting point ``w0`` plays no part.
"""

from __future__ import annotations

import numpy as np

from ..problems.budget import StateSize
from .base import Algorithm, Param
from .dane import local_newton


class OneShotAveraging(Algorithm):
    name = "one-shot"
    title = "One-shot averaging"
    reference = "Section 3.4, first display (Zinkevich et al., 2010)"
    #: Nothing to tune: one exact average of strongly convex local minimisers, no iteration
    #: that could amplify anything.
    divergence_hint = None
    multiclass = True  # softmax: the local Newton-CG on the d × C model (issue 22)
    state = StateSize(entries=3, support=24, rows=13, model=4)  # tracemalloc's peaks × 2.2 (tests/unit/test_budget.py)
    params = (
        Param("local_tol", "float", 1e-10,
              "Stop each node's Newton-CG when ‖∇F_k‖ has shrunk by this factor from its value "
              "at 0.", low=0, high=1, low_open=True, high_open=True, log=True),
    )

    def setup(self):
        # Built here, before the first record, so that Stop during the one real iteration
        # never waits for it (about 5 s at the paper's scale); freed once the solve is done.
        self.local = local_newton(self.problem)
        self.done = False

    def _step(self):
        if self.done:
            return
        pb = self.problem
        local = self.local
        sup = local.support
        C = pb.n_classes
        zero = np.zeros(sup.col.size * C)
        v = local.solve(zero, zero, zero, 0.0, self.hp["local_tol"], self.check_stop)
        self.check_stop()
        weights = pb.data.node_sizes[sup.node] / pb.n
        self.grad_evals += local.work
        self.count_round(up_per_node=1, down_per_node=0)
        if C == 1:
            self.w = np.bincount(sup.col, weights=weights * v, minlength=pb.d)
        else:  # slot space holds a support feature's C values
            self.w = np.bincount(local.slot_index(), weights=np.repeat(weights, C) * v, minlength=pb.size)
        self.local = None
        self.done = True
