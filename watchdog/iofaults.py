"""The watchdog's own files, written through faults of their disk (full, read-only, EIO, ESTALE).

A fault of the watchdog's own I/O must never stop or restart a healthy job (an ``ENOSPC`` raised
at a ``merged.log`` flush would end the wrapper, and its cleanup the job). So:

* :class:`AppendFile` is an append-only log file (``merged.log``, ``rank-<R>.log``, the launcher
  log, ``events.jsonl``) that never raises on a write: what cannot be written is kept in memory
  (up to ``max_pending`` bytes) and retried at most every :data:`RETRY_EVERY` seconds; beyond the
  bound it is dropped and counted. When the disk takes writes again, the kept text goes out in
  order, then (for files that have one) a line saying what is missing there, then the new text.
* :class:`IOHealth` counts the faults of one process and tells its listeners once when a path
  fails (``watchdog_degraded``) and once when it works again (``watchdog_recovered``); the
  coordinator turns these into events, the console prints them, ``status.json`` and
  ``job_finished`` carry :meth:`IOHealth.summary`.
"""

from __future__ import annotations

import contextlib
import errno as _errno
import json
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from neuron_watch.events import EventKind

log = logging.getLogger("neuron_watch")

#: Seconds between attempts to write a file that failed (a full disk is not asked 50 times a second).
RETRY_EVERY = 1.0
#: Bytes of one file kept in memory while its disk refuses them; beyond this the newest are dropped, counted.
MAX_PENDING = 8 << 20

#: ``(kind, fields)``: ``kind`` is ``watchdog_degraded`` or ``watchdog_recovered``.
Listener = Callable[[str, dict[str, Any]], None]


#: A JSON document up to this size (compact) is written indented, for people; a bigger one compact:
#: json's indenting encoder is pure Python, 2-5x slower than the compact one in C, and a
#: coordinator writes coordinator.json (1,024 nodes: 0.4 MB) and status.json (65,536 ranks: 9 MB)
#: every second (tests/benchmarks/bench_scale.py).
INDENT_UP_TO = 64 << 10


def write_json_atomic(path: str, data: Any) -> None:
    """Write JSON to ``path`` via a temp file and rename (readers never see half a file)."""
    tmp = f"{path}.tmp.{os.getpid()}"
    text = json.dumps(data, default=str)
    if len(text) <= INDENT_UP_TO:
        text = json.dumps(data, indent=1, default=str)
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):  # a full disk must not also keep half a temp file
            os.unlink(tmp)
        raise


def describe(exc: OSError | str) -> str:
    """``No space left on device (ENOSPC)`` for an OSError; a string as it is."""
    if isinstance(exc, str):
        return exc
    name = _errno.errorcode.get(exc.errno or 0, "")
    text = exc.strerror or str(exc)
    return f"{text} ({name})" if name else text


