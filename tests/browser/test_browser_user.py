"""A user at the dashboard, in real headless Chromium (Debian's) driven by Playwright, against
``streamlit run app.py --server.headless true`` on a free port (``live_server``).

What a user does and must see:

* every edit sticks: each control of Run and Data changed three times in a row shows the
  last value, and so does the address bar's link;
* every algorithm of the registry can be added on Run (and opened from a link), and runs;
* switching presets starts from the new preset's own knobs, in the page and in the link;
* the link keeps the setup when moving between pages with the sidebar, and carries the
  stepsize sweep;
* an upload without a test file gets a usable test set (both classes, a sensible K).

Screenshots of the states go to /tmp/shots/ (full page).
"""

from __future__ import annotations

import re

import pytest

from browser_user import (choose_option, crashes, error_axes, go_sidebar, metric, metric_int, multiselect_add,
                          multiselect_values, number_input, observe, open_page, preset_in_link, query, selectbox,
                          set_number, set_text, shot, table_cell, text_input, tick, checkbox)
from conftest import DATA
from live_server import browser_page, idle, run_button

from fedviz import ui
from fedviz.algorithms import ALGORITHMS
from fedviz.data.presets import preset_config

#: A tiny data set for the Run page: 10 identical nodes, 3,000 training rows, d = 502.
TINY = "data=identical-nodes"


@pytest.fixture
def page(server, browser):
    """A fresh browser context (so a fresh Streamlit session) per test."""
    with browser_page(browser) as pg:
        yield pg


def _sequence(page, name, steps, widget, link):
    """Apply ``steps`` (value, action) one after another; after each, wait until the widget and
    the link show the value (or the wait times out) and record what they showed.  Returns
    (expected, seen) lists of (widget, link) pairs."""
    expected, seen = [], []
    for i, (value, act) in enumerate(steps, 1):
        act(value)
        want = (value, value)
        got = observe(lambda: (widget(), link(query(page))), lambda v: v == want, page=page)
        expected.append(want)
        seen.append(got)
        shot(page, f"{name}-{i}")
    return expected, seen


def _fmt(expected, seen) -> str:
    return "\n".join(f"  change {i}: want widget={w[0]!r} link={w[1]!r}; page showed widget={s[0]!r} link={s[1]!r}"
                     if isinstance(s, tuple) else f"  change {i}: want {w!r}; page: {s!r}"
                     for i, (w, s) in enumerate(zip(expected, seen), 1))


# -- 1. every edit sticks ----------------------------------------------------------------------------
def _run_controls(page):
    """name -> (steps, widget reader, link reader) for the Run page."""
    lam = re.compile(r"^λ")

    def add(name):
        cls = ALGORITHMS[name]
        multiselect_add(page, "Algorithms", cls.title, re.compile(rf"^{re.escape(cls.title)}(\s.*)?$"))

    return {
        "iterations": ([(v, lambda v: set_number(page, "Iterations", v)) for v in (40, 50, 60)],
                       lambda: int(number_input(page, "Iterations").input_value()),
                       lambda q: int(q["iterations"]) if "iterations" in q else None),
        "seed": ([(v, lambda v: set_number(page, "Seed", v)) for v in (7, 8, 9)],
                 lambda: int(number_input(page, "Seed").input_value()),
                 lambda q: int(q["seed"]) if "seed" in q else None),
        "loss": ([(v, lambda v: choose_option(page, "Loss", v)) for v in ("squared", "smoothed-hinge", "logistic")],
                 lambda: selectbox(page, "Loss").input_value(),
                 lambda q: q.get("loss", "logistic")),
        "lam": ([(v, lambda v: set_text(page, lam, repr(v))) for v in (0.001, 0.002, 0.003)],
                lambda: float(text_input(page, lam).input_value() or "nan"),
                lambda q: float(q["lam"]) if "lam" in q else None),
        # Algorithms: add FedAvg, then SCAFFOLD, then FedProx to GD; the expected value is the whole list.
        "algorithms": ([(("gd", "fedavg"), lambda v: add("fedavg")),
                        (("gd", "fedavg", "scaffold"), lambda v: add("scaffold")),
                        (("gd", "fedavg", "scaffold", "fedprox"), lambda v: add("fedprox"))],
                       lambda: tuple(_name_of_title(t) for t in multiselect_values(page, "Algorithms")),
                       lambda q: tuple(q.get("algorithms", "fsvrg,gd,cocoa-plus").split(","))),
    }


