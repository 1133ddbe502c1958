"""Fair test sets for files: the seeded, stratified random split; the default K; the
warnings a data set carries (``meta["warnings"]``) and the split it names (``meta["split"]``).

Oracles: label counts from NumPy on the raw file, the per-node count ⌊f·m_k⌋ of
:func:`chronological_split` (an exact identity), row ids written into the files the
tests build, and plain arithmetic on balanced node sizes.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import DATA
from fedviz.data.baselines import majority_test_error
from fedviz.data.build import DataSpec, build, default_nodes
from fedviz.data.dataset import chronological_split
from fedviz.data.presets import make_preset
from fedviz.data.split import random_split
from fedviz.errors import ParameterError


def _rows(path):
    return [line for line in (DATA / path).read_bytes().split(b"\n") if line.strip()]


A9A = _rows("a9a")
A9A_LABELS = np.array([float(line.split()[0]) for line in A9A])


def _sorted_a9a(descending: bool) -> bytes:
    order = np.argsort(-A9A_LABELS if descending else A9A_LABELS, kind="stable")
    return b"\n".join(A9A[i] for i in order) + b"\n"


def _numbered(labels, qids=None) -> bytes:
    """A file whose row i has feature 1 = i + 1: a row's id survives any reordering."""
    lines = []
    for i, label in enumerate(labels):
        q = b"" if qids is None else b" qid:%d" % qids[i]
        lines.append(b"%s%s 1:%d" % (str(label).encode(), q, i + 1))
    return b"\n".join(lines) + b"\n"


def _ids_by_node(ds):
    """{node: (train row ids, test row ids)} from the ids written in feature 1."""
    train_ids = np.rint(ds.X[:, 0].toarray().ravel()).astype(int) - 1
    test_ids = np.rint(ds.X_test[:, 0].toarray().ravel()).astype(int) - 1
    return {k: (train_ids[ds.node_slice(k)], test_ids[ds.test_nodes == k]) for k in range(ds.n_nodes)}


def _class_counts_per_node(ds):
    """(K, 2) arrays of training and test rows of class -1 and +1 on each node."""
    K = ds.n_nodes
    train = np.stack([np.bincount(ds.node_of_row, weights=ds.y == c, minlength=K) for c in (-1, 1)], 1)
    test = np.stack([np.bincount(ds.test_nodes, weights=ds.y_test == c, minlength=K) for c in (-1, 1)], 1)
    return train, test


# --------------------------------------------------------------------------- a9a sorted by label

@pytest.mark.parametrize("descending", [False, True])
def test_sorted_a9a_gets_a_stratified_test_set(descending):
    ds = build(DataSpec(source=_sorted_a9a(descending), name="a9a-sorted"))
    minority = np.mean(A9A_LABELS > 0)  # the oracle: 7,841 of 32,561 raw labels are +1
    assert set(np.unique(ds.y_test)) == {-1.0, 1.0}
    assert np.mean(ds.y_test > 0) == pytest.approx(minority, abs=0.01)
    assert majority_test_error(ds) == pytest.approx(minority, abs=0.01)
    train, test = _class_counts_per_node(ds)
    total = train + test
    assert np.all(np.abs(test - 0.25 * total) < 1)  # every node and class: within 1 of f · count
    np.testing.assert_array_equal(test.sum(1), np.floor(0.25 * total.sum(1)))
    assert ds.meta["split"] == "random 25% of each node's rows, stratified by label (seed 0)"
    assert ds.meta["warnings"] == []


def test_sorted_a9a_in_file_order_is_what_the_old_default_did():
    ds = build(DataSpec(source=_sorted_a9a(False), name="a9a-sorted", split="chronological"))
    assert majority_test_error(ds) > 0.9  # the last quarter of every node is nearly all +1
    assert ds.meta["split"] == "chronological: the last 25% of each node's rows in file order"
    assert any("is the file sorted?" in w for w in ds.meta["warnings"])


def test_a_one_class_test_set_is_flagged():
    ds = build(DataSpec(source=_sorted_a9a(True), name="a9a-sorted", split="chronological", nodes=1))
    assert np.unique(ds.y_test).tolist() == [-1.0]
    (w,) = ds.meta["warnings"]
    assert "one class only" in w and f"all {ds.y_test.size:,} test rows are -1" in w
    assert "split='random'" in w


# --------------------------------------------------------------------------- which rows

