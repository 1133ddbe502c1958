"""Learn · Start here: the guided tour, one lesson a link, each opening a page already set up."""

import streamlit as st

from fedviz import ui
from fedviz.learn.tour import LESSONS

ui.through_navigation()

#: The session keys of the run a page shows, by page: opening a lesson there takes the earlier run off the
#: page (it keeps going and stays in the history, on Compare), so the lesson starts on its own setup.  On
#: Efficiency, "eff-setup" too: the page then opens the lesson's own group even after another was chosen.
_RUN_KEYS = ("{}", "{}-meta", "{}-figures")
PAGE_STATE = {"pages/run.py": tuple(k.format("run") for k in _RUN_KEYS),
              "pages/learn_rare_features.py": tuple(k.format("rare-run") for k in _RUN_KEYS),
              "pages/learn_efficiency.py": tuple(k.format("eff-run") for k in _RUN_KEYS) + ("eff-setup",)}

st.title("Start here: a guided tour")
st.markdown(
    "Each lesson opens a page already set up for one idea of Konečný, McMahan, Ramage and Richtárik (2016), "
    "*Federated Optimization*. **Open** sets this tab up with the lesson's settings and takes earlier runs off "
    "its page (they keep going, and Compare's history keeps them); the link beside it opens the same lesson in "
    "a new tab, to share with a class.")
ui.current_config()
ui.show_query_problems()

for i, lesson in enumerate(LESSONS, 1):
    with st.container(border=True):
        head, go = st.columns([5, 1], vertical_alignment="center")
        head.markdown(f"**{i}. {lesson.title}**")
        if not lesson.exists():
            go.button("Soon", key=f"tour-{lesson.key}", disabled=True, width="stretch",
                      help="This page is not part of the dashboard yet.")
            st.caption(lesson.sentence)
            continue
        if go.button(":material/arrow_forward: Open", key=f"tour-{lesson.key}", width="stretch"):
            with ui.guard(f"Opening “{lesson.title}”"):
                ui.set_config(lesson.config)
                for key in PAGE_STATE.get(lesson.page, ()):
                    st.session_state.pop(key, None)
                st.switch_page(lesson.page, query_params=lesson.query)
        st.markdown(f"{lesson.sentence} [Link to share ↗]({lesson.url()})")

ui.sync_link()
