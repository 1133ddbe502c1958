"""Data sets are budgeted by what they hold (issue 21, point 3): a preset is estimated from its node
sizes and refused before a row is drawn; a file is refused once read.

Oracle: the generated data sets themselves (their stored nonzeros), for every registered preset.
"""

from __future__ import annotations

import pytest

from conftest import DATA
from fedviz.data import build as build_mod
from fedviz.data.build import DataSpec, build
from fedviz.data.presets import PRESETS, make_preset, preset_config
from fedviz.data.synthetic import estimate_entries
from fedviz.errors import FedvizError


@pytest.mark.parametrize("name", [n for n in PRESETS if n != "google-plus"])
def test_the_estimate_bounds_what_the_generator_stores(name):
    ds = make_preset(name)
    rows = ds.X.shape[0] + ds.X_test.shape[0]
    stored = ds.X.nnz + ds.X_test.nnz
    est_rows, est_entries = estimate_entries(preset_config(name))
    assert est_rows == rows
    assert stored <= est_entries <= 1.5 * stored + 10_000, (stored, est_entries)


def test_a_preset_over_the_budget_is_refused_before_it_is_drawn(monkeypatch):
    """The issue's link: google-plus-small with 200,000 nodes (over 26 million rows)."""
    monkeypatch.setattr(build_mod, "make_preset", lambda *a, **k: pytest.fail("drawn despite the budget"))
    spec = DataSpec("preset:google-plus-small?nodes=200000", max_entries=20_000_000)
    with pytest.raises(FedvizError, match=r"this preset would hold about [\d,.]+ million entries in [\d,]+ "
                                          r"rows .*over this server's budget of 20\.0 million \(FEDVIZ_MAX_ENTRIES\)"):
        build(spec)


def test_a_preset_within_the_budget_builds_as_without_one():
    a = build(DataSpec("preset:google-plus-small?nodes=50", max_entries=1_000_000))
    b = build(DataSpec("preset:google-plus-small?nodes=50"))
    assert (a.X != b.X).nnz == 0 and a.fingerprint == b.fingerprint


def test_a_file_over_the_budget_is_refused():
    nnz = sum(len(line.split()) - 1 for line in (DATA / "a9a").read_text().splitlines() if line.strip())
    with pytest.raises(FedvizError, match=f"this file would hold about {nnz / 1e6:.1f} million entries"):
        build(DataSpec(str(DATA / "a9a"), max_entries=nnz - 1))
    assert build(DataSpec(str(DATA / "a9a"), max_entries=nnz)).X.nnz + 0 <= nnz


def test_check_budget_passes_files_and_the_paper_scale_preset_under_the_dashboards_budget():
    from fedviz.data.build import check_budget
    from fedviz.ui import MAX_DATA_ENTRIES

    check_budget(DataSpec(str(DATA / "a9a")), 1)  # files are bounded where they are read
    check_budget(DataSpec("preset:google-plus"), MAX_DATA_ENTRIES)  # the paper's scale is a built-in
    with pytest.raises(FedvizError, match="FEDVIZ_MAX_ENTRIES"):
        check_budget(DataSpec("preset:google-plus-small?nodes=200000"), MAX_DATA_ENTRIES)
