"""``--metrics`` on the standalone coordinator (``neuron-watch coordinator``), a real process: served
while it waits for its nodes, gone when it stops; an address already taken costs only the metrics."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.fixtures.procs import NEURON_WATCH, free_port, kill_group

pytestmark = pytest.mark.integration


def _get(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            return str(resp.read().decode())
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


def _coordinator(tmp_path: Path, metrics_port: int) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURON_WATCH_")}
    env["NEURON_WATCH_SECRET"] = "0123456789abcdef0123456789abcdef"
    return subprocess.Popen(
        [NEURON_WATCH, "--run-dir", str(tmp_path / "run"), "--job-id", "solo-1", "--metrics",
         f"127.0.0.1:{metrics_port}", "coordinator", "--bind", f"127.0.0.1:{free_port()}", "--nodes", "1"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _wait_for_line(p: subprocess.Popen[str], needle: str) -> list[str]:
    """Read the coordinator's output until ``needle`` (its banner) or its end."""
    assert p.stdout is not None
    lines: list[str] = []
    for line in p.stdout:
        lines.append(line)
        if needle in line:
            return lines
    raise AssertionError("".join(lines))


def test_the_standalone_coordinator_serves_metrics_until_it_stops(tmp_path: Path) -> None:
    port = free_port()
    p = _coordinator(tmp_path, port)
    try:
        _wait_for_line(p, "neuron-watch coordinator for job solo-1")  # built, sinks attached
        text = _get(port)
        assert text is not None
        assert 'neuron_watch_job_info{job_id="solo-1"} 1.0' in text
        assert 'neuron_watch_job_state{neuron_watch_job_state="starting"} 1.0' in text
        os.killpg(p.pid, signal.SIGTERM)
        assert p.wait(30) == 128 + signal.SIGTERM
    finally:
        kill_group(p)
    with socket.socket() as s, pytest.raises(ConnectionRefusedError):
        s.connect(("127.0.0.1", port))


def test_a_metrics_address_in_use_is_a_warning_and_the_coordinator_serves_on(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        p = _coordinator(tmp_path, held.getsockname()[1])
        try:
            _wait_for_line(p, "neuron-watch coordinator for job solo-1")
            assert p.poll() is None  # still serving its nodes
            evs = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
            warned = [e for e in evs if e["event"] == "warning" and e.get("kind") == "metrics_unavailable"]
            assert len(warned) == 1 and "choose a free port" in warned[0]["message"]
            os.killpg(p.pid, signal.SIGTERM)
            assert p.wait(30) == 128 + signal.SIGTERM
        finally:
            kill_group(p)
