"""The figures the docs state that are no command's printed output are fedviz's own computation today (issue 31,
point 5): a changed default, generator or estimate can no longer leave a stale figure behind.

Each test reads its figure out of the doc's text, recomputes it in-process from fedviz and compares the two:
a figure within one unit of its last shown digit, as tests/integration/test_doc_transcripts.py compares a
command's output (the computations are seeded; another CPU's BLAS may move a rounded last digit by one, a
stale figure moves it by more), a count exactly.  Only figures that take seconds at most are recomputed; the
minutes-long and the machine-dependent ones have their command beside them in the doc instead, and where a doc
copies such a figure from another doc, or a table rounds a transcript, the copy is held to its source.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import DATA, ROOT
from markdown_docs import unit

from fedviz.data.build import (DEFAULT_TEST_FRACTION, MAX_DEFAULT_NODES, MIN_ROWS_PER_NODE, DataSpec, build,
                               default_nodes)
from fedviz.errors import FedvizError
from fedviz.problems import optimum
from fedviz.problems.objective import Problem

_NUMBER = r"[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?"


def prose(name: str, section: str | None = None) -> str:
    """docs/``name`` (from its ``## section`` heading to the next, if given) with its line breaks and runs of
    spaces made single spaces, so a figure is found wherever the doc's lines wrap."""
    text = (ROOT / "docs" / name).read_text(encoding="utf-8")
    if section is not None:
        assert f"\n## {section}\n" in text, f"docs/{name} has no section '## {section}'"
        text = re.split(r"^## ", text.split(f"\n## {section}\n", 1)[1], flags=re.M)[0]
    return " ".join(text.split())


def figures(text: str, pattern: str, where: str) -> tuple[str, ...]:
    """The groups of ``pattern`` in ``text``; fails, naming the doc, when the sentence is no longer there."""
    m = re.search(pattern, text)
    assert m is not None, f"{where}: no longer says {pattern!r} (reword this test with the doc)"
    return m.groups()


def value(token: str) -> float:
    return float(token.replace(",", "").replace("_", ""))




def assert_shown(token: str, computed: float, what: str, source: str = "fedviz computes") -> None:
    """``token`` as written is ``computed`` to within one unit of its last digit."""
    assert abs(computed - value(token)) <= unit(token) * (1 + 1e-9), \
        f"{what}: the doc says {token}, {source} {computed:.6g}"


# -- docs/sharing.md ------------------------------------------------------------------------------------------
def test_every_built_in_has_at_most_the_cells_sharing_md_says():
    """The page's cell limit is set against the largest built-in, so the doc's figure must be that built-in's."""
    from fedviz.experiments.builtin import BUILTINS, SCALES

    most, name = figures(prose("sharing.md"), r"every built-in has at most ([\d,]+), ([\w-]+) at full scale",
                         "docs/sharing.md")
    sizes = {(b, s): BUILTINS[b].experiment(s).size for b in BUILTINS for s in SCALES}
    assert max(sizes.values()) == int(value(most)), sizes
    assert sizes[(name, "full")] == int(value(most)), sizes


def test_the_paper_scale_entries_estimate_is_sharing_md_s():
    """The entry budget is set above the paper-scale preset's estimate (what check_budget compares), from the
    node sizes alone."""
    from fedviz.data.presets import preset_config
    from fedviz.data.synthetic import estimate_entries

    (millions,) = figures(prose("sharing.md"), rf"the paper-scale google-plus is estimated at ({_NUMBER}) million",
                          "docs/sharing.md")
    rows, entries = estimate_entries(preset_config("google-plus"))
    assert_shown(millions, entries / 1e6, "paper-scale google-plus, estimated entries (millions)")


def test_the_paper_scale_model_estimate_is_sharing_md_s():
    """The model budget's default must hold the paper's data: its optimum's estimate, from the sizes the doc's
    command passes.  The rows and features are the generator's (from its node sizes, instantly); the entries,
    which only the 6 s build counts, must at least be the count performance.md's scaling table gives."""
    from fedviz.data.presets import preset_config
    from fedviz.data.synthetic import node_totals, train_rows
    from fedviz.problems.budget import MAX_MODEL_MB, optimum_memory

    text = prose("sharing.md")
    (limit,) = figures(text, r"`FEDVIZ_MAX_MODEL_MB` megabytes \(default ([\d,]+)", "docs/sharing.md")
    assert int(value(limit)) == MAX_MODEL_MB
    mb, n, n_test, d, nnz = figures(
        text, r"paper-scale google-plus needs about ([\d,]+) MB: `python -c \"from fedviz\.problems\.budget import "
              r"optimum_memory; print\(optimum_memory\(n=([\d_]+), n_test=([\d_]+), d=([\d_]+), classes=1, "
              r"nnz=([\d_]+)\)\.mb\)\"`", "docs/sharing.md")
    config = preset_config("google-plus")
    totals = node_totals(config)
    train = int(train_rows(totals, config.test_fraction).sum())
    sizes = (train, int(totals.sum()) - train, config.d)
    assert (int(value(n)), int(value(n_test)), int(value(d))) == sizes, f"the generator's n, n_test, d: {sizes}"
    scaling = prose("performance.md")
    assert f"| paper | {int(value(n)):,} | {int(value(nnz)):,} |" in scaling, "performance.md's scaling table"
    need = optimum_memory(n=int(value(n)), n_test=int(value(n_test)), d=int(value(d)), classes=1, nnz=int(value(nnz)))
    assert_shown(mb, need.mb, "paper-scale google-plus, the optimum's estimate (MB)")
    assert need.mb < MAX_MODEL_MB


def _two_hundred_classes(path) -> None:
    """The file of tests/browser/test_model_budget_browser.py: 4,000 rows of 200 classes, 3 of 5,000 features
    each (the issue's 143 KB upload)."""
    rng = np.random.default_rng(32)
    lines = []
    for i in range(4_000):
        cols = np.sort(rng.choice(5_000, 3, replace=False)) + 1
        lines.append(f"{i % 200} " + " ".join(f"{c}:{v:.2f}" for c, v in zip(cols, rng.random(3))))
    path.write_text("\n".join(lines) + "\n")


def test_a_two_hundred_class_upload_is_refused_at_the_megabytes_sharing_md_says(tmp_path, monkeypatch):
    """The refusal's sentence is what the doc quotes, and the doc's command (sizes written out) gives the same."""
    from fedviz.problems.budget import optimum_memory

    monkeypatch.delenv("FEDVIZ_MAX_MODEL_MB", raising=False)
    mb, n, n_test, d = figures(
        prose("sharing.md"), r"is refused at ([\d,]+) MB: .*?`python -c \"from fedviz\.problems\.budget import "
                             r"optimum_memory; print\(optimum_memory\(n=([\d_]+), n_test=([\d_]+), d=([\d_]+), "
                             r"classes=200,", "docs/sharing.md")
    path = tmp_path / "classes200.svm"
    _two_hundred_classes(path)
    data = build(DataSpec(str(path)))
    with pytest.raises(FedvizError, match=r"needs about [\d,]+ MB") as refused:
        Problem(data, "softmax")
    said = re.search(r"needs about ([\d,]+) MB", str(refused.value)).group(1)
    assert said == mb, str(refused.value)
    assert (data.n, data.X_test.shape[0], data.d) == (int(value(n)), int(value(n_test)), int(value(d)))
    need = optimum_memory(n=data.n, n_test=data.X_test.shape[0], d=data.d, classes=200, nnz=data.X.nnz)
    assert_shown(mb, need.mb, "the 200-class upload (MB)")


# -- docs/performance.md --------------------------------------------------------------------------------------
@pytest.mark.parametrize("source, pattern", [
    pytest.param("preset:fedprox-synthetic",
                 r"FedProx's Synthetic \(the `fedprox-synthetic` preset, dC = ([\d,]+)\) takes (\d+) Newton steps, "
                 r"where the block-preconditioned CG takes (\d+) steps and about ([\d,]+) Hessian products",
                 marks=pytest.mark.slow),  # 4 s: 29 Newton systems of 610 unknowns over 7,909 rows
    ("dna.scale", r"dna\.scale \(dC = ([\d,]+)\) takes (\d+), against (\d+) and about ([\d,]+)"),
], ids=["fedprox-synthetic", "dna.scale"])
def test_the_softmax_optimum_s_counts_are_performance_md_s(source, pattern, monkeypatch):
    """The dense Hessian's case rests on these counts: Newton steps and no Hessian product, against the block-
    preconditioned CG the larger models take (forced here as the doc's script forces it)."""
    size, dense_steps, cg_steps, products = figures(prose("performance.md", "Many classes and every node"), pattern,
                                                    "docs/performance.md")
    problem = Problem(build(DataSpec(source if source.startswith("preset:") else str(DATA / source))), "softmax")
    assert problem.size == int(value(size))
    dense = optimum.solve(problem, use_cache=False)
    assert (dense.newton_iterations, dense.hessian_products, dense.dense_hessians) == (int(dense_steps), 0,
                                                                                      int(dense_steps))
    monkeypatch.setattr(optimum, "DENSE_MAX_SIZE", 0)
    cg = optimum.solve(problem, use_cache=False)
    assert (cg.newton_iterations, cg.dense_hessians) == (int(cg_steps), 0)
    # "About N" products: N to one significant figure.  Only that is promised on every machine: CG stops where its
    # residual crosses the inexact Newton step's tolerance, and that crossing follows the last bits (1,001 products
    # on one CPU, 1,094 on another, the Newton steps the same).
    assert float(f"{cg.hessian_products:.1g}") == value(products), (cg.hessian_products, products)
    # Both reach the optimum, so the counts compare two solutions of one problem: each stops at ‖∇f‖ ≤ 1e-10, so
    # f − f* ≤ ‖∇f‖²/(2λ) (f is λ-strongly convex), plus the rounding of f's n terms.
    bound = 1e-20 / problem.lam + problem.n * np.finfo(float).eps * abs(dense.objective)
    assert abs(cg.objective - dense.objective) <= bound


# -- docs/learn-efficiency-drift.md ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def drift_views():
    from fedviz.learn.drift import DriftSettings, drift_view

    return {"IID": drift_view("iid"), "non-IID": drift_view("non-iid"),
            "non-IID, E = 40": drift_view("non-iid", DriftSettings(local_steps=40))}


def test_the_drift_table_is_the_drift_view_s_final_distances(drift_views):
    """The table the Client drift section reads its claims from (FedAvg drifts, SCAFFOLD and FSVRG do not)."""
    from fedviz.learn.drift import DriftSettings

    text = prose("learn-efficiency-drift.md", "Client drift")
    (rounds,) = figures(text, r"At the defaults \((\d+) rounds\), ‖w⁸ − w\*‖ is", "docs/learn-efficiency-drift.md")
    (steps,) = figures(text, r"take E = (\d+) full-batch local steps", "docs/learn-efficiency-drift.md")
    assert (DriftSettings().rounds, DriftSettings().local_steps) == (int(rounds), int(steps))
    header = figures(text, r"\| \| (\w+) \| (\w+) \| (\w+) \|", "docs/learn-efficiency-drift.md")
    for row, view in drift_views.items():
        shown = figures(text, rf"\| {re.escape(row)} \| ({_NUMBER}) \| ({_NUMBER}) \| ({_NUMBER}) \|",
                        f"docs/learn-efficiency-drift.md, row {row}")
        computed = view.final_distances()
        assert set(computed) == set(header)
        for algorithm, token in zip(header, shown):
            assert_shown(token, computed[algorithm], f"‖w⁸ − w*‖, {row}, {algorithm}")


def test_the_plane_s_share_of_the_spread_is_the_drift_view_s(drift_views):
    """The caption's share of the spread the plane shows, at the defaults."""
    iid, non_iid = figures(prose("learn-efficiency-drift.md", "Client drift"),
                           r"plane shows: (\d+)% \(IID\) and (\d+)% \(non-IID\) at the defaults",
                           "docs/learn-efficiency-drift.md")
    assert_shown(iid, 100 * drift_views["IID"].plane.explained, "the IID plane's share (%)")
    assert_shown(non_iid, 100 * drift_views["non-IID"].plane.explained, "the non-IID plane's share (%)")


# -- docs/dashboard.md ----------------------------------------------------------------------------------------
def test_a_file_without_a_k_gets_the_nodes_dashboard_md_says(tmp_path):
    """The rule's worked example, on a real 150-row file: its K, and each node with rows to train and test on."""
    per_node, most, rows, nodes = figures(
        prose("dashboard.md"), r"about (\d+) rows per node, at most (\d+) nodes, so a (\d+)-row file becomes (\d+) "
                               r"nodes with rows to train and to test on", "docs/dashboard.md")
    assert (MIN_ROWS_PER_NODE, MAX_DEFAULT_NODES) == (int(per_node), int(most))
    assert default_nodes(int(rows), DEFAULT_TEST_FRACTION) == int(nodes)
    path = tmp_path / "rows.svm"
    path.write_text("".join((DATA / "heart_scale").read_text().splitlines(keepends=True)[:int(rows)]))
    data = build(DataSpec(str(path)))
    assert data.n + data.X_test.shape[0] == int(rows)
    assert data.n_nodes == int(nodes)
    assert data.node_sizes.min() > 0
    assert np.bincount(data.test_nodes, minlength=data.n_nodes).min() > 0


def test_dashboard_md_quotes_figure2_md_s_a9a_ratios():
    """The dashboard quotes the previous FSVRG default's ratios on a9a from figure2.md's stepsize table (whose
    command takes 4 min): the two must not drift apart."""
    low, high = figures(prose("dashboard.md"), r"FSVRG's, before its safeguard, ended (\d+)–(\d+)× above its best "
                                               r"on a9a", "docs/dashboard.md")
    table = (ROOT / "docs" / "figure2.md").read_text(encoding="utf-8")
    ratios = [int(m) for m in re.findall(r"^\| a9a,[^\n]*\(([\d,]+)\) \|$", table, flags=re.M)]
    assert len(ratios) == 2, "figure2.md's stepsize table has two a9a rows"
    assert (min(ratios), max(ratios)) == (int(low), int(high))


# -- docs/figure2.md ------------------------------------------------------------------------------------------
def test_figure2_md_s_previous_default_rows_are_its_transcripts():
    """The table's previous-default rows (small preset) round the two `fedviz run` transcripts below it, which
    tests/integration/test_doc_transcripts.py runs again."""
    text = prose("figure2.md")
    for row, partition in (("FSVRG", ""), ("FSVRGR", "--partition reshuffle ")):
        sub, error = figures(text, rf"\| {row}, previous default \| ({_NUMBER}) \| ({_NUMBER})% \|",
                             f"docs/figure2.md, row {row}")
        run, run_error = figures(
            text, rf"\$ python -m fedviz run preset:google-plus-small {re.escape(partition)}--algorithms fsvrg --set "
                  rf"fsvrg\.safeguard=false --iterations 30 fsvrg it 30 f-f\* ({_NUMBER}) test err ({_NUMBER})%",
            f"docs/figure2.md, the transcript of {row}")
        assert_shown(sub, value(run), f"{row}, previous default, f − f*", "its transcript shows")
        assert_shown(error, value(run_error), f"{row}, previous default, test error", "its transcript shows")
