"""Unseen nodes (issue 23, point 2) against independent computations: the data set built without
them, dense NumPy sums and plain loops over the rows."""

import math
import sqlite3

import numpy as np
import pytest

from conftest import DATA
from fedviz.data.build import DataSpec, build
from fedviz.data.unseen import draw_unseen, unseen_count, unseen_sentence
from fedviz.errors import ParameterError
from fedviz.problems.objective import Problem
from fedviz.plots.pernode import band_figure, histogram_figure, unseen_caption
from fedviz.problems.unseen import unseen_baselines, unseen_problem
from fedviz.runner.history import store as store_mod
from fedviz.runner.loop import iterate
from fedviz.problems import metrics
from fedviz.problems.pernode import UnseenEvaluator

#: The record keys of the unseen nodes' metrics (the registry's "unseen" scope).
UNSEEN_FIELDS = tuple(k for m in metrics.of_scope("unseen") for k in m.keys)
from fedviz.runner.history.store import RunStore

HEART = str(DATA / "heart_scale")
PRESET = "preset:google-plus-small?nodes=40&words_per_example=20"


def _node_rows(ds, k):
    """(dense training rows, labels, dense test rows, test labels) of node k."""
    sl = ds.node_slice(k)
    t = ds.test_nodes == k
    return ds.X[sl].toarray(), ds.y[sl], ds.X_test[t].toarray(), ds.y_test[t]


@pytest.mark.parametrize("source, fraction, seed", [(HEART, 0.2, 0), (HEART, 0.3, 7), (PRESET, 0.2, 3)])
def test_the_held_out_rows_are_exactly_those_of_the_drawn_nodes(source, fraction, seed):
    whole = build(DataSpec(source, seed=seed))
    ds = build(DataSpec(source, seed=seed, unseen=fraction))
    K = whole.n_nodes
    ids = ds.meta["unseen"]["ids"]
    m = math.floor(fraction * K + 0.5)
    assert len(ids) == m == ds.unseen.n_nodes and ds.n_nodes == K - m and m > 0
    assert ids == sorted(set(ids)) and all(0 <= k < K for k in ids)
    seen_ids = [k for k in range(K) if k not in ids]
    assert ds.meta["unseen"]["seen_ids"] == seen_ids
    for part, members in ((ds.unseen, ids), (ds, seen_ids)):
        for j, k in enumerate(members):  # node j of the part is node k of the whole, row for row
            for a, b in zip(_node_rows(part, j), _node_rows(whole, k)):
                np.testing.assert_array_equal(a, b)
    assert ds.n + ds.unseen.n == whole.n and ds.y_test.size + ds.unseen.y_test.size == whole.y_test.size


def test_the_draw_is_seeded_and_reproducible():
    a, b = (build(DataSpec(PRESET, unseen=0.2, seed=1)) for _ in range(2))
    assert a.meta["unseen"]["ids"] == b.meta["unseen"]["ids"] and a.fingerprint == b.fingerprint
    assert a.unseen.fingerprint == b.unseen.fingerprint
    draws = {tuple(draw_unseen(40, 0.2, s)) for s in range(6)}
    assert len(draws) > 1  # the seed changes which nodes
    np.testing.assert_array_equal(draw_unseen(40, 0.2, 5), draw_unseen(40, 0.2, 5))


def test_unseen_zero_is_the_data_set_of_today():
    a, b = build(DataSpec(HEART)), build(DataSpec(HEART, unseen=0.0))
    assert a.fingerprint == b.fingerprint and b.unseen is None and "unseen" not in b.meta


def test_a_share_that_rounds_to_no_node_says_so_and_changes_nothing():
    # heart_scale: 270 rows, default K = 13 nodes; 0.03 · 13 = 0.39 rounds to 0.
    a, b = build(DataSpec(HEART)), build(DataSpec(HEART, unseen=0.03))
    assert b.unseen is None and b.fingerprint == a.fingerprint
    assert any("holds out none" in w for w in b.meta["warnings"])


@pytest.mark.parametrize("value", [1.0, -0.1, 1.5, float("nan"), "0.2"])
def test_a_share_outside_its_range_is_refused_naming_it(value):
    with pytest.raises(ParameterError, match=r"unseen.*\[0, 1\)"):
        build(DataSpec(HEART, unseen=value))


