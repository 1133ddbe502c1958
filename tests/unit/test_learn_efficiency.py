"""The efficiency paradigm (Section 2.3.1, eq. (3)): I(ε), T_A(ε), TIME(c), the crossovers and the
winners, each against a plain oracle (a loop over the records or the rounds, SciPy's root finder, a
brute-force argmin over a dense grid of c, what a round of GD or CoCoA+ costs a node by the paper's
Algorithms 1 and 3), and the history reader against a real RunStore.

The synthetic runs below do one example of work per microsecond of their ``seconds``, so that their
T_A (the work, at the runs' average cost of an example) is their clock's."""

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from fedviz.errors import ParameterError
from fedviz.learn.efficiency import (crossover, default_epsilon, efficiency, epsilon_choices, example_seconds,
                                     group_runs, history_groups, node_work, paradigm, seconds_text,
                                     suggested_epsilon)
from fedviz.plots.learn_efficiency import efficiency_figure
from fedviz.runner.loop import IterationRecord
from fedviz.runner.history.store import RunStore


def cols_of(rounds, seconds, sub):
    """Record columns of a run on one node whose work is 10⁶ examples a second of its clock."""
    rounds, seconds, sub = np.asarray(rounds), np.asarray(seconds, float), np.asarray(sub, float)
    return {"iteration": np.arange(rounds.size), "rounds": rounds, "seconds": seconds, "suboptimality": sub,
            "vectors_up": rounds, "vectors_down": rounds, "grad_evals": seconds * 1e6}


def random_run(rng, iterations=40, rounds_per_it=1, cost=0.01):
    """A run whose f − f* falls geometrically (with noise), ``rounds_per_it`` rounds and about
    ``cost`` seconds of computation per round."""
    rounds = np.arange(iterations + 1) * rounds_per_it
    seconds = np.r_[0.0, np.cumsum(rng.uniform(0.5, 1.5, iterations) * cost * rounds_per_it)]
    rate = rng.uniform(0.6, 0.95)
    sub = 0.7 * rate ** np.arange(iterations + 1) * np.exp(0.05 * rng.normal(size=iterations + 1))
    return cols_of(rounds, seconds, sub)


def oracle(cols, eps):
    """(I, seconds) at the first record with f − f* ≤ ε, by a plain loop; None if never."""
    for r, s, f in zip(cols["rounds"], cols["seconds"], cols["suboptimality"]):
        if f <= eps:
            return int(r), float(s)
    return None


def test_I_and_T_A_are_the_rounds_and_seconds_per_round_at_the_first_record_below_epsilon():
    rng = np.random.default_rng(0)
    for trial in range(20):
        cols = random_run(rng, rounds_per_it=1 + trial % 2)
        for eps in (0.5, 0.1, 1e-2, 1e-3, 1e-9):
            e = efficiency("A", cols, eps)
            want = oracle(cols, eps)
            if want is None:
                assert not e.reached and e.time(1.0) == math.inf
                continue
            I, s = want
            assert e.reached and e.rounds == I and e.seconds == pytest.approx(s, rel=1e-12, abs=1e-300)
            assert e.compute == pytest.approx(s / I) if I else math.isnan(e.compute)
            for c in (0.0, 1e-3, 2.5, 100.0):
                assert e.time(c) == pytest.approx(I * (c + s / I) if I else s, rel=1e-12)  # eq. (3)


