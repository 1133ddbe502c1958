"""The synthetic generators and their presets.

Oracles: scikit-learn's LogisticRegression for the optimum of the calibration targets;
the paper's Section 4.1 figures; :func:`fedviz.data.dataset.chronological_split` for
the split; exact identities (row sums, column sets, copies) checked by hand from X; a
chi-square test for the Zipf sampler; the recipe of Li et al. (2020) for the FedProx
covariance.
"""

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings, strategies as st
from scipy import stats
from sklearn.linear_model import LogisticRegression

from fedviz.data.baselines import (classification_error, majority_test_error,
                                   node_majority_test_error)
from fedviz.data.dataset import chronological_split
from fedviz.data.presets import (PRESETS, format_preset_spec, make_preset, override_keys,
                                 parse_preset_spec, preset_config)
from fedviz.data.synthetic import (FedProxConfig, SyntheticConfig, _Alias, generate,
                                   node_totals, sample_stream, train_rows)
from fedviz.errors import FedvizError, ParameterError

SMALL = SyntheticConfig(n_nodes=12, size_distribution="lognormal", size_mean=60, size_sigma=0.8,
                        size_min=5, size_max=300, n_words=300, topics=5, seed=7)


@pytest.fixture(scope="module")
def gplus_small():
    return make_preset("google-plus-small")


def same_data(a, b):
    return a.fingerprint == b.fingerprint and (a.X != b.X).nnz == 0 \
        and np.array_equal(a.y, b.y) and np.array_equal(a.offsets, b.offsets) \
        and (a.X_test != b.X_test).nnz == 0 and np.array_equal(a.test_nodes, b.test_nodes)


# -- determinism ---------------------------------------------------------------------------
@pytest.mark.parametrize("config", [SMALL, FedProxConfig(n_nodes=5)])
def test_same_seed_same_data_other_seed_other_data(config):
    a, b = generate(config), generate(config)
    assert same_data(a, b)
    c = generate(dataclasses.replace(config, seed=config.seed + 1))
    assert a.fingerprint != c.fingerprint


def test_label_knobs_leave_sizes_and_words_alone():
    # Separate random streams: moving a label knob redraws only the labels.
    a = generate(SMALL)
    b = generate(dataclasses.replace(SMALL, node_bias_std=0.1, label_noise=0.2))
    assert np.array_equal(a.offsets, b.offsets) and (a.X != b.X).nnz == 0
    assert not np.array_equal(a.y, b.y)


def test_data_do_not_depend_on_the_block_size(monkeypatch):
    import fedviz.data.synthetic as synthetic

    config = dataclasses.replace(SMALL, n_nodes=40)
    whole = generate(config)
    monkeypatch.setattr(synthetic, "_CHUNK_ROWS", 97)
    assert same_data(generate(config), whole)


# -- shapes, sizes, split ------------------------------------------------------------------
def test_google_plus_small_shape(gplus_small):
    ds = gplus_small
    assert (ds.n_nodes, ds.n, ds.d) == (500, 50_000, 5_002)
    sizes = ds.node_sizes
    assert sizes.min() >= 30 and sizes.max() <= 2_250      # train_rows of totals 40 .. 3,000
    assert sizes.max() > 10 * np.median(sizes)              # unbalanced
    assert ds.meta["source"] == "synthetic:google-plus-small"
    assert ds.meta["params"] == dataclasses.asdict(preset_config("google-plus-small"))
    assert ds.meta["seed"] == 0 and ds.meta["task"] == "classification"


def test_google_plus_config_matches_the_paper():
    cfg = preset_config("google-plus")
    assert (cfg.n_nodes, cfg.d) == (10_000, 20_002)
    assert round(cfg.train_size_mean * cfg.n_nodes) == 2_166_693
    assert list(train_rows([cfg.size_min, cfg.size_max], cfg.test_fraction)) == [75, 9_000]
    totals = node_totals(cfg)  # cheap: sizes only
    assert train_rows(totals, cfg.test_fraction).sum() == 2_166_693
    assert totals.min() == 100 and totals.max() == 12_000


def test_google_plus_at_few_nodes_keeps_per_node_sizes():
    ds = make_preset("google-plus", nodes=150, seed=4)
    assert ds.n_nodes == 150 and ds.n == round(216.6693 * 150) and ds.d == 20_002
    assert ds.node_sizes.min() >= 75 and ds.node_sizes.max() <= 9_000


@pytest.mark.parametrize("config", [
    SMALL, FedProxConfig(n_nodes=5, test_fraction=0.25),
    dataclasses.replace(SMALL, n_nodes=3, layout="identical-nodes")])
