"""Hostile uploads (issue 6, point 1): one table of cases drives the Data page and the command line.

Each case must end in one message that names the line and the token (where the file has
them): on the Data page as an ``st.error`` (no exception, the session's data set unchanged,
and the page still loads a good file afterwards), on the command line as exit code 2 and
one line on stderr.  Both show the data layer's message verbatim, so they are also checked
to agree.  Limits are tested at small values through the same wiring the shipped values
use, plus a check that the page passes the shipped values and a gzip bomb at the shipped
limit; Streamlit's own upload limit is checked in a real browser at the end.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from fedviz import cli, ui
from fedviz.data.build import DataSpec, build
from fedviz.errors import DataFormatError
from fedviz.runner.config import RunConfig

from conftest import DATA, ROOT, plain

APP = str(ROOT / "app.py")
HEART = (DATA / "heart_scale").read_bytes()
MiB = 1 << 20


#: A well-formed file just over 1 MiB: refused for its size alone.
OVER_ONE_MIB = HEART * math.ceil((MiB + 1) / len(HEART))


def _gzip_bomb(mib: int) -> bytes:
    """A valid multi-member gzip stream of ``mib`` MiB of zeros, about 1 KiB per MiB."""
    return gzip.compress(bytes(MiB)) * mib


@dataclass(frozen=True)
class Case:
    """One hostile upload and what its message must say.

    ``token`` is the offending token as the loader reports it (the message quotes its
    repr); ``options`` are the user's choices that make the case: ``index_base``
    ("1": one-based), ``max_rows`` and ``max_mib`` (the page's limits, the CLI's
    ``--max-rows`` and ``--max-bytes``).
    """

    id: str
    content: bytes
    line: int | None
    needle: str
    token: str | None = None
    options: dict = field(default_factory=dict)


ELF = b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4  # an executable's header, then every byte

CASES = [
    Case("empty file", b"", None, "no data rows: the input is empty"),
    Case("binary garbage", ELF, 1, "the label is not a number",
         "\x7fELF\x02\x01\x01\x00" + "".join(map(chr, range(9)))),  # bytes 0..8, up to the tab
    Case("CSV file", b"label,f1,f2\n1,0.5,2\n0,1.5,3\n", 1, "the label is not a number", "label,f1,f2"),
    Case("non-numeric label", b"+1 1:0.5 3:1\nyes 1:1\n", 2, "the label is not a number", "yes"),
    Case("index 0 in a one-based file", b"+1 1:0.5 2:1\n-1 0:1 2:3\n", 2, "index 0 in one-based input",
         "0:1", {"index_base": "1"}),
    Case("negative index", b"+1 1:0.5\n-1 -3:1\n", 2, "the feature index is negative", "-3:1"),
    Case("non-integer index", b"+1 1.5:2\n", 1, "the feature index is not a non-negative integer", "1.5:2"),
    Case("unsorted indices", b"+1 1:1\n-1 3:1 2:1\n", 2, "must increase within a row, but 2 follows 3", "2:1"),
    Case("duplicate indices", b"+1 2:1 2:3\n", 1, "feature index 2 appears twice in the row", "2:3"),
    Case("NaN value", b"+1 1:0.5\n-1 1:nan\n", 2, "NaN or infinite", "1:nan"),
    Case("inf value", b"+1 1:0.5\n-1 2:-inf\n", 2, "NaN or infinite", "2:-inf"),
    Case("feature index over 10^7", b"+1 1:1\n-1 10000001:1\n", 2, "larger than max_index=10000000",
         "10000001:1"),
    Case("9 bytes of data 10^7 features wide", b"+1 1:1\n-1 10000000:1\n", 2,
         "would make the data 10,000,000 features wide for 2 nonzero entries in 2 rows: at most 100,000",
         "10000000:1"),
    Case("more rows than the limit", b"+1 1:1\n-1 2:1\n# a comment\n+1 3:1\n", 4,
         "more than max_rows=2 data rows", None, {"max_rows": 2}),
    Case("gzip bomb", _gzip_bomb(3), None,
         "the gzip input decompresses to more than max_bytes=2097152 (2 MiB); decompression stopped there",
         None, {"max_mib": 2}),
    Case("truncated last row", b"+1 1:0.5 2:1\n-1 1:0.25 2:", 2, "truncated last row", "2:"),
    Case("single class", b"1 1:1\n1 2:1\n1 3:1\n", None,
         "classification needs two classes, but every label is 1 (all 3 rows)"),
    Case("file over the upload limit", OVER_ONE_MIB, None,
         f"the input is {len(OVER_ONE_MIB):,} bytes, larger than max_bytes=1048576 (1 MiB)",
         None, {"max_mib": 1}),
]
IDS = [c.id for c in CASES]
NAME = "bad.txt"


def assert_names_line_and_token(message: str, case: Case) -> None:
    """The message names the file, the line and the token (when the case has them), and what is wrong."""
    assert message.startswith(NAME + (f", line {case.line}: " if case.line else ": ")), message
    assert case.needle in message, message
    if case.token is not None:
        assert message.endswith(f" (token {case.token!r})"), message
    else:
        assert "(token" not in message, message
    assert "Traceback" not in message and "\n" not in message


# ------------------------------------------------------------------------------------------- the CLI

def _cli_args(case: Case) -> list[str]:
    o = case.options
    return ([f"--index-base={o['index_base']}"] if "index_base" in o else []) + \
        ([f"--max-rows={o['max_rows']}"] if "max_rows" in o else []) + \
        ([f"--max-bytes={o['max_mib'] * MiB}"] if "max_mib" in o else [])


def cli_main(argv: list[str]) -> tuple[int, str, str]:
    """``fedviz ARGV`` in-process (a subprocess per case would spend its time importing): code, stdout, stderr.

    Redirected rather than captured with capsys: Streamlit's loggers keep the stream they
    first see, and capsys closes its stream after the test.
    """
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


def run_cli(case: Case, tmp_path: Path) -> tuple[int, str, str]:
    path = tmp_path / NAME
    path.write_bytes(case.content)
    return cli_main(["inspect", str(path), *_cli_args(case)])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_cli_refuses_with_one_line_naming_line_and_token(case, tmp_path):
    code, out, err = run_cli(case, tmp_path)
    assert code == 2 and out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("fedviz: error: ")
    assert_names_line_and_token(err[len("fedviz: error: "):-1], case)


def test_cli_exit_code_and_stderr_in_a_real_process(tmp_path):
    """The in-process calls above return what the process exits with: checked once for real."""
    case = CASES[IDS.index("truncated last row")]
    path = tmp_path / NAME
    path.write_bytes(case.content)
    r = subprocess.run([sys.executable, "-m", "fedviz", "inspect", str(path)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert_names_line_and_token(r.stderr.strip()[len("fedviz: error: "):], case)


def test_cli_index_base_choices(tmp_path):
    """--index-base 0 reads heart_scale's 1..13 as columns 1..13 of 14; auto and 1 as 0..12 of 13."""
    path = tmp_path / "heart_scale"
    path.write_bytes(HEART)
    widths = {}
    for base in ("auto", "0", "1"):
        code, out, _ = cli_main(["inspect", str(path), "--index-base", base, "--json"])
        assert code == 0
        widths[base] = json.loads(out)["d"]
    assert widths == {"auto": 13, "0": 14, "1": 13}
    code, _, err = cli_main(["inspect", str(path), "--index-base", "2"])
    assert code == 2 and "invalid choice: '2'" in err


