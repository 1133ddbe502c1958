"""Issue 20, "Experiments are safe to name, resume and fail": an experiment is identified by its grid
(a content hash), so a stored name is never reused by another grid, a built-in's verdict judges only
its own grid, counts never exceed the grid, every grid value is checked against its range before
launch, failed cells' reasons are counted, and a built-in run below the paper's scale says so."""

from __future__ import annotations

import math
import re
import tomllib

import pytest

from conftest import ROOT
from fedviz import cli
from fedviz.data.build import MAX_NODES, DataSpec
from fedviz.data.presets import preset_config
from fedviz.errors import ParameterError
from fedviz.experiments import Arm, Axis, Experiment, driver, from_json, from_toml
from fedviz.experiments.builtin import BUILTINS, PAPER_FIGURE2_SCALE, builtin_for
from fedviz.experiments.results import CellResult, Results, failure_reasons, failure_text, load
from fedviz.experiments.spec import content_hash
from fedviz.runner.loop import IterationRecord
from fedviz.runner.history.store import RunStore

DOCS = ROOT / "docs" / "experiments.md"


def _toml_blocks(text: str) -> list[str]:
    return re.findall(r"```toml\n(.*?)```", text, flags=re.S)


def _docs_example() -> Experiment:
    return from_toml(_toml_blocks(DOCS.read_text(encoding="utf-8"))[0], where="docs")


def _records(final: float, n: int = 3) -> list[IterationRecord]:
    return [IterationRecord("x", t, 1.0 + final, final, 0.2, 0.2, 1.0, t, t, t, t, float(t), 0.0,
                            "done" if t == n - 1 else "running", "") for t in range(n)]


def _store_cells(store, info, cells, final=0.1, status="done", message=""):
    for c in cells:
        store.save_cell(info.id, key=c.key, setting=c.setting, arm=c.arm, step=c.step, seed=c.seed, label=c.label,
                        algorithm=c.job.algorithms[0].name, hyper={}, config={}, status=status, message=message,
                        records=_records(final) if status == "done" else [])


# -- identity ---------------------------------------------------------------------------------------------
def test_the_content_hash_ignores_the_name_and_prose_and_sees_every_grid_change():
    e = BUILTINS["dirichlet-sweep"].experiment("small")
    same = Experiment("another name", e.data, e.arms, e.axes, e.seeds, e.iterations, e.loss, e.lam, e.data_seed,
                      e.target, description="other words", claim="another claim")
    assert same.content_hash == e.content_hash
    changed = [Experiment(e.name, e.data, e.arms, e.axes, (0, 1, 2), e.iterations, target=e.target),
               Experiment(e.name, e.data, e.arms, e.axes, e.seeds, e.iterations + 1, target=e.target),
               Experiment(e.name, e.data, e.arms[:2], e.axes, e.seeds, e.iterations, target=e.target),
               Experiment(e.name, e.data, e.arms, (Axis.of("partition.alpha", (0.01, 1.0), name="Dirichlet α"),),
                          e.seeds, e.iterations, target=e.target),
               Experiment(e.name, DataSpec("preset:google-plus-small", partition="dirichlet:alpha=1", nodes=50),
                          e.arms, e.axes, e.seeds, e.iterations, target=e.target)]
    hashes = {c.content_hash for c in changed}
    assert len(hashes) == len(changed) and e.content_hash not in hashes
    # 1 and 1.0 are one value: a grid typed in TOML hashes as the same grid built in Python.
    a = Experiment("a", DataSpec("preset:iid"), (Arm.of("gd"),), (Axis.of("lam", (1, 2)),))
    b = Experiment("b", DataSpec("preset:iid"), (Arm.of("gd"),), (Axis.of("lam", (1.0, 2.0)),))
    assert a.content_hash == b.content_hash


def test_a_grid_read_back_from_the_history_hashes_as_it_was_launched():
    for e in [_docs_example()] + [b.experiment(s) for b in BUILTINS.values() for s in ("small", "full")]:
        assert from_json(e.as_json()).content_hash == e.content_hash == content_hash(e.as_json())


def test_two_uploads_are_two_grids():
    a = Experiment("u", DataSpec(b"+1 1:1\n-1 2:1\n"), (Arm.of("gd"),))
    b = Experiment("u", DataSpec(b"+1 1:1\n-1 2:2\n"), (Arm.of("gd"),))
    assert a.content_hash != b.content_hash