def _name_of_title(shown: str) -> str:
    """The registry name of an option as the multiselect shows it (its title, maybe with a suffix)."""
    for name, cls in ALGORITHMS.items():
        if shown == cls.title or shown.startswith(cls.title + " "):
            return name
    return shown


@pytest.mark.parametrize("control", ["iterations", "seed", "loss", "lam", "algorithms"])
def test_run_page_keeps_every_edit(server, page, control):
    """Each Run control changed three times in a row: after each change the widget shows the last
    value and the address bar's link carries it (the issue: 40, 40, 60)."""
    open_page(page, f"{server.url}/run?{TINY}&algorithms=gd&iterations=3")
    run_button(page).wait_for()
    steps, widget, link = _run_controls(page)[control]
    expected, seen = _sequence(page, f"run-{control}", steps, widget, link)
    assert seen == expected, f"Run page, {control} changed three times in a row:\n{_fmt(expected, seen)}"
    assert not crashes(page)


def _data_controls(page):
    parts = ["iid", "shards", "dirichlet"]
    label = {p: ui.partitioner_label(p) for p in parts}

    def data_seed(q):
        name, over = preset_in_link(q)
        value = over.get("seed", q.get("data_seed"))
        return None if value is None else int(value)

    return {
        "nodes K": ("", [(v, lambda v: set_number(page, "Nodes K", v)) for v in (60, 70, 80)],
                    lambda: int(number_input(page, "Nodes K").input_value()),
                    lambda q: int(preset_in_link(q)[1]["nodes"]) if "nodes" in preset_in_link(q)[1] else None),
        "seed": ("", [(v, lambda v: set_number(page, "Seed", v)) for v in (1, 2, 3)],
                 lambda: int(number_input(page, "Seed").input_value()),
                 data_seed),
        "partition": ("", [(label[p], lambda v: choose_option(page, "How the rows are split over nodes", v))
                           for p in parts],
                      lambda: selectbox(page, "How the rows are split over nodes").input_value(),
                      lambda q: label.get(q.get("partition", "").split(":")[0], q.get("partition"))),
        "partition nodes": ("?partition=iid",
                            [(v, lambda v: set_number(page, "Nodes for the partition", v)) for v in (50, 60, 70)],
                            lambda: int(number_input(page, "Nodes for the partition").input_value()),
                            lambda q: int(q["nodes"]) if "nodes" in q else None),
    }


@pytest.mark.parametrize("control", ["nodes K", "seed", "partition", "partition nodes"])
def test_data_page_keeps_every_edit(server, page, control):
    """Each Data control changed three times in a row (google-plus-small): the widget and the link
    (``data=google-plus-small?nodes=…``, the preset's ``seed`` or ``data_seed``, ``partition``,
    ``nodes``) show the last value."""
    start, steps, widget, link = _data_controls(page)[control]
    open_page(page, f"{server.url}/data{start}")
    number_input(page, "Nodes K").wait_for()
    expected, seen = _sequence(page, f"data-{control.replace(' ', '-')}", steps, widget, link)
    assert seen == expected, f"Data page, {control} changed three times in a row:\n{_fmt(expected, seen)}"
    assert not crashes(page)


# -- 2. every algorithm can be added and run ----------------------------------------------------------
_STATUSES = """(titles) => {
    const out = Object.fromEntries(titles.map(t => [t, null]));
    for (const s of document.querySelectorAll('[data-testid="stMarkdownContainer"] strong')) {
        const title = s.textContent.trim();
        const m = /^:\\s*(\\w+)/.exec((s.nextSibling && s.nextSibling.textContent) || '');
        if (title in out && m) out[title] = m[1];
    }
    return out;
}"""


def _statuses(page, titles) -> dict[str, str | None]:
    """The status each run label shows in the live view ('done', 'failed', ...), None if absent: the
    text after the label's bold ``**label**: status`` (so 'FSVRG' is not read off 'Naive FSVRG')."""
    return page.evaluate(_STATUSES, list(titles))


TERMINAL = {"done", "diverged", "failed", "stopped"}


def _loss_for(cls) -> str:
    """The link's loss for an algorithm: the default (logistic) if it supports it, else the first
    loss it does support (the primal and dual methods of the Appendix: squared), as a user would
    choose it (GD, the other algorithm of the run, supports every loss)."""
    return "" if "logistic" in cls.losses else f"&loss={cls.losses[0]}"


