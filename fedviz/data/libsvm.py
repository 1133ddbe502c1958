"""Reading LIBSVM / svmlight text files.

This module owns the file format ``label [qid:Q] index:value ... [# comment]``:
:func:`load_libsvm` (one file) and :func:`load_libsvm_pair` (a train/test pair read
with a common width and index base).  It reads labels exactly as written; what they
become for a loss (the label policy: binary, one-vs-rest, multiclass codes, regression
targets) is :mod:`fedviz.data.labels`, whose :func:`map_labels` and :class:`LabelMap` (as
``LabelMapping``) are re-exported here for the callers that know them from this module.

scikit-learn's ``load_svmlight_file`` is the reference for what a well-formed
file means; this reader gives the same matrix and labels, and differs only where
it is stricter (it names the line and the token of every malformed row).

Design
------
Parsing runs in two tiers.  A small numba kernel walks the raw bytes once,
validates every token and converts the common numbers exactly (see
:func:`_parse_real`); the rare number it cannot convert exactly is copied aside
and converted by numpy's correctly rounded ``strtod``.  When the kernel meets a
bad row it only reports the row's line; the plain-Python line validator
(:func:`_parse_line`, the executable specification of the grammar) then parses
that line again to say what is wrong.  :func:`_scan_python` runs that validator
over a whole input; the tests check that both tiers agree on fuzzed input.

Grammar (bytes; ``#`` starts a comment that runs to the end of the line; space,
tab, CR, VT and FF separate tokens; lines are separated by LF, so CRLF works):

* label: a decimal number ``[+-](digits[.digits] | .digits)[(e|E)[+-]digits]``,
  finite;
* ``qid:Q`` (optional, right after the label): an integer of at most 18 digits;
  either every row has one or none does;
* features: ``index:value``, the index a non-negative decimal integer no larger
  than ``max_index``, strictly increasing within a row (duplicates and unsorted
  rows are refused rather than summed or reordered), the value a finite number.

Blank and comment-only lines are skipped; a row may hold a label only.
Explicit zero values are read (an index with a zero value still counts for the
zero/one-based decision and the width, as in scikit-learn) and then dropped
from the matrix: a stored zero is not an appearance of a feature.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numba
import numpy as np
import scipy.sparse as sp

from ..errors import DataFormatError, ParameterError
from ..validation import check_int
from .labels import LabelMap as LabelMapping, map_labels  # re-exported: the label policy lives there

__all__ = ["LibsvmData", "LabelMapping", "load_libsvm", "load_libsvm_pair", "map_labels"]

DEFAULT_MAX_INDEX = 10**7
DEFAULT_MAX_BYTES = 1 << 30  # 1 GiB, before or after decompression
#: The widest a file may make the data without ``n_features``: ``WIDTH_PER_ENTRY`` columns per
#: nonzero entry and row, and never fewer than ``WIDTH_FLOOR``.  Every model vector, gradient and
#: per-feature statistic is d long, so d must be paid for by the data: a 9 KB file with one index
#: at 10,000,000 cost 860 MB (issue 21).  Real sparse sets sit far below (news20: 0.15 columns
#: per entry; a9a: 0.0003).
WIDTH_PER_ENTRY = 4
WIDTH_FLOOR = 100_000
_CHUNK = 1 << 24  # 16 MiB: reads and decompresses in steps of this size
# Magic bytes -> (format name, opener of a binary stream); None marks a known but unsupported format.
_MAGIC = (
    (b"\x1f\x8b", "gzip", lambda f: gzip.GzipFile(fileobj=f, mode="rb")),
    (b"BZh", "bz2", bz2.BZ2File),
    (b"\xfd7zXZ\x00", "xz", lzma.LZMAFile),
    (b"PK\x03\x04", "zip", None),
    (b"\x28\xb5\x2f\xfd", "zstd", None),
)


@dataclass(frozen=True, eq=False)
class LibsvmData:
    """One parsed LIBSVM file.

    Attributes
    ----------
    X : scipy.sparse.csr_matrix, shape (n_rows, n_features), float64
        Sorted indices, no duplicates, no stored zeros.
    y : ndarray of float64, shape (n_rows,)
        The labels or targets exactly as written in the file.
    qid : ndarray of int64 or None
        The query id of each row, or None when the file has no ``qid:``.
    zero_based : bool
        Whether the file's indices were read as zero-based (detected or forced).
    n_features : int
        The width of ``X``.
    source : str
        A display name: the file name, the ``name`` given, or ``"upload"``.
    dropped_zeros : int
        How many explicit ``index:0`` entries were read and left out of ``X``.
    warnings : tuple of str
        Sentences for people about input that loaded but looks wrong, each naming the
        file: today, a last row without a line end (the file may be cut short; see
        :func:`load_libsvm`).  Empty for a clean file.  The CLI and the UI show them.
    row_lines : ndarray of int64 or None
        Each row's one-based line number in the (decompressed) input, so that checks made
        after reading (a test file's labels against its training file's) can name a line.
    """

    X: sp.csr_matrix
    y: np.ndarray
    qid: np.ndarray | None
    zero_based: bool
    n_features: int
    source: str
    dropped_zeros: int = 0
    warnings: tuple[str, ...] = ()
    row_lines: np.ndarray | None = field(default=None, repr=False, compare=False)


# --------------------------------------------------------------------------- public API

def load_libsvm(source: str | os.PathLike | bytes | BinaryIO, *, n_features: int | None = None,
                zero_based: bool | str = "auto", max_rows: int | None = None,
                max_bytes: int | None = DEFAULT_MAX_BYTES, max_index: int = DEFAULT_MAX_INDEX,
                name: str | None = None) -> LibsvmData:
    """Read one LIBSVM / svmlight file.

    Parameters
    ----------
    source : path, bytes or binary file object
        A ``str`` is always a path, never file content.  gzip, bz2 and xz input is
        recognised by its magic bytes (the file name plays no part) and decompressed
        as a stream, never beyond ``max_bytes``.
    n_features : int, optional
        Width of ``X``.  Default: one past the largest index (after the zero/one-based
        shift), as scikit-learn does.  A file with an index that does not fit is refused.
    zero_based : True, False or "auto"
        ``"auto"`` follows scikit-learn's rule: indices are one-based unless some index
        is 0 or the file holds no feature at all.  ``False`` refuses index 0.
    max_rows : int, optional
        Refuse input with more data rows than this.
    max_bytes : int or None
        Refuse input larger than this, before or after decompression (a guard against
        decompression bombs).  None means no limit.
    max_index : int
        Refuse feature indices above this (at most 2**31 - 2, so that indices fit
        int32); a typo such as ``10000000000:1`` would otherwise ask for a matrix
        that wide.
    name : str, optional
        Display name for messages and :attr:`LibsvmData.source`.

    Returns
    -------
    LibsvmData

    Raises
    ------
    DataFormatError
        On malformed input; the message names the one-based line and the token.

    Notes
    -----
    A file cut off mid-row is detected by this rule, which cannot be complete (a cut
    of ``3:10`` after ``3:1`` leaves a valid row): when the input does not end with a
    newline and has at least one earlier line,

    * if its last line is malformed, the error says the input looks *truncated* and
      names that line and the incomplete token;
    * if the last line is a well-formed row but the (uncompressed) input is exactly
      a power of two of at least 4 KiB (1 MiB, 2 MiB, ...), the input is refused as
      truncated too: cuts at such sizes come from copy and upload limits.  A complete
      file that happens to have that size loads once it ends with a newline.

    Compressed input that ends early is always detected by the decompressor.

    Any other input whose last row has no final line end (also after decompression)
    loads with a warning in :attr:`LibsvmData.warnings` that names the line and
    compares the row's nonzero features with the file's median row: a cut between two
    tokens leaves a valid but short row that no rule can tell from a complete one, so
    the user decides.  A last line holding only a comment or blanks gets no warning (no
    row can have been cut).  The check reads the last line and the row lengths the
    parser already has: no second pass over the input.
    """
    opts = _options(zero_based, max_rows, max_bytes, max_index)
    nf = None if n_features is None else check_int("n_features", n_features, low=1)
    parsed = _read_and_parse(source, name, opts)
    return _assemble([parsed], opts["zero_based"], nf)[0]


def load_libsvm_pair(train, test, *, n_features: int | None = None, zero_based: bool | str = "auto",
                     max_rows: int | None = None, max_bytes: int | None = DEFAULT_MAX_BYTES,
                     max_index: int = DEFAULT_MAX_INDEX,
                     names: tuple[str | None, str | None] = (None, None),
                     wider_test: bool = False) -> tuple[LibsvmData, LibsvmData]:
    """Read a train/test pair so that their columns line up.

    Both files get the same width (the training file's unless ``n_features`` is given)
    and the same zero/one-based decision, taken on both files together as
    scikit-learn's ``load_svmlight_files`` does: a test file that happens to lack
    index 0 must not be shifted differently from its zero-based training file.
    Parameters are those of :func:`load_libsvm`; ``max_rows`` and ``max_bytes``
    apply to each file.

    A test file with a feature index beyond the training file's last is refused, naming
    its line: that is what the test file of another data set looks like (heart_scale's
    13 features against dna.scale.t's 180), and a model fitted on the training file
    leaves such a feature's weight at zero anyway.  ``wider_test=True`` accepts it and
    widens both matrices, as scikit-learn does.
    """
    opts = _options(zero_based, max_rows, max_bytes, max_index)
    nf = None if n_features is None else check_int("n_features", n_features, low=1)
    if not (isinstance(names, (tuple, list)) and len(names) == 2):
        raise ParameterError("names", names, "a pair (train name, test name)")
    if not isinstance(wider_test, (bool, np.bool_)):
        raise ParameterError("wider_test", wider_test, "True or False")
    parsed = [_read_and_parse(s, nm, opts) for s, nm in zip((train, test), names)]
    if nf is None and not wider_test:
        zero_based = _decide_zero_based(parsed, opts["zero_based"])
        shift = 0 if zero_based else 1
        width = _needed_width(parsed[0], shift)
        if _needed_width(parsed[1], shift) > width:
            _raise_out_of_range(
                parsed[1], width, shift,
                why=f"lies beyond the training file {parsed[0].name or 'upload'}'s last feature "
                    f"({'zero' if shift == 0 else 'one'}-based indices {shift}..{width - 1 + shift}); "
                    "is it the test file of another data set? If the test file is meant to be wider, "
                    "say so (wider_test=True; Data page: 'Test file may be wider')")
    train_data, test_data = _assemble(parsed, opts["zero_based"], nf)
    return train_data, test_data


# --------------------------------------------------------------------------- reading

def _options(zero_based, max_rows, max_bytes, max_index) -> dict:
    if isinstance(zero_based, (bool, np.bool_)):
        zero_based = bool(zero_based)
    elif not (isinstance(zero_based, str) and zero_based == "auto"):
        raise ParameterError("zero_based", zero_based, "True, False or 'auto'")
    return {
        "zero_based": zero_based,
        "max_rows": None if max_rows is None else check_int("max_rows", max_rows, low=1),
        "max_bytes": None if max_bytes is None else check_int("max_bytes", max_bytes, low=1),
        "max_index": check_int("max_index", max_index, low=0, high=2**31 - 2),
    }


def _read_and_parse(source, name, opts) -> "_Parsed":
    data, name, compressed = _read_source(source, name, opts["max_bytes"])
    try:
        parsed = _parse(data, reject_zero=opts["zero_based"] is False, max_index=opts["max_index"],
                        max_rows=opts["max_rows"])
    except _Bad as bad:
        raise _format_error(bad, data, name) from None
    if not compressed:
        _check_power_of_two_cut(data, name)
    parsed.name = name
    parsed.warnings = _unterminated_warning(data, parsed, name)
    return parsed


def _read_source(source, name, max_bytes) -> tuple[bytes, str, bool]:
    """Return the (decompressed) bytes, a display name, and whether they were compressed."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        name = "upload" if name is None else str(name)
        _check_size(len(source), max_bytes, name)
        raw = bytes(source)
    elif isinstance(source, (str, os.PathLike)):
        name = Path(source).name if name is None else str(name)
        with open(source, "rb") as f:
            _check_size(os.fstat(f.fileno()).st_size, max_bytes, name)
            raw = f.read()
    elif hasattr(source, "read"):
        if name is None:
            name = Path(str(getattr(source, "name", "") or "")).name or "upload"
        raw = _read_stream(source, max_bytes, name)
    else:
        raise ParameterError("source", type(source).__name__, "a path, bytes, or a binary file object")
    for magic, kind, opener in _MAGIC:
        if raw.startswith(magic):
            if opener is None:
                raise DataFormatError(f"{kind} input is not supported; decompress it first "
                                      "(gzip, bz2 and xz are read directly)", source=name)
            return _decompress(raw, opener, kind, max_bytes, name), name, True
    return raw, name, False


def _check_size(size: int, max_bytes: int | None, name: str) -> None:
    if max_bytes is not None and size > max_bytes:
        raise DataFormatError(f"the input is {size:,} bytes, larger than max_bytes={max_bytes} "
                              f"({_size_text(max_bytes)})", source=name)


def _read_stream(stream, max_bytes: int | None, name: str) -> bytes:
    """Read a file object in chunks, refusing text mode and stopping past ``max_bytes``."""
    chunks, total = [], 0
    while True:
        chunk = stream.read(_CHUNK if max_bytes is None else min(_CHUNK, max_bytes + 1 - total))
        if not chunk:
            break
        if not isinstance(chunk, (bytes, bytearray)):
            raise ParameterError("source", type(stream).__name__,
                                 "a path, bytes, or a file object opened in binary mode")
        chunks.append(bytes(chunk))
        total += len(chunk)
        if max_bytes is not None and total > max_bytes:
            raise DataFormatError(f"the input is larger than max_bytes={max_bytes} "
                                  f"({_size_text(max_bytes)})", source=name)
    return b"".join(chunks)


def _decompress(raw: bytes, opener, kind: str, max_bytes: int | None, name: str) -> bytes:
    """Decompress in chunks and stop as soon as the output passes ``max_bytes``.

    The stdlib readers decompress only as much as each ``read(n)`` asks for, so a
    decompression bomb costs about ``max_bytes`` of memory and time, whatever its
    expanded size.
    """
    chunks, total = [], 0
    try:
        with opener(io.BytesIO(raw)) as stream:
            while chunk := stream.read(_CHUNK if max_bytes is None else min(_CHUNK, max_bytes + 1 - total)):
                total += len(chunk)
                if max_bytes is not None and total > max_bytes:
                    raise DataFormatError(
                        f"the {kind} input decompresses to more than max_bytes={max_bytes} "
                        f"({_size_text(max_bytes)}); decompression stopped there", source=name)
                chunks.append(chunk)
    except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
        raise DataFormatError(f"the {kind} input is corrupt or truncated ({exc})", source=name) from None
    return b"".join(chunks)


# --------------------------------------------------------------------------- parsing

class _Bad(Exception):
    """A malformed input: line (1-based), what is wrong, and the offending token."""

    def __init__(self, line: int | None, reason: str, token: bytes | None = None):
        super().__init__(line, reason, token)
        self.line, self.reason, self.token = line, reason, token


class _LineError(Exception):
    """A malformed line, before its line number is known."""

    def __init__(self, reason: str, token: bytes | None = None):
        super().__init__(reason, token)
        self.reason, self.token = reason, token


@dataclass(eq=False)
class _Parsed:
    """Rows as written, with raw (unshifted) indices of the nonzero entries.

    Explicit zeros are left out of ``indices`` and ``values`` but still counted:
    ``n_entries`` (every index:value token), ``min_index`` (the smallest index, -1 if
    none) and ``row_last`` (each row's largest index, -1 for a row without features)
    take part in the zero/one-based decision and the width, as scikit-learn's stored
    zeros do.  ``row_line`` and ``row_off`` locate each row in ``data`` for messages.
    """

    labels: np.ndarray
    qid: np.ndarray | None
    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    row_line: np.ndarray
    row_off: np.ndarray
    row_last: np.ndarray
    n_entries: int
    min_index: int
    data: bytes
    name: str = ""
    warnings: tuple[str, ...] = ()


def _format_error(bad: _Bad, data: bytes, name: str) -> DataFormatError:
    """Turn a :class:`_Bad` into the user's error, calling a bad unterminated last row truncated."""
    token = None if bad.token is None else bad.token.decode("utf-8", "backslashreplace")
    n_newlines = data.count(b"\n")
    unterminated = bool(data) and not data.endswith(b"\n") and n_newlines > 0
    if unterminated and bad.line == n_newlines + 1:
        return DataFormatError("truncated last row: the input stops in the middle of this line, "
                               f"without a final newline; {bad.reason}",
                               line=bad.line, token=token, source=name)
    return DataFormatError(bad.reason, line=bad.line, token=token, source=name)


def _check_power_of_two_cut(data: bytes, name: str) -> None:
    """Refuse an unterminated input whose size is a power of two (see :func:`load_libsvm`)."""
    size = len(data)
    if size < 4096 or size & (size - 1) or data.endswith(b"\n"):
        return
    start = data.rfind(b"\n") + 1
    tokens = data[start:].split(b"#", 1)[0].split()
    if start == 0 or not tokens:
        return
    raise DataFormatError(
        f"truncated input: it is exactly {size} bytes ({_size_text(size)}) and its last row has no "
        "final newline, the signature of a copy cut at a size limit; if the file is complete, end it "
        "with a newline", line=data.count(b"\n") + 1,
        token=tokens[-1].decode("utf-8", "backslashreplace"), source=name)


def _unterminated_warning(data: bytes, parsed: "_Parsed", name: str) -> tuple[str, ...]:
    """A warning when the last line is a data row without a line end (see :func:`load_libsvm`).

    Only the last line is looked at; its row is the parser's last row, and the row
    lengths come from ``indptr``, so the cost is O(rows) array work, and only then.
    """
    if not data or data.endswith(b"\n"):
        return ()
    last = data[data.rfind(b"\n") + 1:]
    if not last.split(b"#", 1)[0].split():
        return ()
    lengths = np.diff(parsed.indptr)
    line, k = int(parsed.row_line[-1]), int(lengths[-1])
    if lengths.size > 1:
        typical = f"the file's median row has {float(np.median(lengths[:-1])):g}"
    else:
        typical = "the file has no other row to compare it with"
    word = "feature" if k == 1 else "features"
    return (f"{name}, line {line:,} has no line end: the file may be cut short (its last row has {k} "
            f"nonzero {word}; {typical}); if the file is complete, end it with a line end, "
            "otherwise use a complete copy",)


def _size_text(size: int) -> str:
    """``size`` bytes for people: ``"200 MiB"``, ``"1.5 KiB"``, ``"5 bytes"``."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size / (1 << shift):.4g} {unit}"
    return f"{size} bytes"


def _parse(data: bytes, *, reject_zero: bool, max_index: int, max_rows: int | None,
           engine: str = "numba") -> _Parsed:
    """Parse ``data`` into raw rows or raise :class:`_Bad` for the first malformed line."""
    if engine == "python":
        parsed = _scan_python(data, reject_zero, max_index, max_rows)
    else:
        parsed = _scan_fast(data, reject_zero, max_index, max_rows)
    if parsed.labels.size == 0:
        raise _Bad(None, "no data rows: the input is empty or holds only blank and comment lines")
    return parsed


# Kernel status codes.  Only LINE_ERROR needs the Python validator to explain it.
_OK, _LINE_ERROR, _TOO_MANY_ROWS, _QID_MISSING, _QID_UNEXPECTED = 0, 1, 2, 3, 4


def _scan_fast(data: bytes, reject_zero, max_index, max_rows) -> _Parsed:
    """Run the kernel on ``data``, finish its slow numbers, and explain its first error."""
    buf = np.frombuffer(data, dtype=np.uint8)
    n_rows_cap = int(np.count_nonzero(buf == 10)) + 1  # every row ends in a newline but the last
    nnz_cap = int(np.count_nonzero(buf == 58))  # every feature token holds a ':'
    labels = np.empty(n_rows_cap, np.float64)
    qids = np.empty(n_rows_cap, np.int64)
    row_line = np.empty(n_rows_cap, np.int64)
    row_off = np.empty(n_rows_cap, np.int64)
    row_last = np.empty(n_rows_cap, np.int64)
    indptr = np.empty(n_rows_cap + 1, np.int64)
    indices = np.empty(nnz_cap, np.int32)  # max_index < 2**31 - 1
    values = np.empty(nnz_cap, np.float64)
    (status, err_line, err_off, n_rows, nnz, n_entries, min_index, qid_mode,
     n_slow, n_text, slow_text, slow_slot) = _scan(
        buf, reject_zero, max_index, -1 if max_rows is None else max_rows,
        labels, qids, row_line, row_off, row_last, indptr, indices, values,
        np.empty(4096, np.uint8), np.empty(256, np.int64))

    if n_slow:  # numbers the kernel could not convert exactly; strtod is correctly rounded
        converted = np.fromstring(slow_text[:n_text].tobytes(), dtype=np.float64, sep=" ")
        slots = slow_slot[:n_slow]
        if converted.size != n_slow:  # pragma: no cover - the kernel validated every token
            raise RuntimeError("libsvm: slow-path conversion lost tokens")
        bad = ~np.isfinite(converted)
        if bad.any():  # overflow such as 1e999: find its row, and let the validator explain
            rows = np.where(slots < 0, -slots - 1,
                            np.searchsorted(indptr[:n_rows + 1], slots, side="right") - 1)
            row = int(rows[bad].min())
            _explain_line(data, int(row_off[row]), int(row_line[row]), reject_zero, max_index)
        is_label = slots < 0
        labels[-slots[is_label] - 1] = converted[is_label]
        values[slots[~is_label]] = converted[~is_label]
        if status == _OK and np.any(converted[~is_label] == 0):  # underflow such as 1e-999
            keep = values[:nnz] != 0
            indptr[:n_rows + 1] = np.concatenate(([0], np.cumsum(keep)))[indptr[:n_rows + 1]]
            nnz = int(np.count_nonzero(keep))
            indices[:nnz] = indices[:keep.size][keep]
            values[:nnz] = values[:keep.size][keep]

    if status == _LINE_ERROR:
        _explain_line(data, err_off, err_line, reject_zero, max_index)
    elif status == _TOO_MANY_ROWS:
        raise _Bad(err_line, f"more than max_rows={max_rows} data rows")
    elif status in (_QID_MISSING, _QID_UNEXPECTED):
        raise _qid_mixed(err_line, status == _QID_MISSING, int(row_line[0]),
                         _line_at(data, err_off).split(b"#", 1)[0].split()[0])
    n_rows, nnz = int(n_rows), int(nnz)
    indices, values = indices[:nnz], values[:nnz]
    if nnz < 0.75 * nnz_cap:  # many dropped zeros (or colons in comments): release the excess
        indices, values = indices.copy(), values.copy()
    return _Parsed(labels[:n_rows], qids[:n_rows] if qid_mode == 1 else None, indptr[:n_rows + 1],
                   indices, values, row_line[:n_rows], row_off[:n_rows], row_last[:n_rows],
                   int(n_entries), int(min_index), data)


def _line_at(data: bytes, offset: int) -> bytes:
    end = data.find(b"\n", offset)
    return data[offset:] if end < 0 else data[offset:end]


def _explain_line(data, offset, line_no, reject_zero, max_index):
    """Raise the exact :class:`_Bad` for a line the kernel refused."""
    try:
        _parse_line(_line_at(data, offset), reject_zero, max_index)
    except _LineError as exc:
        raise _Bad(line_no, exc.reason, exc.token) from None
    # Reached only if the kernel and the validator disagree (a bug the fuzz tests hunt
    # for); the validator, run over the whole input, then has the last word.
    _scan_python(data, reject_zero, max_index, None)
    raise RuntimeError(f"libsvm: the kernel refused line {line_no} but the validator accepts the input")


def _qid_mixed(line_no, missing, first_line, label_token) -> _Bad:
    if missing:
        return _Bad(line_no, f"this row has no qid, but the rows from line {first_line} on have one; "
                             "either every row has a qid or none does", label_token)
    return _Bad(line_no, f"this row has a qid, but the rows from line {first_line} on have none; "
                         "either every row has a qid or none does", label_token)


# ----- the exact, line-by-line validator (the grammar's specification)

_REAL = re.compile(rb"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NONFINITE = re.compile(rb"[+-]?(?:nan|inf|infinity)", re.IGNORECASE)
_QID = re.compile(rb"[+-]?[0-9]{1,18}")
_DIGITS = re.compile(rb"[0-9]+")
_NEGATIVE = re.compile(rb"-[0-9]+")


def _real(text: bytes, what: str, token: bytes) -> float:
    """``text`` as a finite float; ``token`` (the whole index:value) is what a message shows."""
    if _NONFINITE.fullmatch(text):
        raise _LineError(f"{what} is NaN or infinite; values must be finite numbers", token)
    if not _REAL.fullmatch(text):
        raise _LineError(f"{what} is not a number", token)
    value = float(text)
    if not np.isfinite(value):
        raise _LineError(f"{what} overflows a 64-bit float", token)
    return value


def _parse_line(line: bytes, reject_zero: bool, max_index: int):
    """Parse one line; None for a blank or comment line.

    Returns ``(label, qid or None, indices, values)`` or raises :class:`_LineError`.
    """
    tokens = line.split(b"#", 1)[0].split()
    if not tokens:
        return None
    label_token = tokens[0]
    if b":" in label_token:
        raise _LineError("the row does not start with a label (the first token holds ':')", label_token)
    label = _real(label_token, "the label", label_token)
    qid, features = None, tokens[1:]
    if features and features[0].startswith(b"qid:"):
        if not _QID.fullmatch(features[0][4:]):
            raise _LineError("the qid is not an integer", features[0])
        qid, features = int(features[0][4:]), features[1:]
    indices, values, prev = [], [], -1
    for token in features:
        if b":" not in token:
            raise _LineError("the feature token has no ':' (expected index:value)", token)
        index_text, value_text = token.split(b":", 1)
        if index_text == b"qid":
            raise _LineError("qid must come right after the label", token)
        if _NEGATIVE.fullmatch(index_text):
            raise _LineError("the feature index is negative", token)
        if not _DIGITS.fullmatch(index_text):
            raise _LineError("the feature index is not a non-negative integer", token)
        index = int(index_text)
        if index > max_index:
            raise _LineError(f"the feature index is larger than max_index={max_index}", token)
        if index == 0 and reject_zero:
            raise _LineError("index 0 in one-based input: indices start at 1", token)
        if index == prev:
            raise _LineError(f"feature index {index} appears twice in the row", token)
        if index < prev:
            raise _LineError(f"feature indices must increase within a row, but {index} follows {prev}",
                             token)
        values.append(_real(value_text, "the feature value", token))
        indices.append(index)
        prev = index
    return label, qid, indices, values


def _scan_python(data: bytes, reject_zero, max_index, max_rows) -> _Parsed:
    """The whole input through :func:`_parse_line`: slow, simple, and the reference for the kernel."""
    labels, qids, row_line, row_off, row_last, indptr, indices, values = [], [], [], [], [], [0], [], []
    n_entries, min_index = 0, -1
    offset, first_qid_state = 0, None
    for line_no, line in enumerate(data.split(b"\n"), start=1):
        if max_rows is not None and len(labels) == max_rows and line.split(b"#", 1)[0].split():
            raise _Bad(line_no, f"more than max_rows={max_rows} data rows")
        try:
            row = _parse_line(line, reject_zero, max_index)
        except _LineError as exc:
            raise _Bad(line_no, exc.reason, exc.token) from None
        if row is not None:
            label, qid, idx, val = row
            if first_qid_state is None:
                first_qid_state = qid is not None
            elif first_qid_state != (qid is not None):
                raise _qid_mixed(line_no, first_qid_state, row_line[0], line.split(b"#", 1)[0].split()[0])
            labels.append(label)
            qids.append(qid)
            row_line.append(line_no)
            row_off.append(offset)
            row_last.append(idx[-1] if idx else -1)
            if idx:
                n_entries += len(idx)
                min_index = idx[0] if min_index < 0 else min(min_index, idx[0])
            indices += [i for i, v in zip(idx, val) if v != 0]
            values += [v for v in val if v != 0]
            indptr.append(len(indices))
        offset += len(line) + 1
    return _Parsed(np.array(labels, np.float64), np.array(qids, np.int64) if first_qid_state else None,
                   np.array(indptr, np.int64), np.array(indices, np.int64), np.array(values, np.float64),
                   np.array(row_line, np.int64), np.array(row_off, np.int64),
                   np.array(row_last, np.int64), n_entries, min_index, data)


# ----- the numba kernel

# 10**0 .. 10**22 are exact doubles: the limits of Clinger's fast path.
_POW10 = np.array([10.0**k for k in range(23)])


@numba.njit(cache=True, nogil=True)
def _is_space(c):
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@numba.njit(cache=True, nogil=True)
def _skip_space(buf, i, end):
    while i < end and _is_space(buf[i]):
        i += 1
    return i


@numba.njit(cache=True, nogil=True)
def _token_end(buf, i, end):
    while i < end and not _is_space(buf[i]):
        i += 1
    return i


@numba.njit(cache=True, nogil=True)
def _parse_real(buf, s, e):
    """Validate ``buf[s:e]`` as a finite decimal and convert it when that can be exact.

    Returns ``(ok, value, slow)``.  The value is exact (Clinger's fast path) when the
    integer significand is at most 2**53 and the decimal exponent within +-22: both are
    then exact doubles, and one IEEE multiply or divide rounds correctly.  Otherwise
    ``slow`` is set and the caller converts the token with strtod.  Only 18 significant
    digits are accumulated (they always fit in an int64); more make the token slow.
    An overflowing token such as ``1e999`` is slow too, and refused after conversion.
    """
    i = s
    neg = False
    if i < e and (buf[i] == 43 or buf[i] == 45):
        neg = buf[i] == 45
        i += 1
    mant = 0
    n_sig = 0
    n_digits = 0
    exp10 = 0
    inexact = False
    while i < e and 48 <= buf[i] <= 57:
        if n_sig < 18:
            mant = mant * 10 + (buf[i] - 48)
            if mant != 0:
                n_sig += 1
        else:
            inexact = True
        n_digits += 1
        i += 1
    if i < e and buf[i] == 46:
        i += 1
        while i < e and 48 <= buf[i] <= 57:
            if n_sig < 18:
                mant = mant * 10 + (buf[i] - 48)
                exp10 -= 1
                if mant != 0:
                    n_sig += 1
            else:
                inexact = True
            n_digits += 1
            i += 1
    if n_digits == 0:
        return False, 0.0, False
    if i < e and (buf[i] == 101 or buf[i] == 69):
        i += 1
        eneg = False
        if i < e and (buf[i] == 43 or buf[i] == 45):
            eneg = buf[i] == 45
            i += 1
        ex = 0
        n_exp = 0
        while i < e and 48 <= buf[i] <= 57:
            if ex < 100000:
                ex = ex * 10 + (buf[i] - 48)
            n_exp += 1
            i += 1
        if n_exp == 0:
            return False, 0.0, False
        exp10 += -ex if eneg else ex
    if i != e:
        return False, 0.0, False
    if mant == 0 and not inexact:
        return True, -0.0 if neg else 0.0, False
    if inexact or mant > 9007199254740992 or exp10 < -22 or exp10 > 22:
        return True, 0.0, True
    v = float(mant)
    v = v * _POW10[exp10] if exp10 >= 0 else v / _POW10[-exp10]
    return True, -v if neg else v, False


@numba.njit(cache=True, nogil=True)
def _parse_qid(buf, s, e):
    i = s
    neg = False
    if i < e and (buf[i] == 43 or buf[i] == 45):
        neg = buf[i] == 45
        i += 1
    if i == e or e - i > 18:
        return False, 0
    q = 0
    while i < e:
        c = buf[i]
        if c < 48 or c > 57:
            return False, 0
        q = q * 10 + (c - 48)
        i += 1
    return True, -q if neg else q


@numba.njit(cache=True, nogil=True)
def _grown(a, used, need):
    """A copy of ``a[:used]`` with room for at least ``need`` items (doubling)."""
    out = np.empty(max(2 * a.shape[0], need), a.dtype)
    for k in range(used):
        out[k] = a[k]
    return out


@numba.njit(cache=True, nogil=True)
def _scan(buf, reject_zero, max_index, max_rows, labels, qids, row_line, row_off, row_last, indptr,
          indices, values, slow_text, slow_slot):
    """One pass over the bytes, filling the output arrays; stops at the first bad line.

    Returns ``(status, line, line offset, rows, nnz, n_entries, min_index, qid_mode,
    n_slow, n_text, slow_text, slow_slot)``; ``line`` and the offset locate the bad line.
    Explicit zeros are counted in ``n_entries``, ``min_index`` and ``row_last`` but not
    stored.  Numbers the fast path cannot convert exactly are appended, space-separated,
    to ``slow_text`` (grown as needed) with their destination in ``slow_slot``: entry
    ``j`` of ``values``, or ``-(r + 1)`` for the label of row ``r``.
    """
    n = buf.shape[0]
    pos = 0
    line = 0
    row = 0
    nnz = 0
    n_entries = 0
    min_index = -1
    qid_mode = -1  # unknown until the first row; then 1 if rows carry a qid, else 0
    n_slow = 0
    n_text = 0
    status = _OK
    start = 0
    indptr[0] = 0
    while pos < n:
        line += 1
        start = pos
        end = pos
        while end < n and buf[end] != 10 and buf[end] != 35:  # '#' starts a comment
            end += 1
        eol = end
        while eol < n and buf[eol] != 10:
            eol += 1
        pos = eol + 1
        i = _skip_space(buf, start, end)
        if i == end:
            continue
        if row == max_rows:
            status = _TOO_MANY_ROWS
            break
        row_line[row] = line
        row_off[row] = start

        j = _token_end(buf, i, end)
        token_start = i
        ok, v, slow = _parse_real(buf, i, j)
        if not ok:
            status = _LINE_ERROR
            break
        labels[row] = v
        slot = -(row + 1)
        i = _skip_space(buf, j, end)

        has_qid = False
        if i + 4 <= end and buf[i] == 113 and buf[i + 1] == 105 and buf[i + 2] == 100 and buf[i + 3] == 58:
            k = _token_end(buf, i, end)
            ok, q = _parse_qid(buf, i + 4, k)
            if not ok:
                status = _LINE_ERROR
                break
            qids[row] = q
            has_qid = True
            i = _skip_space(buf, k, end)
        qid_status = _OK  # reported after the row's tokens, which the validator checks first
        if qid_mode == -1:
            qid_mode = 1 if has_qid else 0
        elif qid_mode == 1 and not has_qid:
            qid_status = _QID_MISSING
        elif qid_mode == 0 and has_qid:
            qid_status = _QID_UNEXPECTED

        prev = -1
        while True:
            if slow:  # queue the number just read (label or value) for strtod
                width = j - token_start
                if n_text + width + 1 > slow_text.shape[0]:
                    slow_text = _grown(slow_text, n_text, n_text + width + 1)
                if n_slow == slow_slot.shape[0]:
                    slow_slot = _grown(slow_slot, n_slow, n_slow + 1)
                for k in range(width):  # element loops: numba compiles slice copies slowly
                    slow_text[n_text + k] = buf[token_start + k]
                slow_text[n_text + width] = 32
                n_text += width + 1
                slow_slot[n_slow] = slot
                n_slow += 1
            if i >= end:
                break
            j = _token_end(buf, i, end)
            colon = i
            while colon < j and buf[colon] != 58:
                colon += 1
            if colon == i or colon == j:
                status = _LINE_ERROR
                break
            idx = 0
            for k in range(i, colon):
                c = buf[k]
                if c < 48 or c > 57:
                    status = _LINE_ERROR
                    break
                if idx <= max_index:  # stop growing once over the limit: no overflow
                    idx = idx * 10 + (c - 48)
            if status != _OK or idx > max_index or idx <= prev or (reject_zero and idx == 0):
                status = _LINE_ERROR
                break
            token_start = colon + 1
            ok, v, slow = _parse_real(buf, token_start, j)
            if not ok:
                status = _LINE_ERROR
                break
            n_entries += 1
            if min_index < 0 or idx < min_index:
                min_index = idx
            if v != 0.0 or slow:  # a slow number's value is unknown yet; zeros are dropped later
                indices[nnz] = idx
                values[nnz] = v
                slot = nnz
                nnz += 1
            prev = idx
            i = _skip_space(buf, j, end)
        if status == _OK:
            status = qid_status
        if status != _OK:
            break
        row_last[row] = prev
        row += 1
        indptr[row] = nnz
    return (status, line, start, row, nnz, n_entries, min_index, qid_mode,
            n_slow, n_text, slow_text, slow_slot)


# --------------------------------------------------------------------------- assembling

def _assemble(parsed: list[_Parsed], zero_based, n_features: int | None) -> list[LibsvmData]:
    """Decide the index base and the width over all files together, then build the matrices."""
    zero_based = _decide_zero_based(parsed, zero_based)
    shift = 0 if zero_based else 1
    needed = max(_needed_width(p, shift) for p in parsed)
    if n_features is None:
        limit = max(WIDTH_FLOOR, WIDTH_PER_ENTRY * sum(p.n_entries + p.labels.size for p in parsed))
        if needed > limit:
            p = next(p for p in parsed if p.n_entries and _needed_width(p, shift) > limit)
            entries, rows = sum(q.n_entries for q in parsed), sum(q.labels.size for q in parsed)
            _raise_out_of_range(
                p, limit, shift,
                why=f"would make the data {needed:,} features wide for {entries:,} nonzero entries in {rows:,} "
                    f"rows: at most {limit:,} ({WIDTH_PER_ENTRY} per entry and row, never fewer than "
                    f"{WIDTH_FLOOR:,}), since every vector of the model is that long; give n_features "
                    "to accept a wider file")
        n_features = needed
    elif n_features < needed:
        p = next(p for p in parsed if p.n_entries and p.row_last.max() - shift >= n_features)
        _raise_out_of_range(p, n_features, shift)
    out = []
    for p in parsed:
        indices = p.indices
        if shift:
            indices -= shift  # in place: the parsed arrays are ours and used once
        X = sp.csr_matrix((p.values, indices, p.indptr.astype(indices.dtype)),
                          shape=(p.labels.size, n_features), copy=False)
        X.has_canonical_format = True  # the parser refused unsorted and duplicate indices
        out.append(LibsvmData(X, p.labels.copy(), None if p.qid is None else p.qid.copy(),
                              bool(zero_based), int(n_features), p.name, p.n_entries - p.values.size,
                              p.warnings, p.row_line.copy()))
    return out


def _decide_zero_based(parsed: list[_Parsed], zero_based) -> bool:
    if zero_based == "auto":  # scikit-learn's rule, explicit zeros included
        return not all(p.n_entries and p.min_index > 0 for p in parsed)
    return bool(zero_based)


def _needed_width(p: _Parsed, shift: int) -> int:
    """The width a file needs: its largest index, shifted, plus one (1 for a file without features)."""
    return (int(p.row_last.max()) - shift if p.n_entries else 0) + 1


def _raise_out_of_range(p: _Parsed, n_features: int, shift: int, why: str | None = None):
    """Name the first row, and its token, whose index does not fit ``n_features``."""
    row = int(np.flatnonzero(p.row_last - shift >= n_features)[0])
    tokens = _line_at(p.data, int(p.row_off[row])).split(b"#", 1)[0].split()
    token = next(t for t in tokens[1:] if not t.startswith(b"qid:")
                 and int(t.split(b":", 1)[0]) - shift >= n_features)
    if why is None:
        why = (f"does not fit n_features={n_features} "
               f"({'zero' if shift == 0 else 'one'}-based indices {shift}..{n_features - 1 + shift})")
    raise DataFormatError(
        f"feature index {int(token.split(b':', 1)[0])} {why}",
        line=int(p.row_line[row]), token=token.decode("ascii"), source=p.name)
