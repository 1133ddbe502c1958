"""The figures the docs show as a command's output are that command's output today.

A transcript is a fenced ``console`` block of README.md or docs/*.md whose first line is
``$ python -m fedviz …``; its other lines are lines that command prints to the terminal (standard output and
error, as a console shows them), in order.  Lines between them may be left out, and so may a part of a line
that depends on the machine (its seconds): ``…`` stands for it.  The test runs the command again, in an empty directory with a
history of its own, and finds every shown line in its output, in order: the words exactly (a verdict that
turned from "held" to "did not hold" fails), each number within one unit of its last shown digit.  Why that
bound: the runs are seeded, so on the machine that wrote the transcript the output is the same characters;
on another CPU the BLAS may change a figure in its twelfth digit, which can move a rounded last digit by
one, while a changed default or a stale figure moves it by far more (issue 31: a README quoted 0.28 and 0.019
where the command printed 0.307 and 0.00664).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest
from markdown_docs import documents, example_env, name, split, unit

#: Seconds a transcript's command may take (dirichlet-sweep: 36 s on a quiet 2-core machine).
TIMEOUT = 600
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])")


def transcripts():
    out = []
    for doc in documents():
        _, blocks = split(doc.read_text(encoding="utf-8"))
        for block in blocks:
            if block.lang == "console" and block.lines and block.lines[0].startswith("$ python -m fedviz "):
                out.append((doc, block))
    return out




def matches(shown: str, printed: str) -> bool:
    """``printed`` says what ``shown`` says: the same words, each figure within one unit of its last shown
    digit, and each count (an integer not written as a ratio ×…) the same; a ``…`` in ``shown`` stands for any
    text (the parts between must then be found in ``printed`` in order)."""
    if "…" in shown:
        parts = shown.split("…")
        # Match part by part: each part's words as they are, its numbers compared below.
        regex = "^" + "(.*)".join(_part_regex(part) for part in parts) + "$"
        hit = re.match(regex, printed.rstrip())
        if hit is None:
            return False
        pieces = [g for i, g in enumerate(hit.groups()) if i % 2 == 0]
        return all(_same(part, piece) for part, piece in zip(parts, pieces))
    return _same(shown, printed)


def _part_regex(part: str) -> str:
    """A part of a shown line as a pattern: its numbers any number, the rest as written (one group)."""
    out, last = [], 0
    for m in _NUMBER.finditer(part):
        out.append(re.escape(part[last:m.start()]))
        out.append(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
        last = m.end()
    out.append(re.escape(part[last:]))
    return "(" + "".join(out) + ")"


def _same(shown: str, printed: str) -> bool:
    if _NUMBER.sub("#", shown).rstrip() != _NUMBER.sub("#", printed).rstrip():
        return False
    pairs = list(zip(_NUMBER.finditer(shown), _NUMBER.finditer(printed)))
    for a, b in pairs:
        count = re.fullmatch(r"[-+]?\d+", a.group()) and not shown[:a.start()].endswith("×")
        if count and a.group() != b.group():
            return False
        if abs(float(a.group()) - float(b.group())) > unit(a.group()) * (1 + 1e-9):
            return False
    return True


def test_the_matcher_allows_a_last_digit_and_nothing_else():
    line = "  FedAvg    f-f* 1.785e-01 [1.70e-01, 1.87e-01] over 2 seeds"
    assert matches(line, line)
    assert matches(line, line.replace("1.785e-01", "1.786e-01"))
    assert not matches(line, line.replace("1.785e-01", "1.787e-01"))
    assert not matches(line, line.replace("1.785e-01", "1.785e-02"))
    assert not matches(line, line.replace("2 seeds", "3 seeds"))
    assert not matches("x: held (×3.05)", "x: did not hold (×3.05)")
    assert matches("ratio ×66, 0.17–0.187", "ratio ×67, 0.17–0.187") and not matches("×66", "×68")
    assert [unit(t) for t in ("1.785e-01", "66", "0.187", "2.0E+3")] == pytest.approx([1e-4, 1, 1e-3, 100])
    # "…" stands for a machine's part of the line (its seconds); the rest is compared as above.
    timed = "  FSVRG: 30 iterations, f-f* 2.419e-04, test error 26.33%, 0.2s, done"
    assert matches("  FSVRG: 30 iterations, f-f* 2.419e-04, test error 26.33%, …, done", timed)
    assert matches("  FSVRG: 30 iterations, f-f* 2.419e-04, test error 26.33%, …, done", timed.replace("0.2s", "31.7s"))
    assert not matches("  FSVRG: 30 iterations, f-f* 2.419e-04, test error 26.33%, …, done",
                       timed.replace("2.419e-04", "2.5e-04"))
    assert not matches("  FSVRG: 30 iterations, f-f* 2.419e-04, test error 26.33%, …, done",
                       timed.replace("done", "diverged"))
    assert not matches("  FSVRG: 29 iterations, f-f* 2.419e-04, …", timed)


def test_there_is_a_transcript():
    assert transcripts(), "docs/reproductions.md shows dirichlet-sweep's output as a transcript"


@pytest.mark.slow
@pytest.mark.parametrize("doc, block", transcripts(), ids=lambda x: name(x) if hasattr(x, "relative_to") else
                         str(getattr(x, "line", x)))
def test_a_transcript_is_what_its_command_prints_today(doc, block, tmp_path):
    argv = shlex.split(block.lines[0][2:])
    assert argv[:3] == ["python", "-m", "fedviz"], block.lines[0]
    env = example_env(tmp_path)
    done = subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT, env=env)  # as a console shows them
    assert done.returncode == 0, f"{name(doc)}:{block.line}: {block.lines[0]} exited {done.returncode}\n" \
                                 f"{done.stdout[-2000:]}"
    printed = done.stdout.splitlines()
    at = 0
    for offset, shown in enumerate(block.lines[1:], start=1):
        found = next((i for i in range(at, len(printed)) if matches(shown, printed[i])), None)
        assert found is not None, (f"{name(doc)}, line {block.line + offset}: the command no longer prints\n"
                                   f"  {shown.strip()}\nit prints:\n" + "\n".join(printed[at:]))
        at = found + 1