class IOHealth:
    """The I/O faults of the watchdog in this process (its coordinator and its agent share one).

    ``failed`` and ``ok`` are called by the writers; a path is *degraded* from its first failure
    until its next success. Listeners hear each change once (not every retry); a listener's own
    failure is logged, never raised (it may itself write to the failing disk).
    """

    def __init__(self, node: str = "") -> None:
        self.node = node
        self.faults = 0  # failed operations (every retry counts)
        self.lost_lines = 0  # lines dropped for good (beyond what could be kept in memory)
        self.lost_bytes = 0
        self.degraded: dict[str, str] = {}  # path -> its last error, while it fails
        self.paths_failed: set[str] = set()  # every path that ever failed
        self.listeners: list[Listener] = []
        self._notifying = False

    def failed(self, what: str, path: str, exc: OSError | str) -> None:
        """An operation on ``path`` failed; ``what`` says which (``write``, ``read the checkpoint directory``)."""
        self.faults += 1
        self.paths_failed.add(path)
        if path in self.degraded:
            return
        error = describe(exc)
        self.degraded[path] = error
        log.warning("watchdog degraded: cannot %s %s: %s; the job goes on (what cannot be written is kept in "
                    "memory and counted, retried every %.0fs)", what, path, error, RETRY_EVERY)
        self._notify(EventKind.WATCHDOG_DEGRADED, {"node": self.node, "path": path, "operation": what, "error": error,
                                           "faults": self.faults})

    def ok(self, path: str, lost_lines: int = 0, lost_bytes: int = 0) -> None:
        """``path`` works again; ``lost_*``: what it could not keep meanwhile."""
        if path not in self.degraded:
            return
        error = self.degraded.pop(path)
        log.warning("watchdog recovered: %s is written again (it failed with: %s)%s", path, error,
                    f"; {lost_lines} line(s), {lost_bytes} byte(s) could not be kept and are missing there"
                    if lost_bytes else "; nothing lost")
        self._notify(EventKind.WATCHDOG_RECOVERED, {"node": self.node, "path": path, "error": error,
                                            "lost_lines": lost_lines, "lost_bytes": lost_bytes})

    def lost(self, lines: int, nbytes: int) -> None:
        self.lost_lines += lines
        self.lost_bytes += nbytes

    def _notify(self, kind: str, fields: dict[str, Any]) -> None:
        if self._notifying:  # a listener writing to the failing disk reports nothing new
            return
        self._notifying = True
        try:
            for listener in list(self.listeners):
                try:
                    listener(kind, fields)
                except Exception as exc:  # a report of a fault must not become one
                    log.warning("could not report %s: %s", kind, exc)
        finally:
            self._notifying = False

    def summary(self) -> dict[str, Any]:
        """For ``status.json`` and ``job_finished``: ``degraded`` (paths failing now), ``faults``,
        ``paths`` (every path that failed), ``lost_lines``, ``lost_bytes``."""
        return {"degraded": dict(sorted(self.degraded.items())), "faults": self.faults,
                "paths": sorted(self.paths_failed), "lost_lines": self.lost_lines, "lost_bytes": self.lost_bytes}

    def write_json(self, path: str, data: Any) -> bool:
        """:func:`write_json_atomic`, a fault counted and reported instead of raised. Returns success."""
        try:
            write_json_atomic(path, data)
        except OSError as exc:
            self.failed("write", path, exc)
            return False
        self.ok(path)
        return True