def _walks() -> list[tuple[str, str, list[str]]]:
    """The walk's runs, as (loss, the algorithm the link opens Run with, the algorithms then added one by
    one through the multiselect): every algorithm that takes the default loss (logistic) added to GD in one
    run; the others (the Appendix's primal and dual methods: squared) on the first loss they take, opened
    with FSVRG, and GD added there (it takes every loss).  Each algorithm is added exactly once."""
    by_loss: dict[str, list[str]] = {}
    for name, cls in ALGORITHMS.items():
        by_loss.setdefault("logistic" if "logistic" in cls.losses else cls.losses[0], []).append(name)
    walks = [("logistic", "gd", [n for n in by_loss.pop("logistic") if n != "gd"])]
    for loss, names in by_loss.items():
        walks.append((loss, "fsvrg", names))
    if len(walks) == 1:
        walks.append(("logistic", "fsvrg", []))
    walks[1][2].insert(0, "gd")
    return walks


def test_every_algorithm_can_be_added_and_run(server, page):
    """Walk the registry: on a tiny data set, add each algorithm through the Algorithms multiselect as a
    user would; after each addition it is among the chosen, with no traceback and an enabled Run button;
    then a 3-iteration run of all those chosen (one per loss, :func:`_walks`) ends each of them done or
    diverged, not failed.  (Adding one at a time to a fresh page and running it beside GD, 16 page loads
    and 16 runs, checked the same and took three times as long.)"""
    walks = _walks()
    assert sorted(n for _, _, added in walks for n in added) == sorted(ALGORITHMS), walks
    problems = []
    for loss, first, added in walks:
        open_page(page, f"{server.url}/run?{TINY}&algorithms={first}&iterations=3"
                        + ("" if loss == "logistic" else f"&loss={loss}"))
        run_button(page).wait_for()
        for name in added:
            cls = ALGORITHMS[name]
            multiselect_add(page, "Algorithms", cls.title, re.compile(rf"^{re.escape(cls.title)}(\s.*)?$"))
            shot(page, f"walk-{name}-added")
            shown = [_name_of_title(t) for t in multiselect_values(page, "Algorithms")]
            if name not in shown:
                problems.append(f"{name}: not among the chosen algorithms after adding it (shown: {shown})")
            elif crashes(page):
                problems.append(f"{name}: exception after adding it: {crashes(page)[0]!r}")
            elif run_button(page).count() == 0 or not run_button(page).first.is_enabled():
                problems.append(f"{name}: no enabled Run button after adding it")
        if problems:  # the page is broken: a run of it would say nothing more
            break
        run_button(page).first.click()
        titles = [ALGORITHMS[n].title for n in (first, *added)]
        status = observe(lambda: _statuses(page, titles), lambda s: all(v in TERMINAL for v in s.values()),
                         timeout_ms=240_000, page=page)
        shot(page, f"walk-{loss}-run")
        if crashes(page):
            problems.append(f"{', '.join(added)} ({loss}): exception after Run: {crashes(page)[0]!r}")
        elif not isinstance(status, dict):
            problems.append(f"{', '.join(added)} ({loss}): no statuses after Run ({status!r})")
        else:
            ended = {name: status.get(ALGORITHMS[name].title) for name in added}
            problems += [f"{name}: run status {s!r} on {loss} (want done or diverged)"
                         for name, s in ended.items() if s not in ("done", "diverged")]
    assert not problems, "algorithms that cannot be added and run:\n  " + "\n  ".join(problems)


def test_every_algorithm_opens_from_a_link(server, page):
    """``/run?algorithms=<name>`` opens for every algorithm of the registry: no traceback, a Run button."""
    problems = []
    for name in ALGORITHMS:
        open_page(page, f"{server.url}/run?{TINY}&algorithms={name}&iterations=3{_loss_for(ALGORITHMS[name])}")
        found = observe(lambda: run_button(page).count(), lambda n: n > 0, timeout_ms=3_000, page=page)
        if crashes(page):
            shot(page, f"link-{name}")
            problems.append(f"{name}: exception: {crashes(page)[0]!r}")
        elif not found:
            problems.append(f"{name}: no Run button")
    assert not problems, "links /run?algorithms=<name> that break the page:\n  " + "\n  ".join(problems)


# -- 3. switching presets ----------------------------------------------------------------------------
#: The Data page's generator-knob labels -> the preset config's fields.
KNOB_LABELS = {"words per example": "words_per_example", "Zipf exponent": "zipf_exponent",
               "topic concentration (non-IID)": "dirichlet_concentration",
               "per-node label bias": "node_bias_std", "label noise": "label_noise"}


def _knobs(page) -> dict[str, float]:
    return {field: round(float(number_input(page, label).input_value()), 2) for label, field in KNOB_LABELS.items()}


