"""The guided tour's lessons as data, and the sentences under the convergence charts."""

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
    assert lesson("personalisation").page == "pages/data.py"
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
