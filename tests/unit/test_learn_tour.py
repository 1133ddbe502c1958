"""The guided tour's lessons as data: links, keys and what each lesson says (the sentences under the charts: tests/unit/test_chart_notes.py)."""

import re
from urllib.parse import parse_qsl, urlsplit

import pytest

from fedviz.learn.tour import LESSONS, lesson
from fedviz.runner.config import DEFAULT_DATA, from_query

from conftest import ROOT


@pytest.mark.parametrize("item", LESSONS, ids=[x.key for x in LESSONS])
def test_every_lesson_link_reads_back_as_its_settings_without_a_complaint(item):
    """The link goes through the same parser as any shared link: nothing in it is dropped or refused."""
    config, problems = from_query(item.query)
    assert problems == []
    assert config == item.config
    parts = urlsplit(item.url())
    assert parts.path == item.url_path == item.page.removeprefix("pages/").removesuffix(".py")
    config, problems = from_query(dict(parse_qsl(parts.query)))
    assert problems == [] and config == item.config


def test_lessons_have_distinct_keys_and_titles_and_a_sentence_each():
    assert len({x.key for x in LESSONS}) == len({x.title for x in LESSONS}) == len(LESSONS)
    assert all(x.sentence.strip().endswith((".", ")")) for x in LESSONS)
    assert all(x.page.startswith("pages/") and x.page.endswith(".py") for x in LESSONS)


def test_the_brief_s_lessons_open_the_pages_it_names():
    why = lesson("why-fsvrg-wins")
    assert why.page == "pages/run.py"
    assert [s.name for s in why.config.specs()] == ["fsvrg", "gd", "cocoa-plus"]
    assert why.config.data == DEFAULT_DATA and DEFAULT_DATA.source == "preset:google-plus-small"
    assert lesson("personalisation").page == "pages/personalise.py"
    assert lesson("non-iid").config.data.partition == "reshuffle"
    pages = {x.page for x in LESSONS}
    assert {"pages/learn_properties.py", "pages/learn_efficiency.py", "pages/learn_drift.py",
            "pages/learn_equivalences.py", "pages/learn_rare_features.py"} <= pages
    with pytest.raises(KeyError):
        lesson("nope")


def test_every_lesson_page_that_exists_is_in_the_app_s_navigation():
    """A page on disk but missing from app.py's navigation could not be opened (st.switch_page refuses it)."""
    registered = set(re.findall(r'st\.Page\("([^"]+)"', (ROOT / "app.py").read_text()))
    for item in LESSONS:
        assert item.exists() == (ROOT / item.page).is_file()
        if item.exists():
            assert item.page in registered, f"{item.page} exists but app.py does not list it"


def test_the_efficiency_lesson_compares_federated_methods_only():
    """Eq. (3) ranks distributed methods (Section 2.3.1): the lesson's own setup has no centralised one, and it
    is what the Efficiency page runs and opens (fedviz.learn.efficiency.page_setup)."""
    from fedviz.algorithms import ALGORITHMS
    from fedviz.learn.efficiency import page_setup

    item = lesson("efficiency")
    names = [n for n, _ in item.config.algorithms]
    assert len(names) >= 2 and all(ALGORITHMS[n].federated for n in names)
    assert page_setup(item.config) == item.config


def test_a_lesson_names_only_what_the_dashboard_draws():
    """Issue 20: lesson 3 spoke of the paper's "red stars" (Figure 2's FSVRGR), which no page draws, and of a
    side-by-side it did not show; a page a lesson points to (Compare › …, Learn › …) must exist."""
    app = (ROOT / "app.py").read_text()
    titles = set(re.findall(r'title="([^"]+)"', app))
    for item in LESSONS:
        assert not re.search(r"\b(red|green|blue) (stars|circles|squares)\b", item.sentence), item.key
        for page in re.findall(r"\*\*(\w[\w ]*) ›", item.sentence):
            assert page in titles, (item.key, page)
    assert "Compare › What if: two partitionings" in lesson("non-iid").sentence
    assert "What if: two partitionings" in (ROOT / "pages" / "compare.py").read_text()