def _own_knobs(name: str) -> dict[str, float]:
    cfg = preset_config(name)
    return {field: round(float(getattr(cfg, field)), 2) for field in KNOB_LABELS.values()}


def test_switching_presets_starts_from_the_new_presets_knobs(server, page):
    """google-plus-small -> iid -> google-plus-small: the link's data value is the bare preset
    name (no knobs left over from the other preset), and the knob inputs show the preset's own
    values."""
    open_page(page, f"{server.url}/data")
    number_input(page, "Nodes K").wait_for()
    page.get_by_text("Generator knobs").first.click()  # open the expander, as a user looking at them
    seen = []
    for i, name in enumerate(["iid", "google-plus-small"], 1):
        choose_option(page, "Preset", name)
        want = {"preset": name, "link data": name, "knobs": _own_knobs(name)}
        got = observe(lambda: {"preset": selectbox(page, "Preset").input_value(),
                               "link data": query(page).get("data", "google-plus-small"),
                               "knobs": _knobs(page)}, lambda v: v == want, page=page)
        shot(page, f"preset-{i}-{name}")
        seen.append((want, got))
    bad = [f"  to {w['preset']}: want {w}\n{' ' * 13}page {g}" for w, g in seen if w != g]
    assert not bad, "switching presets (google-plus-small -> iid -> google-plus-small):\n" + "\n".join(bad)


# -- 4. links keep the setup between pages -------------------------------------------------------------
def _partition_link(q):
    return {"partition": q.get("partition", "").split(":")[0] or None, "nodes": q.get("nodes")}


def test_link_keeps_the_partition_between_pages(server, page):
    """From /data?partition=shards&nodes=50, the sidebar's Run and then Data keep partition and
    nodes in the address bar."""
    open_page(page, f"{server.url}/data?partition=shards&nodes=50")
    number_input(page, "Nodes for the partition").wait_for()
    want = {"partition": "shards", "nodes": "50"}
    seen = {"data (opened)": observe(lambda: _partition_link(query(page)), lambda v: v == want, page=page)}
    shot(page, "link-1-data")
    go_sidebar(page, "Run")
    run_button(page).wait_for()
    seen["run (sidebar)"] = observe(lambda: _partition_link(query(page)), lambda v: v == want, page=page)
    shot(page, "link-2-run")
    go_sidebar(page, "Data")
    seen["data (sidebar)"] = observe(lambda: _partition_link(query(page)), lambda v: v == want, page=page)
    shot(page, "link-3-data")
    assert all(v == want for v in seen.values()), f"the link's partition, want {want} on every page: {seen}"


def test_choosing_shards_on_data_is_kept_in_the_link_on_run(server, page):
    """Choose shards on Data, click Run in the sidebar: the address bar is not a bare /run."""
    open_page(page, f"{server.url}/data")
    number_input(page, "Nodes K").wait_for()
    choose_option(page, "How the rows are split over nodes", ui.partitioner_label("shards"))
    on_data = observe(lambda: _partition_link(query(page))["partition"], lambda v: v == "shards", page=page)
    go_sidebar(page, "Run")
    run_button(page).wait_for()
    on_run = observe(lambda: _partition_link(query(page))["partition"], lambda v: v == "shards", page=page)
    shot(page, "link-shards-run")
    assert (on_data, on_run) == ("shards", "shards"), \
        f"partition in the link: on Data {on_data!r}, after the sidebar's Run {on_run!r} (url {page.url})"


def test_the_stepsize_sweep_is_in_the_link(server, page):
    """Ticking "Stepsize sweep" puts sweep=1 in the link, and /run?sweep=1 opens with it ticked."""
    base = f"{server.url}/run?{TINY}&algorithms=gd&iterations=3"
    open_page(page, base)
    run_button(page).wait_for()
    tick(page, "Stepsize sweep")
    after_tick = observe(lambda: (checkbox(page, "Stepsize sweep").is_checked(), query(page).get("sweep")),
                         lambda v: v == (True, "1"), page=page)
    shot(page, "sweep-1-ticked")
    open_page(page, base + "&sweep=1")
    run_button(page).wait_for()
    opened = observe(lambda: (checkbox(page, "Stepsize sweep").is_checked(), query(page).get("sweep")),
                     lambda v: v == (True, "1"), page=page)
    warnings = [t for t in page.locator('[data-testid="stAlert"]').all_inner_texts() if "sweep" in t]
    shot(page, "sweep-2-link")
    assert (after_tick, opened, warnings) == ((True, "1"), (True, "1"), []), (
        f"(checked, link's sweep): after ticking {after_tick}, opening ?sweep=1 {opened}; warnings {warnings}")


