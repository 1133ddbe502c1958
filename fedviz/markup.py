"""User text inside Markdown, shown as text (issue 21, point 5).

Streamlit renders every string given to ``st.markdown``, ``st.caption``, ``st.warning``
and the like as Markdown with its own extensions: links and images (``[t](url)``,
``![t](url)``, which make a visitor's browser fetch a stranger's URL), ``:red[…]`` colours,
``:material/…:`` icons and ``:emoji:`` short codes, and ``$…$`` math.  A link key, an
experiment or axis name, a label or an uploaded file's name is a visitor's text: it must
reach the page as those characters and nothing else.

:func:`literal` puts such text in an inline code span, inside which Markdown interprets
nothing (no emphasis, links, directives, short codes or math), with a fence longer than any
run of backticks inside; line ends become spaces, as a name fits on one line.  This module
imports no Streamlit: the pages call it, tests check it in a real browser
(tests/browser/test_markup_browser.py).
"""

from __future__ import annotations

import re

_TICKS = re.compile(r"`+")
#: Longer text is cut: a name is no essay, and a page must not be filled by one.
MAX_CHARS = 200


def literal(text: object, *, limit: int = MAX_CHARS) -> str:
    """``text`` as a Markdown inline code span that renders exactly its characters.

    Control characters and line ends become spaces; text beyond ``limit`` characters is
    cut with an ellipsis after the span.  The one character added: a zero-width space inside
    ``:material/``, which Streamlit would otherwise rewrite even in code.
    """
    s = "".join(" " if (ord(c) < 32 or ord(c) == 127) else c for c in str(text))
    # Streamlit rewrites ':material/name:' before parsing, code spans included: a zero-width
    # space after the colon keeps the characters a reader sees and breaks the pattern.
    s = s.replace(":material/", ":\u200bmaterial/")
    cut = len(s) > limit
    s = s[:limit]
    if not s.strip():
        s = s + "\u00a0" if s else "\u00a0"  # an empty or blank span would not render as a span
    longest = max((len(m) for m in _TICKS.findall(s)), default=0)
    fence = "`" * (longest + 1)
    # A span that starts or ends with a backtick needs a space inside its fence (CommonMark
    # strips one space on each side when both are present).
    pad = " " if s.startswith("`") or s.endswith("`") or (s.startswith(" ") and s.endswith(" ")) else ""
    return f"{fence}{pad}{s}{pad}{fence}" + ("…" if cut else "")


#: ASCII punctuation with a meaning somewhere in Streamlit's Markdown (CommonMark lets a backslash
#: escape every ASCII punctuation character, so escaping one without a meaning is harmless).
_SPECIAL = frozenset("\\`*_{}[]()<>#+-.!|~:$&^=\"'")


def escape(text: object) -> str:
    """``text`` as Markdown that renders its characters in the surrounding prose: every character
    with a Markdown meaning backslash-escaped, line ends as spaces, and ``:material/`` and bare URLs
    (``https://``, ``www.``) broken by a zero-width space, which a reader does not see.  For sentences that carry a visitor's text (an error naming an uploaded file)."""
    s = "".join(" " if (ord(c) < 32 or ord(c) == 127) else c for c in str(text))
    s = s.replace(":material/", ":\u200bmaterial/")
    # GFM links bare URLs ("https://…", "www.…") whatever their escapes: a zero-width space breaks them.
    s = s.replace("://", ":\u200b//").replace("www.", "www\u200b.").replace("WWW.", "WWW\u200b.")
    return "".join("\\" + c if c in _SPECIAL else c for c in s)


__all__ = ["MAX_CHARS", "escape", "literal"]
