"""``python -m fedviz personalise`` as a user runs it (issue 23's acceptance on google-plus-small)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import DATA


def fedviz(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "fedviz", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def test_google_plus_small_prints_majority_global_local_and_ditto_and_the_two_identities():
    from fedviz.data.baselines import node_majority_test_error
    from fedviz.data.presets import make_preset
    from fedviz.problems.objective import Problem
    from fedviz.problems.optimum import solve

    r = fedviz("personalise", "preset:google-plus-small", "--lambdas", "0,0.01,1,inf")
    assert r.returncode == 0, r.stderr
    rows = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^(per-node majority|global model|Local|Ditto|fine-tuned|APFL mixture)\b.*?((?:\s+\S+%){6})\s*$",
                     line)
        if m:
            rows[m.group(1)] = [float(x[:-1]) / 100 for x in m.group(2).split()]
    assert set(rows) == {"per-node majority", "global model", "Local", "Ditto", "fine-tuned", "APFL mixture"}
    # Independent of the personal package: the data layer's baseline and the optimum's own test error
    # (every test row of the preset belongs to a node, so the pooled figures are the whole test set's).
    ds = make_preset("google-plus-small")
    assert (ds.test_nodes >= 0).all()
    assert rows["per-node majority"][0] == pytest.approx(node_majority_test_error(ds), abs=5e-5)
    assert rows["global model"][0] == pytest.approx(solve(Problem(ds, "logistic")).test_error, abs=5e-5)
    # The paper's point, measured: per-node models beat the one global model on the pooled error.
    assert rows["Local"][0] < rows["global model"][0] and rows["Ditto"][0] < rows["global model"][0]
    m = re.search(r"objectives F_k differ by at most (\S+); at λ_D = (\S+), Ditto and the global model by at most "
                  r"(\S+)\.", r.stdout)
    assert m, r.stdout
    assert float(m.group(1)) <= 1e-8 and float(m.group(3)) <= 1e-8
    # The λ path marks the λ_D whose worst-10% mean is lowest.
    path = {}
    for line in r.stdout.splitlines():
        p = re.match(r"^(0|0\.01|1|∞)\s+(\S+)%\s+(\S+)%\s+(\S+)%", line)
        if p:
            path[p.group(1)] = float(p.group(4))
    assert len(path) == 4
    best = min(path, key=path.get)
    assert re.search(rf"^{re.escape(best)}\s.*← best for the worst 10%$", r.stdout, re.M)
    assert f"Ditto (λ_D = {best})" in r.stdout


def test_json_carries_every_nodes_errors_and_their_summaries():
    r = fedviz("personalise", DATA / "heart_scale", "--partition", "iid", "--nodes", "6", "--lambdas", "0,0.1,inf",
               "--finetune-steps", "3", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["methods"] == ["majority", "global", "local", "finetune", "ditto", "apfl"]
    for m in out["methods"]:
        e = np.array([np.nan if v is None else v for v in out["errors"][m]])
        assert e.shape == (6,)
        assert out["summaries"][m]["mean"] == pytest.approx(np.nanmean(e))
        assert out["summaries"][m]["min"] == pytest.approx(np.nanmin(e))
    assert out["lambdas"] == [0.0, 0.1, "inf"]
    assert out["config"]["finetune_steps"] == 3


def test_softmax_data_take_the_same_command():
    r = fedviz("personalise", DATA / "dna.scale", "--partition", "iid", "--nodes", "4", "--lambdas", "0,1,inf",
               "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["summaries"]["local"]["pooled"] is not None and out["checks"]["ditto0_minus_local"] <= 1e-8


@pytest.mark.parametrize("args, flag, allowed", [
    (["--finetune-steps", "-1"], "--finetune-steps", "integer in [0, 100000]"),
    (["--apfl-alpha", "1.5"], "--apfl-alpha", "[0, 1]"),
    (["--lambdas", "0,x"], "--lambdas", "comma-separated numbers ≥ 0"),
    (["--finetune-step", "0"], "--finetune-step", "> 0"),
])
def test_bad_options_exit_2_naming_the_option_and_its_range(args, flag, allowed):
    r = fedviz("personalise", "preset:google-plus-small?nodes=20", *args)
    assert r.returncode == 2
    assert r.stdout == ""
    assert flag in r.stderr and allowed in r.stderr and "Traceback" not in r.stderr


def test_bench_personal_times_local_against_a_gradient_pass():
    r = fedviz("bench", "--personal", "--scale", "small", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["nodes"] == 231 and out["finite"]
    assert out["residual"] <= 1e-11  # every node solved to the documented tolerance
    assert out["ratio_to_gradient_pass"] == pytest.approx(out["local_seconds"] / out["gradient_pass_seconds"])
    assert out["cpu_ratio_to_gradient_pass"] == pytest.approx(out["local_cpu_seconds"] / out["gradient_pass_cpu_seconds"])
    assert 0 < out["peak_memory_gb"] < 100


def test_help_names_every_option_without_markup():
    r = fedviz("personalise", "--help")
    assert r.returncode == 0
    for flag in ("--lambdas", "--finetune-steps", "--finetune-step", "--finetune-batch", "--apfl-alpha",
                 "--ditto-lambda", "--finetune-seed", "--json"):
        assert flag in r.stdout
    for mark in ("**", "`", ":material/"):
        assert mark not in r.stdout