def test_a_nodes_work_is_its_share_of_each_round_by_a_loop_over_the_rounds():
    """Iterations of one or two rounds, a random number of nodes taking part in each iteration's rounds, each
    doing a random amount of work in a round: the average participating node's work, summed over the
    rounds, is what node_work reads off the records' totals (grad_evals, vectors_up, rounds)."""
    rng = np.random.default_rng(5)
    for _ in range(50):
        rounds, vectors, evals, oracle_work = [0], [0], [0.0], [0.0]   # the start's record
        for _ in range(rng.integers(1, 30)):                           # one record per iteration
            m = int(rng.integers(1, 40))                               # nodes taking part in its rounds
            r, v, g, w = rounds[-1], vectors[-1], evals[-1], oracle_work[-1]
            for _ in range(int(rng.integers(1, 3))):                   # one or two rounds
                each = rng.integers(1, 500, size=m).astype(float)      # every node's examples this round
                r, v, g, w = r + 1, v + m, g + each.sum(), w + each.mean()
            rounds.append(r), vectors.append(v), evals.append(g), oracle_work.append(w)
        cols = {"rounds": np.array(rounds), "vectors_up": np.array(vectors), "grad_evals": np.array(evals)}
        np.testing.assert_allclose(node_work(cols), oracle_work, rtol=1e-12)
        np.testing.assert_array_equal(node_work(cols, central=True), evals)  # one machine: all the work


@pytest.mark.parametrize("algorithm, hyper, passes", [("gd", {}, 1), ("cocoa-plus", {"local_passes": 3}, 3)])
def test_a_round_costs_a_node_its_own_examples_as_many_times_as_it_passes_over_them(algorithm, hyper, passes):
    """Algorithm 1 (GD): a round is every node's gradient over its own n_k examples; Algorithm 3 (CoCoA+)
    with H = passes·n_k local steps: passes × n_k.  The average node's share of a round is then
    passes × n/K, whatever the sizes, and node_work reads it off a real run's records."""
    from fedviz.runner.loop import iterate
    from problems import sparse_problem

    problem = sparse_problem(n=600, d=40, K=7, lam=1e-2, density=0.2, partition="iid")
    recs = list(iterate(problem, algorithm, iterations=5, hyper=hyper))
    cols = {f: np.array([getattr(r, f) for r in recs], dtype=float) for f in ("rounds", "vectors_up", "grad_evals")}
    sizes = problem.data.node_sizes
    assert sizes.size == 7 and len(set(sizes)) > 1
    np.testing.assert_allclose(node_work(cols), cols["rounds"] * passes * sizes.sum() / sizes.size, rtol=1e-12)


def test_example_seconds_is_every_runs_clock_over_every_runs_work():
    a = {"seconds": np.array([0.0, 1.0, 3.0]), "grad_evals": np.array([0, 10, 20])}
    b = {"seconds": np.array([0.0, 5.0]), "grad_evals": np.array([0, 80])}
    assert example_seconds({"a": a, "b": b}) == (3.0 + 5.0) / (20 + 80)
    assert math.isnan(example_seconds({"none": {"seconds": np.array([0.0]), "grad_evals": np.array([0])}}))
    # The order (who wins where) depends on the work alone; the cost of an example scales every crossover.
    cheap = cols_of(np.arange(101), np.arange(101) * 1e-3, np.r_[np.linspace(1, 0.02, 100), 0.009])
    dear = cols_of(np.arange(6), np.arange(6) * 0.1, [1, 0.5, 0.2, 0.1, 0.05, 0.009])
    base = paradigm({"cheap": cheap, "dear": dear}, 0.01, c_range=(1e-6, 1e6))
    slow = paradigm({"cheap": cheap, "dear": dear}, 0.01, c_range=(1e-6, 1e6), per_example=1e-6 * 7)
    assert [r.label for r in slow.regimes] == [r.label for r in base.regimes] == ["cheap", "dear"]
    assert slow.switches[0].c == pytest.approx(7 * base.switches[0].c, rel=1e-12)


def test_seconds_are_written_in_the_unit_that_reads_best():
    assert [seconds_text(s) for s in (3e-8, 1.2e-4, 0.5, 3.0, 4000.0, math.inf)] == [
        "30 ns", "120 µs", "500 ms", "3 s", "4,000 s", "∞"]


