"""The LIBSVM reader against scikit-learn's reader on real files, hand-worked tiny inputs,
every malformed case, compressed input, and fuzzing (any input either loads into a valid
LibsvmData or raises DataFormatError; the numba kernel agrees with the line validator;
whatever loads, scikit-learn loads to the same matrix).  Also :func:`map_labels`."""

import bz2
import gzip
import io
import lzma
import re
import tracemalloc
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_svmlight_file, load_svmlight_files

from fedviz.data import libsvm as L
from fedviz.data.libsvm import LibsvmData, load_libsvm, load_libsvm_pair, map_labels
from fedviz.errors import DataFormatError, ParameterError
from conftest import DATA

WELL_FORMED = ["heart_scale", "a9a", "a9a.t", "dna.scale", "dna.scale.t", "mq2008_fold1_test.txt",
               "agaricus_zero_based.train", "agaricus_zero_based.test", "svmlight_edge_cases.txt"]
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _same_matrix(A, B):
    """Equal shapes and no nonzero difference (scikit-learn keeps explicit zeros, we drop them)."""
    assert A.shape == B.shape
    diff = sp.csr_matrix(A - B)
    diff.eliminate_zeros()
    assert diff.nnz == 0


def _check_valid(d: LibsvmData):
    """Every invariant LibsvmData promises, checked from the raw CSR arrays."""
    X = d.X
    assert isinstance(X, sp.csr_matrix) and X.dtype == np.float64
    assert X.shape == (d.y.size, d.n_features) and d.n_features >= 1
    assert d.y.dtype == np.float64 and np.all(np.isfinite(d.y))
    assert np.all(np.isfinite(X.data)) and np.all(X.data != 0)
    assert X.indptr[0] == 0 and X.indptr[-1] == X.data.size and np.all(np.diff(X.indptr) >= 0)
    if X.nnz:
        assert X.indices.min() >= 0 and X.indices.max() < d.n_features
    row_of = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    same_row = row_of[1:] == row_of[:-1]
    assert np.all(np.diff(X.indices)[same_row] > 0)  # sorted, no duplicates
    assert d.qid is None or (d.qid.dtype == np.int64 and d.qid.shape == d.y.shape)
    assert d.dropped_zeros >= 0


def _error(data, **kw) -> DataFormatError:
    with pytest.raises(DataFormatError) as info:
        load_libsvm(data, **kw)
    return info.value


# --------------------------------------------------------------------------- real files vs scikit-learn

@pytest.mark.parametrize("name", WELL_FORMED)
def test_real_file_matches_sklearn(name):
    ours = load_libsvm(DATA / name)
    X, y = load_svmlight_file(str(DATA / name))
    _same_matrix(ours.X, X)
    np.testing.assert_array_equal(ours.y, y)
    assert ours.n_features == X.shape[1] and ours.source == name
    assert ours.dropped_zeros == np.count_nonzero(X.data == 0)
    _check_valid(ours)


def test_index_base_detected_like_sklearn():
    # agaricus holds index 0 (line 3: "0 0:1 ..."); the others start at 1.
    assert load_libsvm(DATA / "agaricus_zero_based.train").zero_based is True
    assert load_libsvm(DATA / "heart_scale").zero_based is False


def test_mq2008_qid_matches_sklearn():
    ours = load_libsvm(DATA / "mq2008_fold1_test.txt")
    X, y, qid = load_svmlight_file(str(DATA / "mq2008_fold1_test.txt"), query_id=True)
    np.testing.assert_array_equal(ours.qid, qid)
    _same_matrix(ours.X, X)
    assert np.unique(qid).size == 156  # README: 156 queries
    assert load_libsvm(DATA / "heart_scale").qid is None


@pytest.mark.parametrize("train,test", [("a9a", "a9a.t"), ("dna.scale", "dna.scale.t"),
                                        ("agaricus_zero_based.train", "agaricus_zero_based.test")])
