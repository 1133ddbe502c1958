"""The README and docs/*.md as the tests read them: fenced blocks, headings and their GitHub anchors,
links, and the shell examples the reader is told to run.

Why a reader of our own: the checks (every link resolves, every anchor names a heading, every example
runs) must see a document as github.com renders it, and the documents use a small part of Markdown —
ATX headings, inline links and images, fenced code blocks — so a few rules here are enough and need no
Markdown package beside the requirements.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def example_env(tmp_path: Path) -> dict[str, str]:
    """The environment a document's command runs in: a history of its own, and this checkout's fedviz first on
    the path, whatever an editable install points at (the commands run from an empty folder; Dask's workers
    inherit the path)."""
    return {**os.environ, "FEDVIZ_DB": str(tmp_path / "runs.sqlite"),
            "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}


def unit(shown: str) -> float:
    """One unit in the last digit of a figure as a doc writes it: 1e-4 for ``1.785e-01`` and for ``0.0652``, 1 for
    ``66`` and for ``3,326``.  The tests that hold a doc's figures to a computation allow this much: the runs are
    seeded, so only another CPU's BLAS moves a figure, far below its shown digits, which can move a rounded last
    digit by one; a changed default or a stale figure moves it by more."""
    mantissa, _, exponent = shown.lower().replace(",", "").partition("e")
    return 10.0 ** (int(exponent or 0) - len(mantissa.partition(".")[2]))


def documents() -> list[Path]:
    """The README and every Markdown page of docs/ (not its subfolders, which hold pictures)."""
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def name(path: Path) -> str:
    """A document's path from the repository's root, as a test id and in messages."""
    return path.relative_to(ROOT).as_posix()


# -- blocks -----------------------------------------------------------------------------------------------------
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+-]*)")


@dataclass
class Block:
    """A fenced code block: its info string's language, its first content line (1-based) and its lines."""

    lang: str
    line: int
    lines: list[str] = field(default_factory=list)


def split(text: str) -> tuple[list[tuple[int, str]], list[Block]]:
    """The numbered lines outside fenced blocks (prose, headings, tables), and the fenced blocks."""
    prose: list[tuple[int, str]] = []
    blocks: list[Block] = []
    fence = None
    for number, line in enumerate(text.splitlines(), start=1):
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            blocks.append(Block(m.group(2).lower(), number + 1))
        elif fence is not None:
            if line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
                fence = None
            else:
                blocks[-1].lines.append(line)
        else:
            prose.append((number, line))
    return prose, blocks


# -- headings and anchors -------------------------------------------------------------------------------------------
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")


