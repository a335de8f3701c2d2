"""The job's coordinator as a child process of the node that hosts it.

Node 0's wrapper (``neuron-watch torchrun`` of a multi-node job) and the batch step of
``neuron-watch srun`` start the coordinator as
``python -m neuron_watch.commands.hosted`` instead of running it in its own process: a crash of the
coordinator (libzmq's ``Assertion failed: !_io_error`` abort, any bug of its code) ends that child,
and the wrapper, whose agent keeps the node's ranks, starts it again (:mod:`neuron_watch.recovery.coordcrash`
decides); the new one takes up the job from its run dir (:mod:`.memory`). docs/multinode.md, "The
coordinator's own process".

I/O shell: how a process starts and stops is given (``start``, ``stop``: the composition root's
process group on a lifeline, :func:`neuron_watch.runtime.hosted_coordinator`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from neuron_watch.config import WatchConfig
from neuron_watch.errors import UsageError
from neuron_watch.recovery.coordcrash import HostAction, after_exit
from neuron_watch.wire.transport import PortInUse, endpoint_of

#: ``(argv, env, **popen options) -> process``: the leader of a process group we own
Start = Callable[..., "subprocess.Popen[bytes]"]
#: ``(process, grace) -> exit code``: SIGTERM its group, SIGKILL at the deadline, reap
Stop = Callable[["subprocess.Popen[bytes]", float], int]

#: How long the first start of a hosted coordinator may take to listen (imports on a loaded host).
HOSTED_START_TIMEOUT = 120.0
#: After the job's end, how long the wrapper waits for its coordinator to finish (it serves until
#: every node said it exited, at most ``NODES_EXIT_GRACE`` 10 s, then writes its last files).
HOSTED_END_WAIT = 30.0
#: The variable that marks a hosted coordinator's processes with the run dir (tests find them by it).
HOSTED_MARKER_ENV = "NEURON_WATCH_COORDINATOR_OF"
#: How long one line to the other side may wait for room in the socket (it is read every turn).
TELL_TIMEOUT = 5.0


def split_lines(buffer: bytes) -> tuple[list[tuple[str, str]], bytes]:
    """The complete lines of ``buffer`` as (word, rest), and what is left of a line not yet complete."""
    *complete, rest = buffer.split(b"\n")
    out = []
    for raw in complete:
        word, _, text = raw.decode(errors="replace").partition(" ")
        if word:
            out.append((word, text))
    return out, rest


def write_line(fd: int, word: str, text: str, timeout: float = TELL_TIMEOUT) -> bool:
    """``word text`` as one line on ``fd`` (blocking or not), waiting at most ``timeout`` for room.
    Returns False when the other side is gone or did not make room (the caller says what that costs)."""
    data = f"{word} {text}\n".encode()
    end = time.monotonic() + timeout
    while data:
        try:
            data = data[os.write(fd, data):]
        except BlockingIOError:
            left = end - time.monotonic()
            if left <= 0:
                return False
            select.select([], [fd], [], left)
        except OSError:
            return False
    return True


class HostLink:
    """The hosted coordinator's end of its wrapper's socket: what the wrapper tells it (its lines,
    read without waiting) and what it tells the wrapper. The wrapper tells every coordinator it
    starts what it keeps (:meth:`HostedCoordinator.remember`) first: a coordinator started again
    reads its predecessor's last word on those things before anything new."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._rest = b""
        self.closed = False

    def tell(self, word: str, text: str = "") -> bool:
        return write_line(self.fd, word, text)

    def lines(self) -> list[tuple[str, str]]:
        """What the wrapper said since the last call (never waits)."""
        got = b""
        while not self.closed and select.select([self.fd], [], [], 0)[0]:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                self.closed = True  # the wrapper is gone; its lifeline ends us
                break
            got += chunk
        out, self._rest = split_lines(self._rest + got)
        return out


def cause_of(returncode: int) -> str:
    """``returncode`` as Popen gives it (negative: the signal), as words."""
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


