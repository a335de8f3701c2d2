"""Ctrl-C while an incident's evidence is being captured: the job stops (exit 130, nothing left
running) and the record still holds the hang -- its verdict, its incident, the report's cause and
status.json's label -- not the crash of the ranks our own stop ended.

The capture is made slow the way a host makes it slow: the kernel-log reader it runs (``dmesg``,
looked up on ``--tool-path``) takes long; this one says when it starts, so the signal lands inside
the capture, and it is bounded by the capture's own per-tool limit."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.fixtures.procs import NEURON_WATCH, TOY, alive, events, named, run_to_end, started, wait_until_gone

pytestmark = pytest.mark.process

SLOW_DMESG = """#!/bin/sh
# a kernel log reader that takes long (a large ring buffer, a slow console): says when it starts
echo $$ > "$(dirname "$0")/dmesg.started"
exec sleep 120
"""


def test_ctrl_c_during_a_capture_keeps_the_hang_in_the_record(tmp_path: Path, toy_env: dict[str, str]) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "dmesg").write_text(SLOW_DMESG)
    (tools / "dmesg").chmod(0o755)
    run_dir = tmp_path / "run"
    argv = [NEURON_WATCH, "--quiet", "--run-dir", str(run_dir), "--checkpoint-dir", str(tmp_path / "ckpt"),
            "--hang-timeout", "6", "--evidence-timeout", "30", "--tool-path", str(tools),
            "torchrun", "--nproc_per_node", "2", TOY, "--checkpoint-dir", str(tmp_path / "ckpt"), "--steps", "400",
            "--hang-at", "8", "--hang-rank", "1"]
    marker = tools / "dmesg.started"
    with started(argv, str(tmp_path), toy_env) as p:
        deadline = time.monotonic() + 240
        while not marker.exists():  # polls for the capture to reach the slow reader
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()[0][-3000:]
            time.sleep(0.05)
        # what the wrapper does with SIGINT (hex masks: ignored, blocked, caught), said if it is not 130
        dispositions = [ln for ln in Path(f"/proc/{p.pid}/status").read_text().splitlines()
                        if ln.startswith(("SigIgn", "SigBlk", "SigCgt"))]
        os.killpg(p.pid, signal.SIGINT)  # what Ctrl-C in the wrapper's terminal sends
        out, _ = p.communicate(timeout=120)
    assert p.returncode == 130, (dispositions, out[-3000:])
    evs = events(run_dir)
    hang = [e for e in named(evs, "verdict") if e["label"] == "collective_hang"]
    assert len(hang) == 1 and hang[0]["culprit"]["rank"] == 1, [e["event"] for e in evs]
    (incident,) = named(evs, "incident")
    assert incident["label"] == "collective_hang" and incident["interrupted_by"] == signal.SIGINT
    assert incident["nodes_without_evidence"] == []  # the node's evidence came before its stop
    assert incident["culprit"]["rank"] == 1
    finished = named(evs, "job_finished")[-1]
    assert finished["state"] == "interrupted" and finished["exit_code"] == 130 and finished["incidents"] == 1
    assert json.loads((run_dir / "status.json").read_text())["label"] == "collective_hang"
    code, report = run_to_end([NEURON_WATCH, "report", str(run_dir)], str(tmp_path), toy_env, run_dir, 60)
    assert code == 0 and "collective_hang x1" in report, report
    # the bundle holds what was captured, the slow reader's overrun said so
    manifest = json.loads((run_dir / "incidents" / "incident-1" / "manifest.json").read_text())
    assert manifest["nodes"], manifest
    assert wait_until_gone("NEURON_WATCH_RUN_DIR", str(run_dir), 10) == []
    reader = int(marker.read_text())
    assert not alive(reader), f"the slow dmesg (pid {reader}) survived"