def test_split_is_the_chronological_split_of_the_stream(config):
    X, y, node = sample_stream(config)
    ds = generate(config)
    is_test = chronological_split(node, config.test_fraction)
    # The stream is node by node; grouping keeps the order, so the sets must match exactly.
    assert np.all(np.diff(node) >= 0)
    assert (ds.X != X[~is_test]).nnz == 0 and np.array_equal(ds.y, y[~is_test])
    assert (ds.X_test != X[is_test]).nnz == 0 and np.array_equal(ds.y_test, y[is_test])
    assert np.array_equal(ds.test_nodes, node[is_test])
    # Node k keeps m_k − ⌊0.25 m_k⌋ rows for training, the rest for testing.
    m = np.bincount(node)
    assert np.array_equal(ds.node_sizes, m - np.floor(0.25 * m))
    assert np.array_equal(np.bincount(ds.test_nodes, minlength=len(m)), np.floor(0.25 * m))


def test_bias_in_every_row_unknown_in_some(gplus_small):
    ds, cfg = gplus_small, preset_config("google-plus-small")
    for X in (ds.X, ds.X_test):
        assert np.all(X[:, cfg.bias_column].toarray() == 1.0)
        assert set(np.unique(X.data)) == {1.0}                       # binary bag of words
    # P(unknown word in a post) = 1 − exp(−λq) under Poisson tokens.
    share = ds.X[:, cfg.unknown_column].mean()
    p = -np.expm1(-cfg.words_per_example * cfg.unknown_rate)
    assert abs(share - p) < 5 * np.sqrt(p * (1 - p) / ds.n)


def test_positive_rate_is_met(gplus_small):
    y = np.concatenate([gplus_small.y, gplus_small.y_test])
    assert abs(np.mean(y > 0) - 0.3316) < 5 * np.sqrt(0.3316 * 0.6684 / len(y))


def test_word_columns_are_numbered_by_frequency(gplus_small):
    counts = gplus_small.stats.feature_counts[:5_000]
    assert stats.spearmanr(np.arange(5_000), counts).statistic < -0.9


# -- calibration ---------------------------------------------------------------------------
def test_google_plus_small_is_calibrated_to_the_paper(gplus_small):
    ds = gplus_small
    lam = 1.0 / ds.n
    # C = 1/(λn) makes sklearn's C·Σ loss + ½‖w‖² the paper's objective times C·n.
    clf = LogisticRegression(C=1.0 / (lam * ds.n), fit_intercept=False, solver="newton-cg",
                             tol=1e-6, max_iter=1000)
    clf.fit(ds.X, ds.y)
    optimum = classification_error(ds.X_test @ clf.coef_.ravel(), ds.y_test)
    assert majority_test_error(ds) == pytest.approx(0.3316, abs=0.03)
    assert optimum == pytest.approx(0.2627, abs=0.03)
    assert node_majority_test_error(ds) == pytest.approx(0.1714, abs=0.03)



def test_google_plus_small_has_the_papers_lambda_as_its_best(gplus_small):
    # Section 4.1 chose λ = 1/n as the λ with the best optimum test error, and Figure 2's
    # "FSVRG reaches the optimum's test error" needs it; scikit-learn is the oracle.
    ds = gplus_small
    errors = {}
    for m in (0.3, 1, 3, 10, 30):                   # λ = m/n, so C = 1/(λn) = 1/m
        clf = LogisticRegression(C=1.0 / m, fit_intercept=False, solver="newton-cg",
                                 tol=1e-6, max_iter=1000).fit(ds.X, ds.y)
        errors[m] = classification_error(ds.X_test @ clf.coef_.ravel(), ds.y_test)
    assert errors[1] <= min(errors.values()) + 0.003
    assert errors[30] > errors[1] + 0.01            # the λ axis matters: heavy λ underfits

# -- the extreme cases of Section 3.1 ------------------------------------------------------
def test_one_node():
    from fedviz.properties import one_node

    ds = make_preset("one-node")
    assert ds.n_nodes == 1 and ds.n == 3_000 and len(ds.y_test) == 1_000
    assert one_node(ds).holds
    assert np.all(ds.test_nodes == 0)


