"""The guardian: a tiny process that outlives a wrapper that was SIGKILLed and cleans up after it.

The wrapper starts it (in a session of its own) with the read end of a pipe on stdin and keeps
the write end. A wrapper that exits normally writes ``b"bye"`` first. EOF without it means the
wrapper died without cleaning up: the guardian SIGTERMs everything carrying the job's marker,
waits until one deadline, SIGKILLs the rest, and exits.

    python -m neuron_watch.node.guardian MARKER GRACE_SECONDS
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

from neuron_watch.node.procs import protect, stop_everything


def start_guardian(marker: str, grace: float) -> tuple[subprocess.Popen[bytes], int]:
    """Start the guardian; returns it and the pipe's write end (close it only via :func:`release`)."""
    r, w = os.pipe()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURON_WATCH_INSTANCE")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "neuron_watch.node.guardian", marker, str(grace)],
        stdin=r,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    os.close(r)
    os.set_inheritable(w, False)
    protect(proc.pid)
    return proc, w


def release(proc: subprocess.Popen[bytes], write_fd: int, timeout: float = 5.0) -> None:
    """Tell the guardian we cleaned up ourselves, and reap it."""
    with contextlib.suppress(OSError):  # the guardian is already gone: nothing to tell
        os.write(write_fd, b"bye")
    os.close(write_fd)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main(argv: list[str]) -> int:
    marker, grace = argv[0], float(argv[1])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal ^C is for the wrapper, not for us
    data = b""
    while True:
        chunk = os.read(0, 64)
        if not chunk:
            break
        data += chunk
    if data.endswith(b"bye"):
        return 0
    result = stop_everything(marker, None, grace)
    sys.stderr.write(f"neuron-watch guardian: wrapper died; stopped its job ({result.rung})\n")
    return 0 if not result.survivors else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