def test_a_nan_suboptimality_never_counts_as_reached():
    cols = cols_of([0, 1, 2, 3], [0, 1, 2, 3], [1.0, np.nan, 0.5, 0.05])
    assert efficiency("A", cols, 0.6).rounds == 2
    assert not efficiency("A", cols, 0.01).reached


def test_crossover_is_where_the_two_TIME_lines_meet():
    rng = np.random.default_rng(2)
    found = 0
    for _ in range(200):
        a = efficiency("a", random_run(rng, cost=rng.uniform(1e-3, 1e-1)), 0.05)
        b = efficiency("b", random_run(rng, rounds_per_it=2, cost=rng.uniform(1e-3, 1e-1)), 0.05)
        x = crossover(a, b)
        diff = lambda c: float(a.time(c) - b.time(c))  # noqa: E731
        if not (a.reached and b.reached) or a.rounds == b.rounds:
            assert x is None
            continue
        root_exists = diff(1e-12) * diff(1e9) < 0
        assert (x is not None) == root_exists
        if x is None:
            continue
        found += 1
        assert x.c == pytest.approx(brentq(diff, 1e-12, 1e9, xtol=1e-15, rtol=1e-14), rel=1e-9)
        assert x.time == pytest.approx(float(b.time(x.c)), rel=1e-12)
        below, above = x.c * 0.9, x.c * 1.1
        faster = lambda c: "a" if a.time(c) < b.time(c) else "b"  # noqa: E731
        assert (faster(below), faster(above)) == (x.faster_below, x.faster_above)
    assert found > 20  # the random runs do cross


def test_the_winners_are_the_lower_envelope_on_a_dense_grid():
    rng = np.random.default_rng(3)
    with_switch = 0
    for _ in range(60):
        runs = {f"run{i}": random_run(rng, rounds_per_it=1 + i % 2, cost=10 ** rng.uniform(-3, 0))
                for i in range(4)}
        eps = float(np.quantile([c["suboptimality"].min() for c in runs.values()], 0.75))
        p = paradigm(runs, eps, c_range=(1e-5, 1e4))
        # Regimes tile the range; each switch is a crossover of the two regimes it separates.
        assert p.regimes[0].c_from == 1e-5 and p.regimes[-1].c_to == 1e4
        for r, nxt, s in zip(p.regimes, p.regimes[1:], p.switches):
            assert r.c_to == nxt.c_from == s.c and r.label != nxt.label
            assert {s.faster_below, s.faster_above} == {r.label, nxt.label}
        with_switch += bool(p.switches)
        grid = np.geomspace(1e-5, 1e4, 2001)
        times = {label: np.asarray(efficiency(label, cols, eps).time(grid)) for label, cols in runs.items()}
        labels = list(times)
        brute = np.array(labels)[np.argmin(np.vstack([times[k] for k in labels]), axis=0)]
        switches = np.array([s.c for s in p.switches])
        for c, want in zip(grid, brute):
            if switches.size and np.min(np.abs(np.log(c / switches))) < 1e-9:
                continue
            assert p.winner(c) == want
            regime = next(r for r in p.regimes if r.c_from <= c <= r.c_to)
            assert regime.label == want
    assert with_switch > 5


def test_many_cheap_rounds_win_in_a_data_centre_and_few_dear_rounds_over_phones():
    """The paper's story, exactly: 100 rounds of 1 ms against 5 rounds of 100 ms meet where
    100 (c + 0.001) = 5 (c + 0.1), c = 0.4 / 95 s."""
    cheap = cols_of(np.arange(101), np.arange(101) * 1e-3, np.r_[np.linspace(1, 0.02, 100), 0.009])
    dear = cols_of(np.arange(6), np.arange(6) * 0.1, [1, 0.5, 0.2, 0.1, 0.05, 0.009])
    p = paradigm({"cheap": cheap, "dear": dear}, 0.01, c_range=(1e-4, 1e3))
    assert [r.label for r in p.regimes] == ["cheap", "dear"]
    assert p.switches[0].c == pytest.approx(0.4 / 95, rel=1e-12)
    assert "cheap is fastest below c = 4.21 ms, dear above" in p.describe()


