"""The job log kept by a writer process: merged.log and the tails off the judging thread.

A real writer process (``python -m neuron_watch.job.linewriter``) started as the composition root
starts it, fed real encoded batches; what the coordinator's side sees (keys, counts, sheds, tails)
and what the writer wrote are checked against each other, and its process is gone at the end.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from pathlib import Path
from typing import Any

import msgpack
import pytest

from neuron_watch.events import LogLine, RankKey
from neuron_watch.job.coordinator import Coordinator
from neuron_watch.job.endpoint import Counters
from neuron_watch.job.linewriter import BULK_HWM, LineWriter
from neuron_watch.node.agent_link import AgentLink, new_session
from neuron_watch.node.procs import alive, start_in_new_group, stop_group
from neuron_watch.runtime import line_writer
from neuron_watch.wire.protocol import Header, Kind, Lines, ProtocolError, decode_body, encode_body, lines_body

pytestmark = pytest.mark.integration

SECRET = b"a job secret of enough bytes 0123456789"
JOB = "job-7"


def batch(node: str, ranks: range, first: int, per_rank: int, width: int = 0) -> tuple[Header, Lines, bytes]:
    """A batch of ``node``: every rank of ``ranks`` printed ``per_rank`` lines numbered from ``first``."""
    now, wall = time.monotonic(), time.time()
    pad = "x" * width
    lines = [LogLine(RankKey(node, r), f"rank {r} line {first + i}{pad}", now, wall)
             for i in range(per_rank) for r in ranks]
    body = lines_body(lines, now, wall)
    h = Header(kind=Kind.LINES, job="j", node=node, session=1, generation=0, seq=0, mono=now, wall=wall)
    return h, body, encode_body(body)


def writer(run_dir: Path, told: list[tuple[str, dict[str, Any]]], tail_lines: int = 5) -> LineWriter:
    return LineWriter(str(run_dir), tail_lines, counters=Counters(),
                      tell=lambda kind, fields: told.append((kind, fields)), start=start_in_new_group, stop=stop_group)


def test_batches_reach_merged_log_and_the_tails_from_the_writer_and_its_process_is_reaped(tmp_path: Path) -> None:
    told: list[tuple[str, dict[str, Any]]] = []
    w = writer(tmp_path, told)
    pid = w.pid
    try:
        keys, n = [], 0
        for k in range(4):
            h, body, frame = batch("n1", range(8, 11), 3 * k, 3)
            got_keys, got_n = w.write(h, body, True, frame)
            keys.append(got_keys)
            n += got_n
        assert keys[0] == [RankKey("n1", 8), RankKey("n1", 9), RankKey("n1", 10)] and n == 4 * 3 * 3
        assert keys[0][0] is keys[3][0]  # one key object per rank: the judge finds its state by identity
        # asked of the writer, which serves the tail after the batches queued before it
        deadline = time.monotonic() + 30
        tail: list[str] = []
        while time.monotonic() < deadline and tail[-1:] != ["rank 9 line 11"]:
            tail = w.tail(RankKey("n1", 9), 4)
        assert tail == [f"rank 9 line {i}" for i in (8, 9, 10, 11)]
        assert w.tail(RankKey("n1", 9)) == [f"rank 9 line {i}" for i in range(7, 12)]  # tail_lines by default
        assert w.tail(RankKey("n2", 9)) == []
        assert alive(pid)
    finally:
        w.close()
    assert not alive(pid) and w.proc.returncode == 0
    merged = (tmp_path / "merged.log").read_text().splitlines()
    assert len(merged) == 36 and w.counters.merged_lines_shed == 0 and told == []
    assert merged[0].endswith(" n1/rank8 | rank 8 line 0") and merged[-1].endswith(" n1/rank10 | rank 10 line 11")


def test_closing_at_once_still_writes_every_batch_handed_over(tmp_path: Path) -> None:
    """The end of a job: the last batches are handed over and the writer is closed at once, before
    it has taken them; the close goes behind them, so every one is written."""
    w = writer(tmp_path, [])
    sent = 0
    try:
        for k in range(200):
            h, body, frame = batch("n0", range(8), k, 2)
            sent += w.write(h, body, True, frame)[1]
    finally:
        w.close()
    assert not alive(w.pid) and w.counters.merged_lines_shed == 0
    merged = (tmp_path / "merged.log").read_text().splitlines()
    assert len(merged) == sent == 3200 and merged[-1].endswith(" n0/rank7 | rank 7 line 200")


def test_a_writer_that_does_not_keep_up_makes_the_judging_side_shed_count_and_say_never_wait(tmp_path: Path) -> None:
    told: list[tuple[str, dict[str, Any]]] = []
    w = writer(tmp_path, told)
    pid = w.pid
    stopped = False
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not w.tail(RankKey("n0", 0)):  # the writer is up and serving
            h, body, frame = batch("n0", range(1), 0, 1)
            w.write(h, body, True, frame)
        os.kill(pid, signal.SIGSTOP)  # a writer that takes nothing more
        stopped = True
        # (a writer slow to start under load may have shed some of the one-line batches above: counted)
        shed_before = w.counters.merged_lines_shed
        sent = shed_batches = 0
        for k in range(6 * BULK_HWM):
            h, body, frame = batch("n0", range(64), k, 1, width=100)
            before = w.counters.merged_batches_shed
            _keys, n = w.write(h, body, True, frame)  # returns at once whether taken or shed
            sent += n
            shed_batches += w.counters.merged_batches_shed - before
        shed = w.counters.merged_lines_shed - shed_before
        assert shed_batches > 0 and shed == 64 * shed_batches and shed < sent
        w.flush()
        warned = [f for kind, f in told if kind == "warning" and f["kind"] == "merged_log_shed"]
        total = w.counters.merged_lines_shed
        assert len(warned) == 1 and warned[0]["lines"] == total and str(total) in warned[0]["message"]
        w.flush()  # said again only after SHED_REPEAT seconds
        assert len([1 for kind, _f in told if kind == "warning"]) == 1
        os.kill(pid, signal.SIGCONT)
        stopped = False
        while time.monotonic() < deadline + 60:  # once the writer has room again, the gap goes before this line
            before = w.counters.merged_lines_shed
            h, body, frame = batch("n0", range(1), 10**6, 1)
            sent += w.write(h, body, True, frame)[1]
            if w.counters.merged_lines_shed == before:
                break
            w.tail(RankKey("n0", 0))  # a round trip to the writer while it drains
        shed = w.counters.merged_lines_shed - shed_before
    finally:
        if stopped:
            os.kill(pid, signal.SIGCONT)
        w.close()
    assert not alive(pid)
    merged = (tmp_path / "merged.log").read_text().splitlines()
    big = [x for x in merged if " n0/rank" in x and ("xxxx" in x or "line 1000000" in x)]
    notes = [x for x in merged if " coordinator | neuron-watch: " in x]
    assert len(big) + shed == sent  # every line written or counted as shed
    # one note per gap: this one, and one for what a writer slow to start shed, if it did
    assert len(notes) == 1 + (shed_before > 0) and f": {shed} line(s) of the job's output are missing here" in notes[-1]
    assert merged[-1].endswith("rank 0 line 1000000") and merged[-2] == notes[-1]


def test_a_writer_that_dies_is_said_once_and_its_batches_are_shed_not_waited_for(tmp_path: Path) -> None:
    told: list[tuple[str, dict[str, Any]]] = []
    w = writer(tmp_path, told)
    try:
        os.kill(w.pid, signal.SIGKILL)
        w.proc.wait(30)  # reaped by its owner
        w.flush()
        w.flush()
        gone = [f for kind, f in told if kind == "warning" and f["kind"] == "merged_log_writer_gone"]
        assert len(gone) == 1 and gone[0]["exit_code"] == -signal.SIGKILL and str(w.pid) in gone[0]["message"]
        sent = 0
        for k in range(2 * BULK_HWM + 8):  # more than the queue holds: the rest is shed at once
            h, body, frame = batch("n0", range(4), k, 1)
            sent += w.write(h, body, True, frame)[1]
        assert 0 < w.counters.merged_lines_shed < sent
    finally:
        w.close()
    assert not alive(w.pid)


def test_a_coordinator_with_the_writer_logs_every_line_of_its_agents_and_reaps_the_writer(tmp_path: Path) -> None:
    """As every entry point builds it (runtime.line_writer): lines over a real socket reach
    merged.log through the writer, a tail is asked of it, and closing the coordinator reaps it."""
    run_dir = tmp_path / "coord"
    coord = Coordinator("127.0.0.1:0", SECRET, str(run_dir), job=JOB, job_log=line_writer)
    assert isinstance(coord.joblog, LineWriter)
    writer_pid = coord.joblog.pid
    link = AgentLink(coord.endpoint, SECRET, job=JOB, node="node1", session=new_session(time.time()))
    try:
        now, wall = time.monotonic(), time.time()
        for i in range(1000):
            link.add_line(LogLine(RankKey("node1", i % 2), f"step {i}", now, wall))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (coord.counters.lines == 1000 and len(link.outbox) == 0):
            link.tick(time.monotonic(), time.time())
            coord.poll(0.005)
            coord.tick(time.monotonic())
        assert coord.counters.lines == 1000
        tail: list[str] = []
        while time.monotonic() < deadline + 30 and tail[-1:] != ["step 999"]:
            tail = coord.tail(RankKey("node1", 1), 3)
        assert tail == ["step 995", "step 997", "step 999"]
        assert coord.summary(time.monotonic())["merged_lines_shed"] == 0
    finally:
        link.close()
        coord.close()
    assert not alive(writer_pid)
    texts = [ln.split(" | ", 1) for ln in (run_dir / "merged.log").read_text().splitlines()]
    assert [t for tag, t in texts if tag.endswith(" node1/rank0")] == [f"step {i}" for i in range(0, 1000, 2)]
    assert len(texts) == 1000


def test_merged_log_is_there_from_the_start_and_a_counted_line_reaches_it_when_the_writer_runs(tmp_path: Path) -> None:
    """merged.log exists from the coordinator's start, before its writer process runs or any line came
    (an operator's ``tail -f``, whoever lists the run dir). A line the coordinator counted (its
    summary, coordinator.json) is written by the writer process when that process runs: here it is
    stopped, as a writer not yet scheduled on a loaded machine is, so the count is there and the line
    not yet; continued, it writes it. (test_fuzz read merged.log as soon as the count said 1, and
    once found no file at all.)"""
    run_dir = tmp_path / "coord"
    coord = Coordinator("127.0.0.1:0", SECRET, str(run_dir), job=JOB, job_log=line_writer)
    assert isinstance(coord.joblog, LineWriter)
    writer_pid = coord.joblog.pid
    os.kill(writer_pid, signal.SIGSTOP)
    stopped = True
    merged = run_dir / "merged.log"
    link = AgentLink(coord.endpoint, SECRET, job=JOB, node="node1", session=new_session(time.time()))
    try:
        assert merged.read_text() == ""  # there, empty: no line yet
        link.add_line(LogLine(RankKey("node1", 0), "the first line", time.monotonic(), time.time()))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (coord.counters.lines == 1 and len(link.outbox) == 0):
            link.tick(time.monotonic(), time.time())
            coord.poll(0.005)
            coord.tick(time.monotonic())
        assert coord.counters.lines == 1 and coord.summary(time.monotonic())["lines"] == 1
        assert merged.read_text() == ""  # counted, not written: the writer has not run
        os.kill(writer_pid, signal.SIGCONT)
        stopped = False
        while time.monotonic() < deadline + 30 and not merged.read_text():
            coord.poll(0.05)
        assert merged.read_text().endswith(" node1/rank0 | the first line\n")
    finally:
        if stopped:
            os.kill(writer_pid, signal.SIGCONT)
        link.close()
        coord.close()
    assert not alive(writer_pid)


def test_a_batch_the_writer_cannot_decode_is_marked_counted_and_said(tmp_path: Path) -> None:
    """The judging thread decodes a light batch's judged ranks alone (``Lines.logged``): a fault in another
    rank's row is found by the writer, which decodes the whole frame. The batch is marked in merged.log where
    it is missing, counted (``merged_batches_unreadable``) and said; the next batch is written."""
    told: list[tuple[str, dict[str, Any]]] = []
    w = writer(tmp_path, told)
    now, wall = time.monotonic(), time.time()
    lines = [LogLine(RankKey("n0", r), f"rank {r} step 1", now, wall) for r in range(4)]
    b = msgpack.unpackb(encode_body(dataclasses.replace(lines_body(lines, now, wall), judged=(0,))))
    b[2][2][1] = 3  # rank 2 (not judged) says 3 lines, its text holds 1
    frame = msgpack.packb(b)
    with pytest.raises(ProtocolError):
        decode_body(Kind.LINES, frame)
    part = decode_body(Kind.LINES, frame, judged_only=True)  # what the judging thread took
    assert isinstance(part, Lines) and part.logged is not None
    h = Header(kind=Kind.LINES, job="j", node="n0", session=1, generation=0, seq=0, mono=now, wall=wall)
    try:
        assert w.write(h, part, True, frame)[1] == 6
        h2, body2, frame2 = batch("n0", range(2), 7, 1)
        w.write(h2, body2, True, frame2)
        deadline = time.monotonic() + 30
        # (the writer's report comes on the control channel, its tail answers too: a round trip each turn)
        while time.monotonic() < deadline and not (w.tail(RankKey("n0", 1)) and w.counters.merged_batches_unreadable):
            w.flush()
    finally:
        w.close()
    assert w.counters.merged_batches_unreadable == 1
    said = [f for kind, f in told if kind == "warning" and f["kind"] == "merged_log_unreadable"]
    assert len(said) == 1 and said[0]["node"] == "n0" and "rank 2" in said[0]["message"]
    merged = (tmp_path / "merged.log").read_text().splitlines()
    assert len(merged) == 3 and " coordinator | neuron-watch: a batch of n0 is missing here" in merged[0]
    assert merged[1].endswith(" n0/rank0 | rank 0 line 7") and merged[2].endswith(" n0/rank1 | rank 1 line 7")
