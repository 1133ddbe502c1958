"""The wire between a worker's task and its caller: the sink calls a run makes, numbered, kept and
streamed as Dask events on a topic (:class:`Recorder`), as JSON (:func:`encode_calls`: data, never
code), and applied on the caller's side once each, in number order (:class:`Replay`).

A task run again after its worker died replays the same calls (the computation is deterministic in
its seeds), so the replay skips numbers it has applied, and the task's returned list fills whatever
the stream missed.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import queue
import time
from dataclasses import replace
from typing import Any, Callable

import numpy as np

from ...algorithms.spec import AlgorithmSpec
from ...errors import FedvizError
from ...problems import metrics
from ...problems.pernode import NodeScores
from ..codec import decode_float, to_json
from ..execute import Sink
from ..history.store import FLOAT_FIELDS
from ..job import Entry
from ..loop import IterationRecord

log = logging.getLogger(__name__)

#: The longest a streamed call waits on the worker before it is sent (seconds).
STREAM_INTERVAL = 0.25
#: The most per-node values a run streams per algorithm and per metric (:func:`node_stride`): 100,000
#: float32 values are 400 kB (533 kB as base64).  A tenth of what the page keeps
#: (:data:`~fedviz.problems.pernode.NODE_HISTORY_VALUES`): a stream's events pass through the scheduler,
#: which keeps the recent ones; the node picker's curve needs no more points than a screen has pixels.
NODE_STREAM_VALUES = 100_000


def node_stride(iterations: int, K: int, budget: int | None = None) -> int:
    """Every how many iterations a run streams its per-node vectors: the least power of two s such that
    the kept iterations (0, s, 2s, … up to ``iterations``, and the last) hold at most ``budget`` values
    of K nodes (when not even that fits, the least power of two ≥ ``iterations``: only the first and the
    last vectors are sent)."""
    budget = NODE_STREAM_VALUES if budget is None else budget
    s = 1
    while (iterations // s + 2) * K > budget and s < max(iterations, 1):
        s *= 2
    return s


class Recorder:
    """A sink that numbers and keeps every call and streams them as Dask events on ``topic``.

    A record keeps its per-node vectors (every metric's, :class:`~fedviz.problems.pernode.NodeScores`) at the
    iterations of :func:`node_stride` and at the last record of its algorithm (whose status is not
    'running'): the page's histogram, node picker and node curve, as a run in this process has them.
    ``iterations``: the job's, for the stride (None: every record keeps its vectors).
    """

    def __init__(self, topic: str | None, attempt: str, emit: Callable[[str, Any], None] | None, tag: str = "",
                 iterations: int | None = None):
        self.topic, self.attempt, self.emit, self.tag = topic, attempt, emit, tag
        self.iterations = iterations
        self.calls: list[tuple[str, tuple]] = []
        self._sent = 0
        self._last = time.monotonic()

    def _add(self, method: str, *args) -> None:
        self.calls.append((method, args))
        if method in ("started", "end") or time.monotonic() - self._last >= STREAM_INTERVAL:
            self.flush()

    def flush(self) -> None:
        if self.emit is None or self.topic is None or self._sent == len(self.calls):
            return
        batch = self.calls[self._sent:]
        try:
            self.emit(self.topic, {"tag": self.tag, "attempt": self.attempt, "first": self._sent,
                                   "calls": encode_calls(batch)})
        except Exception as e:  # noqa: BLE001 - the stream is a courtesy: the result carries every call
            log.debug("streaming failed: %s", e)
        self._sent = len(self.calls)
        self._last = time.monotonic()

    def preparing(self, message: str) -> None:
        self._add("preparing", message)

    def warn(self, text: str) -> None:
        self._add("warn", text)

    def tuned(self, label: str, result) -> None:
        pass  # not streamed: the caller's sinks read the choice from retuned's note; the pilots stay here

    def retuned(self, old: str, entry: Entry, note: str) -> None:
        self._add("retuned", old, entry.spec, note)  # the spec: an Entry holds unpicklable views

    def started(self, **info) -> None:
        self._add("started", info)

    def record(self, label: str, rec) -> None:
        if rec.nodes is not None and self.iterations is not None and rec.status == "running":
            K = max((v.size for v in rec.nodes.values.values()), default=0)
            if rec.iteration % node_stride(self.iterations, K):
                rec = replace(rec, nodes=None)
        self._add("record", label, rec)

    def end(self, label: str, status: str, message: str) -> None:
        self._add("end", label, status, message)

    def tick(self) -> None:
        pass  # commits are the caller's business; nothing to send


def encode_calls(calls) -> str:
    """A sink's calls as strict JSON: what the stream carries (data, never code: a record's fields, a
    spec's name, hyperparameters and label), read back by :func:`decode_calls`.  A record's per-node
    vectors, when it has them, ride under ``"nodes"``: each metric's float32 values as base64 of their
    little-endian bytes (exact, and a third of a decimal list's size)."""
    out = []
    for method, args in calls:
        if method == "record":
            label, rec = args
            fields = rec.as_dict()
            if rec.nodes is not None:
                fields["nodes"] = {"iteration": int(rec.nodes.iteration),
                                   "values": {name: base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode()
                                              for name, v in rec.nodes.values.items()}}
            args = (label, fields)
        elif method == "retuned":
            old, spec, note = args
            args = (old, spec.as_json(), note)
        out.append((method, args))
    return to_json(out)


#: The calls a :class:`Recorder` streams, and how many arguments each takes.
_ARITY = {"preparing": 1, "warn": 1, "retuned": 3, "started": 1, "record": 2, "end": 3}


def decode_calls(text: str) -> list[tuple[str, tuple]]:
    """The calls :func:`encode_calls` wrote (a registered algorithm's spec; NaN and ±inf restored)."""
    out = []
    calls = json.loads(text)
    if not isinstance(calls, list):
        raise FedvizError("a run's stream is not a list of calls")
    for call in calls:
        if not (isinstance(call, list) and len(call) == 2 and call[0] in _ARITY and isinstance(call[1], list)
                and len(call[1]) == _ARITY[call[0]]):
            raise FedvizError(f"a run's stream holds something that is not a sink call: {str(call):.80}")
        method, args = call
        if method == "record":
            label, fields = args
            nodes = _decode_nodes(fields.pop("nodes", None))
            fields = {k: (decode_float(v) if k in FLOAT_FIELDS else v) for k, v in fields.items()}
            args = (label, replace(IterationRecord.from_dict(fields), nodes=nodes))
        elif method == "retuned":
            old, spec, note = args
            args = (old, AlgorithmSpec(spec["name"], spec["hyper"], spec["label"], spec["group"]), note)
        elif method == "started":
            info = dict(args[0])
            for key in ("f_star", "optimum_test_error"):
                if info.get(key) is not None:
                    info[key] = decode_float(info[key])
            args = (info,)
        out.append((method, tuple(args)))
    return out


def _decode_nodes(encoded) -> NodeScores | None:
    """The per-node vectors :func:`encode_calls` wrote (registered metrics only), or None."""
    if encoded is None:
        return None
    try:
        values = {}
        for name, text in encoded["values"].items():
            metrics.get(name)
            values[name] = np.frombuffer(base64.b64decode(text, validate=True), dtype="<f4").astype(np.float32)
        return NodeScores(int(encoded["iteration"]), values)
    except (KeyError, TypeError, ValueError, AttributeError, binascii.Error) as e:
        raise FedvizError(f"a run's stream holds per-node values that are not a record's: {e}") from e


class Replay:
    """Applies a task's numbered calls to a sink once each, in order, from the stream or the result."""

    def __init__(self, sink: Sink, labels=()):
        self.sink = sink
        self.applied = 0
        self.open = list(labels)  # the labels not ended yet (tuning renames them)

    @property
    def started(self) -> bool:
        return self.applied > 0

    def apply(self, first: int, calls) -> None:
        if first > self.applied:
            return  # a gap: this batch waits for the result, which has every call
        for method, args in calls[self.applied - first:]:
            if method == "retuned":
                old, spec, note = args
                args = (old, Entry.of(spec), note)
                self.open = [spec.label if x == old else x for x in self.open]
            elif method == "end" and args[0] in self.open:
                self.open.remove(args[0])
            _apply_call(self.sink, method, args)
            self.applied += 1


def _apply_call(sink: Sink, method: str, args: tuple) -> None:
    """One decoded call on ``sink``: each of the six calls a :class:`Recorder` makes, spelled out.

    Never a name looked up on the sink: a stream's method names come from the cluster, and a
    name that is not one of these is refused by :func:`decode_calls` before it gets here.
    """
    if method == "record":
        sink.record(*args)
    elif method == "end":
        sink.end(*args)
    elif method == "started":
        sink.started(**args[0])
    elif method == "preparing":
        sink.preparing(*args)
    elif method == "warn":
        sink.warn(*args)
    elif method == "retuned":
        sink.retuned(*args)
    else:  # decode_calls let nothing else through; a caller that builds calls itself gets told
        raise FedvizError(f"not a sink call: {method!r:.40}")


def subscribe(client, topic: str, into: "queue.Queue") -> None:
    """Put every event of ``topic`` into ``into`` (the handler runs on the client's event loop: it
    only enqueues; the run's own thread applies)."""
    client.subscribe_topic(topic, lambda event: into.put(event[1]))


def unsubscribe(client, topic: str) -> None:
    try:
        client.unsubscribe_topic(topic)
    except Exception:  # noqa: BLE001 - the client may be closing
        pass
