"""Synthetic federated data sets: simulated Google+ posts, and FedProx's Synthetic(α, β).

This module owns the two generators behind :mod:`fedviz.data.presets`:

* :class:`SyntheticConfig` — K authors (nodes) write short posts; a post is a sparse
  binary bag of words and its label says whether it got a comment.  It stands in for
  the Google+ data of the paper's Section 4.1, which was never released, and has the
  traits of the setting of Section 1.2: massively distributed, non-IID, unbalanced and
  sparse.  Two extra layouts give the extreme cases (C) and (D) of Section 3.1.
* :class:`FedProxConfig` — the dense Synthetic(α, β) of Li et al. (2020), "Federated
  Optimization in Heterogeneous Networks", Section 5.1, with ±1 labels.

:func:`generate` turns either config into a :class:`~fedviz.data.dataset.FederatedDataset`;
:func:`sample_stream` gives the same rows before the train/test split.

The bag-of-words model
----------------------
1. **Sizes.**  Node k holds m_k posts (train + test), drawn from a log-normal, a
   truncated power law or a constant, bounded to [size_min, size_max]; optionally
   rescaled so the training rows average exactly ``train_size_mean`` per node.
2. **Topics (non-IID features).**  Node k has a topic mixture π_k ~ Dirichlet(c, ..., c);
   each post draws one topic z ~ π_k.  A small c gives every author a few topics.
3. **Words.**  A post has Poisson(λ(1 − q)) in-vocabulary word tokens: a share γ is
   drawn from its topic's distribution and the rest from the global one, both
   Zipf(s) over the vocabulary (the topic's over its own random ordering of the words).
   With probability 1 − exp(−λq) it also has out-of-vocabulary tokens.
4. **Features.**  x is binary (1.0 entries): one column per distinct vocabulary word in
   the post, then a bias column (1 in every row), then an unknown-word column (1 when
   the post has an out-of-vocabulary token), as in the paper's d = 20,000 + 2.  Binary
   rather than tf-weighted because words rarely repeat in a short post, and 0/1 rows
   keep the paper's counts (n^j, ω^j) and the bag-of-words reading plain.  Word
   columns are numbered by decreasing expected frequency, like a vocabulary of the most
   frequent words, so ω^j against j looks like the paper's Figure 1.
5. **Labels.**  P(y = +1) = σ(μ + β_k + θ_z + ⟨w, x⟩) with a node bias β_k ~ N(0, τ²),
   a topic effect θ_z ~ N(0, σ_θ²) and word weights w_j ~ N(0, σ_w²); then each label
   flips with probability ``label_noise``.  μ is given, or solved so that a given share
   of posts is positive.  The words, and the topics they reveal, are what a global
   linear model can learn; β_k only knowing the node reveals — so per-node majority
   beats the global optimum, which beats predicting the majority, as in the paper.
6. **Split.**  A node's rows form a stream in time order (:func:`sample_stream`); the
   earlier m_k − ⌊f·m_k⌋ rows train and the rest test — the paper's per-author
   chronological split, by the rule of :func:`fedviz.data.dataset.chronological_split`.

A node's rows are exchangeable (nothing drifts in time), so the chronological split is a
random split in distribution.  That lets the generator draw the training rows of all
nodes before all test rows and hand both sets out as views of one array, with no copy.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import FedvizError, ParameterError
from ..params import Param, param_table
from ..validation import check_real
from .dataset import FederatedDataset

__all__ = ["SyntheticConfig", "FedProxConfig", "SYNTHETIC_PARAMS", "FEDPROX_PARAMS", "CONFIG_PARAMS",
           "generate", "sample_stream", "node_totals",
           "train_rows", "SIZE_DISTRIBUTIONS", "LAYOUTS", "MAX_ENTRIES", "MAX_NODES", "MAX_SEED"]

SIZE_DISTRIBUTIONS = ("lognormal", "powerlaw", "constant")
LAYOUTS = ("shared", "disjoint-features", "identical-nodes")

#: Rows per block of token-level work: it bounds the temporaries (about 12 tokens a row,
#: a few 8-byte arrays each) to ~100 MB whatever n is.  The data do not depend on it:
#: the blocks take their uniforms from one stream in turn, and ``Generator.random``
#: gives the same numbers in one call or in several.
_CHUNK_ROWS = 1 << 18

#: Refuse draws expected to store more entries than this (12 bytes each, so ~3 GB; the
#: google-plus preset has 36 million): a mistyped size should fail fast with a message
#: rather than exhaust the machine.
MAX_ENTRIES = 250_000_000
#: Largest number of nodes, rows per node, vocabulary and seed a configuration may ask
#: for: far beyond the paper (10,000 nodes, 20,000 words), but finite, so that a link
#: cannot make the sizes' own draw exhaust the machine before :data:`MAX_ENTRIES` is checked.
MAX_NODES = 1_000_000
MAX_ROWS_PER_NODE = 10_000_000
MAX_WORDS = 10_000_000
MAX_SEED = 2**32 - 1


# ---------------------------------------------------------------------------------------
# Configurations
# ---------------------------------------------------------------------------------------
def _set(obj, name: str, value) -> None:
    object.__setattr__(obj, name, value)  # frozen dataclass: store the normalised value


def _validate(obj, owner: str, params) -> None:
    """Check and normalise every field of ``obj`` by its :class:`~fedviz.params.Param`
    (:data:`SYNTHETIC_PARAMS`, :data:`FEDPROX_PARAMS`); errors name ``<owner>.<field>``."""
    for name, p in params.items():
        _set(obj, name, p.validate(getattr(obj, name), owner))


def train_rows(totals: np.ndarray, test_fraction: float) -> np.ndarray:
    """Training rows of nodes with ``totals`` rows: m − ⌊f·m⌋, at least 1 when f < 1.

    The rule of :func:`fedviz.data.dataset.chronological_split`, kept here in closed form
    so the generator can route rows without grouping them first.
    """
    totals = np.asarray(totals, dtype=np.int64)
    return totals - np.floor(test_fraction * totals).astype(np.int64)


@dataclass(frozen=True)
class SyntheticConfig:
    """Every knob of the bag-of-words generator (see the module docstring for the model).

    Sizes count a node's rows before the split (train + test).  Values are validated on
    construction; a bad one raises :class:`~fedviz.errors.ParameterError` naming the
    field (``synthetic.<field>``) and its allowed range.

    Attributes
    ----------
    n_nodes : int
        K, the number of nodes (authors).
    size_distribution : {"lognormal", "powerlaw", "constant"}
        Law of the node sizes m_k.  "powerlaw" is a Pareto law truncated to
        [size_min, size_max], P(m > x) ∝ x^(−size_exponent); "lognormal" has mean
        ``size_mean`` and log-scale spread ``size_sigma`` and is clipped to the bounds;
        "constant" gives every node ``size_mean`` rows.
    size_min, size_max : int
        Bounds of m_k.
    size_mean, size_sigma, size_exponent : float
        Parameters of the size law (each used by the laws named above).
    train_size_mean : float or None
        If set, the drawn sizes are scaled (then re-bounded and rounded by largest
        remainders) so the training rows sum to exactly round(train_size_mean · K);
        this pins n, e.g. to the paper's 2,166,693.
    n_words : int
        Vocabulary size; d = n_words + bias_feature + unknown_feature.
    words_per_example : float
        λ, the mean number of word tokens per post (in and out of the vocabulary).
        Repeated words are merged, so the mean number of distinct words is a bit lower.
    zipf_exponent : float
        s in P(rank r) ∝ r^(−s).
    unknown_rate : float
        q, the chance that a token is outside the vocabulary.
    topics : int
        T, the number of topics; 1 gives every node the same word distribution.
    topic_weight : float
        γ, the share of a post's tokens drawn from its topic rather than the global
        distribution.
    dirichlet_concentration : float
        c, the per-topic parameter of the nodes' Dirichlet topic mixtures: the lower, the
        fewer topics per node and the less IID the features.
    label_offset : float
        μ, the common logit offset (sets the overall share of +1 labels).
    positive_rate : float or None
        If set, μ is instead solved so that the mean of P(y = +1) over all rows (train
        and test, before label noise) equals this share — 0.3316 reproduces the paper's
        predict-majority error whatever the other knobs and the seed.
    node_bias_std : float
        τ, the spread of the per-node logit offsets β_k (the per-node label bias).
    topic_bias_std : float
        σ_θ, the spread of the per-topic logit effects θ_z.
    word_weight_std : float
        σ_w, the spread of the ground-truth word weights w_j (the unknown-word column
        gets one too; the bias column gets 0 since μ plays its part).
    label_noise : float
        Chance that a label is flipped after it is drawn.
    bias_feature, unknown_feature : bool
        Whether to append the bias column and the unknown-word column.
    layout : {"shared", "disjoint-features", "identical-nodes"}
        "shared": one vocabulary for all nodes.  "disjoint-features": the vocabulary is
        cut into K blocks of n_words // K words and node k only uses block k, so every
        feature lives on one node (property C of Section 3.1; needs both extra columns
        off).  "identical-nodes": one node's data is drawn and every node gets a copy
        (property D).
    test_fraction : float
        f, the later share of each node's rows that becomes the test set.
    seed : int
        Seed of every random choice.
    """

    n_nodes: int = 100
    size_distribution: str = "powerlaw"
    size_min: int = 100
    size_max: int = 12_000
    size_mean: float = 300.0
    size_sigma: float = 1.0
    size_exponent: float = 1.5
    train_size_mean: float | None = None
    n_words: int = 5_000
    words_per_example: float = 12.0
    zipf_exponent: float = 1.0
    unknown_rate: float = 0.03
    topics: int = 50
    topic_weight: float = 0.5
    dirichlet_concentration: float = 0.1
    label_offset: float = -1.0
    positive_rate: float | None = None
    node_bias_std: float = 2.0
    topic_bias_std: float = 0.5
    word_weight_std: float = 0.3
    label_noise: float = 0.0
    bias_feature: bool = True
    unknown_feature: bool = True
    layout: str = "shared"
    test_fraction: float = 0.25
    seed: int = 0

    def __post_init__(self):
        p = "synthetic."
        _validate(self, "synthetic", SYNTHETIC_PARAMS)
        if self.size_max < self.size_min:
            raise ParameterError(p + "size_max", self.size_max,
                                 f"integer >= size_min = {self.size_min}")
        if self.size_distribution == "constant" and not (
                self.size_min <= self.size_mean <= self.size_max):
            raise ParameterError(p + "size_mean", self.size_mean,
                                 f"number in [{self.size_min}, {self.size_max}] "
                                 "(size_min, size_max) for constant sizes")
        if self.train_size_mean is not None:
            lo, hi = train_rows([self.size_min, self.size_max], self.test_fraction)
            _set(self, "train_size_mean", check_real(p + "train_size_mean", self.train_size_mean,
                                                     low=int(lo), high=int(hi)))
        if self.layout == "disjoint-features":
            if self.n_words < self.n_nodes:
                raise ParameterError(p + "n_words", self.n_words,
                                     f"integer >= n_nodes = {self.n_nodes} when "
                                     "layout='disjoint-features' (one block of words per node)")
            for name in ("bias_feature", "unknown_feature"):
                if getattr(self, name):
                    raise ParameterError(p + name, True, "false when layout='disjoint-features'",
                                         hint="a shared column would appear on every node")

    @property
    def d(self) -> int:
        """Number of columns: words, then the bias column, then the unknown-word column."""
        return self.n_words + int(self.bias_feature) + int(self.unknown_feature)

    @property
    def bias_column(self) -> int | None:
        return self.n_words if self.bias_feature else None

    @property
    def unknown_column(self) -> int | None:
        return self.n_words + int(self.bias_feature) if self.unknown_feature else None


#: What FedProx's Synthetic(α, β) labels a row with (:class:`FedProxConfig`).
FEDPROX_LABELS = ("classes", "binary")


@dataclass(frozen=True)
class FedProxConfig:
    """Synthetic(α, β) of Li et al. (2020), Section 5.1, reduced to ±1 labels.

    Node k draws u_k ~ N(0, α²), B_k ~ N(0, β²), W_k ~ N(u_k, 1) of shape
    (n_features, n_classes), b_k ~ N(u_k, 1) and v_k ~ N(B_k, 1); its rows are
    x ~ N(v_k, Σ) with Σ = diag(j^(−1.2)), and the class is argmax(W_kᵀx + b_k).  As in the
    authors' reference code (``generate_synthetic.py``), α and β are standard deviations
    (the paper writes N(0, α); the two agree at the default α = β = 1), and node sizes
    are ⌊LogNormal(4, 2)⌋ + 50 with a 90/10 per-node split.

    With ``labels="classes"`` the label is the class code 0..n_classes − 1, as published (a
    softmax model's data); with ``labels="binary"`` it is +1 iff the class is in the first half,
    class < n_classes // 2 — which halves the label heterogeneity (issue 22: the mean
    total-variation distance between a node's and the global label distribution, 0.76–0.79 with
    10 classes, is 0.40–0.44 binarised).  With
    ``iid`` every node shares one W and b drawn from N(0, 1) and draws x ~ N(0, Σ): the
    paper's Synthetic-IID (α and β are then unused).  Rows
    are dense, stored as CSR; with ``bias_feature`` a column of ones is appended (column
    ``n_features``), letting a model without intercept learn the b_k part.
    """

    n_nodes: int = 30
    n_features: int = 60
    n_classes: int = 10
    alpha: float = 1.0
    beta: float = 1.0
    iid: bool = False
    size_log_mean: float = 4.0
    size_log_sigma: float = 2.0
    size_offset: int = 50
    bias_feature: bool = True
    test_fraction: float = 0.1
    labels: str = "binary"
    seed: int = 0

    def __post_init__(self):
        _validate(self, "fedprox", FEDPROX_PARAMS)

    @property
    def d(self) -> int:
        return self.n_features + int(self.bias_feature)


# ---------------------------------------------------------------------------------------
# The knobs: every field's kind, range and help (defaults are the classes' own)
# ---------------------------------------------------------------------------------------
_S, _F = SyntheticConfig, FedProxConfig

#: Every field of :class:`SyntheticConfig` (cross-field rules are its ``__post_init__``'s).
SYNTHETIC_PARAMS = param_table(
    Param("n_nodes", "int", _S.n_nodes, "K, the number of nodes (authors).", low=1, high=MAX_NODES),
    Param("size_distribution", "choice", _S.size_distribution, "Law of the node sizes: a power law truncated "
          "to [size min, size max], a lognormal clipped to them, or every node size mean rows.",
          choices=SIZE_DISTRIBUTIONS),
    Param("size_min", "int", _S.size_min, "Fewest rows (train + test) of a node.", low=1, high=MAX_ROWS_PER_NODE),
    Param("size_max", "int", _S.size_max, "Most rows (train + test) of a node.", low=1, high=MAX_ROWS_PER_NODE),
    Param("size_mean", "float", _S.size_mean, "Mean node size of the lognormal law; every node's size when "
          "sizes are constant.", low=0, low_open=True, high=MAX_ROWS_PER_NODE),
    Param("size_sigma", "float", _S.size_sigma, "Log-scale spread of the lognormal node sizes.", low=0, high=10),
    Param("size_exponent", "float", _S.size_exponent, "Power-law exponent of the node sizes: "
          "P(m > x) ∝ x^(−exponent).", low=0, low_open=True, high=100),
    Param("train_size_mean", "float", _S.train_size_mean, "If set, sizes are rescaled so that the nodes hold "
          "exactly this many training rows on average (between the training rows of a size-min and a "
          "size-max node); none: as drawn."),
    Param("n_words", "int", _S.n_words, "Vocabulary size; d = words + the bias and unknown-word columns.",
          low=1, high=MAX_WORDS, log=True),
    Param("words_per_example", "float", _S.words_per_example, "λ, the mean number of word tokens in a post "
          "(repeated words merge, so a post has a few fewer distinct words).", low=0, high=1000),
    Param("zipf_exponent", "float", _S.zipf_exponent, "s: word frequencies fall as rank^(−s).", low=0, high=10,
          label="Zipf exponent"),
    Param("unknown_rate", "float", _S.unknown_rate, "q, the chance that a token is outside the vocabulary.",
          low=0, high=1, high_open=True),
    Param("topics", "int", _S.topics, "T, the number of topics; 1 gives every node the same words.",
          low=1, high=10_000),
    Param("topic_weight", "float", _S.topic_weight, "γ, the share of a post's tokens drawn from its topic "
          "rather than from the global word distribution.", low=0, high=1),
    Param("dirichlet_concentration", "float", _S.dirichlet_concentration, "c, the Dirichlet concentration of "
          "each node's topic mixture: small = each node writes about few topics (strongly non-IID).",
          low=1e-3, high=1e6, label="topic concentration (non-IID)"),
    Param("label_offset", "float", _S.label_offset, "μ, the common logit offset (the share of +1 labels), "
          "unless a positive rate is set.", low=-50, high=50),
    Param("positive_rate", "float", _S.positive_rate, "If set, μ is solved so that this share of the posts "
          "is positive (0.3316: the paper's predict-majority error); none: μ = label offset.",
          low=0, high=1, low_open=True, high_open=True),
    Param("node_bias_std", "float", _S.node_bias_std, "τ, the spread of the nodes' label log-odds: large = "
          "some nodes almost always get comments, others never.", low=0, high=50, label="per-node label bias"),
    Param("topic_bias_std", "float", _S.topic_bias_std, "σ_θ, the spread of the topics' label log-odds.",
          low=0, high=50),
    Param("word_weight_std", "float", _S.word_weight_std, "σ_w, the spread of the true word weights.",
          low=0, high=50),
    Param("label_noise", "float", _S.label_noise, "The chance that a label is flipped after it is drawn.",
          low=0, high=0.5),
    Param("bias_feature", "bool", _S.bias_feature, "Append a column of ones: the paper's extra feature that "
          "plays the intercept.", label="bias feature (constant 1)"),
    Param("unknown_feature", "bool", _S.unknown_feature, "Append the unknown-word column (1 when a post has "
          "a word outside the vocabulary)."),
    Param("layout", "choice", _S.layout, "shared: one vocabulary; disjoint-features: each node its own block "
          "of words (property C); identical-nodes: every node a copy of one node's data (property D).",
          choices=LAYOUTS),
    Param("test_fraction", "float", _S.test_fraction, "f, the later share of each node's rows that becomes "
          "the test set.", low=0, high=1, high_open=True),
    Param("seed", "int", _S.seed, "Seeds every random choice: the same seed gives the same data set.",
          low=0, high=MAX_SEED),
)

#: Every field of :class:`FedProxConfig`.
FEDPROX_PARAMS = param_table(
    Param("n_nodes", "int", _F.n_nodes, "The number of devices.", low=1, high=100_000),
    Param("n_features", "int", _F.n_features, "Dimension of x (before the bias column).", low=1, high=10_000),
    Param("n_classes", "int", _F.n_classes, "Classes of the softmax model; +1 is the first half.",
          low=2, high=1000),
    Param("alpha", "float", _F.alpha, "How much the nodes' models differ (the spread of u_k).  With the argmax "
          "labels it changes nothing: u_k shifts every class's logit by the same amount (as in Li et al.'s "
          "generator); β is the knob that makes nodes differ.", low=0, high=100,
          label="α (model heterogeneity)"),
    Param("beta", "float", _F.beta, "How much the nodes' inputs differ (the spread of B_k).", low=0, high=100,
          label="β (data heterogeneity)"),
    Param("iid", "bool", _F.iid, "Synthetic-IID: every device shares one model W, b ~ N(0, 1) and draws x ~ "
          "N(0, Σ), so the devices' data are identically distributed (α and β are unused).",
          label="IID (one shared model)"),
    Param("size_log_mean", "float", _F.size_log_mean, "Mean of log(size − offset).", low=-10, high=12),
    Param("size_log_sigma", "float", _F.size_log_sigma, "Spread of log(size − offset).", low=0, high=4),
    Param("size_offset", "int", _F.size_offset, "Rows every node has on top of its lognormal share.",
          low=1, high=MAX_ROWS_PER_NODE),
    Param("bias_feature", "bool", _F.bias_feature, "Append a column of ones (lets a model without intercept "
          "learn the b_k part).", label="bias feature (constant 1)"),
    Param("test_fraction", "float", _F.test_fraction, "The share of each node's rows held out as the test set.",
          low=0, high=1, high_open=True),
    Param("labels", "choice", _F.labels, "classes: the class code 0…C−1, as Li et al. published it (a softmax "
          "model's data); binary: +1 iff the class is among the first half.", choices=FEDPROX_LABELS),
    Param("seed", "int", _F.seed, "Seeds every random choice: the same seed gives the same data set.",
          low=0, high=MAX_SEED),
)

#: The knobs of each generator's config.
CONFIG_PARAMS = {SyntheticConfig: SYNTHETIC_PARAMS, FedProxConfig: FEDPROX_PARAMS}


# ---------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------
def generate(config: SyntheticConfig | FedProxConfig, *, name: str = "custom") -> FederatedDataset:
    """Draw the federated data set described by ``config``.

    Parameters
    ----------
    config : SyntheticConfig or FedProxConfig
    name : str
        Recorded as ``meta["source"] = "synthetic:<name>"`` (a preset's name, or "custom").

    Returns
    -------
    FederatedDataset
        Training rows grouped by node, each node's later rows as the test set (with
        their nodes in ``test_nodes``), and ``meta`` with the source, the config as a
        dict (``params``), the seed, the task and the special columns.
    """
    draw = _draw(config)
    X, X_test = draw.split()
    t = draw.n_train
    return FederatedDataset.from_assignment(
        X, draw.y[:t], draw.node[:t], X_test=X_test, y_test=draw.y[t:],
        test_nodes=draw.node[t:], meta=_meta(config, name, draw))


def sample_stream(config: SyntheticConfig | FedProxConfig
                  ) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """Every row (train and test) in time order: node by node, each node's rows oldest first.

    Returns ``(X, y, node_of_row)``.  :func:`generate` gives exactly this stream split by
    :func:`fedviz.data.dataset.chronological_split` with ``config.test_fraction``.
    """
    draw = _draw(config)
    order = np.lexsort((draw.time, draw.node))
    return draw.X[order], draw.y[order], draw.node[order]


def node_totals(config: SyntheticConfig | FedProxConfig) -> np.ndarray:
    """The node sizes m_k (train + test rows) that :func:`generate` uses for ``config``."""
    rng_sizes = _streams(config.seed)[0]
    if isinstance(config, FedProxConfig):
        return _fedprox_totals(config, rng_sizes)
    if config.layout == "identical-nodes":
        return np.repeat(_draw_totals(config, 1, rng_sizes), config.n_nodes)
    return _draw_totals(config, config.n_nodes, rng_sizes)


def estimate_entries(config: SyntheticConfig | FedProxConfig) -> tuple[int, int]:
    """(rows, entries) that :func:`generate` would hold for ``config``, from the node sizes alone.

    The same count the generator checks against :data:`MAX_ENTRIES` before it draws a row
    (stored nonzeros of every row, plus the model's own tables), so a server can refuse a
    data set over its budget in milliseconds instead of building it: the node sizes are
    the only draw it takes.
    """
    rows = int(node_totals(config).sum())
    if isinstance(config, FedProxConfig):
        return rows, rows * config.d
    topics_rows = 1 if config.layout == "identical-nodes" else config.n_nodes
    return rows, int(rows * (config.words_per_example + 2) + topics_rows * config.topics)


# ---------------------------------------------------------------------------------------
# Shared plumbing
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Draw:
    """All rows of a draw, training rows first (node by node), then test rows.

    Rows of a node are exchangeable, so drawing them in this order is the same as drawing
    each node's stream in time order and splitting it; ``time`` records each row's
    place in its node's stream.  Keeping the training rows contiguous lets
    :meth:`split` hand out both sets as views, with no copy of the big arrays.
    """

    X: sp.csr_matrix
    y: np.ndarray
    node: np.ndarray
    time: np.ndarray
    n_train: int
    label_offset: float | None = None

    def split(self) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        X, t = self.X, self.n_train
        cut = int(X.indptr[t])
        shape = (t, X.shape[1]), (X.shape[0] - t, X.shape[1])
        train = sp.csr_matrix((X.data[:cut], X.indices[:cut], X.indptr[:t + 1]),
                              shape=shape[0], copy=False)
        test = sp.csr_matrix((X.data[cut:], X.indices[cut:], X.indptr[t:] - cut),
                             shape=shape[1], copy=False)
        return train, test


def _split_order(totals: np.ndarray, test_fraction: float):
    """Node and time of every row, training rows (node-major) before test rows."""
    K = len(totals)
    n_train = train_rows(totals, test_fraction)
    n_test = totals - n_train
    node = np.concatenate([np.repeat(np.arange(K), n_train), np.repeat(np.arange(K), n_test)])
    time = np.concatenate([_ranks_within(n_train), n_train[np.repeat(np.arange(K), n_test)]
                           + _ranks_within(n_test)])
    return node, time, int(n_train.sum())


def _ranks_within(counts: np.ndarray) -> np.ndarray:
    """0, 1, ..., c_0 − 1, 0, 1, ..., c_1 − 1, ...: each row's place in its group."""
    starts = np.cumsum(counts) - counts
    return np.arange(int(counts.sum())) - np.repeat(starts, counts)


def _streams(seed: int):
    """Independent generators for sizes, model parameters and rows.

    Separate streams keep, e.g., the node sizes unchanged when only a label knob moves.
    """
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3)]


