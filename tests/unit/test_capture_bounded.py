"""Bounded reads of rank logs (logread.py), the timeline built in one pass over them, and the capture
beside the agent's loop (``begin_capture``). Real files in a temp dir; no socket (a fake records what
would go out)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from neuron_watch.diagnosis import logread
from neuron_watch.diagnosis.kb import default_knowledge_base
from neuron_watch.events import EvidenceReport, StopReport
from neuron_watch.node.agent_link import AgentLink
from neuron_watch.outputs import timeline
from neuron_watch.wire.protocol import NO_VERDICT, CaptureEvidence, Launch, Stop
from tests.unit.test_agent_stop_background import FakeSocket, command, statuses


def test_tail_bytes_stops_at_its_byte_bound_and_begins_at_a_line(tmp_path: Path) -> None:
    p = tmp_path / "rank-0.log"
    p.write_bytes(b"a" * (3 << 20) + b"\n" + b"short\n" * 10)
    data, before = logread.tail_bytes(str(p), 1000, 1 << 20)
    assert data == b"short\n" * 10 and before == (3 << 20) + 1  # the cut head of the long line is left out
    data, before = logread.tail_bytes(str(p), 3, 1 << 20)
    assert data == b"short\nshort\nshort\n"
    q = tmp_path / "one-line.log"
    q.write_bytes(b"b" * (5 << 20))  # no newline at all: the last bytes, bounded
    data, before = logread.tail_bytes(str(q), 1000, 1 << 20)
    assert len(data) == 1 << 20 and before == 4 << 20


def test_iter_lines_reads_a_window_knows_its_first_line_and_cuts_long_lines(tmp_path: Path) -> None:
    p = tmp_path / "rank-0.log"
    lines = [f"line {i}" for i in range(100_000)]
    p.write_text("\n".join(lines) + "\n" + "x" * 100_000 + "\nlast\n")
    note = logread.ReadNote(str(p))
    got = list(logread.iter_lines(note, max_bytes=200_000))
    assert got[-1] == "last" and len(got[-2]) == logread.MAX_LINE and note.cut_lines == 1
    assert note.start > 0 and note.first_line is not None
    assert got[0] == lines[note.first_line - 1]  # the window begins at a whole line, numbered right
    whole = logread.ReadNote(str(p))
    assert len(list(logread.iter_lines(whole))) == 100_002 and whole.whole


def test_iter_lines_stops_at_its_deadline(tmp_path: Path) -> None:
    p = tmp_path / "rank-0.log"
    p.write_text("y\n" * (3 << 20))
    ticks = iter(range(100))
    note = logread.ReadNote(str(p))
    got = list(logread.iter_lines(note, deadline=2, clock=lambda: next(ticks)))
    assert 0 < len(got) < 3 << 20 and note.stopped_at is not None and note.to_dict()["unread_bytes"] > 0


def test_read_time_index_skips_torn_entries(tmp_path: Path) -> None:
    (tmp_path / "rank-0.times").write_text("10 100.5\n20 101.5\ngarbage\n30 10")
    assert logread.read_time_index(str(tmp_path / "rank-0.log")) == [(10, 100.5), (20, 101.5), (30, 10.0)]
    assert logread.read_time_index(str(tmp_path / "rank-9.log")) == []


EVENTS = [{"time": "2026-11-21T13:00:00.000Z", "event": "job_started", "generation": 0},
          {"time": "2026-11-21T13:10:00.000Z", "event": "incident", "generation": 0, "label": "collective_hang"}]
T0 = timeline.parse_time("2026-11-21T13:00:00Z") or 0.0


def _run(tmp_path: Path, lines: list[str], index: str = "") -> Path:
    run = tmp_path / "run"
    (run / "gen-0").mkdir(parents=True)
    (run / "gen-0" / "rank-0.log").write_text("".join(x + "\n" for x in lines))
    if index:
        (run / "gen-0" / "rank-0.times").write_text(index)
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    return run


def test_lines_without_stamps_are_dated_by_the_time_index(tmp_path: Path) -> None:
    """Rank output rarely carries its own stamps: its steps take the time their lines were written."""
    run = _run(tmp_path, [f"step {n} loss 1.0" for n in range(1, 5)],
               index=f"1 {T0 + 10}\n2 {T0 + 20}\n3 {T0 + 30}\n4 {T0 + 40}\n")
    trace = timeline.build_from_run_dir(run, default_knowledge_base())
    steps = [e for e in trace["traceEvents"] if e.get("cat") == "step"]
    assert [(e["ts"], e["dur"]) for e in steps] == [(10e6, 10e6), (20e6, 10e6), (30e6, 10e6)]
    (hang,) = [e for e in trace["traceEvents"] if e.get("cat") == "hang"]
    assert hang["args"]["since_last_progress_s"] == pytest.approx(600 - 40)


def test_a_log_of_many_steps_keeps_the_newest_events_and_counts_the_rest(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timeline, "MAX_RANK_EVENTS", 50)
    run = _run(tmp_path, [f"step {n} loss 1.0" for n in range(1, 202)])
    trace = timeline.build_from_run_dir(run, default_knowledge_base())
    steps = [e["args"]["step"] for e in trace["traceEvents"] if e.get("cat") == "step"]
    assert len(steps) <= 50 and steps[-1] == 201  # the newest kept
    kept = sum(1 for e in trace["traceEvents"] if e.get("tid") == 1 and e["ph"] != "M")
    assert trace["otherData"]["dropped_events"] == {"gen-0/rank-0.log": 200 + 1 - kept}  # 200 steps, 1 hang


def test_a_deadline_leaves_the_timeline_partial_and_says_which_logs(tmp_path: Path) -> None:
    run = _run(tmp_path, [f"step {n} loss 1.0" for n in range(1, 30_000)])
    (run / "gen-1").mkdir()
    (run / "gen-1" / "rank-0.log").write_text("step 1 loss 1.0\n" * 30_000)
    now = [0.0]

    def clock() -> float:
        now[0] += 0.001
        return now[0]

    trace = timeline.build_from_run_dir(run, default_knowledge_base(), deadline=0.005, clock=clock)
    other = trace["otherData"]
    # the newest generation first: it is read (in part), the older one not reached
    assert 0 < other["stopped_at_deadline"]["gen-1/rank-0.log"] < 30_000
    assert other["unread_logs"] == ["gen-0/rank-0.log"]


class CapturingNode:
    """A node whose capture the test finishes by hand."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.report: EvidenceReport | None = None

    def capture(self, incident: str, reason: str, verdict: Mapping[str, Any] = NO_VERDICT) -> EvidenceReport:
        raise AssertionError("the blocking capture must not be used")

    def begin_capture(self, incident: str, reason: str,
                      verdict: Mapping[str, Any] = NO_VERDICT) -> Callable[[], EvidenceReport | None]:
        self.calls.append(f"begin_capture {incident}")
        return lambda: self.report

    def stop(self, deadline: float, verdict: Mapping[str, Any] = NO_VERDICT) -> StopReport:
        self.calls.append("stop")
        return StopReport(rung="sigterm")

    def checkpoint(self) -> str:
        return ""

    def launch(self, generation: int, checkpoint: str) -> None:
        self.calls.append(f"launch {generation}")


def test_a_capture_runs_beside_the_loop_and_evidence_done_comes_when_it_ends() -> None:
    sock = FakeSocket()
    link = AgentLink("tcp://127.0.0.1:1", b"k" * 32, job="j", node="n1", session=5, socket=sock)
    node = CapturingNode()
    assert link.dispatch([command(CaptureEvidence("incident-1", "hang"), 0), command(Stop("incident-1", 5.0), 1),
                          command(Launch(1, ""), 2)], node, 0.0, 0.0) is None
    assert link.capture_running and node.calls == ["begin_capture incident-1"]
    for t in range(1, 20):  # the loop turns: nothing else is carried out, no evidence_done yet
        link.tick(float(t), float(t))
        assert link.dispatch([], node, float(t), float(t)) is None
    assert node.calls == ["begin_capture incident-1"] and "evidence_done" not in statuses(link)
    node.report = EvidenceReport(bundle="/run/incidents/incident-1/n1", seconds=19.0, missing=2)
    link.dispatch([], node, 20.0, 20.0)
    assert not link.capture_running
    assert node.calls == ["begin_capture incident-1", "stop", "launch 1"]  # after the capture, in order
    assert statuses(link)[-3:] == ["evidence_done", "stopped", "launched"]
