"""Who uses the cores: fedviz's compiled kernels, not BLAS.

fedviz's heavy work runs in numba kernels on every core (the products over row blocks,
the per-node local passes).  Its BLAS calls are small: dot products and updates of
d-vectors.  OpenBLAS still splits those over its own threads (above about 10⁴ entries)
and then keeps them spinning, so they fight numba's threads for the same cores, and
nothing in fedviz gains from threaded BLAS.  ``FEDVIZ_BLAS_THREADS`` (default 1) sets the
count, so the effect can be measured: ``FEDVIZ_BLAS_THREADS=2 python -m fedviz bench
--scale paper`` against the same command without it.

numba's kernels run on GNU OpenMP, whose threads spin for a while after each kernel before they
sleep.  Alone that saves a wake-up; with two computations on the same cores (two visitors' runs on
one server, two test workers) each one's spinning threads hold the cores the other waits for.
``fedviz/__init__.py`` therefore sets ``OMP_WAIT_POLICY=PASSIVE`` unless the user set it or
``GOMP_SPINCOUNT``: ``python -m fedviz bench --concurrent`` measures both policies, alone and two
at once (docs/performance.md).
"""

from __future__ import annotations

import os

from ..validation import env_int

_BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


def blas_threads() -> int:
    """The BLAS thread count fedviz sets: ``FEDVIZ_BLAS_THREADS``, default 1."""
    return env_int("FEDVIZ_BLAS_THREADS", 1, low=1)


def single_threaded_blas() -> None:
    """Give BLAS :func:`blas_threads` threads (one unless asked otherwise): in every BLAS
    library loaded now and, through the environment, in those loaded later.  Idempotent
    and cheap (about a millisecond)."""
    count = blas_threads()
    for var in _BLAS_THREAD_VARIABLES:
        os.environ.setdefault(var, str(count))
    from threadpoolctl import threadpool_limits

    threadpool_limits(count, user_api="blas")
