"""The process-wide caches let go of a data set when the last session that asked for it ends
(issue 21, point 3): its problems, optimum (here and in ``solve``'s own cache) and baselines go
with it; what other sessions or unowned callers (runs, the command line) hold stays."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from fedviz.data.baselines import majority_test_error, node_majority_test_error
from fedviz.data.build import DataSpec
from fedviz.problems import optimum as optimum_mod
from fedviz.runner import cache

A = DataSpec(source="preset:identical-nodes", seed=11)
B = DataSpec(source="preset:identical-nodes", seed=12)


@pytest.fixture(autouse=True)
def empty_caches():
    cache.clear()
    yield
    cache.clear()


def test_a_data_set_stays_while_one_owner_remains_and_leaves_with_the_last():
    ds = cache.dataset(A, owner="s1")
    assert cache.dataset(A, owner="s2") is ds and cache.owners(A) == {"s1", "s2"}
    cache.problem(A, "logistic", None, owner="s1")
    cache.optimum(A, "logistic", None, owner="s1")
    assert cache.built(A) and cache.built(A, "logistic", None)

    assert cache.release("s1") == []  # s2 still holds it
    assert cache.built(A) and cache.dataset(A) is ds

    assert cache.release("s2") == [A]
    assert not cache.built(A) and not cache.built(A, "logistic", None) and not cache.built(A, baselines=True)
    assert not any(key[0][0] == ds.fingerprint for key in optimum_mod._CACHE)
    gone = weakref.ref(ds)
    del ds
    gc.collect()
    assert gone() is None, "something still holds the released data set"


def test_unowned_entries_and_other_sessions_data_sets_stay():
    cache.dataset(A)  # a run or the command line: no session
    cache.dataset(B, owner="s1")
    assert cache.release("s1") == [B]
    assert cache.built(A) and not cache.built(B)
    assert cache.release("nobody") == []


def test_the_cached_optimum_and_baselines_are_the_solvers_own():
    spec = A
    opt = cache.optimum(spec, "logistic", None, owner="s")
    solved = optimum_mod.solve(cache.problem(spec), use_cache=False)
    np.testing.assert_array_equal(opt.w, solved.w)
    assert cache.optimum(spec, "logistic", None) is opt
    ds = cache.dataset(spec)
    assert cache.baselines(spec) == {"majority": majority_test_error(ds), "node_majority": node_majority_test_error(ds)}