# ------------------------------------------------------------------------------------------- the Data page

def data_page() -> AppTest:
    """The Data page, switched to uploads, on a session whose data set is the default preset."""
    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state["config"] = RunConfig(data=DataSpec(source="preset:identical-nodes"),
                                           algorithms=(("gd", ()),), iterations=2)
    at.run()
    at.switch_page("pages/data.py")
    at.run()
    at.radio[0].set_value("Upload a LIBSVM file").run()
    assert not at.exception, at.exception
    return at


def upload(at: AppTest, content: bytes, name: str = NAME) -> AppTest:
    return at.file_uploader(key="upload-train").set_value((name, content, "application/octet-stream")).run()


def assert_loads_heart_scale(at: AppTest) -> None:
    """A good file after a bad one: the page shows its statistics and makes it the session's data."""
    upload(at, HEART, "heart_scale")
    assert not at.exception and not at.error, [plain(e.value) for e in at.error]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["features d"] == "13"
    assert int(metrics["examples n"]) + int(metrics["test examples"]) == 270
    assert at.session_state["config"].data.name == "heart_scale"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_data_page_refuses_with_a_message_and_keeps_working(case, monkeypatch, tmp_path):
    at = data_page()
    before = at.session_state["config"]
    if case.options.get("index_base") == "1":
        at.radio(key="index-base").set_value("1-based").run()
    with monkeypatch.context() as m:  # the page reads its limits from fedviz.ui on every run
        if "max_rows" in case.options:
            m.setattr(ui, "MAX_UPLOAD_ROWS", case.options["max_rows"])
        if "max_mib" in case.options:
            m.setattr(ui, "MAX_UPLOAD_MB", case.options["max_mib"])
        upload(at, case.content)
        assert not at.exception, at.exception
        errors = [plain(e.value) for e in at.error]
        assert len(errors) == 1, errors
        assert_names_line_and_token(errors[0], case)
        assert not at.metric  # no statistics of a file that was refused
        assert at.session_state["config"] == before  # the session keeps its data set
        assert any("current data set is unchanged" in c.value for c in at.caption)
    # The command line says exactly the same.
    _, _, err = run_cli(case, tmp_path)
    assert errors[0] == err.strip()[len("fedviz: error: "):]
    assert_loads_heart_scale(at)