def test_pair_matches_sklearn_files(train, test):
    a, b = load_libsvm_pair(DATA / train, DATA / test)
    Xa, ya, Xb, yb = load_svmlight_files([str(DATA / train), str(DATA / test)])
    _same_matrix(a.X, Xa)
    _same_matrix(b.X, Xb)
    np.testing.assert_array_equal(a.y, ya)
    np.testing.assert_array_equal(b.y, yb)
    assert a.n_features == b.n_features and a.zero_based == b.zero_based
    assert (a.source, b.source) == (train, test)


def test_a9a_test_split_with_123_features():
    ours = load_libsvm(DATA / "a9a.t", n_features=123)
    X, y = load_svmlight_file(str(DATA / "a9a.t"), n_features=123)
    assert ours.X.shape == (16281, 123)
    _same_matrix(ours.X, X)
    a, b = load_libsvm_pair(DATA / "a9a", DATA / "a9a.t", n_features=123)
    assert a.X.shape == (32561, 123) and b.X.shape == (16281, 123)


def test_pair_decides_index_base_on_both_files():
    train, test = b"1 0:1 2:3\n", b"-1 1:2\n"  # only the training file shows index 0
    a, b = load_libsvm_pair(train, test)
    Xa, ya, Xb, yb = load_svmlight_files([io.BytesIO(train), io.BytesIO(test)])
    assert a.zero_based and b.zero_based
    _same_matrix(a.X, Xa)
    _same_matrix(b.X, Xb)
    assert b.X[0, 1] == 2.0
    alone = load_libsvm(test)  # read alone, the test file is one-based
    assert not alone.zero_based and alone.X[0, 0] == 2.0


def test_zero_based_override():
    forced = load_libsvm(DATA / "heart_scale", zero_based=True)
    X, _ = load_svmlight_file(str(DATA / "heart_scale"), zero_based=True)
    assert forced.X.shape == (270, 14) and forced.zero_based
    _same_matrix(forced.X, X)
    # One-based forced on a zero-based file: the first line with a "0:" token is refused.
    lines = (DATA / "agaricus_zero_based.train").read_bytes().split(b"\n")
    first = next(k for k, line in enumerate(lines, 1) if re.search(rb"(^|\s)0:", line))
    err = _error(DATA / "agaricus_zero_based.train", zero_based=False)
    assert err.line == first and err.token == "0:1" and "index 0" in str(err)


def test_n_features_override():
    wide = load_libsvm(DATA / "heart_scale", n_features=20)
    X, _ = load_svmlight_file(str(DATA / "heart_scale"), n_features=20)
    _same_matrix(wide.X, X)
    # Too narrow: the first row with an index above 10 is named, with its token.
    lines = (DATA / "heart_scale").read_bytes().split(b"\n")
    first = next(k for k, line in enumerate(lines, 1)
                 if any(int(t.split(b":")[0]) > 10 for t in line.split()[1:]))
    token = next(t for t in lines[first - 1].split()[1:] if int(t.split(b":")[0]) > 10).decode()
    err = _error(DATA / "heart_scale", n_features=10)
    assert err.line == first and err.token == token and "n_features=10" in str(err)
    with pytest.raises(DataFormatError, match=r"^a9a\.t, line 1: .*n_features=13"):
        load_libsvm_pair(DATA / "heart_scale", DATA / "a9a.t", n_features=13)


@pytest.mark.parametrize("name", ["heart_scale", "svmlight_edge_cases.txt", "dna.scale"])
def test_missing_final_newline_still_loads(name):
    raw = (DATA / name).read_bytes()
    stripped = raw.rstrip(b"\r\n")
    assert not stripped.endswith(b"\n")
    a, b = load_libsvm(raw), load_libsvm(stripped)
    _same_matrix(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)


def test_both_engines_agree_on_real_files():
    for name in ["heart_scale", "mq2008_fold1_test.txt", "svmlight_edge_cases.txt", "dna.scale"]:
        head = b"\n".join((DATA / name).read_bytes().split(b"\n")[:300])  # the validator is slow
        _assert_same_parse(head)


# --------------------------------------------------------------------------- hand-worked inputs