def test_chronological_takes_each_nodes_last_rows_in_file_order():
    labels = np.repeat([-1, 1], [150, 50])  # sorted by label
    ds = build(DataSpec(source=_numbered(labels), split="chronological", nodes=7))
    for k, (train, test) in _ids_by_node(ds).items():
        rows = np.sort(np.r_[train, test])
        assert list(np.sort(test)) == list(rows[len(rows) - len(rows) // 4:])


def test_random_split_is_not_file_order_and_is_seeded():
    labels = np.repeat([-1, 1], [150, 50])
    a = build(DataSpec(source=_numbered(labels), nodes=7))
    b = build(DataSpec(source=_numbered(labels), nodes=7))
    assert a.fingerprint == b.fingerprint
    assert set(np.unique(a.y_test)) == {-1.0, 1.0}
    assert any(set(test) != set(np.sort(np.r_[train, test])[-len(test):])
               for train, test in _ids_by_node(a).values())
    # the seed moves the split itself, not only the partition
    node = np.repeat(np.arange(7), 30)
    y = np.tile(np.r_[-np.ones(20), np.ones(10)], 7)
    m0, m0b, m1 = (random_split(node, 0.25, seed=s, labels=y) for s in (0, 0, 1))
    np.testing.assert_array_equal(m0, m0b)
    assert np.any(m0 != m1)


def test_qid_files_split_by_their_own_groups_keep_their_order():
    labels = np.tile([1, -1, -1, 1, -1, -1, -1, 1], 10)
    qids = np.repeat(np.arange(10), 8)
    ds = build(DataSpec(source=_numbered(labels, qids)))
    assert ds.meta["partition"] == "natural" and ds.meta["split"].startswith("chronological")
    for train, test in _ids_by_node(ds).values():
        rows = np.sort(np.r_[train, test])
        assert list(np.sort(test)) == list(rows[-2:])  # ⌊0.25 · 8⌋ = 2
    # repartitioned, the groups are no longer the nodes: random again
    mixed = build(DataSpec(source=_numbered(labels, qids), partition="iid", nodes=4))
    assert mixed.meta["split"].startswith("random")


def test_regression_is_random_within_each_node_without_strata():
    rng = np.random.default_rng(5)
    targets = np.sort(rng.normal(size=120)).round(3) + 0.0005  # real-valued, sorted
    ds = build(DataSpec(source=_numbered(targets), nodes=6))
    assert ds.task == "regression"
    assert ds.meta["split"] == "random 25% of each node's rows (seed 0)"
    for train, test in _ids_by_node(ds).values():
        assert len(test) == (len(train) + len(test)) // 4
        assert set(test) != set(np.sort(np.r_[train, test])[-len(test):])


def test_a_separate_test_file_is_named():
    ds = build(DataSpec(source=str(DATA / "a9a"), test=str(DATA / "a9a.t")))
    assert ds.meta["split"] == "the separate test file a9a.t" and ds.meta["warnings"] == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2)), min_size=1, max_size=200),
       st.floats(0, 0.99), st.integers(0, 2**32 - 1))
def test_random_split_counts_match_the_chronological_rule_and_each_stratum(rows, fraction, seed):
    node = np.array([r[0] for r in rows])
    label = np.array([r[1] for r in rows])
    mask = random_split(node, fraction, seed=seed, labels=label)
    reference = chronological_split(node, fraction)  # the node totals, an exact identity
    for k in np.unique(node):
        assert mask[node == k].sum() == reference[node == k].sum()
        for c in np.unique(label[node == k]):
            here = (node == k) & (label == c)
            assert abs(mask[here].sum() - fraction * here.sum()) < 1


def test_random_split_picks_each_row_of_a_stratum_equally_often():
    # one node: 12 rows of class 0 and 8 of class 1 at f = 0.3 -> 6 test rows, by the
    # largest remainder 4 of class 0 (quota 3.6) and 2 of class 1 (quota 2.4)
    label = np.r_[np.zeros(12), np.ones(8)]
    node = np.zeros(20, dtype=int)
    hits = np.zeros(20)
    seeds = 3000
    for seed in range(seeds):
        m = random_split(node, 0.3, seed=seed, labels=label)
        assert m[:12].sum() == 4 and m[12:].sum() == 2
        hits += m
    rate = hits / seeds  # each row's inclusion is Binomial(3000, p): 5 standard errors
    for sl, p in ((slice(0, 12), 4 / 12), (slice(12, 20), 2 / 8)):
        assert np.all(np.abs(rate[sl] - p) < 5 * math.sqrt(p * (1 - p) / seeds))


# --------------------------------------------------------------------------- default K

def test_a_150_row_file_gets_nodes_with_rows_to_train_and_test_on():
    head = b"\n".join(_rows("heart_scale")[:150]) + b"\n"
    ds = build(DataSpec(source=head, name="heart150"))
    K = ds.n_nodes
    assert 1 < K <= 150 // 20 and ds.meta["params"]["nodes"] == K
    assert np.all(ds.node_sizes >= 1)
    assert np.all(np.bincount(ds.test_nodes, minlength=K) >= 1)
    assert ds.meta["warnings"] == []


