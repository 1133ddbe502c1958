"""Issue 20's words and warnings in real headless Chromium against ``streamlit run app.py``: each preset
shows its own test fraction; a test file disables it and says why; the per-node majority's "n/a" is
explained; small nodes are warned about on Data and on Run; a slow first iteration is announced before
Run; the favicon is served by the app itself (no request leaves the machine for it); the warm-up says how
long it has left."""

import re
import time

import pytest

from browser_user import choose_option, go_sidebar, number_input, observe, open_page, set_text, table_cell
from conftest import DATA
from live_server import StreamlitServer, browser_page, idle


@pytest.fixture
def page(server, browser):
    with browser_page(browser) as pg:
        yield pg


def _fraction(page) -> str:
    return number_input(page, "Test fraction").input_value()


def test_each_preset_shows_its_own_test_fraction(server, page):
    """Switching presets kept 0.25 where fedprox-synthetic's own is 0.1 (pages/data.py seeded one key for all)."""
    from fedviz.data.presets import preset_config

    open_page(page, f"{server.url}/data")
    want = f"{preset_config('google-plus-small').test_fraction:.2f}"
    seen = observe(lambda: _fraction(page), lambda v: v == want, page=page)  # CI, loaded, once read it mid-rerun
    assert seen == want, f"the first preset's Test fraction shows {seen}, its own is {want}"
    for name in ("fedprox-synthetic", "iid", "fedprox-synthetic"):
        choose_option(page, "Preset", name)
        want = f"{preset_config(name).test_fraction:.2f}"
        seen = observe(lambda: _fraction(page), lambda v: v == want, page=page)
        assert seen == want, f"after choosing {name}, Test fraction shows {seen}, its own is {want}"
    assert "test_fraction" not in page.url  # its own fraction: nothing to carry in the link


def _upload(page, path, which: int) -> None:
    page.locator('[data-testid="stFileUploader"]').nth(which).locator("input[type=file]").set_input_files(str(path))
    page.get_by_text(path.name).first.wait_for()
    idle(page)


def test_a_test_file_disables_the_fraction_and_small_nodes_are_warned_on_data_and_run(server, page):
    """a9a with a9a.t: Test fraction disabled with its reason, the per-node majority's n/a explained, no
    '% of features on fewer than 1,000 nodes' at K = 100; Dirichlet α = 0.1 leaves one-row nodes: warned on
    Data and on Run."""
    open_page(page, f"{server.url}/data")
    page.get_by_text("Upload a LIBSVM file").click()
    idle(page)
    _upload(page, DATA / "a9a", 0)
    _upload(page, DATA / "a9a.t", 1)
    observe(lambda: table_cell(page, "per-node majority"), lambda t: t.strip() == "n/a", timeout_ms=60_000, page=page)
    table_majority = table_cell(page, "predict the majority label").strip().rstrip("%")
    assert number_input(page, "Test fraction").is_disabled()
    page.get_by_text("Test fraction: not used — the test file is the test set").first.wait_for()
    page.get_by_text("per-node majority: n/a — the test rows come from a separate test file").first.wait_for()
    body = page.locator("body").inner_text()
    assert "fewer than 1,000 nodes." not in body and "fewer than a tenth of the 100 nodes" in body

    choose_option(page, "How the rows are split over nodes", "Label skew (Dirichlet)")
    set_text(page, "α", "0.1")
    warning = re.compile(r"\d+ of 100 nodes hold fewer than 5 training rows \(\d+ hold a single row\)")
    page.get_by_text(warning).first.wait_for(timeout=60_000)
    go_sidebar(page, "Run")
    page.get_by_text(warning).first.wait_for(timeout=60_000)

    # The sentences under the charts follow the curves: GD is said to sit at the majority rate only when its
    # drawn test error is within a point of it (on a9a it was said at 16% against 23.6%).
    from live_server import run_button

    run_button(page).first.click()
    page.get_by_text(re.compile(r"\bGD: (done|diverged)")).first.wait_for(timeout=180_000)
    page.get_by_text(re.compile(r"CoCoA\+: (done|diverged)")).first.wait_for(timeout=180_000)
    page.get_by_text(re.compile(r"FSVRG: (done|diverged)")).first.wait_for(timeout=180_000)
    idle(page)
    gd_last = page.evaluate("""() => {
        for (const el of document.querySelectorAll('.js-plotly-plot')) {
            const fig = (el._fullLayout && el._fullLayout.title && el._fullLayout.title.text) || '';
            if (!/test error/i.test(fig.replace(/<[^>]*>/g, ''))) continue;
            const t = el._fullData.find(t => t.name === 'GD' && t.y && t.y.length);
            if (t) return Array.from(t.y).at(-1);
        }
        return null;
    }""")
    majority = float(table_majority) / 100
    body = page.locator("body").inner_text()
    assert gd_last is not None and "sits at the majority rate" not in body
    said = "GD is at" in body and "within 1 point of predict majority" in body
    assert said == (abs(gd_last - majority) <= 0.01), (gd_last, majority, said)
    page.get_by_text("per-node majority: n/a — the test rows come from a separate test file").first.wait_for()


