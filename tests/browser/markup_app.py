"""A page that shows hostile strings through fedviz.markup.literal in every Markdown element
the pages use (the test's subject; tests/browser/test_markup_browser.py drives it)."""

import json
import os

import streamlit as st

from fedviz.markup import escape, literal

for k, s in enumerate(json.loads(os.environ["FEDVIZ_MARKUP_CASES"])):
    st.markdown(f"m{k}: before {literal(s)} after")
    st.warning(f"w{k}: before {literal(s)} after")
    st.caption(f"c{k}: before {literal(s)} after")
    st.error(f"e{k}: before {escape(s)} after")
st.markdown("END")