def test_disjoint_features_each_feature_on_one_node():
    ds = make_preset("disjoint-features")
    assert ds.n_nodes == 10
    # By hand: the nodes of the entries of each column, train and test together.
    X = sp.vstack([ds.X, ds.X_test]).tocoo()
    node = np.concatenate([ds.node_of_row, ds.test_nodes])[X.row]
    lo = np.full(ds.d, ds.n_nodes)
    hi = np.full(ds.d, -1)
    np.minimum.at(lo, X.col, node)
    np.maximum.at(hi, X.col, node)
    used = hi >= 0
    assert np.all(lo[used] == hi[used])
    assert np.all(ds.stats.omega <= 1)
    assert used.sum() > 0.9 * ds.d
    from fedviz.properties import disjoint_features

    measured = disjoint_features(ds)  # property (C)'s condition, on the training rows
    assert measured.holds and measured.omega_max == 1 and measured.shared_features == 0


def test_identical_nodes_hold_identical_copies():
    ds = make_preset("identical-nodes")
    K = ds.n_nodes
    assert K == 10
    first = ds.X[ds.node_slice(0)]
    for k in range(1, K):
        assert (ds.X[ds.node_slice(k)] != first).nnz == 0
        assert np.array_equal(ds.y[ds.node_slice(k)], ds.y[ds.node_slice(0)])
    test_rows = [np.flatnonzero(ds.test_nodes == k) for k in range(K)]
    for k in range(1, K):
        assert (ds.X_test[test_rows[k]] != ds.X_test[test_rows[0]]).nnz == 0
        assert np.array_equal(ds.y_test[test_rows[k]], ds.y_test[test_rows[0]])
    from fedviz.properties import identical_nodes

    measured = identical_nodes(ds)  # property (D)'s condition
    assert measured.holds and measured.distinct_datasets == 1


def test_iid_preset_is_balanced_with_one_word_distribution():
    ds = make_preset("iid")
    assert (ds.n_nodes, ds.n, ds.d) == (500, 50_000, 5_002)
    assert np.all(ds.node_sizes == 100)
    # No node effects: knowing the node cannot beat the global majority by much.
    assert node_majority_test_error(ds) >= majority_test_error(ds) - 0.01


# -- FedProx Synthetic(α, β) ---------------------------------------------------------------
def test_fedprox_synthetic_is_dense_with_60_features_and_a_bias():
    ds = make_preset("fedprox-synthetic-binary")
    assert ds.n_nodes == 30 and ds.d == 61
    assert np.all(np.diff(ds.X.indptr) == 61)                   # dense rows
    assert np.all(ds.X[:, 60].toarray() == 1.0)
    assert set(np.unique(ds.y)) == {-1.0, 1.0}
    # Sizes ⌊LogNormal(4, 2)⌋ + 50 split 90/10: every node keeps ≥ 45 training rows.
    assert ds.node_sizes.min() >= 45
    # Within a node x ~ N(v_k, diag(j^−1.2)): check the variances on the largest node.
    k = int(np.argmax(ds.node_sizes))
    x = ds.X[ds.node_slice(k)].toarray()[:, :60]
    want = np.arange(1, 61) ** -1.2
    m = len(x)
    ratio = x.var(axis=0, ddof=1) / want                        # ~ χ²_{m−1} / (m − 1)
    assert np.all(np.abs(ratio - 1) < 6 * np.sqrt(2 / (m - 1)))


def test_fedprox_alpha_beta_overrides():
    name, over = parse_preset_spec("fedprox-synthetic?alpha=0.5&beta=0&nodes=8")
    cfg = preset_config(name, **over)
    assert (cfg.alpha, cfg.beta, cfg.n_nodes) == (0.5, 0.0, 8)
    assert make_preset(name, **over).n_nodes == 8


# -- overrides and errors ------------------------------------------------------------------
def test_parse_preset_spec_converts_types():
    assert parse_preset_spec("google-plus-small?nodes=200&seed=3") == \
        ("google-plus-small", {"nodes": 200, "seed": 3})
    name, over = parse_preset_spec("preset:iid?words_per_example=10.5&bias_feature=no"
                                   "&train_size_mean=none&n_words=1e3")
    assert name == "iid"
    assert over == {"words_per_example": 10.5, "bias_feature": False, "train_size_mean": None,
                    "n_words": 1000}
    assert isinstance(over["n_words"], int) and isinstance(over["words_per_example"], float)
    assert parse_preset_spec("one-node") == ("one-node", {})
    spec = format_preset_spec(name, over)
    assert parse_preset_spec(spec) == (name, over)


def test_make_preset_with_overrides():
    ds = make_preset("google-plus-small", nodes=40, seed=3)
    assert ds.n_nodes == 40 and ds.n == 4_000 and ds.meta["params"]["seed"] == 3
    assert preset_config("google-plus-small", nodes="40").n_nodes == 40   # text is converted


