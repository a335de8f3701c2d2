"""`neuron-watch status --once --json` on a live 2-rank run: a compiling rank shows as compiling and
the rank waiting for it as waiting. Real torchrun (CPU) under the real supervisor."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.mqtt import pid_alive
from tests.fixtures.procs import toy_environment

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]


def status_once(run_dir: Path) -> tuple[int, dict[str, Any] | None]:
    p = subprocess.run([sys.executable, "-m", "neuron_watch.cli", "status", str(run_dir), "--once", "--json"],
                       capture_output=True, text=True, timeout=60)
    try:
        return p.returncode, json.loads(p.stdout)
    except json.JSONDecodeError:
        return p.returncode, None


def test_status_shows_compiling_and_waiting_ranks_of_a_live_run(tmp_path: Path) -> None:
    run_dir, ckpt = tmp_path / "run", tmp_path / "ckpt"
    argv = [sys.executable, "-m", "neuron_watch.cli", "--quiet", "--run-dir", str(run_dir),
            "torchrun", "--standalone", "--nproc_per_node", "2", str(ROOT / "examples/toy/train.py"),
            "--steps", "6", "--checkpoint-dir", str(ckpt), "--compile-at", "3", "--compile-rank", "0",
            "--compile-seconds", "60", "--rx-warn-every", "1"]
    # the tests' toy environment: one thread per rank and the stand-in compiler at a quarter of a
    # core, whose CPU time still grows (all the status reads); this one runs until the test sees it
    env = toy_environment()
    job = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    seen: list[dict[str, Any]] = []
    rank_pids: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and job.poll() is None:
            code, view = status_once(run_dir)
            if view is not None and view["ranks"]:
                seen.append(view)
                rank_pids |= {r["pid"] for r in view["ranks"] if isinstance(r["pid"], int)}
                states = {r["rank"]: r["state"] for r in view["ranks"]}
                if states == {0: "compiling", 1: "waiting"}:
                    assert code == 0 and view["observed"] and view["state"] == "running"
                    assert view["ranks"][0]["compile_seconds"] > 0
                    break
            time.sleep(0.5)  # polling a live job's state with a deadline, not making time pass
        else:
            pytest.fail(f"never saw rank 0 compiling and rank 1 waiting; last views: {seen[-3:]}")
    finally:
        # The supervisor forwards SIGTERM and stops every rank within its deadline.
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGTERM)
        try:
            job.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    assert not pid_alive(job.pid)
    assert rank_pids and not any(pid_alive(p) for p in rank_pids)