def _check_budget(rows: int, per_row: float, extra: int = 0) -> None:
    """Raise before drawing if the data (plus ``extra`` model entries, e.g. the K × T
    topic table) would hold more than :data:`MAX_ENTRIES` entries."""
    entries = rows * per_row + extra
    if entries > MAX_ENTRIES:
        raise FedvizError(
            f"this draw would hold about {entries / 1e6:.0f} million entries in {rows:,} rows "
            f"(~{entries * 12 / 1e9:.1f} GB), over the limit of {MAX_ENTRIES / 1e6:.0f} million; "
            "use fewer nodes or smaller sizes")


def _draw(config) -> _Draw:
    if isinstance(config, FedProxConfig):
        return _fedprox_draw(config)
    if not isinstance(config, SyntheticConfig):
        raise FedvizError(f"generate() needs a SyntheticConfig or FedProxConfig, "
                          f"got {type(config).__name__}")
    if config.layout == "identical-nodes":
        return _identical_draw(config)
    return _BagOfWords(config, config.n_nodes).draw()


def _meta(config, name: str, draw: _Draw) -> dict:
    meta = {"source": f"synthetic:{name}", "params": dataclasses.asdict(config),
            "seed": config.seed, "task": "classification"}
    if isinstance(config, FedProxConfig):
        half = config.n_classes // 2
        meta.update(generator="fedprox-synthetic",
                    bias_column=config.n_features if config.bias_feature else None,
                    labels=({f"0–{config.n_classes - 1}": "the class argmax(W_kᵀx + b_k) of the device's softmax model"}
                            if config.labels == "classes" else {"+1": f"class < {half}", "-1": f"class >= {half}"}))
        if config.labels == "classes":  # codes 0..C−1, as a multiclass file's (fedviz.data.labels)
            meta.update(label_policy="multiclass", classes=list(range(config.n_classes)))
    else:
        meta.update(generator="bag-of-words", bias_column=config.bias_column,
                    unknown_column=config.unknown_column, label_offset=draw.label_offset,
                    labels={"+1": "the post got a comment", "-1": "no comment"})
    return meta


