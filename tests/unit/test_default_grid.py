"""docs/defaults.md is written by `python -m fedviz.bench.default_grid` (every default against the
best of a ×2 grid of its step, issue 30's yardstick).

The whole document takes many minutes, so it is not regenerated here.  Instead: the document
names the command that writes it and has one table per case with one row per registered
algorithm; and GD's row, computed here on a small file, is checked against an independent
oracle (GD re-implemented densely in NumPy at every step of the grid, f* from SciPy's L-BFGS).
"""

import math
from pathlib import Path

import pytest

from conftest import DATA
from markdown_docs import case_tables, cells
from problems import dense_bb_gd, logistic_f, logistic_f_star
from fedviz.algorithms import ALGORITHMS
from fedviz.bench.default_grid import CASES, COMMAND, HEADER, RULE, SPAN, _intro, format_row, grid_row
from fedviz.data.build import DataSpec, build
from fedviz.problems.objective import Problem

DOC = Path(__file__).resolve().parents[2] / "docs" / "defaults.md"


def test_the_doc_names_its_command_and_has_every_algorithm_on_every_case():
    text = DOC.read_text()
    assert text.startswith(_intro(30, 100))  # the words are the command's, not edited by hand
    assert text.splitlines()[0] == f"<!-- Written by `{COMMAND}`; do not edit by hand: run the command again. -->"
    tables = case_tables(text, HEADER, RULE)
    assert len(tables) == len(CASES)
    for (head, rows), (train, test, partition) in zip(tables, CASES):
        assert head.startswith(f"### {train}") and f"partition {partition}" in head
        assert [r[0] for r in rows] == list(ALGORITHMS)  # a new algorithm is missing until the doc is rewritten
        assert all(len(r) == len(cells(HEADER)) for r in rows)


def test_gds_row_is_a_dense_numpy_gd_at_every_step_of_the_grid():
    """GD's default (Barzilai–Borwein steps from a first step h): its grid moves the first step."""
    ds = build(DataSpec(source=str(DATA / "heart_scale"), nodes=5, seed=0))
    problem = Problem(ds, "logistic", None)
    X, y, lam = ds.X.toarray(), ds.y, problem.lam
    f_star, T = logistic_f_star(X, y, lam), 12
    r = grid_row(problem, f_star, "gd", iterations=T)
    assert r.param == "stepsize" and r.seeds == 1  # GD is deterministic: one seed
    L = problem.smoothness
    assert r.default == pytest.approx(1 / L, rel=1e-12)
    dense = {k: logistic_f(X, y, lam, dense_bb_gd(X, y, lam, 2.0 ** k / L, T)) - f_star
             for k in range(-SPAN, SPAN + 1)}
    assert r.default_score == pytest.approx(dense[0], rel=1e-5, abs=1e-10)
    assert r.best_k is not None and r.best_score == pytest.approx(dense[r.best_k], rel=1e-5, abs=1e-10)
    assert r.best_score == pytest.approx(min(dense.values()), rel=1e-5, abs=1e-10)  # none diverges: monotone
    assert r.ratio == pytest.approx(dense[0] / r.best_score, rel=1e-5)
    row_cells = cells(format_row(r))
    assert row_cells[0] == "gd" and row_cells[1] == f"stepsize = {1 / L:.4g}" and row_cells[6] == "1"
    assert math.isclose(float(row_cells[5].split()[0]), r.ratio, rel_tol=5e-3)
