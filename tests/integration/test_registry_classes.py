"""The registry walked on two classes and on many (issue 22, points 3 and 7): every algorithm, on binary data
and on dna.scale's 3 classes, on every page that offers algorithms — Run, Compare's What-if, Efficiency, the
Experiments form — and on the command line, either runs or is refused with the registry's own sentence
(:meth:`Algorithm.softmax_refusal`).  The lists come from the registry, so an algorithm added next month is
walked too, and must say whether it takes softmax.  (Binary runs from the Run page: test_pages_registry.py.)"""

import contextlib
import io
import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from fedviz.algorithms import ALGORITHMS
from fedviz.data.build import DataSpec
from fedviz.runner.config import RunConfig

from apptest import long_sessions, open_page  # noqa: F401 - the fixture, used by pytestmark
from conftest import DATA, plain

pytestmark = pytest.mark.usefixtures("long_sessions")

TINY = DataSpec(source="preset:identical-nodes")
#: dna.scale's 3 classes on 10 nodes (DANE's exact solve is one per node).
DNA = DataSpec(source=str(DATA / "dna.scale"), partition="iid", nodes=10)
TAKES = [name for name, cls in ALGORITHMS.items() if cls.softmax_refusal() is None]
REFUSES = [name for name, cls in ALGORITHMS.items() if cls.softmax_refusal() is not None]


def _partly(cls) -> list[str]:
    """The sentences of the hyperparameter values that make an algorithm refuse softmax (DANE's solver='svrg')."""
    return [why for p in cls.params if p.kind == "choice" for value in p.choices
            for why in [cls.softmax_refusal({p.name: value})] if why is not None]


def test_the_registry_has_both_kinds_and_every_refusal_names_its_algorithm():
    assert TAKES and REFUSES
    for name in REFUSES:
        cls = ALGORITHMS[name]
        assert cls.softmax_refusal() == f"{cls.title} does not take softmax: {cls.multiclass_reason}"


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_the_run_page_on_three_classes_runs_it_or_says_why_not(name):
    cls = ALGORITHMS[name]
    at = open_page("pages/run.py", RunConfig(data=DNA, loss="softmax", algorithms=(("gd", ()),), iterations=1),
                   timeout=180)
    picker = at.multiselect(key="run-algorithms-softmax")
    captions = " ".join(plain(c.value) for c in at.caption)
    for why in _partly(cls):  # offered, but refused with that value: said under the picker
        assert f"{why[0].upper()}{why[1:]}." in captions
    if name in REFUSES:
        assert name not in picker.options and cls.title not in [plain(o) for o in picker.options]
        assert cls.multiclass_reason in captions and cls.title in captions
        return
    picker.set_value([name]).run()
    assert not at.exception and not at.error, [plain(e.value) for e in at.error]
    next(b for b in at.button if b.label.endswith(" Run")).click().run()
    handle = at.session_state["run"]
    assert handle.wait(240), "the run did not end"
    snap = handle.snapshot()
    # It ran: done, or diverged as the health check judges it (DANE at μ = 0 on 150-row nodes and 540
    # unknowns), never failed.
    assert snap.summary["loss"] == "softmax" and set(snap.statuses) == {cls.title}, snap.messages
    assert snap.statuses[cls.title] in ("done", "diverged"), snap.messages


@pytest.mark.parametrize("data", ["binary", "multiclass"])
@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_compare_and_efficiency_offer_it_or_say_why_not(name, data):
    cls = ALGORITHMS[name]
    spec, loss = (TINY, cls.losses[0]) if data == "binary" else (DNA, "softmax")
    refused = data == "multiclass" and name in REFUSES
    # A refused one arrives as a session's settings from binary data would bring it: with its own loss.
    config = RunConfig(data=spec, loss=loss if not refused else cls.losses[0],
                       algorithms=((name, ()), ("gd", ()), ("fsvrg", ())) if name not in ("gd", "fsvrg") else
                       (("gd", ()), ("fsvrg", ())), iterations=1)
    at = open_page("pages/compare.py", config, timeout=180)
    captions = [plain(c.value) for c in at.caption]
    runs = next(c for c in captions if c.startswith("Runs "))
    if refused:
        assert f"Left out on these 3 classes: {cls.softmax_refusal()}." in captions, captions
        assert cls.title not in runs.split(" on ")[0]
    else:
        assert cls.title in runs.split(" on ")[0], runs
        assert not any(c.startswith("Left out") for c in captions), captions
    at = open_page("pages/learn_efficiency.py", config, timeout=180)
    captions = [plain(c.value) for c in at.caption]
    setup = next(plain(m.value) for m in at.markdown if m.value.startswith("**This page's setup**"))
    if refused:
        assert f"Left out on these 3 classes (softmax): {cls.softmax_refusal()}." in captions, captions
        assert f"{cls.title} " not in setup.split(" on ")[0] + " "
    elif cls.federated or name in ("gd", "fsvrg"):
        assert cls.title in setup.split(" on ")[0], setup


def test_the_experiments_form_offers_on_ten_classes_exactly_the_algorithms_that_take_softmax():
    at = open_page("pages/experiments.py", timeout=180)
    at.selectbox(key="exp-preset").set_value("fedprox-synthetic").run()
    picker = at.multiselect(key="exp-algorithms-softmax")
    titles = {plain(o) for o in picker.options}
    caption = next(plain(c.value) for c in at.caption if c.value.startswith("Not offered for these 10 classes"))
    for name, cls in ALGORITHMS.items():
        shown = any(t.startswith(cls.title) for t in titles)
        if name in REFUSES:
            assert not shown and cls.multiclass_reason in caption and cls.title in caption
        else:
            assert shown, (name, titles)
    at.selectbox(key="exp-preset").set_value("identical-nodes").run()
    assert len(at.multiselect(key="exp-algorithms").options) == len(ALGORITHMS)


def _cli(*args, in_process=False):
    """``python -m fedviz …`` in a subprocess (as a user runs it), or (``in_process``) its :func:`fedviz.cli.main`
    called here — the same parser and code without a Python start — with the exit code and both streams."""
    argv = list(map(str, args))
    if not in_process:
        return subprocess.run([sys.executable, "-m", "fedviz", *argv], capture_output=True, text=True, timeout=600)
    from fedviz.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


@pytest.mark.parametrize("name", REFUSES)
def test_the_command_line_refuses_it_on_three_classes_with_the_sentence(name):
    """The first refusing algorithm in a subprocess, as a user runs it; the others through the CLI's code here."""
    r = _cli("run", DATA / "dna.scale", "--algorithms", name, "--iterations", "1", in_process=name != REFUSES[0])
    assert r.returncode == 2, r.stderr
    assert ALGORITHMS[name].softmax_refusal() in " ".join(r.stderr.split()) and "Traceback" not in r.stderr


def test_the_command_line_runs_every_algorithm_that_takes_softmax_on_three_classes():
    r = _cli("run", DATA / "dna.scale", "--nodes", "10", "--algorithms", ",".join(TAKES), "--iterations", "1",
             "--json")
    assert r.returncode == 0, r.stderr
    last = {row["algorithm"]: row for row in map(json.loads, r.stdout.splitlines()) if row["status"] != "running"}
    assert set(last) == set(TAKES) and {row["status"] for row in last.values()} <= {"done", "diverged"}, last
