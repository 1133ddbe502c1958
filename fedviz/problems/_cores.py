"""Who uses the cores: fedviz's compiled kernels, not BLAS.

fedviz's heavy work runs in numba kernels on every core (the products over row blocks,
the per-node local passes).  Its BLAS calls are small: dot products and updates of
d-vectors.  OpenBLAS still splits those over its own threads (above about 10⁴ entries)
and then keeps them spinning, so they fight numba's threads for the same cores.  At
paper scale one GD iteration took 0.22 s with two BLAS threads and 0.13 s with one
(``python -m fedviz bench --scale paper`` on a 2-core machine), and nothing in fedviz
gains from threaded BLAS.
"""

from __future__ import annotations

import os

_BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


def single_threaded_blas() -> None:
    """Give BLAS one thread: in every BLAS library loaded now and, through the environment,
    in those loaded later.  Idempotent and cheap (about a millisecond)."""
    for var in _BLAS_THREAD_VARIABLES:
        os.environ.setdefault(var, "1")
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")
