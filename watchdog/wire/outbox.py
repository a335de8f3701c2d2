"""The sending half of delivery: sequence numbers, a bounded buffer of what the coordinator has
not acknowledged, and the go-back-N cursor. Pure: no socket, no clock.

Every message gets the next sequence number and stays here until the coordinator acknowledges it
(:meth:`Outbox.ack`). While the coordinator is away messages accumulate; :meth:`Outbox.rewind`
sends everything unacknowledged again in order (the coordinator drops duplicates by sequence
number: :class:`~neuron_watch.wire.protocol.SequenceTracker` is the receiving half). The buffer is
bounded in lines, messages and bytes: beyond that the *oldest* messages are dropped and counted
(``dropped_lines``, ``dropped_msgs``), never silently. ``in_flight`` is what was sent and not yet
acknowledged, so the sender can keep a window.
"""

from __future__ import annotations

import collections
import dataclasses
from dataclasses import dataclass

from neuron_watch.wire.protocol import Header


@dataclass
class Pending:
    """One message held: its header (with its sequence number), its encoded body, its lines."""

    header: Header
    body: bytes
    lines: int


class Outbox:
    """Sequence numbers, the bounded unacknowledged buffer, and the go-back-N cursor. No I/O."""

    def __init__(self, max_lines: int, max_msgs: int, max_bytes: int = 1 << 62) -> None:
        self.max_lines = max_lines
        self.max_msgs = max_msgs
        self.max_bytes = max_bytes
        self.next_seq = 0
        self._q: collections.deque[Pending] = collections.deque()
        self._lines = 0
        self._bytes = 0
        self._cursor = 0  # index in _q of the next message to (re)send
        self.in_flight = 0  # bytes of the messages before the cursor (sent, not acknowledged)
        self.dropped_lines = 0
        self.dropped_msgs = 0

    def add(self, header: Header, body: bytes, lines: int) -> Header:
        """Queue a message; assigns ``header.seq``; drops the oldest messages beyond the bounds."""
        header = dataclasses.replace(header, seq=self.next_seq)
        self.next_seq += 1
        self._q.append(Pending(header, body, lines))
        self._lines += lines
        self._bytes += len(body)
        while len(self._q) > 1 and (len(self._q) > self.max_msgs or self._lines > self.max_lines
                                    or self._bytes > self.max_bytes):
            self.drop_oldest()
        return header

    def drop_oldest(self) -> None:
        """Give up the oldest message (counted)."""
        old = self._q.popleft()
        self._lines -= old.lines
        self._bytes -= len(old.body)
        self.dropped_msgs += 1
        self.dropped_lines += old.lines
        if self._cursor > 0:
            self._cursor -= 1
            self.in_flight -= len(old.body)

    @property
    def base(self) -> int:
        """Oldest sequence number still held (= next_seq when empty)."""
        return self._q[0].header.seq if self._q else self.next_seq

    def ack(self, seq: int) -> int:
        """Forget messages up to ``seq``; returns how many were released."""
        n = 0
        while self._q and self._q[0].header.seq <= seq:
            old = self._q.popleft()
            self._lines -= old.lines
            self._bytes -= len(old.body)
            if n < self._cursor:
                self.in_flight -= len(old.body)
            n += 1
        self._cursor = max(0, self._cursor - n)
        if self._cursor == 0:
            self.in_flight = 0
        return n

    def rewind(self) -> None:
        """Go back: the next :meth:`unsent` starts at the oldest unacknowledged message."""
        self._cursor = 0
        self.in_flight = 0

    def unsent(self) -> Pending | None:
        return self._q[self._cursor] if self._cursor < len(self._q) else None

    def mark_sent(self) -> None:
        self.in_flight += len(self._q[self._cursor].body)
        self._cursor += 1

    def __len__(self) -> int:
        return len(self._q)

    @property
    def lines(self) -> int:
        return self._lines