def test_hand_worked_example():
    data = (b"# header comment\r\n"
            b"+1 1:0.5 3:-2\t# inline comment 9:9\r\n"
            b"\r\n"
            b"-1\r\n"
            b"   \t \r\n"
            b"2.5\t2:1.234567890123456e10  3:0 4:1e-3")  # no final newline
    d = load_libsvm(data)
    expected = np.array([[0.5, 0, -2, 0], [0, 0, 0, 0], [0, 1.234567890123456e10, 0, 0.001]])
    np.testing.assert_array_equal(d.X.toarray(), expected)
    np.testing.assert_array_equal(d.y, [1.0, -1.0, 2.5])
    assert (d.n_features, d.zero_based, d.dropped_zeros, d.qid, d.source) == (4, False, 1, None, "upload")
    X, y = load_svmlight_file(io.BytesIO(data))
    _same_matrix(d.X, X)


def test_qid_rows():
    d = load_libsvm(b"3 qid:1 1:1\n2 qid:1 2:1 # docid = 7\n1 qid:-7 1:0.5\n0 qid:18219\n")
    np.testing.assert_array_equal(d.qid, [1, 1, -7, 18219])
    np.testing.assert_array_equal(d.X.toarray(), [[1, 0], [0, 1], [0.5, 0], [0, 0]])


def test_explicit_zeros_are_dropped_but_count_for_base_and_width():
    d = load_libsvm(b"1 1:0 2:3\n-1 5:0\n")
    assert d.X.nnz == 1 and d.X.shape == (2, 5) and d.dropped_zeros == 2
    z = load_libsvm(b"1 0:0 2:1\n")  # an explicit zero at index 0 still makes the file zero-based
    assert z.zero_based and z.X.shape == (1, 3) and z.X[0, 2] == 1
    for data in (b"1 1:0 2:3\n-1 5:0\n", b"1 0:0 2:1\n"):
        X, _ = load_svmlight_file(io.BytesIO(data))
        assert X.shape == load_libsvm(data).X.shape


def test_label_only_rows_like_sklearn():
    d = load_libsvm(b"1\n-1\n")
    X, y = load_svmlight_file(io.BytesIO(b"1\n-1\n"))
    assert d.X.shape == X.shape == (2, 1) and d.X.nnz == 0
    np.testing.assert_array_equal(d.y, y)


def test_numbers_the_kernel_hands_to_strtod():
    texts = [b"0.12345678901234567890", b"1.7976931348623157e308", b"4.9e-324", b"123456789012345678901",
             b"9007199254740993", b"1e23", b"0.000000000000000000000000001"]
    data = b"".join(b"1.00000000000000000001 1:" + t + b"\n" for t in texts)
    d = load_libsvm(data)
    np.testing.assert_array_equal(d.X.toarray()[:, 0], [float(t) for t in texts])
    np.testing.assert_array_equal(d.y, np.full(len(texts), float(b"1.00000000000000000001")))
    # Underflow to zero in the slow path: the entry is dropped like any explicit zero.
    u = load_libsvm(b"1 1:1e-400 2:0.5 3:1e-999\n2 2:1e-400\n")
    np.testing.assert_array_equal(u.X.toarray(), [[0, 0.5, 0], [0, 0, 0]])
    assert u.dropped_zeros == 3 and u.X.nnz == 1


@settings(max_examples=150, deadline=None)
@given(st.lists(st.floats(-1e300, 1e300), min_size=1, max_size=20),  # away from rounding to inf
       st.sampled_from(["{!r}", "{:.17g}", "{:.6g}", "{:.15e}", "{:.20f}", "{:.3e}"]))
def test_values_parse_exactly_like_python_float(values, fmt):
    texts = [fmt.format(v) for v in values]
    data = "".join(f"{t} 1:{t}\n" for t in texts).encode()
    d = load_libsvm(data)
    expected = np.array([float(t) for t in texts])
    np.testing.assert_array_equal(d.y, expected)
    np.testing.assert_array_equal(d.X.toarray()[:, 0], expected)


DIGITS = st.text("0123456789", min_size=1, max_size=25)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["", "+", "-"]), DIGITS, st.one_of(st.none(), st.just(""), DIGITS),
       st.one_of(st.none(), st.integers(-400, 400)), st.booleans())
