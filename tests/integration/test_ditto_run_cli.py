"""``fedviz run --algorithms ditto`` measures the run against its exact target (issue 23, point 3): the
records carry the personal fields, the distance to v_k(λ_D) among them, and the printed lines say them."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from fedviz.algorithms.ditto import Ditto
from fedviz.data.build import DataSpec, build
from fedviz.problems.objective import Problem
from fedviz.problems.optimum import solve
from fedviz.personal.target import exact_target


def fedviz(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "fedviz", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def test_run_ditto_records_and_prints_the_distance_to_its_exact_models():
    data = "preset:google-plus-small?nodes=12&words_per_example=20"
    r = fedviz("run", data, "--algorithms", "ditto,fedavg", "--iterations", "3", "--set", "ditto.ditto_lambda=0.5",
               "--json")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    ditto = [row for row in rows if row["algorithm"] == "ditto"]
    fedavg = [row for row in rows if row["algorithm"] == "fedavg"]
    # At iteration 0 every v_k is w0 = 0: the distance is the root mean square of ‖v_k(λ_D)‖ (the
    # target itself is checked against SciPy in tests/unit/test_ditto_run.py).
    pb = Problem(build(DataSpec(data)))
    target = exact_target(pb, Ditto, {"ditto_lambda": 0.5}, solve(pb).w)
    assert ditto[0]["personal_distance"] == pytest.approx(np.sqrt(np.mean(np.sum(target ** 2, axis=1))), rel=1e-9)
    assert all(row["personal_test_error"] is not None for row in ditto)
    assert all(row["personal_distance"] is None for row in fedavg)   # NaN: one model, no personal ones
    text = fedviz("run", data, "--algorithms", "ditto", "--iterations", "1", "--set", "ditto.ditto_lambda=0.5").stdout
    last = text.strip().splitlines()[-1]
    assert "personal err" in last and f"dist to v_k(λ_D) {ditto[1]['personal_distance']:9.3e}" in last
    assert not math.isnan(ditto[1]["personal_distance"])