class AppendFile:
    """An append-only text file that never raises on a write (see the module doc).

    ``write`` only buffers; ``flush`` writes (callers flush once per poll or tick, as they did a
    Python file). ``gap``: ``(lines, bytes, error) -> line`` written where text is missing after
    a fault (None: nothing is written, e.g. for JSONL that must stay parseable).
    ``whole_lines``: the file never ends inside a line (JSONL: a torn last record makes a reader
    lose the event, ``job_finished`` among them): a write the disk took only in part is cut back
    (``ftruncate``) to where it began, and the whole of it kept for the retry.
    """

    def __init__(self, path: str, health: IOHealth, *, gap: Callable[[int, int, str], str] | None = None,
                 max_pending: int = MAX_PENDING, clock: Callable[[], float] = time.monotonic,
                 reopen_if_moved: bool = False, whole_lines: bool = False) -> None:
        self.name = path
        self.whole_lines = whole_lines
        self.reopen_if_moved = reopen_if_moved
        self.health = health
        self.gap = gap
        self.max_pending = max_pending
        self.clock = clock
        self._fd: int | None = None
        self._buf = bytearray()
        self._failing = False
        self._retry_at = -1e18
        self._error = ""
        self._lost_lines = 0  # dropped since the last successful write
        self._lost_bytes = 0
        self.closed = False

    def write(self, text: str) -> None:
        data = text.encode("utf-8", "replace")
        if self._failing and len(self._buf) + len(data) > self.max_pending:
            lines = data.count(b"\n")
            self._lost_lines += lines
            self._lost_bytes += len(data)
            self.health.lost(lines, len(data))
            return
        self._buf += data

    @property
    def failing(self) -> bool:
        return self._failing

    def create(self) -> bool:
        """Open the file now, creating it, before anything is written to it: its readers (an operator's
        ``tail -f``, whoever lists the run dir) find it from the start. False when the disk refused:
        counted and told as a write's fault is; it is opened again at the next flush."""
        return self.flush(opened=True)

    def flush(self, opened: bool = False) -> bool:
        """Write what is buffered; False when the disk refused (kept for a retry, counted).
        ``opened``: the file is to be open (and so exist) afterwards even with nothing to write."""
        if not self._buf and not self._lost_bytes and not (opened and self._fd is None):
            return True
        now = self.clock()
        if self._failing and now < self._retry_at:
            return False
        try:
            if self._fd is not None and self.reopen_if_moved and self._moved():
                self._close_fd()
            if self._fd is None:
                self._fd = os.open(self.name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            self._write_buf()
            if self._lost_bytes:
                if self.gap is not None:
                    self._buf += self.gap(self._lost_lines, self._lost_bytes, self._error).encode() + b"\n"
                    self._write_buf()
                lost = (self._lost_lines, self._lost_bytes)
                self._lost_lines = self._lost_bytes = 0
            else:
                lost = (0, 0)
        except OSError as exc:
            self._failing = True
            self._retry_at = now + RETRY_EVERY
            self._error = describe(exc)
            self.health.failed("write", self.name, exc)
            if exc.errno in (_errno.EBADF, _errno.ESTALE, _errno.EIO, _errno.ENOENT) and self._fd is not None:
                self._close_fd()  # the descriptor itself may be dead: open again at the retry
            return False
        if self._failing:
            self._failing = False
            self.health.ok(self.name, *lost)
        return True

    def _moved(self) -> bool:
        """Is the file at ``name`` no longer the one we write (deleted, or rotated away by
        logrotate's rename, an operator's ``rm``)? Then every later write would be lost unseen."""
        assert self._fd is not None
        try:
            now, ours = os.stat(self.name), os.fstat(self._fd)
        except FileNotFoundError:
            return True
        except OSError:
            return False  # cannot tell: keep the descriptor we have
        moved = (now.st_dev, now.st_ino) != (ours.st_dev, ours.st_ino)
        if moved:
            log.warning("%s was moved or deleted; continuing in a new one", self.name)
        return moved

    def _write_buf(self) -> None:
        assert self._fd is not None
        start = os.fstat(self._fd).st_size if self.whole_lines else 0
        view = memoryview(self._buf)
        done = 0
        try:
            while done < len(view):
                done += os.write(self._fd, view[done:])
        except OSError:
            if self.whole_lines and done:
                whole = bytes(view[:done]).rfind(b"\n") + 1  # the lines that went out whole stay
                try:
                    os.ftruncate(self._fd, start + whole)  # no torn line: the rest is written again at the retry
                    done = whole
                except OSError as exc:
                    log.warning("%s: could not cut back a partial write (%s); its last line may be torn",
                                self.name, describe(exc))
            raise
        finally:
            view.release()
            del self._buf[:done]  # a partial write keeps only what did not go out

    def _close_fd(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        """Flush once more (no retry wait) and release the descriptor; what still cannot go is counted lost."""
        if self.closed:
            return
        self._retry_at = -1e18
        if not self.flush() and self._buf:
            lines = self._buf.count(b"\n")
            self.health.lost(lines, len(self._buf))
            log.warning("%d line(s) (%d bytes) could not be written to %s: %s", lines, len(self._buf), self.name,
                        self._error)
            self._buf.clear()
        self._close_fd()
        self.closed = True


#: Bytes written to test a run dir at start (one page: a full tmpfs refuses it, an empty file it takes).
_PROBE_BYTES = 4096


def check_run_dir(path: str, option: str = "--run-dir") -> None:
    """Create ``path`` if needed and write a probe file in it (removed at once).

    Raises:
        UsageError: it cannot be created or written (read-only, full, a file, a symlink loop), with
            the next step.
    """
    from neuron_watch.errors import UsageError

    probe = os.path.join(path, f".neuron-watch-probe-{os.getpid()}")
    try:
        os.makedirs(path, exist_ok=True)
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, b"\0" * _PROBE_BYTES)
        finally:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(probe)
    except OSError as exc:
        raise UsageError(
            f"{option} {path} is not usable: {describe(exc)}",
            f"pass a writable directory with free space as {option} (it holds the logs, events and evidence "
            "of the job), or free space / fix the mount and permissions of this one",
        ) from exc


def check_checkpoint_dir(path: str, option: str = "--checkpoint-dir") -> None:
    """``path`` does not exist yet (the job creates it) or is a directory that can be listed.

    Raises:
        UsageError: it exists and cannot be listed (not a directory, permissions, a symlink loop, EIO,
            ESTALE): restarting from scratch over it would throw the job's progress away.
    """
    from neuron_watch.errors import UsageError

    try:
        with os.scandir(path) as it:
            next(it, None)
    except FileNotFoundError:
        if not os.path.islink(path):  # a dangling symlink is a mistake, not "no checkpoint yet"
            return
        exc: OSError = FileNotFoundError(_errno.ENOENT, "a symlink to nothing")
    except OSError as e:
        exc = e
    else:
        return
    raise UsageError(
        f"{option} {path} is not usable: {describe(exc)}",
        f"pass the directory your job saves checkpoints to (readable, or not created yet), fix its mount or "
        f"permissions, or leave {option} out to start from scratch",
    )


class RunDirClaim:
    """This node's claim on its files in a run dir: an exclusive ``flock`` on
    ``.neuron-watch-node-<node>.lock`` held for the life of the process (the kernel releases it when
    the process ends, however it ends; the descriptor is not inherited by the job).

    Nodes of one job may share a run dir (each names its files after itself); two wrappers of one
    node name may not: the second job's rank logs, events and state would be written into the
    first's. Seen in a trial: two single-node jobs in one Slurm allocation both took
    ``neuron-watch-runs/slurm-<id>``, and both wrote ``events.jsonl``, ``gen-0/rank-0.log`` and
    ``coordinator-state.json`` there.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def claim_run_dir(run_dir: str, node: str, job_id: str, option: str = "--run-dir") -> RunDirClaim | None:
    """Claim ``node``'s place in ``run_dir`` for this process, or say who holds it.

    Returns the claim (keep it until the end), or None where the file system takes no lock (some
    network mounts: ENOLCK, EOPNOTSUPP) or the lock file cannot be written: the run goes on unchecked.

    Raises:
        UsageError: a live process holds the claim (another neuron-watch of this node name), with its
            job id and pid where it wrote them, and the next step.
    """
    import fcntl

    from neuron_watch.errors import UsageError

    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in node)
    path = os.path.join(run_dir, f".neuron-watch-node-{safe}.lock")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        log.debug("cannot open %s (%s): the run dir's claim is not checked", path, exc)
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            holder = json.loads(os.pread(fd, 4096, 0) or b"{}")
        except (OSError, ValueError):
            holder = {}
        os.close(fd)
        who = ", ".join(f"{k} {holder[k]}" for k in ("job", "pid") if isinstance(holder, dict) and k in holder)
        raise UsageError(
            f"{option} {run_dir} is in use by another neuron-watch of node {node} that still runs"
            f"{f' ({who})' if who else ''}: both jobs' logs and events would be written into one directory",
            f"give this job a run dir of its own ({option} DIR, or --job-id ID, which names the default one), or "
            "wait for the other job to end",
        ) from None
    except OSError as exc:
        os.close(fd)
        log.debug("cannot lock %s (%s): the run dir's claim is not checked", path, exc)
        return None
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"job": job_id, "pid": os.getpid(), "node": node}).encode(), 0)
    return RunDirClaim(fd)