def test_data_page_passes_the_shipped_limits():
    at = data_page()
    upload(at, HEART, "heart_scale")
    data = at.session_state["config"].data
    assert data.max_rows == ui.MAX_UPLOAD_ROWS
    assert data.max_bytes == ui.MAX_UPLOAD_MB * MiB  # MiB, as Streamlit counts server.maxUploadSize
    assert data.source == HEART and data.name == "heart_scale"


def test_data_page_index_base_choice():
    """0-based shifts heart_scale's 1..13 to columns 1..13 of 14; 1-based and auto keep 13 columns."""
    at = data_page()
    upload(at, HEART, "heart_scale")
    widths = {}
    for choice in ("0-based", "1-based", "auto"):
        at.radio(key="index-base").set_value(choice).run()
        assert not at.exception and not at.error
        widths[choice] = {m.label: m.value for m in at.metric}["features d"]
        assert at.session_state["config"].data.zero_based == {"0-based": True, "1-based": False,
                                                             "auto": "auto"}[choice]
    assert widths == {"0-based": "14", "1-based": "13", "auto": "13"}


def test_data_page_bad_positive_class_is_a_message():
    at = data_page()
    next(t for t in at.text_input if t.label.startswith("Positive class")).set_value("two").run()
    upload(at, HEART, "heart_scale")
    assert not at.exception
    assert [plain(e.value) for e in at.error] == [
        "parameter positive class='two' is out of range: allowed one of the file's labels (a number)"]


def test_gzip_bomb_at_the_shipped_limit_is_a_message_not_a_hang():
    """A 1 KiB-per-MiB bomb one MiB over the page's real limit: decompression stops at the limit."""
    at = data_page()
    bomb = _gzip_bomb(ui.MAX_UPLOAD_MB + 1)
    assert len(bomb) < ui.MAX_UPLOAD_MB * MiB / 500  # a small upload that expands 1000-fold
    t0 = time.perf_counter()
    upload(at, bomb)
    seconds = time.perf_counter() - t0
    assert not at.exception
    assert [plain(e.value) for e in at.error] == [
        (f"{NAME}: the gzip input decompresses to more than max_bytes={ui.MAX_UPLOAD_MB * MiB} "
         f"({ui.MAX_UPLOAD_MB} MiB); decompression stopped there")]
    assert seconds < 60, f"refusing the bomb took {seconds:.1f} s"
    assert_loads_heart_scale(at)


# ------------------------------------------------------------------------------------------- the data layer

def test_data_layer_refuses_over_max_bytes_itself():
    """Defence in depth: DataSpec.max_bytes refuses a file over the limit even if the server let it in."""
    content = OVER_ONE_MIB
    with pytest.raises(DataFormatError) as info:
        build(DataSpec(source=content, name="big.txt", max_bytes=MiB))
    assert str(info.value) == f"big.txt: the input is {len(content):,} bytes, larger than max_bytes={MiB} (1 MiB)"
    assert build(DataSpec(source=content, max_bytes=len(content))).n > 0  # at the limit it loads


def test_data_layer_max_rows_and_index_base():
    rows = b"+1 1:1\n-1 2:1\n+1 0:1\n"
    with pytest.raises(DataFormatError, match=r"^upload, line 3: more than max_rows=2 data rows$"):
        build(DataSpec(source=rows, max_rows=2))
    with pytest.raises(DataFormatError, match=r"^upload, line 3: index 0 in one-based input.*'0:1'"):
        build(DataSpec(source=rows, zero_based=False))
    assert build(DataSpec(source=rows, zero_based="auto", test_fraction=0)).d == 3


def test_default_max_bytes_applies_to_every_file_spec():
    """A spec that names no limit still gets the loader's 1 GiB, never 'unlimited'."""
    assert DataSpec(source=b"1 1:1\n").max_bytes == 1 << 30


# ------------------------------------------------------------------------------------------- a real browser