def test_the_favicon_is_served_by_the_app_with_the_network_blocked(server, browser):
    """page_icon=":material/hub:" made every page fetch its icon from a font CDN (an error offline)."""
    from urllib.parse import urlsplit

    external, failed = [], []
    with browser_page(browser) as page:
        def route(r):
            if urlsplit(r.request.url).hostname in ("127.0.0.1", "localhost"):
                r.continue_()
            else:  # offline: nothing leaves the machine
                external.append(r.request.url)
                r.abort()

        page.route("**/*", route)
        page.on("requestfailed", lambda req: failed.append(req.url))
        for path in ("/", "/data", "/run"):
            open_page(page, server.url + path)
            icon = observe(lambda: page.evaluate(
                "() => [...document.querySelectorAll('link[rel~=\"icon\"]')].map(l => l.href)"),
                lambda hrefs: hrefs and all("/media/" in h for h in hrefs), page=page)
            assert icon and all(urlsplit(h).hostname == "127.0.0.1" for h in icon), f"{path}: favicon at {icon}"
        page.wait_for_timeout(500)
    icon_requests = [u for u in external + failed if re.search(r"gstatic|favicon|/media/|\.svg|\.png", u)]
    assert not icon_requests, f"favicon requests outside the app or failed: {icon_requests}"


def test_the_tuning_rule_is_said_once_for_all_tuned_algorithms(server, page):
    """The ~70-word 'How tuning chose' paragraph was repeated for each tuned algorithm (its grid centre
    differed); the rule is one caption, each algorithm's grid is in its own note."""
    from live_server import run_button

    open_page(page, f"{server.url}/run?data=identical-nodes&algorithms=gd,fsvrg&iterations=12&tune=1")
    run_button(page).first.click()
    page.get_by_text(re.compile(r"FSVRG \(stepsize [\d.e+-]+, tuned.*\): done")).first.wait_for(
        timeout=180_000)
    page.get_by_text(re.compile(r"GD \(stepsize [\d.e+-]+, tuned.*\): done")).first.wait_for(
        timeout=60_000)
    idle(page)
    rules = page.get_by_text(re.compile("^How tuning chose")).all_inner_texts()
    assert len(rules) == 1, rules
    body = page.locator("body").inner_text()
    grids = re.findall(r"over the grid stepsize = [\d.e+-]+ × \d+\^k", body)
    assert len(grids) == 2, [line for line in body.splitlines() if "tuned" in line]


@pytest.mark.alone  # an estimate of seconds left, read against the seconds that pass
def test_pages_say_how_long_the_warm_up_has_left(browser, tmp_path):
    """The first click in the first minutes after start waited 29 s for the background compile without a word.
    A server with its warm-up on and an empty kernel cache: every page shows the banner with a time left
    that falls; the page goes on working meanwhile."""
    env = {"FEDVIZ_WARMUP": "1", "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")}
    banner = re.compile(r"Warming up the kernels: about (\d+) s left \((\d+) of (\d+) steps compiled\)")
    with StreamlitServer(tmp_path / "runs.sqlite", tmp_path / "server.log", env=env) as s, \
            browser_page(browser) as page:
        open_page(page, s.url + "/data")
        first = page.get_by_text(banner).first.inner_text()
        assert banner.search(first), first
        go_sidebar(page, "Run")
        page.get_by_text(banner).first.wait_for()

        def read() -> str:
            return page.get_by_text(banner).first.inner_text()
        # Until a step has finished, the estimate is the table's seconds, timed on another machine (a slower CPU
        # showed 44 s left, then 65 s once it had timed a step); from then on it is rescaled by this machine's own
        # steps and falls.
        timed = observe(read, lambda t: int(banner.search(t)[2]) >= 1, timeout_ms=90_000, page=page)
        later = observe(read, lambda t: banner.search(t)[2] != banner.search(timed)[2], timeout_ms=60_000, page=page)
        a, b = banner.search(timed), banner.search(later)
        assert a and b and int(b[2]) > int(a[2]) >= 1, (timed, later)  # steps done: the banner follows them
        assert int(b[1]) <= int(a[1]) + 5, (timed, later)  # the time left falls (a little slack: re-estimated)
        # Issue 31, point 9: at 1024×768 the banner (three lines in a box) pushed Home's Reproduce button to the
        # screen's bottom edge; it is one line now, and the button sits clear of the edge.
        small = browser.new_context(viewport={"width": 1024, "height": 768})
        try:
            home = small.new_page()
            home.set_default_timeout(90_000)
            open_page(home, s.url + "/")
            home.get_by_text(banner).first.wait_for()
            box = home.get_by_role("button", name=re.compile("Reproduce")).first.bounding_box()
            assert box and box["y"] + box["height"] <= 768 - 100, box
            # Issue 31, point 1: the first click said "Compiling kernels (first run only)…" and nothing of how
            # long.  Clicked while the warm-up still compiles, it says the seconds its kernels take on this
            # machine, and they take no more than that (within the estimate's own slack: twice, and 15 s).
            home.get_by_role("button", name=re.compile("Reproduce")).first.click()
            clicked = time.monotonic()
            said = re.compile(r"Compiling this run's kernels \(once per server\): about ([\d,]+) s in all")
            moved = re.compile(r"\b[1-9]\d*%")  # the bar's text once an iteration is in (0% while it prepares)
            bar = home.locator('[data-testid="stProgress"]').first
            first = observe(bar.inner_text, lambda t: bool(said.search(t) or moved.search(t)), timeout_ms=90_000,
                            page=home)
            estimate = said.search(first)
            home.locator('[data-testid="stProgress"]').filter(has_text=moved).first.wait_for(timeout=180_000)
            waited = time.monotonic() - clicked
            if estimate:
                assert waited <= 2 * int(estimate[1].replace(",", "")) + 15, (first, waited)
            else:  # the warm-up had compiled them: nothing to wait for
                assert waited <= 15, (first, waited)
        finally:
            small.close()


