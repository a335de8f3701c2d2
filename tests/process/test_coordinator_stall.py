"""A stalled or lost coordinator, a slow stop, a lost node; a stop that never blocks the loop.

Real 2-node torchrun jobs (one wrapper per node on this machine, node 0 hosting the coordinator):
a coordinator paused with SIGSTOP for longer than ``--coordinator-silence`` does not cost a
healthy job anything; a stop whose upload goes to an S3 endpoint that is down does not freeze the
loop (status.json keeps being rewritten); a node whose wrapper is killed is not relaunched onto.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.procs import (
    NEURON_WATCH,
    STEP_RANKS,
    TOY,
    events,
    force_cleanup,
    free_port,
    hosted_coordinator_pid,
    named,
    started,
    wait_until_gone,
)
from tests.fixtures.s3 import RcloneServer, rclone_binary
from tests.fixtures.wait import wait_for, within
from tests.process.test_multinode import NPROC, job, out, wait_all

pytestmark = pytest.mark.process


def _last_step(log: Path) -> int:
    try:
        steps = re.findall(r"step (\d+) loss", log.read_text(errors="replace"))
    except OSError:
        return -1
    return int(steps[-1]) if steps else -1


def _written_events(run_dir: Path) -> list[dict[str, Any]]:
    """The run's events written so far (a line being written is read at the next poll)."""
    try:
        text = (run_dir / "events.jsonl").read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines()]


def test_a_paused_coordinator_costs_a_healthy_two_node_job_nothing(tmp_path: Path, toy_env: dict[str, str]) -> None:
    # --coordinator-silence 3 stands for the old 30 s limit: the pause below outlasts it (node 1 says
    # the coordinator is lost) and outlasts the coordinator's own pause detection (5 s). The ranks print
    # a step line every 0.1 s until the test has seen every node say what it saw after the pause (a job
    # of fixed length could end before a loaded host's nodes said it); then they say "training done".
    # One rank a node, torch-free ranks under the real torchrun: the pause, its notice and the job's
    # going on are the nodes' and the coordinator's, not torch's.
    seen = tmp_path / "seen"
    with job(tmp_path, toy_env, 2, [], ["--coordinator-silence", "3", "--hang-timeout", "8"], nproc=1,
             rank_cmd=[STEP_RANKS, "steady", "600", "--until", str(seen)]) as nodes:
        (p0, run0), (p1, run1) = nodes
        node1_rank = run1 / "gen-0" / "rank-1.log"
        wait_for("node 1's ranks to train", lambda: _last_step(node1_rank) >= 20, within(180), alive=p1)
        # the coordinator's loop turns (it has judged the ranks' progress): a pause is a jump of that loop.
        # These ranks print their first step well before a loaded host has started the coordinator's process.
        wait_for("the coordinator to see the job progress", lambda: [
            e for e in _written_events(run0) if e["event"] == "progress"], within(180), alive=p0)
        # node 0 paused as a suspended VM pauses it: its wrapper (node 0's agent) and the job's
        # coordinator, a process of its own (docs/multinode.md, "The coordinator's own process")
        coordinator = hosted_coordinator_pid(run0)
        assert coordinator is not None, out(tmp_path, 0)
        # (a coordinator slow to start, its own process on a loaded host, may have been called lost already)
        lost_before = (tmp_path / "node1.out").read_text().count("lost the coordinator")
        for pid in (p0.pid, coordinator):
            os.kill(pid, signal.SIGSTOP)
        try:
            wait_for("node 1 to say the coordinator is lost",
                     lambda: (tmp_path / "node1.out").read_text().count("lost the coordinator") > lost_before,
                     within(60), alive=p1)
            paused_at = _last_step(node1_rank)
            # the job trains on while its coordinator is away (node 1's ranks, and node 0's, whose
            # output goes to files the paused wrapper reads later)
            wait_for("node 1's ranks to train on", lambda: _last_step(node1_rank) >= paused_at + 60, within(120),
                     alive=p1)
            assert p1.poll() is None, out(tmp_path, 1)
        finally:
            for pid in (coordinator, p0.pid):
                os.kill(pid, signal.SIGCONT)
        # the job trains on after the pause while both nodes say what they saw
        resumed_at = _last_step(node1_rank)
        wait_for("node 1 to say the coordinator answers again",
                 lambda: "answers again" in (tmp_path / "node1.out").read_text(), within(120), alive=p1)
        wait_for("node 0's agent to re-baseline", lambda: "was not running for" in (tmp_path / "node0.out").read_text(),
                 within(120), alive=p0)
        wait_for("the coordinator to notice its own pause", lambda: [
            e for e in _written_events(run0) if e.get("kind") == "coordinator_paused"], within(120), alive=p0)
        wait_for("node 1's ranks to train on after the pause", lambda: _last_step(node1_rank) >= resumed_at + 20,
                 within(120), alive=p1)
        seen.touch()
        codes = wait_all(nodes, 300)
    assert codes == [0, 0], out(tmp_path, 0) + out(tmp_path, 1)
    evs = events(run0)
    assert not named(evs, "restart") and not named(evs, "incident")
    assert named(evs, "job_finished")[0]["exit_code"] == 0
    paused = [e for e in named(evs, "warning") if e.get("kind") == "coordinator_paused"]
    assert paused, "the coordinator did not notice its own pause"
    assert "answers again" in out(tmp_path, 1)
    assert "was not running for" in out(tmp_path, 0)  # node 0's agent re-baselined too
    for run_dir in (run0, run1):
        assert wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 15) == []


