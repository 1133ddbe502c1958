"""docs/tuning.md is written by `python -m fedviz tuning-report` (fedviz.bench.tuning_report).

The whole document takes minutes, so it is not regenerated here.  Instead: the document says
which command wrote it and has the tables that command writes (its header, one row per
registered algorithm, the same columns as :func:`format_row`); and one row, generated here on
a small problem, is checked against an independent oracle (GD re-implemented densely in NumPy,
f* from SciPy's L-BFGS).
"""

import math
import re
from pathlib import Path

import numpy as np
import pytest

from conftest import DATA
from markdown_docs import case_tables, cells
from problems import dense_bb_gd, logistic_f, logistic_f_star
from fedviz.algorithms import ALGORITHMS
from fedviz.cli import main
from fedviz.data.build import DataSpec, build
from fedviz.problems.objective import Problem
from fedviz.bench.tuning_report import CASES, COMMAND, HEADER, RULE, Row, format_row, row

DOC = Path(__file__).resolve().parents[2] / "docs" / "tuning.md"


def test_the_doc_names_the_command_that_writes_it():
    first = DOC.read_text().splitlines()[0]
    assert first == f"<!-- Written by `{COMMAND}`; do not edit by hand: run the command again. -->"
    assert COMMAND.startswith("python -m fedviz tuning-report")


def test_the_doc_has_one_table_per_case_with_every_algorithm():
    tables = case_tables(DOC.read_text(), HEADER, RULE)
    assert [head for head, _ in tables] == [f"### {train} (test file {test}), partition {part}"
                                            for train, test, part in CASES]
    for _, rows in tables:
        assert [r[0] for r in rows] == list(ALGORITHMS)  # a new algorithm is missing until the doc is rewritten
        assert all(len(r) == len(cells(HEADER)) for r in rows)


def test_tuning_ends_no_worse_than_the_default_on_every_row_of_the_doc():
    """Issue 30's acceptance: `--tune` ends no worse than the default on the same seeds, on every row of
    docs/tuning.md (the doc is the command's output; a rerun that breaks it fails here), and the remark
    under the tables says so."""
    text = DOC.read_text()
    head = cells(HEADER)
    default_col, tuned_col = head.index("default f − f*"), head.index("tuned f − f*")
    worse = [(case, r[0], r[default_col], r[tuned_col]) for case, rows in case_tables(text, HEADER, RULE)
             for r in rows if float(r[tuned_col]) > float(r[default_col])]
    assert worse == []
    assert "- Tuning ends no worse than the default on every row." in text.splitlines()


def test_the_command_is_a_subcommand_with_its_options(capsys):
    with pytest.raises(SystemExit):
        main(["tuning-report", "--help"])
    out = capsys.readouterr().out
    assert "--data" in out and "--algorithms" in out


def test_a_missing_data_folder_is_named(capsys):
    assert main(["tuning-report", "--data", "/nonexistent/folder"]) == 2
    err = capsys.readouterr().err
    assert "--data" in err and "a9a" in err


# -- one row against an oracle ------------------------------------------------------------------------
def test_one_generated_row_matches_a_dense_numpy_gd_and_the_doc_format():
    ds = build(DataSpec(source=str(DATA / "heart_scale"), nodes=5, seed=0))
    problem = Problem(ds, "logistic", None)
    X, y, lam = ds.X.toarray(), ds.y, problem.lam
    f_star = logistic_f_star(X, y, lam)
    r = row(problem, f_star, "gd", iterations=12)
    assert isinstance(r, Row) and r.tuning.param == "stepsize"
    Xt, yt = ds.X_test.toarray(), ds.y_test
    for h, sub, err in ((1 / problem.smoothness, r.default_sub, r.default_err),
                        (r.tuning.value, r.tuned_sub, r.tuned_err)):
        w = dense_bb_gd(X, y, lam, h, 12)  # GD's default: Barzilai–Borwein steps from a first step h
        assert sub == pytest.approx(logistic_f(X, y, lam, w) - f_star, rel=1e-5, abs=1e-10)
        assert err == pytest.approx(np.mean(np.where(Xt @ w > 0, 1.0, -1.0) != yt))
    line = format_row(r)
    row_cells = cells(line)
    assert len(row_cells) == len(cells(HEADER))
    assert row_cells[0] == "gd" and row_cells[1] == f"{r.default_sub:.3e}" and row_cells[5] == f"{r.tuned_sub:.3e}"
    assert row_cells[3] == f"stepsize = {r.tuning.value:.6g}"
    # pilots: runs, rounds (the run's), seconds — GD is deterministic (one pilot seed), one round per iteration
    runs, rounds, run_rounds, seconds = re.fullmatch(r"(\d+), (\d+) \((\d+)\), ([\d.]+)", row_cells[4]).groups()
    assert int(runs) == r.tuning.runs == len(r.tuning.pilots) + 1 and len(r.tuning.seeds) == 1
    assert int(rounds) == r.tuning.rounds and int(run_rounds) == 12
    assert math.isclose(float(seconds), r.tuning.seconds, abs_tol=0.05)


def test_an_mse_is_never_printed_as_a_percentage():
    """Issue 19: the report once printed a squared-loss MSE as '44.86%' test error."""
    from fedviz.bench.tuning_report import _err

    assert _err(0.1539, "error") == "15.39%"
    assert _err(0.4486, "mse") == "MSE 0.4486" and "%" not in _err(0.4486, "mse")
