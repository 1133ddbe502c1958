"""GD against a dense reference, and the iteration loop's records and end states."""

import numpy as np
import pytest

from problems import dense_bb_gd_path, sparse_problem
from fedviz.algorithms import ALGORITHMS, get_algorithm
from fedviz.algorithms.base import Algorithm, Param
from fedviz.errors import ParameterError
from fedviz.problems.optimum import solve
from fedviz.runner import FIELDS, iterate


def _problem(loss="logistic", n=300, d=25, K=6, lam=None, seed=0, noniid=True):
    """A small sparse problem (:func:`problems.sparse_problem`, this module's sizes; λ = 1/n by default)."""
    return sparse_problem(loss, n=n, d=d, K=K, lam=lam, seed=seed, density=0.2,
                          partition="noniid" if noniid else "iid")


def test_gd_matches_a_dense_reference():
    p = _problem()
    Xd, y, lam, n = p.X.toarray(), p.y, p.lam, p.n
    h = 1.0 / p.smoothness
    w = np.zeros(p.d)
    algo = get_algorithm("gd")(p, steps="fixed")
    for _ in range(5):
        g = Xd.T @ (-y / (1 + np.exp(y * (Xd @ w)))) / n + lam * w
        w = w - h * g
        algo.step()
        np.testing.assert_allclose(algo.w, w, rtol=1e-12, atol=1e-15)
    assert algo.rounds == 5 and algo.grad_evals == 5 * n and algo.vectors_up == 5 * p.data.n_nodes


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_the_default_bb_steps_match_a_dense_reference(loss):
    """The default (``steps='bb'``, module docstring of fedviz.algorithms.gd): the model after each
    iteration is the last accepted point of the dense method (tests/problems.py), one round of n example gradients
    each; a dropped point is counted in ``rejected``."""
    p = _problem(loss)
    Xd, y, lam, n = p.X.toarray(), p.y, p.lam, p.n

    def squared(w):
        r = Xd @ w - y
        return 0.5 * np.mean(r * r) + lam / 2 * w @ w, Xd.T @ r / n + lam * w
    # 64/L: a trial rises, and the safeguard's other branch runs
    ref = dense_bb_gd_path(Xd, y, lam, 64.0 / p.smoothness, 12, None if loss == "logistic" else squared)
    algo = get_algorithm("gd")(p, stepsize=64.0 / p.smoothness)
    for k, w in enumerate(ref, 1):
        algo.step()
        np.testing.assert_allclose(algo.w, w, rtol=1e-10, atol=1e-14 * np.abs(w).max())
    assert algo.rounds == 12 and algo.grad_evals == 12 * p.n
    assert algo.rejected >= 1  # the test reaches the safeguard's other branch


def test_the_default_s_curve_is_what_the_chart_note_says():
    """fedviz.learn.chart_notes' GD note: iteration 1 is flat, the curve never rises, and a later flat step
    is a dropped one (the model stays the accepted point)."""
    p = _problem()
    recs = list(iterate(p, "gd", iterations=20, hyper={"stepsize": 64.0 / p.smoothness}))
    f = np.array([r.objective for r in recs])
    assert f[1] == f[0] and np.all(np.diff(f) <= 0)
    algo = get_algorithm("gd")(p, stepsize=64.0 / p.smoothness)
    flat = 0
    for _ in range(20):
        before, dropped = algo.w, algo.rejected
        algo.step()
        flat += algo.rejected > dropped
        assert (algo.rejected > dropped) == (algo.iteration > 1 and algo.w is before)
    assert flat >= 1


def test_the_bb_step_lies_between_one_over_l_and_one_over_lambda():
    """sᵀy/yᵀy ∈ [1/L, 1/λ] for an L-smooth λ-strongly convex f (y = H̄ s with λI ⪯ H̄ ⪯ LI):
    the rule reads a curvature the problem can have, and the default never diverges."""
    p = _problem(lam=1e-2)
    algo = get_algorithm("gd")(p)
    steps = []
    for _ in range(30):
        algo.step()
        steps.append(algo.h)
    steps = np.array(steps)
    L = p.smoothness
    assert np.all(steps <= 1 / p.lam * (1 + 1e-12)) and np.all(steps >= 1 / L * (1 - 1e-12) / 2 ** algo.rejected)
    assert steps.max() > 1.5 / L  # not 1/L throughout: it adapts


@pytest.mark.parametrize("loss", ["logistic", "squared"])
@pytest.mark.parametrize("noniid", [False, True])
def test_gd_converges_with_default_stepsize(loss, noniid):
    p = _problem(loss, noniid=noniid, lam=1e-2)
    f_star = solve(p).objective
    budget = 2000  # κ = L/λ is at most a few hundred here, so 1/L steps need ~κ log(1/ε) iterations
    last = list(iterate(p, "gd", iterations=budget, f_star=f_star))[-1]
    assert last.status == "done" and last.suboptimality <= 1e-6


def test_gd_stays_at_the_optimum():
    """Property (A) of Section 3.1."""
    p = _problem()
    opt = solve(p, gtol=1e-14)  # w* to machine precision, so 'stays' means 'moves < 1e-10'
    algo = get_algorithm("gd")(p, w0=opt.w)
    for _ in range(10):
        algo.step()
    assert np.linalg.norm(algo.w - opt.w) <= 1e-10