def test_a_stored_name_with_another_grid_is_refused_naming_it_and_how_to_proceed(tmp_path, monkeypatch):
    monkeypatch.setattr(driver.ExperimentHandle, "start", lambda self: self)  # nothing runs: the refusal is first
    store = RunStore(tmp_path / "runs.sqlite")
    builtin = BUILTINS["dirichlet-sweep"].experiment("full")
    docs = _docs_example()
    mine = Experiment(builtin.name, docs.data, docs.arms, docs.axes, docs.seeds, docs.iterations, docs.loss,
                      docs.lam, docs.data_seed, docs.target)  # the docs' grid under the built-in's name
    info = store.open_experiment(mine.name, mine.as_json())
    _store_cells(store, info, mine.cells()[:7])
    with pytest.raises(driver.NameTaken) as e:
        driver.launch(builtin, store)
    text = str(e.value)
    assert f"'{builtin.name}'" in text and "different grid" in text and "another name" in text
    assert "--replace" in text and "7 of its cells are complete" in text
    assert "algorithms" in text and "iterations" not in text.split("differs in")[1].split(";")[0]
    assert store.get_experiment(builtin.name).n_cells == 7  # nothing was touched
    # The same grid under its own name resumes; replace deletes the other grid's cells first.
    driver._RUNNING.clear()
    assert driver.launch(mine, store).experiment is mine
    driver._RUNNING.clear()
    driver.launch(builtin, store, replace=True)
    driver._RUNNING.clear()
    assert store.get_experiment(builtin.name) is None


def test_the_docs_example_is_not_named_as_a_builtin():
    names = {e.name for b in BUILTINS.values() for e in (b.experiment("small"), b.experiment("full"))}
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in _toml_blocks(path.read_text(encoding="utf-8")):
            doc = tomllib.loads(block)
            if "name" in doc:
                assert doc["name"] not in names, (path.name, doc["name"])
    assert _docs_example().name not in names


# -- verdicts judge their own grid --------------------------------------------------------------------------
def test_a_verdict_judges_only_its_own_grid_whatever_the_name():
    docs = _docs_example()
    as_builtin = Experiment("dirichlet-sweep", docs.data, docs.arms, docs.axes, docs.seeds, docs.iterations,
                            target=docs.target)
    assert builtin_for(as_builtin) is None and builtin_for(docs) is None
    for b in BUILTINS.values():
        for scale in ("small", "full"):
            e = b.experiment(scale)
            copy = Experiment("my copy", e.data, e.arms, e.axes, e.seeds, e.iterations, e.loss, e.lam, e.data_seed,
                              e.target)
            assert builtin_for(e) is b and builtin_for(copy) is b and b.scale_of(copy) == scale


# -- counts never exceed the grid; no TypeError ---------------------------------------------------------------
def test_cells_of_another_grid_under_the_name_are_left_out_and_nothing_raises(tmp_path):
    """The issue's history: the docs' grid stored as 'dirichlet-sweep' (135 cells), then the built-in at
    full scale added its own (45): the page said '165 of 45' and the table raised a TypeError (an arm
    'FSVRG' with grid cells and a default cell tied on its median: min() compared 0.25 with None)."""
    store = RunStore(tmp_path / "runs.sqlite")
    builtin = BUILTINS["dirichlet-sweep"].experiment("full")
    docs = _docs_example()
    old = Experiment(builtin.name, docs.data, docs.arms, docs.axes, docs.seeds, docs.iterations,
                     target=docs.target)
    info = store.open_experiment(old.name, old.as_json())
    _store_cells(store, info, old.cells())
    store.open_experiment(builtin.name, builtin.as_json())  # what the old driver did: the name reopened
    _store_cells(store, info, builtin.cells())
    grid = {c.key for c in builtin.cells()}
    r = load(store, builtin.name)
    assert len(r.cells) == len(grid) == builtin.size and {c.key for c in r.cells} == grid
    for s in r.settings:
        for arm in r.arms:
            assert r.best_step(arm, s) is None and r.summary(arm, s).n == len(builtin.seeds)


