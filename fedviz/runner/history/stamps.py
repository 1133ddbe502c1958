"""What the history stamps on its rows besides their content: when (:func:`now`) and which browser
session launched them (:func:`session_token`).  Shared by the runs' tables (:mod:`.store`) and the
experiments' (:mod:`.experiment_store`)."""

from __future__ import annotations

import hashlib
import hmac
import os
from datetime import datetime, timezone

#: The key of :func:`session_token`: drawn once per process, since a session lives in one process.
_SESSION_KEY = os.urandom(32)


def session_token(session_id: str | None) -> str | None:
    """What the history stores of a browser session: a keyed hash of its id (None for None).

    Keyed with a per-process secret, so the stored token tells nothing about the id (which a
    visitor's browser holds) and cannot be matched by anyone but this process.
    """
    if session_id is None:
        return None
    return hmac.new(_SESSION_KEY, str(session_id).encode("utf-8"), hashlib.sha256).hexdigest()[:32]


def now() -> str:
    """The current time as the history writes it: UTC, ISO 8601, to the millisecond."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
