"""A fresh server listens on loopback only (issue 21, point 4): sharing is one documented switch.

The oracle is the operating system: the sockets the ``streamlit run app.py`` process listens
on (psutil), started exactly as the README starts it, with no address on the command line.
"""

from __future__ import annotations

import subprocess
import sys
import time
import tomllib
import urllib.request

import psutil

from conftest import ROOT
from live_server import free_port


def _listening(pid: int) -> set[str]:
    proc = psutil.Process(pid)
    return {c.laddr.ip for p in [proc, *proc.children(recursive=True)]
            for c in p.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}


def _serve(tmp_path, *extra: str):
    port = free_port()
    log = open(tmp_path / "server.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), *extra],
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            env={**__import__("os").environ, "FEDVIZ_DB": str(tmp_path / "runs.sqlite")})
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2):
                return proc
        except OSError:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()[-2000:]
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("the server did not start")


def test_the_default_server_listens_on_loopback_only(tmp_path):
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["address"] == "127.0.0.1"
    proc = _serve(tmp_path)
    try:
        assert _listening(proc.pid) == {"127.0.0.1"}
    finally:
        proc.terminate()
        proc.wait(30)


def test_the_documented_switch_opens_every_interface(tmp_path):
    doc = (ROOT / "docs" / "sharing.md").read_text()
    assert "streamlit run app.py --server.address 0.0.0.0" in doc
    proc = _serve(tmp_path, "--server.address", "0.0.0.0")
    try:
        assert _listening(proc.pid) & {"0.0.0.0", "::"}
    finally:
        proc.terminate()
        proc.wait(30)
