"""DataSpec.deal_test (issue 23, point 1): test rows of no node dealt to the nodes by class share.

Checked against independent counts: a constructed case where a class lives on one node (all its test
rows must go there), a chi-square test of the dealt counts against n_test^c · n_k^c / n^c (fixed seeds,
enough rows), the rows themselves unchanged (so the pooled test error is), the default off bitwise
unchanged, and unseen nodes keeping the test rows dealt to them."""

import dataclasses

import numpy as np
import pytest
from scipy import stats

from conftest import DATA
from fedviz.data.baselines import node_majority_test_error
from fedviz.data.build import DataSpec, build, deal_sentence, unassigned_test_rows_possible
from fedviz.data.split import DEAL_LABEL, DEAL_REMEDY, deal_test_rows
from fedviz.data.unseen import draw_unseen
from fedviz.errors import ParameterError
from fedviz.learn.chart_notes import node_majority_note
from fedviz.problems.objective import Problem

A9A = DataSpec(str(DATA / "a9a"), test=str(DATA / "a9a.t"), partition="dirichlet:alpha=0.3", nodes=20)
PRESET = DataSpec("preset:google-plus-small", partition="dirichlet:alpha=0.1", nodes=100, seed=3)


def _same_rows(a, b, *, test=True):
    """The training rows bitwise equal, and (``test``) the test rows as a multiset: each row written as
    its label and its nonzeros (column indices sorted, explicit zeros dropped: the same bytes for the
    same dense row), the sorted lists compared.  (Dense tuples cost seconds for 16k rows of 5,002 columns.)"""
    assert np.array_equal(a.offsets, b.offsets) and np.array_equal(a.y, b.y)
    assert (a.X != b.X).nnz == 0 and a.X.shape == b.X.shape
    if test:
        def rows(ds):
            X = ds.X_test.tocsr(copy=True)
            X.eliminate_zeros()
            X.sort_indices()
            cut = X.indptr
            return sorted((label, X.indices[i:j].tobytes(), X.data[i:j].tobytes())
                          for label, i, j in zip(ds.y_test.tolist(), cut[:-1], cut[1:]))
        assert a.X_test.shape == b.X_test.shape and rows(a) == rows(b)


def test_a_class_held_by_one_node_sends_every_test_row_of_it_there():
    # Node 2 holds every training row of class 1; class 0 is on nodes 0 and 1 only; class 3 on no node.
    node = np.array([0, 0, 1, 1, 1, 2, 2, 0])
    train = np.array([0, 2, 0, 2, 2, 1, 1, 0])
    test = np.array([1, 1, 1, 0, 0, 2, 3, 3, 3, 3] * 30)
    dealt = deal_test_rows(node, 3, seed=5, train_classes=train, test_classes=test, n_classes=4)
    assert dealt.dtype == np.int64 and dealt.shape == test.shape
    assert np.all(dealt[test == 1] == 2)
    assert set(dealt[test == 0].tolist()) == {0, 1} and set(dealt[test == 2].tolist()) == {0, 1}
    assert set(dealt[test == 3].tolist()) == {0, 1, 2}  # no training row of class 3: any node (uniform)
    # Seeded: the same again; another seed another.
    again = deal_test_rows(node, 3, seed=5, train_classes=train, test_classes=test, n_classes=4)
    assert np.array_equal(again, dealt)
    assert not np.array_equal(deal_test_rows(node, 3, seed=6, train_classes=train, test_classes=test,
                                             n_classes=4), dealt)


def test_bad_input_names_the_parameter():
    with pytest.raises(ParameterError, match="test_classes"):
        deal_test_rows([0, 1], 2, seed=0, train_classes=[0, 1], test_classes=[2], n_classes=2)
    with pytest.raises(ParameterError, match="node_of_row"):
        deal_test_rows([0, 3], 2, seed=0, n_test=1)
    with pytest.raises(ParameterError, match="seed"):
        deal_test_rows([0, 1], 2, seed=-1, n_test=1)


def _chi2_p(observed, expected):
    keep = expected > 0
    assert observed[~keep].sum() == 0  # no row where the share is 0
    return stats.chisquare(observed[keep], expected[keep]).pvalue


def test_dealt_counts_follow_each_node_s_share_of_the_class():
    rng = np.random.default_rng(0)
    K, C, n = 12, 3, 6000
    node = rng.integers(0, K, n)
    train = np.minimum((rng.random(n) * (1 + node % 3)).astype(np.int64), C - 1)  # label skew by node
    test = rng.integers(0, C, 30000)
    dealt = deal_test_rows(node, K, seed=11, train_classes=train, test_classes=test, n_classes=C)
    for c in range(C):
        share = np.bincount(node[train == c], minlength=K) / np.count_nonzero(train == c)
        observed = np.bincount(dealt[test == c], minlength=K)
        assert _chi2_p(observed, share * np.count_nonzero(test == c)) > 1e-3, c