# ---------------------------------------------------------------------------------------
# Node sizes
# ---------------------------------------------------------------------------------------
def _draw_totals(cfg: SyntheticConfig, K: int, rng: np.random.Generator) -> np.ndarray:
    lo, hi = cfg.size_min, cfg.size_max
    if cfg.size_distribution == "constant":
        raw = np.full(K, float(cfg.size_mean))
    elif cfg.size_distribution == "lognormal":
        s = cfg.size_sigma
        raw = rng.lognormal(math.log(cfg.size_mean) - s * s / 2, s, K)
    else:  # truncated Pareto by inversion: F(x) = (1 − (lo/x)^a) / (1 − (lo/hi)^a)
        a = cfg.size_exponent
        u = rng.random(K)
        raw = lo * (1.0 - u * (1.0 - (lo / hi) ** a)) ** (-1.0 / a)
    if cfg.train_size_mean is None:
        return np.clip(np.floor(raw), lo, hi).astype(np.int64)
    return _rescale(raw, round(cfg.train_size_mean * K), cfg.test_fraction, lo, hi)


def _rescale(raw: np.ndarray, target: int, f: float, lo: int, hi: int) -> np.ndarray:
    """Integer sizes in [lo, hi] whose training rows sum to exactly ``target``.

    The sizes are stretched about ``lo`` as m = lo · (raw / lo)^c, which keeps the
    smallest nodes at ``lo`` and, for the power law, is the same law with exponent a / c.
    Bisection finds the largest c whose floored sizes stay at or below the target; the
    shortfall (under one row per node) goes to the nodes with the largest fractional
    parts, each getting the smallest increase that adds one training row.
    """
    ratio = np.maximum(raw / lo, 1e-300)

    def real(c):
        with np.errstate(over="ignore"):
            return np.clip(lo * ratio ** c, lo, hi)

    def total(c):
        return int(train_rows(np.floor(real(c)), f).sum())

    c_lo, c_hi = 0.0, 1.0
    while total(c_hi) < target and c_hi < 1e4:
        c_lo, c_hi = c_hi, 2.0 * c_hi
    if total(c_hi) >= target:
        for _ in range(200):
            mid = 0.5 * (c_lo + c_hi)
            if mid in (c_lo, c_hi):
                break
            if total(mid) <= target:
                c_lo = mid
            else:
                c_hi = mid
    else:
        c_lo = c_hi
    x = real(c_lo)
    m = np.floor(x).astype(np.int64)
    priority = np.argsort(-(x - m), kind="stable")  # largest remainders first
    short = target - int(train_rows(m, f).sum())
    steps = int(math.ceil(1.0 / (1.0 - f))) + 1
    while short > 0:
        base = train_rows(m, f)
        nxt = m + 1
        for _ in range(steps):  # the smallest size above m with one more training row
            nxt = np.where(train_rows(nxt, f) > base, nxt, nxt + 1)
        ok = priority[nxt[priority] <= hi][:short]
        if ok.size == 0:  # excluded by validation of train_size_mean
            raise FedvizError("node sizes cannot reach the training-row target")
        m[ok] = nxt[ok]
        short -= ok.size
    return m


