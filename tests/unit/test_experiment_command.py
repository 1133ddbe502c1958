"""What ``fedviz experiment`` says when cells fail, and how a cluster's processes are compared with the
driver (issue 19): counts of distinct reasons, and the sentence naming what differs."""

import pytest

from fedviz.cli import experiment as cli_experiment
from fedviz.cli.experiment import MAX_REASONS, REASON_WIDTH, reasons
from fedviz.runner import cluster
from fedviz.runner.history.store import RunStore

HERE = {"fedviz": "0.1.0", "source": "aaaa", "path": "/here/fedviz", "numpy": "2.4.6", "numba": "0.68.1"}


def test_reasons_are_counted_most_frequent_first_on_one_line_each():
    messages = ["ValueError: b", "DataFormatError: x.svm, line 2:\n  bad", "ValueError: b",
                "DataFormatError: x.svm, line 2: bad", "ValueError: b", "", None]
    assert reasons(messages) == [(3, "ValueError: b"), (2, "DataFormatError: x.svm, line 2: bad"),
                                 (2, "no reason was recorded")]


def test_a_long_reason_is_cut_with_an_ellipsis():
    (n, text), = reasons(["E: " + "y" * 1000] * 2)
    assert n == 2 and len(text) == REASON_WIDTH and text.endswith("…") and text.startswith("E: yyy")


def test_failures_print_each_distinct_reason_and_summarise_the_rest(tmp_path, capsys):
    store = RunStore(tmp_path / "runs.sqlite")
    try:
        info = store.open_experiment("e", {"name": "e"})
        plan = [(f"reason {k}", MAX_REASONS + 2 - k) for k in range(MAX_REASONS + 2)]  # 7 reasons, 7..1 cells
        i = 0
        for text, count in plan:
            for _ in range(count):
                store.save_cell(info.id, key=f"c{i}", setting=(0,), arm="gd", step=None, seed=i, label="GD",
                                algorithm="gd", hyper={}, config={}, status="failed", message=text)
                i += 1
        store.save_cell(info.id, key="ok", setting=(0,), arm="gd", step=None, seed=999, label="GD", algorithm="gd",
                        hyper={}, config={}, status="done")
        failed = cli_experiment._failures(store, info.id)
    finally:
        store.close()
    total = sum(c for _, c in plan)
    assert failed == total
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == f"fedviz: {total} of {total + 1} cells failed ({len(plan)} distinct reasons):"
    assert lines[1:1 + MAX_REASONS] == [f"  {c} × {t}" for t, c in plan[:MAX_REASONS]]
    rest = plan[MAX_REASONS:]
    assert lines[1 + MAX_REASONS].startswith(f"  … and {len(rest)} other reasons over {sum(c for _, c in rest)} cells")
    assert len(lines) == 2 + MAX_REASONS


def test_no_failed_cell_prints_nothing(tmp_path, capsys):
    store = RunStore(tmp_path / "runs.sqlite")
    try:
        info = store.open_experiment("e", {"name": "e"})
        store.save_cell(info.id, key="d", setting=(0,), arm="gd", step=None, seed=0, label="GD", algorithm="gd",
                        hyper={}, config={}, status="diverged", message="diverged at iteration 3")
        assert cli_experiment._failures(store, info.id) == 0
    finally:
        store.close()
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("there, said", [
    ({**HERE}, None),
    ({**HERE, "path": "/elsewhere/fedviz"}, None),  # an identical copy at another path
    ({"numpy": "2.4.6", "numba": "0.68.1", "error": "ModuleNotFoundError: No module named 'fedviz'"},
     "cannot import fedviz (ModuleNotFoundError: No module named 'fedviz')"),
    ({**HERE, "fedviz": "0.0.9", "source": "bbbb"}, "runs fedviz 0.0.9 (here 0.1.0)"),
    ({**HERE, "source": "bbbb", "path": "/old/fedviz"},
     "runs fedviz 0.1.0 from other source files (/old/fedviz: bbbb; here /here/fedviz: aaaa)"),
    ({**HERE, "numpy": "1.26.4", "numba": "0.60.0"}, "runs numpy 1.26.4 (here 2.4.6), numba 0.60.0 (here 0.68.1)"),
])
def test_differences_name_only_what_differs(there, said):
    assert cluster.check._differences(there, HERE) == said


def test_the_drivers_own_environment_is_what_it_imported():
    import numba
    import numpy

    import fedviz

    env = cluster.environment()
    assert (env["fedviz"], env["numpy"], env["numba"]) == (fedviz.__version__, numpy.__version__, numba.__version__)
    assert env["path"] == str(__import__("pathlib").Path(fedviz.__file__).resolve().parent)
    assert len(env["source"]) == 12 and "error" not in env
