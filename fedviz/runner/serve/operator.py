"""The operator's secret: who may see every run of a shared server (issue 32, point 4).

Before, the operator was whoever arrived from 127.0.0.1 without a proxy header.  Streamlit reports no
address for a loopback peer, so every relay that adds no header (``ssh -L``, socat, nginx's ``stream``
block, or its ``proxy_pass`` without ``proxy_set_header X-Forwarded-For``) carried each visitor in as the
operator, and so was every shell user of the machine.  Jupyter's answer is the anchor: a token, and whoever
presents it is the owner.

The token is a random 32-byte URL-safe text kept in ``operator-token`` beside the run history (the folder of
``FEDVIZ_DB``, or the per-user data directory), created once with mode 0600 so that only the server's own
user can read it, and the same for every server process sharing that history: the operator's link survives
restarts (bookmark it; delete the file to change it).  ``FEDVIZ_OPERATOR_TOKEN`` sets it instead (16
characters at least).  A browser presents it once per tab, as ``?operator=<token>`` in the address
(:func:`operator_link`: printed in the terminal when the server starts serving, and by ``python -m fedviz
operator``); the page then takes it out of the address, so a copied link never carries it.

Nothing here imports Streamlit: the session's side is :func:`fedviz.ui.state.history_viewer`.
"""

from __future__ import annotations

import hmac
import os
import re
import secrets
import sys
import threading
from pathlib import Path

from ...errors import FedvizError

#: The link key a browser presents the token with.
LINK_KEY = "operator"
#: The environment variable that sets the token (else it is read from, or made in, :func:`token_path`).
TOKEN_ENV = "FEDVIZ_OPERATOR_TOKEN"
#: Fewest characters of a token set by the environment (a generated one has 43).
MIN_TOKEN_CHARS = 16
_TOKEN_TEXT = re.compile(r"[A-Za-z0-9_-]+")

_LOCK = threading.Lock()
_ANNOUNCED = False


def token_path() -> Path:
    """``operator-token`` beside the run history (``FEDVIZ_DB``'s folder, or the per-user data directory)."""
    from ..history.store import default_path

    return default_path().parent / "operator-token"


def operator_token() -> str:
    """This server's operator token: ``FEDVIZ_OPERATOR_TOKEN``, else the token file's (made on first use)."""
    env = os.environ.get(TOKEN_ENV, "").strip()
    if env:
        if len(env) < MIN_TOKEN_CHARS or not _TOKEN_TEXT.fullmatch(env):
            raise FedvizError(f"{TOKEN_ENV} must be at least {MIN_TOKEN_CHARS} letters, digits, '-' or '_' "
                              f"(it has {len(env)} characters); unset it to have one made")
        return env
    path = token_path()
    with _LOCK:
        try:
            return _read(path)
        except FileNotFoundError:
            pass
        path.parent.mkdir(parents=True, exist_ok=True)
        token = secrets.token_urlsafe(32)
        try:  # O_EXCL: two servers starting at once agree on the first one's token
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return _read(path)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
        return token


def _read(path: Path) -> str:
    token = path.read_text().strip()
    if not _TOKEN_TEXT.fullmatch(token) or len(token) < MIN_TOKEN_CHARS:
        raise FedvizError(f"{path} does not hold an operator token (delete it to have a new one made)")
    if path.stat().st_mode & 0o077:
        raise FedvizError(f"{path} can be read by other users of this machine (mode "
                          f"{oct(path.stat().st_mode & 0o777)}); delete it to have a new one made with mode 0600")
    return token


def is_operator_token(presented: object) -> bool:
    """Whether ``presented`` is this server's token (in constant time: a guess learns nothing from timing)."""
    if not isinstance(presented, str) or not presented:
        return False
    return hmac.compare_digest(presented.encode(), operator_token().encode())


def operator_link(base_url: str) -> str:
    """The link that makes a browser tab the operator: ``base_url`` with ``?operator=<token>``."""
    return f"{base_url.rstrip('/')}/?{LINK_KEY}={operator_token()}"


def announce(base_url: str, stream=None) -> bool:
    """Print the operator's link once per process (the terminal the server was started in); True if it did."""
    global _ANNOUNCED
    with _LOCK:
        if _ANNOUNCED:
            return False
        _ANNOUNCED = True
    print(f"fedviz: the operator's link (every run of this server listed; keep it private):\n"
          f"  {operator_link(base_url)}", file=stream or sys.stderr, flush=True)
    return True