def rendered(markdown: str) -> str:
    """The text github.com shows for a line of inline Markdown: links and images by their text, code
    spans by their content, emphasis markers and HTML tags dropped."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"`+([^`]*)`+", r"\1", text)
    text = re.sub(r"(?<![\w*])[*]{1,3}(?=\S)|(?<=\S)[*]{1,3}(?![\w*])", "", text)
    return re.sub(r"(?<!\w)_{1,3}(?=\S)(.*?)(?<=\S)_{1,3}(?!\w)", r"\1", text)


def slug(heading_text: str) -> str:
    """GitHub's anchor for a heading's rendered text: lower case, every character that is not a letter, a
    digit, ``_``, ``-`` or a space removed, each space a hyphen (runs are not collapsed)."""
    return re.sub(r"[^\w\- ]", "", heading_text.lower()).replace(" ", "-")


def anchors(text: str) -> list[str]:
    """The anchors of a document's headings in order, a repeated one suffixed ``-1``, ``-2``, … as
    github.com does (a suffixed anchor that is itself taken is suffixed again)."""
    taken: dict[str, int] = {}
    out = []
    prose, _ = split(text)
    for _, line in prose:
        m = _HEADING.match(line)
        if not m:
            continue
        base = slug(rendered(m.group(2)).strip())
        anchor = base
        while anchor in taken:
            taken[base] += 1
            anchor = f"{base}-{taken[base]}"
        taken[anchor] = 0
        taken.setdefault(base, 0)
        out.append(anchor)
    return out


# -- links ---------------------------------------------------------------------------------------------------------
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def links(text: str) -> list[tuple[int, str]]:
    """The targets of a document's inline links and images, with their line, outside code blocks and code
    spans (where brackets are text, not links)."""
    prose, _ = split(text)
    out = []
    for number, line in prose:
        for m in _LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            out.append((number, m.group(1)))
    return out


def is_external(target: str) -> bool:
    return bool(_SCHEME.match(target)) or target.startswith("//")


# -- shell examples ------------------------------------------------------------------------------------------------
#: The marker that keeps an example out of the tests, followed by why: `... # not run by the tests: 25 min`.
NOT_RUN = "not run by the tests:"
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
#: Shell syntax an example the tests run may not use: each runs as one process, with no shell.
_SHELL = {"|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "2>&1"}


def comment(line: str) -> tuple[str, str]:
    """One shell line split into its command and its comment (after an unquoted ``#`` that starts a word;
    ``""`` when there is none).  Quotes are followed as the shell does, so an apostrophe in the comment
    itself is harmless."""
    quote = None
    escaped = False
    for i, ch in enumerate(line):
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1:].strip()
    return line.rstrip(), ""


@dataclass(frozen=True)
class Example:
    """One `python -m fedviz…` command of a ```bash block: where it is, the command as written (continuations
    joined, its comment dropped), the environment it sets before the command, its argv after ``python``, and why it is not
    run when it carries the marker."""

    doc: Path
    line: int
    text: str
    env: tuple[tuple[str, str], ...]
    argv: tuple[str, ...]
    not_run: str | None

    def __str__(self) -> str:
        return f"{name(self.doc)}:{self.line}: {self.text}"


def examples(doc: Path, text: str | None = None) -> list[Example]:
    """Every `python -m fedviz …` or `python -m fedviz.<module> …` line of the document's ```bash blocks,
    in order, with ``VAR=value`` prefixes read as its environment and comments dropped."""
    text = doc.read_text(encoding="utf-8") if text is None else text
    out = []
    for block in split(text)[1]:
        if block.lang not in ("bash", "sh", "shell", "console"):
            continue
        logical: list[tuple[int, str]] = []
        pending = None
        for offset, raw in enumerate(block.lines):
            if pending is None:
                pending = (block.line + offset, "")
            joined = pending[1] + raw
            if raw.endswith("\\"):
                pending = (pending[0], joined[:-1] + " ")
            else:
                logical.append((pending[0], joined))
                pending = None
        if pending is not None:
            logical.append(pending)
        for number, line in logical:
            words = shlex.split(line, comments=True)
            env = []
            while words and _ASSIGNMENT.match(words[0]):
                key, value = words.pop(0).split("=", 1)
                env.append((key, value))
            if words[:2] != ["python", "-m"] or len(words) < 3:
                continue
            if words[2] != "fedviz" and not words[2].startswith("fedviz."):
                continue
            command, note = comment(line)
            reason = note.split(NOT_RUN, 1)[1].strip() if NOT_RUN in note else None
            out.append(Example(doc, number, " ".join(command.split()), tuple(env), tuple(words[1:]), reason))
    return out


def shell_syntax(example: Example) -> list[str]:
    """The shell operators an example uses (it cannot run as one process without a shell)."""
    return [w for w in example.argv if w in _SHELL or "$" in w or "`" in w]


def cells(line: str) -> list[str]:
    """A Markdown table row's cells, stripped (``| a | b |`` → ``["a", "b"]``)."""
    return [c.strip() for c in line.strip().strip("|").split("|")]


def case_tables(text: str, header: str, rule: str) -> list[tuple[str, list[list[str]]]]:
    """Every ``### `` heading of a generated report with the table under it (a blank line, ``header``,
    ``rule``, then rows up to the first line that is not one): (heading, rows as cells).  A table whose
    header or rule is not the given one fails here, by name."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        if not line.startswith("### "):
            continue
        assert lines[i + 2] == header and lines[i + 3] == rule, f"{line}: not the report's table header"
        rows = []
        for row in lines[i + 4:]:
            if not row.startswith("| "):
                break
            rows.append(cells(row))
        out.append((line, rows))
    return out