def test_real_targets_are_dealt_by_node_size():
    node = np.repeat(np.arange(5), [10, 20, 30, 40, 100])
    dealt = deal_test_rows(node, 5, seed=2, n_test=20000)
    expected = np.array([10, 20, 30, 40, 100]) / 200 * 20000
    assert _chi2_p(np.bincount(dealt, minlength=5), expected) > 1e-3


def test_a_separate_test_file_is_dealt_and_every_node_then_has_a_per_node_majority():
    off, on = build(A9A), build(dataclasses.replace(A9A, deal_test=True))
    assert np.all(off.test_nodes < 0) and np.all(on.test_nodes >= 0)
    _same_rows(off, on)
    # A test row of class c only on a node with training rows of c.
    node = np.asarray(on.node_of_row)
    for c in (-1.0, 1.0):
        holds = np.bincount(node[on.y == c], minlength=on.n_nodes) > 0
        assert holds[on.test_nodes[on.y_test == c]].all()
    # The pooled test error of any model is that of the same rows; the per-node majority now exists.
    w = np.random.default_rng(1).normal(size=on.d)
    assert Problem(on, "logistic").test_error(w) == Problem(off, "logistic").test_error(w)
    assert np.isnan(node_majority_test_error(off))
    # The per-node majority, recounted: each node's commoner training label (ties to +1 or -1: both near).
    pos = np.bincount(node, weights=(on.y > 0).astype(float), minlength=on.n_nodes)
    label = np.where(2 * pos > on.node_sizes, 1.0, -1.0)
    assert node_majority_test_error(on) == pytest.approx(np.mean(label[on.test_nodes] != on.y_test), abs=2e-3)
    assert on.meta["dealt"] == on.y_test.size and on.meta["params"]["deal_test"] is True
    assert on.meta["split"] == (f"the separate test file a9a.t; its {on.y_test.size:,} test rows, which belonged "
                                "to no node, dealt to the nodes by class share (seed 0)")
    assert deal_sentence(on).startswith(f"{on.y_test.size:,} test rows that belonged to no node are dealt to the "
                                        "nodes by their shares of each class among the training rows (seed 0)")
    assert deal_sentence(off) == ""


def test_a_re_partitioned_preset_is_dealt_its_counts_follow_the_shares_and_the_seed():
    off, on = build(PRESET), build(dataclasses.replace(PRESET, deal_test=True))
    _same_rows(off, on)
    assert np.all(off.test_nodes < 0) and np.all(on.test_nodes >= 0)
    assert "stay those of the generator's nodes" not in on.meta["split"]
    node = np.asarray(on.node_of_row)
    for c in (-1.0, 1.0):
        share = np.bincount(node[on.y == c], minlength=on.n_nodes) / np.count_nonzero(on.y == c)
        observed = np.bincount(on.test_nodes[on.y_test == c], minlength=on.n_nodes)
        assert _chi2_p(observed, share * np.count_nonzero(on.y_test == c)) > 1e-3
    # The data seed seeds it: the same spec the same deal, another seed (another partition too) another.
    assert np.array_equal(build(dataclasses.replace(PRESET, deal_test=True)).test_nodes, on.test_nodes)


def test_multiclass_test_file_is_dealt_by_class():
    spec = DataSpec(str(DATA / "dna.scale"), test=str(DATA / "dna.scale.t"), partition="dirichlet:alpha=0.5",
                    nodes=10, deal_test=True)
    ds = build(spec)
    assert ds.multiclass and np.all(ds.test_nodes >= 0)
    node = np.asarray(ds.node_of_row)
    for c in range(ds.n_classes):
        holds = np.bincount(node[ds.y == c], minlength=ds.n_nodes) > 0
        assert holds[ds.test_nodes[ds.y_test == c]].all(), c


def test_off_by_default_and_a_no_op_where_every_test_row_has_a_node():
    assert DataSpec("x").deal_test is False
    spec = DataSpec(str(DATA / "heart_scale"), nodes=5)
    assert not unassigned_test_rows_possible(spec)
    assert unassigned_test_rows_possible(A9A) and unassigned_test_rows_possible(PRESET)
    assert not unassigned_test_rows_possible(dataclasses.replace(PRESET, partition=None))
    a, b = build(spec), build(dataclasses.replace(spec, deal_test=True))
    _same_rows(a, b, test=False)
    assert (a.X_test != b.X_test).nnz == 0 and np.array_equal(a.y_test, b.y_test)
    assert np.array_equal(a.test_nodes, b.test_nodes) and b.meta["dealt"] == 0 and deal_sentence(b) == ""
    assert a.meta["split"] == b.meta["split"]


def test_unseen_nodes_keep_the_test_rows_dealt_to_them():
    dealt = build(dataclasses.replace(PRESET, deal_test=True))
    both = build(dataclasses.replace(PRESET, deal_test=True, unseen=0.2))
    held = draw_unseen(dealt.n_nodes, 0.2, PRESET.seed)
    seen = np.setdiff1d(np.arange(dealt.n_nodes), held)
    per_node = np.bincount(dealt.test_nodes, minlength=dealt.n_nodes)
    # Renumbered 0.. in the old order: each part's nodes hold the test rows dealt to them before.
    assert np.array_equal(np.bincount(both.unseen.test_nodes, minlength=held.size), per_node[held])
    assert np.array_equal(np.bincount(both.test_nodes, minlength=seen.size), per_node[seen])
    assert both.y_test.size + both.unseen.y_test.size == dealt.y_test.size
    # The held-out nodes' test labels: the dealt ones of those nodes.
    mine = np.isin(dealt.test_nodes, held)
    assert np.array_equal(np.sort(both.unseen.y_test), np.sort(dealt.y_test[mine]))