def test_records_have_the_documented_fields_and_start_at_iteration_zero():
    p = _problem()
    f_star = solve(p).objective
    recs = list(iterate(p, "gd", iterations=3, f_star=f_star))
    assert [r.iteration for r in recs] == [0, 1, 2, 3]
    assert [r.status for r in recs] == ["running"] * 3 + ["done"]
    assert recs[0].objective == pytest.approx(np.log(2))  # w0 = 0
    assert recs[0].rounds == 0 and recs[-1].rounds == 3 and recs[-1].passes == 3.0
    assert all(r.suboptimality == pytest.approx(r.objective - f_star) for r in recs)
    assert {"algorithm", "iteration", "objective", "suboptimality", "test_error", "rounds", "seconds",
            "status"} <= set(FIELDS)
    # Metrics are those of the current iterate, not of the previous one.
    algo = get_algorithm("gd")(p)
    algo.step()
    assert recs[1].objective == pytest.approx(p.value(algo.w), rel=1e-14)
    assert recs[1].grad_norm == pytest.approx(np.linalg.norm(p.grad(algo.w)), rel=1e-12)


def test_same_seed_same_iterates():
    p = _problem()
    a = [r.objective for r in iterate(p, "gd", iterations=4, seed=3)]
    b = [r.objective for r in iterate(p, "gd", iterations=4, seed=3)]
    assert a == b


def test_divergence_ends_the_run_and_names_the_parameter():
    p = _problem()
    recs = list(iterate(p, "gd", iterations=50, hyper={"stepsize": 1e6, "steps": "fixed"}))
    assert recs[-1].status == "diverged"
    assert "lower stepsize" in recs[-1].message
    assert len(recs) < 51


class _Exploding(Algorithm):
    name = "exploding"
    title = "Exploding"
    divergence_hint = ("gain", "lower")
    params = (Param("gain", "float", 10.0, "multiplies w", low=0),)

    def _step(self):
        self.w = (self.w + 1.0) * np.float64(1e308) * self.hp["gain"]


class _Broken(Algorithm):
    name = "broken"
    title = "Broken"

    def _step(self):
        raise RuntimeError("kaput")


class _Slow(Algorithm):
    name = "slow"
    title = "Slow"

    def _step(self):
        self.check_stop()
        self.w = self.w + 0.0


def test_non_finite_iterates_are_diverged_not_raised():
    recs = list(iterate(_problem(), _Exploding, iterations=5))
    assert recs[-1].status == "diverged" and "lower gain (now 10)" in recs[-1].message


def test_an_exception_inside_a_step_is_a_failed_record():
    recs = list(iterate(_problem(), _Broken, iterations=5))
    assert recs[-1].status == "failed" and "kaput" in recs[-1].message


def test_stop_keeps_completed_iterations():
    calls = iter(range(100))
    recs = list(iterate(_problem(), _Slow, iterations=50, stop=lambda: next(calls) >= 3))
    assert recs[-1].status == "stopped"
    assert recs[-1].iteration >= 1 and recs[-1].iteration < 50


def test_bad_hyperparameters_are_refused_before_the_run():
    with pytest.raises(ParameterError, match=r"gd\.stepsize=-1\.0.*> 0"):
        next(iterate(_problem(), "gd", iterations=5, hyper={"stepsize": -1.0}))
    with pytest.raises(ParameterError, match=r"gd\.step_size.*known hyperparameter: stepsize"):
        next(iterate(_problem(), "gd", iterations=5, hyper={"step_size": 1.0}))


def test_w_is_read_only_so_caches_cannot_go_stale():
    algo = get_algorithm("gd")(_problem())
    algo.step()
    with pytest.raises(ValueError):
        algo.w += 1.0


def test_registry_entries_are_complete():
    for name, cls in ALGORITHMS.items():
        assert cls.name == name and cls.title and cls.reference
        for p in cls.params:
            assert p.help and p.kind in ("float", "int", "bool", "choice")
            if p.default is not None:
                assert p.validate(p.default, name) == p.default


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_personalised_is_whether_the_algorithm_keeps_a_model_per_node(name, monkeypatch):
    """The class attribute the tests' lists read (which algorithms Stop at paper scale skips, which
    golden figures predate issue 23) against the behaviour: a personalised algorithm returns K
    models after a step and is held to the per-node budget; any other returns None."""
    from fedviz.algorithms import ditto

    cls = ALGORITHMS[name]
    pb = sparse_problem(cls.losses[0], n=60, d=8, K=3, lam=0.1, density=0.5, seed=2)
    algo = cls(pb)
    algo.step()
    models = algo.personal_models()
    if not cls.personalised:
        assert models is None
        return
    assert models.shape == (pb.data.n_nodes, pb.size) and np.isfinite(models).all()
    monkeypatch.setattr(ditto, "PERSONAL_VALUES", pb.data.n_nodes * pb.size - 1)
    with pytest.raises(ParameterError, match=rf"{name}\.personal_models"):
        cls(pb)


def test_the_registry_has_personalised_algorithms_and_others():
    """So the lists derived from ``personalised`` are not empty by a slip of the attribute."""
    assert {cls.personalised for cls in ALGORITHMS.values()} == {True, False}