# -- 5. uploads ----------------------------------------------------------------------------------------
def _sorted_by_label(lines: list[str], descending: bool) -> str:
    rows = sorted((l for l in lines if l.strip()), key=lambda l: float(l.split()[0]), reverse=descending)
    return "\n".join(rows) + "\n"


def _upload(page, path) -> None:
    page.get_by_text("Upload a LIBSVM file").click()
    idle(page)
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name=re.compile("Browse files|Upload")).first.click()
    chooser.value.set_files(str(path))
    page.get_by_text(path.name).first.wait_for()
    idle(page)


def _percent(text: str) -> float | None:
    m = re.fullmatch(r"\s*([0-9.]+)\s*%\s*", text or "")
    return float(m.group(1)) if m else None


def _split_caption(page) -> list[str]:
    return [t for t in page.locator('[data-testid="stCaptionContainer"]').all_inner_texts()
            if re.search(r"random", t, re.I)]


def test_an_upload_sorted_by_label_gets_a_test_set_with_both_classes(server, page, tmp_path):
    """a9a sorted by label (+1 first), no test file: the test set must hold both classes, so
    predicting the majority label is wrong on some of it (the issue: 0.00%), and a caption says
    the split is random."""
    upload = tmp_path / "a9a-sorted-by-label"
    upload.write_text(_sorted_by_label((DATA / "a9a").read_text().splitlines(), descending=True))
    open_page(page, f"{server.url}/data")
    _upload(page, upload)
    majority = observe(lambda: table_cell(page, "predict the majority label"), lambda t: _percent(t) is not None,
                       timeout_ms=60_000, page=page)
    test_n = metric(page, "test examples")
    caption = observe(lambda: _split_caption(page), bool, page=page)
    shot(page, "upload-a9a-sorted")
    value = _percent(majority)
    assert value is not None and 0 < value < 100, (
        f"'predict the majority label' shows {majority!r} on a9a sorted by label ({test_n} test examples): "
        "the test set must hold both classes")
    assert caption, "no caption says which split is in force (e.g. random, stratified)"
    assert not crashes(page)


def test_a_small_upload_gets_few_nodes_and_a_test_set(server, page, tmp_path):
    """The first 150 rows of heart_scale, sorted by label, without a test file: at most 15 nodes
    (not 100), test examples > 0, a test fraction to choose (``test_fraction`` in the link), and on
    Run no test-error axis below zero."""
    upload = tmp_path / "heart150-sorted-by-label"
    upload.write_text(_sorted_by_label((DATA / "heart_scale").read_text().splitlines()[:150], descending=False))
    open_page(page, f"{server.url}/data")
    _upload(page, upload)
    observe(lambda: metric(page, "features d"), lambda t: t == "13", timeout_ms=30_000, page=page)
    shot(page, "upload-heart150")
    nodes, test_n = metric_int(page, "nodes K"), metric_int(page, "test examples")
    majority = table_cell(page, "predict the majority label")
    caption = _split_caption(page)
    assert nodes <= 15 and test_n > 0, f"150 uploaded rows became {nodes} nodes with {test_n} test examples"
    assert _percent(majority) is not None and 0 < _percent(majority) < 100, \
        f"'predict the majority label' shows {majority!r}: the test set must hold both classes"
    assert caption, "no caption says which split is in force (e.g. random, stratified)"

    set_number(page, "Test fraction", 0.4)
    after = observe(lambda: (metric_int(page, "test examples"), query(page).get("test_fraction")),
                    lambda v: 45 <= v[0] <= 75 and v[1] == "0.4", page=page)
    shot(page, "upload-heart150-test-fraction")
    assert isinstance(after, tuple) and 45 <= after[0] <= 75 and after[1] == "0.4", \
        f"(test examples, link's test_fraction) after Test fraction 0.4 on 150 rows: {after}"

    go_sidebar(page, "Run")
    run_button(page).first.click()
    titles = [ALGORITHMS[n].title for n in (_name_of_title(t) for t in multiselect_values(page, "Algorithms"))]
    status = observe(lambda: _statuses(page, titles), lambda s: all(v in TERMINAL for v in s.values()),
                     timeout_ms=120_000, page=page)
    axes = observe(lambda: error_axes(page), lambda a: len(a) > 0, page=page)
    shot(page, "upload-heart150-run")
    assert not crashes(page), crashes(page)
    assert all(v in ("done", "diverged") for v in status.values()), status
    assert axes and all(a["range"][0] >= 0 for a in axes), f"test-error axes (want none below 0): {axes}"
