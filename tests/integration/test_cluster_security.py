"""A cluster only fedviz can use, reached within a deadline (issue 21, points 1 and 2).

Oracles: Dask's own ``Client`` and comm layer, used as an intruder would (no certificate);
a plain HTTP server (Python's ``http.server``) standing in for "a port that answers but is
not Dask"; and the processes' exit codes and stderr.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import pytest

from conftest import ROOT
from fedviz.errors import FedvizError, ParameterError
from fedviz.runner import cluster


class _Listener(http.server.ThreadingHTTPServer):
    """An HTTP server that also says when a client has connected (``connected``)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.connected = threading.Event()

    def verify_request(self, request, client_address) -> bool:
        self.connected.set()
        return True


@pytest.fixture
def http_listener():
    """A listener that accepts connections and speaks HTTP (as Dask's dashboard port does)."""
    server = _Listener(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def http_port(http_listener):
    return http_listener.server_address[1]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_embedded_cluster_refuses_a_client_without_its_certificate(monkeypatch):
    """Issue 21: from another process, ``Client("tcp://127.0.0.1:<port>").run_on_scheduler(os.getpid)``
    returned the dashboard's PID.  Now the scheduler speaks TLS with this process's own certificate."""
    monkeypatch.delenv(cluster.SCHEDULER_ENV, raising=False)
    monkeypatch.setenv(cluster.WORKERS_ENV, "1")
    try:
        client = cluster.get_client()
        address = client.scheduler.address
        assert address.startswith("tls://127.0.0.1:")
        assert client.submit(sum, [1, 2], pure=False).result(timeout=60) == 3  # fedviz itself gets in
        port = address.rsplit(":", 1)[1]
        intruder = textwrap_intruder(port)
        r = subprocess.run([sys.executable, "-c", intruder], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
        outcome = json.loads(r.stdout.strip().splitlines()[-1])
        assert outcome == {"tcp": "refused", "tls": "refused"}, (outcome, r.stderr[-2000:])
        # Dask's HTTP pages have no credentials: whichever port speaks HTTP tells nothing.
        import psutil

        me = psutil.Process()
        ports = {c.laddr.port for p in [me, *me.children(recursive=True)]
                 for c in p.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}
        for port in ports:
            for path in ("/health", "/json/identity.json", "/info/main/workers.html", "/metrics"):
                try:
                    status = urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5).status
                except urllib.error.HTTPError as e:
                    status = e.code
                except OSError:  # not HTTP (the TLS scheduler, a worker's comm port)
                    continue
                assert status == 404, (port, path, status)
    finally:
        cluster.close()


def textwrap_intruder(port: str) -> str:
    """Another local process trying both schemes without the certificate; prints what happened."""
    return f"""
import json, os
from distributed import Client
out = {{}}
for scheme in ("tcp", "tls"):
    try:
        c = Client(f"{{scheme}}://127.0.0.1:{port}", timeout="5s", set_as_default=False)
        out[scheme] = str(c.run_on_scheduler(os.getpid))
        c.close()
    except Exception as e:
        out[scheme] = "refused"
print(json.dumps(out))
"""


def test_a_port_that_is_not_dask_is_one_error_within_the_deadline(monkeypatch, http_port):
    """Issue 21: the CLI hung at 'starting the cluster' on Dask's dashboard port (an HTTP server)."""
    monkeypatch.setenv(cluster.INSECURE_ENV, "1")
    monkeypatch.setenv(cluster.CONNECT_TIMEOUT_ENV, "2")
    outcome = {}

    def connect():
        try:
            cluster.get_client(f"tcp://127.0.0.1:{http_port}")
        except FedvizError as e:
            outcome["error"] = str(e)

    t = threading.Thread(target=connect, daemon=True)
    t.start()
    t.join(60)  # a hang is what failed before; the deadline itself is 2 s
    assert not t.is_alive(), "get_client hung on a non-Dask listener"
    assert "answered as a Dask scheduler within 2 s" in outcome["error"]
    assert "\n" not in outcome["error"]


def test_plain_tcp_needs_an_explicit_yes(monkeypatch):
    monkeypatch.delenv(cluster.INSECURE_ENV, raising=False)
    with pytest.raises(FedvizError, match=f"is plain TCP.*{cluster.INSECURE_ENV}=1"):
        cluster.get_client("tcp://127.0.0.1:8786")
    with pytest.raises(FedvizError, match=f"is plain TCP.*{cluster.INSECURE_ENV}=1"):
        cluster.get_client("127.0.0.1:8786")  # no scheme: Dask's default, TCP


def test_tls_without_settings_is_refused_naming_them(monkeypatch):
    import dask

    with dask.config.set({"distributed.comm.tls.ca-file": None}):
        with pytest.raises(FedvizError, match="DASK_DISTRIBUTED__COMM__TLS__CA_FILE"):
            cluster.get_client("tls://127.0.0.1:8786")


@pytest.mark.parametrize("address", ["tls://a:99999", "tcp://a:0", "tls://a:65536"])
def test_a_port_out_of_range_is_a_parameter_error(address):
    with pytest.raises(ParameterError, match="port 1 to 65535"):
        cluster.get_client(address)


def test_the_connect_deadline_is_checked(monkeypatch):
    monkeypatch.setenv(cluster.CONNECT_TIMEOUT_ENV, "forever")
    with pytest.raises(ParameterError, match=cluster.CONNECT_TIMEOUT_ENV):
        cluster.connect_timeout()


@pytest.mark.parametrize("kind", ["http", "closed"])
def test_cli_exits_2_in_one_line_for_a_scheduler_it_cannot_use(kind, http_port, tmp_path):
    """Issue 21: unreachable schedulers ended with a traceback and exit 1; a non-Dask one hung."""
    port = http_port if kind == "http" else _closed_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FEDVIZ_DB": str(tmp_path / "runs.sqlite"),
           cluster.INSECURE_ENV: "1", cluster.CONNECT_TIMEOUT_ENV: "2"}
    r = subprocess.run([sys.executable, "-m", "fedviz", "experiment", "fedprox-figure2", "--scheduler",
                        f"tcp://127.0.0.1:{port}"], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("fedviz: error: ") and "Traceback" not in r.stderr
    assert f"127.0.0.1:{port}" in r.stderr


def test_cli_stops_on_sigterm_while_connecting(http_listener, tmp_path):
    """SIGTERM while the probe waits on a silent peer: exit 130 at once, not after the deadline."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FEDVIZ_DB": str(tmp_path / "runs.sqlite"),
           cluster.INSECURE_ENV: "1", cluster.CONNECT_TIMEOUT_ENV: "120"}
    p = subprocess.Popen([sys.executable, "-m", "fedviz", "experiment", "fedprox-figure2", "--scheduler",
                          f"tcp://127.0.0.1:{http_listener.server_address[1]}"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    # The probe has connected (after the imports and the command's SIGTERM handler): it now waits on the peer.
    assert http_listener.connected.wait(60), "the command never connected to the listener"
    assert p.poll() is None
    p.terminate()
    _, err = p.communicate(timeout=60)  # well inside the 120 s deadline
    assert p.returncode == 130, err
    assert "Traceback" not in err


def test_replay_calls_only_the_six_sink_calls():
    """Issue 21: ``Replay.apply`` called ``getattr(sink, method)`` with names from worker events."""
    seen = []

    class Sink:
        def __getattr__(self, name):
            seen.append(name)
            return lambda *a, **k: None

    with pytest.raises(FedvizError, match="not a sink call"):
        cluster.decode_calls(json.dumps([["close", []]]))
    with pytest.raises(FedvizError, match="not a sink call"):
        cluster.decode_calls(json.dumps([["warn", ["a", "b"]]]))  # wrong arity
    replay = cluster.Replay(Sink(), ["gd"])
    replay.apply(0, cluster.decode_calls(json.dumps([["warn", ["x"]], ["preparing", ["y"]], ["end", ["gd", "done", ""]]])))
    assert seen == ["warn", "preparing", "end"]
    with pytest.raises(FedvizError, match="not a sink call"):
        replay.apply(3, [("__class__", ())])
    assert seen == ["warn", "preparing", "end"]
