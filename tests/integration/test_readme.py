"""Every `python -m fedviz …` example of the README's "The command line" section runs as
written, in that order, in an empty directory (a fresh clone has no ../shared/data), and
ends with exit code 0: an example that breaks fails the suite instead of a reader."""

import os
import re
import shlex
import subprocess
import sys

import pytest
from conftest import ROOT

README = ROOT / "README.md"
SECTION = "## The command line"
#: Seconds one example may take (the slowest, 30 iterations of three algorithms, takes ~10 s).
TIMEOUT = 300


def commands(text: str) -> list[str]:
    """The `python -m fedviz` commands of the section's ```bash blocks, continuation lines
    joined and comments dropped."""
    section = text.split(SECTION, 1)[1]
    section = re.split(r"^## ", section, flags=re.M)[0]
    out = []
    for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:3] == ["python", "-m", "fedviz"]:
                out.append(line)
    return out


def test_the_section_is_found_and_holds_examples():
    """The extraction itself: the section exists, and its examples cover every subcommand
    it documents (a renamed heading would otherwise test nothing)."""
    found = commands(README.read_text(encoding="utf-8"))
    assert len(found) >= 5
    assert {shlex.split(c)[3] for c in found} >= {"export", "inspect", "run", "algorithms"}


def test_commands_joins_continuations_and_drops_comments():
    text = (f"{SECTION}\n\n```bash\n# a comment\npython -m fedviz run a \\\n    --b c   # note\nls\n```\n"
            "## Next\n```bash\npython -m fedviz bench\n```\n")
    assert [shlex.split(c, comments=True) for c in commands(text)] == [
        ["python", "-m", "fedviz", "run", "a", "--b", "c"]]


def test_every_command_line_example_runs(tmp_path):
    env = {**os.environ, "FEDVIZ_DB": str(tmp_path / "runs.sqlite")}
    for line in commands(README.read_text(encoding="utf-8")):
        argv = [sys.executable] + shlex.split(line, comments=True)[1:]
        try:
            done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"README example took more than {TIMEOUT} s: {line}")
        assert done.returncode == 0, f"README example failed ({done.returncode}): {line}\n{done.stderr[-2000:]}"


def test_ci_runs_the_readmes_test_command_as_written():
    """.ci/run runs, in its fresh copy of the checkout, the very command the README gives for the tests,
    so CI passes or fails as a reader's fresh clone does."""
    section = README.read_text(encoding="utf-8").split("## Two commands", 1)[1]
    section = re.split(r"^## ", section, flags=re.M)[0]
    lines = [line for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S)
             for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    tests = [line for line in lines if "python -m pytest" in line]
    assert len(tests) == 1, lines
    assert tests[0] in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