def test_run_warns_before_dane_s_slow_first_iteration(server, page):
    """The paper's DANE (the exact local solver, μ = 0) on the default data gave no word before its long
    first iteration; the warning, with the estimate, is on the page before Run is pressed, and goes with
    the 'svrg' solver and with DANE's default (its safeguard starts μ at L̄/1024: a short first iteration)."""
    from fedviz.algorithms.spec import AlgorithmSpec
    from fedviz.runner import cache
    from fedviz.runner.config import DEFAULT_DATA
    from fedviz.runner.slow import first_iteration_seconds

    paper = AlgorithmSpec("dane", (("mu", 0.0), ("safeguard", False)))
    seconds, _ = first_iteration_seconds(cache.problem(DEFAULT_DATA), paper)
    open_page(page, f"{server.url}/run?algorithms=fsvrg,dane&dane.mu=0&dane.safeguard=false")
    page.get_by_text(f"DANE's first iteration will take about {seconds:.0f} s here").first.wait_for()
    for link in ("algorithms=fsvrg,dane&dane.mu=0&dane.safeguard=false&dane.solver=svrg", "algorithms=fsvrg,dane"):
        open_page(page, f"{server.url}/run?{link}")
        assert page.get_by_text("first iteration will take about").count() == 0, link


def test_unseen_nodes_of_a_test_file_get_the_remedy_that_works(server, page):
    """Issue 31, point 3: a9a with a9a.t, Dirichlet 0.1, 50 nodes, unseen 0.2 advised raising the test fraction,
    which the test file disables, and said the unseen nodes were scored on their 0 test rows.  The advice now
    names the deal-test option; ticking it (as the advice says) gives the unseen nodes test rows to be scored on."""
    from browser_user import set_number, tick
    from fedviz.data.split import DEAL_LABEL

    open_page(page, f"{server.url}/data")
    page.get_by_text("Upload a LIBSVM file").click()
    idle(page)
    _upload(page, DATA / "a9a", 0)
    _upload(page, DATA / "a9a.t", 1)
    choose_option(page, "How the rows are split over nodes", "Label skew (Dirichlet)")
    set_text(page, "α", "0.1")
    set_number(page, "Nodes for the partition", 50)
    set_number(page, "Unseen nodes (share)", 0.2)
    advice = re.compile(r"\d+ of the \d+ unseen nodes have no test rows")
    page.get_by_text(advice).first.wait_for(timeout=60_000)
    body = page.locator("body").inner_text()
    said = next(line for line in body.splitlines() if advice.search(line))
    assert DEAL_LABEL in said and "test fraction" not in said, said
    assert "scored on their 0 test rows" not in body
    tick(page, DEAL_LABEL)
    scored = re.compile(r"scored on their [\d,]+ test rows")
    # Both, not the advice's going alone: mid-rerun the page has dropped the advice before it draws the rest.
    gone = observe(lambda: page.locator("body").inner_text(),
                   lambda text: not advice.search(text) and scored.search(text), timeout_ms=60_000, page=page)
    assert not advice.search(gone) and scored.search(gone), gone