# ---------------------------------------------------------------------------------------
# The bag-of-words generator
# ---------------------------------------------------------------------------------------
class _Alias:
    """Walker's alias table (Vose's construction): O(1) draws from a fixed discrete law.

    Each draw costs one uniform and two table look-ups, against the ~log2(V) cache-missing
    steps of inverting the CDF with searchsorted — the difference between seconds and a
    fraction of a second for the tens of millions of tokens of the google-plus preset.
    Building the table is one pass over the V outcomes.
    """

    def __init__(self, pmf: np.ndarray):
        V = len(pmf)
        scaled = (np.asarray(pmf, dtype=np.float64) * (V / np.sum(pmf))).tolist()
        prob = [1.0] * V
        alias = list(range(V))
        small = [i for i, p in enumerate(scaled) if p < 1.0]
        large = [i for i, p in enumerate(scaled) if p >= 1.0]
        while small and large:
            s, g = small.pop(), large.pop()
            prob[s], alias[s] = scaled[s], g
            scaled[g] += scaled[s] - 1.0
            (small if scaled[g] < 1.0 else large).append(g)
        # Whatever is left is 1 up to rounding and keeps prob 1.
        self.V = V
        self.prob = np.array(prob)
        self.alias = np.array(alias, dtype=np.int32)

    def draw(self, u: np.ndarray) -> np.ndarray:
        """Map uniforms on [0, 1) to outcomes: the integer part of u·V picks a column and
        the fractional part decides between it and its alias."""
        x = u * self.V
        i = np.minimum(x.astype(np.int32), self.V - 1)
        return np.where(x - i < self.prob[i], i, self.alias[i])