def test_best_step_on_a_tie_takes_the_first_value_without_comparing_none():
    e = Experiment("t", DataSpec("preset:iid"), (Arm.of("gd", label="GD", step="grid", values=(0.5, 2.0)),))
    cells = [CellResult(c.key, 0, c.setting, c.arm, c.label, c.step, None, c.seed, "done", 0.1, 0.2, 0.3,
                        math.inf, 3, "") for c in e.cells()]
    cells.append(CellResult("stray", 0, (), "GD", "GD", None, None, 0, "done", 0.1, 0.2, 0.3, math.inf, 3, ""))
    r = Results(None, e, cells, None)
    assert r.best_step("GD", ()) is None  # sorted first (None, 0.5, 2.0), all tied at 0.1


# -- ranges before launch ------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, words", [
    ('[[axis]]\nkey = "nodes"\nvalues = [10, 1000000000]\n',
     ["axis[0]", "axis 'nodes'.values[1].nodes=1000000000", f"integer in [1, {MAX_NODES}]"]),
    ('nodes = 1000000000\n', ["nodes=1000000000", f"integer in [1, {MAX_NODES}]"]),
    ('test_fraction = 1.5\n', ["test_fraction=1.5", "number in [0, 1)"]),
    ('[[axis]]\nkey = "test_fraction"\nvalues = [0.1, 1]\n', ["axis 'test_fraction'.values[1]", "[0, 1)"]),
    ('[[axis]]\nkey = "data.beta"\nvalues = [0, 500]\n', ["beta"]),
    ('[[axis]]\nkey = "lam"\nvalues = [0.1, -1]\n', ["axis 'lam'.values[1].lam=-1", "> 0"]),
])
def test_every_grid_value_is_checked_against_its_range_before_launch(text, words):
    head = 'name = "x"\ndata = "preset:fedprox-synthetic-binary"\n'
    body = '[[algorithm]]\nname = "gd"\n'
    top, _, axis = text.partition("[[axis]]")
    doc = head + top + body + ("[[axis]]" + axis if axis else "")
    with pytest.raises(ParameterError) as e:
        from_toml(doc, where="toml").check()
    for w in words:
        assert w in str(e.value), (w, str(e.value))


# -- failed cells: their reasons, counted ----------------------------------------------------------------------
def test_failure_text_counts_each_distinct_reason():
    assert failure_text([]) == ""
    assert failure_text(["boom"] * 10) == "10 cells failed: 'boom' ×10"
    text = failure_text(["a"] * 3 + ["b"] * 2 + ["c", "d", "e"], shown=2)
    assert text == "8 cells failed: 'a' ×3; 'b' ×2; and 3 other reasons over 3 cells"
    assert failure_reasons(["x  y\n z", None]) == [(1, "no reason was recorded"), (1, "x y z")]


