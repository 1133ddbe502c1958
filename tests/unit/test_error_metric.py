"""Test error is an error rate on ±1 labels for every loss (issue 19, point 4): the share of test
rows with sign(wᵀx) ≠ y, checked against a dense NumPy computation; a mean squared error only on
real-valued targets, and then labelled MSE in the chart, its hover and the CLI."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from fedviz.algorithms import ALGORITHMS
from fedviz.data.build import DataSpec, build
from fedviz.data.dataset import FederatedDataset
from fedviz import plots
from fedviz.problems.objective import Problem
from fedviz.problems.optimum import solve

ROOT = Path(__file__).resolve().parents[2]


def _sign_error(X, w, y):
    """The oracle: dense margins, a margin of exactly 0 predicting −1 (scikit-learn's rule)."""
    z = np.asarray(X.todense()) @ w
    return float(np.mean(np.where(z > 0, 1.0, -1.0) != y))


def _data(regression: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    n, m, d = 120, 60, 6
    X = rng.normal(size=(n + m, d)) * (rng.random((n + m, d)) < 0.7)
    w_true = rng.normal(size=d)
    y = X @ w_true + 0.3 * rng.normal(size=n + m)
    if not regression:
        y = np.where(y > 0, 1.0, -1.0)
    return FederatedDataset.from_assignment(sp.csr_matrix(X[:n]), y[:n], np.arange(n) % 4,
                                            X_test=sp.csr_matrix(X[n:]), y_test=y[n:])


@pytest.mark.parametrize("loss", ["logistic", "squared", "smoothed-hinge"])
def test_on_plus_minus_one_labels_every_loss_reports_the_sign_error(loss):
    ds = _data(regression=False)
    problem = Problem(ds, loss)
    assert problem.error_metric == "error"
    rng = np.random.default_rng(1)
    for w in (rng.normal(size=problem.d), solve(problem).w):
        assert problem.test_error(w) == _sign_error(ds.X_test, w, ds.y_test)
        assert problem.train_error(w) == _sign_error(ds.X, w, ds.y)
        _, _, train = problem.value_grad_error(w)      # the loop's training error, fused with f
        assert train == _sign_error(ds.X, w, ds.y)


def test_on_real_targets_the_squared_loss_reports_the_mean_squared_error():
    ds = _data(regression=True)
    problem = Problem(ds, "squared")
    assert problem.error_metric == "mse"
    w = np.random.default_rng(2).normal(size=problem.d)
    dense_test = np.asarray(ds.X_test.todense())
    assert problem.test_error(w) == pytest.approx(np.mean((dense_test @ w - ds.y_test) ** 2), rel=1e-12)
    assert problem.train_error(w) == pytest.approx(np.mean((np.asarray(ds.X.todense()) @ w - ds.y) ** 2),
                                                   rel=1e-12)


def test_ridge_regression_on_google_plus_small_reports_its_sign_error_at_the_optimum():
    """The issue's case: the squared loss's 'test error' at w* was its MSE (0.74), printed beside the
    classification baselines; its sign error is what a classifier's test error means."""
    problem = Problem(build(DataSpec(source="preset:google-plus-small")), "squared")
    w = solve(problem).w
    ds = problem.data
    err = problem.test_error(w)
    assert err == _sign_error(ds.X_test, w, ds.y_test)
    mse = float(np.mean((ds.X_test @ w - ds.y_test) ** 2))
    assert 0.2 < err < 0.35 and mse > 0.5                # an error rate, not the MSE


def test_the_chart_is_keyed_by_the_metric_and_the_loss():
    runs = {"GD": [{"algorithm": "gd", "iteration": t, "rounds": t, "vectors_up": t, "vectors_down": t,
                    "seconds": 0.1 * t, "suboptimality": 0.5 ** t, "test_error": 0.3 - 0.01 * t}
                   for t in range(5)]}
    err = plots.test_error_figure(runs)
    assert err.layout.title.text == "Test error" and err.layout.yaxis.title.text == "test error"
    assert err.layout.yaxis.tickformat == ".1%" and "%{y:.2%}" in err.data[0].hovertemplate
    ridge = plots.test_error_figure(runs, loss="squared")
    assert ridge.layout.title.text == "Test error: sign(wᵀx) ≠ y" and ridge.layout.yaxis.tickformat == ".1%"
    mse = plots.test_error_figure(runs, regression=True, loss="squared")
    assert mse.layout.title.text.startswith("Test mean squared error")
    assert mse.layout.yaxis.title.text == "test MSE" and mse.layout.yaxis.tickformat is None
    assert "%{y:.4g}" in mse.data[0].hovertemplate and "%" not in mse.data[0].hovertemplate.replace("%{", "")


def _cli(*args):
    out = subprocess.run([sys.executable, "-m", "fedviz", "run", *args], cwd=ROOT, capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_cli_prints_a_percentage_on_plus_minus_one_labels_and_an_mse_on_real_targets(tmp_path):
    """GD for 3 iterations on google-plus-small with the squared loss: the printed test error is the
    sign error of GD's third iterate (stepped here, the oracle computed densely)."""
    text = _cli("preset:google-plus-small", "--loss", "squared", "--algorithms", "gd", "--iterations", "3")
    problem = Problem(build(DataSpec(source="preset:google-plus-small")), "squared")
    gd = ALGORITHMS["gd"](problem)
    for _ in range(3):
        gd.step()
    err = _sign_error(problem.data.X_test, gd.w, problem.data.y_test)
    assert f"test err {100 * err:6.2f}%" in text.splitlines()[-1]
    # Real targets: a LIBSVM file of regression rows, the MSE printed as such.
    rng = np.random.default_rng(3)
    rows = [f"{rng.normal() * 3:.4f} 1:{rng.normal():.4f} 2:{rng.normal():.4f}" for _ in range(40)]
    (tmp_path / "reg.svm").write_text("\n".join(rows) + "\n")
    text = _cli(str(tmp_path / "reg.svm"), "--loss", "squared", "--algorithms", "gd", "--iterations", "2",
                "--out", str(tmp_path / "r.json"))
    last = json.loads((tmp_path / "r.json").read_text())[-1]
    assert f"test MSE {last['test_error']:9.4g}" in text.splitlines()[-1] and "%" not in text.splitlines()[-1]
