"""Every `python -m fedviz …` example of the README and of docs/*.md runs as written and ends with exit
code 0: an example that breaks fails the suite instead of a reader.

Each document's examples (the ```bash blocks' lines, see :func:`markdown_docs.examples`) run in the
document's order — a later one reads what an earlier one wrote — in an empty directory of their own
(a fresh clone has no ../shared/data), with the run history in that directory.  An example whose
comment says ``not run by the tests: <reason>`` (the paper's scale, many minutes, a Dask scheduler) is
not run, but parsed by its command's own argparse parser, in a test of its own: a renamed flag or
subcommand fails there as it would for the reader.
"""

import argparse
import importlib
import re
import subprocess
import sys

import pytest
from conftest import ROOT
from markdown_docs import (
    NOT_RUN,
    README,
    documents,
    example_env,
    examples,
    name,
    shell_syntax,
)

#: Seconds one example may take (the slowest run here, `experiment paper-figure2 --out`, took 35 s on the
#: loaded 2-core machine; all of them 3 min 15 s).
TIMEOUT = 300
#: At most this many examples are left out.  The tests stay minutes long by running small examples, not by
#: leaving examples out: a new slow one is better made small, and raising this is a decision a diff shows.
MAX_NOT_RUN = 9

ALL = [e for doc in documents() for e in examples(doc)]
RUN = {doc: [e for e in examples(doc) if e.not_run is None] for doc in documents()}


@pytest.mark.parametrize("doc", [d for d in documents() if RUN[d]], ids=name)
def test_every_example_runs(doc, tmp_path):
    env = example_env(tmp_path)
    for example in RUN[doc]:
        argv = [sys.executable, *example.argv]
        try:
            done = subprocess.run(argv, cwd=tmp_path, env={**env, **dict(example.env)}, capture_output=True,
                                  text=True, timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"example took more than {TIMEOUT} s: {example}")
        assert done.returncode == 0, f"example failed ({done.returncode}): {example}\n{done.stderr[-2000:]}"


class _Parsed(Exception):
    """Raised where a command would start its work: its parser accepted the line."""


@pytest.mark.parametrize("example", [e for e in ALL if e.not_run is not None], ids=lambda e: f"{name(e.doc)}:{e.line}")
def test_an_example_not_run_is_accepted_by_its_command_s_parser(example, monkeypatch):
    """Not run (its comment says why), but its words up to any shell operator go through the command's own
    ``main``, whose argparse parser reads them; the work is never started: :class:`_Parsed` is raised in
    its place.  A flag, subcommand or choice the command no longer has fails here, as it would for the
    reader (fedviz's parser returns 2 on a usage error, argparse's own exits 2)."""
    assert example.not_run, f"{example}: '{NOT_RUN}' needs a reason after it"
    words = list(example.argv)
    shell = shell_syntax(example)
    words = words[:next((i for i, w in enumerate(words) if w in shell), len(words))]
    assert words[0] == "-m", f"{example}: expected python -m MODULE"
    parse_args = argparse.ArgumentParser.parse_args

    def parse_then_stop(parser, args=None, namespace=None):
        raise _Parsed(parse_args(parser, args, namespace))

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    main = importlib.import_module(words[1] + (".cli" if words[1] == "fedviz" else "")).main
    try:
        code = main(words[2:])
    except _Parsed:
        return
    except SystemExit as e:
        code = e.code
    pytest.fail(f"{example}: its command's parser refused it (exit code {code})")


def test_what_is_not_run_is_marked_few_and_says_why():
    not_run = [e for e in ALL if e.not_run is not None]
    assert len(not_run) <= MAX_NOT_RUN, "\n".join(map(str, not_run))
    assert all(e.not_run for e in not_run), "each marker names its reason"
    # An example the tests would run must be one command: no pipes, redirections or variables, which
    # need a shell (the tests run no shell, so such a line would test something else than it says).
    for e in ALL:
        if e.not_run is None:
            assert not shell_syntax(e), f"{e}: uses {shell_syntax(e)}; mark it '# {NOT_RUN} <reason>'"


def test_the_readme_has_a_quick_start_the_tests_run():
    """The extraction itself: the README's examples are found and cover the commands it documents (a
    changed fence or prefix would otherwise test nothing), and the docs hold more than the README."""
    found = RUN[README]
    assert len(found) >= 4
    assert {e.argv[1] for e in found} == {"fedviz"}
    assert {e.argv[2] for e in found} >= {"export", "inspect", "run", "algorithms"}
    assert len(ALL) > len(examples(README))


def test_examples_joins_continuations_reads_the_marker_and_skips_other_blocks(tmp_path):
    doc = tmp_path / "d.md"
    text = ("Prose `python -m fedviz no`.\n\n```bash\n# a comment\npython -m fedviz run a \\\n    --b 'c d'   # FSVRG's\n"
            "ls\nFEDVIZ_X=1 python -m fedviz.bench.stepsize_check --data x   # slow; not run by the tests: 4 min\n```\n\n"
            "```toml\npython -m fedviz toml\n```\n\n```\npython -m fedviz plain\n```\n"
            "```bash\npython -m fedviz tuning-report --data DIR > out.md\n```\n")
    found = examples(doc, text)
    assert [(e.line, e.argv, e.env, e.not_run) for e in found] == [
        (5, ("-m", "fedviz", "run", "a", "--b", "c d"), (), None),
        (8, ("-m", "fedviz.bench.stepsize_check", "--data", "x"), (("FEDVIZ_X", "1"),), "4 min"),
        (19, ("-m", "fedviz", "tuning-report", "--data", "DIR", ">", "out.md"), (), None)]
    assert found[0].text == "python -m fedviz run a --b 'c d'"
    assert [shell_syntax(e) for e in found] == [[], [], [">"]]


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
