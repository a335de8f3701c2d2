"""The operator's shell must not end or orphan a job. Real torchrun jobs (toy, CPU, gloo) under a real
``nohup``, a real pseudo-terminal that is closed, a SIGTERM during start-up, and a ``kill -9`` of
the wrapper together with its guardian. Each asserts how the job ended and that no pid survives."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import shutil
import signal
import subprocess
import termios
import time
from pathlib import Path

import pytest

from tests.fixtures.procs import (
    NEURON_WATCH,
    STEP_RANKS,
    events,
    force_cleanup,
    kill_group,
    named,
    pids_with_env,
    started,
    wait_until_gone,
)

pytestmark = pytest.mark.process


def read_until(p: subprocess.Popen[str], needle: str, timeout: float = 120.0) -> str:
    """Lines of ``p``'s output until one holds ``needle`` (fails at the deadline or at EOF)."""
    assert p.stdout is not None
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        seen.append(line)
        if needle in line:
            return "".join(seen)
    raise AssertionError(f"{needle!r} never printed:\n" + "".join(seen[-40:]))


def job(run_dir: Path, seconds: float) -> list[str]:
    """A 2-rank job under the real torchrun whose ranks print a step line every 0.1 s for ``seconds`` (torch-free:
    the subject is how the wrapper, torchrun and the ranks take signals and a closed terminal, not torch)."""
    return ["--run-dir", str(run_dir), "torchrun", "--nproc_per_node", "2", STEP_RANKS, "steady", str(seconds)]


def test_nohup_keeps_sighup_ignored_and_the_job_finishes(tmp_path: Path, toy_env: dict[str, str]) -> None:
    nohup = shutil.which("nohup")
    assert nohup, "coreutils nohup"
    run_dir = tmp_path / "run"
    argv = [nohup, NEURON_WATCH, *job(run_dir, 6)]
    try:
        with started(argv, str(tmp_path), toy_env) as p:
            head = read_until(p, "step 3 ")
            os.kill(p.pid, signal.SIGHUP)  # nohup exec'd neuron-watch: same pid
            rest, _ = p.communicate(timeout=240)
    finally:
        force_cleanup(str(run_dir))
    assert not pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir))
    assert p.returncode == 0, (head + rest)[-3000:]
    evs = events(run_dir)
    assert named(evs, "job_finished")[-1]["state"] == "finished"
    assert not [e for e in evs if e["event"] == "command" and e.get("command") == "stop"]
    assert "received SIGHUP" not in head + rest


def test_a_closed_terminal_ends_the_job_cleanly_with_its_events(tmp_path: Path, toy_env: dict[str, str]) -> None:
    """The wrapper runs on a pty as its controlling terminal; closing the master is a terminal window
    closed: SIGHUP to the session leader, then EIO on every write to the terminal."""
    run_dir = tmp_path / "run"
    master, slave = pty.openpty()

    def controlling_tty() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    p = subprocess.Popen([NEURON_WATCH, *job(run_dir, 100)], cwd=tmp_path, env=toy_env,
                         stdin=slave, stdout=slave, stderr=slave, start_new_session=True, preexec_fn=controlling_tty)
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 120
        while b"step 3 " not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                with contextlib.suppress(OSError):
                    seen += os.read(master, 65536)
        assert b"step 3 " in seen, seen[-3000:].decode(errors="replace")
        os.close(master)  # the terminal is gone
        master = -1
        code = p.wait(timeout=120)
    finally:
        if master >= 0:
            os.close(master)
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        force_cleanup(str(run_dir))
    assert not wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 45)
    assert code == 128 + signal.SIGHUP, (code, (run_dir / "events.jsonl").read_text()[-2000:])
    evs = events(run_dir)
    (fin,) = named(evs, "job_finished")
    assert fin["state"] == "interrupted" and fin["exit_code"] == 128 + signal.SIGHUP, evs[-3:]
    # after it, at most the count of console lines the closed terminal could not take (nbconsole)
    after = evs[evs.index(fin) + 1 :]
    assert all(e["event"] == "warning" and e.get("kind") == "console_dropped" for e in after), after