def test_every_node_held_out_is_refused_with_the_range():
    assert unseen_count(2, 0.7) == 1
    with pytest.raises(ParameterError, match=r"unseen=0\.8.*\[0, 0\.75\) with 2 nodes"):
        unseen_count(2, 0.8)
    with pytest.raises(ParameterError, match=r"unseen.*1 node\b"):
        build(DataSpec(HEART, nodes=1, unseen=0.6))


def test_the_count_is_the_nearest_whole_number_exactly():
    # 0.15 · 10 = 1.5 exactly in the decimal the user typed, but 0.15 is a binary fraction a hair
    # below it: the count follows the float's exact value, as floor(f·K + 1/2) in rationals does.
    from fractions import Fraction
    for K in (1, 3, 7, 10, 20, 33, 100):
        for f in (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.5):
            want = math.floor(Fraction(f) * K + Fraction(1, 2))
            if want < K:
                assert unseen_count(K, f) == want


def test_the_training_objective_sums_over_the_seen_nodes_only():
    whole = build(DataSpec(HEART, seed=2))
    ds = build(DataSpec(HEART, seed=2, unseen=0.3))
    p = Problem(ds, "logistic")
    seen = [k for k in range(whole.n_nodes) if k not in ds.meta["unseen"]["ids"]]
    X = np.vstack([_node_rows(whole, k)[0] for k in seen])
    y = np.concatenate([_node_rows(whole, k)[1] for k in seen])
    w = np.random.default_rng(0).normal(size=p.d) / 3
    lam = 1.0 / len(y)  # the default λ = 1/n of the rows that train
    dense = np.mean(np.logaddexp(0.0, -y * (X @ w))) + 0.5 * lam * w @ w
    assert p.lam == lam and p.value(w) == pytest.approx(dense, rel=1e-13)


def test_the_unseen_problem_keeps_the_training_loss_lambda_and_shape():
    ds = build(DataSpec(HEART, seed=2, unseen=0.3))
    p = Problem(ds, "logistic", lam=0.01)
    u = unseen_problem(p)
    assert u.data is ds.unseen and u.lam == 0.01 and u.loss is p.loss and u.shape == p.shape
    assert unseen_problem(Problem(build(DataSpec(HEART)))) is None
    X, y = ds.unseen.X.toarray(), ds.unseen.y
    w = np.random.default_rng(1).normal(size=p.d) / 3
    assert u.value(w) == pytest.approx(np.mean(np.logaddexp(0.0, -y * (X @ w))) + 0.005 * w @ w, rel=1e-13)


def test_the_unseen_problem_of_many_classes_has_the_model_s_classes():
    dna = str(DATA / "dna.scale")
    ds = build(DataSpec(dna, partition="dirichlet:alpha=0.3", nodes=10, unseen=0.2, seed=1))
    p = Problem(ds, "softmax")
    u = unseen_problem(p)
    assert u.n_classes == p.n_classes == 3 and u.shape == p.shape
    W = np.random.default_rng(3).normal(size=p.size)
    ev = UnseenEvaluator(u)
    fields, vectors = ev.evaluate(W)
    err = vectors["unseen_error"]
    Z = ds.unseen.X_test.toarray() @ W.reshape(p.shape)
    wrong = np.argmax(Z, axis=1) != ds.unseen.y_test.astype(int)
    assert fields["unseen_test_error"] == pytest.approx(wrong.mean(), abs=1e-15)
    for j in range(ds.unseen.n_nodes):
        rows = ds.unseen.test_nodes == j
        assert err[j] == pytest.approx(wrong[rows].mean(), rel=1e-6) if rows.any() else math.isnan(err[j])


def _plain_unseen_scores(whole, ids, w):
    """Each held-out node's sign error on its test rows, by a loop over the rows of the whole data set."""
    Xt = whole.X_test.toarray()
    out = []
    for k in ids:
        rows = [i for i in range(whole.y_test.size) if whole.test_nodes[i] == k]
        wrong = sum((1.0 if float(Xt[i] @ w) > 0 else -1.0) != whole.y_test[i] for i in rows)
        out.append(wrong / len(rows) if rows else math.nan)
    return np.array(out)