def test_decimal_strings_parse_exactly(sign, digits, fraction, exponent, lead_with_dot):
    """Every shape of the grammar, many digits, exponents far outside the exact fast path."""
    text = sign + ("" if lead_with_dot else digits) + ("" if fraction is None and not lead_with_dot
                                                      else "." + (fraction or digits))
    text = (text + ("" if exponent is None else f"e{exponent:+d}")).encode()
    value = float(text)
    if not np.isfinite(value):
        assert "overflows" in str(_error(b"1 1:" + text + b"\n"))
        return
    d = load_libsvm(text + b" 1:" + text + b"\n")
    assert d.y[0] == value and d.X[0, 0] == value


# --------------------------------------------------------------------------- malformed input

MALFORMED = [
    # (input, line, token, words in the message, options)
    (b"1 1:1\nabc 1:1\n", 2, "abc", "label is not a number", {}),
    (b"1 1:1\n2:1 3:1\n", 2, "2:1", "does not start with a label", {}),
    (b"nan 1:1\n", 1, "nan", "NaN or infinite", {}),
    (b"1e999 1:1\n", 1, "1e999", "overflows", {}),
    (b"1 1:1\n1 2:1 3\n", 2, "3", "no ':'", {}),
    (b"1 1.5:1\n", 1, "1.5:1", "not a non-negative integer", {}),
    (b"1 a:1\n", 1, "a:1", "not a non-negative integer", {}),
    (b"1 :1\n", 1, ":1", "not a non-negative integer", {}),
    (b"1 1:1\n1 -2:1\n", 2, "-2:1", "negative", {}),
    (b"1 1:1\n1 0:1\n", 2, "0:1", "index 0", {"zero_based": False}),
    (b"1 3:1 2:1\n", 1, "2:1", "must increase", {}),
    (b"1 2:1 2:3\n", 1, "2:3", "appears twice", {}),
    (b"1 1:nan\n", 1, "1:nan", "NaN or infinite", {}),
    (b"1 1:inf\n", 1, "1:inf", "NaN or infinite", {}),
    (b"1 1:-Infinity\n", 1, "1:-Infinity", "NaN or infinite", {}),
    (b"1 1:1 2:1e999\n", 1, "2:1e999", "overflows", {}),
    (b"1 1:abc\n", 1, "1:abc", "value is not a number", {}),
    (b"1 1:\n", 1, "1:", "value is not a number", {}),
    (b"1 1:2:3\n", 1, "1:2:3", "value is not a number", {}),
    (b"1 1:1e\n", 1, "1:1e", "value is not a number", {}),
    (b"1 10000001:1\n", 1, "10000001:1", "max_index=10000000", {}),
    (b"1 6:1\n", 1, "6:1", "max_index=5", {"max_index": 5}),
    (b"1 99999999999999999999999:1\n", 1, "99999999999999999999999:1", "max_index", {}),
    (b"1 qid:abc 1:1\n", 1, "qid:abc", "qid is not an integer", {}),
    (b"1 qid:1.5 1:1\n", 1, "qid:1.5", "qid is not an integer", {}),
    (b"1 qid: 1:1\n", 1, "qid:", "qid is not an integer", {}),
    (b"1 1:1 qid:3\n", 1, "qid:3", "right after the label", {}),
    (b"1 qid:1 1:1\n# c\n2 1:1\n", 3, "2", "has no qid", {}),
    (b"1 1:1\n2 qid:4 1:1\n", 2, "2", "has a qid", {}),
    (b"1 1:1\n\n# c\n1 1:1\n1 1:1\n", 5, None, "max_rows=2", {"max_rows": 2}),
    (b"label,f1,f2\n1,0.5,2\n", 1, "label,f1,f2", "label is not a number", {}),
    (b"1,0.5,2\n0,1.5,3\n", 1, "1,0.5,2", "label is not a number", {}),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", 1, "\\x89PNG", "label is not a number", {}),
    (b"1 1:1\r\n# ok\r\n-1 2:1 \t 4:x # comment\r\n", 3, "4:x", "value is not a number", {}),
]


