"""The benchmark command runs and prints sane JSON at small scale (no timing is asserted)."""

import json
import math
import subprocess
import sys


def test_bench_small_prints_consistent_json():
    r = subprocess.run([sys.executable, "-m", "fedviz", "bench", "--scale", "small", "--json", "--iterations", "2",
                        "--sklearn-solvers", "newton-cg", "--no-experiment"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["scale"] == "small" and 40_000 < out["n"] < 60_000 and out["d"] == 20_002
    for key in ("generate_seconds", "stats_seconds", "gradient_pass_seconds", "saga_epoch_seconds",
                "optimum_seconds", "first_record_seconds_small", "peak_memory_gb"):
        assert math.isfinite(out[key]) and out[key] > 0, key
    assert out["optimum_grad_norm"] <= 1e-10
    assert out["sklearn"]["newton-cg"]["grad_norm"] < 1e-6
    assert set(out["algorithms"]) >= {"FSVRG", "GD"}
    for row in out["algorithms"].values():
        assert math.isclose(row["ratio_to_gradient_pass"],
                            row["seconds_per_iteration"] / out["gradient_pass_seconds"], rel_tol=1e-9)
        assert math.isclose(row["ratio_to_saga_epoch"],
                            row["seconds_per_iteration"] / out["saga_epoch_seconds"], rel_tol=1e-9)
    assert set(out["stop_latency_seconds"]) == {"fsvrg", "gd", "cocoa-plus"}
