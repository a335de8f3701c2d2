"""The lifeline (``procs.lifeline``: ``PR_SET_PDEATHSIG``) on real processes: a child started by
neuron-watch is sent SIGTERM when the process that started it dies, however it dies (SIGKILL), and
never because a thread of that process ended (prctl(2): the signal follows the *thread* that forked
the child; a start from another thread gets no lifeline and says so)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from neuron_watch.node.procs import alive, start_in_new_group
from tests.fixtures.wait import wait_for, within

pytestmark = pytest.mark.integration

#: a child that says it is ready, then exits 0 at EOF on stdin, or 3 if SIGTERM came first
CHILD = ("import signal, sys\n"
         "signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))\n"
         "print('ready', flush=True)\n"
         "sys.stdin.read()\n")


def test_a_child_is_sent_sigterm_when_the_process_that_started_it_is_sigkilled(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    starter = subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess, sys, time\n"
         "from neuron_watch.node.procs import start_in_new_group\n"
         "child = start_in_new_group([sys.executable, '-c', 'import time; time.sleep(600)'], {}, "
         "stdin=subprocess.DEVNULL)\n"
         f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
         "time.sleep(600)\n"],
        start_new_session=True)
    child = 0
    try:
        wait_for("the starter's child", lambda: pid_file.exists() and pid_file.read_text(), within(60),
                 alive=starter)
        child = int(pid_file.read_text())
        os.kill(starter.pid, signal.SIGKILL)
        starter.wait()
        wait_for(f"the child {child} to end on its lifeline", lambda: not alive(child), within(60))
    finally:
        if child and alive(child):
            os.kill(child, signal.SIGKILL)
        if starter.poll() is None:
            starter.kill()
            starter.wait()


def test_a_child_started_from_a_thread_outlives_the_thread_and_the_missing_lifeline_is_said(
        caplog: pytest.LogCaptureFixture) -> None:
    started: list[subprocess.Popen[bytes]] = []
    native: list[int] = []

    def start() -> None:
        native.append(threading.get_native_id())
        started.append(start_in_new_group([sys.executable, "-c", CHILD], dict(os.environ), stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE))

    with caplog.at_level(logging.WARNING, logger="neuron_watch"):
        thread = threading.Thread(target=start, name="a-short-lived-thread")
        thread.start()
        thread.join()
    (child,) = started
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        # the thread's end is past once the kernel let it go (the signal, had there been one, was sent)
        wait_for("the thread's exit", lambda: not Path(f"/proc/self/task/{native[0]}").exists(), within(60))
        assert child.stdin is not None
        child.stdin.close()
        assert child.wait(60) == 0  # EOF, not SIGTERM (3): the thread's end did not stop it
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert [r for r in caplog.records if "a-short-lived-thread" in r.getMessage() and "no lifeline" in r.getMessage()]
