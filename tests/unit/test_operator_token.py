"""The operator's token (issue 32, point 4): made once, readable by its owner only, the same for every
process on one history, set by the environment if wanted, and compared in constant time."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from fedviz.errors import FedvizError
from fedviz.runner.serve import operator


@pytest.fixture
def history(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDVIZ_DB", str(tmp_path / "runs.sqlite"))
    monkeypatch.delenv(operator.TOKEN_ENV, raising=False)
    return tmp_path


def test_the_token_is_made_once_with_mode_0600_and_found_again_by_another_process(history):
    token = operator.operator_token()
    path = history / "operator-token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(token) >= 43 and operator.operator_token() == token
    # Another process on the same history (a second server, `python -m fedviz operator`) reads the same.
    out = subprocess.run([sys.executable, "-m", "fedviz", "operator", "--url", "http://class.example:8501"],
                         capture_output=True, text=True, env={**os.environ}, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == f"http://class.example:8501/?operator={token}", out


def test_a_token_file_others_can_read_is_refused_not_trusted(history):
    operator.operator_token()
    (history / "operator-token").chmod(0o644)
    with pytest.raises(FedvizError, match="can be read by other users.*mode 0o644"):
        operator.operator_token()


@pytest.mark.parametrize("value", ["short", "has spaces in it and more", "x" * 15])
def test_a_token_from_the_environment_is_checked(history, monkeypatch, value):
    monkeypatch.setenv(operator.TOKEN_ENV, value)
    with pytest.raises(FedvizError, match=f"{operator.TOKEN_ENV} must be at least 16"):
        operator.operator_token()


def test_only_the_token_itself_is_the_operator(history, monkeypatch):
    monkeypatch.setenv(operator.TOKEN_ENV, "a-class-server-token-0123")
    assert operator.is_operator_token("a-class-server-token-0123")
    for guess in ("", None, "a-class-server-token-012", "a-class-server-token-01234", 12345, "A-CLASS-SERVER-TOKEN-0123"):
        assert not operator.is_operator_token(guess)
    assert not (history / "operator-token").exists()  # set by the environment: no file written


def test_the_link_is_announced_once_per_process(history, capsys, monkeypatch):
    monkeypatch.setattr(operator, "_ANNOUNCED", False)
    assert operator.announce("http://localhost:8501") is True
    assert operator.announce("http://localhost:8501") is False
    err = capsys.readouterr().err
    assert err.count("?operator=") == 1 and operator.operator_token() in err