def test_a_node_whose_wrapper_is_killed_is_not_relaunched_onto(tmp_path: Path, toy_env: dict[str, str]) -> None:
    # --coordinator-loss-timeout: how long the coordinator waits for the killed node to answer the
    # stop before it ends the job; a dead node never answers, so any wait shows the same
    # one rank a node: the killed wrapper and the relaunch not made are the nodes'
    with job(tmp_path, toy_env, 2, ["--steps", "100000", "--pg-timeout", "20"],
             ["--coordinator-loss-timeout", "5"], nproc=1) as nodes:
        (p0, run0), (p1, run1) = nodes
        wait_for("node 1's ranks to train", lambda: _last_step(run1 / "gen-0" / "rank-1.log") >= 5, within(180),
                 alive=p1)
        # the premise: node 1 joined the coordinator before it is lost (its ranks train as soon as
        # torchrun's rendezvous completes, which on a loaded host can be before its hello is heard;
        # a node never heard is another scenario: tests/unit/test_recovery_interrupt.py)
        wait_for("the coordinator to hear node 1", lambda: any(
            e.get("node") == "n1" for e in _written_events(run0) if e["event"] == "node_joined"), within(120), alive=p1)
        os.kill(p1.pid, signal.SIGKILL)  # node 1's wrapper only: its guardian stops its ranks
        p1.wait(30)
        code = p0.wait(240)
    console = out(tmp_path, 0)
    assert code == 3, console  # ExitCode.UNOBSERVED: the job ends, it does not wait on a dead node
    assert "not relaunching generation 1: node(s) n1" in console
    evs = events(run0)
    assert not named(evs, "restart")
    (gave_up,) = named(evs, "gave_up")
    assert "n1" in gave_up["reason"] and gave_up["exit_code"] == 3
    assert named(evs, "job_finished")[0]["exit_code"] == 3
    lost = [e for e in named(evs, "warning") if e.get("kind") == "node_lost"]
    assert lost and lost[0]["nodes"] == ["n1"]
    for run_dir in (run0, run1):
        assert wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 15) == []


def _unix(iso: str) -> float:
    return datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _status_stamp(run_dir: Path) -> float | None:
    try:
        return float(json.loads((run_dir / "status.json").read_text())["updated_unix"])
    except (OSError, ValueError, KeyError):
        return None


