"""The Personalise page's figures, table and sentence (fedviz.plots.personal) against an independent
computation, on three data sets: google-plus-small (the paper's data, its own 500 authors), a9a
(binary, 40 iid nodes) and dna.scale (three classes, softmax, 20 nodes).

The oracle: each node's test error under the global model recomputed here from X_test w* (sign, a
margin of 0 predicting −1; argmax for softmax), the test rows per node counted here, and every
statistic (pooled: row-weighted; worst 10%: the mean of the ⌈K/10⌉ worst nodes; percentiles:
numpy's default) recomputed from the per-node errors with plain NumPy, never with the
report's own summaries."""

import functools
import math
import re

import numpy as np
import pytest

from fedviz.data.build import DataSpec, build
from fedviz.personal import PersonaliseConfig, personalise
from fedviz.plots.personal import distribution_figure, finding, lam_text, method_label, path_figure, summary_rows
from fedviz.problems.objective import Problem
from fedviz.runner.config import RunConfig

from conftest import DATA

SMALL_GRID = (0.0, 1e-3, 1e-2, 0.1, 1.0, math.inf)
CASES = {
    "google-plus-small": (RunConfig().data, "logistic", PersonaliseConfig()),  # the page's defaults
    "a9a": (DataSpec(source=str(DATA / "a9a"), nodes=40), "logistic", PersonaliseConfig(lambdas=SMALL_GRID)),
    "dna.scale": (DataSpec(source=str(DATA / "dna.scale"), nodes=20), "softmax", PersonaliseConfig(lambdas=SMALL_GRID)),
}


@functools.lru_cache(maxsize=None)
def _case(name):
    spec, loss, config = CASES[name]
    ds = build(spec)
    problem = Problem(ds, loss, None)
    return name, ds, problem, personalise(problem, config)


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    return _case(request.param)


@pytest.fixture(scope="module")
def paper():
    """The paper's data with the page's defaults (also the lesson's setup): google-plus-small."""
    return _case("google-plus-small")


def row_counts(ds):
    tn = np.asarray(ds.test_nodes)
    return np.bincount(tn[tn >= 0], minlength=ds.n_nodes).astype(float)


def pooled(errors, counts):
    ok = counts > 0
    return float(np.sum(errors[ok] * counts[ok]) / counts[ok].sum())


def worst10(errors):
    e = np.sort(errors[np.isfinite(errors)])[::-1]
    return float(e[: max(1, math.ceil(e.size / 10))].mean())


def global_errors(ds, problem, w):
    """Each node's test error under w, from the rows themselves."""
    X = ds.X_test.toarray() if hasattr(ds.X_test, "toarray") else np.asarray(ds.X_test)
    if problem.n_classes > 1:
        wrong = np.argmax(X @ w.reshape(problem.shape), axis=1) != ds.y_test.astype(int)
    else:
        wrong = np.where(X @ w > 0, 1.0, -1.0) != ds.y_test
    tn = np.asarray(ds.test_nodes)
    return np.array([wrong[tn == k].mean() if np.any(tn == k) else np.nan for k in range(ds.n_nodes)])


def test_the_global_model_s_errors_and_every_pooled_value_match_a_recount(case):
    name, ds, problem, report = case
    counts = row_counts(ds)
    mine = global_errors(ds, problem, np.asarray(report.w))
    np.testing.assert_allclose(report.errors["global"], mine, atol=1e-12)
    assert pooled(mine, counts) == pytest.approx(problem.test_error(np.asarray(report.w)), abs=1e-12)
    for m in report.methods:
        assert report.summaries[m]["pooled"] == pytest.approx(pooled(np.asarray(report.errors[m]), counts), abs=1e-12)


def _numbers(text):
    return [float(x) for x in re.findall(r"(\d+\.\d)(?:%| points)", text)]


