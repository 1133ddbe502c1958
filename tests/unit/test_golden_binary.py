"""The guard of issue 22's shape refactor: binary figures bitwise as they were before it.

Issue 22 gives the model the shape (d, C) and asks that the C = 1 refactor land "with every
existing figure bitwise unchanged (Figure 2, the property cells, the tests' oracles)"; its
acceptance: "Binary results bitwise unchanged after the shape refactor (a test holds a set of
figures from before it)".  This is that test, and the ONE place in the suite where numbers
recorded from the code's own output are the oracle: the recording is of the code at commit
6512b3b, before the refactor, and the claim tested is "the same arithmetic", not "the right
answer" (the other tests check the right answer against independent references).

``tests/data/golden/make_golden.py`` made ``binary_6512b3b.npz`` once and is never re-run to make
this test pass (its docstring says what it records and why).  Every array is compared with
``np.array_equal`` (NaN equal to NaN): a difference in the last bit is a failure.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from conftest import DATA

GOLDEN = DATA / "golden"


@pytest.fixture(scope="module")
def golden():
    spec = importlib.util.spec_from_file_location("make_golden", GOLDEN / "make_golden.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with np.load(GOLDEN / "binary_6512b3b.npz") as z:
        recorded = {k: z[k] for k in z.files}
    return recorded, module.compute()


def _groups(keys) -> list[str]:
    return sorted({"/".join(k.split("/")[:2]) for k in keys})


#: Algorithms registered after the recording (issue 23): they had no figures before the refactor.
NEWER = ("ditto", "apfl")


def _newer(key: str) -> bool:
    return any(f"/{name}/" in key or key.endswith(f"/{name}") for name in NEWER)


def test_the_same_figures_are_recorded_and_computed(golden):
    recorded, now = golden
    assert sorted(recorded) == sorted(k for k in now if not _newer(k))
    assert all(not _newer(k) for k in recorded)


@pytest.mark.parametrize("group", ["run/gplus40", "run/a9a2000", "opt/gplus40", "opt/a9a2000",
                                   "problem/gplus", "problem/fedprox", "figure2/", "cell/"])
def test_figures_are_bitwise_unchanged(golden, group):
    recorded, now = golden
    keys = [k for k in recorded if k.startswith(group)]
    assert keys, f"no recorded figure under {group}"
    changed = []
    for k in keys:
        a, b = recorded[k], now.get(k)
        if b is None or a.shape != np.shape(b) or not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
            diff = ""
            if b is not None and a.shape == np.shape(b) and a.dtype.kind == "f":
                diff = f" (max |Δ| {np.nanmax(np.abs(a - np.asarray(b, dtype=float)), initial=0):.3g})"
            changed.append(k + diff)
    assert not changed, f"{len(changed)} of {len(keys)} figures changed: " + "; ".join(changed[:12])