class HostedCoordinator:
    """The job's coordinator as a child process of the node that hosts it (a process group we own,
    on a lifeline to this process: it dies with the wrapper, as it did inside it), started again
    when it dies while the job runs (:mod:`neuron_watch.recovery.coordcrash`), stopped against one
    deadline and reaped at the end (:meth:`close`).

    Raises at :meth:`start`: :class:`PortInUse` when it could not bind (an elastic node then joins
    whoever holds the port); :class:`UsageError` when it ended before it listened.
    """

    def __init__(self, config: WatchConfig, *, start: Start, stop: Stop, bind: str, run_dir: str, job_id: str,
                 nodes: int | None, node: str, job_started: dict[str, Any],
                 env: Mapping[str, str] = os.environ, entry: dict[str, Any] | None = None) -> None:
        """``entry``: what the coordinator of an entry point other than torchrun's needs to build
        itself (``srun``: its steps, :mod:`neuron_watch.commands.srun`); in its spec as given."""
        self._start, self._stop = start, stop
        self.run_dir = run_dir
        self.node = node
        self.spec_path = os.path.join(run_dir, "coordinator-spec.json")
        config_fields = {k: v for k, v in dataclasses.asdict(config).items() if k != "origins"}
        spec = {"config": config_fields, "bind": bind, "run_dir": run_dir, "job_id": job_id, "nodes": nodes,
                "node": node, "job_started": job_started, "entry": entry}
        os.makedirs(run_dir, exist_ok=True)
        self._write_spec(spec)
        self.env = {**env, HOSTED_MARKER_ENV: run_dir}
        self.proc: subprocess.Popen[bytes] | None = None
        self._ready_fd = -1
        self._rest = b""
        self.port_in_use = False
        self.endpoint = ""
        self.over = False  # it said the job is over
        self.over_code: int | None = None  # the job's exit code it said with it
        #: what the coordinator asked of the wrapper (a word it does not know itself), oldest first
        self.requests: list[tuple[str, str]] = []
        #: what the wrapper tells every coordinator it starts, first (:meth:`remember`)
        self._kept: dict[str, str] = {}
        self.restarts = 0
        self.gave_up = False
        self.pids: list[int] = []  # every coordinator process started, for the record

    def _write_spec(self, spec: dict[str, Any]) -> None:
        # mode 0600: the options may hold credentials (an MQTT URL's password); the secret is never in it
        fd = os.open(self.spec_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(spec, f, default=str)

    def _spawn(self, after: str | None) -> None:
        # one socket both ways: the coordinator says ready/over and asks; the wrapper answers
        mine, theirs = socket.socketpair()
        read_fd, write_fd = mine.detach(), theirs.detach()
        argv = [sys.executable, "-m", "neuron_watch.commands.hosted", self.spec_path, str(write_fd)]
        if after is not None:
            argv += ["--after", after]
        try:
            self.proc = self._start(argv, self.env, pass_fds=(write_fd,), stdin=subprocess.DEVNULL)
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        os.set_blocking(read_fd, False)
        self._ready_fd, self._rest, self.endpoint, self.over, self.port_in_use = read_fd, b"", "", False, False
        self.requests.clear()  # a dead coordinator's questions die with it; the new one asks again
        self.pids.append(self.proc.pid)
        for word, text in self._kept.items():
            self.tell(word, text)

    @property
    def fd(self) -> int:
        """The socket to the coordinator (-1: none now): readable when it said something or ended."""
        return self._ready_fd

    def tell(self, word: str, text: str = "") -> bool:
        """One line to the coordinator now (False: it is gone, or its socket stayed full)."""
        return self._ready_fd >= 0 and write_line(self._ready_fd, word, text)

    def remember(self, word: str, text: str) -> None:
        """``word text`` to the coordinator now and, first of all, to every one started after it."""
        self._kept[word] = text
        self.tell(word, text)

    def _read_said(self) -> None:
        """What the coordinator said on its socket so far (``ready``, ``port-in-use``, ``over``;
        anything else is a request to the wrapper: :attr:`requests`)."""
        if self._ready_fd < 0:
            return
        got = b""
        while True:
            try:
                chunk = os.read(self._ready_fd, 65536)
            except BlockingIOError:
                break
            except OSError:
                chunk = b""
            if not chunk:
                os.close(self._ready_fd)
                self._ready_fd = -1
                break
            got += chunk
        lines, self._rest = split_lines(self._rest + got)
        for word, rest in lines:
            if word == "ready":
                self.endpoint = rest
            elif word == "port-in-use":
                self.port_in_use = True
            elif word == "over":
                self.over = True
                self.over_code = int(rest) if rest.lstrip("-").isdigit() else None
            else:
                self.requests.append((word, rest))

    def start(self, timeout: float = HOSTED_START_TIMEOUT) -> str:
        """Start it and wait until it listens; returns its endpoint."""
        self._spawn(None)
        assert self.proc is not None
        end = time.monotonic() + timeout
        while not self.endpoint:
            self._read_said()
            if self.port_in_use:
                self.proc.wait()
                self._close_pipe()
                raise PortInUse(self.spec_endpoint())
            if self.proc.poll() is not None or time.monotonic() > end:
                code = self._stop(self.proc, 5.0)
                self._close_pipe()
                raise UsageError(f"the job's coordinator did not start ({cause_of(code)}); its words are above",
                                 "check the run dir is writable and the options valid; "
                                 "NEURON_WATCH_DEBUG=1 shows more")
            if self._ready_fd >= 0:
                select.select([self._ready_fd], [], [], 0.1)
            else:
                time.sleep(0.05)
        self._pin_port()
        return self.endpoint

    def _pin_port(self) -> None:
        """A coordinator bound on port 0 (srun's: any free port) got one; the nodes were told it. One
        started again must listen there too: its spec gets that port."""
        with open(self.spec_path, encoding="utf-8") as f:
            spec = json.load(f)
        host, _, port = str(spec["bind"]).rpartition(":")
        if port != "0":
            return
        spec["bind"] = f"{host}:{self.endpoint.rsplit(':', 1)[1]}"
        self._write_spec(spec)

    def spec_endpoint(self) -> str:
        with open(self.spec_path, encoding="utf-8") as f:
            return endpoint_of(str(json.load(f)["bind"]))

    def _close_pipe(self) -> None:
        if self._ready_fd >= 0:
            os.close(self._ready_fd)
            self._ready_fd = -1

    def take_requests(self) -> list[tuple[str, str]]:
        """What the coordinator asked since the last call, oldest first."""
        asked, self.requests = self.requests, []
        return asked

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def poll(self) -> str | None:
        """One turn of the wrapper's loop: if the coordinator died while the job runs, start it again
        (not waiting for it to listen: the nodes reconnect on their own) or, past the bound, give up.
        Returns the line to say, None when there is nothing to say."""
        if self.proc is None or self.gave_up:
            return None
        self._read_said()
        code = self.proc.poll()
        if code is None:
            return None
        pid = self.proc.pid
        self._stop(self.proc, 1.0)  # the rest of its group, if any; it is reaped
        self._read_said()
        self._close_pipe()
        decision = after_exit(cause_of(code), self.over, self.restarts, pid)
        if decision.action is HostAction.ENDED:
            self.proc = None
            return None
        if decision.action is HostAction.GIVE_UP:
            self.gave_up, self.proc = True, None
            return decision.message
        self.restarts += 1
        self._spawn(decision.cause)
        return decision.message

    def interrupt(self, sig: int) -> None:
        """Forward a signal of the wrapper: the coordinator stops every node and ends the job."""
        if self.alive:
            assert self.proc is not None
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, sig)

    def close(self, wait: float = HOSTED_END_WAIT) -> int | None:
        """At the wrapper's end: let it finish (it serves until every node said it exited), then stop
        its group against one deadline and reap it. Returns its exit code (None: never started)."""
        if self.proc is None:
            self._close_pipe()
            return None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(wait)
        code = self._stop(self.proc, 10.0)
        self._close_pipe()
        with contextlib.suppress(OSError):
            os.unlink(self.spec_path)
        return code
