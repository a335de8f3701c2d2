"""The job's coordinator as a child process of the node that hosts it.

Node 0's wrapper (``neuron-watch torchrun`` of a multi-node job) starts the coordinator as
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
                 env: Mapping[str, str] = os.environ) -> None:
        self._start, self._stop = start, stop
        self.run_dir = run_dir
        self.node = node
        self.spec_path = os.path.join(run_dir, "coordinator-spec.json")
        config_fields = {k: v for k, v in dataclasses.asdict(config).items() if k != "origins"}
        spec = {"config": config_fields, "bind": bind, "run_dir": run_dir, "job_id": job_id, "nodes": nodes,
                "node": node, "job_started": job_started}
        os.makedirs(run_dir, exist_ok=True)
        # mode 0600: the options may hold credentials (an MQTT URL's password); the secret is never in it
        fd = os.open(self.spec_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(spec, f, default=str)
        self.env = {**env, HOSTED_MARKER_ENV: run_dir}
        self.proc: subprocess.Popen[bytes] | None = None
        self._ready_fd = -1
        self._said = b""
        self.endpoint = ""
        self.over = False  # it said the job is over
        self.restarts = 0
        self.gave_up = False
        self.pids: list[int] = []  # every coordinator process started, for the record

    def _spawn(self, after: str | None) -> None:
        read_fd, write_fd = os.pipe()
        argv = [sys.executable, "-m", "neuron_watch.commands.hosted", self.spec_path, str(write_fd)]
        if after is not None:
            argv += ["--after", after]
        try:
            self.proc = self._start(argv, self.env, pass_fds=(write_fd,), stdin=subprocess.DEVNULL)
        finally:
            os.close(write_fd)
        os.set_blocking(read_fd, False)
        self._ready_fd, self._said, self.endpoint, self.over = read_fd, b"", "", False
        self.pids.append(self.proc.pid)

    def _read_said(self) -> None:
        """What the coordinator said on its pipe so far (``ready``, ``port-in-use``, ``over``)."""
        if self._ready_fd < 0:
            return
        while True:
            try:
                chunk = os.read(self._ready_fd, 4096)
            except BlockingIOError:
                break
            if not chunk:
                os.close(self._ready_fd)
                self._ready_fd = -1
                break
            self._said += chunk
        for line in self._said.decode(errors="replace").splitlines():
            word, _, rest = line.partition(" ")
            if word == "ready":
                self.endpoint = rest
            elif word == "over":
                self.over = True

    def start(self, timeout: float = HOSTED_START_TIMEOUT) -> str:
        """Start it and wait until it listens; returns its endpoint."""
        self._spawn(None)
        assert self.proc is not None
        end = time.monotonic() + timeout
        while not self.endpoint:
            self._read_said()
            if b"port-in-use" in self._said:
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
        return self.endpoint

    def spec_endpoint(self) -> str:
        with open(self.spec_path, encoding="utf-8") as f:
            return endpoint_of(str(json.load(f)["bind"]))

    def _close_pipe(self) -> None:
        if self._ready_fd >= 0:
            os.close(self._ready_fd)
            self._ready_fd = -1

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