@pytest.fixture(scope="module")
def one_mib_server(tmp_path_factory):
    """``streamlit run app.py`` with a 1 MB upload limit (set the way an operator would, by
    environment), so that a 2 MB file is over it."""
    from live_server import StreamlitServer

    where = tmp_path_factory.mktemp("one-mib-server")
    with StreamlitServer(where / "runs.sqlite", where / "server.log",
                         env={"STREAMLIT_SERVER_MAX_UPLOAD_SIZE": "1"}) as server:
        yield server


def test_browser_refuses_a_file_over_the_server_upload_limit(one_mib_server, browser, tmp_path):
    from live_server import idle

    big = tmp_path / "big.txt"
    big.write_bytes(HEART * math.ceil(2 * MiB / len(HEART)))
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(60_000)
        page.goto(one_mib_server.url + "/data")
        page.get_by_text("Upload a LIBSVM file").click()
        idle(page)
        with page.expect_file_chooser() as chooser:
            page.get_by_role("button", name=re.compile("Browse files|Upload")).first.click()
        chooser.value.set_files(str(big))
        page.get_by_text("File must be 1.0MB or smaller.").wait_for()
        idle(page)
        # Nothing reached the script: no statistics, and the page still asks for a file.
        assert page.locator('[data-testid="stMetricValue"]').count() == 0
        assert page.get_by_text("Upload a file to see its statistics").count() == 1
    finally:
        context.close()


# ------------------------------------------------------------------- a test file from another data set

DNA_TEST = (DATA / "dna.scale.t").read_bytes()


def _first_line_wider_than(content: bytes, width: int) -> int:
    """Plain Python: the first line of a one-based file with an index above ``width``."""
    for k, line in enumerate(content.decode().splitlines(), 1):
        if any(int(t.split(":")[0]) > width for t in line.split("#")[0].split()[1:]):
            return k
    raise AssertionError("no such line")


def test_mismatched_test_file_is_refused_on_the_page_and_in_the_cli(tmp_path):
    """heart_scale (13 features, labels ±1) with dna.scale.t (180 features, labels 1/2/3): issue 21
    found it accepted, d grown to 180 and every test row one class.  Refused, naming the line; with
    'Test file may be wider' ticked, the labels are refused next, naming theirs."""
    line = _first_line_wider_than(DNA_TEST, 13)
    at = data_page()
    before = at.session_state["config"]
    at.file_uploader(key="upload-test").set_value(("dna.scale.t", DNA_TEST, "application/octet-stream"))
    upload(at, HEART, "heart_scale")
    assert not at.exception
    errors = [plain(e.value) for e in at.error]
    assert len(errors) == 1 and errors[0].startswith(f"dna.scale.t, line {line}: feature index ")
    assert "training file heart_scale's last feature" in errors[0]
    assert at.session_state["config"] == before and not at.metric
    at.checkbox(key="upload-wider-test").check().run()
    errors = [plain(e.value) for e in at.error]
    first_label_line = next(k for k, row in enumerate(DNA_TEST.decode().splitlines(), 1)
                            if row.split() and float(row.split()[0]) not in (-1.0, 1.0))
    assert len(errors) == 1 and errors[0].startswith(f"dna.scale.t, line {first_label_line}: label ")
    assert at.session_state["config"] == before
    # The same refusal on the command line: one line, exit 2.
    (tmp_path / "heart_scale").write_bytes(HEART)
    (tmp_path / "dna.scale.t").write_bytes(DNA_TEST)
    code, out, err = cli_main(["inspect", str(tmp_path / "heart_scale"), "--test", str(tmp_path / "dna.scale.t")])
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"fedviz: error: dna.scale.t, line {line}: feature index ")
    code, _, err = cli_main(["inspect", str(tmp_path / "heart_scale"), "--test", str(tmp_path / "dna.scale.t"),
                             "--wider-test"])
    assert code == 2 and err == f"fedviz: error: {errors[0]}\n"


def test_an_uploads_name_in_an_error_is_text_not_markdown():
    """Issue 21: a visitor's text inside a message rendered as Markdown.  A file named like a Markdown link
    is named in the parse error as its characters: every Markdown character escaped (fedviz.markup.escape,
    whose rendering tests/browser/test_markup_browser.py checks in Chromium), the text a reader sees equal
    to the command line's message."""
    from fedviz.markup import escape

    name = "[sign in](https://evil.example)![p](http://evil.example/p.png).txt"
    at = data_page()
    upload(at, b"+1 1:1\nyes 1:1\n", name)
    assert not at.exception
    (shown,) = [e.value for e in at.error]
    with pytest.raises(DataFormatError) as info:
        build(DataSpec(b"+1 1:1\nyes 1:1\n", name=name))
    assert shown == escape(str(info.value)) and plain(shown) == str(info.value)
    assert "](" not in shown.replace("\\](", "") and "https:" not in shown
