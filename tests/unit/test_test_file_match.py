"""A test file must match its training file (issue 21, point 7).

The oracle is the files themselves, read here line by line with plain Python: the first
line of the test file whose feature index passes the training file's last index, and the
first whose label the training file does not have.  scikit-learn's ``load_svmlight_files``
checks what an accepted wider pair must equal.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_svmlight_files

from conftest import DATA
from fedviz.data.build import DataSpec, build
from fedviz.data.libsvm import load_libsvm_pair
from fedviz.errors import DataFormatError


def _rows(path):
    """(line number, label, [indices]) for every data line, parsed independently."""
    out = []
    for k, line in enumerate(path.read_text().splitlines(), 1):
        body = line.split("#", 1)[0].split()
        if not body:
            continue
        out.append((k, float(body[0]), [int(t.split(":")[0]) for t in body[1:] if not t.startswith("qid:")]))
    return out


def _max_index(path) -> int:
    return max(max(ix, default=0) for _, _, ix in _rows(path))


@pytest.mark.parametrize("train,test", [("heart_scale", "dna.scale.t"), ("heart_scale", "a9a.t"),
                                        ("a9a", "dna.scale.t")])
def test_wider_test_file_is_refused_naming_its_line(train, test):
    width = _max_index(DATA / train)  # one-based files: the last index is the width
    line, token = next((k, next(i for i in ix if i > width)) for k, _, ix in _rows(DATA / test)
                       if any(i > width for i in ix))
    with pytest.raises(DataFormatError) as info:
        load_libsvm_pair(DATA / train, DATA / test)
    err = info.value
    assert err.line == line and err.token.startswith(f"{token}:")
    assert err.source == test and f"training file {train}'s last feature" in str(err)
    assert f"indices 1..{width}" in str(err) and "wider_test=True" in str(err)
    with pytest.raises(DataFormatError, match=f"^{test}, line {line}: feature index {token} lies beyond"):
        build(DataSpec(str(DATA / train), test=str(DATA / test), positive=1.0))


def test_wider_test_file_accepted_when_asked_equals_sklearn():
    a, b = load_libsvm_pair(DATA / "heart_scale", DATA / "dna.scale.t", wider_test=True)
    Xa, ya, Xb, yb = load_svmlight_files([str(DATA / "heart_scale"), str(DATA / "dna.scale.t")])
    assert a.X.shape == Xa.shape == (270, 180) and b.X.shape == Xb.shape
    assert abs(a.X - Xa).sum() == 0 and abs(b.X - Xb).sum() == 0
    np.testing.assert_array_equal(b.y, yb)


@pytest.mark.parametrize("train,test", [("a9a", "a9a.t"), ("dna.scale", "dna.scale.t"),
                                        ("agaricus_zero_based.train", "agaricus_zero_based.test")])
def test_matching_pairs_still_load(train, test):
    """The real pairs: a9a.t is narrower than a9a (122 vs 123) — narrower is always fine."""
    ds = build(DataSpec(str(DATA / train), test=str(DATA / test), positive=3.0 if train == "dna.scale" else None))
    _, _, Xb, _ = load_svmlight_files([str(DATA / train), str(DATA / test)])
    assert ds.X_test.shape[0] == Xb.shape[0]


def test_unknown_test_label_is_refused_naming_its_line():
    """dna.scale's labels are 1, 2, 3; heart_scale's -1 would silently become class -1."""
    known = {y for _, y, _ in _rows(DATA / "dna.scale")}
    rows = _rows(DATA / "heart_scale")
    bad = [(k, y) for k, y, _ in rows if y not in known]
    line, label = bad[0]
    with pytest.raises(DataFormatError) as info:
        build(DataSpec(str(DATA / "dna.scale"), test=str(DATA / "heart_scale"), positive=3.0, wider_test=True))
    err = info.value
    assert err.line == line and err.source == "heart_scale"
    assert f"label {int(label)} is not among the training file dna.scale's labels (1, 2, 3)" in str(err)
    assert f"{len(bad):,} of {len(rows):,} test rows" in str(err)


def test_regression_targets_are_not_checked(tmp_path):
    train, test = tmp_path / "train", tmp_path / "test"
    train.write_text("0.5 1:1\n1.5 2:1\n2.5 1:1 2:2\n-0.5 2:1\n")
    test.write_text("7.25 1:1\n")
    ds = build(DataSpec(str(train), test=str(test), task="regression"))
    assert ds.y_test.tolist() == [7.25]


def test_wider_test_must_be_a_bool():
    with pytest.raises(Exception, match="wider_test"):
        load_libsvm_pair(DATA / "heart_scale", DATA / "heart_scale", wider_test="yes")