def test_epsilon_choices_and_defaults():
    rng = np.random.default_rng(4)
    runs = {f"r{i}": random_run(rng) for i in range(3)}
    best = sorted(float(c["suboptimality"].min()) for c in runs.values())
    start = max(float(c["suboptimality"][0]) for c in runs.values())
    choices = epsilon_choices(runs)
    assert choices == sorted(choices) and choices[0] >= best[0] and choices[-1] < start
    eps = default_epsilon(runs)
    assert eps >= best[1] and sum(efficiency(k, c, eps).reached for k, c in runs.items()) >= 2
    assert suggested_epsilon(runs) in choices + [eps]
    with pytest.raises(ParameterError, match="epsilon"):
        paradigm(runs, 0.0)
    with pytest.raises(ParameterError, match="epsilon"):
        efficiency("x", runs["r0"], float("nan"))


def test_the_figure_draws_eq_3_for_every_run_that_reached_epsilon():
    cheap = cols_of(np.arange(101), np.arange(101) * 1e-3, np.r_[np.linspace(1, 0.02, 100), 0.009])
    dear = cols_of(np.arange(6), np.arange(6) * 0.1, [1, 0.5, 0.2, 0.1, 0.05, 0.009])
    never = cols_of(np.arange(3), [0, 1, 2], [1, 0.9, 0.8])
    p = paradigm({"cheap": cheap, "dear": dear, "never": never}, 0.01)
    fig = efficiency_figure(p)
    lines = [t for t in fig.data if t.mode == "lines+markers"]
    assert [t.name.split(":")[0] for t in lines] == ["cheap", "dear"]
    for t, (I, T) in zip(lines, [(100, 1e-3), (5, 0.1)]):
        x = np.asarray(t.x)
        np.testing.assert_allclose(np.asarray(t.y), I * (x + T), rtol=1e-12)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert [s.x0 for s in fig.layout.shapes if s.type == "line"] == [pytest.approx(0.4 / 95)]


def _record(algorithm, it, sub, seconds, rounds):
    return IterationRecord(algorithm=algorithm, iteration=it, objective=sub + 1, suboptimality=sub,
                           test_error=0.3, train_error=0.3, grad_norm=1.0, rounds=rounds, vectors_up=rounds,
                           vectors_down=rounds, grad_evals=it, passes=float(it), seconds=seconds, status="running")


def test_history_groups_keep_runs_started_together_on_one_problem_with_a_known_f_star():
    store = RunStore(":memory:")
    subs = [0.5, 0.2, 0.05, 0.01]

    def add(group, label, algorithm, *, f_star=1.0, status="done", fingerprint="fp", records=4):
        rid = store.create_run(label=label, algorithm=algorithm, group_id=group, f_star=f_star,
                               dataset_fingerprint=fingerprint, config={"iterations": 3})
        store.append_records(rid, [_record(algorithm, i, subs[i], 0.01 * i, 2 * i) for i in range(records)])
        store.finish_run(rid, status)
        return rid

    a = add("g1", "FSVRG", "fsvrg")
    b = add("g1", "GD", "gd")
    add("g2", "GD", "gd")                                 # alone: nothing to compare
    add("g3", "GD", "gd", f_star=None)                    # f* unknown
    add("g3", "FSVRG", "fsvrg", f_star=None)
    add("g4", "GD", "gd", fingerprint="x")                # two problems
    add("g4", "FSVRG", "fsvrg", fingerprint="y")
    add("g5", "GD", "gd")
    add("g5", "SCAFFOLD", "scaffold", records=1)          # the start only: one run left
    groups = history_groups(store)
    assert [g.group_id for g in groups] == ["g1"]
    g = groups[0]
    assert g.run_ids == (a, b) and g.labels == ("FSVRG", "GD") and g.algorithms == ("fsvrg", "gd")
    runs = group_runs(store, g)
    np.testing.assert_array_equal(runs["GD"]["rounds"], [0, 2, 4, 6])
    e = paradigm(runs, 0.05).entry("FSVRG")
    assert (e.rounds, e.iterations, e.seconds) == (4, 2, pytest.approx(0.02))