def test_sigterm_during_start_up_ends_with_job_finished(tmp_path: Path, toy_env: dict[str, str]) -> None:
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, *job(run_dir, 100)]
    try:
        with started(argv, str(tmp_path), toy_env) as p:
            head = read_until(p, "liveness:")  # signal handlers are in place; torchrun's parser still runs
            t0 = time.monotonic()
            p.send_signal(signal.SIGTERM)
            rest, _ = p.communicate(timeout=120)
            took = time.monotonic() - t0
    finally:
        force_cleanup(str(run_dir))
    print(f"SIGTERM during start-up: exit after {took:.1f}s")
    assert not wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 10)
    assert p.returncode == 128 + signal.SIGTERM, (head + rest)[-3000:]
    evs = events(run_dir)
    assert evs[-1]["event"] == "job_finished" and evs[-1]["state"] == "interrupted", evs[-3:]
    # the stop reached our own node (not a broadcast to nobody followed by the deadline's wait)
    stops = [e for e in evs if e["event"] == "command" and e.get("command") == "stop"]
    assert all(s["nodes"] for s in stops), stops


@pytest.mark.timeout(240)
def test_a_second_ctrl_c_kills_a_job_that_ignores_the_first_at_once_and_reaps_every_process(
        tmp_path: Path, toy_env: dict[str, str]) -> None:
    """A user's Ctrl-C stops the job within --stop-timeout (SIGINT forwarded, then SIGKILL); ranks whose own
    handler keeps them from ending hold that whole deadline (600 s here). A second Ctrl-C, as torchrun's and
    most tools' does, cuts it short: SIGKILL now, every process reaped, exit 130. Before, the second was
    ignored and the stop waited out the deadline (the communicate below timed out)."""
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--stop-timeout", "600", "--no-prewarm", "--no-rank-probe", *job(run_dir, 100),
            "--deaf", "1"]
    # as a terminal's foreground job: SIGINT at its default (a test runner may start us with it ignored,
    # which neuron-watch keeps ignored, as under nohup)
    p = subprocess.Popen(argv, cwd=tmp_path, env=toy_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        head = read_until(p, "start: job")  # the coordinator is up (not the stop of a start-up)
        head += read_until(p, " loss ")  # the ranks step (torch-free, they may be steps ahead of that line)
        p.send_signal(signal.SIGINT)
        head += read_until(p, "Ctrl-C again to kill them at once")
        p.send_signal(signal.SIGINT)
        rest, _ = p.communicate(timeout=120)
    finally:
        kill_group(p)
        force_cleanup(str(run_dir))
    out = head + rest
    assert not wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 10)
    assert p.returncode == 128 + signal.SIGINT, out[-3000:]
    assert "received SIGINT again: killing the job's processes now" in out, out[-3000:]
    evs = events(run_dir)
    (stopped,) = [e for e in named(evs, "node_status") if e["state"] == "stopped"]
    rung, seconds = stopped["detail"].split(", ")  # "sigkill, 0.1s"
    assert rung == "sigkill" and float(seconds.rstrip("s")) < 600, stopped  # SIGKILL before the deadline
    assert evs[-1]["event"] == "job_finished" and evs[-1]["state"] == "interrupted", evs[-3:]


def _guardian_of(pid: int) -> int:
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
            cmd = Path(f"/proc/{d}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[stat.rfind(")") + 2 :].split()[1]) == pid and b"neuron_watch.node.guardian" in cmd:
            return int(d)
    raise AssertionError(f"no guardian under {pid}")


def test_killing_wrapper_and_guardian_together_leaves_no_orphans(tmp_path: Path, toy_env: dict[str, str]) -> None:
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, *job(run_dir, 200)]
    try:
        with started(argv, str(tmp_path), toy_env) as p:
            read_until(p, "step 2 ")
            ranks = pids_with_env("NEURON_WATCH_RUN_DIR", str(run_dir))
            assert len(ranks) >= 3, ranks  # torchrun and its two workers
            guardian = _guardian_of(p.pid)
            os.kill(guardian, signal.SIGKILL)
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
            # torchrun got SIGTERM from the kernel (its lifeline) and stops its workers itself
            left = wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 60)
            survivors = {pid: _signal_state(pid) for pid in left}  # read before the cleanup kills them
    finally:
        force_cleanup(str(run_dir))
    assert not left, survivors


def _signal_state(pid: int) -> str:
    """What a survivor is and what it does with signals: its command, parent, state, and its pending,
    blocked, ignored and caught signal masks (a SIGTERM that never arrived, or one still pending)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:160]
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return "gone"
    keep = ("State", "PPid", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")
    return cmd + " | " + " ".join(line.replace("\t", "") for line in status.splitlines() if line.startswith(keep))