@pytest.mark.parametrize("spec, match", [
    ("google-plus-small?colour=red", r"one of nodes, .*seed"),
    ("no-such-preset", r"one of google-plus, google-plus-small"),
    ("google-plus-small?nodes=abc", r"google-plus-small\.nodes.*integer"),
    ("google-plus-small?nodes=2.5", r"integer"),
    ("google-plus-small?nodes=0", r"synthetic\.n_nodes=0"),
    # A link cannot ask for an unbounded draw: every size and the seed have a ceiling.
    ("google-plus-small?nodes=100000000", r"synthetic\.n_nodes=100000000 .*\[1, 1000000\]"),
    ("google-plus-small?seed=4294967296", r"synthetic\.seed=4294967296 .*\[0, 4294967295\]"),
    ("google-plus-small?words=1000000000", r"synthetic\.n_words=1000000000 .*\[1, 10000000\]"),
    ("fedprox-synthetic?nodes=200000", r"fedprox\.n_nodes=200000 .*\[1, 100000\]"),
    ("google-plus-small?nodes=3&n_nodes=4", r"given once"),
    ("google-plus-small?nodes", r"key=value"),
    ("iid?bias_feature=maybe", r"true or false"),
    ("fedprox-synthetic?words=10", r"one of nodes, features"),
    ("", r"non-empty"),
])
def test_bad_specs_are_refused_with_a_clear_message(spec, match):
    with pytest.raises(ParameterError, match=match):
        parse_preset_spec(spec)


def test_unknown_override_lists_the_valid_keys():
    with pytest.raises(ParameterError) as err:
        make_preset("one-node", colour="red")
    assert err.value.name == "one-node override" and err.value.value == "colour"
    for key in ("nodes", "seed", "words_per_example"):
        assert key in err.value.allowed
    assert set(override_keys("fedprox-synthetic")) >= {"nodes", "alpha", "beta", "seed"}


@pytest.mark.parametrize("kwargs, name", [
    (dict(n_nodes=0), "synthetic.n_nodes"),
    (dict(size_min=10, size_max=5), "synthetic.size_max"),
    (dict(size_distribution="uniform"), "synthetic.size_distribution"),
    (dict(size_distribution="constant", size_mean=50_000), "synthetic.size_mean"),
    (dict(train_size_mean=1e6), "synthetic.train_size_mean"),
    (dict(test_fraction=1.0), "synthetic.test_fraction"),
    (dict(layout="disjoint-features"), "synthetic.bias_feature"),
    (dict(layout="disjoint-features", bias_feature=False, unknown_feature=False, n_words=50,
          n_nodes=60), "synthetic.n_words"),
    (dict(positive_rate=1.0), "synthetic.positive_rate"),
    (dict(bias_feature="yes"), "synthetic.bias_feature"),
])
def test_config_validation_names_the_field(kwargs, name):
    with pytest.raises(ParameterError) as err:
        SyntheticConfig(**kwargs)
    assert err.value.name == name


def test_oversized_draws_fail_fast_with_a_message():
    with pytest.raises(FedvizError, match=r"million entries .* use fewer nodes"):
        make_preset("google-plus", nodes=500_000)
    with pytest.raises(FedvizError, match="million entries"):
        make_preset("fedprox-synthetic", nodes=50_000, size_log_mean=8)


# -- building blocks -----------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(K=st.integers(1, 60), lo=st.integers(1, 50), span=st.integers(0, 400),
       f=st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.9]), share=st.floats(0, 1),
       dist=st.sampled_from(["lognormal", "powerlaw", "constant"]), seed=st.integers(0, 99))
def test_sizes_hit_the_training_total_exactly(K, lo, span, f, share, dist, seed):
    hi = lo + span
    t_lo, t_hi = train_rows([lo, hi], f)
    mean = t_lo + share * (t_hi - t_lo)
    cfg = SyntheticConfig(n_nodes=K, size_distribution=dist, size_min=lo, size_max=hi,
                          size_mean=(lo + hi) / 2, train_size_mean=mean, test_fraction=f,
                          seed=seed)
    totals = node_totals(cfg)
    assert totals.min() >= lo and totals.max() <= hi
    assert train_rows(totals, f).sum() == round(mean * K)


def test_alias_sampler_draws_zipf():
    pmf = np.arange(1, 51, dtype=float) ** -1.1
    pmf /= pmf.sum()
    draws = _Alias(pmf).draw(np.random.default_rng(0).random(200_000))
    observed = np.bincount(draws, minlength=50)
    assert stats.chisquare(observed, 200_000 * pmf).pvalue > 1e-3


def test_every_preset_is_described_and_builds_its_config():
    for name, preset in PRESETS.items():
        assert preset.name == name and len(preset.description) > 40
        preset_config(name)