def test_a_centralised_run_is_measured_but_never_ranked():
    """Eq. (3) compares distributed methods (Section 2.3.1): SGD (centralised) is fastest by computation
    alone here, and still never the winner; its TIME is eq. (2)'s, the same at every c."""
    rng = np.random.default_rng(3)
    runs = {"FSVRG": random_run(rng, 20, 2, 0.05), "GD": random_run(rng, 60, 1, 0.001),
            "SGD (centralised)": cols_of(np.arange(5) * 100, np.arange(5) * 1e-6, [1, 0.1, 0.01, 1e-3, 1e-9])}
    algorithms = {"FSVRG": "fsvrg", "GD": "gd", "SGD (centralised)": "sgd"}
    eps = default_epsilon({k: v for k, v in runs.items() if k != "SGD (centralised)"})
    p = paradigm(runs, eps, algorithms=algorithms)
    sgd = p.entry("SGD (centralised)")
    assert sgd.central and sgd.reached and [e.label for e in p.references] == ["SGD (centralised)"]
    assert sgd.time(1e-4) == sgd.time(1e3) == sgd.seconds
    assert all(r.label != "SGD (centralised)" for r in p.regimes)
    assert all("SGD (centralised)" not in (x.faster_below, x.faster_above) for x in p.crossovers)
    # The ranking is the one without the reference, and the sentence says it is not ranked.
    alone = paradigm({k: runs[k] for k in ("FSVRG", "GD")}, eps, algorithms=algorithms)
    assert p.regimes == alone.regimes and p.switches == alone.switches
    assert p.describe().startswith(alone.describe())
    assert "SGD (centralised) is centralised, drawn for reference and not ranked" in p.describe()
    for c in np.geomspace(*p.c_range, 50):
        assert p.winner(c) == min(("FSVRG", "GD"), key=lambda k: p.entry(k).time(c))


def test_a_setup_s_group_is_found_by_its_settings_not_by_being_newest():
    from fedviz.learn.efficiency import DEFAULT_METHODS, page_setup, setup_group
    from fedviz.runner.config import RunConfig

    store = RunStore(":memory:")
    mine = RunConfig(algorithms=tuple((n, ()) for n in ("fsvrg", "gd")), iterations=3)
    other = RunConfig(algorithms=mine.algorithms, iterations=4)

    def add(group, config, extra=None):
        for label, algorithm in (("FSVRG", "fsvrg"), ("GD", "gd")):
            rid = store.create_run(label=label, algorithm=algorithm, group_id=group, f_star=1.0,
                                   dataset_fingerprint="fp", config={**config.as_json(), **(extra or {})})
            store.append_records(rid, [_record(algorithm, i, 0.5 / (i + 1), 0.01 * i, i) for i in range(3)])
            store.finish_run(rid, "done")

    add("mine-old", mine)
    add("mine", mine, {"tuning": "pilots: 3"})   # what a worker adds after the start does not count
    add("other", other)                          # newest, another setup
    groups = history_groups(store)
    assert [g.group_id for g in groups] == ["other", "mine", "mine-old"]
    assert setup_group(groups, mine).group_id == "mine"
    assert setup_group(groups, other).group_id == "other"
    assert setup_group(groups, RunConfig()) is None
    # The page's setup: the settings in force with two or more federated methods, else the default ones.
    assert page_setup(mine) == mine
    assert [n for n, _ in page_setup(RunConfig(algorithms=(("fsvrg", ()), ("sgd", ())))).algorithms] \
        == list(DEFAULT_METHODS)
