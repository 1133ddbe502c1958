"""Write a data set as LIBSVM / svmlight text, so a preset becomes a file any tool reads.

Why: the README's file examples must work on a fresh clone, without ../shared/data;
``fedviz export preset:... --out FILE`` makes the file.  The format is the one
:mod:`fedviz.data.libsvm` reads: ``label [qid:K] index:value ...``, one-based indices
(LIBSVM's convention), values with 17 significant digits so that reading the file back
gives the same float64 numbers.  With ``qid=True`` each row carries its node as ``qid``,
so ``--partition natural`` on the file restores the nodes.

Labels are written as the file's own: a multiclass data set (softmax, issue 22) holds class codes
0..C−1 and is written with its class names (dna.scale's 1, 2, 3, not 0, 1, 2), which the loader
codes back to the same 0..C−1 (:func:`fedviz.data.labels.map_labels` codes classes in increasing
order) as long as every class has a training row; binary, one-vs-rest and regression data are
written as the loss sees them (±1, or the targets), as before.
"""

from __future__ import annotations

import gzip
import os

import numpy as np
import scipy.sparse as sp

from ..errors import ParameterError


def _number(v: float) -> str:
    """Shortest exact text for integers ('1', '-1'), 17 significant digits otherwise."""
    v = float(v)
    return str(int(v)) if v.is_integer() and abs(v) < 2**53 else repr(v)


def write_libsvm(path: str | os.PathLike, X, y, *, qid=None, zero_based: bool = False) -> int:
    """Write rows of ``X`` (sparse or dense, n × d) with labels ``y``; returns the rows written.

    ``qid`` (optional, length n): a group id per row.  Explicit zeros in ``X`` are
    dropped, as LIBSVM readers would read them as absent anyway.  A name ending in
    '.gz' is gzip-compressed.
    """
    X = sp.csr_matrix(X, dtype=np.float64)
    X.eliminate_zeros()
    X.sort_indices()
    y = np.asarray(y, dtype=np.float64).ravel()
    if y.shape[0] != X.shape[0]:
        raise ParameterError("y", f"length {y.shape[0]}", f"one label per row of X ({X.shape[0]})")
    if not np.all(np.isfinite(y)) or not np.all(np.isfinite(X.data)):
        raise ParameterError("X, y", "a non-finite value", "finite numbers (LIBSVM has no NaN)")
    if qid is not None:
        qid = np.asarray(qid, dtype=np.int64).ravel()
        if qid.shape[0] != X.shape[0] or np.any(qid < 0):
            raise ParameterError("qid", f"length {qid.shape[0]}", f"{X.shape[0]} non-negative integers")
    shift = 0 if zero_based else 1
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wt", encoding="ascii", newline="\n") as fh:
        for i in range(X.shape[0]):
            lo, hi = X.indptr[i], X.indptr[i + 1]
            parts = [_number(y[i])]
            if qid is not None:
                parts.append(f"qid:{qid[i]}")
            parts.extend(f"{j + shift}:{_number(v)}" for j, v in zip(X.indices[lo:hi], X.data[lo:hi]))
            fh.write(" ".join(parts) + "\n")
    return X.shape[0]


def file_labels(ds, y) -> np.ndarray:
    """The labels to write for ``y`` (a data set's ``y`` or ``y_test``): for multiclass data each
    code c replaced by the c-th class of ``ds.meta["classes"]`` (the file's label, or the generator's
    class number), else ``y`` itself."""
    y = np.asarray(y, dtype=np.float64)
    if not getattr(ds, "multiclass", False):
        return y
    classes = np.asarray(ds.meta["classes"], dtype=np.float64)
    codes = y.astype(np.int64)
    if y.size and (np.any(codes != y) or codes.min() < 0 or codes.max() >= classes.size):
        raise ParameterError("y", "a label outside the class codes", f"codes 0..{classes.size - 1}")
    return classes[codes]


def missing_classes(ds) -> list[str]:
    """The classes of a multiclass data set with no training row (written to the test file only, or
    not at all): a loader reading the training file back codes the classes it finds, so theirs shift."""
    if not getattr(ds, "multiclass", False):
        return []
    present = np.unique(ds.y.astype(np.int64))
    return [name for c, name in enumerate(ds.class_names) if c not in present]


def export_dataset(ds, out: str | os.PathLike, test_out: str | os.PathLike | None = None, *,
                   qid: bool = False) -> tuple[int, int]:
    """Write the training rows (in node order) to ``out`` and, if given, the test rows to ``test_out``.

    Returns (training rows, test rows written).  ``qid``: each training row's node as its
    qid (the training file only: a test file is read without nodes).  Multiclass labels are written
    as their class names (:func:`file_labels`).
    """
    nodes = np.repeat(np.arange(ds.n_nodes), np.diff(ds.offsets)) if qid else None
    n = write_libsvm(out, ds.X, file_labels(ds, ds.y), qid=nodes)
    n_test = 0
    if test_out is not None:
        n_test = write_libsvm(test_out, ds.X_test, file_labels(ds, ds.y_test))
    return n, n_test
