"""Write a data set as LIBSVM / svmlight text, so a preset becomes a file any tool reads.

Why: the README's file examples must work on a fresh clone, without ../shared/data;
``fedviz export preset:... --out FILE`` makes the file.  The format is the one
:mod:`fedviz.data.libsvm` reads: ``label [qid:K] index:value ...``, one-based indices
(LIBSVM's convention), values with 17 significant digits so that reading the file back
gives the same float64 numbers.  With ``qid=True`` each row carries its node as ``qid``,
so ``--partition natural`` on the file restores the nodes.
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


def export_dataset(ds, out: str | os.PathLike, test_out: str | os.PathLike | None = None, *,
                   qid: bool = False) -> tuple[int, int]:
    """Write the training rows (in node order) to ``out`` and, if given, the test rows to ``test_out``.

    Returns (training rows, test rows written).  ``qid``: each training row's node as its
    qid (the training file only: a test file is read without nodes).
    """
    nodes = np.repeat(np.arange(ds.n_nodes), np.diff(ds.offsets)) if qid else None
    n = write_libsvm(out, ds.X, ds.y, qid=nodes)
    n_test = 0
    if test_out is not None:
        n_test = write_libsvm(test_out, ds.X_test, ds.y_test)
    return n, n_test
