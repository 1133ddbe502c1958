"""Ctrl-C in ``fedviz run`` (``fedviz.cli.run._interrupt_stops``): the stop is requested and the work broken
off, and nothing but the command's one line reaches the terminal — also when the interrupt lands inside a
finalizer, where Python cannot raise it and would print it as "Exception ignored in …" with a traceback
(a fresh clone's CI run caught it in llvmlite's ``__del__`` while numba compiled)."""

import signal
import sys

import pytest

from fedviz.cli.run import INTERRUPTED, _interrupt_stops
from fedviz.runner.execute import Stop


class _InterruptedWhileFinalised:
    def __del__(self):
        signal.raise_signal(signal.SIGINT)  # the handler runs here, inside the finalizer


class _FailsWhileFinalised:
    def __del__(self):
        raise ValueError("a finalizer's own error")


@pytest.fixture
def seen(monkeypatch):
    """The unraisable exceptions that reach the hook in place before the command's (Python's printer)."""
    out = []
    monkeypatch.setattr(sys, "unraisablehook", lambda info: out.append(info.exc_value))
    return out


def test_an_interrupt_inside_a_finalizer_requests_the_stop_and_prints_nothing(seen):
    stop = Stop()
    with _interrupt_stops(stop):
        _InterruptedWhileFinalised()  # dropped at once: its __del__ runs the handler
    assert stop() and stop.reason == INTERRUPTED
    assert seen == []


def test_an_interrupt_elsewhere_breaks_off_the_work():
    stop = Stop()
    with pytest.raises(KeyboardInterrupt), _interrupt_stops(stop):
        signal.raise_signal(signal.SIGINT)
    assert stop.reason == INTERRUPTED


def test_other_unraisable_errors_still_reach_python_s_hook_and_the_hooks_are_restored(seen):
    before_hook, before_handler = sys.unraisablehook, signal.getsignal(signal.SIGINT)
    with _interrupt_stops(Stop()):
        _FailsWhileFinalised()
    assert [type(e) for e in seen] == [ValueError]
    assert sys.unraisablehook is before_hook and signal.getsignal(signal.SIGINT) is before_handler
