"""Ditto on the Run page (issue 23, point 3) in real headless Chromium: a link with Ditto, Run pressed,
and the distance to the exact v_k(λ_D) drawn on a log axis under its sentence (one short walk)."""

from browser_user import crashes, open_page
from live_server import browser_page, run_button, screenshot

LINK = ("/run?data=google-plus-small%3Fnodes%3D40&algorithms=ditto%2Capfl&ditto.batch_size=0"
        "&ditto.client_fraction=1.0&ditto.ditto_lambda=0.1&iterations=60")


def test_a_ditto_run_draws_the_distance_to_its_exact_models(server, browser):
    with browser_page(browser) as page:
        open_page(page, server.url + LINK)
        run_button(page).click()
        page.get_by_text("The exact target is v_k(λ_D)", exact=False).first.wait_for(timeout=180_000)
        page.get_by_text("this run's λ_D = 0.1", exact=False).first.wait_for()
        page.get_by_text("Node (the worst first)").first.wait_for(timeout=180_000)   # the run has ended
        axes = page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot')]
            .map(el => el._fullLayout).filter(l => l && l.title && l.title.text)
            .map(l => [l.title.text.replace(/<[^>]*>/g, ''), l.yaxis.type])""")
        assert ["Distance of the personal models to the exact Ditto models", "log"] in axes, axes
        assert any(t == "Personal models: test error per node" for t, _ in axes), axes
        assert not crashes(page)
        screenshot(page, "ditto-run", height=4200)  # for a person to look at ($FEDVIZ_SCREENSHOTS)
