"""Unseen nodes (issue 23, point 2): a share of whole nodes held out of training.

pFL-Bench (Chen et al. 2022) holds out 20% of the clients: they take no part in training and are
scored as clients that join afterwards would be, by the global model (and, for personalised
methods, after fine-tuning on their own training rows).  Here the held-out nodes' rows leave the
training problem entirely: f(w) = Σ_k (n_k/n) F_k(w) of the paper's eq. (1) sums over the seen
nodes only, and f*, every algorithm and every property see those alone.  The held-out nodes form a
data set of their own (:attr:`FederatedDataset.unseen <fedviz.data.dataset.FederatedDataset.unseen>`)
with each node's own train/test split, made by the same split as the seen nodes' (its train rows
serve only fine-tuning; its test rows are scored).

Which nodes: m = ⌊f·K + ½⌋ of the K nodes (the nearest whole number), drawn uniformly without
replacement by a generator of their own seeded by the data seed, so the same spec holds out the
same nodes and the draw changes no other random stream.
"""

from __future__ import annotations

import zlib

import numpy as np

from ..errors import ParameterError
from ..validation import check_int, check_real
from .dataset import FederatedDataset

__all__ = ["PFL_BENCH_SHARE", "unseen_count", "draw_unseen", "hold_out", "unseen_sentence"]

#: pFL-Bench's share of unseen clients.
PFL_BENCH_SHARE = 0.2


def unseen_count(n_nodes: int, fraction: float) -> int:
    """m = ⌊f·K + ½⌋, the nodes a fraction f of K holds out; refused when no training node remains.

    Computed exactly (a fraction's float product can round a half the wrong way): f·K + ½ is
    compared in rationals through ``float.as_integer_ratio``."""
    K = check_int("nodes", n_nodes, low=1)
    f = check_real("unseen", fraction, low=0.0, high=1.0, high_open=True)
    num, den = f.as_integer_ratio()
    m = (2 * num * K + den) // (2 * den)
    if m >= K:
        top = (K - 0.5) / K
        raise ParameterError("unseen", fraction,
                             f"a share in [0, {top:.4g}) with {K:,} node{'s' if K > 1 else ''}: "
                             f"{m:,} of {K:,} held out leave no node to train on",
                             hint="lower unseen or use more nodes")
    return int(m)


def draw_unseen(n_nodes: int, fraction: float, seed: int) -> np.ndarray:
    """The held-out nodes' ids (sorted int64): :func:`unseen_count` of them, a uniform draw without
    replacement from a generator of their own (``[seed, crc32("unseen")]``)."""
    m = unseen_count(n_nodes, fraction)
    check_int("seed", seed, low=0, high=2**32 - 1)
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    rng = np.random.default_rng([int(seed), zlib.crc32(b"unseen")])
    return np.sort(rng.choice(n_nodes, size=m, replace=False)).astype(np.int64)


def _part(ds: FederatedDataset, keep: np.ndarray, meta: dict, *, orphans: bool) -> FederatedDataset:
    """The nodes ``keep`` (a boolean mask over ds's nodes) with their training and test rows, renumbered
    0..len−1 in their old order; ``orphans``: also the test rows of no node (−1), which stay with the
    seen part only."""
    rows = np.flatnonzero(keep[ds.node_of_row])
    tn = ds.test_nodes
    on_node = tn >= 0
    test_keep = np.zeros(tn.size, dtype=bool)
    test_keep[on_node] = keep[tn[on_node]]
    if orphans:
        test_keep |= ~on_node
    test_rows = np.flatnonzero(test_keep)
    return FederatedDataset.from_assignment(
        ds.X[rows], ds.y[rows], ds.node_of_row[rows], X_test=ds.X_test[test_rows], y_test=ds.y_test[test_rows],
        test_nodes=tn[test_rows], meta=meta)


