"""A file's width is paid for by its data (issue 21, point 3): d at most WIDTH_PER_ENTRY columns per
nonzero entry and row, never fewer than WIDTH_FLOOR, unless n_features says otherwise.

Oracles: scikit-learn's reader for what an accepted file must equal, and the file's own text for the
line the refusal must name.
"""

from __future__ import annotations

import io

import pytest
from sklearn.datasets import load_svmlight_file

from conftest import DATA
from fedviz.data import libsvm
from fedviz.data.libsvm import load_libsvm, load_libsvm_pair
from fedviz.errors import DataFormatError


def test_the_floor_is_accepted_and_one_past_it_refused():
    floor = libsvm.WIDTH_FLOOR
    at = f"+1 1:1\n-1 {floor}:2\n".encode()
    ours = load_libsvm(at)
    X, _ = load_svmlight_file(io.BytesIO(at))
    assert ours.X.shape == X.shape == (2, floor)
    with pytest.raises(DataFormatError) as e:
        load_libsvm(f"+1 1:1\n-1 2:1\n+1 {floor + 1}:2\n".encode())
    assert e.value.line == 3 and e.value.token == f"{floor + 1}:2"
    assert f"{floor + 1:,} features wide for 3 nonzero entries in 3 rows" in str(e.value)


def test_the_limit_grows_with_entries_and_rows():
    """4 per entry and row: 30,000 rows of two entries allow 4 * 90,000 = 360,000 columns."""
    rows = 30_000
    body = "".join(f"{'+1' if k % 2 else '-1'} {1 + k % 50}:1 {51 + k % 50}:1\n" for k in range(rows - 1))
    limit = libsvm.WIDTH_PER_ENTRY * (2 * rows + rows)
    assert limit == 360_000
    ok = load_libsvm((body + f"+1 1:1 {limit}:1\n").encode())
    assert ok.X.shape == (rows, limit)
    with pytest.raises(DataFormatError, match=f"at most {limit:,}"):
        load_libsvm((body + f"+1 1:1 {limit + 1}:1\n").encode())


def test_n_features_accepts_a_wide_file_and_equals_sklearn():
    data = b"+1 1:1\n-1 10000000:1\n"
    ours = load_libsvm(data, n_features=10_000_000)
    X, _ = load_svmlight_file(io.BytesIO(data), n_features=10_000_000)
    assert ours.X.shape == X.shape and (ours.X != X).nnz == 0


def test_the_pair_is_judged_together():
    """A test file's wide index counts against both files' entries, and names the test file's line."""
    with pytest.raises(DataFormatError) as e:
        load_libsvm_pair(DATA / "heart_scale", b"+1 1:1\n-1 9000000:1\n", names=(None, "t"), wider_test=True)
    assert e.value.source == "t" and e.value.line == 2


@pytest.mark.parametrize("name", ["a9a", "dna.scale", "agaricus_zero_based.train", "mq2008_fold1_test.txt",
                                  "heart_scale"])
def test_real_files_are_far_below_the_limit(name):
    d = load_libsvm(DATA / name)
    assert d.n_features * 100 < max(libsvm.WIDTH_FLOOR, libsvm.WIDTH_PER_ENTRY * (d.X.nnz + d.X.shape[0]))
