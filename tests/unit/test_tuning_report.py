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
from scipy.optimize import minimize

from conftest import DATA
from fedviz.algorithms import ALGORITHMS
from fedviz.cli import main
from fedviz.data.build import DataSpec, build
from fedviz.problems.objective import Problem
from fedviz.bench.tuning_report import CASES, COMMAND, HEADER, RULE, Row, format_row, row

DOC = Path(__file__).resolve().parents[2] / "docs" / "tuning.md"


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_the_doc_names_the_command_that_writes_it():
    first = DOC.read_text().splitlines()[0]
    assert first == f"<!-- Written by `{COMMAND}`; do not edit by hand: run the command again. -->"
    assert COMMAND.startswith("python -m fedviz tuning-report")


def test_the_doc_has_one_table_per_case_with_every_algorithm():
    lines = DOC.read_text().splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith("### ")]
    assert [lines[i] for i in heads] == [f"### {train} (test file {test}), partition {part}"
                                         for train, test, part in CASES]
    for i in heads:
        assert lines[i + 2] == HEADER and lines[i + 3] == RULE
        rows = []
        for line in lines[i + 4:]:
            if not line.startswith("| "):
                break
            rows.append(_cells(line))
        assert [r[0] for r in rows] == list(ALGORITHMS)  # a new algorithm is missing until the doc is rewritten
        assert all(len(r) == len(_cells(HEADER)) for r in rows)


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
def _dense_gd(X, y, lam, h, T):
    """T steps of GD on mean log(1 + exp(−y·Xw)) + λ/2‖w‖² from w = 0, in NumPy."""
    w = np.zeros(X.shape[1])
    for _ in range(T):
        z = y * (X @ w)
        g = -(X.T @ (y / (1 + np.exp(z)))) / len(y) + lam * w
        w = w - h * g
    return w


def _f(X, y, lam, w):
    return float(np.mean(np.logaddexp(0, -y * (X @ w))) + 0.5 * lam * w @ w)


def test_one_generated_row_matches_a_dense_numpy_gd_and_the_doc_format():
    ds = build(DataSpec(source=str(DATA / "heart_scale"), nodes=5, seed=0))
    problem = Problem(ds, "logistic", None)
    X, y, lam = ds.X.toarray(), ds.y, problem.lam
    res = minimize(lambda w: _f(X, y, lam, w), np.zeros(X.shape[1]), method="L-BFGS-B",
                   jac=lambda w: -(X.T @ (y / (1 + np.exp(y * (X @ w))))) / len(y) + lam * w,
                   options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10_000})
    f_star = res.fun
    r = row(problem, f_star, "gd", iterations=12)
    assert isinstance(r, Row) and r.tuning.param == "stepsize"
    Xt, yt = ds.X_test.toarray(), ds.y_test
    for h, sub, err in ((1 / problem.smoothness, r.default_sub, r.default_err),
                        (r.tuning.value, r.tuned_sub, r.tuned_err)):
        w = _dense_gd(X, y, lam, h, 12)
        assert sub == pytest.approx(_f(X, y, lam, w) - f_star, rel=1e-5, abs=1e-10)
        assert err == pytest.approx(np.mean(np.where(Xt @ w > 0, 1.0, -1.0) != yt))
    line = format_row(r)
    cells = _cells(line)
    assert len(cells) == len(_cells(HEADER))
    assert cells[0] == "gd" and cells[1] == f"{r.default_sub:.3e}" and cells[5] == f"{r.tuned_sub:.3e}"
    assert cells[3] == f"stepsize = {r.tuning.value:.6g}"
    # pilots: runs, rounds (the run's), seconds — GD is deterministic (one pilot seed), one round per iteration
    runs, rounds, run_rounds, seconds = re.fullmatch(r"(\d+), (\d+) \((\d+)\), ([\d.]+)", cells[4]).groups()
    assert int(runs) == r.tuning.runs == len(r.tuning.pilots) + 1 and len(r.tuning.seeds) == 1
    assert int(rounds) == r.tuning.rounds and int(run_rounds) == 12
    assert math.isclose(float(seconds), r.tuning.seconds, abs_tol=0.05)


def test_an_mse_is_never_printed_as_a_percentage():
    """Issue 19: the report once printed a squared-loss MSE as '44.86%' test error."""
    from fedviz.bench.tuning_report import _err

    assert _err(0.1539, "error") == "15.39%"
    assert _err(0.4486, "mse") == "MSE 0.4486" and "%" not in _err(0.4486, "mse")
