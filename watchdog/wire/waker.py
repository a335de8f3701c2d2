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
interrupted by it. Only the main thread may install them, and a wakeup fd that is already
another's (an event loop's) is left to its owner: then the waker still waits on its sockets and
pipes, says that signals do not wake it (:attr:`signals_wake`), and sleeps at most
:data:`SIGNALS_UNSEEN_WAIT` at a time, as the loop once did. The pipe is close-on-exec (``os.pipe``):
no child (torchrun, its ranks, the hosted coordinator) inherits it.
"""

from __future__ import annotations

import contextlib
import logging
import math
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

#: The longest a waker sleeps when signals do not wake it (off the main thread, or the wakeup fd is
#: another's): a latched signal is then seen as soon as the loop's old 20 ms turns saw it.
SIGNALS_UNSEEN_WAIT = 0.02


def poll_ms(timeout: float) -> int:
    """``timeout`` seconds as the poller's whole milliseconds, rounded up: a wait rounded down wakes
    before what it waits for is due, and the turns until it is (each a 0 ms wait) spin."""
    return max(0, math.ceil(timeout * 1000))


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
            old = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
            if old != -1:  # another's (an event loop's): put it back; we turn often enough to see signals
                signal.set_wakeup_fd(old)
                log.debug("the signals' wakeup fd is another's (%d): this loop's turns notice signals instead", old)
                return self
            self._old_fd = old
            self._old_child = signal.signal(signal.SIGCHLD, _on_child)
            signal.siginterrupt(signal.SIGCHLD, False)
            self.signals_wake = True
            # A signal latched before this (the loop's handlers are installed earlier) wrote to no
            # pipe: the first wait returns at once, and the loop's turn sees it.
            os.write(self._write, b"\0")
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
        passed (at most :data:`SIGNALS_UNSEEN_WAIT` where signals do not wake it). Returns whether
        anything woke it before the timeout."""
        if not self.signals_wake:
            timeout = min(timeout, SIGNALS_UNSEEN_WAIT)
        wanted = set(watch)
        for gone in self._watched - wanted:
            with contextlib.suppress(KeyError, zmq.ZMQError):
                self._poller.unregister(gone)
        for new in wanted - self._watched:
            self._poller.register(new, zmq.POLLIN)
        self._watched = wanted
        try:
            ready = self._poller.poll(poll_ms(timeout))
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
