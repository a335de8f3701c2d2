"""The event stream's end: ``job_finished`` is the last event even when a node
reports lines it could not buffer after the end (the loss still counts in the summary), and
an events.jsonl deleted or rotated mid-run is made again instead of swallowing later events.
Real ZeroMQ on loopback, real files."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from neuron_watch.events import LauncherExit, LogLine, NodeStatus, RankKey
from neuron_watch.job.coordinator import Coordinator
from neuron_watch.outputs.eventlog import EventLog
from tests.integration.test_transport import JOB, SECRET, make_link, pump


def _events(path: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_no_agent_dropped_after_job_finished(tmp_path: Path) -> None:
    coord = Coordinator("127.0.0.1:0", SECRET, str(tmp_path / "coord"), job=JOB)
    link = make_link(coord.endpoint, batch_lines=10, max_lines=100)
    try:
        link.hello("h", 1, [0], time.monotonic(), time.time())
        pump([coord], [link], lambda: "node1" in coord.nodes)
        link.status(NodeStatus.FINISHED, time.monotonic(), time.time(), report=LauncherExit(0))  # the job's end
        pump([coord], [link], lambda: coord.exit_code == 0)
        for i in range(300):  # 200 lines overflow the agent's buffer after the end
            link.add_line(LogLine(RankKey(link.node, 0), f"late {i}", time.monotonic(), time.time()))
        link.status(NodeStatus.EXITED, time.monotonic(), time.time())
        pump([coord], [link], lambda: coord.nodes["node1"].reported_dropped_lines == 200)
        names = [e["event"] for e in _events(tmp_path / "coord" / "events.jsonl")]
        assert names[-1] == "job_finished" and "agent_dropped" not in names, names
        assert coord.summary(time.monotonic())["nodes"]["node1"]["agent_dropped_lines"] == 200  # still counted
    finally:
        link.close()
        coord.close()


def test_a_deleted_or_rotated_events_file_is_made_again(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    log = EventLog(str(path))
    try:
        log.emit("job_started", 0)
        os.rename(path, tmp_path / "events.jsonl.1")  # logrotate's rename
        log.emit("verdict", 0, label="healthy")
        path.unlink()  # an operator's rm
        log.emit("job_finished", 0, exit_code=0)
    finally:
        log.close()
    assert [e["event"] for e in _events(tmp_path / "events.jsonl.1")] == ["job_started"]
    assert [e["event"] for e in _events(path)] == ["job_finished"]
    assert len(log.history) == 3
