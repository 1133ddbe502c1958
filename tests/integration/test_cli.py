"""The command line, run as a user would: ``python -m fedviz ...`` in a subprocess."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import DATA


def fedviz(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "fedviz", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def test_inspect_json_on_a9a_with_optimum_matches_the_reference():
    r = fedviz("inspect", DATA / "a9a", "--test", DATA / "a9a.t", "--opt", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("n", "d", "nnz", "nodes", "node_size_min", "node_size_median", "node_size_max",
                "features_on_fewer_than_1000_nodes", "majority_test_error", "node_majority_test_error",
                "opt_objective", "opt_test_error", "opt_grad_norm"):
        assert key in out
    assert (out["n"], out["d"]) == (32561, 123)
    assert out["opt_objective"] == pytest.approx(0.32337958246, rel=1e-9)
    assert out["opt_grad_norm"] <= 1e-10
    # The a9a test split: 23.62% positive, so predicting the majority (-1) errs that often.
    from sklearn.datasets import load_svmlight_file
    _, y_test = load_svmlight_file(str(DATA / "a9a.t"), n_features=123)
    assert out["majority_test_error"] == pytest.approx(np.mean(y_test > 0))
    assert out["node_majority_test_error"] is None  # a separate test file has no nodes


def test_inspect_preset_with_overrides_and_partition():
    r = fedviz("inspect", "preset:google-plus-small?nodes=50&seed=2", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["nodes"] == 50
    # Reshuffle (the paper's FSVRGR) keeps every node's size but fills it with random rows.
    r = fedviz("inspect", "preset:google-plus-small?nodes=50&seed=2", "--partition", "reshuffle", "--json")
    again = json.loads(r.stdout)
    for key in ("n", "nodes", "node_size_min", "node_size_median", "node_size_max", "nnz"):
        assert again[key] == out[key]
    assert again["node_majority_test_error"] is None  # the old nodes' test rows have no new node


def test_test_fraction_zero_keeps_every_row_for_training():
    r = fedviz("inspect", DATA / "heart_scale", "--test-fraction", "0", "--nodes", "5", "--json")
    out = json.loads(r.stdout)
    assert out["n"] == 270 and out["n_test"] == 0 and out["nodes"] == 5


def test_default_test_fraction_holds_out_the_last_quarter_of_each_node():
    r = fedviz("inspect", DATA / "heart_scale", "--nodes", "10", "--json")
    out = json.loads(r.stdout)
    # 10 balanced nodes of 27 rows; floor(0.25 · 27) = 6 test rows each.
    assert out["n_test"] == 60 and out["n"] == 210


def test_natural_partition_from_qid_groups():
    r = fedviz("inspect", DATA / "mq2008_fold1_test.txt", "--positive", "2", "--test-fraction", "0", "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 0, r.stderr
    assert out["nodes"] == 156 and out["node_size_min"] == 6 and out["node_size_max"] == 119


def test_readable_table_without_json():
    r = fedviz("inspect", DATA / "heart_scale")
    assert r.returncode == 0 and "majority test error" in r.stdout and "%" in r.stdout


@pytest.mark.parametrize("args, needle", [
    (("inspect", DATA / "broken" / "a9a.truncated_1MiB"), "truncated"),
    (("inspect", DATA / "broken" / "a9a.colons_stripped"), "line 1"),
    (("inspect", DATA / "agaricus_zero_based.train", "--index-base", "1"), "index 0 in one-based input"),
    (("inspect", "/no/such/file"), "No such file"),
    (("inspect", "preset:nope"), "preset"),
    (("inspect", "preset:google-plus-small?nodez=3"), "nodez"),
    (("inspect", DATA / "heart_scale", "--partition", "dirichlet:alpha=-1"), "dirichlet.alpha"),
    (("inspect", DATA / "dna.scale", "--loss", "logistic", "--opt"), "'softmax': the data hold 3 classes"),
    (("run", DATA / "dna.scale", "--algorithms", "gd,cocoa-plus"), "CoCoA+ does not take softmax"),
    (("run", DATA / "dna.scale", "--algorithms", "dane", "--set", "dane.solver=svrg"),
     "inexact DANE does not take softmax"),
    (("inspect", DATA / "heart_scale", "--lam", "0", "--opt"), "lam"),
    (("inspect",), "required"),
    (("frobnicate",), "invalid choice"),
])
def test_errors_are_one_line_with_exit_code_2(args, needle):
    r = fedviz(*args)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert needle in lines[0] and "Traceback" not in r.stderr


def test_run_prints_one_json_object_per_iteration():
    r = fedviz("run", "preset:identical-nodes", "--algorithms", "gd,fsvrg", "--iterations", "3",
               "--set", "gd.stepsize=0.5", "--json")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(row["algorithm"], row["iteration"]) for row in rows] == \
        [("gd", i) for i in range(4)] + [("fsvrg", i) for i in range(4)]
    for row in rows:
        assert {"algorithm", "iteration", "objective", "suboptimality", "test_error", "rounds", "seconds",
                "status"} <= set(row)
    assert rows[3]["status"] == "done" and rows[0]["status"] == "running"
    assert rows[3]["rounds"] == 3 and rows[-1]["rounds"] == 6  # FSVRG: two rounds per iteration


def test_run_writes_csv_and_json(tmp_path):
    import csv
    out = tmp_path / "runs.csv"
    r = fedviz("run", "preset:identical-nodes", "--algorithms", "gd", "--iterations", "2", "--out", out)
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(out.open()))
    assert [int(row["iteration"]) for row in rows] == [0, 1, 2]
    out = tmp_path / "runs.json"
    fedviz("run", "preset:identical-nodes", "--algorithms", "gd", "--iterations", "2", "--out", out)
    assert [row["iteration"] for row in json.loads(out.read_text())] == [0, 1, 2]


@pytest.mark.parametrize("args, needle", [
    (("--algorithms", "nope"), "algorithm='nope'"),
    (("--algorithms", "gd", "--set", "gd.stepsize=-1"), "gd.stepsize"),
    (("--algorithms", "gd", "--set", "gd.step=1"), "known hyperparameter: stepsize"),
    (("--algorithms", "gd", "--set", "fsvrg.stepsize=1"), "--algorithms"),
    (("--algorithms", "fedavg", "--set", "fedavg.client_fraction=2"), "fedavg.client_fraction"),
])
def test_run_refuses_bad_settings_before_running(args, needle):
    r = fedviz("run", "preset:identical-nodes", *args)
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_algorithms_lists_the_registry():
    r = fedviz("algorithms", "--json")
    algos = {a["name"]: a for a in json.loads(r.stdout)}
    assert {"gd", "fsvrg", "naive-fsvrg", "dane", "cocoa-plus", "cocoa", "one-shot", "primal-method",
            "dual-method", "fedavg", "fedprox", "scaffold", "svrg", "sgd"} <= set(algos)
    assert algos["svrg"]["federated"] is False and algos["fsvrg"]["federated"] is True
    from fedviz.algorithms import ALGORITHMS

    # Softmax is listed for exactly the algorithms that take it; the readable list says why the others do not.
    takes = {n for n, c in ALGORITHMS.items() if c.multiclass}
    assert {n for n, a in algos.items() if "softmax" in a["losses"]} == takes
    text = fedviz("algorithms").stdout
    for name in ("cocoa-plus", "cocoa", "primal-method", "dual-method"):
        assert ALGORITHMS[name].softmax_refusal() in text
    assert "FSVRG does not take softmax" not in text
    assert all(p["help"] for a in algos.values() for p in a["params"])


@pytest.mark.parametrize("args", [["algorithms"], ["--help"], ["inspect", "preset:iid?nodes=3&train_size_mean=20"],
                                  ["run", "preset:identical-nodes", "--algorithms", "gd,fsvrg", "--iterations", "2",
                                   "--json"]])
def test_a_reader_that_leaves_early_gets_no_traceback(args):
    """``python -m fedviz algorithms | head -1``: the pipe closes under the writer.  Quiet, status 141 as
    after SIGPIPE (--help is argparse's exit, 0), whether the output fills the pipe's buffer or not."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first byte
    try:
        r = subprocess.run([sys.executable, "-m", "fedviz", *args], stdout=write, stderr=subprocess.PIPE,
                           text=True, timeout=300)
    finally:
        os.close(write)
    assert r.stderr == ""
    assert r.returncode == (0 if args == ["--help"] else 141)



def _sigint_as_from_a_terminal():
    """In the command's process before it starts: SIGINT at its default disposition and not blocked, as a
    terminal's foreground command has it.  Twice, under pytest-xdist, the command went on 60 s after Ctrl-C
    with its main thread in FSVRG's local rounds, as it does when SIGINT is ignored or blocked: an exec
    inherits both, and the command rightly respects an ignored one (a shell's background job).  If it happens
    again, the failure names this process's SIGINT."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_ctrl_c_during_a_run_exits_130_in_one_line(tmp_path):
    """The run goes through the execution seam, which ends its algorithms 'stopped' on Ctrl-C; the command
    still leaves at once, with one line and status 130, and writes no --out file."""
    import signal
    import time

    out = tmp_path / "runs.json"
    p = subprocess.Popen([sys.executable, "-m", "fedviz", "run", "preset:identical-nodes", "--algorithms",
                          "fsvrg,gd", "--iterations", "100000", "--json", "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONFAULTHANDLER": "1"},
                         preexec_fn=_sigint_as_from_a_terminal)
    try:
        assert json.loads(p.stdout.readline())["iteration"] == 0   # running, past the preparation
        began = time.monotonic()
        p.send_signal(signal.SIGINT)
        try:
            _, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # once, loaded, it did not leave: say where each thread stood
            p.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack on stderr
            _, err = p.communicate(timeout=30)
            pytest.fail(f"no exit 60 s after Ctrl-C (SIGINT in this test's process: "
                        f"{signal.getsignal(signal.SIGINT)}, blocked: "
                        f"{signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])}); the command's "
                        f"threads:\n{err[-6000:]}")
    finally:
        p.kill()
    assert (p.returncode, err) == (130, "fedviz: interrupted\n")
    assert time.monotonic() - began < 30
    assert not out.exists()


def test_run_reports_the_seams_warnings_and_a_failure_before_the_first_record(monkeypatch, capsys):
    """What the seam reports reaches the terminal: a warning (f* unavailable: the run goes on, its
    suboptimality NaN) as a 'warning:' line, and an algorithm that ends before its first record (here its
    tuning refused) as the command's error, exit 2."""
    import importlib

    from fedviz.cli import main
    from fedviz.errors import FedvizError, ParameterError
    from fedviz.runner import tune

    execute = importlib.import_module("fedviz.runner.execute")  # the module, not the function of that name

    def no_optimum(problem):
        raise FedvizError("no optimum today")

    monkeypatch.setattr(execute, "solve", no_optimum)
    assert main(["run", "preset:identical-nodes", "--algorithms", "gd", "--iterations", "1", "--json"]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == ["warning: f* unavailable, suboptimality is NaN (no optimum today)"]
    assert [json.loads(line)["suboptimality"] for line in out.splitlines()] == [None, None]
    monkeypatch.undo()

    def refused(*args, **kwargs):
        raise ParameterError("stepsize", -1.0, "> 0")

    monkeypatch.setattr(tune, "tune", refused)
    assert main(["run", "preset:identical-nodes", "--algorithms", "gd", "--iterations", "1", "--tune"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [f"fedviz: error: {ParameterError('stepsize', -1.0, '> 0')}"]


def test_run_json_prints_every_iteration_not_every_tenth():
    """The table output prints every tenth record; --json must print all of them."""
    r = fedviz("run", "preset:identical-nodes", "--algorithms", "gd", "--iterations", "25", "--json")
    assert r.returncode == 0, r.stderr
    assert [json.loads(line)["iteration"] for line in r.stdout.splitlines()] == list(range(26))


def test_run_tune_reports_the_choice_and_records_it(tmp_path):
    out = tmp_path / "runs.json"
    # GD with fixed steps, whose pilots' best lies inside the grid here (the default's Barzilai–Borwein steps do
    # best from the smallest first step, at the grid's edge)
    r = fedviz("run", "preset:identical-nodes", "--algorithms", "gd,one-shot", "--iterations", "12", "--tune",
               "--set", "gd.steps=fixed", "--out", out)
    assert r.returncode == 0, r.stderr
    tune_lines = [line for line in r.stderr.splitlines() if line.startswith("tune ")]
    assert len(tune_lines) == 2
    assert tune_lines[0].startswith("tune gd: stepsize = ") and "criterion: lowest final f − f*" in tune_lines[0]
    assert " s, against the run's 12 rounds; " in tune_lines[0]  # GD: one round per iteration
    assert tune_lines[1].startswith("tune one-shot: nothing to tune")
    rows = json.loads(out.read_text())
    gd = [row for row in rows if row["tuned_param"] == "stepsize"]
    assert len(gd) == 13 and len({row["tuned_value"] for row in gd}) == 1
    value = gd[0]["tuned_value"]
    # The label says whether the pilots moved GD's step from its default 1/L (fedviz.runner.tune.TuneResult.note).
    from fedviz.data.build import DataSpec, build
    from fedviz.problems.objective import Problem

    default = 1 / Problem(build(DataSpec("preset:identical-nodes")), "logistic").smoothness
    kept = value == pytest.approx(default, rel=1e-12)
    assert gd[0]["algorithm"] == f"gd (stepsize {value:.3g}, {'tuned, default kept' if kept else 'tuned'})"
    # The tuned run is the run with that stepsize: the same records as --set with the value.
    again = fedviz("run", "preset:identical-nodes", "--algorithms", "gd", "--iterations", "12", "--json",
                   "--set", f"gd.stepsize={value!r}", "--set", "gd.steps=fixed")
    plain = [json.loads(line) for line in again.stdout.splitlines()]
    assert [row["objective"] for row in plain] == [row["objective"] for row in gd]
    one_shot = [row for row in rows if row["algorithm"] == "one-shot"]
    assert one_shot and all(row["tuned_param"] is None for row in one_shot)


def test_run_tune_csv_has_the_tuned_columns(tmp_path):
    import csv
    out = tmp_path / "runs.csv"
    r = fedviz("run", "preset:identical-nodes", "--algorithms", "gd", "--iterations", "3", "--tune", "--out", out)
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 4 and all(row["tuned_param"] == "stepsize" and float(row["tuned_value"]) > 0 for row in rows)


@pytest.mark.parametrize("command", [[], ["inspect"], ["run"], ["export"], ["figure2"], ["bench"], ["algorithms"]])
def test_help_has_no_markup(command):
    from fedviz.cli import build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices
    text = (sub[command[0]] if command else parser).format_help()
    for mark in ("**", "`", ":material/"):
        assert mark not in text, (command, mark)


def test_data_warnings_go_to_stderr(monkeypatch, capsys):
    """Whatever the data set's meta["warnings"] says reaches the user as 'warning: …' lines."""
    import dataclasses

    import fedviz.data.build as build_module
    from fedviz.cli import main

    real = build_module.build

    def with_warnings(spec):
        ds = real(spec)
        return dataclasses.replace(ds, meta={**ds.meta, "warnings": ["first thing\n to know", "second"]})

    monkeypatch.setattr(build_module, "build", with_warnings)
    # `run` builds its data through the process cache its job reads (fedviz.runner.cache), emptied here so
    # that it builds them now.
    from fedviz.runner import cache

    monkeypatch.setattr(cache, "build", with_warnings)
    cache.clear()
    try:
        for argv in (["inspect", "preset:identical-nodes"],
                     ["run", "preset:identical-nodes", "--algorithms", "gd", "--iterations", "1"]):
            assert main(argv) == 0
            err = capsys.readouterr().err.splitlines()
            assert [line for line in err if line.startswith("warning: ")] == \
                ["warning: first thing to know", "warning: second"]
    finally:
        cache.clear()  # no data set built with the made-up warnings stays for the tests after


def test_export_round_trips_through_scikit_learn(tmp_path):
    """scikit-learn's reader is the oracle: the files hold exactly the data set's rows and labels."""
    from sklearn.datasets import load_svmlight_file

    from fedviz.data.build import DataSpec, build

    out, test_out = tmp_path / "train.txt", tmp_path / "test.txt"
    r = fedviz("export", DATA / "heart_scale", "--nodes", "5", "--out", out, "--test-out", test_out, "--qid")
    assert r.returncode == 0, r.stderr
    ds = build(DataSpec(source=str(DATA / "heart_scale"), nodes=5))
    X, y, qid = load_svmlight_file(str(out), n_features=ds.d, zero_based=False, query_id=True)
    assert (X != ds.X).nnz == 0 and np.array_equal(X.toarray(), ds.X.toarray()) and np.array_equal(y, ds.y)
    assert np.array_equal(qid, np.repeat(np.arange(ds.n_nodes), np.diff(ds.offsets)))
    Xt, yt = load_svmlight_file(str(test_out), n_features=ds.d, zero_based=False)
    assert np.array_equal(Xt.toarray(), ds.X_test.toarray()) and np.array_equal(yt, ds.y_test)
    # fedviz reads its own file back: same rows, and the nodes again from the qids.
    again = build(DataSpec(source=str(out), partition="natural", test_fraction=0))
    assert np.array_equal(again.X.toarray(), ds.X.toarray()) and np.array_equal(again.offsets, ds.offsets)


def test_export_writes_a_preset_with_non_integer_values_exactly(tmp_path):
    from sklearn.datasets import load_svmlight_file

    from fedviz.data.export import write_libsvm

    rng = np.random.default_rng(0)
    dense = rng.normal(size=(30, 7)) * (rng.random((30, 7)) < 0.4)
    y = rng.normal(size=30)
    write_libsvm(tmp_path / "x.txt.gz", dense, y)
    X, y2 = load_svmlight_file(str(tmp_path / "x.txt.gz"), n_features=7, zero_based=False)
    assert np.array_equal(X.toarray(), dense) and np.array_equal(y2, y)


@pytest.mark.parametrize("args, needle", [
    (("export", "preset:identical-nodes"), "--out"),
    (("export", "preset:identical-nodes", "--out", "same.txt", "--test-out", "same.txt"), "--test-out"),
])
def test_export_refuses_bad_arguments(args, needle):
    r = fedviz(*args)
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_split_of_a_file_sorted_by_label(tmp_path):
    """a9a sorted by label: the default (random, stratified) test set holds both classes in the training
    proportion; --split chronological takes each node's last rows, one class, and says so on stderr."""
    lines = [line for line in (DATA / "a9a").read_bytes().splitlines() if line.strip()]
    lines.sort(key=lambda line: line.split()[0])
    path = tmp_path / "a9a.sorted"
    path.write_bytes(b"\n".join(lines) + b"\n")
    share = sum(line.startswith(b"+1") for line in lines) / len(lines)  # the oracle: the raw labels
    r = fedviz("inspect", path, "--json")
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    out = json.loads(r.stdout)
    assert abs(out["majority_test_error"] - min(share, 1 - share)) < 0.01
    r = fedviz("inspect", path, "--json", "--split", "chronological")
    assert r.returncode == 0 and "the test set holds one class only" in r.stderr
    assert json.loads(r.stdout)["majority_test_error"] == 0.0


def test_run_on_a_file_of_three_classes_trains_softmax():
    """dna.scale loads as 3 classes (no --positive): FSVRG, GD and FedAvg run softmax regression to the end,
    with f − f* finite and non-negative and the test error an argmax error rate; inspect shows the classes'
    shares, counted here from the file."""
    r = fedviz("run", DATA / "dna.scale", "--algorithms", "fsvrg,gd,fedavg", "--iterations", "3", "--json")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    last = {row["algorithm"]: row for row in rows if row["status"] != "running"}
    assert sorted(last) == ["fedavg", "fsvrg", "gd"]
    first = rows[0]
    for row in last.values():
        assert row["status"] == "done" and row["iteration"] == 3
        assert np.isfinite(row["suboptimality"]) and 0 <= row["suboptimality"] < first["suboptimality"]
        assert 0 <= row["test_error"] <= 1
    r = fedviz("inspect", DATA / "dna.scale", "--json")
    out = json.loads(r.stdout)
    labels = np.array([float(line.split()[0]) for line in (DATA / "dna.scale").read_text().splitlines() if line])
    assert out["classes"] == 3
    shares = [out[f"class_{c}_fraction"] for c in (1, 2, 3)]
    assert shares == pytest.approx([np.mean(labels == c) for c in (1, 2, 3)], abs=0.01)  # a stratified split
    # At w = 0 every margin ties and argmax predicts the first class (label 1): the test rows of the others err.
    from fedviz.data.build import DataSpec, build

    ds = build(DataSpec(source=str(DATA / "dna.scale")))  # the command's defaults: the same split
    assert first["iteration"] == 0 and first["test_error"] == np.mean(ds.y_test != 0)