def test_the_record_scores_the_unseen_nodes_as_a_plain_loop_does():
    whole = build(DataSpec(PRESET, seed=3))
    ds = build(DataSpec(PRESET, seed=3, unseen=0.25))
    ids = ds.meta["unseen"]["ids"]
    p = Problem(ds)
    w = np.random.default_rng(4).normal(size=p.d) / 4
    (rec,) = list(iterate(p, "gd", iterations=0, w0=w))  # the record of the starting point w
    want = _plain_unseen_scores(whole, ids, w)
    np.testing.assert_allclose(rec.nodes.unseen, want.astype(np.float32), rtol=1e-6)
    ok = np.isfinite(want)
    assert rec.nodes_unseen == len(ids) and rec.unseen_untested == np.count_nonzero(~ok)
    assert rec.unseen_error_mean == pytest.approx(want[ok].mean(), rel=1e-12)
    assert rec.unseen_error_p50 == pytest.approx(np.median(want[ok]), rel=1e-12)
    assert rec.unseen_error_max == pytest.approx(want[ok].max(), rel=1e-12)
    worst = np.sort(want[ok])[::-1][:math.ceil(ok.sum() / 10)]
    assert rec.unseen_error_worst10 == pytest.approx(worst.mean(), rel=1e-12)
    # Pooled over the unseen test rows: every test row of the held-out nodes, counted once.
    rows = np.isin(whole.test_nodes, ids)
    z = whole.X_test[rows] @ w
    assert rec.unseen_test_error == pytest.approx(np.mean(np.where(z > 0, 1.0, -1.0) != whole.y_test[rows]), abs=1e-15)
    # The seen nodes' pooled test error is over their own test rows only.
    zs = whole.X_test[~rows] @ w
    assert rec.test_error == pytest.approx(np.mean(np.where(zs > 0, 1.0, -1.0) != whole.y_test[~rows]), abs=1e-15)
    assert rec.nodes.error.size == ds.n_nodes == whole.n_nodes - len(ids)


def test_a_run_without_unseen_nodes_records_none():
    (rec,) = list(iterate(Problem(build(DataSpec(HEART))), "gd", iterations=0))
    assert rec.nodes_unseen == 0 and rec.nodes.unseen is None
    assert all(math.isnan(getattr(rec, k)) for m in metrics.of_scope("unseen") for k in m.keys if k != "nodes_unseen")


def test_a_separate_test_file_leaves_the_unseen_nodes_unscored_and_says_so():
    train, test = DATA / "agaricus_zero_based.train", DATA / "agaricus_zero_based.test"
    ds = build(DataSpec(str(train), test=str(test), nodes=10, unseen=0.2))
    assert ds.unseen.n_nodes == 2 and ds.unseen.y_test.size == 0
    assert ds.y_test.size == build(DataSpec(str(train), test=str(test), nodes=10)).y_test.size
    assert any("2 of the 2 unseen nodes have no test rows" in w for w in ds.meta["warnings"])
    (rec,) = list(iterate(Problem(ds), "gd", iterations=0))
    assert rec.nodes_unseen == 2 and rec.unseen_untested == 2 and math.isnan(rec.unseen_test_error)


def test_unseen_nodes_without_test_rows_are_given_a_remedy_the_data_page_offers():
    """Issue 31, point 3: a9a with its test file, Dirichlet 0.1, 50 nodes, unseen 0.2 advised raising the test
    fraction, which a test file disables, and said the unseen nodes were "scored on their 0 test rows".  With
    a test file the remedy is dealing its rows to the nodes; dealt, the unseen nodes are scored on the rows
    they were dealt (counted here from the data, independently of the sentence)."""
    from fedviz.data.split import DEAL_LABEL

    train, test = DATA / "agaricus_zero_based.train", DATA / "agaricus_zero_based.test"
    ds = build(DataSpec(str(train), test=str(test), nodes=10, unseen=0.2))
    (warning,) = [w for w in ds.meta["warnings"] if "unseen nodes have no test rows" in w]
    text = unseen_sentence(ds)
    for said in (warning, text):
        assert DEAL_LABEL in said and "test fraction" not in said, said
    assert "cannot be scored" in text and "scored on their" not in text, text
    dealt = build(DataSpec(str(train), test=str(test), nodes=10, unseen=0.2, deal_test=True))
    rows = int(np.count_nonzero(dealt.unseen.test_nodes >= 0))
    assert rows > 0 and f"scored on their {rows:,} test rows" in unseen_sentence(dealt)
    assert not [w for w in dealt.meta["warnings"] if "unseen nodes have no test rows" in w]
    # Without a test file the held-out fraction is the remedy (it is editable there).
    few = build(DataSpec(HEART, nodes=60, test_fraction=0.05, unseen=0.2))
    untested = [w for w in few.meta["warnings"] if "unseen nodes have no test rows" in w]
    assert untested and "raise the test fraction" in untested[0] and DEAL_LABEL not in untested[0], untested


