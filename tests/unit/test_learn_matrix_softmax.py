"""The properties matrix on softmax (issue 22, point 7): each case's rows in three classes (the −1 rows, the
+1 rows split by the sign of xᵀv), its optimum checked against a dense NumPy softmax objective, the curves'
start against f(0) = log 3, and the algorithms that refuse softmax shown as such with the registry's
sentence.  The logistic matrix is test_learn_matrix.py's."""

import numpy as np
import pytest
from scipy.special import logsumexp

from fedviz.algorithms import ALGORITHMS
from fedviz.learn import matrix as M

CONFIG = M.MatrixConfig(loss="softmax")
#: Every test reads the four softmax cases, whose Newton solves to ‖∇f‖ ≤ 1e-12 take ~5 s quiet, and the
#: matrix test measures GD and DANE on them (~5 s more): slow, in the full suite only.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cases():
    """Each property's softmax case, built once for the module and as the matrix builds its own: on one
    thread (on two contended threads the small solves cost many times more)."""
    with M.one_thread():
        return {p: M.case_problem(p, "softmax") for p in M.PROPERTIES}


@pytest.fixture
def matrix_reuses_the_cases(cases, monkeypatch):
    """The matrix's own calls of ``case_problem`` answered from ``cases``: the same function with the same
    arguments, deterministic (seeded data, a Newton solve: the same bits each time), so the same cases
    without solving each twice (seconds each)."""
    real = M.case_problem

    def case_problem(prop, loss="logistic", *, seed=0):
        return cases[prop] if (loss, seed) == ("softmax", 0) else real(prop, loss, seed=seed)

    monkeypatch.setattr(M, "case_problem", case_problem)


def _dense(problem, w):
    """f and ∇f of softmax regression written out: mean_i [logsumexp(x_iᵀW) − x_iᵀW_{y_i}] + λ/2‖W‖²."""
    X = problem.data.X.toarray()
    y = problem.data.y.astype(int)
    W = np.asarray(w).reshape(problem.d, 3)
    Z = X @ W
    P = np.exp(Z - logsumexp(Z, axis=1, keepdims=True))
    f = np.mean(logsumexp(Z, axis=1) - Z[np.arange(len(y)), y]) + 0.5 * problem.lam * np.sum(W * W)
    P[np.arange(len(y)), y] -= 1.0
    return f, (X.T @ P / len(y) + problem.lam * W).ravel()


def test_each_case_keeps_its_rows_and_labels_inside_three_classes(cases):
    from fedviz.data.presets import make_preset, parse_preset_spec

    for prop, case in cases.items():
        ds = case.problem.data
        assert ds.multiclass and case.problem.n_classes == 3
        name, overrides = parse_preset_spec(M.CASE_DATA[prop])
        raw = make_preset(name, **overrides)
        if prop == "B":
            raw = M.dominant_node_data(raw)
        np.testing.assert_array_equal(ds.offsets, raw.offsets)
        assert (ds.X != raw.X).nnz == 0
        np.testing.assert_array_equal(ds.y == 0, raw.y < 0)  # class 0 is exactly the −1 rows
        assert set(np.unique(ds.y[raw.y > 0])) <= {1.0, 2.0}
    # (D): every node holds the same rows, so the same classes.
    d = cases["D"].problem.data
    first = d.y[d.node_slice(0)]
    assert all(np.array_equal(d.y[d.node_slice(k)], first) for k in range(d.n_nodes))


def test_each_case_s_optimum_is_the_dense_softmax_optimum(cases):
    for case in cases.values():
        f, g = _dense(case.problem, case.w_star)
        assert f == pytest.approx(case.f_star, rel=1e-10)
        assert np.linalg.norm(g) <= 1e-9


def test_the_softmax_matrix_measures_those_that_take_it_and_shows_the_others_refusal(cases, matrix_reuses_the_cases):
    takes = [n for n, cls in ALGORITHMS.items() if cls.softmax_refusal() is None]
    refuses = [n for n in ALGORITHMS if n not in takes]
    m = M.properties_matrix(CONFIG, algorithms=["gd", "dane", *refuses])
    for cell in m.cells:
        why = ALGORITHMS[cell.algorithm].softmax_refusal()
        if why is not None:
            assert cell.status == "unsupported" and cell.text == "no softmax" and cell.detail == why + "."
        else:
            assert cell.status == "measured", (cell.algorithm, cell.prop, cell.detail)
            if cell.prop != "A":  # from w = 0: f(0) − f* = log 3 − f* (softmax's uniform start)
                assert cell.y[0] == pytest.approx(np.log(3) - cases[cell.prop].f_star, rel=1e-9)
    # DANE on identical nodes: every node's local problem is f itself, so its exact solve lands on w*.
    assert m.cell("dane", "D").has is True
