"""How the long commands take Ctrl-C and SIGTERM (``fedviz.cli.arguments.interrupts``): the command records
the interrupt, its work is broken off, and nothing but the command's own line reaches the terminal — also
when the interrupt lands inside a finalizer, where Python cannot raise it and would print it as "Exception
ignored in …" with a traceback (a fresh clone's run of ``fedviz run`` caught it in llvmlite's ``__del__``
while numba compiled)."""

import signal
import sys
import threading

import pytest

from fedviz.cli.arguments import interrupts
from fedviz.cli.experiment import _watch


class _InterruptedWhileFinalised:
    def __init__(self, signum=signal.SIGINT):
        self.signum = signum

    def __del__(self):
        signal.raise_signal(self.signum)  # the handler runs here, inside the finalizer


class _FailsWhileFinalised:
    def __del__(self):
        raise ValueError("a finalizer's own error")


@pytest.fixture
def seen(monkeypatch):
    """The unraisable exceptions that reach the hook in place before the command's (Python's printer)."""
    out = []
    monkeypatch.setattr(sys, "unraisablehook", lambda info: out.append(info.exc_value))
    return out


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupt_inside_a_finalizer_is_recorded_and_prints_nothing(signum, seen):
    got = threading.Event()
    with interrupts(got.set, (signal.SIGINT, signal.SIGTERM)):
        _InterruptedWhileFinalised(signum)  # dropped at once: its __del__ runs the handler
    assert got.is_set() and seen == []


def test_an_interrupt_elsewhere_breaks_off_the_work():
    got = threading.Event()
    with pytest.raises(KeyboardInterrupt), interrupts(got.set):
        signal.raise_signal(signal.SIGINT)
    assert got.is_set()


def test_other_unraisable_errors_still_reach_python_s_hook_and_everything_is_restored(seen):
    before_hook = sys.unraisablehook
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with interrupts(lambda: None, (signal.SIGINT, signal.SIGTERM)):
        _FailsWhileFinalised()
    assert [type(e) for e in seen] == [ValueError]
    assert sys.unraisablehook is before_hook
    assert {s: signal.getsignal(s) for s in before} == before


class _Handle:
    """An experiment's handle that never ends by itself, until stopped."""

    def __init__(self, on_first_wait=None):
        self.on_first_wait, self.stopped, self.waits = on_first_wait, False, 0

    def wait(self, timeout=None):
        self.waits += 1
        if self.waits == 1 and self.on_first_wait:
            self.on_first_wait()
        return self.stopped

    def stop(self):
        self.stopped = True

    def snapshot(self):
        raise AssertionError("no progress line within the test")


def test_fedviz_experiment_stops_on_an_interrupt_lost_in_a_finalizer(capsys, seen, monkeypatch):
    """The interrupt lands in a finalizer while the command waits: its KeyboardInterrupt is lost, yet the
    experiment is stopped at the next half second, with the command's line and no traceback."""
    monkeypatch.setattr("fedviz.cli.experiment.PROGRESS_EVERY", 1e9)
    interrupted = threading.Event()
    handle = _Handle(on_first_wait=lambda: _InterruptedWhileFinalised())
    with interrupts(interrupted.set, (signal.SIGINT, signal.SIGTERM)):
        _watch(handle, interrupted)
    assert handle.stopped and seen == []
    assert capsys.readouterr().err == "stopping: cancelling the cells not started, stopping the running ones\n"
