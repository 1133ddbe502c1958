"""``fedviz bench --concurrent`` (fedviz.bench.concurrency): the figures it aggregates and prints, on benches
whose seconds are given here (the real command starts a dozen benches: a minute; no time is asserted)."""

import importlib

import pytest

# The module (fedviz.bench exports its function of the same name).
cc = importlib.import_module("fedviz.bench.concurrency")


def test_two_at_once_is_the_mean_of_the_pair_and_rounds_give_the_median(monkeypatch):
    # Seconds per iteration each call's processes report, in the order the rounds ask for them.
    given = iter([
        [0.10], [0.30, 0.50], [0.11], [0.12, 0.14],   # round 1: spin alone, spin two, passive alone, passive two
        [0.20], [0.60, 0.80], [0.13], [0.16, 0.18],   # round 2
        [0.30], [0.90, 1.10], [0.12], [0.14, 0.12],   # round 3
    ])
    calls = []

    def fake(count, policy, iterations):
        calls.append((count, dict(policy), iterations))
        secs = next(given)
        assert len(secs) == count
        return [{"algorithms": {"FSVRG": {"seconds_per_iteration": s}}} for s in secs]

    monkeypatch.setattr(cc, "_bench_processes", fake)
    out = cc.concurrency(rounds=3, iterations=4)
    assert [c[0] for c in calls] == [1, 2, 1, 2] * 3 and {c[2] for c in calls} == {4}
    assert calls[0][1] == {"GOMP_SPINCOUNT": "300000"} and calls[2][1] == {"OMP_WAIT_POLICY": "PASSIVE"}
    s = out["seconds"]
    assert s["spin"]["alone"]["FSVRG"] == pytest.approx(0.20)    # median of 0.10, 0.20, 0.30
    assert s["spin"]["two"]["FSVRG"] == pytest.approx(0.70)      # median of the pairs' means 0.4, 0.7, 1.0
    assert s["passive"]["alone"]["FSVRG"] == pytest.approx(0.12)
    assert s["passive"]["two"]["FSVRG"] == pytest.approx(0.13)   # median of 0.13, 0.17, 0.13
    table = cc.format_concurrency(out)
    row = next(line for line in table.splitlines() if line.startswith("| FSVRG"))
    assert row.split("|")[5:8] == [" 0.1300 ", " 0.19 ", " 0.60 "]  # 0.13/0.70 and 0.12/0.20


def test_a_failed_bench_says_so_with_its_message(monkeypatch):
    class Failed:
        returncode = 3

        def __init__(self, *a, **k):
            pass

        def communicate(self):
            return "", "Traceback ...\nMemoryError: no room"

    monkeypatch.setattr(cc.subprocess, "Popen", Failed)
    with pytest.raises(RuntimeError, match=r"(?s)exit 3\).*MemoryError: no room"):
        cc._bench_processes(1, cc.POLICIES["passive"], 1)