def test_the_sentence_names_the_method_the_recount_finds_with_its_numbers(case):
    name, ds, problem, report = case
    counts = row_counts(ds)
    p = {m: pooled(np.asarray(report.errors[m]), counts) for m in report.methods}
    w = {m: worst10(np.asarray(report.errors[m])) for m in report.methods}
    best = min(report.methods, key=lambda m: (p[m], report.methods.index(m)))
    wbest = min(report.methods, key=lambda m: (w[m], report.methods.index(m)))
    text = finding(report)
    if best == "global":
        assert text.startswith("No personalised model beats the global model")
    else:
        head = text.split(". ")[0]
        label = method_label(report, best)
        assert head.startswith(label[0].upper() + label[1:] + " has the lowest pooled test error")
        got = _numbers(head)
        assert got == pytest.approx([100 * p[best], 100 * (p["global"] - p[best]), 100 * p["global"]], abs=0.051)
    second = text.split(". ")[1]
    K = int(np.count_nonzero(counts))
    assert f"({math.ceil(K / 10):,} of {K:,})" in text
    if wbest == "global":
        assert "no personalised model does better" in text
        tied = [method_label(report, m) for m in report.methods if m != "global" and w[m] == w["global"]]
        joined = tied[0] if len(tied) == 1 else ", ".join(tied[:-1]) + " and " + tied[-1] if tied else ""
        assert (f"(tied with {joined})" in text) == bool(tied)
    else:
        assert f"served best by a personalised model, {method_label(report, wbest)}:" in text
        assert _numbers(text.split("served best")[1])[:2] == pytest.approx([100 * w[wbest], 100 * w["global"]],
                                                                          abs=0.051)
    # The λ_D the path marks: the first of the grid whose recounted worst-10% mean is lowest.
    path = [worst10(np.asarray(e)) for e in report.path_errors]
    at = int(np.argmin(path))
    assert f"lowest at λ_D = {lam_text(report.lambdas[at])}" in text
    assert _numbers(text.split("Along Ditto's path")[1])[0] == pytest.approx(100 * path[at], abs=0.051)
    assert second  # a second sentence is there


def test_on_the_paper_s_data_a_personalised_model_wins_and_by_points_not_decimals(paper):
    """The claim the page makes on google-plus-small (Section 4.1's point, measured): the best method is a
    personalised one, at least 10 points below w* pooled, and the worst 10% fare best under one too."""
    name, ds, problem, report = paper
    text = finding(report)
    assert "No personalised model" not in text and "served best by a personalised model" in text
    counts = row_counts(ds)
    best = min(p for m in report.methods if m != "global"
               for p in [pooled(np.asarray(report.errors[m]), counts)])
    assert pooled(np.asarray(report.errors["global"]), counts) - best > 0.10


def test_the_boxes_hold_every_tested_node_and_the_diamonds_the_pooled_errors(case):
    name, ds, problem, report = case
    counts = row_counts(ds)
    fig = distribution_figure(report)
    boxes = [t for t in fig.data if t.type == "box"]
    assert [b.name for b in boxes] == [method_label(report, m) for m in report.methods]
    for b, m in zip(boxes, report.methods):
        e = np.asarray(report.errors[m])
        np.testing.assert_array_equal(np.sort(np.asarray(b.y)), np.sort(e[counts > 0]))
    diamonds = next(t for t in fig.data if t.type == "scatter")
    np.testing.assert_allclose(diamonds.y, [pooled(np.asarray(report.errors[m]), counts) for m in report.methods],
                               atol=1e-12)


def test_the_path_s_lines_are_the_recounted_statistics_and_the_mark_sits_at_the_best_lambda(case):
    name, ds, problem, report = case
    counts = row_counts(ds)
    fig = path_figure(report)
    by = {t.name: np.asarray(t.y, dtype=float) for t in fig.data}
    E = [np.asarray(e)[counts > 0] for e in report.path_errors]
    for q, key in ((10, "p10"), (50, "median node (band: 10th–90th percentile)"), (90, "p90")):
        np.testing.assert_allclose(by[key], [np.percentile(e, q) for e in E], atol=1e-12)
    np.testing.assert_allclose(by["pooled"], [pooled(np.asarray(e), counts) for e in report.path_errors], atol=1e-12)
    worst = [worst10(e) for e in E]
    np.testing.assert_allclose(by["worst 10% of nodes (mean)"], worst, atol=1e-12)
    lines = [s for s in fig.layout.shapes if s.type == "line"]
    assert len(lines) == 1 and lines[0].x0 == int(np.argmin(worst))
    ticks = list(fig.layout.xaxis.ticktext)
    assert ticks[0] == "0 (Local)" and ticks[-1] == "∞ (global)"
    # The path's ends are the Local and the global columns (Ditto(0) = Local, Ditto(∞) = w*).
    np.testing.assert_array_equal(report.path_errors[0], report.errors["local"])
    np.testing.assert_array_equal(report.path_errors[-1], report.errors["global"])


