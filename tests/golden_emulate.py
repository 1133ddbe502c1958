"""How much room the golden test's rounding bounds leave on another machine, measured on this one.

Recomputes every golden figure in a subprocess that imitates an older x86 CPU — OpenBLAS's Haswell kernels
(``OPENBLAS_CORETYPE``), NumPy without its AVX-512 loops (``NPY_DISABLE_CPU_FEATURES``), numba compiling for
Haswell (``NUMBA_CPU_NAME``) — and compares them with a recording by the bounds of
``tests/unit/test_golden_binary.py``: how many figures differ, whether all lie within their bounds, and the largest
difference as a share of its bound.

Run from the repository root: ``python tests/golden_emulate.py [binary_0b33c0a]`` (a few minutes).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
AVX512 = "AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR"
EMULATION = {"OPENBLAS_CORETYPE": "Haswell", "NPY_DISABLE_CPU_FEATURES": AVX512, "NUMBA_CPU_NAME": "haswell"}

_COMPUTE = """
import importlib.util, sys, numpy as np
spec = importlib.util.spec_from_file_location("make_golden", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
np.savez(sys.argv[2], **m.compute())
"""


def main(name: str = "binary_0b33c0a") -> int:
    sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "unit")]
    import test_golden_binary as golden

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "emulated.npz"
        env = {**os.environ, **EMULATION, "PYTHONPATH": str(ROOT), "NUMBA_CACHE_DIR": str(Path(tmp) / "numba")}
        subprocess.run([sys.executable, "-c", _COMPUTE, str(golden.GOLDEN / "make_golden.py"), str(out)],
                       env=env, check=True)
        with np.load(out) as z:
            now = {k: z[k] for k in z.files}
    recorded, _ = golden._load(name)
    differ, outside, worst = 0, [], (0.0, "")
    for key, a in recorded.items():
        b = np.asarray(now[key], dtype=a.dtype)
        if np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
            continue
        differ += 1
        bound = golden._bound(key, a, recorded, now)
        if bound is None:
            outside.append(key)
            continue
        share = float(np.nanmax(np.abs(a - b) / np.maximum(bound, np.finfo(float).tiny)))
        worst = max(worst, (share, key))
        if share > 1:
            outside.append(key)
    print(f"{name}: emulating {EMULATION}")
    print(f"{differ} of {len(recorded)} figures differ in their bits; {len(outside)} outside their bounds"
          + (f" ({', '.join(outside[:8])})" if outside else "")
          + f"; the largest difference is {worst[0]:.3g} of its bound ({worst[1]})")
    return 1 if outside else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
