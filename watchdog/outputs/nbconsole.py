"""A console that never stalls the watchdog: stdout and stderr written by a thread, bounded, dropped counted.

A terminal paused with Ctrl-S, an ssh session whose client stopped reading, a ``| less`` left on
its first page: a write to such a pipe blocks once its 64 KiB are full. The wrapper's loop also
judges the job and keeps its nodes' link alive: a blocked ``print`` on node 0 would silence the
coordinator (no verdict, no acks), and every node would find its coordinator lost.

:func:`nonblocking_console` swaps ``sys.stdout`` and ``sys.stderr`` (and the logging handlers that
write to them) for :class:`QueuedStream` objects: a write appends to a bounded queue and returns;
one thread per stream writes the queue to the real file descriptor, and only that thread can
block. When the queue is full (the reader stalled), new text is dropped and counted in lines;
when the reader comes back, a line says how many were dropped. Nothing here is ever a reason to
stop: a closed console (EPIPE) is the same as a stalled one whose text is dropped.
"""

from __future__ import annotations

import collections
import contextlib
import io
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator

#: bytes held per stream while its reader does not read (then lines are dropped, counted)
MAX_QUEUED = 1 << 20
#: at exit, wait this long for a stalled console before giving up on what is queued
DRAIN_AT_EXIT = 2.0


class QueuedStream(io.TextIOBase):
    """A text stream whose writes never block: see the module doc. ``fd`` is not closed by us."""

    def __init__(self, fd: int, name: str, max_queued: int = MAX_QUEUED) -> None:
        super().__init__()
        self.fd = fd
        self._name = name
        self.max_queued = max_queued
        self._q: collections.deque[bytes] = collections.deque()
        self._queued = 0
        self._cond = threading.Condition()
        self._closing = False
        self._writing = False
        self.dropped_lines = 0  # lines dropped because the reader was stalled (or gone)
        self.dropped_reported = 0
        self.broken = False  # the reader is gone (EPIPE or another write error)
        self._thread = threading.Thread(target=self._run, name=f"neuron-watch-{name}", daemon=True)
        self._thread.start()

    # -- the TextIO side ------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def isatty(self) -> bool:
        try:
            return os.isatty(self.fd)
        except OSError:
            return False

    def write(self, text: str) -> int:
        data = text.encode("utf-8", "replace")
        with self._cond:
            if self.broken or self._queued + len(data) > self.max_queued:
                self.dropped_lines += max(1, text.count("\n"))
                return len(text)
            if self.dropped_lines > self.dropped_reported and not self.broken:
                note = (f"[neuron-watch] console: {self.dropped_lines - self.dropped_reported} line(s) dropped "
                        "while this console was not read\n").encode()
                self.dropped_reported = self.dropped_lines
                self._q.append(note)
                self._queued += len(note)
            self._q.append(data)
            self._queued += len(data)
            self._cond.notify()
        return len(text)

    def flush(self) -> None:
        """Nothing to do: the writer thread writes as soon as it can (never wait for a reader here)."""

    # -- the writer thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._q and not self._closing:
                    self._cond.wait()
                if not self._q:
                    return
                chunk = b"".join(self._q)
                self._q.clear()
                self._writing = True
            try:
                view = memoryview(chunk)
                while view:
                    n = os.write(self.fd, view)  # blocks here, and only here, on a stalled reader
                    view = view[n:]
            except OSError:
                with self._cond:
                    self.broken = True
                    self.dropped_lines += chunk.count(b"\n")
            finally:
                with self._cond:
                    self._queued -= len(chunk)
                    self._writing = False
                    self._cond.notify_all()

    def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for everything queued to be written; True if it was."""
        end = time.monotonic() + timeout
        with self._cond:
            while self._q or self._writing:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def stop(self, timeout: float) -> None:
        """Write what is queued within ``timeout``; the thread ends (or is left blocked, a daemon)."""
        self.drain(timeout)
        with self._cond:
            self._closing = True
            self._cond.notify_all()


def console_dropped() -> int:
    """Lines dropped so far by this process's queued stdout and stderr (0 when they are not queued)."""
    return sum(s.dropped_lines for s in (sys.stdout, sys.stderr) if isinstance(s, QueuedStream))


@contextlib.contextmanager
def nonblocking_console(enabled: bool = True) -> Iterator[tuple[QueuedStream, QueuedStream] | None]:
    """Within the block, ``sys.stdout``/``sys.stderr`` never block the caller (see the module doc)."""
    if not enabled:
        yield None
        return
    try:
        out_fd, err_fd = sys.stdout.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # not real files (a test's capture): leave them be
        yield None
        return
    old_out, old_err = sys.stdout, sys.stderr
    for s in (old_out, old_err):
        with contextlib.suppress(OSError, ValueError):
            s.flush()
    new_out, new_err = QueuedStream(out_fd, "<stdout>"), QueuedStream(err_fd, "<stderr>")
    handlers = [h for h in logging.getLogger().handlers if isinstance(h, logging.StreamHandler)]
    swapped = {h: h.stream for h in handlers if h.stream in (old_out, old_err)}
    for h, s in swapped.items():
        h.setStream(new_err if s is old_err else new_out)
    sys.stdout, sys.stderr = new_out, new_err
    try:
        yield new_out, new_err
    finally:
        sys.stdout, sys.stderr = old_out, old_err
        for h, s in swapped.items():
            h.setStream(s)
        for q in (new_out, new_err):
            q.stop(DRAIN_AT_EXIT)
        dropped = new_out.dropped_lines + new_err.dropped_lines
        if dropped:
            logging.getLogger("neuron_watch").debug("console: %d line(s) dropped in all (stdout %d, stderr %d)",
                                                    dropped, new_out.dropped_lines, new_err.dropped_lines)


__all__ = ["QueuedStream", "console_dropped", "nonblocking_console"]
