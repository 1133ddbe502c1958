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


def test_experiment_figure_is_present_and_self_consistent():
    """The experiment figure on tiny cells (the command runs it on ~1 s cells): every cell stored
    on each cluster with the serial run's records, and every derived figure follows from the
    measured ones (nothing here asserts a time)."""
    from fedviz import bench

    cells = 4
    r = bench.cluster_figure(source="preset:fedprox-synthetic-binary?nodes=8", iterations=5, cells=cells)
    rows = {"serial": r["serial"], "workers_1": r["workers_1"], "workers_2": r["workers_2"]}
    for name, row in rows.items():
        assert row["seconds"] > 0 and math.isfinite(row["seconds"]), name
        assert math.isclose(row["seconds_per_cell"], row["seconds"] / cells, rel_tol=1e-12), name
        assert math.isclose(row["cells_per_second"], cells / row["seconds"], rel_tol=1e-12), name
        assert row["compute_seconds_per_cell"] > 0, name
    serial_row = r["serial"]
    assert serial_row["compute_seconds_per_cell"] <= serial_row["seconds_per_cell"], "its clock is inside its wall time"
    for n in (1, 2):
        row = r[f"workers_{n}"]
        assert (row["status"], row["stored"]) == ("done", cells)
        assert 1 <= row["workers_used"] <= n
    assert r["results_equal"] is True, "the cluster stored each cell's serial records (one thread on both sides)"
    serial, one = r["serial"], r["workers_1"]
    assert math.isclose(r["overhead_per_cell_seconds"], one["seconds_per_cell"] - serial["seconds_per_cell"],
                        rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(r["overhead_percent"], 100 * r["overhead_per_cell_seconds"] / serial["seconds_per_cell"],
                        rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(r["speedup"], r["workers_2"]["cells_per_second"] / serial["cells_per_second"], rel_tol=1e-12)
    assert math.isclose(r["compute_ratio"], one["compute_seconds_per_cell"] / serial["compute_seconds_per_cell"],
                        rel_tol=1e-12)
    b = r["bytes"]
    assert b["per_cell"] == b["task"] + b["result"] + b["stream"] and min(b["task"], b["result"], b["stream"]) > 0
    # A cell carries the data set's spec, not the data set: its task is a tiny fraction of it.
    assert b["task"] * 100 < b["data_set"]
    p = r["projection"]
    per_worker = 1 / (serial["seconds_per_cell"] + max(r["overhead_per_cell_seconds"], 0))
    assert math.isclose(p["cells_per_second_per_worker"], per_worker, rel_tol=1e-12)
    assert math.isclose(p["scheduler_cap_cells_per_second"], 1 / r["scheduler_seconds_per_task"], rel_tol=1e-12)
    assert math.isclose(p["link_cap_cells_per_second"], bench.PROJECTION_BANDWIDTH / b["per_cell"], rel_tol=1e-12)
    cap = min(p["scheduler_cap_cells_per_second"], p["link_cap_cells_per_second"])
    assert math.isclose(p["workers_until_cap"], cap / per_worker, rel_tol=1e-12)
    assert p["bound_by"] == ("scheduler" if p["scheduler_cap_cells_per_second"] <= p["link_cap_cells_per_second"]
                             else "link")
    text = bench.format_cluster(r)
    assert "| serial, in-process |" in text and "| local cluster, 1 worker |" in text
    assert "| local cluster, 2 workers |" in text and f"{r['overhead_percent']:+.1f}%" in text
    assert f"{b['task']:,}" in text and "N·c" in text
    assert json.loads(json.dumps(r)) == r, "the figure is plain JSON (the command's --json prints it)"


def test_softmax_figure_is_self_consistent():
    """The softmax figure (issue 22's bar): the same rows with 10 class codes against the binary labels; every
    derived figure follows from the measured ones and the table prints them (no time is asserted)."""
    from fedviz import bench

    r = bench.softmax_cost(iterations=1, repeats=1)
    assert r["classes"] == 10 and r["bar"] == 15 and r["n"] == 50_000
    assert f"{r['threads']} threads (load average {r['load_average']:.1f}" in bench.format_softmax(r)
    assert set(r["algorithms"]) == {label for label, _, _ in bench.SOFTMAX_ALGORITHMS}
    text = bench.format_softmax(r)
    for label, a in r["algorithms"].items():
        assert a["binary_seconds"] > 0 and a["softmax_seconds"] > 0
        assert math.isclose(a["ratio"], a["softmax_seconds"] / a["binary_seconds"], rel_tol=1e-12)
        assert math.isclose(a["ratio_over_bar"], a["ratio"] / 15, rel_tol=1e-12)
        assert (f"| {label} | {a['binary_seconds']:.4f} | {a['softmax_seconds']:.4f} | {a['ratio']:.2f} | "
                f"{a['ratio_over_bar']:.2f} | {'yes' if a['ratio_over_bar'] <= 1 else 'no'} |") in text
    assert json.loads(json.dumps(r)) == r


def test_pernode_figure_is_self_consistent():
    """The per-node figure (issue 23's bar: at most one test pass): the extra in test passes is the node sums'
    extra plus the per-node scores' over the test pass, and the table prints it (no time is asserted)."""
    from fedviz import bench

    r = bench.pernode_cost("small", iterations=1, repeats=1)
    assert set(r) == {"google-plus-small", "google-plus (small)", "threads", "load_average"}
    text = bench.format_pernode(r)
    assert f"{r['threads']} threads, load average {r['load_average']:.1f}" in text
    for key, row in ((k, v) for k, v in r.items() if isinstance(v, dict)):
        assert row["test_pass_seconds"] > 0 and row["sums_extra_seconds"] >= 0
        assert math.isclose(row["extra_over_test_pass"],
                            (row["sums_extra_seconds"] + row["evaluate_extra_seconds"]) / row["test_pass_seconds"],
                            rel_tol=1e-12)
        assert f"| {row['extra_over_test_pass']:.2f} |" in text and key in text
        for a in row["algorithms"].values():
            assert math.isclose(a["ratio"], a["iteration_with_seconds"] / a["iteration_without_seconds"], rel_tol=1e-12)
            assert math.isclose(a["extra_in_test_passes"], (a["iteration_with_seconds"] - a["iteration_without_seconds"])
                                / row["test_pass_seconds"], rel_tol=1e-12)