@pytest.mark.parametrize("n", [0, 1, 19, 20, 150, 270, 1999, 2000, 32561, 10**7])
@pytest.mark.parametrize("f", [0.0, 0.01, 0.1, 0.25, 0.5, 0.9])
def test_default_nodes_leaves_balanced_nodes_rows_to_test_on(n, f):
    K = default_nodes(n, f)
    assert 1 <= K <= 100
    need = 20 if f == 0 else max(20, math.ceil(2 / f))
    if n >= need:
        smallest = n // K  # a balanced (iid) split's smallest node
        assert smallest >= 20 and (f == 0 or math.floor(f * smallest) >= 1)
        assert K == 100 or (n // (K + 1) < need)  # as many nodes as that allows, up to 100
    else:
        assert K == 1


def test_default_nodes_refuses_bad_input():
    with pytest.raises(ParameterError, match="test_fraction"):
        default_nodes(100, 1.0)
    with pytest.raises(ParameterError, match="n_rows"):
        default_nodes(-1, 0.25)


def test_a_k_above_the_rows_is_cut_and_its_empty_test_set_flagged():
    head = b"\n".join(_rows("heart_scale")[:150]) + b"\n"
    ds = build(DataSpec(source=head, nodes=1000))
    assert ds.n_nodes == 150 and ds.meta["params"]["nodes"] == 150 and ds.y_test.size == 0
    small, w = ds.meta["warnings"]  # 150 nodes of one row each: both said
    assert small.startswith("150 of 150 nodes hold fewer than 5 training rows (150 hold a single row)")
    assert "test set has no rows" in w and "fewer nodes" in w


def test_nodes_without_test_rows_are_counted():
    # 270 rows on 70 balanced nodes: 60 of 4 rows and 10 of 3, and ⌊0.25 · 3⌋ = 0
    ds = build(DataSpec(source=str(DATA / "heart_scale"), nodes=70))
    assert any(w.startswith("10 of 70 nodes have no test rows") for w in ds.meta["warnings"])


def test_test_fraction_zero_is_flagged():
    ds = build(DataSpec(source=str(DATA / "heart_scale"), test_fraction=0))
    assert ds.y_test.size == 0 and ds.meta["split"].startswith("no test set")
    assert len(ds.meta["warnings"]) == 1 and "raise the test fraction" in ds.meta["warnings"][0]


# --------------------------------------------------------------------------- cut files, presets, checks

def test_cut_files_carry_their_warning_into_the_data_set():
    raw = (DATA / "broken" / "a9a.truncated_1MiB").read_bytes()
    cut = raw[:raw.rfind(b" ")]
    line = cut.count(b"\n") + 1
    ds = build(DataSpec(source=cut, name="a9a.cut"))
    assert any(w.startswith(f"a9a.cut, line {line:,} has no line end") for w in ds.meta["warnings"])
    pair = build(DataSpec(source=str(DATA / "a9a"), test=cut, test_name="cut.t"))
    assert [w for w in pair.meta["warnings"] if "no line end" in w][0].startswith(f"cut.t, line {line:,}")
    assert build(DataSpec(source=str(DATA / "a9a"))).meta["warnings"] == []


def test_presets_keep_their_generators_split():
    ds = build(DataSpec(source="preset:google-plus-small"))
    assert ds.fingerprint == make_preset("google-plus-small", seed=0).fingerprint
    assert ds.meta["split"].startswith("the generator's time order: each author's last 25% of posts")
    assert ds.meta["warnings"] == []
    chrono = build(DataSpec(source="preset:fedprox-synthetic", split="chronological"))
    assert "each node's last 10% of rows" in chrono.meta["split"]
    with pytest.raises(ParameterError, match=r"split='random'.*'auto' or 'chronological'"):
        build(DataSpec(source="preset:identical-nodes", split="random"))


@pytest.mark.parametrize("value", ["sorted", "", None, 1])
def test_split_is_validated(value):
    with pytest.raises(ParameterError, match=r"split=.*'auto', 'random', 'chronological'"):
        build(DataSpec(source=str(DATA / "heart_scale"), split=value))


@pytest.mark.parametrize("value", [1.0, -0.1, 1.5, float("nan")])
def test_test_fraction_stays_in_zero_one(value):
    with pytest.raises(ParameterError, match=r"test_fraction.*\[0, 1\)"):
        build(DataSpec(source=str(DATA / "heart_scale"), test_fraction=value))