def hold_out(ds: FederatedDataset, fraction: float, seed: int) -> FederatedDataset:
    """``ds`` without the nodes :func:`draw_unseen` holds out, which become its ``unseen`` data set.

    The seen part keeps its nodes' training and test rows (and the test rows of no node, a separate
    test file's); the unseen part holds the drawn nodes' training and test rows.  Both renumber their
    nodes 0, 1, … in the original order; ``meta["unseen"]`` of both says which original ids are
    whose.  ``fraction`` 0 returns ``ds`` itself."""
    K = ds.n_nodes
    ids = draw_unseen(K, fraction, seed)
    if ids.size == 0:
        if fraction:
            ds.meta["warnings"].append(
                f"unseen {fraction:g} of {K:,} node{'s' if K > 1 else ''} holds out none (the nearest whole "
                f"number of nodes is 0): every node trains; raise unseen to at least {0.5 / K:.3g} or use more nodes")
            ds.meta["unseen"] = {"fraction": float(fraction), "nodes": 0, "of": K, "ids": [],
                                 "seen_ids": list(range(K))}
            ds.meta.setdefault("params", {})["unseen"] = float(fraction)
        return ds
    held = np.zeros(K, dtype=bool)
    held[ids] = True
    info = {"fraction": float(fraction), "nodes": int(ids.size), "of": K, "seed": int(seed),
            "ids": ids.tolist(), "seen_ids": np.flatnonzero(~held).tolist()}
    params = {**ds.meta.get("params", {}), "unseen": float(fraction)}
    unseen = _part(ds, held, {**ds.meta, "params": params, "unseen": info, "role": "unseen", "warnings": []},
                   orphans=False)
    seen = _part(ds, ~held, {**ds.meta, "params": params, "unseen": info}, orphans=True)
    object.__setattr__(seen, "unseen", unseen)
    untested = int(unseen.n_nodes - np.count_nonzero(np.bincount(unseen.test_nodes[unseen.test_nodes >= 0],
                                                                 minlength=unseen.n_nodes)))
    if untested:
        why, remedy = untested_remedy(ds)
        seen.meta["warnings"].append(
            f"{untested:,} of the {unseen.n_nodes:,} unseen nodes have no test rows ({why}): they cannot be "
            f"scored; {remedy}")
    return seen


def untested_remedy(ds: FederatedDataset) -> tuple[str, str]:
    """Why nodes of ``ds`` hold no test rows, and the remedy the Data page offers for its source: a separate
    test file's rows belong to no node until they are dealt (the test fraction is then moot and disabled);
    dealt rows go by class share, so a small node may draw none; a held-out fraction needs rows to hold out."""
    from .split import DEAL_LABEL

    params = ds.meta.get("params", {})
    if params.get("test") and not ds.meta.get("dealt"):
        return ("the test file's rows belong to no node",
                f"tick '{DEAL_LABEL}' on Data (fedviz --deal-test) to give each test row a node")
    if ds.meta.get("dealt"):
        return ("each dealt test row goes to a node by its class share, and a small node may draw none",
                "use fewer nodes")
    return "too few rows to hold one out", "raise the test fraction or use fewer nodes"


def unseen_sentence(ds: FederatedDataset) -> str:
    """How many nodes are held out and what they are scored with, or '' when none are."""
    info = ds.meta.get("unseen") or {}
    m = int(info.get("nodes", 0))
    if not m or ds.unseen is None:
        return ""
    u = ds.unseen
    held = (f"{m:,} of the {int(info['of']):,} nodes ({100 * m / info['of']:.0f}%, a seeded draw) are held out "
            f"as unseen: they train nothing")
    if u.y_test.size == 0:  # nothing to score them on: say so, and how to give them test rows
        why, remedy = untested_remedy(ds)
        return (f"{held}, and they hold no test rows ({why}), so they cannot be scored: {remedy}; their "
                f"{u.n:,} training rows serve only fine-tuning.")
    return (f"{held}, and the global model in force is scored on their {u.y_test.size:,} test rows; their "
            f"{u.n:,} training rows serve only fine-tuning.")

