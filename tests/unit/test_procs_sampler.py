"""The process sampler finds a launcher's workers by the RANK in their environment."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from neuron_watch.procs import ProcessSampler
from tests.fixtures.procs import kill_group


def _cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def test_a_worker_seen_before_its_exec_is_recognised_after_it(tmp_path: Path) -> None:
    # A worker caught between fork and exec still has its launcher's environment (no RANK); the
    # sampler must not remember it as "not a worker". The child here waits on stdin, then execs
    # with the rank variables, keeping its pid, as torchrun's workers do.
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK")}
    code = "import os,sys; sys.stdin.readline(); os.execve(sys.executable, [sys.executable, '-c', " \
           "'import sys; sys.stdin.readline()'], dict(os.environ, LOCAL_RANK='1', RANK='5'))"
    launcher = subprocess.Popen([sys.executable, "-c", f"import subprocess,sys; subprocess.run([sys.executable, '-c', "
                                 f"{code!r}])"], stdin=subprocess.PIPE, env=env, start_new_session=True)
    try:
        sampler = ProcessSampler()
        worker_pid = _wait_for_child(launcher.pid)
        # the child first execs into the waiting program (under load this takes a moment), then, on
        # "go", into the worker: wait for each exec by what the command line says, not by any change
        _wait(lambda: b"execve" in _cmdline(worker_pid))
        assert sampler.sample(launcher.pid)[0] == []
        assert launcher.stdin is not None
        launcher.stdin.write(b"go\n")
        launcher.stdin.flush()
        _wait(lambda: b"execve" not in _cmdline(worker_pid))
        workers, _ = sampler.sample(launcher.pid)
        assert [(w.pid, w.local_rank, w.rank) for w in workers] == [(worker_pid, 1, 5)]
    finally:
        kill_group(launcher)


def _wait_for_child(pid: int) -> int:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    _wait(lambda: bool(children.read_text().split()))
    return int(children.read_text().split()[0])


def _wait(cond: Callable[[], bool]) -> None:
    """Poll a condition on another process (not a sleep to make time pass)."""
    deadline = time.monotonic() + 30
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting on the child process"
        time.sleep(0.01)