def test_results_count_the_failed_cells_reasons(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite")
    e = Experiment("fails", DataSpec("preset:iid"), (Arm.of("gd"),), (Axis.of("lam", (0.1, 0.2)),), seeds=(0, 1))
    info = store.open_experiment(e.name, e.as_json())
    cells = e.cells()
    _store_cells(store, info, cells[:3], status="failed", message="nodes = 7 is too many")
    _store_cells(store, info, cells[3:])
    assert load(store, e.name).failures() == [(3, "nodes = 7 is too many")]


# -- the paper's scale -------------------------------------------------------------------------------------------
def _figure2_results(scale, finals):
    e = BUILTINS["paper-figure2"].experiment(scale)
    cells = [CellResult(c.key, 0, c.setting, c.arm, c.label, c.step, None, c.seed, "done", finals[c.arm], 0.2, 0.3,
                        math.inf, e.iterations, "") for c in e.cells()]
    return Results(None, e, cells, None)


def test_paper_figure2_below_the_papers_scale_says_so_and_refutes_nothing():
    """The paper's Figure 2 is about K = 10,000 authors, n = 2,166,693, d = 20,002 (Section 4.1); the
    small scale is google-plus-small, K = 500: a check that did not hold there is not the paper refuted."""
    full, small = preset_config("google-plus"), preset_config("google-plus-small")
    assert full.n_nodes == 10_000 and round(full.n_nodes * full.train_size_mean) == 2_166_693
    assert full.n_words + 2 == 20_002 and small.n_nodes == 500
    assert "K = 10,000" in PAPER_FIGURE2_SCALE and "2,166,693" in PAPER_FIGURE2_SCALE
    assert "d = 20,002" in PAPER_FIGURE2_SCALE and "K = 500" in PAPER_FIGURE2_SCALE
    b = BUILTINS["paper-figure2"]
    level = {"FSVRG": 1e-4, "GD": 1e-2, "CoCoA+": 1e-2}  # CoCoA+ level with GD: "worse than GD" fails
    v = b.verdict(_figure2_results("small", level))
    assert v.scale == "small" and v.held is False and not v.refutes
    assert v.text.startswith("At small scale 1 of 3 checks did not hold. This does not test the published claim")
    assert "K = 10,000" in v.text and "run at full scale to test it" in v.text
    assert "The claim did not hold" not in v.text
    v = b.verdict(_figure2_results("full", level))
    assert v.scale == "full" and v.refutes and v.text.startswith("The claim did not hold: CoCoA+ is worse")
    # The report colours by `held`: below the paper's scale the shown verdict is a note, at it a refutation.
    small = b.verdict(_figure2_results("small", level))
    assert small.for_report().held is None and small.for_report().text == small.text
    assert small.for_report().lines() == small.lines()
    assert v.for_report().held is False
    held = b.verdict(_figure2_results("small", {"FSVRG": 1e-4, "GD": 1e-2, "CoCoA+": 1e-1}))
    assert held.for_report().held is True
    assert held.held is True and held.text.startswith("At small scale every check held. This does not test")


def test_every_builtins_published_scale_names_its_full_grid():
    for name, b in BUILTINS.items():
        small, full = b.experiment("small"), b.experiment("full")
        if name == "paper-figure2":
            continue  # its data, checked above
        for e, part in ((full, b.published.split("(")[0]), (small, b.published.split("(")[1])):
            assert str(e.iterations) in part, (name, part)
        if name == "dirichlet-sweep":
            assert f"{len(full.seeds)} seeds" in b.published and f"{len(small.seeds)} seeds" in b.published
        if name == "fedprox-figure2":
            assert "judged on 5 seeds" in b.published and "on 4)" in b.published


# -- the command line: a sentence and an exit code, never a traceback ---------------------------------------------
def test_the_cli_refuses_a_taken_name_with_exit_2_and_one_sentence(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FEDVIZ_DB", str(tmp_path / "runs.sqlite"))
    store = RunStore(tmp_path / "runs.sqlite")
    taken = BUILTINS["paper-figure2"].experiment("small")
    docs = _docs_example()
    other = Experiment(taken.name, docs.data, docs.arms, docs.axes, docs.seeds, docs.iterations, target=docs.target)
    store.open_experiment(other.name, other.as_json())
    assert cli.main(["experiment", "paper-figure2"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") <= 2
    assert f"'{taken.name}'" in err and "--replace" in err and "fedviz: error:" in err


def test_the_cli_turns_an_unexpected_error_into_a_sentence(tmp_path, monkeypatch, capsys):
    from fedviz.cli import experiment as cli_experiment

    def broken(args):
        raise TypeError("'<' not supported between instances of 'float' and 'NoneType'")

    monkeypatch.setattr(cli_experiment, "_main", broken)
    assert cli.main(["experiment", "paper-figure2"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("fedviz: error: the experiment command failed unexpectedly")


def test_the_cli_refuses_an_out_of_range_grid_value_before_launch(tmp_path, monkeypatch, capsys):
    """Issue 20: `nodes = [1000000000]` launched and failed in every cell; now exit 2, one sentence naming
    the axis, the value and the range, and nothing stored."""
    monkeypatch.setenv("FEDVIZ_DB", str(tmp_path / "runs.sqlite"))
    (tmp_path / "big.toml").write_text('name = "too many nodes"\ndata = "preset:fedprox-synthetic-binary"\n'
                                       '[[algorithm]]\nname = "gd"\n[[axis]]\nkey = "nodes"\nvalues = [1000000000]\n')
    assert cli.main(["experiment", str(tmp_path / "big.toml")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip() == ("fedviz: error: parameter big.toml.axis[0]: axis 'nodes'.values[0].nodes=1000000000 is "
                           f"out of range: allowed integer in [1, {MAX_NODES}]")
    assert RunStore(tmp_path / "runs.sqlite").get_experiment("too many nodes") is None
