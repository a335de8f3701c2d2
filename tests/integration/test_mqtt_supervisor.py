"""End to end: `neuron-watch --mqtt URL torchrun ...` on the toy job with a hang and a restart.

A subscriber on a real mosquitto must receive every event of events.jsonl, in the same order.
Runs a real torchrun (2 ranks, CPU), so it is the one expensive test of the live view.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.mqtt import Mosquitto, pid_alive

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]


def test_every_event_of_a_hang_and_restart_reaches_the_subscriber(
    mqtt_broker: Mosquitto, mqtt_recorder: Any, tmp_path: Path
) -> None:
    rec = mqtt_recorder(mqtt_broker, "nwtest/#")
    run_dir, ckpt = tmp_path / "run", tmp_path / "ckpt"
    argv = [sys.executable, "-m", "neuron_watch.cli", "--quiet", "--run-dir", str(run_dir), "--job-id", "e2e",
            "--mqtt", mqtt_broker.url, "--hang-timeout", "5", "--max-restarts", "1",
            "--checkpoint-dir", str(ckpt),
            "torchrun", "--standalone", "--nproc_per_node", "2", str(ROOT / "examples/toy/train.py"),
            "--steps", "8", "--checkpoint-dir", str(ckpt), "--checkpoint-every", "2",
            "--hang-at", "5", "--hang-rank", "1"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURON_WATCH_")}
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        _out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert not pid_alive(proc.pid)

    written = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    names = [e["event"] for e in written]
    assert {"job_started", "verdict", "incident", "restart", "job_finished"} <= set(names), err.decode()[-2000:]

    def received() -> list[dict[str, Any]]:
        seen: set[bytes] = set()
        out = []
        for topic, payload, _r in rec.snapshot():
            if topic.startswith("nwtest/e2e/") and not topic.endswith("/state") and payload not in seen:
                seen.add(payload)
                out.append(json.loads(payload))
        return out

    assert rec.wait_for(lambda _m: len(received()) >= len(written), timeout=30)
    got = received()
    assert [e["event"] for e in got] == names
    assert [e["time"] for e in got] == [e["time"] for e in written]
    assert json.loads([p for t, p, _r in rec.snapshot() if t == "nwtest/e2e/state"][-1])["state"] == "finished"
