"""The README is a front door and the documents behind it are all reachable and linked correctly.

The README stays short (a reader sees what fedviz is, how to start it and where everything else is), every
relative link of the README and of docs/*.md names a file of the repository, every ``#anchor`` names a
heading of its target as github.com slugs it, and every docs/*.md is reached from the README by following
links.  The anchor rule is checked against github.com's own anchors (the cases below are github-slugger's
fixtures, recorded from GitHub's renderer), not against our implementation's output.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from urllib.parse import unquote

import pytest
from markdown_docs import README, ROOT, anchors, documents, is_external, links, name, rendered, slug

#: The README's length: about 150 lines, this at most (issue 29: a front door, not a lab notebook).
MAX_README_LINES = 160


def test_the_readme_is_a_front_door():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def _resolve(doc: Path, target: str) -> tuple[Path, str]:
    path, _, anchor = target.partition("#")
    return (doc if not path else (doc.parent / unquote(path)).resolve()), anchor


@pytest.mark.parametrize("doc", documents(), ids=name)
def test_every_relative_link_resolves(doc):
    broken = []
    for line, target in links(doc.read_text(encoding="utf-8")):
        if is_external(target):
            continue
        path, anchor = _resolve(doc, target)
        if not path.is_relative_to(ROOT):
            broken.append(f"{name(doc)}:{line}: {target} leaves the repository")
        elif not path.exists():
            broken.append(f"{name(doc)}:{line}: {target} — no such file")
        elif anchor:
            if path.suffix != ".md":
                broken.append(f"{name(doc)}:{line}: {target} — an anchor into a file that is not Markdown")
            elif anchor not in anchors(path.read_text(encoding="utf-8")):
                broken.append(f"{name(doc)}:{line}: {target} — {name(path)} has no heading #{anchor}")
    assert not broken, "\n".join(broken)


def test_every_doc_is_reachable_from_the_readme():
    seen = {README}
    todo = deque([README])
    while todo:
        doc = todo.popleft()
        for _, target in links(doc.read_text(encoding="utf-8")):
            if is_external(target):
                continue
            path, _ = _resolve(doc, target)
            if path.suffix == ".md" and path.exists() and path not in seen:
                seen.add(path)
                todo.append(path)
    missing = [name(d) for d in documents() if d not in seen]
    assert not missing, f"not reachable from README.md by links: {missing}"


# -- the reader itself, against GitHub ----------------------------------------------------------------------------
@pytest.mark.parametrize(("heading", "anchor"), [
    ("heading with a - dash", "heading-with-a---dash"),
    ("heading with an _ underscore", "heading-with-an-_-underscore"),
    ("heading with a period.txt", "heading-with-a-periodtxt"),
    ("exchange.bind_headers(exchange, routing [, bindCallback])", "exchangebind_headersexchange-routing--bindcallback"),
    ("apostrophe’s should be trimmed", "apostrophes-should-be-trimmed"),
    ("I ♥ unicode", "i--unicode"),
    ("en–dash", "endash"),
    ("Привет non-latin 你好", "привет-non-latin-你好"),
    ("bravoCharlieDelta", "bravocharliedelta"),
])
def test_slug_is_githubs(heading, anchor):
    assert slug(heading) == anchor


def test_repeated_headings_are_numbered_as_github_does():
    text = "\n".join(f"## {h}" for h in ["echo", "echo", "echo 1", "echo-1", "echo", "foxtrot-1", "foxtrot",
                                          "foxtrot"])
    assert anchors(text) == ["echo", "echo-1", "echo-1-1", "echo-1-2", "echo-2", "foxtrot-1", "foxtrot",
                             "foxtrot-2"]


def test_headings_are_read_as_rendered_and_not_inside_code_blocks():
    text = ("# The `personalise` **command**\n\n```toml\n# deal_test = true\n```\n\n"
            "## Start here: the tour (`pages/learn_tour.py`)\n## [A link](x.md) and _emphasis_ and snake_case\n")
    assert anchors(text) == ["the-personalise-command", "start-here-the-tour-pageslearn_tourpy",
                             "a-link-and-emphasis-and-snake_case"]
    assert rendered("**Learn › Start here**") == "Learn › Start here"


def test_links_are_read_outside_code():
    text = ("[a](a.md) and ![b](img/b.png \"title\") and `[not](c.md)` and [d](https://x.org/#y)\n"
            "```bash\necho [e](e.md)\n```\n[f](#g)\n")
    assert links(text) == [(1, "a.md"), (1, "img/b.png"), (1, "https://x.org/#y"), (5, "#g")]