@pytest.mark.parametrize("data,line,token,words,kw", MALFORMED,
                         ids=[repr(m[0][:24]) for m in MALFORMED])
def test_malformed_input_names_line_and_token(data, line, token, words, kw):
    err = _error(data, **kw)
    assert err.line == line and f"line {line}" in str(err)
    assert err.token == token
    if token is not None:
        assert repr(token) in str(err)
    assert words in str(err)
    assert "truncated" not in str(err)


@pytest.mark.parametrize("data", [b"", b"\n\n", b"# only a comment\n\r\n", b"   "])
def test_empty_input(data):
    err = _error(data)
    assert "no data rows" in str(err) and err.line is None


def test_truncated_a9a_copy():
    raw = (DATA / "broken" / "a9a.truncated_1MiB").read_bytes()
    last_line = raw.count(b"\n") + 1
    last_token = raw.rsplit(b"\n", 1)[1].split()[-1].decode()
    err = _error(DATA / "broken" / "a9a.truncated_1MiB")
    assert "truncated" in str(err) and err.line == last_line and err.token == last_token
    assert f"line {last_line}" in str(err) and "a9a.truncated_1MiB" in str(err)


def test_colon_stripped_a9a_copy():
    first_line = (DATA / "broken" / "a9a.colons_stripped").read_bytes().split(b"\n", 1)[0]
    err = _error(DATA / "broken" / "a9a.colons_stripped")
    assert err.line == 1 and err.token == first_line.split()[1].decode() and "no ':'" in str(err)


def test_truncation_rule():
    cut = _error(b"1 1:1\n-1 2:")  # a bad, unterminated last row after complete rows
    assert "truncated" in str(cut) and cut.line == 2 and cut.token == "2:"
    # the same bad row with a newline is an ordinary error, and so is a lone unterminated line
    assert "truncated" not in str(_error(b"1 1:1\n-1 2:\n"))
    assert "truncated" not in str(_error(b"-1 2:"))
    # a well-formed unterminated file of exactly 4 KiB looks cut at a size limit
    body = b"".join(b"1 1:1 2:0.5\n" for _ in range(340))
    last = b"-1 3:" + b"7" * (4096 - len(body) - 5)
    assert len(body + last) == 4096
    err = _error(body + last)
    assert "truncated" in str(err) and err.line == 341 and err.token == last.split()[-1].decode()
    assert load_libsvm(body + last + b"\n").y.size == 341
    assert load_libsvm(body + last[:-1]).y.size == 341  # 4095 bytes: not a power of two


# --------------------------------------------------------------------------- sources and compression

