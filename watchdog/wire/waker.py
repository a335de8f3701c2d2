"""What a loop sleeps on between turns: its sockets, pipes and the signals it cares about, with one timeout.

A loop that wakes only when something can have happened (a message on a socket, output on the
launcher's pipe, a signal latched by a handler, SIGCHLD of an exited child) or when something is due
by time (:mod:`neuron_watch.recovery.turns`) costs nothing while the job runs quietly; one that turns
every 20 ms cost an idle wrapper ~0.05 CPU-s a second.

Signals reach the sleeping loop through ``signal.set_wakeup_fd``: the interpreter's C-level
handler writes the signal's number to a pipe the poller watches, before the Python handler runs.
Every signal with a Python handler wakes the loop (the :class:`~neuron_watch.runtime.SignalLatch`'s
SIGTERM/SIGINT/SIGHUP); SIGCHLD gets a handler of its own (SIG_DFL discards it, and nothing would
be written), installed with SA_RESTART so that the system calls of other threads are not
interrupted by it. Only the main thread may install them; elsewhere the waker still waits on its
sockets and pipes, and says that signals do not wake it (:attr:`signals_wake`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Iterable
from types import FrameType
from typing import Any

import zmq

log = logging.getLogger("neuron_watch")

#: Something a loop can wait on: a ZeroMQ socket, or a file descriptor (a pipe).
Waitable = zmq.Socket[bytes] | int


def _on_child(_signum: int, _frame: FrameType | None) -> None:
    """SIGCHLD's handler: nothing to do here; its number on the wakeup pipe wakes the loop."""


class Waker:
    """A poller over what the loop waits on, and the wakeup pipe of its signals.

    Use as a context manager (it restores the previous wakeup fd and SIGCHLD handler on exit), and
    call :meth:`wait` once a turn with the sockets and pipes of that turn (they change: a new
    generation's launcher has a new pipe) and the timeout of :func:`~neuron_watch.recovery.turns.wait_for`.
    """

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        for fd in (self._read, self._write):
            os.set_blocking(fd, False)
        self._poller = zmq.Poller()
        self._poller.register(self._read, zmq.POLLIN)
        self._watched: set[Waitable] = set()
        self._old_fd: int | None = None
        self._old_child: Any = None
        self.signals_wake = False
        #: SIGCHLD came since the last :meth:`take_child`: an exited child waits to be reaped
        self._child = False

    def __enter__(self) -> Waker:
        if threading.current_thread() is threading.main_thread():
            self._old_fd = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
            self._old_child = signal.signal(signal.SIGCHLD, _on_child)
            signal.siginterrupt(signal.SIGCHLD, False)
            self.signals_wake = True
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.signals_wake:
            signal.set_wakeup_fd(self._old_fd if self._old_fd is not None else -1)
            signal.signal(signal.SIGCHLD, self._old_child if self._old_child is not None else signal.SIG_DFL)
            self.signals_wake = False
        for fd in (self._read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._read = self._write = -1

    def wait(self, timeout: float, watch: Iterable[Waitable] = ()) -> bool:
        """Sleep until something in ``watch`` is readable, a signal came, or ``timeout`` seconds
        passed. Returns whether anything woke it before the timeout."""
        wanted = set(watch)
        for gone in self._watched - wanted:
            with contextlib.suppress(KeyError, zmq.ZMQError):
                self._poller.unregister(gone)
        for new in wanted - self._watched:
            self._poller.register(new, zmq.POLLIN)
        self._watched = wanted
        try:
            ready = self._poller.poll(max(0, int(timeout * 1000)))
        except zmq.ZMQError as exc:  # a socket closed under us: the turn finds out what happened
            log.debug("the loop's poll failed (%s): turning now", exc)
            return True
        if any(what == self._read for what, _ev in ready):
            self._drain()
        return bool(ready)

    def _drain(self) -> None:
        """Empty the wakeup pipe; note a SIGCHLD among the signals."""
        while True:
            try:
                data = os.read(self._read, 512)
            except (BlockingIOError, InterruptedError):
                return
            if not data:
                return
            if signal.SIGCHLD in data:
                self._child = True

    def take_child(self) -> bool:
        """Whether SIGCHLD came since the last call (then an exited child may wait to be reaped)."""
        child, self._child = self._child, False
        return child