def test_the_n_a_sentences_name_the_option():
    assert DEAL_LABEL in DEAL_REMEDY and "--deal-test" in DEAL_REMEDY
    note = node_majority_note(float("nan"), 0.2, test_file=True)
    assert note.startswith("**per-node majority**: n/a") and note.endswith(DEAL_REMEDY)
    from fedviz.plots.personal import no_test_rows
    from fedviz.problems.pernode import untested_sentence

    assert DEAL_REMEDY in no_test_rows(100) and DEAL_REMEDY in untested_sentence(8, 8, 100)
    assert DEAL_REMEDY not in no_test_rows(0) and DEAL_REMEDY not in untested_sentence(8, 8, 0)  # an empty test set
    assert DEAL_REMEDY not in untested_sentence(2, 8, 100)  # some nodes scored: the rows have nodes


def test_a_toml_experiment_carries_it():
    from fedviz.experiments.spec import from_toml

    text = ('name = "x"\ndata = "preset:google-plus-small"\npartition = "dirichlet:alpha=1"\nnodes = 10\n'
            '{}[[algorithm]]\nname = "gd"\n')
    assert from_toml(text.format("deal_test = true\n")).data.deal_test is True
    assert from_toml(text.format("")).data.deal_test is False


def test_real_targets_are_dealt_by_node_size_through_the_builder():
    spec = DataSpec(str(DATA / "dna.scale"), test=str(DATA / "dna.scale.t"), task="regression", nodes=8,
                    deal_test=True)
    ds = build(spec)
    assert ds.task == "regression" and np.all(ds.test_nodes >= 0)
    assert deal_sentence(ds).startswith(f"{ds.y_test.size:,} test rows that belonged to no node are dealt to the "
                                        "nodes by their shares of all training rows (real targets)")
    expected = ds.node_sizes / ds.n * ds.y_test.size
    assert _chi2_p(np.bincount(ds.test_nodes, minlength=ds.n_nodes), expected) > 1e-3


def test_the_link_the_stored_config_and_the_command_line_carry_it():
    from fedviz.cli import build_parser, data_spec_from_args
    from fedviz.experiments.spec import Arm, Experiment
    from fedviz.runner.config import RunConfig, from_query, to_query
    from fedviz.runner.history.describe import describe_run

    on = RunConfig(data=dataclasses.replace(PRESET, deal_test=True))
    off = RunConfig(data=PRESET)
    assert to_query(on)["deal_test"] == "1" and "deal_test" not in to_query(off)
    assert from_query(to_query(on)) == (on, [])
    assert on.as_json()["data"]["deal_test"] is True and "deal_test" not in off.as_json()["data"]
    assert "test rows dealt to the nodes" in describe_run(on.as_json())
    assert "dealt" not in describe_run(off.as_json())
    # An experiment's identity without it is that of before it (its stored cells stay found).
    e = Experiment("x", PRESET, (Arm.of("gd"),))
    assert "deal_test" not in e.as_json()["data"]
    assert Experiment("x", dataclasses.replace(PRESET, deal_test=True), (Arm.of("gd"),)).as_json()["data"][
        "deal_test"] is True
    parser = build_parser()
    args = parser.parse_args(["inspect", str(DATA / "a9a"), "--test", str(DATA / "a9a.t"), "--deal-test"])
    assert data_spec_from_args(args).deal_test is True
    args = parser.parse_args(["inspect", str(DATA / "a9a"), "--test", str(DATA / "a9a.t")])
    assert data_spec_from_args(args).deal_test is False


@pytest.mark.parametrize("spec", [A9A, PRESET], ids=["a9a-file", "preset"])
def test_the_warning_about_nodes_without_test_rows_gives_the_dealing_as_its_reason(spec):
    """A node dealt no test row is counted (against a bincount of the dealt nodes) and the reason given
    is the dealing, not a test fraction (the preset's warning once said 'a node needs 4 rows to hold one
    out at test fraction 0.25', which is not how dealt rows arrive)."""
    ds = build(dataclasses.replace(spec, deal_test=True, nodes=400))
    missing = int(np.sum(np.bincount(ds.test_nodes[ds.test_nodes >= 0], minlength=ds.n_nodes) == 0))
    said = [w for w in ds.meta["warnings"] if "test row" in w and "nodes" in w]
    assert missing > 0  # 400 nodes under label skew: some small node draws no row (else the test says nothing)
    assert any(w.startswith(f"{missing:,} of {ds.n_nodes:,} nodes were dealt no test row") for w in said), said
    assert not any("to hold one out at test fraction" in w for w in said), said