COMPRESSORS = {"gzip": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_compressed_input_detected_by_magic_bytes(kind, tmp_path):
    raw = (DATA / "heart_scale").read_bytes()
    packed = COMPRESSORS[kind](raw)
    plain = load_libsvm(raw)
    path = tmp_path / "data.txt"  # a misleading name: only the content counts
    path.write_bytes(packed)
    for source in (packed, io.BytesIO(packed), path, str(path)):
        d = load_libsvm(source)
        _same_matrix(d.X, plain.X)
        np.testing.assert_array_equal(d.y, plain.y)
    assert load_libsvm(path).source == "data.txt"
    with pytest.raises(DataFormatError, match="corrupt or truncated"):
        load_libsvm(packed[: len(packed) // 2])
    with pytest.raises(DataFormatError, match="max_bytes=1000"):
        load_libsvm(packed, max_bytes=1000)


def test_plain_file_with_compressed_name(tmp_path):
    path = tmp_path / "heart.gz"
    path.write_bytes((DATA / "heart_scale").read_bytes())
    assert load_libsvm(path).X.shape == (270, 13)


def test_gzip_bomb_refused_while_streaming():
    member = gzip.compress(bytes(1 << 20))  # 1 MiB of zeros in about 1 KiB
    bomb = member * 1100  # a valid multi-member gzip stream of 1.1 GiB
    tracemalloc.start()
    try:
        with pytest.raises(DataFormatError, match="decompresses to more than max_bytes"):
            load_libsvm(bomb, max_bytes=8 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20  # it stopped near the cap instead of inflating 1.1 GiB


def test_input_over_max_bytes_and_unsupported_archives():
    with pytest.raises(DataFormatError, match="larger than max_bytes=5"):
        load_libsvm(b"1 1:1\n-1 2:1\n", max_bytes=5)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("heart_scale", b"1 1:1\n")
    with pytest.raises(DataFormatError, match="zip input is not supported"):
        load_libsvm(buffer.getvalue())


def test_source_names(tmp_path):
    path = tmp_path / "mine.svm"
    path.write_bytes(b"1 1:1\n")
    assert load_libsvm(path).source == "mine.svm"
    assert load_libsvm(b"1 1:1\n").source == "upload"
    assert load_libsvm(io.BytesIO(b"1 1:1\n")).source == "upload"
    assert load_libsvm(b"1 1:1\n", name="x.txt").source == "x.txt"
    with open(path, "rb") as f:
        assert load_libsvm(f).source == "mine.svm"
    path.write_bytes(b"x 1:1\n")
    assert "mine.svm, line 1" in str(_error(path))


def test_bad_parameters(tmp_path):
    for kw in ({"n_features": 0}, {"zero_based": "yes"}, {"max_rows": 0}, {"max_bytes": 0},
               {"max_index": -1}):
        with pytest.raises(ParameterError):
            load_libsvm(b"1 1:1\n", **kw)
    path = tmp_path / "t.txt"
    path.write_text("1 1:1\n")
    with open(path) as text_file, pytest.raises(ParameterError, match="binary mode"):
        load_libsvm(text_file)
    with pytest.raises(ParameterError):
        load_libsvm(12)


# --------------------------------------------------------------------------- fuzzing

def _assert_same_parse(data: bytes, **kw):
    """The numba kernel and the line validator agree: same rows, or the same first error."""
    kw = {"reject_zero": False, "max_index": 10**7, "max_rows": None} | kw
    outcomes = []
    for engine in ("numba", "python"):
        try:
            outcomes.append(L._parse(data, engine=engine, **kw))
        except L._Bad as bad:
            outcomes.append((bad.line, bad.reason, bad.token))
    fast, slow = outcomes
    if isinstance(fast, tuple) or isinstance(slow, tuple):
        assert fast == slow
        return
    for field in ("labels", "indptr", "indices", "values", "row_line", "row_off", "row_last"):
        np.testing.assert_array_equal(getattr(fast, field), getattr(slow, field), err_msg=field)
    assert (fast.n_entries, fast.min_index) == (slow.n_entries, slow.min_index)
    assert (fast.qid is None) == (slow.qid is None)
    if fast.qid is not None:
        np.testing.assert_array_equal(fast.qid, slow.qid)


def _load_or_refuse(data: bytes):
    """Either a valid LibsvmData or a DataFormatError; any other exception fails the test."""
    try:
        d = load_libsvm(data)
    except DataFormatError as err:
        assert str(err)
        return None
    _check_valid(d)
    return d


# Bytes that make up LIBSVM files, so that fuzzed input is often valid or nearly so.
GRAMMAR = st.lists(st.sampled_from([b"0", b"1", b"2", b"7", b"9", b":", b".", b"-", b"+", b"e", b" ",
                                    b"\t", b"\r", b"\n", b"#", b"qid:", b"nan", b"1e400", b"x", b","]),
                   max_size=60).map(b"".join)


@FUZZ
@given(st.binary(max_size=300))
def test_fuzz_arbitrary_bytes(data):
    _load_or_refuse(data)
    _assert_same_parse(data)


@FUZZ
@given(GRAMMAR, st.booleans())
def test_fuzz_grammar_agrees_with_sklearn(data, one_based):
    d = _load_or_refuse(data)
    _assert_same_parse(data, reject_zero=one_based, max_rows=3)
    if d is not None:  # whatever we accept, scikit-learn reads to the same rows
        X, y, qid = load_svmlight_file(io.BytesIO(data), query_id=True)
        _same_matrix(d.X, X)
        np.testing.assert_array_equal(d.y, y)
        if d.qid is not None:
            np.testing.assert_array_equal(d.qid, qid)


def _outcome(data: bytes):
    """What loading ``data`` gives, in a comparable form: the parsed rows or the error's message."""
    d = _load_or_refuse(data)
    if d is None:
        with pytest.raises(DataFormatError) as info:
            load_libsvm(data)
        return "refused", str(info.value)
    return ("loaded", d.y.tolist(), d.X.indptr.tolist(), d.X.indices.tolist(), d.X.data.tolist(),
            d.n_features, d.zero_based, None if d.qid is None else d.qid.tolist())


MAGICS = [magic for magic, _, _ in L._MAGIC]


@FUZZ
@given(st.one_of(st.binary(max_size=300), GRAMMAR), st.sampled_from(sorted(COMPRESSORS)), st.data())
def test_fuzz_compressed_input(data, kind, draw):
    """Compressed bytes load exactly as their plain bytes do; a stream cut short is always refused;
    a corrupted stream, or garbage behind a compressor's magic bytes, loads or is refused, nothing else."""
    packed = COMPRESSORS[kind](data)
    if not data.startswith(tuple(MAGICS)):  # one layer is decompressed: a nested archive is not plain text
        assert _outcome(packed) == _outcome(data)
    cut = draw.draw(st.integers(0, len(packed) - 1), label="cut")
    assert _outcome(packed[:cut])[0] == "refused"
    pos = draw.draw(st.integers(0, len(packed) - 1), label="position")
    flip = draw.draw(st.integers(1, 255), label="xor")
    _load_or_refuse(packed[:pos] + bytes([packed[pos] ^ flip]) + packed[pos + 1:])
    _load_or_refuse(draw.draw(st.sampled_from(MAGICS), label="magic") + data)


SEED_FILE = (b"# a small valid file\n+1 qid:3 1:0.708333 2:1 4:-0.320755 13:-1\n"
             b"-1 qid:3 3:0.333333 5:1e-3 7:1 #docid = 9\r\n0 qid:4\n2.5 qid:4 1:0 6:1.5E2\n")


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(["delete", "insert", "replace", "cut"]),
                          st.integers(0, len(SEED_FILE)), st.binary(min_size=1, max_size=3)),
                max_size=4))
def test_fuzz_mutations_of_a_valid_file(mutations):
    data = SEED_FILE
    for op, pos, blob in mutations:
        pos = min(pos, len(data))
        if op == "delete":
            data = data[:pos] + data[pos + 1:]
        elif op == "insert":
            data = data[:pos] + blob + data[pos:]
        elif op == "replace":
            data = data[:pos] + blob + data[pos + len(blob):]
        else:
            data = data[:pos]
    _load_or_refuse(data)
    _assert_same_parse(data)


# --------------------------------------------------------------------------- map_labels

def test_map_labels_keeps_plus_minus_one():
    y, m = map_labels([1.0, -1.0, 1.0])
    np.testing.assert_array_equal(y, [1, -1, 1])
    assert (m.task, m.positive, m.negative) == ("classification", 1.0, (-1.0,))


def test_map_labels_two_classes_larger_is_positive():
    y, m = map_labels(np.array([0.0, 1.0, 1.0, 0.0]))
    np.testing.assert_array_equal(y, [-1, 1, 1, -1])
    assert m.description == "label 1 became +1, label 0 became -1"
    y, m = map_labels([7, 2, 2])
    np.testing.assert_array_equal(y, [1, -1, -1])
    assert (m.positive, m.negative) == (7.0, (2.0,))
    y, m = map_labels([7, 2, 2], positive=2)
    np.testing.assert_array_equal(y, [-1, 1, 1])


def test_map_labels_many_classes_need_a_positive_class():
    raw = load_libsvm(DATA / "dna.scale").y
    with pytest.raises(DataFormatError) as info:
        map_labels(raw)
    assert "3 classes (1, 2, 3)" in str(info.value) and "positive=" in str(info.value)
    y, m = map_labels(raw, positive=2)
    np.testing.assert_array_equal(y == 1, raw == 2)
    assert m.negative == (1.0, 3.0) and m.description == "label 2 became +1, labels 1, 3 became -1"
    with pytest.raises(DataFormatError, match=r"1, 2, 3, 4, 5, \.\.\. \(10 in all\)"):
        map_labels(np.arange(1, 11), task="classification")
    with pytest.raises(ParameterError, match="one of the labels found"):
        map_labels(raw, positive=5)


def test_map_labels_regression_and_single_class():
    raw = [0.5, 1.25, -3.0]
    y, m = map_labels(raw)
    np.testing.assert_array_equal(y, raw)
    assert m.task == "regression" and m.positive is None
    y, m = map_labels([0.5, 1.5, 0.5], task="classification")
    np.testing.assert_array_equal(y, [-1, 1, -1])
    with pytest.raises(DataFormatError, match="every label is 3"):
        map_labels([3, 3, 3])
    with pytest.raises(ParameterError):
        map_labels(raw, task="regression", positive=0.5)
    with pytest.raises(ParameterError):
        map_labels(raw, task="ranking")
    with pytest.raises(DataFormatError):
        map_labels([])
    with pytest.raises(DataFormatError):
        map_labels([1.0, np.nan])


# --------------------------------------------------------------------------- unterminated last rows

def _cut_a9a() -> bytes:
    """The real truncated a9a copy, cut back to its last whole token: a valid, short last row."""
    raw = (DATA / "broken" / "a9a.truncated_1MiB").read_bytes()
    return raw[:raw.rfind(b" ")]


def test_cut_a9a_copy_loads_with_a_warning_naming_its_last_line():
    cut = _cut_a9a()
    last_line = cut.count(b"\n") + 1
    last_row = cut.rsplit(b"\n", 1)[1].split()
    # the oracle: scikit-learn's row lengths, and a count of the raw tokens
    X, _ = load_svmlight_file(io.BytesIO(cut))
    median = np.median(np.diff(X.indptr)[:-1])
    d = load_libsvm(cut, name="a9a.cut")
    assert len(d.warnings) == 1
    w = d.warnings[0]
    assert w.startswith("a9a.cut, ") and f"line {last_line:,} has no line end" in w
    assert f"its last row has {len(last_row) - 1} nonzero features" in w
    assert f"median row has {median:g}" in w and "cut short" in w
    assert d.y.size == X.shape[0]  # it still loads, every row


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_cut_a9a_copy_warns_after_decompression(kind):
    cut = _cut_a9a()
    last_line = cut.count(b"\n") + 1
    w = load_libsvm(COMPRESSORS[kind](cut)).warnings
    assert len(w) == 1 and f"line {last_line:,} has no line end" in w[0]


def test_the_raw_truncated_copy_is_still_refused():
    # cut mid-token, its last row is malformed: an error (naming the line), not a warning
    with pytest.raises(DataFormatError, match="truncated last row"):
        load_libsvm(DATA / "broken" / "a9a.truncated_1MiB")


@pytest.mark.parametrize("data", [(DATA / "a9a").read_bytes(), b"1 1:1\n-1 2:1\n", b"1 1:1\n# done",
                                  b"1 1:1\n   ", b"1 1:1\r\n-1 2:1\r\n"])
def test_files_ending_in_a_line_end_or_a_comment_get_no_warning(data):
    assert load_libsvm(data).warnings == ()


def test_the_test_file_of_a_pair_is_named_in_its_warning():
    cut = _cut_a9a()
    train, test = load_libsvm_pair(DATA / "a9a", cut, names=(None, "mine.t"))
    assert train.warnings == ()
    assert len(test.warnings) == 1 and test.warnings[0].startswith("mine.t, line ")


def test_a_lone_unterminated_row_is_flagged_without_a_median():
    (w,) = load_libsvm(b"1 1:1 3:2", name="one").warnings
    assert "line 1 has no line end" in w and "2 nonzero features" in w and "no other row" in w
