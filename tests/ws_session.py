"""A Streamlit session without a browser: the websocket protocol the frontend speaks, in Python.

The load test opens many sessions on one server.  Each browser page would also draw its
live charts on the machine under test; a real user's browser does that on their own
machine.  A :class:`WsSession` stands in for such a user: it opens the page's websocket
(``/_stcore/stream``), asks for script runs with the page's query string, presses buttons
by their widget id, and reruns every ``st.fragment(run_every=...)`` on its timer as the
frontend does, so the server does all the work a browser would make it do.  It decodes
the server's messages with Streamlit's own protobuf classes and keeps the text of what
the last runs drew.

Only what the tests need: buttons (trigger values), radios (their option's label) and file uploaders
(the upload as the frontend makes it: ask the session for an upload URL, ``PUT`` the file there with
the XSRF cookie and header, then rerun with the uploader's state naming the file).  Every rerun sends
the widget states set so far, as the frontend does; a widget left out takes its default.
"""

from __future__ import annotations

import http.cookiejar
import itertools
import threading
import time
import urllib.request
import uuid
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.Common_pb2 import UploadedFileInfo
from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

#: The status of a complete script run (not a rerun's early end, not a fragment's own end).
FINISHED = ForwardMsg.FINISHED_SUCCESSFULLY
FRAGMENT_FINISHED = ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY


