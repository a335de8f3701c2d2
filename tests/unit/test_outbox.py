"""The agent's outbox, without sockets."""

from __future__ import annotations

from neuron_watch.wire.outbox import Outbox
from neuron_watch.wire.protocol import Header, Kind


def _h() -> Header:
    return Header(kind=Kind.LINES, job="j", node="n", session=1, generation=0, seq=0)


def test_in_flight_bytes_follow_sends_acks_rewinds_and_drops() -> None:
    box = Outbox(max_lines=1000, max_msgs=1000, max_bytes=1000)
    for size in (100, 200, 300):
        box.add(_h(), b"x" * size, 1)
    assert box.in_flight == 0
    box.mark_sent()
    box.mark_sent()
    assert box.in_flight == 300
    assert box.ack(0) == 1 and box.in_flight == 200  # the first one, sent, acknowledged
    box.rewind()
    assert box.in_flight == 0 and box.unsent() is not None and box.unsent().header.seq == 1  # type: ignore[union-attr]
    box.mark_sent()
    box.add(_h(), b"x" * 600, 1)  # 200 + 300 + 600 > 1000 bytes: the oldest (sent) one goes, counted
    assert box.dropped_msgs == 1 and box.dropped_lines == 1 and box.in_flight == 0
    assert [p.header.seq for p in box._q] == [2, 3]


def test_the_byte_bound_keeps_at_least_the_newest_message() -> None:
    box = Outbox(max_lines=1000, max_msgs=1000, max_bytes=10)
    box.add(_h(), b"x" * 50, 3)
    assert len(box) == 1 and box.dropped_msgs == 0
    box.add(_h(), b"y" * 50, 2)
    assert len(box) == 1 and box.dropped_lines == 3 and box.lines == 2