def test_a_stop_whose_upload_hangs_on_a_dead_s3_does_not_freeze_the_loop(tmp_path: Path,
                                                                         toy_env: dict[str, str]) -> None:
    """S3 is down (nothing listens) while the stop uploads the bundle: the stop runs beside the loop,
    which keeps rewriting status.json; S3 comes back before the end and the retry at exit lands it.
    Its retries (until their attempts or --upload-timeout run out) span several of status.json's
    one-second rewrites."""
    server = RcloneServer(rclone_binary(), tmp_path / "s3data", port=free_port())
    run_dir, ckpt = tmp_path / "run", tmp_path / "ckpt"
    env = dict(toy_env, **server.endpoint.env(), NEURON_WATCH_NODE="trn-a")
    argv = [NEURON_WATCH, "--quiet", "--job-id", "s3down", "--run-dir", str(run_dir), "--checkpoint-dir", str(ckpt),
            "--hang-timeout", "5", "--upload-timeout", "6", "--artifacts", "s3://incidents/t",
            "torchrun", "--nproc_per_node", str(NPROC), TOY, "--checkpoint-dir", str(ckpt), "--steps", "12",
            "--hang-at", "7", "--hang-rank", "1"]
    try:
        with started(argv, str(tmp_path), env) as p:
            def stop_sent() -> bool:
                evs = events(run_dir) if (run_dir / "events.jsonl").exists() else []
                return any(e.get("command") == "stop" for e in named(evs, "command"))

            wait_for("the stop command", stop_sent, within(240), alive=p)
            stamps: set[float] = set()

            def stopped() -> list[dict[str, object]]:
                stamp = _status_stamp(run_dir)  # read first: a stamp taken before the stop ended
                if stamp is not None:
                    stamps.add(stamp)
                return named(events(run_dir), "stopped")

            (ended,) = wait_for("the stop to end (its upload bounded by --upload-timeout)", stopped, within(120),
                                alive=p)
            (stop_cmd,) = [e for e in named(events(run_dir), "command") if e.get("command") == "stop"]
            # the ranks were stopped `seconds` after the command; the upload ran from then on
            upload_began = _unix(stop_cmd["time"]) + float(ended["seconds"])
            during_upload = [t for t in stamps if t > upload_began + 1.0]
            assert during_upload, f"status.json not rewritten during the upload: {sorted(stamps)}, {upload_began}"
            (tmp_path / "s3data" / "incidents").mkdir(parents=True)
            server.start()  # S3 is back: what failed is retried at exit
            try:
                output, _ = p.communicate(timeout=400)
            finally:
                server.stop()
    finally:
        force_cleanup(str(run_dir))
    assert p.returncode == 0, output[-3000:]
    evs = events(run_dir)
    (stopped,) = named(evs, "stopped")
    assert stopped["answered"] is True
    uploads = named(evs, "upload")
    assert uploads[0]["ok"] is False  # during the stop: the endpoint was down
    assert uploads[-1].get("retry_at_exit") and uploads[-1]["ok"] is True, uploads
    assert len(named(evs, "restart")) == 1 and named(evs, "job_finished")[0]["exit_code"] == 0
    assert wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 15) == []
    with contextlib.suppress(ProcessLookupError):
        assert server.proc is None or server.proc.poll() is not None


def test_a_console_nobody_reads_does_not_stall_the_watchdog(tmp_path: Path, toy_env: dict[str, str]) -> None:
    """The wrapper's stdout and stderr are a pipe that nobody reads (a stalled ssh, Ctrl-S) while it
    echoes every rank line: the job still finishes and the wrapper exits; the console lines that
    did not fit are counted (a ``console_dropped`` warning), not waited for."""
    run_dir = tmp_path / "run"
    script = tmp_path / "chatty.py"  # a rank that prints 2 MB fast (more than a pipe and our queue hold)
    script.write_text("import os\nr = os.environ['RANK']\n"
                      "for i in range(20000):\n    print(f'step {i} loss 0.5 rank {r} ' + 'x' * 40)\n"
                      "print('training done', flush=True)\n")
    argv = [NEURON_WATCH, "--job-id", "stuckpipe", "--run-dir", str(run_dir),
            "torchrun", "--nproc_per_node", str(NPROC), str(script)]
    p = subprocess.Popen(argv, cwd=tmp_path, env=toy_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True)
    try:
        code = p.wait(300)  # nobody reads p.stdout until the wrapper has exited
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        assert p.stdout is not None
        p.stdout.close()
        force_cleanup(str(run_dir))
    assert code == 0
    evs = events(run_dir)
    assert named(evs, "job_finished")[0]["exit_code"] == 0 and not named(evs, "restart")
    (dropped,) = [e for e in named(evs, "warning") if e.get("kind") == "console_dropped"]
    assert dropped["lines"] > 0
    assert wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 15) == []