class WsSession:
    """One Streamlit session of the page at ``url`` (``http://host:port/page?query``).

    A reader thread receives every message; a timer thread sends the fragment reruns.
    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, url: str, timeout: float = 120.0):
        parts = urlsplit(url)
        self.page = parts.path.strip("/")
        self.base = f"{parts.scheme}://{parts.netloc}"
        self.query = parts.query
        self.timeout = timeout
        self._cv = threading.Condition()
        self._finished = 0  # complete script runs so far
        self.fragment_runs = 0  # complete fragment runs so far (the live view's redraws)
        self._buttons: dict[str, str] = {}  # label → widget id
        self._radios: dict[str, tuple[str, list[str]]] = {}  # label → (widget id, options)
        self._uploaders: dict[str, str] = {}  # label → widget id
        self._states: dict[str, WidgetState] = {}  # widget id → the value set by choose/upload
        self._file_urls: dict[str, list] = {}  # request id → the FileURLs the server answered
        self._requests = itertools.count()
        self.session_id = ""
        self._texts: list[str] = []  # of the newest messages, newest last
        self._timers: dict[str, float] = {}  # fragment id → interval (s)
        self._page_hash = ""
        self._closed = threading.Event()
        self._stack = ExitStack()  # websockets ≥ 17.1 wants connect() used as a context manager
        self._ws = self._stack.enter_context(connect(
            f"ws://{parts.netloc}/_stcore/stream", subprotocols=["streamlit"], origin=f"http://{parts.netloc}",
            max_size=None, open_timeout=timeout))
        self._reader = threading.Thread(target=self._read, name="ws-session-reader", daemon=True)
        self._reader.start()
        self._ticker = threading.Thread(target=self._tick, name="ws-session-timers", daemon=True)
        self._ticker.start()

    # -- what the frontend does -------------------------------------------------------------------
    def rerun(self, trigger: str | None = None, fragment: str | None = None) -> None:
        """Ask for a script run: the whole page, or one fragment; ``trigger`` presses a button."""
        msg = BackMsg()
        state = msg.rerun_script
        state.query_string = self.query
        state.page_script_hash = self._page_hash
        state.page_name = self.page
        for value in self._states.values():
            state.widget_states.widgets.add().CopyFrom(value)
        if trigger is not None:
            widget = state.widget_states.widgets.add()
            widget.id = trigger
            widget.trigger_value = True
        if fragment is not None:
            state.fragment_id = fragment
            state.is_auto_rerun = True
        self._ws.send(msg.SerializeToString())

    def load(self) -> float:
        """The first complete script run of the page; returns its seconds from the request."""
        t0 = time.perf_counter()
        self.rerun()
        self.wait_finished(1)
        return time.perf_counter() - t0

    def press(self, label: str) -> None:
        """Press the button whose label ends with ``label`` and wait for that run to finish."""
        with self._cv:
            ids = [wid for text, wid in self._buttons.items() if text.endswith(label)]
            done = self._finished
        assert ids, f"no button {label!r} on the page: {list(self._buttons)}"
        self.rerun(trigger=ids[0])
        self.wait_finished(done + 1)

    def choose(self, label: str, option: str) -> None:
        """Pick ``option`` of the radio labelled ``label`` and wait for that run to finish."""
        with self._cv:
            assert label in self._radios, f"no radio {label!r} on the page: {list(self._radios)}"
            wid, options = self._radios[label]
            done = self._finished
        assert option in options, f"{option!r} is not an option of {label!r}: {options}"
        self._states[wid] = WidgetState(id=wid, string_value=option)
        self.rerun()
        self.wait_finished(done + 1)

    def upload(self, label: str, path: Path) -> None:
        """Upload the file at ``path`` to the uploader labelled ``label`` (its label's start suffices)
        as the frontend does, and wait for the run that reads it to finish."""
        path = Path(path)
        with self._cv:
            ids = [wid for text, wid in self._uploaders.items() if text.startswith(label)]
            done = self._finished
        assert ids, f"no file uploader {label!r} on the page: {list(self._uploaders)}"
        request_id = f"upload-{next(self._requests)}"
        msg = BackMsg()
        msg.file_urls_request.request_id = request_id
        msg.file_urls_request.session_id = self.session_id
        msg.file_urls_request.file_names.append(path.name)
        self._ws.send(msg.SerializeToString())
        with self._cv:
            if not self._cv.wait_for(lambda: request_id in self._file_urls, self.timeout):
                raise TimeoutError(f"{self.page}: no upload URL within {self.timeout:g} s")
            urls = self._file_urls.pop(request_id)[0]
        data = path.read_bytes()
        _put(urljoin(self.base + "/", urls.upload_url.lstrip("/")), path.name, data, self.base)
        value = WidgetState(id=ids[0])
        value.file_uploader_state_value.uploaded_file_info.append(
            UploadedFileInfo(file_id=urls.file_id, name=path.name, size=len(data), file_urls=urls))
        self._states[ids[0]] = value
        self.rerun()
        self.wait_finished(done + 1)

    def wait_text(self, pattern, timeout: float | None = None) -> str:
        """The newest drawn text that matches ``pattern``, waiting for one to be drawn."""
        with self._cv:
            found = self._cv.wait_for(lambda: self._find(pattern) or self._closed.is_set(),
                                      self.timeout if timeout is None else timeout)
        if not found or found is True:
            raise TimeoutError(f"{self.page}: nothing matching {pattern.pattern!r} was drawn")
        return found

    def wait_finished(self, count: int) -> None:
        with self._cv:
            if not self._cv.wait_for(lambda: self._finished >= count or self._closed.is_set(), self.timeout):
                raise TimeoutError(f"{self.page}: no complete script run #{count} within {self.timeout:g} s")
            if self._finished < count:
                raise ConnectionError(f"{self.page}: the websocket closed")

    def text(self, pattern) -> str | None:
        """The newest drawn text that matches the compiled regex ``pattern``."""
        with self._cv:
            return self._find(pattern)

    def _find(self, pattern) -> str | None:
        for text in reversed(self._texts):
            if pattern.search(text):
                return text
        return None

    def close(self) -> None:
        self._closed.set()
        self._stack.close()
        self._reader.join(10)
        self._ticker.join(10)

    def __enter__(self) -> "WsSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the threads ----------------------------------------------------------------------------
    def _read(self) -> None:
        try:
            for payload in self._ws:
                self._on(ForwardMsg.FromString(payload))
        except ConnectionClosed:
            pass
        finally:
            with self._cv:
                self._closed.set()
                self._cv.notify_all()

    def _on(self, msg: ForwardMsg) -> None:
        kind = msg.WhichOneof("type")
        with self._cv:
            if kind == "new_session":
                self.session_id = msg.new_session.initialize.session_id
            elif kind == "file_urls_response":
                self._file_urls[msg.file_urls_response.response_id] = list(msg.file_urls_response.file_urls)
                self._cv.notify_all()
            elif kind == "navigation":  # the page st.navigation ran: the next rerun asks for it again
                self._page_hash = msg.navigation.page_script_hash
            elif kind == "auto_rerun":  # the frontend's timers: set by these, ended by the next
                self._timers[msg.auto_rerun.fragment_id] = msg.auto_rerun.interval
            elif kind == "stop_auto_rerun":
                for fragment in msg.stop_auto_rerun.fragment_ids:
                    self._timers.pop(fragment, None)
            elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
                element = msg.delta.new_element
                which = element.WhichOneof("type")
                if which == "button":
                    self._buttons[element.button.label] = element.button.id
                elif which == "radio":
                    self._radios[element.radio.label] = (element.radio.id, list(element.radio.options))
                elif which == "file_uploader":
                    self._uploaders[element.file_uploader.label] = element.file_uploader.id
                text = {"markdown": lambda: element.markdown.body, "alert": lambda: element.alert.body,
                        "progress": lambda: element.progress.text}.get(which)
                if text is not None:
                    self._texts = self._texts[-200:] + [text()]
                    self._cv.notify_all()
            elif kind == "script_finished" and msg.script_finished == FINISHED:
                self._finished += 1
                self._cv.notify_all()
            elif kind == "script_finished" and msg.script_finished == FRAGMENT_FINISHED:
                self.fragment_runs += 1

    def _tick(self) -> None:
        due: dict[str, tuple[float, float]] = {}  # fragment id → (interval, when next)
        while not self._closed.wait(0.05):
            now = time.monotonic()
            with self._cv:
                timers = dict(self._timers)
            for fragment, interval in timers.items():
                if due.get(fragment, (None,))[0] != interval:  # new, or a new interval: restart it
                    due[fragment] = (interval, now + interval)
                if now >= due[fragment][1]:
                    due[fragment] = (interval, now + interval)
                    try:
                        self.rerun(fragment=fragment)
                    except ConnectionClosed:
                        return
            for fragment in set(due) - set(timers):
                del due[fragment]


def _put(url: str, name: str, data: bytes, base: str) -> None:
    """``PUT`` one file to a Streamlit upload URL as the frontend does: a multipart form, with the XSRF
    token of the cookie the server sets (read from its health endpoint) echoed in a header."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    opener.open(base + "/_stcore/health", timeout=30).read()
    token = next((c.value for c in jar if c.name == "_streamlit_xsrf"), "")
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"UploadedFile\"; filename=\"{name}\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    request = urllib.request.Request(url, data=body, method="PUT", headers={
        "Content-Type": f"multipart/form-data; boundary={boundary}", "X-Xsrftoken": token})
    with opener.open(request, timeout=120) as response:
        assert response.status in (200, 204), f"upload of {name}: HTTP {response.status}"