def test_the_sentence_counts_the_held_out_nodes_and_their_rows():
    ds = build(DataSpec(HEART, unseen=0.2, seed=5))
    m, K = ds.unseen.n_nodes, ds.n_nodes + ds.unseen.n_nodes
    text = unseen_sentence(ds)
    assert text.startswith(f"{m} of the {K} nodes ({round(100 * m / K)}%")
    assert f"scored on their {ds.unseen.y_test.size} test rows" in text
    assert f"their {ds.unseen.n} training rows serve only fine-tuning" in text
    assert unseen_sentence(build(DataSpec(HEART))) == ""


def test_a_version_5_history_gains_the_unseen_columns_and_reads_nan(tmp_path):
    path = tmp_path / "v5.sqlite"
    con = sqlite3.connect(path)
    for v in (1, 2, 3, 4, 5):
        for statement in store_mod._MIGRATIONS[v].split(";"):
            if statement.strip():
                con.execute(statement)
    con.execute("PRAGMA user_version = 5")
    con.execute("INSERT INTO runs (id, created, group_id, label, algorithm, hyper_json, config_json, status) "
                "VALUES (1, '2026-01-01', 'g', 'gd', 'gd', '{}', '{}', 'done')")
    con.execute("INSERT INTO records (run_id, iteration, algorithm, objective, suboptimality, test_error, "
                "train_error, grad_norm, rounds, vectors_up, vectors_down, grad_evals, passes, seconds, status, "
                "message, node_error_mean) VALUES (1, 0, 'gd', 0.5, 0.1, 0.2, 0.2, 1.0, 0, 0, 0, 0, 0.0, 0.0, "
                "'done', '', 0.25)")
    con.commit()
    con.close()
    with RunStore(path) as s:
        (rec,) = s.records(1)
        assert rec.node_error_mean == 0.25 and all(math.isnan(getattr(rec, f)) for f in UNSEEN_FIELDS)
        ds = build(DataSpec(HEART, unseen=0.2))
        recs = list(iterate(Problem(ds), "gd", iterations=1))
        s.append_records(1, recs[1:])
        got = s.records(1)[1]
        for f in UNSEEN_FIELDS:
            assert getattr(got, f) == getattr(recs[1], f) or math.isnan(getattr(recs[1], f)), f
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == store_mod.SCHEMA_VERSION >= 6


def test_the_unseen_baselines_against_plain_loops():
    whole = build(DataSpec(PRESET, seed=1))
    ds = build(DataSpec(PRESET, seed=1, unseen=0.2))
    ids = ds.meta["unseen"]["ids"]
    p = Problem(ds)
    w = np.random.default_rng(6).normal(size=p.d) / 4
    got = unseen_baselines(p, w)
    rows = np.isin(whole.test_nodes, ids)
    yt = whole.y_test[rows]
    # The seen training rows' majority label (ties to -1), for every unseen test row.
    seen_y = np.concatenate([_node_rows(whole, k)[1] for k in range(whole.n_nodes) if k not in ids])
    top = 1.0 if np.sum(seen_y > 0) > seen_y.size / 2 else -1.0
    assert got["majority"] == pytest.approx(np.mean(yt != top), abs=1e-15)
    # Each unseen node's own majority training label on its own test rows (a tie: the seen+unseen
    # rule of node_majority_labels, the data set's overall majority, here the unseen part's).
    wrong = total = 0
    u_y = ds.unseen.y
    overall = 1.0 if np.sum(u_y > 0) > u_y.size / 2 else -1.0
    for k in ids:
        _, y, _, ty = _node_rows(whole, k)
        pos, neg = np.sum(y > 0), np.sum(y < 0)
        label = 1.0 if pos > neg else -1.0 if neg > pos else overall
        wrong += np.sum(ty != label)
        total += ty.size
    assert got["node_majority"] == pytest.approx(wrong / total, abs=1e-15)
    z = whole.X_test[rows].toarray() @ w
    assert got["optimum"] == pytest.approx(np.mean(np.where(z > 0, 1.0, -1.0) != yt), abs=1e-15)
    assert unseen_baselines(Problem(build(DataSpec(PRESET))), w) == {}