def test_the_table_is_the_recount_in_percent(case):
    name, ds, problem, report = case
    counts = row_counts(ds)
    rows = summary_rows(report)
    assert list(rows) == ["method", "pooled", "unweighted mean", "std", "p10", "worst 10%", "min"]
    for i, m in enumerate(report.methods):
        e = np.asarray(report.errors[m])
        t = e[counts > 0]
        expect = [pooled(e, counts), t.mean(), t.std(), np.percentile(t, 10), worst10(e), t.min()]
        got = [float(rows[c][i].rstrip("%")) / 100 for c in list(rows)[1:]]
        assert got == pytest.approx(expect, abs=5.1e-5)


def test_ties_with_the_global_model_are_said_and_mse_is_named_on_real_targets(tmp_path):
    """Real targets (ridge regression): the sentence speaks of the test MSE, and where Ditto's best λ_D is ∞
    its column ties with w*, which the sentence says (recounted here: equal worst-10% means)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5))
    y = X @ np.arange(5.0) + rng.normal(size=400)
    path = tmp_path / "reg.txt"
    path.write_text("".join(f"{t:.4f} " + " ".join(f"{j + 1}:{v:.4f}" for j, v in enumerate(x)) + "\n"
                            for x, t in zip(X, y)))
    ds = build(DataSpec(source=str(path), task="regression", nodes=8))
    report = personalise(Problem(ds, "squared", None), PersonaliseConfig(lambdas=(0.0, 1e-2, 1.0, math.inf)))
    text = finding(report, regression=True)
    assert "pooled test MSE" in text and not re.search(r"\d\.\d%", text)  # numbers, not rates
    w = {m: worst10(np.asarray(report.errors[m])) for m in report.methods if m != "majority"}
    tied = [m for m in w if m != "global" and w[m] == w["global"]]
    if min(w, key=lambda m: (w[m], report.methods.index(m))) == "global":
        assert ("tied with" in text.split("For the worst 10%")[1].split(". ")[0]) == bool(tied)
    assert summary_rows(report, regression=True)["pooled"][0] == "n/a"  # no majority label of a real target


def test_no_tested_node_is_said_not_drawn():
    """A separate test file: its rows belong to no node; the sentence says so and what to do."""
    ds = build(DataSpec(source=str(DATA / "heart_scale"), test=str(DATA / "heart_scale"), nodes=5))
    report = personalise(Problem(ds, "logistic", None), PersonaliseConfig(lambdas=(0.0, math.inf)))
    text = finding(report)
    assert text.startswith("No node has test rows (the test set's ") and "separate test file" in text
    assert f"{ds.y_test.size:,} rows" in text


def test_the_lesson_s_numbers_are_the_computation_s(paper):
    """Learn › Start here, "Why one model is not enough": every number of its sentence is the recount's
    on the lesson's own setup (google-plus-small, the page's defaults), to its one decimal."""
    from fedviz.learn.tour import PERSONAL_FINDINGS, lesson

    name, ds, problem, report = paper
    item = lesson("personalisation")
    assert item.config == RunConfig() and item.page == "pages/personalise.py"
    counts = row_counts(ds)
    measured = {"global": pooled(np.asarray(report.errors["global"]), counts),
                "global_worst10": worst10(np.asarray(report.errors["global"])),
                "majority": pooled(np.asarray(report.errors["majority"]), counts),
                "local": pooled(np.asarray(report.errors["local"]), counts),
                "finetune": pooled(np.asarray(report.errors["finetune"]), counts),
                "finetune_worst10": worst10(np.asarray(report.errors["finetune"])),
                "ditto": pooled(np.asarray(report.errors["ditto"]), counts)}
    assert set(measured) == set(PERSONAL_FINDINGS)
    for key, value in PERSONAL_FINDINGS.items():
        assert value == pytest.approx(100 * measured[key], abs=0.051), key
        assert f"{value}%" in item.sentence, key
    # What the sentence says of them: the majority beats w*, and a model per author beats the majority.
    assert measured["majority"] < measured["global"]
    assert max(measured["local"], measured["finetune"], measured["ditto"]) < measured["majority"]
    assert report.config.finetune_steps == 5  # "fine-tuned for five steps"
    # docs/dashboard.md's Personalise section quotes the same numbers.
    from conftest import ROOT

    doc = " ".join((ROOT / "docs" / "dashboard.md").read_text(encoding="utf-8").split())
    F = PERSONAL_FINDINGS
    assert (f"w* {F['global']}% pooled ({F['global_worst10']}% on its worst 10% of authors), per-node majority "
            f"{F['majority']}%, Local {F['local']}%, fine-tuned {F['finetune']}%") in doc