def _sample_categorical_rows(cum: np.ndarray, rows: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Draw one category per entry of ``rows`` from the row-wise CDFs ``cum`` (K × T).

    Shifting row k's CDF into [k, k + 1] makes the whole table one sorted array, so a
    single searchsorted serves every row at once.
    """
    K, T = cum.shape
    flat = (cum / cum[:, -1:] + np.arange(K)[:, None]).ravel()
    idx = np.searchsorted(flat, rows + u, side="right")
    return np.minimum(idx - rows * T, T - 1)


class _BagOfWords:
    """The parameters of one draw of the bag-of-words model, and its row sampler."""

    def __init__(self, cfg: SyntheticConfig, K: int):
        self.cfg = cfg
        self.K = K
        rng_sizes, rng_model, self.rng_rows = _streams(cfg.seed)
        self.totals = _draw_totals(cfg, K, rng_sizes)
        T = cfg.topics
        copies = cfg.n_nodes if cfg.layout == "identical-nodes" else 1
        _check_budget(copies * int(self.totals.sum()), cfg.words_per_example + 2, extra=K * T)
        disjoint = cfg.layout == "disjoint-features"
        V = cfg.n_words // K if disjoint else cfg.n_words
        self.col_offset = V if disjoint else 0  # node k's words are columns k·V ... k·V + V − 1

        # Topic mixtures π_k ~ Dirichlet(c): log of Gamma(c) via Gamma(c + 1) · U^(1/c),
        # which stays finite even when c is tiny and Gamma(c) underflows to 0.
        c = cfg.dirichlet_concentration
        log_g = np.log(rng_model.gamma(c + 1.0, size=(K, T))) + np.log(rng_model.random((K, T))) / c
        log_g -= log_g.max(axis=1, keepdims=True)
        pi = np.exp(log_g)
        pi /= pi.sum(axis=1, keepdims=True)
        self.topic_cdf = np.cumsum(pi, axis=1)

        # Zipf over ranks; the global distribution ranks word r at r, topic t at perm[t, r].
        pmf = np.arange(1, V + 1, dtype=np.float64) ** -cfg.zipf_exponent
        pmf /= pmf.sum()
        self.ranks = _Alias(pmf)
        perm = np.tile(np.arange(V, dtype=np.int32), (T, 1))
        rng_model.permuted(perm, axis=1, out=perm)  # in place: no copy of a read-only view
        # Number the columns by decreasing expected frequency over the whole data set.
        gamma = cfg.topic_weight
        share = (self.totals[:, None] * pi).sum(axis=0) / self.totals.sum()
        freq = (1.0 - gamma) * pmf + np.bincount(
            perm.ravel(), weights=(gamma * share[:, None] * pmf[None, :]).ravel(), minlength=V)
        new_id = np.empty(V, dtype=np.int32)
        new_id[np.argsort(-freq, kind="stable")] = np.arange(V, dtype=np.int32)
        # Row t < T: topic t's (rank -> column); row T: the global distribution's.
        self.word_col = np.vstack([new_id[perm], new_id[None, :]])

        # Ground truth: logit = μ + β_k + θ_z + <w, x>.
        self.weights = np.zeros(cfg.d)
        self.weights[:cfg.n_words] = rng_model.normal(0.0, cfg.word_weight_std, cfg.n_words)
        if cfg.unknown_feature:
            self.weights[cfg.unknown_column] = rng_model.normal(0.0, cfg.word_weight_std)
        self.node_bias = rng_model.normal(0.0, cfg.node_bias_std, K)
        self.topic_bias = rng_model.normal(0.0, cfg.topic_bias_std, T)

    def draw(self) -> _Draw:
        cfg, rng = self.cfg, self.rng_rows
        node, time, n_train = _split_order(self.totals, cfg.test_fraction)
        N = len(node)
        # Row-level draws, for all rows at once.
        z = _sample_categorical_rows(self.topic_cdf, node, rng.random(N))
        lam = cfg.words_per_example * (1.0 - cfg.unknown_rate)
        # Poisson thinning: topic and global token counts are independent Poissons.
        n_topic = rng.poisson(lam * cfg.topic_weight, N)
        n_global = rng.poisson(lam * (1.0 - cfg.topic_weight), N)
        unknown = rng.random(N) < -math.expm1(-cfg.words_per_example * cfg.unknown_rate)
        # Token-level work, in blocks of rows to bound the temporaries.
        lengths, indices = [], []
        for a in range(0, N, _CHUNK_ROWS):
            b = min(N, a + _CHUNK_ROWS)
            ln, ix = self._rows(rng, node[a:b], z[a:b], n_global[a:b], n_topic[a:b], unknown[a:b])
            lengths.append(ln)
            indices.append(ix)
        lengths = np.concatenate(lengths)
        indices = np.concatenate(indices) if len(indices) > 1 else indices[0]
        indptr = np.zeros(N + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        X = sp.csr_matrix((np.ones(indices.size), indices, indptr), shape=(N, cfg.d), copy=False)
        X.has_sorted_indices = True  # sorted and free of duplicates by construction
        score = self.node_bias[node] + self.topic_bias[z] + X @ self.weights
        offset = cfg.label_offset
        if cfg.positive_rate is not None:
            offset = _solve_offset(score, cfg.positive_rate)
        y = np.where(rng.random(N) < _sigmoid(offset + score), 1.0, -1.0)
        if cfg.label_noise > 0:
            y[rng.random(N) < cfg.label_noise] *= -1.0
        return _Draw(X=X, y=y, node=node, time=time, n_train=n_train, label_offset=offset)

    def _rows(self, rng, node, z, n_global, n_topic, unknown):
        """Row lengths and column indices (sorted within rows) of a block of rows.

        Each row's tokens are laid out as its n_global global tokens, then its n_topic
        topic tokens; a token's column is ``word_col[table, rank]`` with table T for the
        global distribution and the row's topic otherwise.  The bias and unknown columns
        join as extra (row, column) keys, and one sort of the keys orders every row and
        brings repeated words together to be merged (x is binary).
        """
        cfg = self.cfg
        m, d, V = len(node), cfg.d, self.word_col.shape[1]
        tables = np.column_stack([np.full(m, cfg.topics), z]).ravel()
        spans = np.column_stack([n_global, n_topic]).ravel()
        n_tokens = int(spans.sum())
        flat = np.repeat(tables * V, spans) + self.ranks.draw(rng.random(n_tokens))
        row_key = np.arange(m, dtype=np.int64) * d
        if self.col_offset:
            row_key += node * self.col_offset  # node k's words live in its own block
        keys = [np.repeat(row_key, n_global + n_topic) + self.word_col.ravel()[flat]]
        if self.col_offset:
            row_key -= node * self.col_offset
        if cfg.bias_feature:
            keys.append(row_key + cfg.bias_column)
        if cfg.unknown_feature:
            keys.append(row_key[unknown] + cfg.unknown_column)
        key = np.sort(np.concatenate(keys))
        key = key[np.r_[True, key[1:] != key[:-1]]]
        bounds = np.searchsorted(key, np.arange(m + 1, dtype=np.int64) * d)
        return np.diff(bounds), (key % d).astype(np.int32)


def _identical_draw(cfg: SyntheticConfig) -> _Draw:
    """Draw one node's rows, then give every node a copy (property D of Section 3.1)."""
    base = _BagOfWords(cfg, 1).draw()
    K, t, N = cfg.n_nodes, base.n_train, len(base.y)
    rows = np.concatenate([np.tile(np.arange(t), K), np.tile(np.arange(t, N), K)])
    node = np.concatenate([np.repeat(np.arange(K), t), np.repeat(np.arange(K), N - t)])
    return _Draw(X=base.X[rows], y=base.y[rows], node=node, time=base.time[rows],
                 n_train=K * t, label_offset=base.label_offset)


def _sigmoid(t: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * t))


