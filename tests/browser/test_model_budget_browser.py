"""A small upload with a large model is refused within the model's budget (issue 32, point 1).

The issue's attack: a 143 KB LIBSVM file of 200 classes over 5,000 features (4,000 rows), uploaded on
Data, took the server from 415 MB to a 9,186 MB high-water mark (the optimum's block preconditioner,
d × C × C floats twice).  Here a file of that shape is uploaded to a server of its own, and the page must
say the sizes and the limit while the server's high-water mark (``VmHWM``, read from /proc, the kernel's
count) stays under 1.5 GB above its value before the upload.
"""

from __future__ import annotations

import numpy as np
import pytest
from browser_user import observe, scroll_to, shot
from live_server import StreamlitServer, browser_page, idle

pytestmark = pytest.mark.slow  # a server of its own: its high-water mark must be this test's alone

ROWS, WIDTH, CLASSES = 4_000, 5_000, 200
#: The acceptance's bound on the server's growth, MB.
MAX_GROWTH_MB = 1_500


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("model-budget")
    with StreamlitServer(tmp / "runs.sqlite", tmp / "server.log") as s:
        yield s


def _hwm_mb(server) -> float:
    for line in open(f"/proc/{server.pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM line: is the server still alive?")


def _write(path) -> None:
    rng = np.random.default_rng(32)
    lines = []
    for i in range(ROWS):
        cols = np.sort(rng.choice(WIDTH, 3, replace=False)) + 1
        lines.append(f"{i % CLASSES} " + " ".join(f"{c}:{v:.2f}" for c, v in zip(cols, rng.random(3))))
    path.write_text("\n".join(lines) + "\n")


def test_a_two_hundred_class_upload_is_refused_in_a_sentence_within_the_budget(server, browser, tmp_path):
    path = tmp_path / "classes200.svm"
    _write(path)
    with browser_page(browser, timeout_ms=120_000) as page:
        page.goto(server.url + "/data")
        idle(page)
        before = _hwm_mb(server)
        page.get_by_text("Upload a LIBSVM file").click()
        idle(page)
        page.locator('[data-testid="stFileUploader"]').first.locator("input[type=file]").set_input_files(str(path))
        said = observe(lambda: page.locator("body").inner_text(), lambda text: "FEDVIZ_MAX_MODEL_MB" in text,
                       timeout_ms=60_000, page=page)
        scroll_to(page, lambda: page.get_by_text("FEDVIZ_MAX_MODEL_MB").first)
        shot(page, "model-budget-refusal")
        grown = _hwm_mb(server) - before
    assert "FEDVIZ_MAX_MODEL_MB" in said, said[-2000:]
    assert f"{WIDTH:,} features × {CLASSES} classes" in said
    assert "Traceback" not in said
    assert grown < MAX_GROWTH_MB, f"the server's high-water mark grew by {grown:.0f} MB"
