"""Exports of many classes (issue 22, point 7): a multiclass data set is written with its class names as
LIBSVM labels, and the loader codes them back to the same 0..C−1; a binary export is the text a plain
formatter writes for ±1 labels, unchanged.  Oracles: the original file's own lines (label and features
read as text) and a few lines of formatting written here."""

from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp

from fedviz.data.build import DataSpec, build
from fedviz.data.export import export_dataset, file_labels, missing_classes
from fedviz.errors import ParameterError

from conftest import DATA


def _rows(path) -> Counter:
    """Each line of a LIBSVM file as (label as a number, its index:value pairs as numbers), counted."""
    out = Counter()
    for line in open(path).read().splitlines():
        parts = line.split()
        if not parts:
            continue
        feats = tuple(sorted((int(k), float(v)) for k, v in (p.split(":") for p in parts[1:] if not p.startswith("qid:"))))
        out[(float(parts[0]), feats)] += 1
    return out


def test_dna_scale_exports_its_own_labels_and_reads_back_to_the_same_codes(tmp_path):
    ds = build(DataSpec(source=str(DATA / "dna.scale")))  # 3 classes (1, 2, 3), a random 25% test split
    assert ds.multiclass and ds.n_classes == 3
    train, test = tmp_path / "dna.train", tmp_path / "dna.test"
    assert export_dataset(ds, train, test, qid=True) == (ds.n, ds.y_test.size)
    # Train and test together are the original file's rows, labels 1, 2, 3 as the file wrote them.
    assert _rows(train) + _rows(test) == _rows(DATA / "dna.scale")
    assert {label for label, _ in _rows(train)} == {1.0, 2.0, 3.0}
    # Read back (its nodes from the qids): the same rows, the same codes 0..2.
    back = build(DataSpec(source=str(train), test=str(test), partition="natural"))
    assert back.multiclass and back.meta["classes"] == [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(back.y, ds.y)
    np.testing.assert_array_equal(back.y_test, ds.y_test)
    assert (back.X != ds.X).nnz == 0 and np.array_equal(back.offsets, ds.offsets)


def test_the_ten_class_preset_exports_its_class_numbers(tmp_path):
    ds = build(DataSpec(source="preset:fedprox-synthetic?nodes=6"))
    assert ds.multiclass
    out = tmp_path / "syn.txt"
    export_dataset(ds, out)
    labels = np.array([float(line.split()[0]) for line in open(out)])
    # The generator's classes are 0..9, so here the names are the codes: written as they are.
    np.testing.assert_array_equal(labels, np.asarray(ds.meta["classes"])[ds.y.astype(int)])
    back = build(DataSpec(source=str(out), test_fraction=0.0, partition="iid", nodes=1))
    assert sorted(np.unique(back.y)) == list(range(len(np.unique(labels))))


def test_a_binary_export_is_the_plain_text_of_its_pm1_labels(tmp_path):
    """a9a (labels −1, +1) and a one-vs-rest dna.scale: every line is the label as ±1 then the one-based
    index:value pairs, as written here — the model's labels, exactly as before issue 22."""
    for spec in (DataSpec(source=str(DATA / "heart_scale")), DataSpec(source=str(DATA / "dna.scale"), positive=2)):
        ds = build(spec)
        assert not ds.multiclass
        out = tmp_path / "bin.txt"
        export_dataset(ds, out, qid=True)
        X = sp.csr_matrix(ds.X)
        nodes = np.repeat(np.arange(ds.n_nodes), np.diff(ds.offsets))
        want = []
        for i in range(ds.n):
            lo, hi = X.indptr[i], X.indptr[i + 1]
            label = {-1.0: "-1", 1.0: "1"}[float(ds.y[i])]
            cells = [f"{j + 1}:{int(v) if float(v).is_integer() else repr(float(v))}"
                     for j, v in zip(X.indices[lo:hi], X.data[lo:hi]) if v != 0]
            want.append(" ".join([label, f"qid:{nodes[i]}", *cells]) + "\n")
        assert out.read_bytes() == "".join(want).encode("ascii")
        assert set(file_labels(ds, ds.y)) == {-1.0, 1.0}


def test_a_class_without_training_rows_is_named_and_a_bad_code_refused():
    ds = build(DataSpec(source=str(DATA / "dna.scale")))
    assert missing_classes(ds) == []
    keep = ds.y != 1  # class "2" (code 1) only in the test rows
    sub = type(ds).from_assignment(ds.X[keep], ds.y[keep], np.zeros(int(keep.sum()), dtype=np.int64),
                                   X_test=ds.X_test, y_test=ds.y_test, meta=ds.meta)
    assert missing_classes(sub) == ["2"]
    with pytest.raises(ParameterError, match="codes 0..2"):
        file_labels(ds, np.array([0.0, 3.0]))
