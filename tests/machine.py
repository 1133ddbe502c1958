"""What decides the last bits of a floating-point result on this machine: the CPU and its vector
extensions, the BLAS and the kernel it picked, and the numerical libraries' versions.

OpenBLAS chooses its kernels per CPU (``architecture`` below), NumPy dispatches its ufuncs and
reductions per vector extension, and numba compiles for the host CPU.  Two machines that agree on
this fingerprint compute the same bits for the same program; two that differ may differ in the last
bits of any result that goes through them.  The golden test compares bitwise only where the
fingerprint is one on which its recording was reproduced (``tests/data/golden/provenance.json``).
"""

from __future__ import annotations

import os
import platform

#: The CPU flags that change which kernels OpenBLAS, NumPy and LLVM pick.
_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512dq", "avx512vl", "avx512bw", "avx512_bf16", "asimd", "sve")
#: Environment variables that override those choices (an emulated older CPU, a capped BLAS).
_ENV = ("OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES", "NPY_ENABLE_CPU_FEATURES", "NUMBA_CPU_NAME",
        "NUMBA_CPU_FEATURES")


def _cpuinfo() -> tuple[str, list[str]]:
    model, flags = platform.processor() or platform.machine(), []
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "CPU part") and model in ("", platform.machine(), platform.processor()):
                    model = value.strip()
                elif key in ("flags", "Features") and not flags:
                    flags = value.split()
    except OSError:
        pass
    return model, sorted(f for f in _FLAGS if f in flags)


def fingerprint() -> dict:
    """This machine's arithmetic, as a JSON-able dict (compare two with ``==``)."""
    import numba
    import numpy
    import scipy
    import scipy.linalg  # noqa: F401  (loads SciPy's own BLAS, if it has one, for threadpoolctl to see)
    from threadpoolctl import threadpool_info

    model, flags = _cpuinfo()
    blas = sorted(f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')}"
                  for i in threadpool_info() if i.get("user_api") == "blas")
    return {
        "cpu": model,
        "machine": platform.machine(),
        "flags": flags,
        "blas": blas,
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "numba": numba.__version__,
        "env": {k: os.environ[k] for k in _ENV if os.environ.get(k)},
    }
