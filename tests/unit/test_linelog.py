"""The job's log writer (merged.log and the ranks' tails, in a thread of its own): it keeps order,
drops and counts (and says in merged.log) what arrives while it is ``queue_bytes`` behind,
without the offering side ever waiting, and bounds all ranks' tails together, counting what that
bound trims. A file stand-in whose write blocks until the test lets it go holds the writer behind."""

from __future__ import annotations

import threading
from pathlib import Path

from neuron_watch.events import RankKey
from neuron_watch.job.linelog import LineLog
from neuron_watch.wire.protocol import RankLines


class HeldFile:
    """merged.log in memory; ``hold`` makes the next write wait until ``release``."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.writing = threading.Event()
        self.go = threading.Event()
        self.go.set()
        self.closed = False

    def hold(self) -> None:
        self.go.clear()
        self.writing.clear()

    def write(self, text: str) -> None:
        self.writing.set()
        self.go.wait(60)
        self.texts.append(text)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def rows(rank: int, *texts: str) -> tuple[RankLines, ...]:
    return (RankLines(rank, len(texts), 0.0, 0.0, 0.0, "\n".join(texts)),)


def test_the_writer_prefixes_every_line_and_keeps_each_ranks_tail() -> None:
    f = HeldFile()
    log = LineLog(f, tail_lines=3, tail_chars=1 << 20, queue_bytes=1 << 20, wall=lambda: 0.0)
    try:
        for i in range(4):
            assert log.offer("node1", 1_700_000_000.0 + i, rows(1, f"a{i}", f"b{i}"), 6, 2)
        assert log.sync()
        out = "".join(f.texts).splitlines()
        assert len(out) == 8 and out[0].endswith(" node1/rank1 | a0") and out[-1].endswith(" node1/rank1 | b3")
        assert out[0].startswith("2023-11-14T22:13:20.000Z")
        assert log.tail(RankKey("node1", 1), 3) == ["b2", "a3", "b3"]
        assert log.counters.batches == 4 and log.counters.dropped_lines == 0
    finally:
        assert log.close()
    assert f.closed


def test_a_writer_behind_drops_counts_and_says_it_while_the_offering_side_never_waits() -> None:
    f = HeldFile()
    log = LineLog(f, tail_lines=10, tail_chars=1 << 20, queue_bytes=10, wall=lambda: 0.0)
    try:
        f.hold()
        assert log.offer("n", 0.0, rows(0, "first"), 5, 1)
        assert f.writing.wait(60)  # the writer holds the first batch, stuck in its write
        assert log.offer("n", 0.0, rows(0, "queued"), 6, 1)  # 6 of 10 bytes wait
        assert not log.offer("n", 0.0, rows(0, "x", "y"), 6, 2)  # 12 > 10: dropped, at once
        assert not log.offer("n", 0.0, rows(1, "z"), 5, 1)
        assert log.counters.dropped_batches == 2 and log.counters.dropped_lines == 3
        f.go.set()
        assert log.sync()
        text = "".join(f.texts)
        assert "neuron-watch: 3 line(s) of the job's output dropped here" in text
        assert " n/rank0 | queued" in text and "| x" not in text
        assert log.tail(RankKey("n", 0), 10) == ["first", "queued"]
        assert log.tail(RankKey("n", 1), 10) == []
    finally:
        f.go.set()
        log.close()


def test_all_tails_together_are_bounded_the_jobs_oldest_texts_go_first_and_are_counted() -> None:
    f = HeldFile()
    log = LineLog(f, tail_lines=100, tail_chars=20, queue_bytes=1 << 20)
    try:
        for i in range(3):  # 3 ranks x 2 batches of 5 characters: 30 > 20
            assert log.offer("n", 0.0, rows(i, f"old-{i}"), 5, 1)
        for i in range(3):
            assert log.offer("n", 0.0, rows(i, f"new-{i}"), 5, 1)
        assert log.sync()
        assert log.tail_sizes() == (4, 20)
        assert log.counters.tail_trimmed_lines == 2
        assert log.tail(RankKey("n", 0), 10) == ["new-0"] and log.tail(RankKey("n", 1), 10) == ["new-1"]
        assert log.tail(RankKey("n", 2), 10) == ["old-2", "new-2"]
        # the offered batches were all written whatever the tails forgot
        assert "".join(f.texts).count("\n") == 6
    finally:
        log.close()


def test_a_writer_that_cannot_finish_by_the_deadline_counts_what_it_held_as_dropped() -> None:
    f = HeldFile()
    log = LineLog(f, tail_lines=10, tail_chars=1 << 20, queue_bytes=1 << 20)
    f.hold()
    assert log.offer("n", 0.0, rows(0, "a"), 1, 1)
    assert f.writing.wait(60)
    assert log.offer("n", 0.0, rows(0, "b", "c"), 3, 2)
    assert not log.close(timeout=0.0)
    assert log.counters.dropped_lines == 2 and log.counters.dropped_batches == 1
    assert not log.offer("n", 0.0, rows(0, "d"), 1, 1)  # closed: counted, not queued
    f.go.set()


def test_a_merged_log_fault_told_by_the_writer_thread_is_an_event_of_the_coordinators_next_tick(tmp_path: Path) -> None:
    from neuron_watch.job.coordinator import Coordinator

    run = tmp_path / "run"
    (run / "merged.log").mkdir(parents=True)  # merged.log cannot be written: a directory
    c = Coordinator("127.0.0.1:0", b"s" * 32, str(run), job="j", announce=False)
    try:
        c.tick(0.5)  # the first tick, which tells faults from before the coordinator existed: none here
        assert c.log.offer("n", 0.0, rows(0, "x"), 1, 1) and c.log.sync()
        assert not [e for e in c.events.history if e["event"] == "watchdog_degraded"]  # not from the writer thread
        c.tick(1.0)
        told = [e for e in c.events.history if e["event"] == "watchdog_degraded"]
        assert len(told) == 1 and told[0]["path"].endswith("merged.log")
    finally:
        c.close()