def _solve_offset(score: np.ndarray, rate: float) -> float:
    """The μ with mean(σ(μ + score)) = rate: Newton's method, safeguarded by bisection.

    The mean is increasing in μ, and [logit(rate) − max score − 1, logit(rate) − min
    score + 1] brackets the root.
    """
    logit = math.log(rate / (1.0 - rate))
    lo, hi = logit - float(score.max()) - 1.0, logit - float(score.min()) + 1.0
    mu = min(max(logit - float(score.mean()), lo), hi)
    for _ in range(100):
        p = _sigmoid(mu + score)
        gap = float(p.mean()) - rate
        if abs(gap) < 1e-13:
            break
        if gap > 0:
            hi = mu
        else:
            lo = mu
        slope = float(np.mean(p * (1.0 - p)))
        step = mu - gap / slope if slope > 0 else 0.5 * (lo + hi)
        mu = step if lo < step < hi else 0.5 * (lo + hi)
        if hi - lo < 1e-12:
            break
    return mu


# ---------------------------------------------------------------------------------------
# FedProx Synthetic(α, β)
# ---------------------------------------------------------------------------------------
def _fedprox_totals(cfg: FedProxConfig, rng: np.random.Generator) -> np.ndarray:
    raw = rng.lognormal(cfg.size_log_mean, cfg.size_log_sigma, cfg.n_nodes)
    return np.floor(raw).astype(np.int64) + cfg.size_offset