def _last(**fields):
    from types import SimpleNamespace
    return SimpleNamespace(iteration=30, **fields)


def test_the_run_page_sentence_says_how_many_are_unseen_and_what_scores_them():
    last = {"GD": _last(unseen_test_error=0.125, unseen_error_p50=0.1, test_error=0.25),
            "FSVRG": _last(unseen_test_error=math.nan, unseen_error_p50=math.nan, test_error=0.2)}
    text = unseen_caption(last, K=8, seen=32, test_rows=246)
    assert text == ("8 of the 40 nodes are unseen (held out of training, 20%): each run's model in force is scored "
                    "on their 246 test rows, as a new client would be. GD at iteration 30: error 12.5% on the unseen "
                    "nodes' test rows against 25.0% on the seen nodes', the median unseen node 10.0%.")
    assert unseen_caption(last, K=0, seen=40, test_rows=0) == ""
    none = unseen_caption({"GD": _last(unseen_test_error=math.nan, unseen_error_p50=math.nan, test_error=0.2)},
                          K=2, seen=8, test_rows=0)
    assert none.endswith("They have no test rows (a separate test file's rows belong to no node): they cannot be "
                         "scored. To score every node, tick 'Deal the test rows to the nodes' on Data (fedviz "
                         "--deal-test): each test row goes to a node drawn by the nodes' shares of its class, and "
                         "the pooled test error stays as it is.")
    some = unseen_caption(last, K=8, seen=32, test_rows=200, untested=3)
    assert some.endswith("10.0%. 3 of the 8 unseen nodes have no test rows and are left out of their per-node error "
                         "(counted, not scored).")


def test_the_unseen_band_and_histogram_draw_the_unseen_columns():
    cols = {"iteration": np.arange(3), "rounds": np.arange(3), "test_error": np.array([0.4, 0.3, 0.2]),
            "unseen_test_error": np.array([0.5, 0.4, 0.35]), "unseen_error_p10": np.array([0.1, 0.1, 0.05]),
            "unseen_error_p50": np.array([0.45, 0.4, 0.3]), "unseen_error_p90": np.array([0.9, 0.8, 0.7])}
    fig = band_figure({"GD": cols}, metric="unseen_error")
    traces = {t.name: t for t in fig.data}
    assert fig.layout.title.text == "Test error per unseen node"
    np.testing.assert_array_equal(traces["GD p90"].y, cols["unseen_error_p90"])
    np.testing.assert_array_equal(traces["GD p10"].y, cols["unseen_error_p10"])
    np.testing.assert_array_equal(traces["GD: median node (band 10th–90th)"].y, cols["unseen_error_p50"])
    np.testing.assert_array_equal(traces["GD: pooled"].y, cols["unseen_test_error"])
    h = histogram_figure(np.array([0.1, 0.5, np.nan], dtype=np.float32), pooled=0.3, label="GD", unseen=True)
    assert h.layout.title.text == "Unseen nodes by test error at the last iteration (GD)"
    np.testing.assert_allclose(h.data[0].x, [0.1, 0.5])


def test_identities_of_before_hold_without_unseen_nodes_and_change_with_them():
    from fedviz.experiments.spec import Arm, Experiment
    from fedviz.runner.config import RunConfig, from_query, to_query
    from fedviz.runner.history.describe import describe_run

    plain, held = DataSpec("preset:google-plus-small"), DataSpec("preset:google-plus-small", unseen=0.2)
    e0, e1 = (Experiment("x", d, (Arm.of("gd"),)) for d in (plain, held))
    assert "unseen" not in e0.as_json()["data"] and e1.as_json()["data"]["unseen"] == 0.2
    assert e0.content_hash != e1.content_hash
    c0, c1 = RunConfig(data=plain), RunConfig(data=held)
    assert "unseen" not in c0.as_json()["data"] and "unseen" not in to_query(c0)
    assert to_query(c1)["unseen"] == "0.2" and from_query(to_query(c1)) == (c1, [])
    assert describe_run(c1.as_json()) == "google-plus-small · the data's own nodes · unseen nodes 0.2"
