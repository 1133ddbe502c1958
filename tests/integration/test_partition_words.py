"""Issue 31's confusion: a file without ``qid:`` and no partition chosen was split iid, and the Data page said
"Partition: iid" while Run and Personalise said "its own nodes".  Every page now names the partition in force
(fedviz.data.build.partition_words); the oracle is the file itself: whether its lines carry ``qid:``."""

import dataclasses

import pytest

from apptest import open_page
from conftest import DATA
from fedviz.data.build import DataSpec
from fedviz.runner.config import RunConfig

PAGES = {"pages/run.py": "partition: ", "pages/personalise.py": "partition: ", "pages/data.py": "Partition: "}


def _expected(source: str | None) -> str:
    if source is None:
        return "the data set's own nodes"  # a preset's users
    with open(DATA / source, encoding="utf-8") as fh:
        has_qid = any(" qid:" in line for line in fh)
    return "natural (the file's qid groups)" if has_qid else "iid"


@pytest.mark.parametrize("source", [None, "heart_scale", "mq2008_fold1_test.txt"])
@pytest.mark.parametrize("page", list(PAGES))
def test_every_page_names_the_partition_in_force(source, page):
    config = RunConfig()
    if source is not None:
        config = dataclasses.replace(config, data=DataSpec(source=str(DATA / source)))
    at = open_page(page, config)
    captions = [c.value for c in at.caption]
    want = PAGES[page] + _expected(source)
    assert any(want in c for c in captions), (want, captions)
    assert not any("its own nodes" in c for c in captions if source is not None), captions