def _fedprox_draw(cfg: FedProxConfig) -> _Draw:
    rng_sizes, rng_model, rng_rows = _streams(cfg.seed)
    K, p, C = cfg.n_nodes, cfg.n_features, cfg.n_classes
    totals = _fedprox_totals(cfg, rng_sizes)
    _check_budget(int(totals.sum()), cfg.d)
    u = rng_model.normal(0.0, cfg.alpha, K)                     # u_k ~ N(0, α²)
    B = rng_model.normal(0.0, cfg.beta, K)                      # B_k ~ N(0, β²)
    W = rng_model.normal(u[:, None, None], 1.0, (K, p, C))      # W_k ~ N(u_k, 1)
    b = rng_model.normal(u[:, None], 1.0, (K, C))               # b_k ~ N(u_k, 1)
    v = rng_model.normal(B[:, None], 1.0, (K, p))               # v_k ~ N(B_k, 1)
    if cfg.iid:  # Synthetic-IID: one model for all, x ~ N(0, Σ) (drawn after, so non-IID draws are unchanged)
        W = np.broadcast_to(rng_model.normal(0.0, 1.0, (p, C)), (K, p, C))
        b = np.broadcast_to(rng_model.normal(0.0, 1.0, C), (K, C))
        v = np.zeros((K, p))
    sd = np.arange(1, p + 1, dtype=np.float64) ** -0.6          # √Σ_jj = √(j^−1.2)
    node, time, n_train = _split_order(totals, cfg.test_fraction)
    x = v[node] + sd * rng_rows.standard_normal((len(node), p))
    # argmax_c (W_kᵀx + b_k)_c, one matrix product per node over its rows.
    order = np.argsort(node, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(totals)])
    cls = np.empty(len(node), dtype=np.int64)
    for k in range(K):
        rows = order[bounds[k]:bounds[k + 1]]
        cls[rows] = np.argmax(x[rows] @ W[k] + b[k], axis=1)
    y = cls.astype(np.float64) if cfg.labels == "classes" else np.where(cls < C // 2, 1.0, -1.0)
    if cfg.bias_feature:
        x = np.hstack([x, np.ones((len(node), 1))])
    return _Draw(X=sp.csr_matrix(x), y=y, node=node, time=time, n_train=n_train)
